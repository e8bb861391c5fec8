"""The escape hatch ``chat.format = "template"``: the model's own template in jinja2's sandbox,
masks from prefix renders; cross-checked with the native formats that reproduce the same
templates (two independent derivations of the same mask)."""

from __future__ import annotations

import pytest

from _chat_common import byte_tokenizer, needs_jinja, needs_shared, template_text
from rmlprep.arrow import tokenize_chat
from rmlprep.chat import encode_chat
from rmlprep.chat.probes import PROBES
from rmlprep.errors import ChatFormatError, ConfigError

pytestmark = [needs_jinja, needs_shared]

MARKERS = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<s>", "</s>", "[INST]", "[/INST]", "<bos>", "<start_of_turn>", "<end_of_turn>", "<|end|>", "<|endoftext|>"]


def _tok(template: str, bos: str | None = None, eos: str | None = None):
    tok = byte_tokenizer(MARKERS, bos=bos, eos=eos)
    return type(tok).create(tok.spec, chat_template=template)


@pytest.mark.parametrize("name,fmt,bos,eos", [
    ("chatml-openhermes", "chatml", None, None),
    ("llama3", "llama3", "<|begin_of_text|>", None),
    ("mistral-v7", "mistral-v7", "<s>", None),
    ("more/meta-llama-Llama-3.1-8B-Instruct", "llama3.1", "<|begin_of_text|>", None),
    ("gemma3", "gemma3", "<bos>", None),
    # eos_token in every turn (zephyr, whose render of no messages is "" even with the
    # generation prompt: the assistant_first probe) and only at the end (phi3)
    ("zephyr", "zephyr", None, "</s>"),
    ("phi3", "phi3", None, "<|endoftext|>"),
])
def test_template_mode_equals_the_native_format(name, fmt, bos, eos):
    tok = _tok(template_text(name), bos, eos)
    n = 0
    for pid, msgs, tools in PROBES:
        if pid == "special_text":
            continue  # the render is tokenized whole, as transformers does: marker text in a message is parsed
        try:
            native = encode_chat(tok, msgs, fmt, tools=tools)
        except ChatFormatError:
            continue
        try:
            hatch = encode_chat(tok, msgs, "template", tools=tools)
        except ChatFormatError:
            continue  # e.g. a field the template ignores, which the native format refuses too
        assert hatch.input_ids == native.input_ids, pid
        assert hatch.assistant_masks == native.assistant_masks, pid
        n += 1
    assert n >= 4


def test_template_mode_refuses_what_it_cannot_derive_or_would_drop():
    qwen3 = _tok(template_text("more/Qwen-Qwen3-0.6B"))
    # Qwen3 rewrites an earlier answer once a later user turn exists: no prefix-render mask
    conv = [{"role": "user", "content": "1"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "2"}, {"role": "assistant", "content": "b", "reasoning_content": "s"}]
    with pytest.raises(ChatFormatError, match="rewrites earlier turns"):
        encode_chat(qwen3, conv, "template")
    chatml = _tok(template_text("chatml-openhermes"))
    with pytest.raises(ChatFormatError, match="ignores it"):
        encode_chat(chatml, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
                                                                  "reasoning_content": "r"}], "template")
    glm = _tok(template_text("more/GLM-4.6"))  # "<|assistant|>\n<think></think>\nHello" and then the next turn
    with pytest.raises(ChatFormatError, match="message 1 .*writes nothing after the answer.*no stop token"):
        encode_chat(glm, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Hello"},
                          {"role": "user", "content": "q2"}], "template")
    with pytest.raises(ChatFormatError, match="refuses this conversation"):
        encode_chat(_tok(template_text("gemma")), [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}],
                    "template")


def test_template_mode_names_a_generation_prompt_the_whole_render_does_not_write():
    """DeepSeek-R1-Distill-Qwen's template (the trial's copy, shared/chat-templates/more) writes the
    generation prompt ``<｜Assistant｜><think>\\n</think>`` (``enable_thinking`` unset), but an answer
    in the conversation as ``<｜Assistant｜>Hello.<｜end▁of▁sentence｜>``: the prompt is not a prefix of
    the whole render, though the render of the turns before it is. Refused naming that, where it said
    "rewrites earlier turns" (a trial: every row of a one-turn corpus)."""
    r1 = _tok(template_text("more/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"))
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    with pytest.raises(ChatFormatError, match=r"message 1 \(assistant\): the chat template's generation prompt "
                       r"'<｜Assistant｜><think>\\n</think>' is not how it writes this turn .*'<｜Assistant｜>Hello\."):
        encode_chat(r1, conv, "template")


