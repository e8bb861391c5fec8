"""Loss masks tested token by token against expectations that do not come from rmlprep's writer.

Two independent sources:

1. **Worked examples** (``WORKED``): each conversation's text is written out by hand as runs
   of ``(text, trained)``, following the rule "an assistant turn is trained from the first
   character after its generation prompt up to and including its terminator; reasoning too
   unless turned off; tool results, system, user and template text never". The runs must
   join to the real template's render; with a real tokenizer, the reference tokenizer's own
   ids and character offsets (Hugging Face ``tokenizers``) give the expected mask: a token is
   trained iff its characters overlap a trained run. Without one, a byte tokenizer (one token
   per byte, the format's markers as control tokens) makes every trained byte exact.
2. **Masks derived from the real template** (``test_masks_match_prefix_renders``): for each
   assistant message ``i``, rendering ``messages[:i]`` with the generation prompt and
   ``messages[:i + 1]`` without it (jinja2, as transformers does) brackets the turn; the
   trained characters of rmlprep's segments must be exactly those brackets, cut after the
   turn's terminator.

A deliberate change that makes Llama 3's ``<|eot_id|>`` untrainable fails both.
"""

from __future__ import annotations

import pytest

from _chat_common import (
    EXPECTED, REAL, a, byte_tokenizer, needs_jinja, needs_shared, real_tokenizer, s, template_text, u,
)
from rmlprep import chat_parity
from rmlprep.chat import encode_chat, format_chat, format_chat_segments
from rmlprep.chat.probes import WEATHER
from rmlprep.chat.registry import get_format
from rmlprep.errors import ChatFormatError

