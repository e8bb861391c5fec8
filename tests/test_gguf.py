"""GGUF metadata -> TokenizerSpec: real files vs llama.cpp's vectors, SmolLM2 vs a Hugging Face
tokenizer built from the same vocabulary, and hostile files (truncated, corrupt lengths).

Real files come from ``bash ../shared/real-tokenizers/get.sh DIR`` (env ``RMLPREP_REAL_TOKENIZERS``,
default ``~/.cache/rmlprep-real-tokenizers``); tests that need them skip when they are absent.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from rmlprep.errors import LoaderError, UnsupportedTokenizer
from rmlprep.gguf import GGUF_PRE_REFUSED, GGUF_PRE_SPLIT, LLAMA_CPP, read_gguf_metadata, spec_from_gguf
from rmlprep.pretokenize import GPT2_PATTERN, compile_pre_split
from rmlprep.spec import BYTE_LEVEL, SENTENCEPIECE, TokenType
from rmlprep.tokenizer import Tokenizer

REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")
GGUF_DIR = REAL / "gguf"
SMOLLM = GGUF_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf"
VOCABS = ["gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2"]
CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"

_MISSING = f"real GGUF files not found in {GGUF_DIR}; run `bash ../shared/real-tokenizers/get.sh {REAL}` or set RMLPREP_REAL_TOKENIZERS"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path.name}: {_MISSING}")
    return path


_TOKENIZERS: dict[str, Tokenizer] = {}


def _load(path: Path) -> Tokenizer:
    key = str(path)
    if key not in _TOKENIZERS:
        spec, template = spec_from_gguf(_need(path))
        _TOKENIZERS[key] = Tokenizer.create(spec, chat_template=template)
    return _TOKENIZERS[key]


def read_vocab_tests(gguf_path: Path) -> dict[str, list[int]]:
    """The .inp/.out vectors exactly as llama.cpp's tests/test-tokenizer-0.cpp reads them.

    Inputs are split on "\\n__ggml_vocab_test__\\n"; a piece after the last separator counts
    only if non-empty (the loop stops at the end of the text); each .out line is stripped and
    split on spaces; the pairs go into a std::map (a repeated input keeps its last ids).
    test-tokenizer-0 then tokenizes with add_special=false, parse_special=false.
    """
    raw = Path(str(gguf_path) + ".inp").read_bytes().decode("utf-8")
    out_lines = Path(str(gguf_path) + ".out").read_bytes().decode("utf-8").split("\n")
    if out_lines and out_lines[-1] == "":
        out_lines.pop()  # std::getline yields no line after the final newline
    sep = "\n__ggml_vocab_test__\n"
    inputs = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            inputs.append(raw[pos:])
            break
        inputs.append(raw[pos:nxt])
        pos = nxt + len(sep)
    assert len(inputs) == len(out_lines), f"{gguf_path.name}: {len(inputs)} inputs vs {len(out_lines)} outputs"
    tests: dict[str, list[int]] = {}
    for s, line in zip(inputs, out_lines):
        tests[s] = [int(t) for t in line.strip().split(" ") if t != ""]
    return tests


# ----------------------------------------------------------------------------------------------
# llama.cpp's own test vocabularies: every ggml-vocab-*.gguf of the vendored llama.cpp.

# ggml-vocab-*.gguf files shipped with .inp/.out vectors in the llama-cpp-python sdist; bert-bge is
# a WordPiece vocabulary (tokenizer.ggml.model "bert"), which rmlprep refuses by name.
SDIST_VECTORS = ["command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe",
                 "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
SDIST_REFUSED = {"bert-bge": r"tokenizer\.ggml\.model = 'bert' is not supported"}
SDIST_NO_VECTORS = ["aquila", "baichuan", "gpt-neox", "nomic-bert-moe"]


def _check_vectors(path: Path) -> None:
    """Every input of ``path``'s ``.inp`` (at least 40) gives exactly the ids of its ``.out``
    line, with add_special=false, parse_special=false (llama.cpp's test-tokenizer-0)."""
    tok = _load(path)
    tests = read_vocab_tests(path)
    assert len(tests) >= 40
    bad = []
    for text, expected in tests.items():
        got = tok.encode(text, add_special_tokens=False, parse_special=False)
        if got != expected:
            bad.append((text, expected, got))
    assert not bad, f"{len(bad)}/{len(tests)} mismatches, first: {bad[0]!r}"


def _sdist_models() -> Path:
    """llama.cpp's models/ folder from the llama-cpp-python sdist (fetched once with pip into
    ~/.cache/rmlprep/); skips when it cannot be fetched (no network to PyPI)."""
    from tools.make_gguf_pre_table import llama_cpp_source

    try:
        return llama_cpp_source() / "vendor" / "llama.cpp" / "models"
    except RuntimeError as e:
        pytest.skip(f"llama-cpp-python sdist not available: {e}")


def test_sdist_vocab_list_is_complete():
    """The lists above name every ggml-vocab-*.gguf of the sdist, and the vectors are beside
    exactly the ones said to have them."""
    models = _sdist_models()
    names = {p.name[len("ggml-vocab-"):-len(".gguf")] for p in models.glob("ggml-vocab-*.gguf")}
    assert names == set(SDIST_VECTORS) | set(SDIST_REFUSED) | set(SDIST_NO_VECTORS)
    with_vectors = {p.name[len("ggml-vocab-"):-len(".gguf.inp")] for p in models.glob("ggml-vocab-*.gguf.inp")}
    assert with_vectors == set(SDIST_VECTORS) | set(SDIST_REFUSED)


@pytest.mark.parity
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SDIST_VECTORS])
def test_every_sdist_vocab_matches_its_vectors(name):
    """Every input of ggml-vocab-<name>.gguf.inp gives exactly the ids of its .out line (made
    with the model's Hugging Face tokenizer), with add_special=false, parse_special=false."""
    path = _sdist_models() / f"ggml-vocab-{name}.gguf"
    _check_vectors(path)


@pytest.mark.parametrize("name, match", [pytest.param(n, m, id=n) for n, m in SDIST_REFUSED.items()])
def test_sdist_vocab_refused_by_name(name, match):
    with pytest.raises(UnsupportedTokenizer, match=match):
        spec_from_gguf(_sdist_models() / f"ggml-vocab-{name}.gguf")