def test_template_mode_refuses_text_parts_the_template_renders_empty():
    """SmolLM3's template writes ``content if content is string else ""``: a content given as
    text parts would be an empty turn (a prompt lost, or an answer that trains only its
    terminator), so template mode refuses it as it refuses other ignored fields; a template that
    writes the parts (Gemma 3 iterates them) renders them."""
    smol = _tok(template_text("more/HuggingFaceTB-SmolLM3-3B"))
    q, four = [{"type": "text", "text": "What is 2+2?"}], [{"type": "text", "text": "4"}]
    for msgs in ([{"role": "user", "content": q}, {"role": "assistant", "content": "4"}],
                 [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": four}]):
        with pytest.raises(ChatFormatError, match=r"\((user|assistant)\): text parts: the chat template ignores them"):
            encode_chat(smol, msgs, "template")
    enc = encode_chat(smol, [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
                      "template")
    assert "user\nWhat is 2+2?<|im_end|>" in smol.decode(enc.input_ids)  # the same text as a string is written
    gemma3 = _tok(template_text("gemma3"), "<bos>")
    enc = encode_chat(gemma3, [{"role": "user", "content": q}, {"role": "assistant", "content": "4"}], "template")
    assert "What is 2+2?" in gemma3.decode(enc.input_ids)
    # parts whose text is empty are nothing to lose: not refused
    encode_chat(smol, [{"role": "user", "content": [{"type": "text", "text": ""}]}, {"role": "assistant", "content": "4"}],
                "template")


def test_a_misspelt_option_is_refused_before_any_row():
    """Template mode passes options as the template's variables: ``enable_thinkng = false`` was
    read by nothing and Qwen3 kept thinking on, without a word; it is refused naming the
    variables the template reads. With ``"auto"`` the proved format checks its options when the
    function (or the run) is made: each unit failed, and tokenize_chat failed every row with
    "fix the row"."""
    from rmlprep.chat_parity import resolve_chat_config
    from rmlprep.config import config_from_dict

    qwen3 = _tok(template_text("more/Qwen-Qwen3-0.6B"))
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    typo = {"enable_thinkng": False}
    with pytest.raises(ChatFormatError, match="option 'enable_thinkng': the chat template reads no such variable.*"
                                              "its own variables: .*enable_thinking"):
        tokenize_chat(qwen3, "template", options=typo)
    with pytest.raises(ChatFormatError, match="option 'enable_thinkng'"):
        encode_chat(qwen3, conv, "template", options=typo)
    with pytest.raises(ChatFormatError, match="qwen3: no option 'enable_thinkng'"):
        tokenize_chat(qwen3, "auto", options=typo)
    # the right spelling and today (the date, not a variable) pass; the empty think block is template text
    out = tokenize_chat(qwen3, "template", options={"enable_thinking": False, "today": "2025-01-01"})({"messages": [conv]})
    trained = [i for i, m in zip(out["input_ids"][0].tolist(), out["assistant_masks"][0].tolist()) if m]
    assert qwen3.decode(trained) == "Hello.<|im_end|>"
    for fmt, want in (("template", "chat.options: option 'enable_thinkng': the chat template reads no such"),
                      ("auto", "chat.options: chat.format = \"auto\" found 'qwen3': qwen3: no option 'enable_thinkng'")):
        c = config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": "t"},
                              "chat": {"format": fmt, "options": typo}, "pack": {"seq_len": 64}, "output": {"dir": "o"}})
        with pytest.raises(ConfigError) as e:
            resolve_chat_config(c, qwen3, log=lambda _m: None)
        assert want in str(e.value)


def test_tokenize_chat_template_mode():
    tok = _tok(template_text("llama3"), "<|begin_of_text|>")
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    out = tokenize_chat(tok, "template")({"messages": [conv]})
    native = encode_chat(tok, conv, "llama3")
    assert out["input_ids"][0].tolist() == native.input_ids
    assert out["assistant_masks"][0].tolist() == native.assistant_masks
    with pytest.raises(ConfigError, match="train_on_reasoning"):
        tokenize_chat(tok, "template", train_on_reasoning=False)
    with pytest.raises(ConfigError, match="no chat_template"):
        tokenize_chat(byte_tokenizer(MARKERS), "template")
    import pickle

    fn = pickle.loads(pickle.dumps(tokenize_chat(tok, "template")))  # a worker has the spec, not the tokenizer
    assert fn({"messages": [conv]})["input_ids"][0].tolist() == native.input_ids


def test_template_mode_writes_a_template_no_format_reproduces():
    """Granite 4.0's template is refused by detection (no native format); the escape hatch
    writes it. Worked example, read off the template: a default system prompt, each turn
    ``<|start_of_role|>{role}<|end_of_role|>{content}<|end_of_text|>\\n``; trained are the
    answers with their ``<|end_of_text|>``, not the newline after it."""
    granite = ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"]
    tok = byte_tokenizer(granite)
    tok = type(tok).create(tok.spec, chat_template=template_text("more/ibm-granite-granite-4.0"))
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]
    enc = encode_chat(tok, msgs, "template")
    assert tok.decode(enc.input_ids) == (
        "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are professional, "
        "accurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
        "<|start_of_role|>assistant<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Bye"
        "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Bye!<|end_of_text|>\n")
    masked = tok.decode_bytes([i for i, m in zip(enc.input_ids, enc.assistant_masks) if m])
    assert masked == b"Hello<|end_of_text|>Bye!<|end_of_text|>"


def test_generation_tags_render_their_body():
    """An explorer finding (G9): a template with TRL's ``{% generation %}...{% endgeneration %}``
    around the answer (what ``assistant_only_loss`` asks for) was refused as "does not compile";
    transformers compiles it with its ``AssistantTracker`` extension, whose block renders its body
    unchanged. Worked example: ``{% generation %}{{ m.content }}{% endgeneration %}`` over the
    answer "Yo" renders "Yo", so the tagged ChatML template gives the untagged one's ids and mask,
    in detection and in template mode."""
    from rmlprep.chat import detect_chat_format

    plain = template_text("chatml-openhermes")
    tagged = plain.replace("{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}",
                           "{{'<|im_start|>' + message['role'] + '\\n'}}{% generation %}{{ message['content'] + "
                           "'<|im_end|>' }}{% endgeneration %}{{ '\\n' }}")
    assert "{% generation %}" in tagged
    assert detect_chat_format(tagged) == detect_chat_format(plain) == "chatml"
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    want = encode_chat(_tok(plain), conv, "template")
    got = encode_chat(_tok(tagged), conv, "template")
    assert (got.input_ids, got.assistant_masks) == (want.input_ids, want.assistant_masks)
    assert sum(want.assistant_masks) > 0