DS_BOS, DS_EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"
DS_U, DS_A = "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"
CALL = {"id": "call0w3x9", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
RESULT = {"role": "tool", "content": "sunny", "tool_call_id": "call0w3x9"}


QWEN_TOOLS_HEAD = ("<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                   "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n")
QWEN_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                   "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                   "<args-json-object>}\n</tool_call><|im_end|>\n")
WEATHER_JSON = ('{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a '
                'city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The '
                'city name."}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature '
                'unit."}}, "required": ["city"]}}}')

#: (id, format, tokenizer under REAL or None, messages, tools, options, train_on_reasoning, runs)
WORKED = [
    ("llama3", "llama3", "hf/llama3", [u("Hi"), a("Hello")], None, None, True, [
        ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n", 0),
        ("Hello<|eot_id|>", 1)]),
    ("llama3.1-tool-call", "llama3.1", "hf/llama3", [u("Weather?"), a(None, tool_calls=[CALL]), RESULT, a("Sunny.")],
     None, None, True, [
        ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
         "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n", 0),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>', 1),
        ('<|start_header_id|>ipython<|end_header_id|>\n\n"sunny"<|eot_id|>'
         "<|start_header_id|>assistant<|end_header_id|>\n\n", 0),
        ("Sunny.<|eot_id|>", 1)]),
    ("qwen3-reasoning", "qwen3", "hf/qwen3", [u("2+2?"), a("4", reasoning_content="add")], None, None, True, [
        ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", 0),
        ("<think>\nadd\n</think>\n\n", 1),
        ("4<|im_end|>", 1),
        ("\n", 0)]),
    ("qwen3-reasoning-untrained", "qwen3", "hf/qwen3", [u("2+2?"), a("4", reasoning_content="add")], None, None, False, [
        ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd\n</think>\n\n", 0),
        ("4<|im_end|>", 1),
        ("\n", 0)]),
    # enable_thinking=False: the generation prompt ends with an empty think block, so an answer
    # written with it is trained from after it (the prefix renders of Qwen3's template agree)
    ("qwen3-no-think", "qwen3", "hf/qwen3", [u("Hi"), a("Hello")], None, {"enable_thinking": False}, True, [
        ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", 0),
        ("Hello<|im_end|>", 1),
        ("\n", 0)]),
    ("qwen3-no-think-reasoning", "qwen3", "hf/qwen3", [u("2+2?"), a("4", reasoning_content="add")], None,
     {"enable_thinking": False}, True, [
        ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", 0),
        ("<think>\nadd\n</think>\n\n", 1),  # its own think block: no generation prompt's, reasoning as ever
        ("4<|im_end|>", 1),
        ("\n", 0)]),
    ("qwen3-history-and-tools", "qwen3", "hf/qwen3",
     [u("Hi"), a("Hello", reasoning_content="greet"), u("Weather?"), a("", tool_calls=[CALL]), RESULT,
      a("Sunny.", reasoning_content="it said sunny")], [WEATHER], None, True, [
        (QWEN_TOOLS_HEAD + WEATHER_JSON + QWEN_TOOLS_TAIL + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0),
        ("Hello<|im_end|>", 1),  # history: its reasoning is dropped, as the template drops it
        ("\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", 0),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>', 1),
        ("\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 0),
        ("<think>\nit said sunny\n</think>\n\nSunny.<|im_end|>", 1),
        ("\n", 0)]),
    ("qwen2.5-default-system", "qwen2.5", "hf/qwen2.5", [u("Hi"), a("Hello")], None, None, True, [
        ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0),
        ("Hello<|im_end|>", 1),
        ("\n", 0)]),
    ("gpt-oss", "gpt-oss", "hf/gpt-oss", [u("Hi"), a("Hello", reasoning_content="greet")], None, None, True, [
        ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
         "2024-06\nCurrent date: 2024-07-26\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
         "Channel must be included for every message.<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant", 0),
        ("<|channel|>analysis<|message|>greet<|end|>", 1),
        ("<|start|>assistant<|channel|>final<|message|>Hello<|return|>", 1)]),
    ("phi3", "phi3", "hf/phi-3-mini", [u("Hi"), a("Hello")], None, None, True, [
        ("<|user|>\nHi<|end|>\n<|assistant|>\n", 0),
        ("Hello<|end|>", 1),
        ("\n<|endoftext|>", 0)]),
    ("mistral-v1", "mistral-v1", "hf/mistral-7b-v0.1", [s("Be brief."), u("Hi"), a("Hello")], None, None, True, [
        ("<s> [INST] Be brief.\n\nHi [/INST]", 0),
        (" Hello</s>", 1)]),
    ("deepseek-v3.1", "deepseek-v3.1", None, [u("Hi"), a("Hello"), u("Q"), a(None, tool_calls=[CALL]), RESULT,
                                              a("Sunny.")], None, None, True, [
        (f"{DS_BOS}{DS_U}Hi{DS_A}<think></think>", 0),
        (f"Hello{DS_EOS}", 1),
        (f"{DS_U}Q{DS_A}<think></think>", 0),
        ('<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>get_weather'
         '<\uff5ctool\u2581sep\uff5c>{"city": "Paris"}<\uff5ctool\u2581call\u2581end\uff5c>'
         f'<\uff5ctool\u2581calls\u2581end\uff5c>{DS_EOS}', 1),
        ("<\uff5ctool\u2581output\u2581begin\uff5c>sunny<\uff5ctool\u2581output\u2581end\uff5c>", 0),
        (f"Sunny.{DS_EOS}", 1)]),
    ("deepseek-r1", "deepseek-r1", None, [u("Hi"), a("<think>greet</think>Hello"), u("Bye"), a("Bye!")], None, None,
     True, [
        (f"{DS_BOS}{DS_U}Hi{DS_A}", 0),
        (f"Hello{DS_EOS}", 1),
        (f"{DS_U}Bye{DS_A}", 0),
        (f"Bye!{DS_EOS}", 1)]),
    ("gemma3", "gemma3", None, [s("Be brief."), u(" Hi "), a(" Hello ")], None, None, True, [
        ("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n", 0),
        ("Hello<end_of_turn>", 1),
        ("\n", 0)]),
    ("gemma4", "gemma4", None, [u("Hi"), a("Hello")], None, None, True, [
        ("<bos><|turn>user\nHi<turn|>\n<|turn>model\n", 0),
        ("Hello<turn|>", 1),
        ("\n", 0)]),
    ("gemma4-tools", "gemma4", None, [u("Weather?"), a(None, tool_calls=[CALL]), RESULT, a("Sunny.")],
     [{"type": "function", "function": {"name": "get_weather", "description": "Get weather.", "parameters": {
         "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], None, True, [
        ('<bos><|turn>system\n<|tool>declaration:get_weather{description:<|"|>Get weather.<|"|>,parameters:{'
         'properties:{city:{type:<|"|>STRING<|"|>}},required:[<|"|>city<|"|>],type:<|"|>OBJECT<|"|>}}<tool|><turn|>\n'
         "<|turn>user\nWeather?<turn|>\n<|turn>model\n", 0),
        # the model ends its calls with <|tool_response> (a stop id of Gemma 4's generation config); the
        # result follows it, and the answer continues the model turn with no generation prompt
        ('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><|tool_response>', 1),
        ('response:get_weather{value:<|"|>sunny<|"|>}<tool_response|>', 0),
        ("Sunny.<turn|>", 1),
        ("\n", 0)]),
    ("mistral-v3-tools", "mistral-v3", None, [u("Weather?"), a(None, tool_calls=[CALL]), RESULT, a("Sunny.")],
     None, None, True, [
        ("<s>[INST] Weather?[/INST]", 0),
        ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call0w3x9"}]</s>', 1),
        ('[TOOL_RESULTS] {"content": sunny, "call_id": "call0w3x9"}[/TOOL_RESULTS]', 0),
        (" Sunny.</s>", 1)]),
    ("mistral-small-3.2-tools", "mistral-small-3.2", None,
     [s("S"), u("Weather?"), a(None, tool_calls=[CALL]), RESULT, a("Sunny.")], None, None, True, [
        ("<s>[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]Weather?[/INST]", 0),
        ('[TOOL_CALLS]get_weather[CALL_ID]call0w3x9[ARGS]{"city": "Paris"}</s>', 1),
        ("[TOOL_RESULTS]call0w3x9[TOOL_CONTENT]sunny[/TOOL_RESULTS]", 0),
        ("Sunny.</s>", 1)]),
    ("llama2", "llama2", None, [s("S"), u("Hi"), a("Hello"), u("Bye"), a("Bye!")], None, None, True, [
        ("<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]", 0),
        (" Hello </s>", 1),
        ("<s>[INST] Bye [/INST]", 0),
        (" Bye! </s>", 1)]),
    ("command-r", "command-r", None, [u("Hi"), a("Hello")], None, None, True, [
        ("<BOS_TOKEN><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>"
         "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", 0),
        ("Hello<|END_OF_TURN_TOKEN|>", 1)]),
    ("deepseek-llm", "deepseek-llm", None, [u("Hi"), a("Hello")], None, None, True, [
        (f"{DS_BOS}User: Hi\n\nAssistant:", 0),
        (f" Hello{DS_EOS}", 1)]),
    ("zephyr", "zephyr", None, [u("Hi"), a("Hello")], None, None, True, [
        ("<|user|>\nHi</s>\n<|assistant|>\n", 0),
        ("Hello</s>", 1),
        ("\n", 0)]),
    ("qwen3-coder", "qwen3-coder", None, [u("Weather?"), a(None, tool_calls=[CALL]), RESULT, a("Sunny.")], None, None,
     True, [
        ("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", 0),
        ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
         "<|im_end|>", 1),
        ("\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n", 0),
        ("Sunny.<|im_end|>", 1),
        ("\n", 0)]),
    ("kimi-k2", "kimi-k2", None, [u("Weather?"), a("Let me see.", tool_calls=[CALL]), RESULT, a("Sunny.")], None, None,
     True, [
        ("<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user<|im_middle|>Weather?"
         "<|im_end|><|im_assistant|>assistant<|im_middle|>", 0),
        ('Let me see.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
         '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>', 1),
        ("<|im_system|>tool<|im_middle|>## Return of call0w3x9\\nsunny<|im_end|>"
         "<|im_assistant|>assistant<|im_middle|>", 0),
        ("Sunny.<|im_end|>", 1)]),
    # SmolLM3 writes its reasoning as a leading <think>…</think> of the content (its template has
    # no reasoning field): that block is reasoning, left out with train_on_reasoning off
    ("smollm3-think-in-content", "smollm3", None, [s("Be brief."), u("Hi"), a("<think>\nhmm\n</think>\n\nHello")],
     None, None, False, [
        ("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n"
         "## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0),
        ("<think>\nhmm\n</think>\n\n", 0),
        ("Hello<|im_end|>", 1),
        ("\n", 0)]),
    ("smollm3-think-in-content-trained", "smollm3", None, [s("Be brief."), u("Hi"), a("<think>\nhmm\n</think>\n\nHello")],
     None, None, True, [
        ("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n"
         "## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", 0),
        ("<think>\nhmm\n</think>\n\nHello<|im_end|>", 1),
        ("\n", 0)]),
    ("smollm3-no-think", "smollm3", None, [s("Be brief. /no_think"), u("Hi"), a("Hello")], None, None, True, [
        ("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /no_think\n\n"
         "## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
         "<|im_start|>assistant\n<think>\n\n</think>\n", 0),
        ("Hello<|im_end|>", 1),
        ("\n", 0)]),
]

#: The markers of each family, as control tokens of the byte tokenizer.
MARKERS = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]",
           "[/SYSTEM_PROMPT]", "[CALL_ID]", "[ARGS]", "[TOOL_CONTENT]", "<bos>", "<start_of_turn>", "<end_of_turn>",
           "<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
           "<tool_response|>", '<|"|>', DS_BOS, DS_EOS, DS_U, DS_A, "<BOS_TOKEN>", "<|START_OF_TURN_TOKEN|>",
           "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
           "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581begin\uff5c>",
           "<\uff5ctool\u2581sep\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>",
           "<\uff5ctool\u2581output\u2581begin\uff5c>", "<\uff5ctool\u2581output\u2581end\uff5c>",
           "<|im_system|>", "<|im_middle|>", "<|im_user|>", "<|im_assistant|>", "<|tool_calls_section_begin|>",
           "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"]