@pytest.mark.parametrize("name", SDIST_NO_VECTORS)
def test_sdist_vocab_without_vectors_loads_or_is_refused(name):
    """aquila, gpt-neox (no tokenizer.ggml.pre: llama.cpp's "default"), baichuan (SentencePiece)
    load and round-trip text; nomic-bert-moe is a Unigram ("t5") vocabulary, refused by name."""
    path = _sdist_models() / f"ggml-vocab-{name}.gguf"
    if name == "nomic-bert-moe":
        with pytest.raises(UnsupportedTokenizer, match=r"tokenizer\.ggml\.model = 't5' is not supported"):
            spec_from_gguf(path)
        return
    tok = _load(path)
    text = "Hello world, 1234 times!\n  tabs\tand   spaces"
    assert tok.decode(tok.encode(text)).strip() == text.strip()


# ----------------------------------------------------------------------------------------------
# The pre-tokenizer table: generated from llama.cpp's source, every name loads or is refused.


def test_pre_table_is_current(tmp_path):
    """Drift test: tools/make_gguf_pre_table.py regenerates rmlprep/_gguf_pre_table.py from the
    sdist's llama-vocab.cpp byte for byte."""
    from tools.make_gguf_pre_table import OUT, generate, llama_cpp_source

    try:
        source = llama_cpp_source()
    except RuntimeError as e:
        pytest.skip(f"llama-cpp-python sdist not available: {e}")
    assert generate(source) == OUT.read_text(encoding="utf-8")


def test_pre_table_covers_every_name():
    """Every tokenizer.ggml.pre name of llama.cpp's table either loads (GGUF_PRE_SPLIT) or is
    refused with a reason (GGUF_PRE_REFUSED); the refused ones are few and named."""
    from rmlprep._gguf_pre_table import PRE_NAMES

    assert set(PRE_NAMES) == set(GGUF_PRE_SPLIT) | set(GGUF_PRE_REFUSED)
    assert not set(GGUF_PRE_SPLIT) & set(GGUF_PRE_REFUSED)
    assert not GGUF_PRE_REFUSED  # every name of the vendored llama.cpp loads
    assert len(GGUF_PRE_SPLIT) == len(PRE_NAMES) >= 91


def _tiny_bpe_kvs(pre: str) -> list[tuple[str, str, object]]:
    """A byte-level vocabulary (the 256 byte characters, <0xXX> byte tokens, a few merges)."""
    from rmlprep.unicode import bytes_to_unicode

    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)] + [f"<0x{b:02X}>" for b in range(256)]
    merges = ["h e", "l l", "he ll", "hell o", "\u0120 w", "\u0120w o"]
    tokens += ["he", "ll", "hell", "hello", "\u0120w", "\u0120wo"]
    types = [1] * 256 + [6] * 256 + [1] * 6
    return [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", pre),
            ("tokenizer.ggml.tokens", "arr:str", tokens), ("tokenizer.ggml.token_type", "arr:i32", types),
            ("tokenizer.ggml.merges", "arr:str", merges)]


def test_a_defaulted_bpe_eos_is_refused_for_framing_not_for_encoding(tmp_path):
    """llama.cpp gives a BPE GGUF without tokenizer.ggml.eos_token_id (or with one out of range)
    eos = bos = 11, a vocabulary's "," in GPT-2's byte order: a pretraining run then ended every
    document with it, the log saying only "eos ',' (id 11)". The spec keeps llama.cpp's ids (encode
    is unchanged) and names them in defaulted_ids; framing documents with one is refused, naming
    the key. An id the file names (in range) is no default, and SentencePiece's defaults (</s>) stay."""
    from rmlprep.config import config_from_dict
    from rmlprep.errors import ConfigError
    from rmlprep.pipeline import open_tokenizer
    from rmlprep.pipeline.framing import framing

    cases = {"absent": [], "out_of_range": [("tokenizer.ggml.eos_token_id", "u32", 10**6)],
             "named": [("tokenizer.ggml.eos_token_id", "u32", 300)]}
    for case, extra in cases.items():
        path = write_gguf(tmp_path / f"{case}.gguf", _tiny_bpe_kvs("gpt-2") + [("tokenizer.ggml.bos_token_id", "u32", 300)] + extra)
        spec, _ = spec_from_gguf(path)
        assert spec.bos_id == 300
        assert (spec.eos_id, spec.defaulted_ids) == ((300, ()) if case == "named" else (11, ("eos",)))
        assert "defaulted_ids" not in spec.to_dict() or case != "named"  # a named id keeps its old fingerprint
        tok, _ = open_tokenizer(str(path))
        assert tok.encode("hello world") == Tokenizer.create(spec).encode("hello world")
        for eos in (True, False):
            cfg = config_from_dict({"input": {"paths": [str(tmp_path / "in.jsonl")]}, "tokenizer": {"path": str(path)},
                                    "pack": {"seq_len": 64, "eos": eos, "bos": True}, "output": {"dir": str(tmp_path / "o")}})
            if eos and case != "named":
                with pytest.raises(ConfigError, match=r"^pack\.eos: the GGUF names no tokenizer\.ggml\.eos_token_id "
                                                      r"\(or one out of range\), so its eos is llama\.cpp's default, "
                                                      rf"{tok.id_to_token(11)!r} \(id 11\), which would end every document"):
                    framing(cfg, tok)
            else:
                f = framing(cfg, tok)
                assert (f.bos, f.eos) == (300, 300 if eos else None)
    no_ids = write_gguf(tmp_path / "none.gguf", _tiny_bpe_kvs("gpt-2"))
    cfg = config_from_dict({"input": {"paths": [str(tmp_path / "in.jsonl")]}, "tokenizer": {"path": str(no_ids)},
                            "pack": {"seq_len": 64, "eos": False, "bos": True}, "output": {"dir": str(tmp_path / "o")}})
    with pytest.raises(ConfigError, match=r"^pack\.bos: the GGUF names no tokenizer\.ggml\.bos_token_id .* start every"):
        framing(cfg, open_tokenizer(str(no_ids))[0])
    spm, _ = spec_from_gguf(write_gguf(tmp_path / "spm.gguf", _tiny_llama_kvs()))
    assert (spm.eos_id, spm.defaulted_ids) == (2, ())


