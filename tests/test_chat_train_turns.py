"""``train_turns = "last"``: only the assistant turns after the last user message are trained.

Expected masks come from hand-written runs of ``(text, trained)`` (as in test_chat_masks.py),
whose trained characters are mapped onto the reference tokenizer's own ids and offsets
(Hugging Face ``tokenizers``); the ids must be those of ``train_turns = "all"``, which
test_chat_masks checks against the real templates.
"""

from __future__ import annotations

import pytest

from _chat_common import REAL, a, real_tokenizer, u
from rmlprep.arrow import tokenize_chat
from rmlprep.chat import encode_chat, format_chat
from rmlprep.chat.probes import WEATHER
from rmlprep.errors import ConfigError
from test_chat_masks import CALL, QWEN_TOOLS_HEAD, QWEN_TOOLS_TAIL, RESULT, WEATHER_JSON

CHATML = [u("Hi"), a("Hello"), u("Bye"), a("Ok")]
QWEN3 = [u("Hi"), a("Hello", reasoning_content="greet"), u("Weather?"), a("", tool_calls=[CALL]), RESULT,
         a("Sunny.", reasoning_content="it said sunny")]


def _check(tok_name, fmt, msgs, tools, runs, **kw):
    """rmlprep's ids equal the reference's for the joined runs; a token is trained iff its
    characters overlap a trained run. Returns the encoding."""
    tokenizers = pytest.importorskip("tokenizers")
    text = "".join(t for t, _ in runs)
    assert format_chat(msgs, fmt, tools=tools) == text
    trained: list[bool] = []
    for t, k in runs:
        trained += [bool(k)] * len(t)
    ref = tokenizers.Tokenizer.from_file(str(REAL / tok_name / "tokenizer.json")).encode(text, add_special_tokens=False)
    enc = encode_chat(real_tokenizer(tok_name), msgs, fmt, tools=tools, **kw)
    assert enc.input_ids == ref.ids
    want = [int(any(trained[x:y])) for x, y in ref.offsets]
    assert enc.assistant_masks == want, [(t, m, w) for t, m, w in zip(ref.tokens, enc.assistant_masks, want) if m != w]
    assert enc.labels == [i if m else -100 for i, m in zip(enc.input_ids, enc.assistant_masks)]
    return enc


def test_chatml_last_turn_only():
    """Qwen2.5 (ChatML), ``[user "Hi", assistant "Hello", user "Bye", assistant "Ok"]``: with
    ``"last"`` only ``Ok<|im_end|>`` is trained; ``Hello<|im_end|>`` stays as context; with
    ``"all"`` both are (the default)."""
    head = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    mid = "\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
    enc = _check("hf/qwen2.5", "qwen2.5", CHATML, None,
                 [(head, 0), ("Hello<|im_end|>", 0), (mid, 0), ("Ok<|im_end|>", 1), ("\n", 0)], train_turns="last")
    assert enc.notes == {"history_untrained": 1}
    enc = _check("hf/qwen2.5", "qwen2.5", CHATML, None,
                 [(head, 0), ("Hello<|im_end|>", 1), (mid, 0), ("Ok<|im_end|>", 1), ("\n", 0)])
    assert enc.notes == {}


def test_qwen3_last_turn_keeps_its_tool_calls_and_withdraws_the_no_think_count():
    """Qwen3: the history answer (written without a think block, counted as
    ``answers_without_think`` when trained) is left out and no longer counted; the call and the
    final answer after the last user message, each as the template writes it, are trained (the
    call has no think block either: still counted)."""
    runs = [(QWEN_TOOLS_HEAD + WEATHER_JSON + QWEN_TOOLS_TAIL + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
             0),
            ("Hello<|im_end|>", 0),
            ("\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", 0),
            ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>', 1),
            ("\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n", 0),
            ("<think>\nit said sunny\n</think>\n\nSunny.<|im_end|>", 1),
            ("\n", 0)]
    enc = _check("hf/qwen3", "qwen3", QWEN3, [WEATHER], runs, train_turns="last")
    assert enc.notes == {"reasoning_dropped": 1, "answers_without_think": 1, "history_untrained": 1}
    full = encode_chat(real_tokenizer("hf/qwen3"), QWEN3, "qwen3", tools=[WEATHER])
    assert full.notes == {"reasoning_dropped": 1, "answers_without_think": 2}