def _jinja_render(template: str, messages, tools, **kw) -> str:
    """An independent render, set up as transformers' ``_compile_jinja_template`` (not rmlprep's)."""
    import json

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=False, **kw)


def test_template_mode_writes_a_null_content_tool_call_the_template_renders():
    """An explorer finding (G16): an OpenAI-style tool call (``content: null``) was refused as
    "the chat template refuses this conversation: TypeError" although Qwen2.5's template renders
    it; the TypeError came from rmlprep's own probe (the conversation without ``tool_calls``, where
    the null reaches Qwen's ``+ message.content``). Reference: an independent jinja2 render; the
    mask is the native qwen2.5 format's (both answers with their ``<|im_end|>``)."""
    template = template_text("qwen2.5")
    tok = _tok(template)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "W", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    conv = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "22C"}, {"role": "assistant", "content": "It is 22C."}]
    enc = encode_chat(tok, conv, "template", tools=tools)
    assert tok.decode(enc.input_ids) == _jinja_render(template, conv, tools)
    native = encode_chat(tok, conv, "qwen2.5", tools=tools)
    assert (enc.input_ids, enc.assistant_masks) == (native.input_ids, native.assistant_masks)
    assert sum(enc.assistant_masks) > 0


def test_template_mode_says_when_its_own_prefix_render_fails():
    """A template that renders the whole conversation but raises on a prefix rmlprep renders for
    the mask (here: one that insists on ending with a user turn or the full exchange) is refused
    as such, not as "the template refuses this conversation"."""
    template = ("{% if messages|length == 3 %}{{ raise_exception('prefix') }}{% endif %}"
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    conv = [{"role": "user", "content": "1"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "2"}, {"role": "assistant", "content": "b"}]
    with pytest.raises(ChatFormatError, match="renders the conversation but not its first 3 messages") as e:
        encode_chat(_tok(template), conv, "template")
    assert "refuses this conversation" not in str(e.value)


def test_zephyr_answer_first_is_masked_after_its_header_in_both_modes():
    """zephyr.jinja writes its generation prompt only after a last message, so its render of no
    messages is "" with or without it; a conversation that opens with an answer renders (jinja2)
    as ``<|assistant|>\\nHello</s>\\n<|user|>\\nq</s>\\n<|assistant|>\\na</s>\\n``. Its first answer
    is trained from after the ``<|assistant|>\\n`` header, as the second one is and as the native
    format masks it: the mask was the header too in template mode."""
    template = template_text("zephyr")
    tok = _tok(template, eos="</s>")
    conv = [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"}]
    hatch, native = encode_chat(tok, conv, "template"), encode_chat(tok, conv, "zephyr")
    assert tok.decode(hatch.input_ids) == _jinja_render(template, conv, None, eos_token="</s>")
    trained = tok.decode([i for i, m in zip(hatch.input_ids, hatch.assistant_masks) if m])
    assert trained == "Hello</s>a</s>"
    assert (hatch.input_ids, hatch.assistant_masks) == (native.input_ids, native.assistant_masks)


BOS_CHATML = ("{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
              " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def test_a_tokenizer_without_bos_renders_bos_token_as_nothing():
    """transformers renders a template with ``**tokenizer.special_tokens_map``, which holds only
    the special tokens a tokenizer sets (Qwen2/2.5/3 configs have ``"bos_token": null``), so
    ``{{ bos_token }}`` is undefined there and writes ``''``. It wrote ``'None'`` before every
    conversation in template mode (an id no reference produces), and made the format proof fail."""
    from rmlprep.chat.render import render
    from rmlprep.chat_parity import resolve_chat_format

    assert render("[{{ bos_token }}|{{ eos_token }}]", [], bos_token=None, eos_token=None) == {"output": "[|]"}
    assert render("[{{ bos_token }}|{{ eos_token }}]", [], bos_token="<s>", eos_token="</s>") == {"output": "[<s>|</s>]"}
    tok = _tok(BOS_CHATML)  # no bos, no eos
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    enc = encode_chat(tok, msgs, "template")
    # worked example: the ChatML turns, nothing before the first marker
    assert tok.decode(enc.input_ids) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
    assert enc.input_ids == encode_chat(tok, msgs, "chatml").input_ids
    assert resolve_chat_format("auto", tok) == "chatml"


def _fixture_folder(tmp_path, src, template, tokenizer_json=True, **config):
    """A copy of the model folder ``src`` whose tokenizer_config.json holds ``template``."""
    import json
    import shutil

    d = tmp_path / src.name
    d.mkdir(parents=True)
    for f in ("tokenizer.json", "special_tokens_map.json")[0 if tokenizer_json else 1:]:
        if (src / f).is_file():
            shutil.copy(src / f, d / f)
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8")) if config == {} else config
    (d / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": template}), encoding="utf-8")
    return d


def test_template_mode_passes_the_special_tokens_transformers_passes(tmp_path):
    """transformers renders a template with every special token the tokenizer sets
    (``special_tokens_map``: unk/sep/pad/cls/mask, additional_special_tokens, a config's
    extra_special_tokens), from the config, else the tokenizer class's default; rmlprep passed
    bos_token/eos_token only, so ``{{ pad_token }}`` rendered ``''`` here and ``<|endoftext|>``
    there, silently. The references: transformers 4.57.1's render of one template over nine
    real folders (fixtures/template_tokens.json, tools/make_template_tokens_fixtures.py)."""
    import hashlib
    import json
    import pickle

    from _chat_common import REAL, REPO
    from rmlprep.chat.template import TemplateWriter
    from rmlprep.folder_config import template_tokens
    from rmlprep.load import load_tokenizer

    fx = json.loads((REPO / "fixtures" / "template_tokens.json").read_text(encoding="utf-8"))
    assert fx["reference"].startswith("transformers 4.57.1")
    t, msgs = fx["template"], fx["messages"]
    checked = []
    for name, ref in fx["folders"].items():
        src = REAL / name
        if not all((src / f).is_file() and hashlib.sha256((src / f).read_bytes()).hexdigest() == h
                   for f, h in ref["sha256"].items()):
            continue
        # bos/eos as transformers passes them (rmlprep's own are the end-to-end check below)
        bos, eos = (ref["special_tokens_map"].get(k) for k in ("bos_token", "eos_token"))
        tokens = template_tokens(_fixture_folder(tmp_path, src, t, tokenizer_json=False), t)
        w = TemplateWriter(t, bos_token=bos, eos_token=eos, tokens=tokens)
        assert w.write(msgs, add_generation_prompt=True).text() == ref["render"], name
        checked.append(name)
    if not checked:
        pytest.skip(f"none of {sorted(fx['folders'])} under {REAL} as recorded")
    # end to end on one folder (the smallest): the load sets them, they reach the workers,
    # tokenize_chat takes them; the model's own template reads none (no second config parse)
    name = "hf/gpt2" if "hf/gpt2" in checked else checked[0]
    assert load_tokenizer(REAL / name).template_tokens is None
    tok = load_tokenizer(_fixture_folder(tmp_path / "e2e", REAL / name, t))
    assert tok.template_tokens == template_tokens(REAL / name, t)
    assert pickle.loads(pickle.dumps(tok)).template_tokens == tok.template_tokens
    ids = tokenize_chat(tok, "template", add_generation_prompt=True, no_assistant="keep")({"messages": [msgs]})
    assert tok.decode(list(ids["input_ids"][0])) == fx["folders"][name]["render"]
    # a run's config hash covers them (a marker made with other values is not trusted)
    from rmlprep.chat_parity import resolve_chat_config
    from rmlprep.config import config_from_dict

    cfg = config_from_dict({"pipeline": "sft", "input": {"paths": [str(tmp_path / "c.jsonl")]},
                            "tokenizer": {"path": str(tmp_path / "e2e")}, "chat": {"format": "template"},
                            "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "o")}})
    assert resolve_chat_config(cfg, tok, log=lambda m: None)["chat"]["template_tokens"] == tok.template_tokens


def test_template_tokens_reach_a_worker_that_rebuilds_the_tokenizer(tmp_path):
    """A pickled ``tokenize_chat(tok, "template")`` rebuilds its tokenizer from the spec where
    the parent's is not inherited (``num_proc`` under spawn, macOS's default; Ray): the
    folder's special tokens were lost there, so a template reading ``{{ pad_token }}`` failed
    on every row ("none was read for this tokenizer") that the parent wrote. Expected: the
    fixture's render (transformers 4.57.1, fixtures/template_tokens.json) in the worker too."""
    import json
    import pickle

    from _chat_common import REAL, REPO
    from rmlprep import arrow_base
    from rmlprep.load import load_tokenizer

    fx = json.loads((REPO / "fixtures" / "template_tokens.json").read_text(encoding="utf-8"))
    src = REAL / "hf" / "gpt2"
    if not (src / "tokenizer.json").is_file():
        pytest.skip(f"{src} not found")
    t, msgs = fx["template"], fx["messages"]
    tok = load_tokenizer(_fixture_folder(tmp_path, src, t))
    assert tok.template_tokens
    fn = tokenize_chat(tok, "template", add_generation_prompt=True, no_assistant="keep")
    blob = pickle.dumps(fn)
    saved = dict(arrow_base._TOKENIZERS)
    arrow_base._TOKENIZERS.clear()  # a spawned worker inherits no tokenizer
    try:
        ids = pickle.loads(blob)({"messages": [msgs]})["input_ids"][0]
    finally:
        arrow_base._TOKENIZERS.update(saved)
    assert tok.decode(list(ids)) == fx["folders"]["hf/gpt2"]["render"]


def test_the_class_defaults_table_is_the_fixtures():
    """rmlprep/_template_token_defaults.py is what the generator writes from the fixture's
    ``classes`` (transformers' special tokens for a config that names the class only): an edit
    of either without the other fails here, without transformers."""
    import json
    import sys

    from _chat_common import REPO

    sys.path.insert(0, str(REPO))
    try:
        from tools.make_template_tokens_fixtures import table_source
    finally:
        sys.path.remove(str(REPO))
    fx = json.loads((REPO / "fixtures" / "template_tokens.json").read_text(encoding="utf-8"))
    table = REPO / "rmlprep" / "_template_token_defaults.py"
    assert table.read_text(encoding="utf-8") == table_source(fx)
    # worked example: Qwen2.5's config sets "unk_token": null, so no unk_token is passed though
    # Qwen2TokenizerFast's default is <|endoftext|>
    assert fx["classes"]["Qwen2Tokenizer"]["special_tokens_map"]["unk_token"] == "<|endoftext|>"
    assert "unk_token" not in fx["folders"]["hf/qwen2.5"]["special_tokens_map"]


def test_a_special_token_whose_value_rmlprep_does_not_know_is_refused(tmp_path):
    """A template reading a special token the config does not set, for a tokenizer class whose
    defaults are not in the table (or with no tokenizer_config.json read), is refused in
    template mode (TemplateWriter, tokenize_chat, a run at plan time), naming the variables;
    a template option gives the value."""
    import json

    from _chat_common import REAL
    from rmlprep.chat.template import TemplateWriter
    from rmlprep.config import config_from_dict
    from rmlprep.load import load_tokenizer
    from rmlprep.pipeline import run
    from rmlprep.tokenizer import Tokenizer

    src = REAL / "hf" / "gpt2"
    if not (src / "tokenizer.json").is_file():
        pytest.skip(f"{src} not found")
    t = "{% for m in messages %}{{ m.content }}{% endfor %}[{{ pad_token }}|{{ sep_token }}|{{ image_token }}]"
    d = _fixture_folder(tmp_path, src, t, tokenizer_class="BertTokenizerFast", pad_token="<|endoftext|>")
    tok = load_tokenizer(d)
    assert tok.template_tokens == {"pad_token": "<|endoftext|>"}
    refusal = r"the chat template reads sep_token, which tokenizer_config.json does not set, and rmlprep does not know"
    with pytest.raises(ChatFormatError, match="^" + refusal):
        TemplateWriter(t, bos_token=None, eos_token=None, tokens=tok.template_tokens)
    with pytest.raises(ConfigError, match=r"^tokenize_chat\(fmt='template'\): " + refusal):
        tokenize_chat(tok, "template")
    w = TemplateWriter(t, bos_token=None, eos_token=None, tokens=tok.template_tokens, kwargs={"sep_token": "S"})
    assert w.write([{"role": "user", "content": "Hi"}]).text() == "Hi[<|endoftext|>|S|]"  # image_token: unset
    with pytest.raises(ChatFormatError, match=r"^the chat template reads image_token, pad_token, sep_token, whose values "
                                              r"rmlprep reads only from a tokenizer_config.json"):
        TemplateWriter(t, bos_token=None, eos_token=None)  # a GGUF's template, a bare Tokenizer
    with pytest.raises(ConfigError, match="and none was read for this tokenizer"):
        tokenize_chat(Tokenizer.create(tok.spec, chat_template=t), "template")
    (tmp_path / "c.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"},
                                                               {"role": "assistant", "content": "ok"}]}) + "\n")
    cfg = config_from_dict({"pipeline": "sft", "input": {"paths": [str(tmp_path / "c.jsonl")]},
                            "tokenizer": {"path": str(d)}, "chat": {"format": "template"},
                            "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "o")},
                            "run": {"workers": 1, "progress": "none"}})
    with pytest.raises(ConfigError, match=r'^chat.options: ' + refusal):
        run(cfg, log=lambda m: None)
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_a_ggufs_defaulted_bos_or_eos_read_by_the_template_is_refused_in_template_mode():
    """A GGUF naming no tokenizer.ggml.bos_token_id / eos_token_id gets llama.cpp's default id
    (spec.defaulted_ids; id 11, a byte-level vocabulary's ","; here byte 11's "ċ"). Framing with
    it is refused (tests/test_gguf.py), but template mode passed its text to the template as
    bos_token: every conversation started with it (encoded as text, since it is no control
    token), no word said. llama.cpp renders with that text, transformers' GGUF loader with no
    bos_token: a template that reads the variable is refused (encode_chat, tokenize_chat, a run
    at plan time, "auto" too), naming the variable and the GGUF key; a template option gives the
    text (it replaced the tokenizer's as in transformers; before, render() raised TypeError for
    a second bos_token); a template that reads neither renders as before."""
    from rmlprep.chat_parity import resolve_chat_config
    from rmlprep.config import config_from_dict

    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    named = _tok(template_text("llama3"), "<|begin_of_text|>")
    keyless = type(named).create(named.spec.replace(bos_id=11, eos_id=11, defaulted_ids=("bos", "eos")),
                                 chat_template=named.chat_template)
    assert keyless.spec.defaulted_ids == ("bos", "eos") and keyless.id_to_token(11) == "ċ"
    refusal = (r"the chat template reads bos_token, and the GGUF names no tokenizer\.ggml\.bos_token_id \(or one out "
               r"of range\), so its bos is llama\.cpp's default, 'ċ' \(id 11\): .* gguf_new_metadata\.py "
               r"--special-token bos TOKEN\), give the text as a template option \(bos_token in chat\.options\)")
    with pytest.raises(ChatFormatError, match="^" + refusal):
        encode_chat(keyless, conv, "template")
    with pytest.raises(ConfigError, match=r"^tokenize_chat\(fmt='template'\): " + refusal):
        tokenize_chat(keyless, "template")
    # "auto" passes no options to the template it detects from: the message names template mode
    # (it named the option alone, and "auto" with the option was refused again, review-chatc10)
    auto_refusal = refusal.replace(r"\(bos_token in chat\.options\)", r'\(chat\.format = "template" with bos_token in '
                                   r'chat\.options: "auto" passes no options to the template\), or name the native')
    assert auto_refusal != refusal
    with pytest.raises(ChatFormatError, match="^" + auto_refusal):
        tokenize_chat(keyless, "auto")
    for fmt, opts in (("template", {}), ("auto", {}), ("auto", {"bos_token": "<|begin_of_text|>"})):
        c = config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": "t"},
                              "chat": {"format": fmt, "options": opts}, "pack": {"seq_len": 64},
                              "output": {"dir": "o"}})
        with pytest.raises(ConfigError, match=f'^chat.format = "{fmt}": ' + (auto_refusal if fmt == "auto" else refusal)):
            resolve_chat_config(c, keyless, log=lambda _m: None)
    c = config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": "t"},
                          "chat": {"format": "template", "options": {"bos_token": "<|begin_of_text|>"}},
                          "pack": {"seq_len": 64}, "output": {"dir": "o"}})
    assert resolve_chat_config(c, keyless, log=lambda _m: None)["chat"]["format"] == "template"  # the way out named
    # the way out the message names: the text as an option renders as the named bos does
    want = encode_chat(named, conv, "llama3")
    opt = {"bos_token": "<|begin_of_text|>"}
    got = encode_chat(keyless, conv, "template", options=opt)
    assert (got.input_ids, got.assistant_masks) == (want.input_ids, want.assistant_masks)
    assert tokenize_chat(keyless, "template", options=opt)({"messages": [conv]})["input_ids"][0].tolist() == want.input_ids
    # eos alone (zephyr writes eos_token after each turn); a template reading neither is not refused
    zephyr = type(named).create(named.spec.replace(eos_id=11, defaulted_ids=("eos",)), chat_template=template_text("zephyr"))
    with pytest.raises(ChatFormatError, match=r"^the chat template reads eos_token, and the GGUF names no "
                                              r"tokenizer\.ggml\.eos_token_id"):
        encode_chat(zephyr, conv, "template", text_markers=True)
    chatml = type(named).create(keyless.spec, chat_template=template_text("chatml-openhermes"))
    assert "ċ" not in chatml.decode(encode_chat(chatml, conv, "template").input_ids)