def test_a_defaulted_id_added_by_add_special_tokens_is_refused_and_an_override_is_no_default(tmp_path):
    """The other ways a defaulted id (see the test above) reached every document or was refused:
    a "llama-bpe" GGUF without tokenizer.ggml.bos_token_id adds bos (add_bos_token's default
    for that pre is true), so tokenizer.add_special_tokens = true started every document with
    llama.cpp's id 11 with no word, as pack.bos = true did before 96fc923. An eos named by
    the caller (load_tokenizer(path, eos_id=300)) is no default: framing with it was refused,
    the message calling id 300 llama.cpp's default. And which ids are defaults changes no id, so
    it is no part of the fingerprint (a folder written before the field existed kept its
    tokenizer)."""
    from rmlprep.config import config_from_dict
    from rmlprep.errors import ConfigError
    from rmlprep.load import load_tokenizer
    from rmlprep.pipeline.framing import framing

    def cfg(path, **pack):
        return config_from_dict({"input": {"paths": [str(tmp_path / "in.jsonl")]},
                                 "tokenizer": {"path": str(path), "add_special_tokens": pack.pop("add", False)},
                                 "pack": {"seq_len": 64, **pack}, "output": {"dir": str(tmp_path / "o")}})

    keyless = write_gguf(tmp_path / "keyless.gguf", _tiny_bpe_kvs("llama-bpe"))
    tok = load_tokenizer(str(keyless))
    assert (tok.spec.add_bos, tok.spec.bos_id, tok.spec.defaulted_ids) == (True, 11, ("bos", "eos"))
    assert tok.encode("hello", add_special_tokens=True)[0] == 11  # llama.cpp's ids, kept for encoding
    with pytest.raises(ConfigError, match=r"^tokenizer\.add_special_tokens: the tokenizer adds its bos to every "
                                          r"document, and the GGUF names no tokenizer\.ggml\.bos_token_id .*\(id 11\)"):
        framing(cfg(keyless, eos=False, add=True), tok)
    named = write_gguf(tmp_path / "named.gguf", _tiny_bpe_kvs("llama-bpe") + [("tokenizer.ggml.bos_token_id", "u32", 300)])
    f = framing(cfg(named, eos=False, add=True), load_tokenizer(str(named)))
    assert (f.bos, f.eos) == (None, None)  # the tokenizer adds its named bos: nothing refused

    over = load_tokenizer(str(keyless), eos_id=300)
    assert (over.spec.eos_id, over.spec.defaulted_ids) == (300, ("bos",))
    f = framing(cfg(keyless, eos=True), over)
    assert (f.bos, f.eos) == (None, 300)
    with pytest.raises(ConfigError, match=r"^pack\.bos: .* \(id 11\)"):
        framing(cfg(keyless, eos=True, bos=True), over)  # the role not overridden is still a default
    assert load_tokenizer(str(keyless)).spec.defaulted_ids == ("bos", "eos")  # the override stays the caller's

    assert tok.spec.fingerprint == tok.spec.replace(defaulted_ids=()).fingerprint
    assert over.spec.fingerprint == tok.spec.replace(eos_id=300, defaulted_ids=()).fingerprint


@pytest.mark.parametrize("pre", sorted(set(GGUF_PRE_SPLIT) - {"whitespace"}))
def test_every_pre_name_loads(tmp_path, pre):
    """A GGUF with this tokenizer.ggml.pre loads, encodes mixed text and decodes it back.
    ("whitespace" drops whitespace and needs its own model name: tests/test_gguf_pre.py.)"""
    spec, _ = spec_from_gguf(write_gguf(tmp_path / "t.gguf", _tiny_bpe_kvs(pre)))
    tok = Tokenizer.create(spec)
    text = "hello world 1234567, y'all! 天気 ΑΩ\r\n  x\t"
    ids = tok.encode(text)
    assert ids and tok.decode(ids).replace("\u2581", " ") == text


def test_refused_pre_names_say_why(tmp_path, monkeypatch):
    """A name of the table whose type rmlprep refuses (none today) is refused with the type and
    the reason, not as an unknown name; shown by refusing "olmo" for the test."""
    import rmlprep.gguf as gguf_module

    monkeypatch.setattr(gguf_module, "GGUF_PRE_REFUSED", {"olmo": "pre-tokenizer type OLMO: test reason"})
    monkeypatch.setattr(gguf_module, "GGUF_PRE_SPLIT", {k: v for k, v in GGUF_PRE_SPLIT.items() if k != "olmo"})
    with pytest.raises(UnsupportedTokenizer, match=r"tokenizer\.ggml\.pre = 'olmo' is not supported: "
                                                   r"pre-tokenizer type OLMO: test reason"):
        spec_from_gguf(write_gguf(tmp_path / "t.gguf", _tiny_bpe_kvs("olmo")))


def test_unknown_pre_names_the_llama_cpp_version(tmp_path):
    """A name newer than the vendored llama.cpp is refused, naming that llama.cpp."""
    with pytest.raises(UnsupportedTokenizer, match=r"'brand-new-2027' is not in the pre-tokenizer table of "
                                                   r"llama\.cpp [0-9a-f]{7} \(vendored in llama-cpp-python 0\.3\.36\)"):
        spec_from_gguf(write_gguf(tmp_path / "t.gguf", _tiny_bpe_kvs("brand-new-2027")))
    assert LLAMA_CPP.startswith("llama.cpp ")


def test_afmoe_digit_split():
    """llama.cpp's custom AFMoE split: a run of numbers gives its first len % 3 characters (when
    not 0), then groups of three: "1234567" -> "1", "234", "567"; "123456" -> "123", "456";
    "12" -> "12"; text around the runs stays in its own pieces (the later patterns split it)."""
    split = compile_pre_split([GGUF_PRE_SPLIT["afmoe"].patterns[0]])
    assert split("1234567") == ["1", "234", "567"]
    assert split("123456") == ["123", "456"]
    assert split("ab12 x9876") == ["ab", "12", " x", "9", "876"]
    assert split("\u0663\u0664\u0665\u0666") == ["\u0663", "\u0664\u0665\u0666"]  # Arabic-Indic digits are \p{N}


