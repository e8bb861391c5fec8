"""The messages schema (rmlprep.chat.messages) and the opt-in JSON tool conversion (convert)."""

from __future__ import annotations

import json

import pytest

from _chat_common import TEMPLATES, needs_jinja, template_text, u
from rmlprep.chat import format_chat
from rmlprep.chat.convert import json_tools, parameters_as_text
from rmlprep.chat.messages import Message, ToolCall, parse_conversation
from rmlprep.errors import ChatFormatError


def test_canonical_form():
    conv = parse_conversation([
        {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": "Hi", "tool_calls": None, "reasoning_content": None},  # Arrow nulls: absent
        {"role": "assistant", "content": None, "reasoning": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"b": 1, "a": [2]}'}},
                        {"name": "g", "arguments": {"x": None}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "f"},
    ], tools='[{"name": "f", "description": "d", "parameters": {}}]')
    m0, m1, m2, m3 = conv.messages
    assert m0 == Message("system", "Be brief.", ("Be ", "brief."))
    assert m1 == Message("user", "Hi")
    assert m2.content is None and m2.text == "" and m2.reasoning == "think"
    assert m2.tool_calls == (ToolCall("f", {"b": 1, "a": [2]}, "c1"), ToolCall("g", {"x": None}, None))
    assert list(m2.tool_calls[0].arguments) == ["b", "a"]  # key order kept
    assert (m3.tool_call_id, m3.name) == ("c1", "f")
    assert conv.tools == ({"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}},)


@pytest.mark.parametrize("messages,pattern", [
    ("hello", r"must be a list of \{'role', 'content'\} dicts, got str$"),
    ('[{"role": "user", "content": "hi"}]', r"got str holding a JSON list: the column stores conversations as JSON "
                                           r"text; decode it first"),
    ("[not json", r"got str$"),
    ([], "empty conversation"),
    ([{"content": "x"}], "has no 'role'$"),
    ([{"from": "human", "value": "x"}], r"has no 'role' \(it has ShareGPT's 'from' and 'value', which rmlprep does not "
                                       r"read and no option maps: rename them to 'role' and 'content' in the data "
                                       r"first, with roles human -> user, gpt -> assistant"),
    # U9 (careless-user trial): another case, a dataset's or an API's role name got no hint
    ([{"role": "Assistant", "content": "x"}], r"has role 'Assistant'; roles are system, user, assistant, tool \(roles "
                                              r"are lower case, with no spaces: use role 'assistant'\)$"),
    ([{"role": "user ", "content": "x"}], r"use role 'user'\)$"),
    ([{"role": "bot", "content": "x"}], r"has role 'bot'; .* \(use role 'assistant'\); no rmlprep option maps roles: "
                                        r"rename them in the data first$"),
    ([{"role": "Human", "content": "x"}], r"\(use role 'user': ShareGPT's name\); no rmlprep option maps roles"),
    ([{"role": "gpt", "content": "x"}], r"\(use role 'assistant': ShareGPT's name\)"),
    ([{"role": "chatbot", "content": "x"}], r"\(use role 'assistant': Cohere's name\)"),
    ([{"role": "prompter", "content": "x"}], r"\(use role 'user': OpenAssistant's name\)"),
    ([{"role": "narrator", "content": "x"}], r"has role 'narrator'; roles are system, user, assistant, tool$"),
    ([{"role": "developer", "content": "x"}], "role 'developer'.*use role 'system'"),
    ([{"role": "ipython", "content": "x"}], "use role 'tool'"),
    ([{"role": "user", "content": 3}], "content must be a string or a list of text parts"),
    ([{"role": "user"}], "content is missing or null"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "'image_url' part"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}], "'input_audio' part"),
    ([{"role": "user", "content": [{"type": "video"}]}], "'video' part"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}], r"content\[0\]\['text'\] must be a string"),
    ([{"role": "user", "content": "x", "weight": 1.0}], "'weight'.*would be lost"),
    ([{"role": "user", "content": "x", "name": "bob"}], "'name'.*only on a tool message"),
    ([{"role": "user", "content": "x", "reasoning_content": "r"}], "only an assistant message"),
    ([{"role": "assistant", "content": "x", "reasoning_content": "a", "thinking": "b"}], "two different reasonings"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}],
     "not JSON"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}],
     "must be a JSON object"),
    # json.loads keeps the last value of a key given twice ({"x": 2}); which one is meant is unknowable
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1, "x": 2}'}}]}],
     r"message 0 \(assistant\): tool_calls\[0\]\.function\.arguments is a string in which a JSON object holds the key "
     r"'x' twice \(the object at \$\)"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "", "arguments": {}}}]}],
     "non-empty string"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f"}}]}], "arguments is missing"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": {}}}]}],
     "only 'function' calls"),
    ([{"role": "assistant", "content": "x", "tool_calls": "f()"}], "tool_calls must be a list"),
    ([{"role": "tool", "content": "x", "tool_call_id": "nope"}], "names no tool call"),
])
def test_schema_errors_name_the_message_and_field(messages, pattern):
    with pytest.raises(ChatFormatError, match=pattern):
        parse_conversation(messages)