@pytest.mark.parametrize("name,listed", [
    ("llama2", "none"),  # loop_messages, system_message: set in both branches of an if; content: in the loop
    ("gemma3", "none"),  # first_user_prefix, loop_messages (branches), role (the loop)
    ("more/google-gemma-4-31B-it", "enable_thinking"),  # ns_args, ns_txt, prev_nt, role...: in macros and loops
    ("more/openai-gpt-oss-120b", "builtin_tools, model_identity, reasoning_effort"),  # loop_messages, tool_call...
    ("llama3.1", "builtin_tools, custom_tools, date_string, tools_in_user_message"),  # first_user_message, tool_call
    ("mistral-v3", "system_message"),  # set when the first message is a system one, tested 'is defined' else
])
def test_a_misspelt_options_message_lists_only_what_the_template_reads_from_its_caller(name, listed):
    """The refusal of a misspelt option lists the template's own variables, from jinja2's
    find_undeclared_variables, which also reports names the template assigns in branches, loops or
    macros (llama2's {% if %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages =
    messages %}: it cannot prove the name set on every path); the list named them as if a caller
    could set them (Gemma 4: 14 names beside enable_thinking). Left out now: every name the template
    assigns and never tests for a caller's value. Expected lists read from each template: a name set
    only after 'is defined' (Llama 3.1's date_string, gpt-oss's reasoning_effort, mistral-v3's
    system_message, read from the caller when the conversation has no system message) stays."""
    tok = _tok(template_text(name))
    with pytest.raises(ChatFormatError, match=r"^option 'enable_thinkng': the chat template reads no such variable, so "
                                              rf"it would be ignored \(its own variables: {listed}; and today"):
        encode_chat(tok, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}], "template",
                    options={"enable_thinkng": False}, text_markers=True)


