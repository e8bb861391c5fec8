"""Parity: fixtures matched by sha256, doctored fixtures stop with ParityError, reference libs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rmlprep.errors import ConfigError, ParityError
from rmlprep.parity import check_fixture, compare_ids, file_sha256, find_fixture, live_check, make_fixture
from rmlprep.load import open_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))


@pytest.fixture(scope="module")
def tiny():
    if not TINY.exists():
        pytest.skip(f"{TINY} is absent")
    return open_tokenizer(str(TINY))[0]


def test_compare_ids_reports_position():
    compare_ids("x", [1, 2, 3], [1, 2, 3])
    with pytest.raises(ParityError) as e:
        compare_ids("hello", [1, 2, 3, 4], [1, 2, 9, 4], source="s")
    assert e.value.position == 2 and e.value.expected == [1, 2, 3, 4] and e.value.actual == [1, 2, 9, 4]
    assert "position 2" in str(e.value) and "'hello'" in str(e.value)
    with pytest.raises(ParityError) as e:
        compare_ids("t", [1, 2], [1, 2, 3])
    assert e.value.position == 2


def test_tokenizer_fixture_is_its_own_fixture(tiny):
    assert find_fixture(TINY) == TINY
    assert check_fixture(tiny, TINY) > 10


def test_doctored_fixture_fails(tiny, tmp_path):
    fx = json.loads(TINY.read_text())
    case = next(c for c in fx["cases"] if len(c["ids"]) > 3)
    case["ids"][2] += 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(fx))
    with pytest.raises(ParityError) as e:
        check_fixture(tiny, bad)
    assert e.value.position == 2 and e.value.text == case["text"]


def test_find_fixture_by_sha256(tmp_path):
    tok = tmp_path / "t.bin"
    tok.write_bytes(b"tokenizer bytes")
    d = tmp_path / "fx"
    d.mkdir()
    (d / "a.json").write_text(json.dumps({"sha256": "0" * 64, "cases": []}))
    (d / "b.json").write_text(json.dumps({"sha256": file_sha256(tok), "cases": []}))
    assert find_fixture(tok, d) == d / "b.json"
    assert find_fixture(tmp_path / "missing", d) is None


def test_find_fixture_sha256_key_anywhere(tmp_path):
    """The fast path reads "sha256" from a fixture's first bytes when it is a top-level key before
    any nested object; any other layout (the key after a nested object or past 4 KB, a look-alike
    inside a nested object, escaped) falls back to parsing the whole file, so the answer is
    json.load's."""
    tok = tmp_path / "t.bin"
    tok.write_bytes(b"tokenizer bytes")
    digest = file_sha256(tok)
    d = tmp_path / "fx"
    d.mkdir()
    # a look-alike: the digest inside a nested object is not the fixture's key
    (d / "a.json").write_text(json.dumps({"meta": {"sha256": digest}, "sha256": "0" * 64, "cases": []}))
    # the key after a nested object and past the first 4 KB
    (d / "b.json").write_text(json.dumps({"meta": {"pad": "x" * 5000}, "cases": [], "sha256": digest}))
    assert find_fixture(tok, d) == d / "b.json"
    (d / "b.json").unlink()
    assert find_fixture(tok, d) is None
    # the digest escaped in a string value of the fast path's prefix is not a key either
    (d / "c.json").write_text(json.dumps({"note": f'"sha256": "{digest}"', "sha256": "1" * 64}))
    assert find_fixture(tok, d) is None


def test_malformed_fixture(tiny, tmp_path):
    p = tmp_path / "f.json"
    p.write_text(json.dumps({"cases": [{"text": 1}]}))
    with pytest.raises(ConfigError, match=r"cases\[0\]"):
        check_fixture(tiny, p)


@pytest.mark.parity
def test_committed_fixtures_real_gpt2():
    rank = REAL / "gpt2" / "gpt2.tiktoken"
    if not rank.exists():
        pytest.skip(f"{rank} is absent (set RMLPREP_REAL_TOKENIZERS)")
    tok, f = open_tokenizer(str(rank), name="gpt2")
    fx = find_fixture(f)
    assert fx is not None and fx.name == "tiktoken-gpt2.json"
    assert check_fixture(tok, fx) > 100


