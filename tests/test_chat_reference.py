"""Chat encodings against the reference libraries (marked ``parity``, run in CI):

* Hugging Face ``tokenizers``: ``encode_chat`` ids equal the real tokenizer's ids for the real
  template's render (every fixture conversation whose data holds no special-token text), and
  each real tokenizer's own chat template is proved to be its expected format;
* ``mistral-common`` (Mistral's own tokenizer library): token for token for v1, v3 (tools,
  tool calls and results, the ``last-user`` system placement) and v7;
* ``openai-harmony`` (the harmony format's reference): the gpt-oss system message, tools
  namespace, tool call and result, offline with an o200k vocabulary file written from the
  shared GPT-4o tokenizer.json.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import json
import os
import re

import pytest

from _chat_common import REAL, real_tokenizer
from rmlprep import chat_parity
from rmlprep.chat import detect_chat_format, encode_chat, format_chat
from rmlprep.chat.probes import WEATHER
from rmlprep.errors import ChatFormatError
from rmlprep.spec import TokenType

pytestmark = pytest.mark.parity

BANNER, ROWS = chat_parity.load_renders(chat_parity.renders_path()) if chat_parity.renders_path().is_file() else ({}, [])

#: real tokenizer -> the formats whose renders it encodes (and its own template's format).
REAL_FORMATS = [
    ("hf/qwen3", ("qwen3", "qwen2.5", "chatml"), "qwen3"),
    ("hf/qwen2.5", ("qwen2.5", "qwen2", "chatml"), "qwen2.5"),
    ("hf/llama3", ("llama3", "llama3.1", "llama3.2"), None),  # its own template is the older one: refused
    ("hf/phi-3-mini", ("phi3", "phi3.5"), None),
    ("hf/mistral-7b-v0.1", ("mistral-v1", "mistral-v3", "mistral-v7"), None),
    ("hf/gemma", ("gemma",), None),
    ("hf/gpt-oss", ("gpt-oss",), None),
]


@pytest.mark.parametrize("rel,formats,own", REAL_FORMATS, ids=[r[0] for r in REAL_FORMATS])
def test_ids_equal_the_reference_tokenizer_on_real_renders(rel, formats, own):
    tokenizers = pytest.importorskip("tokenizers")
    if not ROWS:
        pytest.skip("fixtures/chat/renders.jsonl.gz is absent")
    tok = real_tokenizer(rel)
    ref = tokenizers.Tokenizer.from_file(str(REAL / rel / "tokenizer.json"))
    # rows whose data holds a control token's text are left out (rmlprep never cuts those from data,
    # by design); user-defined tokens (Qwen's <tool_call>, <think>) are cut as the reference cuts them
    specials = tuple(t for t, i in tok.special_tokens.items() if tok.spec.token_types[i] != TokenType.USER_DEFINED)
    n = 0
    for r in ROWS:
        fmt = BANNER["templates"][r["template"]]["format"]
        if fmt not in formats or "output" not in r:
            continue
        data = json.dumps([r["messages"], r.get("tools")], ensure_ascii=False)
        if any(s in data for s in specials):
            continue
        try:  # text_markers: Gemma 1's base tokenizer.json spells <end_of_turn> as text, and so does `ref`
            enc = encode_chat(tok, r["messages"], fmt, tools=r.get("tools"),
                              add_generation_prompt=r["add_generation_prompt"], text_markers=True)
        except ChatFormatError:
            continue
        assert enc.input_ids == ref.encode(r["output"], add_special_tokens=False).ids, (r["template"], r["conversation_id"])
        n += 1
    assert n >= 40
    if own and tok.chat_template:
        pytest.importorskip("jinja2")
        assert detect_chat_format(tok.chat_template) == own


def test_encode_chat_takes_auto_as_tokenize_chat_does():
    """encode_chat(tok, messages, "auto") was refused as an unknown format (its message listing the
    names, saying nothing of "auto"), though tokenize_chat takes "auto". Now it takes the format
    that reproduces the tokenizer's template. Expected ids: the committed renders of Qwen2.5's
    real template (tools/make_chat_fixtures.py, jinja2) encoded by Hugging Face tokenizers.
    Expected masks from the same render, not from rmlprep's writer: an assistant turn is
    trained from the character after its generation prompt ``<|im_start|>assistant\n`` up to
    and including its ``<|im_end|>`` (test_chat_masks' rule), and a token is trained iff the
    reference tokenizer's character offsets overlap a trained character (a template ``\n``
    merged with an answer's leading one is trained). tokenize_chat(tok, "auto") gives the same."""
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("jinja2")
    from rmlprep import tokenize_chat

    tok = real_tokenizer("hf/qwen2.5")
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf/qwen2.5" / "tokenizer.json"))
    rows = [r for r in ROWS if r["template"] == "qwen2.5" and "output" in r and not r.get("tools")
            and not r["add_generation_prompt"] and "<|" not in json.dumps(r["messages"])]
    if len(rows) < 5:
        pytest.skip("fixtures/chat/renders.jsonl.gz holds too few qwen2.5 renders")
    # join_text_parts="": the probe of two text parts, rendered with them joined so (the template takes a
    # string); encode_chat and tokenize_chat refuse them unless given
    fn = tokenize_chat(tok, "auto", on_error="record", no_assistant="keep", join_text_parts="")
    fn.warn = False  # rows calling tools without definitions: warned of, written
    got = fn({"messages": [r["messages"] for r in rows]})
    n = 0
    for i, r in enumerate(rows):
        try:
            enc = encode_chat(tok, r["messages"], "auto", join_text_parts="")
        except ChatFormatError:
            assert got["error"][i], r["conversation_id"]  # refused by both
            continue
        want = ref.encode(r["output"], add_special_tokens=False)
        assert enc.input_ids == want.ids, r["conversation_id"]
        trained = [False] * len(r["output"])
        for m in re.finditer(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", r["output"], re.S):
            trained[m.start(1):m.end(1)] = [True] * (m.end(1) - m.start(1))
        mask = [int(any(trained[a:b])) for a, b in want.offsets]
        assert enc.assistant_masks == mask, r["conversation_id"]
        assert enc.assistant_masks == list(got["assistant_masks"][i]), r["conversation_id"]
        n += sum(mask) > 0
    assert n >= 5


def test_auto_refusal_names_the_formats_to_pass():
    """Meta's first Llama 3 Instruct template (get.sh's hf/llama3) ends every render with the
    assistant header, so no format reproduces it and "auto" is refused; the message said to name
    chat.format = 'llama3' and set parity.chat = false (a run's keys), nothing a caller of
    encode_chat / tokenize_chat can pass. Now it ends with the fmt values to pass: 'llama3' (the
    closest format, whose text differs as shown) and 'template'; encode_chat with 'llama3' runs."""
    pytest.importorskip("jinja2")
    from rmlprep import tokenize_chat
    from rmlprep.chat import ChatTemplateError

    tok = real_tokenizer("hf/llama3")
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    way = ("\n  in this call: pass fmt='llama3' to write that format's text (it differs from the template as shown), "
           "or fmt='template' to render the template itself with jinja2")
    for call, f in (("encode_chat", lambda: encode_chat(tok, msgs, "auto")), ("tokenize_chat", lambda: tokenize_chat(tok, "auto"))):
        with pytest.raises(ChatTemplateError) as e:
            f()
        assert str(e.value).startswith(f"{call}(fmt='auto'): no rmlprep chat format reproduces this template"), str(e.value)
        assert str(e.value).endswith(way), str(e.value)
        assert e.value.difference.format == "llama3"
    assert encode_chat(tok, msgs, "llama3").input_ids[0] == tok.spec.bos_id


@pytest.mark.parametrize("rel,fmt,text", [
    ("hf/qwen3", "qwen3", "Wrap it as <tool_call> and </tool_call>, or <tool_response>."),
    ("hf/qwen2.5", "qwen2.5", "a <tool_call> b <|fim_prefix|>c"),
    ("hf/gemma3", "gemma3", "See <html> here, then <table>"),
])
def test_user_defined_tokens_in_data_are_cut_as_the_reference_cuts_them(rel, fmt, text):
    """A user-defined added token (Hugging Face ``special: false``) written in a message is one id,
    as the reference tokenizer encodes the render (transformers' apply_chat_template encodes the
    whole string), in the user's turn and in the answer, with the mask over the answer's; a
    careless-user trial found ``<tool_call>`` in Qwen3 data as 4 text pieces, ``<html>`` in
    Gemma 3 data as 3."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer(rel)
    ref = tokenizers.Tokenizer.from_file(str(REAL / rel / "tokenizer.json"))
    messages = [{"role": "user", "content": "Q: " + text}, {"role": "assistant", "content": text}]
    enc = encode_chat(tok, messages, fmt)
    want = ref.encode(format_chat(messages, fmt), add_special_tokens=False).ids
    assert enc.input_ids == want
    answer = [i for i in ref.encode(text, add_special_tokens=False).ids
              if tok.spec.token_types[i] == TokenType.USER_DEFINED]
    assert len(answer) >= 2
    in_render = [i for i in want if i in answer]  # the user's turn quotes the answer's
    masked = [i for i, m in zip(enc.input_ids, enc.assistant_masks) if m and i in answer]
    assert (len(in_render), masked) == (2 * len(answer), answer)


@pytest.mark.parametrize("rel,fmt,messages", [
    pytest.param("hf/gemma3", "gemma3", [{"role": "system", "content": "Be brief.\n"}, {"role": "user", "content": "Hi"},
                                         {"role": "assistant", "content": "Ok"}], id="gemma3-system-ends-in-newline"),
    pytest.param("hf/gemma3", "gemma3", [{"role": "system", "content": "\n"}, {"role": "user", "content": "Hi"},
                                         {"role": "assistant", "content": "Ok"}], id="gemma3-system-is-a-newline"),
    pytest.param("hf/phi-3-mini", "phi3", [{"role": "user", "content": "\x1chello"},
                                           {"role": "assistant", "content": "Ok"}], id="phi3-rstrip-stops-at-x1c"),
    pytest.param("hf/phi-3-mini", "phi3", [{"role": "user", "content": "  \n \u00a0x"},
                                           {"role": "assistant", "content": "Ok"}], id="phi3-rstrip-into-content"),
])
def test_added_tokens_across_template_and_message_text_are_the_references(rel, fmt, messages):
    """The render is cut as one string, as the reference cuts it: Gemma 3's user-defined
    ``"\\n"`` * k tokens join a system prompt's final newline with the template's ``"\\n\\n"``
    (one id 109, not 107 + 108: every Gemma 3 row whose system prompt ends in a newline
    differed without a word), and Phi-3's ``rstrip`` markers swallow Unicode White_Space only
    (U+001C is not, though Python's ``str.lstrip`` takes it)."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer(rel)
    ref = tokenizers.Tokenizer.from_file(str(REAL / rel / "tokenizer.json"))
    enc = encode_chat(tok, messages, fmt)
    assert enc.input_ids == ref.encode(format_chat(messages, fmt), add_special_tokens=False).ids
    answer = ref.encode("Ok", add_special_tokens=False).ids
    assert [i for i, m in zip(enc.input_ids, enc.assistant_masks) if m][:len(answer)] == answer


@pytest.mark.parametrize("content", ["x<THINK>y", "a <think> b <ＴＨＩＮＫ>", "<Think>", "ＳＴＥＰ <thinK>\n\n"])
def test_normalized_user_defined_tokens_in_messages_are_cut_as_the_reference_cuts_them(content):
    """A user-defined added token with ``normalized: true`` is matched after normalization, as
    ``tokenizers`` matches it (no real tokenizer has one: Qwen2.5's file with an NFKC + Lowercase
    normalizer and such a ``<Think>`` added): ``<THINK>`` and ``<ＴＨＩＮＫ>`` in a message are its
    one id, in the user's turn and in the trained answer. Before, chat encoding cut only the
    raw-matched tokens and wrote these as text pieces."""
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf/qwen2.5/tokenizer.json"
    if not path.exists():
        pytest.skip(f"{path} not found (bash ../shared/real-tokenizers/get.sh)")
    from rmlprep.hf import spec_from_tokenizer_json
    from rmlprep.tokenizer import Tokenizer

    d = json.loads(path.read_text(encoding="utf-8"))
    d["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    top = max(d["model"]["vocab"].values()) + 1 + len(d["added_tokens"])
    d["added_tokens"] = d["added_tokens"] + [
        {"id": top, "content": "<Think>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
         "special": False}]
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    tok = Tokenizer.create(spec_from_tokenizer_json(d)[0])
    think = ref.token_to_id("<Think>")
    messages = [{"role": "user", "content": "Q: " + content}, {"role": "assistant", "content": content}]
    enc = encode_chat(tok, messages, "qwen2.5")
    want = ref.encode(format_chat(messages, "qwen2.5"), add_special_tokens=False).ids
    assert enc.input_ids == want
    n = ref.encode(content, add_special_tokens=False).ids.count(think)
    assert n >= 1 and want.count(think) == 2 * n
    assert [i for i, m in zip(enc.input_ids, enc.assistant_masks) if m].count(think) == n


# -- mistral-common --------------------------------------------------------------------------------
def _mistral_common():
    try:
        import mistral_common
    except ImportError:
        pytest.skip("mistral-common is not installed (pip install 'rmlprep[reference]')")
    return os.path.join(os.path.dirname(mistral_common.__file__), "data")


CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call0w3x9", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "content": '{"temperature": 22}', "tool_call_id": "call0w3x9"},
        {"role": "assistant", "content": "Sunny, 22 °C."}]


def _mc_request(conv, tools):
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall

    out = []
    for m in conv:
        if m["role"] == "system":
            out.append(SystemMessage(content=m["content"]))
        elif m["role"] == "user":
            out.append(UserMessage(content=m["content"]))
        elif m["role"] == "tool":
            out.append(ToolMessage(content=m["content"], tool_call_id=m["tool_call_id"]))
        elif m.get("tool_calls"):
            out.append(AssistantMessage(content=None, tool_calls=[
                ToolCall(id=c["id"], function=FunctionCall(name=c["function"]["name"],
                                                           arguments=json.dumps(c["function"]["arguments"])))
                for c in m["tool_calls"]]))
        else:
            out.append(AssistantMessage(content=m["content"]))
    t = [Tool(function=Function(**tl["function"])) for tl in tools] if tools else None
    return ChatCompletionRequest(messages=out, tools=t)


@pytest.mark.parametrize("model,fmt,with_tools,options", [
    ("tokenizer.model.v1", "mistral-v1", False, None),
    ("mistral_instruct_tokenizer_240323.model.v3", "mistral-v3", True, {"system_placement": "last-user"}),
    ("mistral_instruct_tokenizer_241114.model.v7", "mistral-v7", False, None),
])
def test_mistral_common(model, fmt, with_tools, options):
    data = _mistral_common()
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    import rmlprep

    path = os.path.join(data, model)
    mt = MistralTokenizer.from_file(path, mode=ValidationMode.finetuning)
    tok = rmlprep.load_tokenizer(path)
    conv = CONV if with_tools else CONV[:3]
    tools = [WEATHER] if with_tools else None
    want = mt.encode_chat_completion(_mc_request(conv, tools)).tokens
    enc = encode_chat(tok, conv, fmt, tools=tools, options=options)
    assert enc.input_ids == want
    assert enc.input_ids[0] == tok.bos_id and enc.input_ids.count(tok.bos_id) == 1


@pytest.mark.parametrize("content", ["cats are mammals", '{"temperature":22}', "22", 'say "hi" \\ 22 °C'])
def test_mistral_common_v3_tool_results_on_a_model(content):
    """A tool result on Mistral v3's ``.model`` (no template: mistral-common is the reference) is
    mistral-common's ``json.dumps({"content": json.loads(content) or the text, "call_id": id})``:
    ``[TOOL_RESULTS] {"content": "cats are mammals", "call_id": "call0w3x9"}[/TOOL_RESULTS]``,
    where the template writes the text as it is (``{"content": cats are mammals, ...}``, not
    JSON; 4 fewer ids), the text ``format_chat`` still gives. Both paths: ``encode_chat`` and
    ``tokenize_chat`` (the sft run's)."""
    data = _mistral_common()
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    import rmlprep

    path = os.path.join(data, "mistral_instruct_tokenizer_240323.model.v3")
    mt = MistralTokenizer.from_file(path, mode=ValidationMode.finetuning)
    tok = rmlprep.load_tokenizer(path)
    conv = [dict(m, content=content) if m["role"] == "tool" else m for m in CONV]
    opts = {"system_placement": "last-user"}
    want = mt.encode_chat_completion(_mc_request(conv, [WEATHER])).tokens
    assert encode_chat(tok, conv, "mistral-v3", tools=[WEATHER], options=opts).input_ids == want
    out = rmlprep.tokenize_chat(tok, "mistral-v3", options=opts)({"messages": [conv], "tools": [[WEATHER]]})
    assert out["input_ids"][0].tolist() == want
    assert '[TOOL_RESULTS] {"content": ' + content + ', "call_id"' in format_chat(conv, "mistral-v3", tools=[WEATHER],
                                                                                 options=opts)
    forced = encode_chat(tok, conv, "mistral-v3", tools=[WEATHER], options={**opts, "tool_results": "template"})
    assert (forced.input_ids == want) == (content == "22")  # the one text json.dumps(json.loads(text)) gives back


@pytest.mark.parametrize("model", ["tekken_240718.json", "tekken_240911.json"])
def test_mistral_common_tekken_text(model):
    """Mistral-Nemo's tekken tokenizer (mistral-v3-tekken): rmlprep reads no tekken file, so the
    text is compared: mistral-common's tokens decoded with their control tokens kept."""
    data = _mistral_common()
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    mt = MistralTokenizer.from_file(os.path.join(data, model), mode=ValidationMode.finetuning)
    tokens = mt.encode_chat_completion(_mc_request(CONV, [WEATHER])).tokens
    want = mt.instruct_tokenizer.tokenizer.decode(tokens, special_token_policy=SpecialTokenPolicy.KEEP)
    assert format_chat(CONV, "mistral-v3-tekken", tools=[WEATHER], options={"system_placement": "last-user"}) == want


# -- openai-harmony -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    try:
        import openai_harmony as oh
    except ImportError:
        pytest.skip("openai-harmony is not installed (pip install 'rmlprep[reference]')")
    src = REAL / "hf" / "gpt-4o" / "tokenizer.json"
    if not src.is_file():
        pytest.skip(f"{src} not found: it supplies the o200k vocabulary harmony needs offline")
    from rmlprep.unicode import bytes_to_unicode

    u2b = {v: k for k, v in bytes_to_unicode().items()}
    tj = json.loads(src.read_text(encoding="utf-8"))
    added = {t["content"] for t in tj.get("added_tokens", [])}
    lines = [base64.b64encode(bytes(u2b[c] for c in t)).decode() + f" {i}"
             for t, i in sorted(tj["model"]["vocab"].items(), key=lambda kv: kv[1]) if t not in added]
    d = tmp_path_factory.mktemp("o200k")
    data = ("\n".join(lines) + "\n").encode()
    assert hashlib.sha256(data).hexdigest() == "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    (d / "o200k_base.tiktoken").write_bytes(data)
    old = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(d)
    try:
        yield oh, oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)
        else:
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = old


def test_openai_harmony_tools_and_calls(harmony):
    oh, enc = harmony
    fn = WEATHER["function"]
    system = oh.SystemContent.new().with_reasoning_effort(oh.ReasoningEffort.MEDIUM).with_conversation_start_date("2024-07-26")
    dev = oh.DeveloperContent.new().with_function_tools([oh.ToolDescription.new(fn["name"], fn["description"],
                                                                                parameters=fn["parameters"])])
    msgs = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system),
            oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev),
            oh.Message.from_role_and_content(oh.Role.USER, "Weather in Paris?"),
            oh.Message.from_role_and_content(oh.Role.ASSISTANT, json.dumps({"city": "Paris"}))
            .with_channel("commentary").with_recipient("functions.get_weather").with_content_type("json"),
            oh.Message.from_author_and_content(oh.Author.new(oh.Role.TOOL, "functions.get_weather"),
                                               json.dumps('{"t": 22}')).with_channel("commentary").with_recipient("assistant"),
            oh.Message.from_role_and_content(oh.Role.ASSISTANT, "Sunny.").with_channel("final")]
    want = enc.decode_utf8(enc.render_conversation_for_training(oh.Conversation.from_messages(msgs)))
    ours = format_chat([{"role": "user", "content": "Weather in Paris?"},
                        {"role": "assistant", "content": None,
                         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                        {"role": "tool", "content": '{"t": 22}'}, {"role": "assistant", "content": "Sunny."}],
                       "gpt-oss", tools=[WEATHER])
    assert ours == want



def test_stop_ids_of_gpt_oss_are_harmonys(harmony):
    """explorer5 X9: stop_ids(tok, "gpt-oss") gave [<|return|>, <|end|>], without <|call|>, the
    end of every tool-call message (which the masks train): generation set up with it ran past
    every call. The ids that end a generation are openai-harmony's
    ``stop_tokens_for_assistant_actions()``, <|return|> and <|call|>; its ``stop_tokens()`` add
    <|end|>, which ends every message (the analysis one too) when parsing a completion: a
    generation stopped there never wrote its final answer (review-chatc10; gpt-oss's
    generation_config.json eos_token_id [200002, 199999, 200012] leaves it out too)."""
    from rmlprep.chat import stop_ids

    _, enc = harmony
    ids = stop_ids(real_tokenizer("hf/gpt-oss"), "gpt-oss")
    assert set(ids) == set(enc.stop_tokens_for_assistant_actions()) == set(enc.stop_tokens()) - {200007}

def test_openai_harmony_known_difference_developer_instructions(harmony):
    """The Hugging Face template ends the developer instructions with "\\n\\n", harmony does not:
    rmlprep follows the template (the model's tokenizer_config), and this records the difference."""
    oh, enc = harmony
    system = oh.SystemContent.new().with_reasoning_effort(oh.ReasoningEffort.MEDIUM).with_conversation_start_date("2024-07-26")
    msgs = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system),
            oh.Message.from_role_and_content(oh.Role.DEVELOPER, oh.DeveloperContent.new().with_instructions("Be brief.")),
            oh.Message.from_role_and_content(oh.Role.USER, "Hi"),
            oh.Message.from_role_and_content(oh.Role.ASSISTANT, "Hello!").with_channel("final")]
    want = enc.decode_utf8(enc.render_conversation_for_training(oh.Conversation.from_messages(msgs)))
    ours = format_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Hello!"}], "gpt-oss")
    assert ours == want.replace("# Instructions\n\nBe brief.<|end|>", "# Instructions\n\nBe brief.\n\n<|end|>")
    assert ours != want