def test_an_option_spelling_a_boolean_the_template_reads_as_the_other_is_refused():
    """Template mode passed option values as they came: ``enable_thinking = "false"`` (quoted in
    TOML) is a string, Qwen3's ``enable_thinking is false`` is false for it, so the empty think
    block that turns thinking off was left out, as for true, without a word (a native format
    checks the type: test_chat). A value that spells a boolean without being one ("false",
    "no", 0) is refused where the template renders it as the other boolean, naming the option
    and the value to give; one it renders as meant ("true" in Qwen3), and a variable the
    template writes as text (Llama 3.1's date_string), are not."""
    from rmlprep.chat_parity import resolve_chat_config
    from rmlprep.config import config_from_dict

    qwen3 = _tok(template_text("more/Qwen-Qwen3-0.6B"))
    prompt = [{"role": "user", "content": "Hi"}]
    refusal = (r"option 'enable_thinking': 'false' is not the boolean false: the chat template renders it as it "
               r"renders True .*; give the boolean: enable_thinking = false in chat\.options \(no quotes\)")
    with pytest.raises(ChatFormatError, match="^" + refusal):
        tokenize_chat(qwen3, "template", options={"enable_thinking": "false"})
    with pytest.raises(ChatFormatError, match="^" + refusal):
        encode_chat(qwen3, prompt, "template", add_generation_prompt=True, options={"enable_thinking": "false"})
    c = config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": "t"},
                          "chat": {"format": "template", "options": {"enable_thinking": "false"}},
                          "pack": {"seq_len": 64}, "output": {"dir": "o"}})
    with pytest.raises(ConfigError, match="^chat.options: " + refusal):
        resolve_chat_config(c, qwen3, log=lambda _m: None)
    for v in ("False", "no", 0):
        with pytest.raises(ChatFormatError, match=f"^option 'enable_thinking': {v!r} is not the boolean false"):
            encode_chat(qwen3, prompt, "template", options={"enable_thinking": v})

    def gen(**opts):
        return qwen3.decode(encode_chat(qwen3, prompt, "template", add_generation_prompt=True, options=opts).input_ids)

    assert gen(enable_thinking=False).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # thinking off
    assert gen(enable_thinking="true") == gen(enable_thinking=True) == gen()  # read as meant: not refused
    llama = _tok(template_text("more/meta-llama-Llama-3.1-8B-Instruct"), "<|begin_of_text|>")
    assert "Today Date: no\n" in llama.decode(encode_chat(llama, prompt, "template", options={"date_string": "no"},
                                                          add_generation_prompt=True).input_ids)
    with pytest.raises(ChatFormatError, match="^option 'tools_in_user_message': 'false' is not the boolean false"):
        encode_chat(llama, prompt, "template", options={"tools_in_user_message": "false"})