@pytest.mark.parity
def test_make_fixture_and_live_with_tokenizers(tmp_path):
    pytest.importorskip("tokenizers")
    src = REAL / "hf" / "gpt2" / "tokenizer.json"
    if not src.exists():
        pytest.skip(f"{src} is absent (set RMLPREP_REAL_TOKENIZERS)")
    d = tmp_path / "gpt2"
    d.mkdir()
    shutil.copy(src, d / "tokenizer.json")
    tok, f = open_tokenizer(str(d))
    fx = make_fixture(f, tmp_path / "fx.json", tokenizer=tok, texts=["Hello world", "  x\n\ny 123"])
    assert fx["sha256"] == file_sha256(d / "tokenizer.json") and len(fx["cases"]) == 4
    assert check_fixture(tok, tmp_path / "fx.json") == 4
    assert live_check(tok, f, ["The quick brown fox", "日本語"])[0] == 2


@pytest.mark.parity
def test_live_check_ignores_truncation_and_padding_sections(tmp_path):
    """A tokenizer.json saved with truncation (max_length 5) and fixed padding (20) makes
    ``tokenizers`` cut and pad every encoding; transformers' call turns both off by default and
    rmlprep never applies them, so the live check compares the full ids (it stopped with 'ids
    differ at position 5', naming no cause)."""
    tokenizers = pytest.importorskip("tokenizers")
    src = REAL / "hf" / "gpt2" / "tokenizer.json"
    if not src.exists():
        pytest.skip(f"{src} is absent (set RMLPREP_REAL_TOKENIZERS)")
    data = json.loads(src.read_text(encoding="utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": 5, "strategy": "LongestFirst", "stride": 0}
    data["padding"] = {"strategy": {"Fixed": 20}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 50256,
                       "pad_type_id": 0, "pad_token": "<|endoftext|>"}
    d = tmp_path / "gpt2"
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    text = "The quick brown fox jumps over the lazy dog"
    cut = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json")).encode(text).ids
    assert len(cut) == 20 and cut[5:] == [50256] * 15  # the sections bite: 5 ids, padded to 20
    tok, f = open_tokenizer(str(d))
    assert tok.encode(text) == tokenizers.Tokenizer.from_file(str(src)).encode(text).ids
    assert live_check(tok, f, [text, "x"])[0] == 2



@pytest.mark.parity
@pytest.mark.parametrize("parse_special", [False, True])
def test_the_runs_live_check_compares_the_ids_the_run_writes(tmp_path, monkeypatch, parse_special):
    """explorer5 X7: the live sample compared ``tokenizers.encode(t)`` (special-token text parsed)
    with ``tok.encode(t, parse_special=True)`` whatever ``tokenizer.parse_special`` said, so in a
    default run (text kept as text) a wrong id of that path on a corpus document passed as "N
    corpus documents match" (the fixture's 40 parse_special=False cases hold other texts). Here
    the parse_special=False path (or the True one) is made wrong on one corpus document:
    the run must stop with a ParityError in that mode, and pass in the other."""
    pytest.importorskip("tokenizers")
    src = REAL / "hf" / "gpt2"
    if not (src / "tokenizer.json").exists():
        pytest.skip(f"{src} is absent (set RMLPREP_REAL_TOKENIZERS)")
    from rmlprep.config import config_from_dict
    from rmlprep.pipeline import run
    from rmlprep.tokenizer import Tokenizer

    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "zq <|endoftext|> zq"}) + "\n" + '{"text": "plain"}\n')
    encode = Tokenizer.encode

    def wrong_in_one_mode(self, text, *, add_special_tokens=False, parse_special=True):
        ids = encode(self, text, add_special_tokens=add_special_tokens, parse_special=parse_special)
        return ids + [0] if parse_special == broken and text == "zq <|endoftext|> zq" else ids

    def cfg(out):
        return config_from_dict({"input": {"paths": [str(tmp_path / "d.jsonl")]}, "tokenizer": {
            "path": str(src), "parse_special": parse_special}, "parity": {"live_sample": 2},
            "pack": {"seq_len": 16, "eos": False}, "output": {"dir": str(tmp_path / out)},
            "run": {"workers": 1, "progress": "none", "histogram": False}})

    monkeypatch.setattr(Tokenizer, "encode", wrong_in_one_mode)
    broken = parse_special
    with pytest.raises(ParityError, match="live comparison with tokenizers"):
        run(cfg("o1"), log=lambda *_: None)
    broken = not parse_special
    m = run(cfg("o2"), log=lambda *_: None)
    mode = "special-token text parsed" if parse_special else "special-token text as text"
    assert m["parity"]["live"] == {"documents": 2, "reference": m["parity"]["live"]["reference"]}
    assert m["parity"]["live"]["reference"].endswith(f"({mode}, as the run encodes)")