def _trained_chars(runs) -> list[bool]:
    out: list[bool] = []
    for text, t in runs:
        out += [bool(t)] * len(text)
    return out


def check_worked(case) -> None:
    """Assert rmlprep's text and mask for a worked example (AssertionError on a difference)."""
    _, fmt, tok_name, msgs, tools, options, train_reasoning, runs = case
    text = "".join(t for t, _ in runs)
    assert format_chat(msgs, fmt, tools=tools, options=options) == text
    trained = _trained_chars(runs)
    if tok_name is None:
        tok = byte_tokenizer(MARKERS)
        enc = encode_chat(tok, msgs, fmt, tools=tools, options=options, train_on_reasoning=train_reasoning)
        # one token per byte or marker: the trained bytes are exactly the trained runs
        masked = tok.decode_bytes([i for i, m in zip(enc.input_ids, enc.assistant_masks) if m]).decode("utf-8")
        assert masked == "".join(t for t, k in runs if k)
        assert tok.decode(enc.input_ids) == text
        return
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer(tok_name)
    ref = tokenizers.Tokenizer.from_file(str(REAL / tok_name / "tokenizer.json")).encode(text, add_special_tokens=False)
    enc = encode_chat(tok, msgs, fmt, tools=tools, options=options, train_on_reasoning=train_reasoning)
    assert enc.input_ids == ref.ids
    want = [int(any(trained[a:b]) if b > a else trained[min(a, len(trained) - 1)]) for a, b in ref.offsets]
    assert enc.assistant_masks == want, [(t, m, w) for t, m, w in zip(ref.tokens, enc.assistant_masks, want) if m != w]
    assert enc.labels == [i if m else -100 for i, m in zip(enc.input_ids, enc.assistant_masks)]