def test_an_option_the_template_overwrites_before_reading_or_passes_itself_is_refused():
    """SmolLM3's template sets reasoning_mode from enable_thinking (and a /think or /no_think in
    the system message) before writing it, so ``reasoning_mode = "/no_think"`` was read by
    nothing that mattered and thinking stayed on, without a word; it is refused, naming the
    variable that controls it. Options named after what rmlprep passes itself (messages,
    tools, documents, add_generation_prompt) raised TypeError from render(): refused too. The
    template's real options (enable_thinking; Llama 3.1's tools_in_user_message, which it only
    defaults) are not."""
    smol = _tok(template_text("more/HuggingFaceTB-SmolLM3-3B"))
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    with pytest.raises(ChatFormatError, match=r"^option 'reasoning_mode': the chat template sets reasoning_mode itself "
                                              r"before reading it .* it is set from enable_thinking \(and the "
                                              r"conversation\): give enable_thinking instead$"):
        tokenize_chat(smol, "template", options={"reasoning_mode": "/no_think"})
    with pytest.raises(ChatFormatError, match="^option 'reasoning_mode'"):
        encode_chat(smol, conv, "template", options={"reasoning_mode": "/no_think"})
    off = smol.decode(encode_chat(smol, conv, "template", options={"enable_thinking": False}).input_ids)
    assert "Reasoning Mode: /no_think" in off
    assert "Reasoning Mode: /think" in smol.decode(encode_chat(smol, conv, "template").input_ids)
    for k in ("add_generation_prompt", "tools", "messages"):
        with pytest.raises(ChatFormatError, match=f"^option '{k}': rmlprep passes it to the chat template itself"):
            encode_chat(smol, conv, "template", options={k: True})
    llama = _tok(template_text("more/meta-llama-Llama-3.1-8B-Instruct"), "<|begin_of_text|>")
    for v in (True, False):
        encode_chat(llama, conv, "template", options={"tools_in_user_message": v})