# -- chat parity config keys (the check itself: tests/test_chat.py, tests/test_pipeline.py) -------
SFT = {"pipeline": "sft", "input": {"paths": ["d.jsonl"]}, "tokenizer": {"path": "t.json"},
       "chat": {"format": "chatml"}, "pack": {"seq_len": 16}, "output": {"dir": "out"}}


def _sft(**parity):
    from rmlprep.config import config_from_dict

    return config_from_dict({**SFT, "parity": parity}, source="c.toml")


def test_chat_parity_config_defaults_and_hash():
    c = _sft()
    assert c["parity"]["chat"] == "auto" and c["parity"]["chat_live_sample"] == 1000
    assert _sft(chat=False)["parity"]["chat_live_sample"] == 0  # off with the chat check: nothing to render
    assert c["parity"]["chat_renders"] is None
    assert _sft(chat=True, chat_live_sample=5).config_hash == c.config_hash  # checks change no output byte
    assert _sft(chat_renders="r.jsonl")["parity"]["chat_renders"] == str(Path("r.jsonl").absolute())


@pytest.mark.parametrize("parity,key", [
    pytest.param({"chat": "yes"}, "parity.chat", id="bad-string"),
    pytest.param({"chat": 1}, "parity.chat", id="int"),
    pytest.param({"chat_live_sample": -1}, "parity.chat_live_sample", id="negative"),
    pytest.param({"chat_live_sample": True}, "parity.chat_live_sample", id="bool-for-int"),
    pytest.param({"chat": False, "chat_live_sample": 3}, "parity.chat_live_sample", id="live-but-off"),
    pytest.param({"chat_sample": 3}, "'parity.chat_sample'", id="unknown"),
])
def test_chat_parity_config_errors_name_the_key(parity, key):
    with pytest.raises(ConfigError) as e:
        _sft(**parity)
    assert key in str(e.value) and str(e.value).startswith("c.toml: ")


def test_chat_parity_keys_only_for_sft():
    from rmlprep.config import config_from_dict

    base = {k: v for k, v in SFT.items() if k not in ("pipeline", "chat")}
    assert config_from_dict(base)["parity"]["chat"] == "auto"
    with pytest.raises(ConfigError, match=r"parity.chat_live_sample: only the sft pipeline"):
        config_from_dict({**base, "parity": {"chat_live_sample": 2}})


def _live_cfg(tmp_path, texts: list[str]):
    """A pretraining config of ``texts`` (one JSONL row each) on the tiny tokenizer, comparing
    every one live (``parity.live_sample``)."""
    from rmlprep.config import config_from_dict

    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)},
                             "parity": {"live_sample": len(texts)}, "pack": {"seq_len": 16},
                             "output": {"dir": str(tmp_path / "o")}})


def test_live_skip_says_why(tmp_path):
    """The offline demo's fixture tokenizer has no live reference at all: the log says that, not
    "the reference library is not installed" (which it is, here)."""
    pytest.importorskip("tokenizers", reason="the reference library tokenizers is not installed")
    from rmlprep.parity import run_parity_stage
    from rmlprep.pipeline import plan

    cfg = _live_cfg(tmp_path, ["Hello world", "12345 tokens"])
    tok, tok_file = open_tokenizer(str(TINY))
    logs: list[str] = []
    run_parity_stage(cfg, tok, tok_file, plan(cfg), log=logs.append)
    skip = [x for x in logs if "live comparison skipped" in x]
    assert len(skip) == 1 and "rmlprep tokenizer fixture" in skip[0], logs
    assert "not installed" not in skip[0]
    logs.clear()
    run_parity_stage(cfg, tok, None, plan(cfg), log=logs.append)
    assert any("the tokenizer has no file a reference library could read" in x for x in logs), logs


def test_live_skip_for_a_missing_library_is_a_warning(tmp_path, monkeypatch):
    """A live comparison skipped because the reference library is not installed is a warning
    (the user can install it), as the chat stage's "jinja2 is not installed" line is; one
    skipped because no library reads the file stays a plain parity line (the test above).
    A fresh-user trial read the two labels for the same event as two kinds of event."""
    import importlib.util

    import rmlprep.parity as parity
    from rmlprep.pipeline import plan

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tokenizers" else find(name, *a))
    monkeypatch.setattr(parity, "live_check", lambda *a, **k: None)  # what it returns without the library
    hf = tmp_path / "tokenizer.json"
    hf.write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    cfg = _live_cfg(tmp_path, ["Hello world"])
    tok, _ = open_tokenizer(str(TINY))
    logs: list[str] = []
    parity.run_parity_stage(cfg, tok, str(hf), plan(cfg), log=logs.append)
    skip = [x for x in logs if "live comparison skipped" in x]
    assert len(skip) == 1 and skip[0].startswith("warning: parity: live comparison skipped for "), logs
    assert "its reference library (tokenizers) is not installed; pip install tokenizers to compare live" in skip[0]


