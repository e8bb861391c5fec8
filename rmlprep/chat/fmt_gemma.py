"""Gemma family: Gemma 1/2 and Gemma 3 (``<start_of_turn>``), Gemma 4 (``<|turn>``).

Worked example (``gemma3``, ``[system "Be brief.", user "Hi", assistant "Hello"]``)::

    <bos><start_of_turn>user\\n               template         mask 0
    Be brief.\\n\\nHi<end_of_turn>\\n          system, user     0
    <start_of_turn>model\\n                   template (generation prompt)   0
    Hello<end_of_turn>                        assistant        1
    \\n                                       template         0

Worked example (``gemma4``, ``[user "Weather?", assistant calling get_weather(city="Paris"),
tool "sunny", assistant "Sunny."]``, no tools given)::

    <bos><|turn>user\\nWeather?<turn|>\\n<|turn>model\\n                       template, user  0
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><|tool_response>  assistant  1
    response:get_weather{value:<|"|>sunny<|"|>}<tool_response|>                tool       0
    Sunny.<turn|>                                                               assistant  1
    \\n                                                                         template   0
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ChatFormatError
from .base import ALL_ROLES, PARTS_REFUSED, ChatFormat, alternate
from .messages import Conversation
from .segments import Out

__all__ = ["FORMATS"]

BOS = "<bos>"
SOT, EOT = "<start_of_turn>", "<end_of_turn>"


def _gemma(conv: Conversation, gen: bool, *, system_ok: bool, name: str) -> Out:
    msgs = conv.messages
    start = 0
    system = None
    if msgs[0].role == "system":
        if not system_ok:
            raise ChatFormatError(f"message 0 is a system message, which {name} does not support (Gemma 1/2 "
                                  "templates refuse it; use gemma3, or fold it into the first user message)")
        m0 = msgs[0]
        if m0.parts is not None and len(m0.parts) != 1:
            raise ChatFormatError(f"message 0 (system): {name}'s template writes only the first part of a system "
                                  "message given as parts; give one text")
        system, start = m0.text, 1
        if len(msgs) == 1:
            raise ChatFormatError(f"message 0 is a system message with no user message after it ({name}'s template "
                                  "would write only BOS)")
    alternate(msgs, name, start=start)
    o = Out()
    o.t(BOS)
    for j, m in enumerate(msgs[start:]):
        role = "model" if m.role == "assistant" else m.role
        o.t(f"{SOT}{role}\n")
        if j == 0 and system is not None:
            o.c(system, "system")
            o.t("\n\n")
        # Gemma 3 trims each text part and joins them; a string content is trimmed whole, and
        # so are Gemma 1's parts once joined (its template takes a string: registry "join")
        text = "".join(p.strip() for p in m.parts) if m.parts is not None and system_ok else m.text.strip()
        if m.role == "assistant":
            o.c(text, "assistant")
            o.a(EOT)
            o.t("\n")
        else:
            o.c(text, m.role)
            o.t(EOT + "\n")
    if gen:
        o.t(f"{SOT}model\n")
    return o


def _w_gemma(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 1/2: ``<bos>``, ``<start_of_turn>user\\n{content.strip()}<end_of_turn>\\n``, ``model``
    for the assistant; generation prompt ``<start_of_turn>model\\n``. Roles alternate; a
    system message is refused (the template raises). Text parts are joined with ``""``, then
    stripped as a string content is (the template has no parts handling: given a list it
    writes the list's Python repr).

    Source: gemma.jinja (google/gemma-2-2b-it; gemma-7b-it has the same logic).
    """
    return _gemma(conv, gen, system_ok=False, name="gemma")