@pytest.mark.parity
def test_qwen2_gguf_normalizes_like_its_tokenizer_json():
    """Qwen2.5's tokenizer.json normalizes to NFC before splitting; llama.cpp does not. The
    Qwen2 GGUF gives the tokenizer.json's ids on decomposed text (each corpus text in NFD, plus
    "e\u0301" alone): e.g. "Cafe\u0301" -> the ids of "Café". Qwen3.5 ("qwen35") does not
    normalize (its vectors keep "e\u0301" as two tokens) and is left alone."""
    import unicodedata

    tk = pytest.importorskip("tokenizers")
    hf_path = REAL / "hf" / "qwen2.5" / "tokenizer.json"
    if not hf_path.exists():
        pytest.skip(f"{hf_path}: {_MISSING}")
    tok = _load(GGUF_DIR / "ggml-vocab-qwen2.gguf")
    assert tok.spec.normalizers == (("nfc",),)
    hf = tk.Tokenizer.from_file(str(hf_path))
    texts = ["Cafe\u0301", "e\u0301", "n\u0303o\u0308 A\u030a", "\u1100\u1161\u11a8"]  # Hangul jamo compose
    texts += [unicodedata.normalize("NFD", t) for t in _corpus_texts(600)]
    changed = [t for t in texts if unicodedata.normalize("NFC", t) != t]
    assert len(changed) >= 100
    for t in changed:
        assert tok.encode(t, parse_special=False) == hf.encode(t, add_special_tokens=False).ids, t[:120]
    assert tok.encode("Cafe\u0301") == tok.encode("Caf\u00e9")


# ----------------------------------------------------------------------------------------------
# Real files: llama.cpp vectors (the five of get.sh, without fetching the sdist).


@pytest.mark.parity
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VOCABS])
def test_llama_cpp_vectors(name):
    """Every input of ggml-vocab-<name>.gguf.inp gives exactly the ids of its .out line."""
    path = _need(GGUF_DIR / f"ggml-vocab-{name}.gguf")
    _check_vectors(path)


@pytest.mark.parity
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in VOCABS])
def test_vectors_round_trip(name):
    """decode(encode(x)) == x: llama.cpp detokenize (without its clean_spaces pass) gives the
    input back; the SentencePiece models strip the added prefix space from the first token."""
    path = _need(GGUF_DIR / f"ggml-vocab-{name}.gguf")
    tok = _load(path)
    for text in read_vocab_tests(path):
        ids = tok.encode(text, parse_special=False)
        assert tok.decode(ids) == text, (text, ids)
        assert tok.decode_bytes(ids).decode("utf-8") == (" " + text if tok.spec.add_prefix_space and text else text)


@pytest.mark.parametrize(
    "name, kind, pre, add_bos, ignore_merges",
    [
        pytest.param("gpt-2", BYTE_LEVEL, ("gpt2",), False, False, id="gpt-2"),
        pytest.param("llama-bpe", BYTE_LEVEL, ("llama3",), True, True, id="llama-bpe"),
        pytest.param("qwen2", BYTE_LEVEL, ("qwen2",), False, False, id="qwen2"),
        pytest.param("llama-spm", SENTENCEPIECE, (), True, False, id="llama-spm"),
        pytest.param("phi-3", SENTENCEPIECE, (), True, False, id="phi-3"),
    ],
)
def test_spec_fields(name, kind, pre, add_bos, ignore_merges):
    """The llama.cpp defaults: llama-bpe has no add_bos_token key, so the llama3 pre type's
    default (true) applies, with ignore_merges; SPM vocabularies get the always-prefix scheme."""
    from rmlprep.pretokenize import pattern_name

    spec, _ = spec_from_gguf(_need(GGUF_DIR / f"ggml-vocab-{name}.gguf"))
    assert spec.kind == kind
    assert tuple(pattern_name(p) for p in spec.pre_split) == pre
    assert spec.add_bos is add_bos and spec.add_eos is False
    assert spec.ignore_merges is ignore_merges
    assert spec.parse_user_defined_always is True
    if kind == SENTENCEPIECE:
        assert spec.scores is not None and not spec.merges
        assert (spec.bos_id, spec.unk_id, spec.byte_fallback) == (1, 0, True)
        assert spec.add_prefix_space and spec.prefix_scheme == "always" and not spec.prefix_if_missing
        assert spec.decode_strip_prefix == "first_token"
        assert spec.token_types[3] == TokenType.BYTE and spec.vocab[3] == "<0x00>"
    else:
        assert spec.scores is None and spec.merges


def test_add_special_tokens_spm():
    """add_special_tokens=True prepends BOS (llama.cpp SPM default add_bos=true)."""
    tok = _load(GGUF_DIR / "ggml-vocab-llama-spm.gguf")
    assert tok.encode("Hello world", add_special_tokens=True) == [1, 15043, 3186]
    assert tok.encode("Hello world") == [15043, 3186]


def test_special_tokens_are_cut_with_parse_special():
    """Control tokens are cut from the text with parse_special=True and spelled out otherwise
    (llama.cpp tokenizer_st_partition); the SPM prefix space follows every special token."""
    qwen = _load(GGUF_DIR / "ggml-vocab-qwen2.gguf")
    im_start, im_end = qwen.token_to_id("<|im_start|>"), qwen.token_to_id("<|im_end|>")
    text = "<|im_start|>user\nhi<|im_end|>"
    ids = qwen.encode(text)
    assert ids[0] == im_start and ids[-1] == im_end
    assert ids[1:-1] == qwen.encode("user\nhi")
    plain = qwen.encode(text, parse_special=False)
    assert im_start not in plain and qwen.decode(plain) == text

    spm = _load(GGUF_DIR / "ggml-vocab-llama-spm.gguf")
    ids = spm.encode("a</s>b")
    assert ids == spm.encode("a") + [2] + spm.encode("b")  # "b" gets its own "▁" prefix
    assert 2 not in spm.encode("a</s>b", parse_special=False)


def test_phi3_special_tokens_rstrip():
    """llama.cpp sets RSTRIP on Phi-3's special tokens (general.name 'Phi3'), not on <s>."""
    tok = _load(GGUF_DIR / "ggml-vocab-phi-3.gguf")
    end = tok.token_to_id("<|end|>")
    assert tok.encode("<|end|>\n  hi") == [end] + tok.encode("hi")
    flags = {a.id for a in tok.spec.added_token_flags}
    assert end in flags and 1 not in flags and 0 not in flags


def test_llama_cpp_gpt2_regex_is_equivalent():
    """llama.cpp's GPT-2 regex lacks the final "|\\s+"; under Isolated splitting the pieces are
    the same (the leftover whitespace is a gap piece). Checked on the vectors and real text."""
    from rmlprep.gguf_pre import _GPT2_LLAMA_CPP

    ours = compile_pre_split([GPT2_PATTERN])
    theirs = compile_pre_split([_GPT2_LLAMA_CPP])
    texts = ["a \nb", " \tx", "x \u3000y", "end  ", "\n\n a", "a\u00a0b", "\r\n\r\n", "x  \ty"]
    path = GGUF_DIR / "ggml-vocab-gpt-2.gguf"
    if path.exists():
        texts += list(read_vocab_tests(path))
    texts += _corpus_texts(400)
    for t in texts:
        assert ours(t) == theirs(t), t