@pytest.mark.parametrize("case", WORKED, ids=[w[0] for w in WORKED])
def test_worked_examples(case):
    check_worked(case)


def test_empty_answer_trains_its_terminator_and_generation_prompt_nothing():
    tok = byte_tokenizer(MARKERS)
    enc = encode_chat(tok, [u("q"), a("")], "chatml")
    assert tok.decode_bytes([i for i, m in zip(enc.input_ids, enc.assistant_masks) if m]) == b"<|im_end|>"
    enc = encode_chat(tok, [u("q")], "chatml", add_generation_prompt=True)
    assert sum(enc.assistant_masks) == 0 and set(enc.labels) == {-100}


def test_straddling_token_is_trained():
    """Qwen's byte-level BPE merges the template's "\\n" with an answer's leading "\\n": the
    token straddles the border and is trained (the model must write it)."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer("hf/qwen2.5")
    msgs = [u("q"), a("\nhi")]
    text = format_chat(msgs, "qwen2.5")
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf/qwen2.5/tokenizer.json")).encode(text, add_special_tokens=False)
    enc = encode_chat(tok, msgs, "qwen2.5")
    k = ref.tokens.index("ĊĊ")
    assert enc.input_ids == ref.ids and enc.assistant_masks[k] == 1 and enc.assistant_masks[k - 1] == 0


def test_special_token_swallowing_an_answers_whitespace_is_not_trained():
    """Phi-3's ``<|assistant|>`` has ``rstrip``: before an answer that starts with spaces (an
    oasst answer does) it swallows the template's "\\n" and those spaces (``tokenizers``' offsets
    cover them). It stays the template's, untrained; the answer's first word is trained."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer("hf/phi-3-mini")
    msgs = [u("q"), a("  If you")]
    text = format_chat(msgs, "phi3")
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf/phi-3-mini/tokenizer.json")).encode(text, add_special_tokens=False)
    enc = encode_chat(tok, msgs, "phi3")
    k = next(i for i, t in enumerate(ref.tokens) if t.startswith("<|assistant|>"))
    assert enc.input_ids == ref.ids
    assert text[ref.offsets[k][0]:ref.offsets[k][1]] == "<|assistant|>\n  "
    assert enc.assistant_masks[k] == 0 and enc.assistant_masks[k + 1] == 1 and ref.tokens[k + 1] == "▁If"