def test_the_option_check_renders_once_per_template_and_options(monkeypatch):
    """encode_chat builds a template writer per conversation, and the option check renders the
    probes (a few dozen renders for an option the template defaults itself, as Llama 3.1 does
    date_string: 8.4 ms a call against 0.2 before the check, review-chatc10): options a template
    passed are remembered, so a second conversation renders no probe; other values are checked
    again (and a refusal is raised every time)."""
    import rmlprep.chat.render as r

    calls = []
    for name in ("_ignored", "_reads_as"):  # the check's renders (a conversation's are render()'s too)
        monkeypatch.setattr(r, name, lambda *a, _f=getattr(r, name), **k: calls.append(1) or _f(*a, **k))
    llama = _tok(template_text("more/meta-llama-Llama-3.1-8B-Instruct"), "<|begin_of_text|>")
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    first = encode_chat(llama, conv, "template", options={"date_string": "02 Feb 2025"}).input_ids
    assert len(calls) > 0
    n = len(calls)
    assert encode_chat(llama, conv, "template", options={"date_string": "02 Feb 2025"}).input_ids == first
    assert len(calls) == n
    assert "Today Date: 03 Feb 2025" in llama.decode(
        encode_chat(llama, conv, "template", options={"date_string": "03 Feb 2025"}).input_ids)
    assert len(calls) > n
    for _ in range(2):
        with pytest.raises(ChatFormatError, match="^option 'tools_in_user_message': 'false' is not the boolean false"):
            encode_chat(llama, conv, "template", options={"tools_in_user_message": "false"})


def test_option_checks_render_templates_that_concatenate_bos_and_eos():
    """The option checks rendered their probes without bos_token/eos_token, and a template that
    writes ``bos_token + '[INST] '`` (llama2.jinja; Llama 3, Zephyr likewise) raised
    UndefinedError on every probe: each value rendered the same error, so a boolean spelt as a
    string was never refused there. Worked example: llama2.jinja with the default system prompt
    branch of transformers' old Llama 2 template read from an option (``use_default_system_prompt
    == true``): ``"true"`` (quoted in TOML) is not ``true``, and the default system prompt was
    left out without a word; it is refused now, and the boolean still gives the prompt."""
    base = template_text("llama2")
    branch = "{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
    assert base.count(branch) == 1
    template = base.replace(branch, "{% elif use_default_system_prompt == true %}{% set loop_messages = messages %}"
                                    "{% set system_message = 'Be helpful.' %}" + branch)
    tok = _tok(template, "<s>", "</s>")
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    with pytest.raises(ChatFormatError, match="^option 'use_default_system_prompt': 'true' is not the boolean true"):
        encode_chat(tok, conv, "template", options={"use_default_system_prompt": "true"})
    on = tok.decode(encode_chat(tok, conv, "template", options={"use_default_system_prompt": True}).input_ids)
    assert on.startswith("<s>[INST] <<SYS>>\nBe helpful.\n<</SYS>>\n\nHi [/INST]")