@pytest.mark.parametrize("pre", sorted(GGUF_PRE_SPLIT))
def test_every_pre_name_compiles(pre):
    """Each pre-split pattern list of the table translates to stdlib re and tiles the text."""
    split = compile_pre_split(GGUF_PRE_SPLIT[pre].patterns)
    text = "Hello, y'all! 1234567 天気 µß ΑΩ\r\n  x\t"
    assert "".join(split(text)) == text


# ----------------------------------------------------------------------------------------------
# SmolLM2: a full model file (98 MB of tensors) with a chat template.


def test_smollm2_loads_from_metadata_only(tmp_path):
    """The tokenizer comes from the metadata alone: the file cut right after its key-values
    (no tensor infos, no tensor data), its tensor count set to 0 (a vocab-only file, as
    llama.cpp's ggml-vocab-*.gguf; the cut file with its count of 272 is a truncated model,
    refused), gives the same spec. Load time is printed (see bench/)."""
    path = _need(SMOLLM)
    t0 = time.perf_counter()
    spec, template = spec_from_gguf(path)
    elapsed = time.perf_counter() - t0
    print(f"spec_from_gguf({path.name}, {path.stat().st_size / 1e6:.0f} MB): {elapsed * 1000:.0f} ms")
    meta = read_gguf_metadata(path)
    end = meta["GGUF.metadata_end"]
    assert end < 2_000_000 < path.stat().st_size
    cut = tmp_path / "head.gguf"
    with open(path, "rb") as f:
        head = f.read(end)
    cut.write_bytes(head[:8] + struct.pack("<Q", 0) + head[16:])
    spec2, template2 = spec_from_gguf(cut)
    assert spec2 == spec and template2 == template
    assert spec.kind == BYTE_LEVEL and len(spec.vocab) == 49152 and len(spec.merges) == 48900
    assert (spec.bos_id, spec.eos_id, spec.unk_id, spec.pad_id) == (1, 2, None, 2)
    assert spec.add_bos is False  # tokenizer.ggml.add_bos_token = false in the file
    assert "<|im_start|>" in template and "messages" in template


def test_smollm2_pre_and_specials():
    """pre "smollm": individual digits then the GPT-2 regex (llama.cpp LLAMA_VOCAB_PRE_TYPE_SMOLLM,
    = SmolLM2's tokenizer.json Digits(individual_digits) + ByteLevel)."""
    from rmlprep.pretokenize import DIGITS_INDIVIDUAL_PATTERN

    tok = _load(SMOLLM)
    assert tok.spec.pre_split == (DIGITS_INDIVIDUAL_PATTERN, GPT2_PATTERN)
    assert tok.spec.ignore_merges is False
    ids = tok.encode("2024")
    assert len(ids) == 4 and tok.decode(ids) == "2024"
    im_start = tok.token_to_id("<|im_start|>")
    assert tok.encode("<|im_start|>user\nHi<|im_end|>")[0] == im_start
    assert tok.spec.eot_ids == (0, 2)  # <|endoftext|>, <|im_end|>


def _hf_reference_from_spec(spec):
    """A Hugging Face ``tokenizers`` BPE with SmolLM2's tokenizer.json pipeline, built from the
    GGUF's own vocabulary: Digits(individual) + ByteLevel(no prefix, regex), ByteLevel decoder,
    control tokens as special added tokens."""
    tk = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(spec.vocab)}
    hf = tk.Tokenizer(models.BPE(vocab=vocab, merges=list(spec.merges)))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    specials = [spec.vocab[i] for i, t in enumerate(spec.token_types) if t == TokenType.CONTROL]
    hf.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return hf


@pytest.mark.parity
def test_smollm2_vs_hf_tokenizers():
    """SmolLM2's GGUF tokenizer == a Hugging Face BPE with SmolLM2's pre-tokenizer on >= 2,000
    real texts (ids and decode), with and without special-token parsing."""
    tok = _load(SMOLLM)
    hf = _hf_reference_from_spec(tok.spec)
    texts = _corpus_texts(2400, max_bytes=4096) + [
        "<|im_start|>user\nWhat is 12345 * 678?<|im_end|>\n<|im_start|>assistant\n",
        "", " ", "  leading", "trailing  ", "\n\n\t", "x\u00a0y", "🦙 3.14159",
    ]
    assert len(texts) >= 2000
    n_tokens = 0
    for text in texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        got = tok.encode(text)
        assert got == expected, text[:200]
        n_tokens += len(got)
        assert tok.decode(got) == hf.decode(expected, skip_special_tokens=False)
    print(f"SmolLM2 GGUF vs tokenizers: {len(texts)} texts, {n_tokens} tokens, 0 mismatches")


@pytest.mark.parity
def test_smollm2_bytes_without_token_are_dropped():
    """SmolLM2's GGUF names ``<|endoftext|>`` (id 0) as ``unknown_token_id`` and lacks 21 byte
    tokens (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5..0xFF). llama.cpp's
    BPE session drops a byte that has no token and never emits the unknown token, and
    ``tokenizers`` built from the same vocab and merges (no unk_token, as llama.cpp) agrees:
    ``"row1\\x1drow2"`` -> ``[720, 33, 720, 34]`` ("row", "1", "row", "2"), not
    ``[720, 33, 0, 720, 34]`` (an end-of-text id in mid-document)."""
    tok = _load(SMOLLM)
    hf = _hf_reference_from_spec(tok.spec)
    assert tok.spec.unk_id is None
    text = "row1\x1drow2"
    assert hf.encode(text, add_special_tokens=False).ids == [720, 33, 720, 34]
    assert tok.encode(text) == [720, 33, 720, 34]
    # 0xC0, 0xC1, 0xF5..0xFF never occur in UTF-8; 0xF1 and 0xF2 lead U+40000..U+BFFFF
    missing = "\x04\x06\x13\x14\x16\x1d" + "\U00040000\U00080000"
    for t in [missing, "a" + missing + "b", "\x04\x04x", "x\U000a0000y", "\u00ff\u00c1 z"]:
        expected = hf.encode(t, add_special_tokens=False).ids
        assert tok.encode(t) == expected, t
        assert 0 not in tok.encode(t)