# -- masks derived from the real templates ---------------------------------------------------------
#: The text that closes an assistant turn in each family (read off the templates).
TERMINATORS = {"<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", "<turn|>", "<|end|>", DS_EOS,
               "<|END_OF_TURN_TOKEN|>", "<|return|>", "<|call|>"}
FIXTURE_BANNER, FIXTURE_ROWS = (chat_parity.load_renders(chat_parity.renders_path())
                                if chat_parity.renders_path().is_file() else ({}, []))


def _derived_spans(template: str, fmt_bos, fmt_eos, msgs, tools, options=None) -> list[tuple[int, int]] | None:
    """Trained character spans from prefix renders of the real template (``options`` as its
    variables, ``today`` as the date), or None when the template rewrites earlier turns (a
    prefix render is not a prefix of the whole up to the turn's terminator)."""
    from rmlprep.chat.messages import parse_conversation
    from rmlprep.chat.registry import get_format, template_view
    from rmlprep.chat.render import render

    conv = parse_conversation(msgs, tools)
    f = get_format(EXPECTED_BY_TEMPLATE[template])
    vm, vt = template_view(conv, f)
    src = template_text(template)

    kw = dict(options or {})
    now = kw.pop("today", None) or "2024-07-26"

    def r(m, gen):
        out = render(src, m, tools=vt, add_generation_prompt=gen, bos_token=fmt_bos, eos_token=fmt_eos, now=now, **kw)
        return out.get("output")

    full = r(vm, False)
    if full is None:
        return None
    spans = []
    for i, m in enumerate(vm):
        if m["role"] != "assistant":
            continue
        head, upto = r(vm[:i], True) if i else None, r(vm[: i + 1], False)
        if head is None or upto is None or not full.startswith(head):
            return None
        end = max((upto.rfind(t) + len(t) for t in TERMINATORS if upto.rfind(t) >= len(head)), default=None)
        end = end if end is not None else len(upto.rstrip())
        if not full.startswith(upto[:end]):  # Phi-3's eos after the last turn is not in the whole: cut off
            return None
        spans.append((len(head), end))
    return spans


EXPECTED_BY_TEMPLATE = {n: f for n, f in EXPECTED.items() if f}


def check_prefix_renders(template: str, options=None, *, hatch: bool = False) -> int:
    """Assert that rmlprep's trained characters are the prefix-render brackets on every fixture
    conversation of ``template`` whose prefix renders are prefixes; returns how many were checked.
    ``hatch``: check ``chat.format = "template"``'s writer instead of the native format."""
    fmt = EXPECTED[template]
    info = FIXTURE_BANNER["templates"][template]
    convs = {}
    for r in FIXTURE_ROWS:
        if r["template"] == template and not r["add_generation_prompt"] and "output" in r:
            convs[r["conversation_id"]] = (r["messages"], r.get("tools"))
    if hatch:
        from rmlprep.chat.template import TemplateWriter

        kw = dict(options or {})
        writer = TemplateWriter(template_text(template), bos_token=info["bos_token"], eos_token=info["eos_token"],
                                today=kw.pop("today", None), kwargs=kw)
    checked = 0
    for cid, (msgs, tools) in sorted(convs.items()):
        try:
            segs = (writer.write(msgs, tools=tools).segs if hatch
                    else format_chat_segments(msgs, fmt, tools=tools, options=options))
        except ChatFormatError:
            continue
        spans = _derived_spans(template, info["bos_token"], info["eos_token"], msgs, tools, options)
        if spans is None:
            continue
        want = set()
        for x, y in spans:
            want.update(range(x, y))
        got, pos = set(), 0
        for sg in segs:
            if sg.kind in ("assistant", "reasoning"):
                got.update(range(pos, pos + len(sg.text)))
            pos += len(sg.text)
        assert got == want, (cid, sorted(got ^ want)[:10])
        checked += 1
    return checked