@pytest.mark.parametrize("tools,pattern", [
    ({"name": "f"}, "must be a list"),
    ("not json", "not JSON"),
    ('[{"name": "f", "parameters": {"type": "object", "type": "string"}}]',
     r"tools: a string in which a JSON object holds the key 'type' twice \(the object at \$\[0\]\.parameters\)"),
    ([1], r"tools\[0\] must be a dict"),
    ([{"description": "no name"}], "has no name"),
    ([{"type": "retrieval", "function": {"name": "f"}}], "must be"),
])
def test_tools_errors(tools, pattern):
    with pytest.raises(ChatFormatError, match=pattern):
        parse_conversation([u("x")], tools)


def test_arguments_as_string_or_mapping_write_the_same():
    """The template's documented type is a mapping: a JSON string is parsed, then written as
    the template writes a mapping."""
    call = {"id": "call0w3x9", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    as_str = {"id": "call0w3x9", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    for fmt in ("qwen3", "llama3.1", "gpt-oss", "mistral-small-3.2", "deepseek-v3.1"):
        conv = [u("q"), {"role": "assistant", "content": None, "tool_calls": [call]}]
        conv2 = [u("q"), {"role": "assistant", "content": None, "tool_calls": [as_str]}]
        assert format_chat(conv, fmt) == format_chat(conv2, fmt)
        assert '{"x": 1}' in format_chat(conv2, fmt)


def test_text_parts_joined_as_chosen_or_as_the_template_iterates_them():
    """format_chat, format_chat_segments and validate_messages refuse two text parts for a format
    whose template takes a string (chatml), as the sft run and tokenize_chat do (f8934f5), unless
    ``join_text_parts`` chooses: " Hello " and " world " joined with "" are " Hello  world ", with
    "\\n" " Hello \\n world ". Gemma 3's template iterates the parts (each stripped:
    "Helloworld"), whatever the key; they joined with "" silently before."""
    from rmlprep.chat import format_chat_segments, validate_messages
    from rmlprep.errors import ConfigError

    parts = [{"type": "text", "text": " Hello "}, {"type": "text", "text": " world "}]
    msgs = [{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}]
    why = (r"^message 0 \(user\): its content is 2 text parts, which chatml's template does not join .* set "
           r"join_text_parts='\\n' \(chat.join_text_parts")
    for call in (format_chat, format_chat_segments, validate_messages):
        with pytest.raises(ChatFormatError, match=why):
            call(msgs, "chatml")
        with pytest.raises(ConfigError, match=r"join_text_parts must be a string"):
            call(msgs, "chatml", join_text_parts=1)
    assert "<|im_start|>user\n Hello  world <|im_end|>" in format_chat(msgs, "chatml", join_text_parts="")
    assert "<|im_start|>user\n Hello \n world <|im_end|>" in format_chat(msgs, "chatml", join_text_parts="\n")
    segs = format_chat_segments(msgs, "chatml", join_text_parts="\n")
    assert "".join(x.text for x in segs) == format_chat(msgs, "chatml", join_text_parts="\n")
    assert [x.text for x in segs if x.kind == "user"] == [" Hello \n world "]
    assert validate_messages(msgs, "chatml", join_text_parts="") is None
    assert msgs[0]["content"] is parts  # the caller's messages are not changed
    for sep in (None, "", "\n"):
        assert "<start_of_turn>user\nHelloworld<end_of_turn>" in format_chat(msgs, "gemma3", join_text_parts=sep)


def test_join_text_parts_only_where_the_template_takes_a_string():
    """Two text parts: joined with the chosen separator, or refused (None) naming the message,
    the number of parts and the option, for a format whose template takes a string (chatml);
    left as they are for one whose template iterates them (gemma3: it writes them as that
    template does) and for one part. A content the schema refuses (an image part) is left for
    the schema's own reason."""
    from rmlprep.chat.convert import join_text_parts
    from rmlprep.chat.registry import get_format

    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": "c"}]
    msgs = [u("q"), {"role": "assistant", "content": parts}]
    chatml, gemma3 = get_format("chatml"), get_format("gemma3")
    assert join_text_parts(msgs, chatml, "\n") == ([u("q"), {"role": "assistant", "content": "a\nb\nc"}], 1)
    assert join_text_parts(msgs, chatml, "") == ([u("q"), {"role": "assistant", "content": "abc"}], 1)
    assert msgs[1]["content"] is parts  # the row itself is not changed
    with pytest.raises(ChatFormatError, match=r"message 1 \(assistant\): its content is 3 text parts, which chatml's "
                       r"template does not join .* set join_text_parts='\\n' \(chat.join_text_parts"):
        join_text_parts(msgs, chatml, None)
    assert join_text_parts(msgs, gemma3, None) == (msgs, 0)
    one = [u("q"), {"role": "assistant", "content": parts[:1]}]
    assert join_text_parts(one, chatml, None) == (one, 0)
    image = [{"role": "user", "content": [{"type": "image", "url": "x.png"}, parts[0]]}]
    assert join_text_parts(image, chatml, None) == (image, 0)
    with pytest.raises(ChatFormatError, match="media parts are refused"):
        format_chat(image, "chatml")


def test_json_tools_refuses_a_call_to_a_tool_the_conversation_does_not_define():
    """explorer E3: with json_tools, an answer that is JSON data shaped as a call
    ({"name": "Alice", "arguments": {...}}) in a conversation defining only `search` was
    converted into a call of `Alice`, uncounted. A call naming no defined tool is now refused
    (the run writes the row aside with this reason); with no definitions at all it is still
    converted (the run counts tool_calls_without_tools); check=False (the hint count of a run
    without json_tools) converts it."""
    answer = {"role": "assistant", "content": '{"name": "Alice", "arguments": {"age": 3}}'}
    search = {"name": "search", "description": "d", "parameters": {"type": "object"}}
    system = {"role": "system", "content": json.dumps([search])}
    wrapped = [{"type": "function", "function": search}]
    plain = [{"role": "system", "content": "You help."}, u("Give JSON for Alice"), answer]
    for msgs, tools in (([system, u("Give JSON for Alice"), answer], None), (plain, [search]),
                        (plain, wrapped), (plain, json.dumps(wrapped))):
        with pytest.raises(ChatFormatError, match=r"message 2 \(assistant\) is JSON shaped as a call to a tool "
                           r"named 'Alice', which the conversation's tools do not define \('search'\).*"
                           r"chat.json_tools = false"):
            json_tools(msgs, tools)
        assert json_tools(msgs, tools, check=False)[2] == 1
    assert json_tools([u("q"), answer])[2] == 1  # no definitions: converted (and counted by the run)
    assert json_tools([u("q"), answer], [])[2] == 1
    assert json_tools([u("q"), answer], [{"name": "Alice"}])[2] == 1


def test_json_tools_reads_an_empty_tools_value_as_no_tools():
    """A run reads a tools column's ``[]`` (a row without tools in a set that has the column)
    as no tools, like null. json_tools took ``[]`` for given tools: a LLaMA-Factory row's
    system message of definitions stayed as raw JSON system text while its JSON answer became a
    ``<tool_call>`` (explore18a: an sft run wrote row ``"tools": []`` so and rows with null or
    no key with a ``<tools>`` block). Worked example: both give the definitions as tools."""
    search = {"name": "search", "description": "d", "parameters": {"type": "object"}}
    msgs = [{"role": "system", "content": json.dumps([search])}, u("find"),
            {"role": "assistant", "content": '{"name": "search", "arguments": {"q": "x"}}'}]
    want = json_tools(msgs, None)
    assert want[1] == [search] and want[0][0] == u("find") and want[2] == 1
    for empty in ([], "[]", " [] "):
        assert json_tools(msgs, empty) == want


def test_json_tools_leaves_json_with_a_key_twice_as_text():
    """An answer '{"name": "f", "arguments": {}, "name": "g"}' was converted into a call of
    ``g`` (json.loads keeps a key's last value): which tool it calls is unknowable, so it is no
    call and stays the answer's text; a system message of definitions so written stays a system
    message."""
    answer = {"role": "assistant", "content": '{"name": "f", "arguments": {}, "name": "g"}'}
    assert json_tools([u("q"), answer]) == ([u("q"), answer], None, 0)
    system = {"role": "system", "content": '[{"name": "f", "name": "g"}]'}
    assert json_tools([system, u("q"), answer]) == ([system, u("q"), answer], None, 0)


def test_json_tools_conversion():
    """A LLaMA-Factory tool-call row: tools as a JSON list in the system message, a call as
    JSON in the assistant's text."""
    msgs = [
        {"role": "system", "content": '[{"name": "f", "description": "d", "parameters": {"type": "object"}}]'},
        u("do it"),
        {"role": "assistant", "content": '{"name": "f", "arguments": {"x": 1}}'},
        {"role": "tool", "content": '{"ok": true}'},
        {"role": "assistant", "content": '{"name": "f"}'},  # not a call: keys differ
    ]
    out, tools, n = json_tools(msgs)
    assert n == 1 and tools == [{"name": "f", "description": "d", "parameters": {"type": "object"}}]
    assert out[0] == u("do it")
    assert out[1]["tool_calls"] == [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]
    assert out[1]["content"] is None and out[3] == msgs[4]
    assert msgs[2]["content"].startswith("{")  # input untouched
    # an empty tool list means no tools; a plain system message stays
    assert json_tools([{"role": "system", "content": "[]"}, u("q")])[:2] == ([u("q")], None)
    assert json_tools([{"role": "system", "content": "You help."}, u("q")])[1] is None
    # given tools win: the system message is kept as text
    assert json_tools(msgs, tools=[{"name": "f"}])[0][0] == msgs[0]
    # parameters written as JSON text (bare or wrapped definitions, a list or a JSON string of
    # one) become the object; parameters_as_text counts them; other strings stay
    bare = {"name": "g", "parameters": '{"type": "object"}'}
    wrapped = {"type": "function", "function": {"name": "h", "parameters": ' {"type": "object"}'}}
    plain = {"name": "k", "parameters": "none"}
    for given in ([bare, wrapped, plain], json.dumps([bare, wrapped, plain])):
        assert parameters_as_text(given) == 2
        got = json_tools([u("q")], given)[1]
        assert got[0]["parameters"] == got[1]["function"]["parameters"] == {"type": "object"}
        assert got[2] == plain and parameters_as_text(got) == 0
    assert parameters_as_text(None) == parameters_as_text("not json") == 0


#: pydantic's model_json_schema() for ``unit: Optional[str] = None``: a JSON null as the
#: default, in nearly every real tool set built from pydantic models.
NULL_DEFAULT_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Unit"}},
        "required": ["city"]}}}]