def test_tokenize_chat_counts_and_refuses_a_conversation_with_nothing_after_the_last_user_message():
    """A conversation ending on a user message trains nothing under ``"last"``: a row error
    (as a conversation without an assistant message), or kept with ``no_assistant="keep"``
    and counted there; ``"template"`` and unknown values are refused when the callable is made."""
    tok = real_tokenizer("hf/qwen2.5")
    rows = {"messages": [CHATML, CHATML[:3]]}
    fn = tokenize_chat(tok, "qwen2.5", train_turns="last", on_error="record")
    out = fn(rows)
    assert out["error"][0] == "" or out["error"][0] is None
    assert "no assistant turn follows the conversation's last user message" in out["error"][1]
    assert fn.stats["history_untrained"] == 1 and fn.stats["no_assistant"] == 0
    fn = tokenize_chat(tok, "qwen2.5", train_turns="last", no_assistant="keep")
    out = fn(rows)
    assert sum(out["assistant_masks"][1]) == 0 and sum(out["assistant_masks"][0]) > 0
    assert fn.stats["history_untrained"] == 2 and fn.stats["no_assistant"] == 1
    with pytest.raises(ConfigError, match="train_turns = 'last' needs a native chat format"):
        tokenize_chat(tok, "template", train_turns="last")
    with pytest.raises(ConfigError, match="train_turns must be 'all' or 'last', got 'first'"):
        tokenize_chat(tok, "qwen2.5", train_turns="first")
    with pytest.raises(ConfigError, match="train_turns must be 'all' or 'last'"):
        encode_chat(tok, CHATML, "qwen2.5", train_turns="history")


def test_config_key_hashes_only_when_set():
    """``chat.train_turns`` at its default leaves the config hash as it was before the key
    existed (a running folder stays this config's); ``"last"`` makes another config; a bad
    value is refused naming the key."""
    from rmlprep.config import config_from_dict
    from test_config import cfg

    base = cfg(pipeline="sft", chat={"format": "chatml"}, pack={"overflow": "split", "bos": False, "eos": False})
    plain = config_from_dict(base)
    assert "train_turns" not in plain.hashed_part()["chat"]
    assert config_from_dict({**base, "chat": {"format": "chatml", "train_turns": "all"}}).config_hash == plain.config_hash
    last = config_from_dict({**base, "chat": {"format": "chatml", "train_turns": "last"}})
    assert last.config_hash != plain.config_hash and last["chat"]["train_turns"] == "last"
    with pytest.raises(ConfigError, match="chat.train_turns: train_turns must be 'all' or 'last', got 'final'"):
        config_from_dict({**base, "chat": {"format": "chatml", "train_turns": "final"}})


def test_an_empty_last_user_message_still_ends_the_history():
    """An empty user message writes no ``user`` segment, but it is the last user message all the
    same: with ``[user "Hi", assistant "Hello", user "", assistant "Ok"]`` only ``Ok<|im_end|>``
    is trained (``Hello`` was, and counted no history, when the last user segment was taken for
    the last user message), and ``[user "Hi", assistant "Hello", user ""]`` has nothing to train
    (a row error, not ``Hello`` trained). Llama 2 (its user text stripped) likewise: ``Hello``
    becomes ``history``, ``Ok`` stays ``assistant``."""
    from rmlprep.chat.registry import get_format, write
    from rmlprep.chat.segments import untrain_history

    msgs = [u("Hi"), a("Hello"), u(""), a("Ok")]
    head = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    mid = "\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"
    enc = _check("hf/qwen2.5", "qwen2.5", msgs, None,
                 [(head, 0), ("Hello<|im_end|>", 0), (mid, 0), ("Ok<|im_end|>", 1), ("\n", 0)], train_turns="last")
    assert enc.notes == {"history_untrained": 1}
    fn = tokenize_chat(real_tokenizer("hf/qwen2.5"), "qwen2.5", train_turns="last", on_error="record")
    out = fn({"messages": [msgs[:3]]})
    assert "no assistant turn follows the conversation's last user message" in out["error"][0]
    for ms in (msgs, [u("Hi"), a("Hello"), u("   "), a("Ok")]):
        o = write(ms, get_format("llama2"))
        assert untrain_history(o) == 1
        assert [s.kind for s in o.segs if s.text.strip() in ("Hello", "Ok")] == ["history", "assistant"]


def test_tokenize_chat_warns_once_of_answers_trained_without_think():
    """Qwen3 multi-turn rows through ``tokenize_chat`` (a ``datasets.map`` user): the history
    answers are trained without a think block, counted in ``fn.stats`` only, which a
    ``num_proc`` worker never hands back (trial19b: 530 of 540 FastChat rows, no word). The
    first such conversation now warns, once per callable, naming ``train_turns='last'``; with
    it the history answers are not trained and nothing is said. Worked example: two rows of
    ``[user, assistant, user, assistant]``, one history answer each: 2 counted, 1 warning."""
    import warnings

    tok = real_tokenizer("hf/qwen3")
    rows = {"messages": [CHATML, CHATML]}
    fn = tokenize_chat(tok, "qwen3", tools_column=None)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn(rows)
    said = [str(w.message) for w in got if "without a think block" in str(w.message)]
    assert len(said) == 1 and "train_turns='last'" in said[0], said
    assert fn.stats["answers_without_think"] == 2
    fn = tokenize_chat(tok, "qwen3", tools_column=None, train_turns="last")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn(rows)
    assert not [w for w in got if "think" in str(w.message)] and fn.stats["answers_without_think"] == 0