# -- every real chat set, live --------------------------------------------------------------------
from _chat_common import CORPORA, EXPECTED, REPO, SHARED, template_text  # noqa: E402

LIVE = sorted(n for n, f in EXPECTED.items() if f)


@functools.lru_cache(maxsize=1)
def _check_chat_sets():
    spec = importlib.util.spec_from_file_location("check_chat_sets", REPO / "tools" / "check_chat_sets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, list(mod.conversations(SHARED, None))


@pytest.mark.slow
@pytest.mark.parametrize("name", LIVE)
def test_real_chat_sets_live(name):
    """Every conversation of every ``*.messages.jsonl`` set (the tool-call set also with its
    JSON tool calls converted: 23,106 in all), rendered by the real template with jinja2
    (``tools/check_chat_sets.py``): every conversation the format writes equals the render
    byte for byte; the ones it refuses are rejects in a run. A few seconds per template."""
    pytest.importorskip("jinja2")
    if not CORPORA.is_dir():
        pytest.skip(f"{CORPORA} not found")
    mod, convs = _check_chat_sets()
    r = mod.check_template(name, template_text(name), EXPECTED[name], convs)
    assert r["differ"] == 0, r["first"]
    assert r["equal"] == r["written"] and r["written"] + r["refused"] == len(convs)
    # hermes writes only conversations with tools (the tool-call set's, converted); the others most
    assert r["written"] >= (300 if EXPECTED[name] == "hermes" else 0.95 * len(convs)), r