def _tool_templates() -> list:
    """The real templates of every format that writes tool definitions, with the bos/eos of
    the committed renders' banner."""
    from rmlprep import chat_parity
    from rmlprep.chat.registry import get_format

    p = chat_parity.renders_path()
    banner = chat_parity.load_renders(p)[0] if p.is_file() else {}
    return [pytest.param(name, fmt, info, id=name) for name, info in sorted(banner.get("templates", {}).items())
            if (fmt := info.get("format")) and get_format(fmt).tools and (TEMPLATES / f"{name}.jinja").exists()]


@needs_jinja
@pytest.mark.parametrize("name, fmt, info", _tool_templates())
def test_json_nulls_in_tool_definitions_reach_the_prompt_as_the_template_writes_them(name, fmt, info):
    """A user-trial (F1c): parse_tools dropped every null of a tool definition (meant for Arrow
    struct padding) whatever its source, so ``"default": null`` vanished from the prompt
    (qwen2.5 wrote ``"unit": {"anyOf": [...], "title": "Unit"}``, gpt-oss lost ``// default:
    null``, qwen3-coder ``<default>None</default>``). JSON nulls are real: the expected text is
    the real template's render of the same tools (given as a list and as a JSON string)."""
    from rmlprep.chat.render import render

    msgs = [u("Weather in Paris?"), {"role": "assistant", "content": "Sunny."}]
    ref = render(template_text(name), msgs, tools=NULL_DEFAULT_TOOLS, bos_token=info["bos_token"],
                 eos_token=info["eos_token"], now="2024-07-26")["output"]
    # the template writes the default; Gemma 4's writes no default (nor anyOf) of any parameter
    assert ("null" in ref or "None" in ref) != (fmt == "gemma4")
    assert format_chat(msgs, fmt, tools=NULL_DEFAULT_TOOLS) == ref
    assert format_chat(msgs, fmt, tools=json.dumps(NULL_DEFAULT_TOOLS)) == ref