def test_a_ggufs_defaulted_bos_read_by_the_template_is_refused_when_proving_a_named_format():
    """The parity stage proves a named native format against the tokenizer's template by rendering
    the template's probes, with the tokenizer's bos text as bos_token. For a GGUF naming no
    tokenizer.ggml.bos_token_id that is llama.cpp's default id 11 (here byte 11's "ċ"): the
    template's renders started with it, no format could match, and the run failed with a
    ParityError (exit 3) that named no key. Refused before the probes with the message of the
    other refusals of that id (test above), as a ConfigError (exit 2) naming parity.chat = false
    as the way to run the format unchecked; with the id named in the file the format is proved."""
    from rmlprep.chat_parity import run_chat_parity_stage
    from rmlprep.config import config_from_dict

    named = _tok(template_text("llama3"), "<|begin_of_text|>")
    keyless = type(named).create(named.spec.replace(bos_id=11, eos_id=11, defaulted_ids=("bos", "eos")),
                                 chat_template=named.chat_template)

    def cfg(**parity):
        return config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": "t"},
                                 "chat": {"format": "llama3"}, "pack": {"seq_len": 64}, "output": {"dir": "o"},
                                 "parity": parity})

    with pytest.raises(ConfigError, match=r"^parity.chat: proving chat.format = 'llama3' against the tokenizer's chat "
                                          r"template: the chat template reads bos_token, and the GGUF names no "
                                          r"tokenizer\.ggml\.bos_token_id \(or one out of range\), so its bos is "
                                          r"llama\.cpp's default, 'ċ' \(id 11\): .*--special-token bos TOKEN\), or set "
                                          r"parity\.chat = false to write chat\.format = 'llama3' without comparing it "
                                          r"with the template"):
        run_chat_parity_stage(cfg(), keyless, [], log=lambda _m: None)
    assert run_chat_parity_stage(cfg(), named, [], log=lambda _m: None)["template"]["proved_by"] == "jinja2 probes"
    assert run_chat_parity_stage(cfg(chat=False), keyless, [], log=lambda _m: None) is None  # the way out named


def test_a_null_content_the_template_cannot_read_is_named():
    """Qwen3's template reads ``'</think>' in message.content`` for an assistant message without
    ``reasoning_content``, which fails on a null content (a tool call without text, as OpenAI's
    schema and ``chat.json_tools`` write it): jinja2 raises TypeError, as transformers'
    ``apply_chat_template`` would. The row error said only "TypeError: argument of type
    'NoneType' is not iterable" (trial19: 543 of 650 rows of sft-tools.toml's set); it now names
    message 1 and what to give instead."""
    tok = _tok(template_text("more/Qwen-Qwen3-0.6B"))
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}
    msgs = [{"role": "user", "content": "hi"}, call, {"role": "tool", "content": "r"},
            {"role": "assistant", "content": "ok"}]
    err = tokenize_chat(tok, "template", on_error="record", tools_column=None)({"messages": [msgs]})["error"][0]
    assert err.startswith("the chat template refuses this conversation: TypeError: argument of type 'NoneType' is "
                          "not iterable; message 1 (assistant) has a null content"), err
    assert err.endswith('give such messages content ""'), err


@pytest.mark.parametrize("name,reads", [("more/Qwen-Qwen3-0.6B", "reasoning_content"),
                                        ("more/openai-gpt-oss-120b", "thinking")])
def test_template_mode_passes_reasoning_under_the_rows_own_name(name, reads):
    """chat.format = "template" renders "as transformers does", but passed an answer's reasoning
    under both reasoning_content and thinking whatever name the row gave it, so Qwen3's template
    (it reads reasoning_content) wrote a row's "thinking" and gpt-oss's (it reads thinking) a
    row's "reasoning_content", which apply_chat_template on the row leaves out. Now the template
    sees the row's own name: the reasoning under the name it reads is written as the template's
    render of the raw row (jinja2, expected text below); under another it is refused, as every
    field the template ignores is, naming the name it reads (text_markers: gpt-oss's markers are
    text in the test's byte vocabulary, on both sides)."""
    from rmlprep.chat.render import render

    tpl = template_text(name)
    tok = _tok(tpl, eos="<|endoftext|>")
    for key in ("reasoning_content", "reasoning", "thinking"):
        msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4", key: "I add them."}]
        if key == reads:
            text = render(tpl, msgs, add_generation_prompt=False, bos_token=None, eos_token="<|endoftext|>",
                          now="2024-07-26")["output"]
            assert "I add them." in text
            assert encode_chat(tok, msgs, "template", text_markers=True).input_ids == tok.encode(text, parse_special=True)
        else:
            with pytest.raises(ChatFormatError, match=rf"^message 1 \(assistant\): reasoning: the chat template ignores "
                                                      rf"it under '{key}' .* and reads it as '{reads}': rename the field"):
                encode_chat(tok, msgs, "template", text_markers=True)