@needs_shared
@needs_jinja
@pytest.mark.parametrize("template", sorted(n for n, t in FIXTURE_BANNER.get("templates", {}).items() if t["format"]))
def test_masks_match_prefix_renders(template):
    checked = check_prefix_renders(template)
    floor = {"hermes": 3, "gemma": 5, "gemma4": 5, "deepseek-r1": 0, "deepseek-r1-llamacpp": 0}.get(EXPECTED[template], 8)
    assert checked >= floor, checked


#: (template, options) for every option set a format is proved with besides its defaults
#: (gemma4 with enable_thinking: only the first <|tool_response> of a run of tool results is the
#: model's, the prefix renders give the others to the results).
WITH_OPTIONS = [(n, o) for n, t in sorted(FIXTURE_BANNER.get("templates", {}).items()) if t["format"]
                for o in get_format(EXPECTED[n]).probe_options]


@needs_shared
@needs_jinja
@pytest.mark.parametrize("template,options", WITH_OPTIONS, ids=[f"{n}-{o}" for n, o in WITH_OPTIONS])
def test_masks_match_prefix_renders_with_options(template, options):
    """As above with the format's other options (Qwen3 and SmolLM3 with ``enable_thinking =
    false``, whose generation prompt ends with an empty think block: template text, never
    trained; DeepSeek-V3.1 with it on...)."""
    assert check_prefix_renders(template, options) >= 5


@needs_shared
@needs_jinja
@pytest.mark.parametrize("template,options", [
    ("phi3", None), ("phi3.5", None), ("more/Qwen-Qwen3-0.6B", {"enable_thinking": False}), ("llama3.1", None),
    ("more/openai-gpt-oss-120b", None), ("qwen2.5", None)])
def test_template_hatch_masks_match_prefix_renders(template, options):
    """``chat.format = "template"`` gives the same brackets, so the same mask as the native
    format: Phi-3's eos after the last turn (written where the generation prompt would go) is
    no part of the turn, and its multi-turn conversations are not refused for it; gpt-oss's
    ``<|return|>``, which ends its last answer, is."""
    assert check_prefix_renders(template, options, hatch=True) >= 8


# -- the checks above catch a deliberate bug ----------------------------------------------------------
def _eot_untrainable(monkeypatch):
    """The bug of the issue: Llama 3's ``<|eot_id|>`` written as template text (untrainable)."""
    from rmlprep.chat import segments

    real_a = segments.Out.a
    monkeypatch.setattr(segments.Out, "a", lambda self, text: self.t(text, "template") if text == "<|eot_id|>"
                        else real_a(self, text))


def test_eot_untrainable_fails_the_worked_examples(monkeypatch):
    """With ``<|eot_id|>`` out of the mask, the worked examples for Llama 3 and 3.1 (real
    tokenizer, offsets from ``tokenizers``) fail; without the bug they pass."""
    cases = [c for c in WORKED if c[1] in ("llama3", "llama3.1")]
    for c in cases:
        check_worked(c)
    _eot_untrainable(monkeypatch)
    tok = byte_tokenizer(MARKERS)
    enc = encode_chat(tok, [u("Hi"), a("Hello")], "llama3")
    assert tok.decode_bytes([i for i, m in zip(enc.input_ids, enc.assistant_masks) if m]) == b"Hello"  # the bug is on
    for c in cases:
        with pytest.raises(AssertionError):
            check_worked(c)


@needs_shared
@needs_jinja
@pytest.mark.parametrize("template", ["llama3", "llama3.1"])
def test_eot_untrainable_fails_the_prefix_renders(template, monkeypatch):
    """The same bug fails the masks derived from the real Llama 3 / 3.1 templates."""
    assert check_prefix_renders(template) >= 8
    _eot_untrainable(monkeypatch)
    with pytest.raises(AssertionError):
        check_prefix_renders(template)