# ----------------------------------------------------------------------------------------------
# The reader: cross-check with the gguf package, hostile files.


@pytest.mark.parity
def test_reader_matches_gguf_package():
    """read_gguf_metadata agrees with the ``gguf`` package on a real vocab file."""
    gguf = pytest.importorskip("gguf")
    path = _need(GGUF_DIR / "ggml-vocab-llama-spm.gguf")
    ours = read_gguf_metadata(path)
    reader = gguf.GGUFReader(str(path))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert ours["tokenizer.ggml.tokens"] == [bytes(tokens.parts[i]).decode() for i in tokens.data]
    for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        fld = reader.fields[key]
        theirs = np.concatenate([fld.parts[i] for i in fld.data])
        np.testing.assert_array_equal(ours[key], theirs)
    assert ours["tokenizer.ggml.bos_token_id"] == int(reader.fields["tokenizer.ggml.bos_token_id"].parts[-1][0])
    assert ours["GGUF.kv_count"] == len(reader.fields) - 3  # the package adds 3 header fields


def _w_str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _w_value(vtype: str, value) -> bytes:
    codes = {"u8": (0, "<B"), "i8": (1, "<b"), "u16": (2, "<H"), "i16": (3, "<h"), "u32": (4, "<I"),
             "i32": (5, "<i"), "f32": (6, "<f"), "bool": (7, "<?"), "u64": (10, "<Q"),
             "i64": (11, "<q"), "f64": (12, "<d")}
    if vtype == "str":
        return struct.pack("<I", 8) + _w_str(value)
    if vtype.startswith("arr:"):
        et = vtype[4:]
        if et == "str":
            body = b"".join(_w_str(v) for v in value)
            return struct.pack("<IIQ", 9, 8, len(value)) + body
        code, fmt = codes[et]
        return struct.pack("<IIQ", 9, code, len(value)) + b"".join(struct.pack(fmt, v) for v in value)
    code, fmt = codes[vtype]
    return struct.pack("<I", code) + struct.pack(fmt, value)


def write_gguf(path: Path, kvs: list[tuple[str, str, object]], *, version: int = 3, n_tensors: int = 0) -> Path:
    """A minimal GGUF file: header + key-values (no tensors)."""
    body = b"".join(_w_str(k) + _w_value(t, v) for k, t, v in kvs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(kvs)) + body)
    return path