@pytest.mark.parity
@pytest.mark.parametrize("rel, fixture", [
    pytest.param("gguf/ggml-vocab-llama-bpe.gguf", "parity_gguf/llama-bpe.json", id="gguf-llama-bpe"),
    pytest.param("gguf/ggml-vocab-llama-spm.gguf", "parity_gguf/llama-spm.json", id="gguf-llama-spm"),
    pytest.param("gguf/ggml-vocab-qwen2.gguf", "parity_gguf/qwen2.json", id="gguf-qwen2"),
    pytest.param("llama2/tokenizer.model", "parity_spm/llama2.json", id="model-llama2"),
    pytest.param("mistral/tokenizer.model.v3", "parity_spm/mistral-v3.json", id="model-mistral-v3"),
])
def test_gguf_and_sentencepiece_runs_check_their_fixture(tmp_path, rel, fixture):
    """A run on a GGUF file checks llama.cpp's own vectors (fixtures/parity_gguf, from
    tools/make_gguf_fixtures.py) and one on a sentencepiece .model sentencepiece's ids
    (fixtures/parity_spm, read with parse_special=False as the banner says) before any corpus
    work; both warned "no fixture" and checked nothing (parity.require refused them)."""
    from rmlprep.parity import run_parity_stage
    from rmlprep.pipeline import plan

    path = REAL / rel
    if not path.exists():
        pytest.skip(f"{path} is absent (set RMLPREP_REAL_TOKENIZERS)")
    cfg = _pretrain_cfg(tmp_path, path)
    tok, tok_file = open_tokenizer(str(path))
    logs: list[str] = []
    summary = run_parity_stage(cfg, tok, tok_file, plan(cfg), log=logs.append)
    assert summary["fixture"].endswith(fixture) and summary["cases"] >= 40, logs
    assert not [x for x in logs if "warning" in x], logs


def _pretrain_cfg(tmp_path, tokenizer_path):
    from rmlprep.config import config_from_dict

    inp = tmp_path / "c.jsonl"
    inp.write_text('{"text": "Hello world"}\n')
    return config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(tokenizer_path)},
                             "parity": {"require": True}, "pack": {"seq_len": 16, "eos": False},
                             "output": {"dir": str(tmp_path / "o")}})


@pytest.mark.parity
def test_a_gguf_file_with_a_known_vocabulary_is_checked_by_fingerprint(tmp_path):
    """Another GGUF file whose tokenizer loads to the same spec as a vocab-only test file (a model
    file with its vocabulary; here the file with bytes appended, which the reader ignores) is
    checked with that file's vectors, found by the spec fingerprint; a doctored vector still
    stops the run."""
    from rmlprep.parity import run_parity_stage
    from rmlprep.pipeline import plan

    src = REAL / "gguf" / "ggml-vocab-llama-bpe.gguf"
    if not src.exists():
        pytest.skip(f"{src} is absent (set RMLPREP_REAL_TOKENIZERS)")
    other = tmp_path / "model.gguf"
    other.write_bytes(src.read_bytes() + b"\0" * 64)
    cfg = _pretrain_cfg(tmp_path, other)
    tok, tok_file = open_tokenizer(str(other))
    assert find_fixture(tok_file) is None
    logs: list[str] = []
    summary = run_parity_stage(cfg, tok, tok_file, plan(cfg), log=logs.append)
    assert summary["fixture"].endswith("parity_gguf/llama-bpe.json"), logs
    assert any("by fingerprint" in x for x in logs), logs
    fx = json.loads(Path(summary["fixture"]).read_text(encoding="utf-8"))
    fx["cases"][0]["ids"][0] += 1
    bad = tmp_path / "fx"
    bad.mkdir()
    (bad / "doctored.json").write_text(json.dumps(fx))
    assert find_fixture(tok_file, bad, fingerprint=tok.fingerprint) == bad / "doctored.json"
    with pytest.raises(ParityError):
        check_fixture(tok, bad / "doctored.json")