def _w_gemma3(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 3: as Gemma, with the optional system message folded into the first user turn
    as ``{system}\\n\\n`` (the system text is not stripped, the user text is); text parts are
    each stripped and joined.

    Source: gemma3.jinja (google/gemma-3-270m-it).
    """
    return _gemma(conv, gen, system_ok=True, name="gemma3")


def _strip_thinking(text: str) -> str:
    """Gemma 4's ``strip_thinking`` macro: drop every ``<|channel>...<channel|>`` span, strip."""
    out = []
    for part in text.split("<channel|>"):
        out.append(part.split("<|channel>")[0] if "<|channel>" in part else part)
    return "".join(out).strip()


# -- Gemma 4's tool text: its macros format_argument, format_parameters, format_function_declaration --
Q = '<|"|>'  # Gemma 4's string quote token
_MISSING = object()  # Jinja's undefined: a key the mapping lacks, any key of a non-mapping
_STANDARD_KEYS = ("description", "type", "properties", "required", "nullable")


def _get(v, k):
    """Jinja's ``v[k]`` as the templates use it: the mapping's value, else undefined."""
    return v[k] if isinstance(v, Mapping) and k in v else _MISSING


def _str(v) -> str:
    """``{{ v }}``: Python's ``str``, undefined as ``""``."""
    return "" if v is _MISSING else str(v)


def _upper(v) -> str:
    """Jinja's ``upper`` filter: ``str(v).upper()`` (a list as its Python repr), undefined ``""``."""
    return _str(v).upper()


def _true(v) -> bool:
    return v is not _MISSING and bool(v)


def _dictsort(d: Mapping):
    """Jinja's ``dictsort``: by key, case-insensitively (a stable sort: keys equal but for case
    keep their order)."""
    return sorted(d.items(), key=lambda kv: kv[0].lower() if isinstance(kv[0], str) else kv[0])


def _iter(v, where: str):
    try:
        return list(v)
    except TypeError:
        raise ChatFormatError(f"{where} is a {type(v).__name__}; gemma4's template iterates it "
                              "(give a list)") from None


class _Tools:
    """Writes Gemma 4's tool text into ``o`` as ``kind``: its own punctuation and ``<|"|>``
    quotes as markup, every name and value from the conversation as data."""

    def __init__(self, o: Out, kind: str) -> None:
        self.o, self.kind = o, kind

    def t(self, text: str) -> None:
        self.o.t(text, self.kind)

    def c(self, text: str) -> None:
        self.o.c(text, self.kind)

    def quoted(self, text: str) -> None:
        self.t(Q)
        self.c(text)
        self.t(Q)

    def argument(self, v, escape_keys: bool = True) -> None:
        """The ``format_argument`` macro: ``<|"|>`` around strings, ``true``/``false``, ``{k:v,...}``
        by sorted key (keys quoted unless ``escape_keys`` is off), ``[a,b]``, else ``str``."""
        if isinstance(v, str):
            self.quoted(v)
        elif v is True or v is False:
            self.t("true" if v else "false")
        elif isinstance(v, Mapping):
            self.t("{")
            for n, (k, x) in enumerate(_dictsort(v)):
                if n:
                    self.t(",")
                if escape_keys:
                    self.quoted(k)
                else:
                    self.c(k)
                self.t(":")
                self.argument(x, escape_keys)
            self.t("}")
        elif isinstance(v, (list, tuple)):
            self.t("[")
            for n, x in enumerate(v):
                if n:
                    self.t(",")
                self.argument(x, escape_keys)
            self.t("]")
        else:
            self.c(str(v))

    def names(self, items, where: str) -> None:
        """``[<|"|>a<|"|>,<|"|>b<|"|>]`` (a ``required`` list)."""
        self.t("[")
        for n, x in enumerate(_iter(items, where)):
            if n:
                self.t(",")
            self.quoted(str(x))
        self.t("]")

    def parameters(self, props: Mapping, where: str, *, schema: bool = False) -> None:
        """The ``format_parameters`` macro over ``props`` (a ``properties`` mapping; with
        ``schema``, an object schema without one, whose own keys the template reads so):
        ``NAME:{...}`` per parameter, by sorted name, comma-separated."""
        first = True
        for key, value in _dictsort(props):
            if key in _STANDARD_KEYS:
                if not schema:
                    raise ChatFormatError(f"{where}: a parameter named {key!r}, which gemma4's template drops "
                                          f"(it skips the keys {', '.join(_STANDARD_KEYS)}); rename it")
                continue
            if not first:
                self.t(",")
            first = False
            self.c(str(key))
            self.t(":{")
            self._parameter(value, f"{where}.{key}")
            self.t("}")

    def _parameter(self, value, where: str) -> None:
        """One parameter's schema inside its braces, comma-separated: ``description``; ``enum``
        (a STRING) or ``items`` (an ARRAY); ``nullable``; ``properties`` and ``required`` (an
        OBJECT); last its ``type``."""
        comma = False

        def field(head: str) -> None:
            nonlocal comma
            self.t(("," if comma else "") + head)
            comma = True

        desc = _get(value, "description")
        if _true(desc):
            field("description:")
            self.quoted(str(desc))
        typ = _upper(_get(value, "type"))
        if typ == "STRING":
            enum = _get(value, "enum")
            if _true(enum):
                field("enum:")
                self.argument(enum)
        elif typ == "ARRAY":
            items = _get(value, "items")
            if isinstance(items, Mapping) and items:
                field("items:{")
                self._items(items, f"{where}.items")
                self.t("}")
        if _true(_get(value, "nullable")):
            field("nullable:true")
        if typ == "OBJECT":
            sub = _get(value, "properties")
            if isinstance(sub, Mapping):
                field("properties:{")
                self.parameters(sub, f"{where}.properties")
                self.t("}")
            elif isinstance(value, Mapping):
                field("properties:{")
                self.parameters(value, where, schema=True)
                self.t("}")
            req = _get(value, "required")
            if _true(req):
                field("required:")
                self.names(req, f"{where}.required")
        field("type:")
        self.quoted(typ)

    def _items(self, items: Mapping, where: str) -> None:
        """An ARRAY parameter's ``items`` schema inside its braces: its keys sorted, null ones
        left out, ``properties`` as parameters, ``required`` as names, ``type`` upper-cased."""
        n = 0
        for ik, iv in _dictsort(items):
            if iv is None:
                continue
            if n:
                self.t(",")
            n += 1
            if ik == "properties":
                self.t("properties:{")
                if isinstance(iv, Mapping):
                    self.parameters(iv, f"{where}.properties")
                self.t("}")
            elif ik == "required":
                self.t("required:")
                self.names(iv, f"{where}.required")
            elif ik == "type":
                self.t("type:")
                self.argument(iv.upper() if isinstance(iv, str) else [_upper(x) for x in _iter(iv, f"{where}.type")])
            else:
                self.c(str(ik))
                self.t(":")
                self.argument(iv)

    def declaration(self, tool: Mapping, k: int) -> None:
        """The ``format_function_declaration`` macro: ``declaration:NAME{description:...,
        parameters:{properties:{...},required:[...],type:...}[,response:{...}]}``."""
        fn = tool["function"]
        where = f"tools[{k}].function.parameters"
        self.t("declaration:")
        self.c(_str(_get(fn, "name")))
        self.t("{description:")
        self.quoted(_str(_get(fn, "description")))
        params = _get(fn, "parameters")
        if _true(params):
            self.t(",parameters:{")
            props = _get(params, "properties")
            if _true(props):
                if not isinstance(props, Mapping):
                    raise ChatFormatError(f"{where}.properties is a {type(props).__name__}; gemma4's template "
                                          "needs an object (it sorts its keys)")
                self.t("properties:{")
                self.parameters(props, where)
                self.t("},")
            req = _get(params, "required")
            if _true(req):
                self.t("required:")
                self.names(req, f"{where}.required")
                self.t(",")
            ptype = _get(params, "type")
            if _true(ptype):
                self.t("type:")
                self.quoted(_upper(ptype))
                self.t("}")
        if isinstance(fn, Mapping) and "response" in fn:
            resp = fn["response"]
            self.t(",response:{")
            d = _get(resp, "description")
            if _true(d):
                self.t("description:")
                self.quoted(str(d))
                self.t(",")
            if _upper(_get(resp, "type")) == "OBJECT":
                self.t("type:")
                self.quoted("OBJECT")
                self.t("}")
        self.t("}")


def _g4_tool_results(o: Out, loop, j: int, start: int) -> bool:
    """The run of tool messages right after assistant message ``loop[j]`` (which has tool
    calls), each ``response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>`` after the
    ``<|tool_response>`` the model ends its calls with (trainable: Gemma 4's generation config
    stops on it; the ``<|tool_response>`` before each later result comes with the results, as
    the template's prefix renders bracket the turn, and is not). NAME is the name of the call whose id equals the result's ``tool_call_id``
    (two absent ids are equal: the last call without an id), else the result's ``name``.
    Returns whether there was any."""
    m = loop[j]
    k = j + 1
    while k < len(loop) and loop[k].role == "tool":
        r = loop[k]
        name = r.name
        for c in m.tool_calls:
            if c.id == r.tool_call_id:
                name = c.name
        if name is None:
            raise ChatFormatError(f"message {k + start} (tool): gemma4's template names a tool result by its "
                                  "call's id or its own name, and this one has neither that matches (the template "
                                  "raises); give it a tool_call_id or a name")
        # the model writes the first (its stop token); the others come with the results
        o.a("<|tool_response>") if k == j + 1 else o.t("<|tool_response>", "tool")
        w = _Tools(o, "tool")
        w.t("response:")
        w.c(name)
        w.t("{value:")
        w.quoted(r.text)
        w.t("}<tool_response|>")
        k += 1
    return k > j + 1


def _w_gemma4(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 4: ``<bos>``; a system turn ``<|turn>system\n{system.strip()}<turn|>\n`` when the
    first message is a system message, there are tools (each ``<|tool>declaration:...<tool|>``
    after the system text) or ``enable_thinking`` is on (then it starts with ``<|think|>\n``);
    then ``<|turn>user\n{content.strip()}<turn|>\n`` and ``<|turn>model\n{content}<turn|>\n``
    (the model text without ``<|channel>...<channel|>`` spans, stripped); an assistant message
    after another (tool results between them or not) continues its model turn; later system
    messages are system turns.

    Tool calls: ``<|tool_call>call:NAME{key:value,...}<tool_call|>`` (keys sorted, strings in
    ``<|"|>``), then the tool messages that follow, as ``<|tool_response>response:NAME{value:
    <|"|>...<|"|>}<tool_response|>``, then the message's text; with results and no text the
    turn stays open for the next assistant message; with no results it ends with
    ``<|tool_response>``. A reasoning is written (``<|channel>thought\n...\n<channel|>``) only
    on a message with tool calls after the last user message; elsewhere the template drops it:
    counted in history, refused after the last user message (it is the answer trained on).

    The generation prompt is ``<|turn>model\n`` followed, unless ``enable_thinking``, by an
    empty thought channel; none after tool calls (the model continues after their results).

    Refused, as the template cannot write them: a tool message not in a run right after an
    assistant message with tool calls (dropped), one whose name cannot be resolved (the
    template raises), a parameter named like a schema key (dropped), ``properties`` that is not
    an object (the template raises).

    Source: more/google-gemma-4-31B-it.jinja.
    """
    msgs = conv.messages
    think = bool(opts.get("enable_thinking"))
    o = Out()
    o.t(BOS)
    start = 0
    if think or conv.tools or msgs[0].role == "system":
        o.t("<|turn>system\n" + ("<|think|>\n" if think else ""))
        if msgs[0].role == "system":
            if msgs[0].parts is not None:
                raise ChatFormatError("message 0 (system): gemma4's template writes a system message given as "
                                      "parts as a Python list; give one text")
            o.c(msgs[0].text.strip(), "system")
            start = 1
        for k, tool in enumerate(conv.tools or ()):
            o.t("<|tool>")
            _Tools(o, "system").declaration(tool, k)
            o.t("<tool|>")
        o.t("<turn|>\n")
    loop = msgs[start:]
    last_user = max((j for j, m in enumerate(loop) if m.role == "user"), default=-1)
    # the last non-tool message had tool calls: tool messages are its results, and no generation
    # prompt follows (the model continues after them)
    open_calls = False
    prev_role = None  # the previous non-tool message's role
    for j, m in enumerate(loop):
        if m.role == "tool":
            if not open_calls:
                raise ChatFormatError(f"message {j + start} (tool): gemma4's template writes a tool result only in "
                                      "the run of tool messages right after the assistant message with the tool "
                                      "calls; it would drop this one")
            continue
        written = bool(m.reasoning) and bool(m.tool_calls) and j > last_user
        if m.reasoning and not written:
            if j > last_user:
                raise ChatFormatError(f"message {j + start} (assistant): gemma4's template writes reasoning only "
                                      "before tool calls; it would drop this answer's reasoning")
            o.note("reasoning_dropped")
        role = "model" if m.role == "assistant" else m.role
        if not (role == "model" and prev_role == "assistant"):
            o.t(f"<|turn>{role}\n")
        prev_role = m.role
        texts = m.parts if m.parts is not None else (m.text,)
        if m.role != "assistant":
            o.c("".join(t.strip() for t in texts), m.role)
            o.t("<turn|>\n")
            open_calls = False
            continue
        if written:
            o.t("<|channel>thought\n", "reasoning")
            o.c(m.reasoning, "reasoning")
            o.t("\n<channel|>", "reasoning")
        w = _Tools(o, "assistant")
        for c in m.tool_calls:
            w.t("<|tool_call>call:")
            w.c(c.name)
            w.t("{")
            for n, (k, v) in enumerate(_dictsort(c.arguments)):
                if n:
                    w.t(",")
                w.c(k)
                w.t(":")
                w.argument(v, escape_keys=False)
            w.t("}<tool_call|>")
        results = bool(m.tool_calls) and _g4_tool_results(o, loop, j, start)
        o.c("".join(_strip_thinking(t) for t in texts), "assistant")
        if m.tool_calls and not results:
            o.a("<|tool_response>")
        elif not (results and not (m.parts if m.parts is not None else m.content)):
            o.a("<turn|>")
            o.t("\n")
        open_calls = bool(m.tool_calls)
    if gen and not open_calls:
        o.t("<|turn>model\n" + ("" if think else "<|channel>thought\n<channel|>"))
    return o


FORMATS = [
    ChatFormat("gemma", _w_gemma, bos=BOS, eos="<eos>", terminator=EOT, stop=EOT, source="gemma.jinja",
               rules=PARTS_REFUSED),
    ChatFormat("gemma3", _w_gemma3, bos=BOS, eos="<eos>", terminator=EOT, stop=EOT, parts="native",
               source="gemma3.jinja"),
    ChatFormat("gemma4", _w_gemma4, bos=BOS, eos="<eos>", terminator="<turn|>", stop="<turn|>", parts="native",
               roles=ALL_ROLES, reasoning=True, reasoning_keys=("reasoning", "reasoning_content"), tool_calls=True,
               tools=True, options={"enable_thinking": None}, template_vars=frozenset({"enable_thinking"}),
               probe_options=({"enable_thinking": True},), source="more/google-gemma-4-31B-it.jinja"),
]