def test_tool_definition_nulls_are_kept_in_the_canonical_form():
    """Worked example: the parsed tools are the JSON as given (a bare definition wrapped)."""
    bare = {"name": "f", "description": None, "parameters": {"type": "object", "properties": {"x": {"default": None}}}}
    conv = parse_conversation([u("q")], [bare])
    assert conv.tools == ({"type": "function", "function": bare},)


def test_tool_call_id_outside_a_tool_message_is_refused_with_its_own_reason():
    """An assistant message carrying ``tool_call_id`` was refused with the reason written for
    ``name`` ("no format writes a participant name"), which says nothing about the field."""
    for k, why in (("tool_call_id", "it names the call a tool result answers"),
                   ("name", "no format writes a participant name")):
        msgs = [u("Hi"), {"role": "assistant", "content": "Hello", k: "x"}]
        with pytest.raises(ChatFormatError) as e:
            format_chat(msgs, "chatml")
        assert str(e.value) == f"message 1 (assistant): has {k!r}, which rmlprep takes only on a tool message ({why})"


_REASONING_TEMPLATES = {"qwen3": "more/Qwen-Qwen3-0.6B", "gpt-oss": "more/openai-gpt-oss-120b",
                        "gemma4": "more/google-gemma-4-31B-it"}


@needs_jinja
@pytest.mark.parametrize("fmt", list(_REASONING_TEMPLATES))
def test_reasoning_under_a_name_the_template_does_not_read_is_counted(fmt):
    """rmlprep reads an answer's reasoning from reasoning_content, reasoning or thinking and
    writes it; each real template reads some of those names only (Qwen3's reasoning_content,
    gpt-oss's thinking, Gemma 4's reasoning or reasoning_content), so apply_chat_template on the
    row as it is leaves the others' reasoning out, and the live check, which passes both names,
    said nothing. Expected: the real template rendered with jinja2 on the raw row (tools, a
    tool call and a last answer, so every template writes the reasoning it reads): a row is counted
    (reasoning_key_unread) exactly when that render differs from the format's text; the rows
    are written all the same."""
    import warnings

    from rmlprep.chat.registry import get_format
    from rmlprep.chat.render import render
    from rmlprep.tokenizer import Tokenizer
    from rmlprep.arrow import tokenize_chat
    from rmlprep.load import open_tokenizer

    f = get_format(fmt)
    tpl = template_text(_REASONING_TEMPLATES[fmt])
    tools = [{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
                                                "parameters": {"type": "object", "properties": {}}}}]
    want, rows = [], []
    for key in ("reasoning_content", "reasoning", "thinking"):
        msgs = [{"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "", key: "I add them.",
                 "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {}}}]},
                {"role": "tool", "content": "4"},
                {"role": "assistant", "content": "4", key: "The tool said 4."}]
        if fmt == "gemma4":  # its template writes reasoning only before tool calls (rmlprep refuses it elsewhere)
            del msgs[3][key]
        ref = render(tpl, msgs, tools=tools, add_generation_prompt=False, bos_token=f.bos, eos_token=f.eos,
                     now="2024-07-26")
        ours = format_chat(msgs, fmt, tools=tools)
        want.append(ref.get("output") != ours)
        assert "I add them." in ours or "The tool said 4." in ours  # rmlprep writes the reasoning
        rows.append(msgs)
    assert want.count(False) == len(f.reasoning_keys)  # the template writes what rmlprep writes under its own names
    tok = Tokenizer.create(open_tokenizer("demo:gpt2")[0].spec)
    fn = tokenize_chat(tok, fmt, tools_column="tools", text_markers=True, on_error="record")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = fn({"messages": rows, "tools": [tools] * 3})
    assert not any(got["error"]) and fn.stats["reasoning_key_unread"] == sum(want), (want, fn.stats)
    assert any("under a name the format's real template does not read" in str(x.message) for x in w)