def _tiny_llama_kvs(**override):
    """A tiny SentencePiece ('llama') vocabulary: every byte token plus a few merges."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    words = ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"]
    tokens += words
    types += [1] * len(words)
    scores = [0.0] * 259 + [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    kvs = {
        "general.architecture": ("str", "llama"),
        "tokenizer.ggml.model": ("str", "llama"),
        "tokenizer.ggml.tokens": ("arr:str", tokens),
        "tokenizer.ggml.scores": ("arr:f32", scores),
        "tokenizer.ggml.token_type": ("arr:i32", types),
    }
    for k, v in override.items():
        key = k.replace("__", ".")
        if v is None:
            kvs.pop(key, None)
        else:
            kvs[key] = v
    return [(k, t, v) for k, (t, v) in kvs.items()]


def test_tiny_llama_defaults(tmp_path):
    """No bos/eos/unk/add_* keys: llama.cpp's SPM defaults (bos 1, eos 2, unk 0, add_bos true,
    add_space_prefix true)."""
    spec, template = spec_from_gguf(write_gguf(tmp_path / "t.gguf", _tiny_llama_kvs()))
    assert template is None
    assert (spec.bos_id, spec.eos_id, spec.unk_id, spec.add_bos, spec.add_eos) == (1, 2, 0, True, False)
    tok = Tokenizer.create(spec)
    a, ab, sp_ab = (tok.token_to_id(t) for t in ("a", "ab", "\u2581ab"))
    # "ab ab" -> "▁ab▁ab": "▁a" (-4) vs "ab" (-5): "▁a" merges first, then "▁ab" (-6).
    assert tok.encode("ab ab") == [sp_ab, sp_ab]
    assert tok.encode("ab", add_special_tokens=True) == [1, sp_ab]
    # "c" is not in the vocab: byte fallback
    assert tok.encode("c") == [tok.token_to_id("\u2581"), 3 + ord("c")]
    spec_np, _ = spec_from_gguf(
        write_gguf(tmp_path / "np.gguf", _tiny_llama_kvs(tokenizer__ggml__add_space_prefix=("bool", False)))
    )
    assert Tokenizer.create(spec_np).encode("ab") == [ab]
    assert a is not None


def test_unknown_model_is_refused_by_name(tmp_path):
    path = write_gguf(tmp_path / "bert.gguf", _tiny_llama_kvs(tokenizer__ggml__model=("str", "bert")))
    with pytest.raises(UnsupportedTokenizer, match=r"tokenizer\.ggml\.model = 'bert' is not supported"):
        spec_from_gguf(path)


def test_unknown_pre_is_refused_by_name(tmp_path):
    kvs = [
        ("tokenizer.ggml.model", "str", "gpt2"),
        ("tokenizer.ggml.pre", "str", "my-new-pre"),
        ("tokenizer.ggml.tokens", "arr:str", ["a", "b", "ab"]),
        ("tokenizer.ggml.merges", "arr:str", ["a b"]),
    ]
    with pytest.raises(UnsupportedTokenizer, match=r"tokenizer\.ggml\.pre = 'my-new-pre' is not in the "):
        spec_from_gguf(write_gguf(tmp_path / "pre.gguf", kvs))


def test_gpt2_without_pre_uses_default_and_merges_split_at_first_space(tmp_path):
    """No tokenizer.ggml.pre: llama.cpp's 'default' regexes; merges split at the first space
    after position 0; out-of-range default bos/eos (11) are dropped."""
    kvs = [
        ("tokenizer.ggml.model", "str", "gpt2"),
        ("tokenizer.ggml.tokens", "arr:str", ["a", "b", "ab"]),
        ("tokenizer.ggml.merges", "arr:str", ["a b"]),
    ]
    spec, _ = spec_from_gguf(write_gguf(tmp_path / "g.gguf", kvs))
    assert spec.pre_split == GGUF_PRE_SPLIT["default"].patterns
    assert spec.merges == (("a", "b"),)
    assert spec.bos_id is None and spec.eos_id is None and spec.add_bos is False
    assert Tokenizer.create(spec).encode("abab") == [2, 2]


def test_bad_token_type_is_refused(tmp_path):
    path = write_gguf(
        tmp_path / "tt.gguf",
        _tiny_llama_kvs(tokenizer__ggml__token_type=("arr:i32", [2, 3, 3] + [6] * 256 + [1] * 5 + [9])),
    )
    with pytest.raises(UnsupportedTokenizer, match=r"token_type\[264\] = 9"):
        spec_from_gguf(path)


@pytest.mark.parametrize(
    "blob, match",
    [
        pytest.param(b"", r"at byte 0: the file is empty", id="empty"),
        pytest.param(b"GGU", r"at byte 0: the magic", id="short-magic"),
        pytest.param(b"GGML" + bytes(20), r"not a GGUF file", id="bad-magic"),
        pytest.param(b"GGUF" + struct.pack("<I", 1) + bytes(16), r"GGUF version 1", id="v1"),
        pytest.param(b"GGUF" + struct.pack(">I", 3) + bytes(16), r"big-endian", id="big-endian"),
        pytest.param(b"GGUF" + struct.pack("<IQ", 3, 0), r"at byte 16: the key-value count", id="no-kv-count"),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 60), r"at byte 16: the header claims \d+ key-value", id="kv-count"
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62) + b"x" * 12,
            r"at byte 32: key of key-value pair 0 \(\d+ bytes\) needs",
            id="key-length",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("k") + struct.pack("<IQ", 8, 1 << 50) + b"abc",
            r"at byte 45: k \(\d+ bytes\) needs \d+ bytes but only 3 remain",
            id="string-length",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("t") + struct.pack("<IIQ", 9, 8, 1 << 61) + bytes(40),
            r"at byte 49: t claims \d+ strings",
            id="string-array-count",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("t") + struct.pack("<IIQ", 9, 8, 2)
            + _w_str("ok") + struct.pack("<Q", 1 << 40) + bytes(8),
            r"at byte 59: t\[1\] claims \d+ bytes",
            id="string-in-array",
        ),
        pytest.param(  # a length past any offset: the fast walk overflows, the checked one names it
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("t") + struct.pack("<IIQ", 9, 8, 3)
            + _w_str("ok") + struct.pack("<Q", (1 << 64) - 1) + bytes(8) + _w_str("x"),
            r"at byte 59: t\[1\] claims 18446744073709551615 bytes",
            id="string-in-array-u64-max",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("t") + struct.pack("<IIQ", 9, 8, 2)
            + _w_str("o" * 20) + b"\x01\x00\x00",
            r"length of t\[1\] needs 8 bytes but only 3 remain",
            id="string-length-cut",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("s") + struct.pack("<IIQ", 9, 6, 1 << 60) + bytes(8),
            r"at byte 41: s claims \d+ float32 values",
            id="float-array-count",
        ),
        pytest.param(
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("x") + struct.pack("<I", 99) + bytes(8),
            r"x has unknown value type 99",
            id="value-type",
        ),
    ],
)
def test_corrupt_headers(tmp_path, blob, match):
    """Corrupt lengths and counts raise LoaderError with the byte offset, never allocate."""
    path = tmp_path / "bad.gguf"
    path.write_bytes(blob)
    with pytest.raises(LoaderError, match=match):
        spec_from_gguf(path)


def test_metadata_sha256_covers_exactly_the_metadata(tmp_path):
    """metadata_sha256 == sha256 of the bytes before GGUF.metadata_end, on real files (SmolLM2:
    98 MB, of which the tokenizer reads < 2 MB); a changed tensor byte keeps it, a changed
    token changes it; a corrupt file raises LoaderError like read_gguf_metadata."""
    import hashlib

    from rmlprep.gguf import metadata_sha256

    for path in [SMOLLM, GGUF_DIR / "ggml-vocab-qwen2.gguf"]:
        path = _need(path)
        end = read_gguf_metadata(path)["GGUF.metadata_end"]
        with open(path, "rb") as f:
            assert metadata_sha256(path) == hashlib.sha256(f.read(end)).hexdigest()
    data = bytearray(write_gguf(tmp_path / "a.gguf", _tiny_llama_kvs()).read_bytes())
    digest = metadata_sha256(tmp_path / "a.gguf")
    (tmp_path / "b.gguf").write_bytes(bytes(data) + b"tensor data")
    assert metadata_sha256(tmp_path / "b.gguf") == digest
    data[data.index(b"\xe2\x96\x81ab")] = ord("x")
    (tmp_path / "c.gguf").write_bytes(bytes(data))
    assert metadata_sha256(tmp_path / "c.gguf") != digest
    (tmp_path / "d.gguf").write_bytes(bytes(data[:200]))
    with pytest.raises(LoaderError, match=r"corrupt or truncated GGUF at byte \d+"):
        metadata_sha256(tmp_path / "d.gguf")


def test_truncated_real_file(tmp_path):
    """The SmolLM2 file cut at offsets inside its metadata raises LoaderError with an offset;
    cut after the metadata it still loads."""
    path = _need(SMOLLM)
    end = read_gguf_metadata(path)["GGUF.metadata_end"]
    with open(path, "rb") as f:
        head = f.read(end + 4096)
    offsets = [1, 4, 8, 20, 24, 30, 100, 1000, 50_000, 400_000, end // 2, end - 100, end - 1]
    for cut in offsets:
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(head[:cut])
        with pytest.raises(LoaderError, match=r"at byte \d+") as info:
            spec_from_gguf(p)
        assert str(p) in str(info.value)
    p = tmp_path / "after.gguf"  # cut inside the tensor infos
    p.write_bytes(head)
    with pytest.raises(LoaderError, match=r"corrupt or truncated GGUF at byte \d+: .*tensor"):
        spec_from_gguf(p)


def test_cut_in_tensor_data_refused(tmp_path):
    """The SmolLM2 model cut inside its tensor data (a download that stopped) is refused with
    both sizes, as llama.cpp refuses it ("tensor '...' data is not within the file bounds, model
    is corrupted or incomplete", checked for every tensor even on a vocab-only load) and the
    ``gguf`` package's GGUFReader fails on it; the whole file loads. The size it needs comes from
    GGUFReader on the whole file (the last tensor's data_offset + n_bytes)."""
    from rmlprep.gguf import metadata_sha256

    gguf = pytest.importorskip("gguf")
    path = _need(SMOLLM)
    last = max(gguf.GGUFReader(path).tensors, key=lambda t: t.data_offset)
    need = last.data_offset + last.n_bytes
    assert need == path.stat().st_size  # no bytes after the last tensor
    src = open(path, "rb")
    for cut in (need - 1, need - last.n_bytes, 60_000_000):
        p = tmp_path / f"cut{cut}.gguf"
        src.seek(0)
        p.write_bytes(src.read(cut))
        pattern = rf"{p}: truncated GGUF: the data of its 272 tensors ends at byte {need} \(tensor '{last.name}'\) but the file has {cut} bytes \({need - cut} missing\)"
        with pytest.raises(LoaderError, match=pattern):
            spec_from_gguf(p)
        with pytest.raises(LoaderError, match=pattern):  # the load cache's key: no hit on a cut file
            metadata_sha256(p)
    src.close()
    assert len(spec_from_gguf(path)[0].vocab) == 49152


def _gguf_with_tensor(path: Path, n: int, *, alignment: int | None = None) -> None:
    """A vocab-bearing GGUF with one float32 tensor of n values, written by the ``gguf`` package's
    GGUFWriter."""
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, kind, value in _tiny_llama_kvs():
        if key == "general.architecture":
            continue
        if kind == "str":
            w.add_string(key, value)
        else:  # str, float (float32) and int (int32) lists
            w.add_array(key, list(value))
    w.add_tensor("w", np.arange(n, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("alignment", [None, 64])
def test_cut_in_tensor_data_of_written_file(tmp_path, alignment):
    """A file GGUFWriter wrote (one float32 tensor of 1,000 values, 4,000 bytes) loads whole and
    cut after its tensor's last byte (the writer pads the end to general.alignment: llama.cpp
    checks only each tensor's bytes), and is refused cut one byte into the tensor. Where the
    tensor ends is GGUFReader's data_offset + n_bytes, so the alignment (default 32, or
    general.alignment) places the data start as the gguf package does."""
    gguf = pytest.importorskip("gguf")
    from rmlprep.gguf import metadata_sha256

    _gguf_with_tensor(tmp_path / "a.gguf", 1000, alignment=alignment)
    (t,) = gguf.GGUFReader(tmp_path / "a.gguf").tensors
    end = t.data_offset + t.n_bytes
    data = (tmp_path / "a.gguf").read_bytes()
    for name, cut in (("whole", len(data)), ("end", end)):
        (tmp_path / f"{name}.gguf").write_bytes(data[:cut])
        assert len(spec_from_gguf(tmp_path / f"{name}.gguf")[0].vocab) == 265
        metadata_sha256(tmp_path / f"{name}.gguf")
    (tmp_path / "b.gguf").write_bytes(data[: end - 1])
    with pytest.raises(LoaderError, match=rf"the data of its 1 tensor ends at byte {end} \(tensor 'w'\) but the file has {end - 1} bytes"):
        spec_from_gguf(tmp_path / "b.gguf")


def test_counts_of_one_are_named_in_the_singular(tmp_path):
    """review21: a header claiming one tensor with no bytes after the key-values was refused as
    "claims 1 tensors". Worked example: the tiny llama key-values end the file, so the one tensor
    info (at least 24 bytes: name length 8, dimension count 4, type 4, offset 8) finds 0 bytes; a
    string array of one element cut after its count finds 0 bytes for its 8-byte length."""
    p = write_gguf(tmp_path / "one.gguf", _tiny_llama_kvs(), n_tensors=1)
    with pytest.raises(LoaderError, match=r"at byte 8: the header claims 1 tensor, more than the 0 bytes left can hold$"):
        spec_from_gguf(p)
    q = tmp_path / "cut.gguf"  # one key, a string array of count 1, and nothing after the count
    q.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _w_str("t") + struct.pack("<IIQ", 9, 8, 1))
    with pytest.raises(LoaderError, match=r": t claims 1 string, more than the 0 bytes left can hold$"):
        read_gguf_metadata(q)


def test_ggml_type_sizes_match_gguf_package():
    """rmlprep's table of ggml block sizes is the ``gguf`` package's GGML_QUANT_SIZES (every type
    it lists; a newer type missing here has only its data start checked)."""
    gguf = pytest.importorskip("gguf")
    from rmlprep.gguf_reader import GGML_TYPE_SIZES

    assert GGML_TYPE_SIZES == {int(t): tuple(v) for t, v in gguf.constants.GGML_QUANT_SIZES.items()}


def test_corrupt_length_in_real_file(tmp_path):
    """A string length in the middle of the real token array set to 2**40: LoaderError naming
    the element and its offset."""
    path = _need(GGUF_DIR / "ggml-vocab-llama-spm.gguf")
    data = bytearray(path.read_bytes())
    # find the 100th token's length field: tokens are "<unk>", "<s>", ... ; locate "<0x60>"
    needle = struct.pack("<Q", 6) + b"<0x60>"
    at = data.index(needle)
    data[at : at + 8] = struct.pack("<Q", 1 << 40)
    p = tmp_path / "corrupt.gguf"
    p.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=rf"at byte {at}: tokenizer\.ggml\.tokens\[99\] claims 1099511627776 bytes"):
        spec_from_gguf(p)


# ----------------------------------------------------------------------------------------------


def _corpus_texts(n: int, max_bytes: int = 2048) -> list[str]:
    if not (CORPORA / "text-multilingual.jsonl").exists():
        return []
    from tools.make_spm_fixtures import sample_texts

    return sample_texts(n, max_bytes=max_bytes, corpora=CORPORA)


def test_gguf_parity_fixtures_do_not_drift(tmp_path):
    """fixtures/parity_gguf is what tools/make_gguf_fixtures.py makes from the real files'
    llama.cpp vectors (the run's parity stage checks GGUF files with them)."""
    from tools.make_gguf_fixtures import VOCABS, write_fixtures

    written = write_fixtures(tmp_path, real=REAL)
    if len(written) < len(VOCABS):
        pytest.skip(_MISSING)
    committed = Path(__file__).resolve().parents[1] / "fixtures" / "parity_gguf"
    assert sorted(p.name for p in committed.glob("*.json")) == sorted(p.name for p in written)
    for p in written:
        assert p.read_bytes() == (committed / p.name).read_bytes(), f"{p.name}: rerun tools/make_gguf_fixtures.py"
