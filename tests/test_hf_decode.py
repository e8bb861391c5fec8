"""Decoding a tokenizer.json's ids as Hugging Face ``tokenizers`` does (rmlprep.hf_decode).

Expected texts come from ``tokenizers.Tokenizer.decode`` through ``tools/make_decoder_fixtures.py``
(``fixtures/decoders.json``): 26 decoder chains on two synthetic tokenizer.json files built by the
generator and on two real files edited in memory (Mistral 7B v0.1, GPT-2). Tests marked ``parity``
run the reference live.

Before this module, a tokenizer.json with a null decoder, a SentencePiece-style chain without
ByteFallback or without the "▁" -> " " step, a ByteLevel step in a SentencePiece-style file, or a
byte-level file without a ByteLevel step loaded, encoded exactly and decoded otherwise than
tokenizers without a word; so did the real files as shipped on an invalid byte run (Mistral,
Phi-3, Gemma: "<0x04><0xC9>" is "\\ufffd\\ufffd" in tokenizers) and on ids without a token (GPT-4o).
"""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from rmlprep import UnsupportedTokenizer
from rmlprep.errors import SpecError, TokenIdError
from rmlprep.hf import spec_from_tokenizer_json
from rmlprep.load import load_tokenizer
from rmlprep.spec import TokenizerSpec
from rmlprep.tokenizer import Tokenizer
from tools.make_decoder_fixtures import REAL_BASES, VARIANTS, id_lists
from tools.make_parity_fixtures import real_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = json.loads((ROOT / "fixtures" / "decoders.json").read_text(encoding="ascii"))
REAL = real_dir()
HF_NAMES = ["gpt2", "llama3", "qwen2.5", "mistral-7b-v0.1", "gemma", "phi-3-mini", "gemma3", "gpt-4o", "gpt-oss", "qwen3"]

_bases: dict[str, dict] = {}


def _base(name: str) -> dict:
    if name in FIXTURE["bases"]:
        return FIXTURE["bases"][name]
    if name not in _bases:
        path = REAL / REAL_BASES[name]
        if not path.is_file():
            pytest.skip(f"real tokenizer {path} is absent: run ../shared/real-tokenizers/get.sh "
                        "(or set RMLPREP_REAL_TOKENIZERS)")
        raw = path.read_bytes()
        assert hashlib.sha256(raw).hexdigest() == FIXTURE["real"][name], (
            f"{path} differs from the file the fixture was made from; rerun tools/make_decoder_fixtures.py")
        _bases[name] = json.loads(raw)
    return _bases[name]


def _tok(base: str, variant: str) -> Tokenizer:
    return Tokenizer.create(spec_from_tokenizer_json({**_base(base), "decoder": VARIANTS[variant]})[0])


def _check_cases(base: str, variant: str) -> int:
    tok = _tok(base, variant)
    cases = [c for c in FIXTURE["cases"] if c["base"] == base and c["variant"] == variant]
    assert cases
    for c in cases:
        if c["text"] is None:  # tokenizers panics (a Strip cut past the token): an error, never text
            with pytest.raises(UnsupportedTokenizer, match="tokenizers panics"):
                tok.decode(c["ids"], skip_special_tokens=c["skip"])
        else:
            assert tok.decode(c["ids"], skip_special_tokens=c["skip"]) == c["text"], c
    return len(cases)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_decoder_chains_decode_as_tokenizers(variant):
    """Every chain, on the two synthetic files (specials, a gap, normalized added tokens, byte
    runs valid and not, near-miss byte tokens, "▁▁", "##", "</w>", CTC's pad and delimiter)."""
    assert _check_cases("sp", variant) + _check_cases("bl", variant) > 50


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("base", list(REAL_BASES))
def test_decoder_chains_on_real_files(base, variant):
    """Every chain on a real SentencePiece-style file (Mistral) and a real byte-level one (GPT-2)."""
    _check_cases(base, variant)


def test_the_fixture_covers_what_was_silently_wrong():
    """The chains found decoding otherwise last sitting, and the real files' own chains, are in
    the fixture with texts that the older decoding did not give (worked by hand from the
    fixture's synthetic SentencePiece-style file: "<0x41><0xFF>" is one invalid run)."""
    for name in ("null", "sp-no-bytefallback", "sp-no-replace", "bytefallback-bytelevel", "fuse", "sp-llama",
                 "metaspace-always", "bytelevel"):
        assert name in VARIANTS
    tok = _tok("sp", "sp-llama")
    vocab = {t: i for i, t in enumerate(tok.spec.vocab)}
    a, ff, b = vocab["<0x41>"], vocab["<0xFF>"], vocab["\u2581b"]
    assert tok.decode([a, ff, b]) == "\ufffd\ufffd b"  # ByteFallback: a bad run is U+FFFD per byte
    assert tok.decode([a, b, ff]) == "A b\ufffd"
    assert _tok("sp", "null").decode([a, b]) == "<0x41> \u2581b"  # no decoder: tokens joined by " "
    assert _tok("sp", "sp-no-replace").decode([b, b]) == "\u2581b\u2581b"
    assert _tok("sp", "metaspace-always").decode([vocab["\u2581\u2581"], b]) == " b"  # every "▁" of the first


@pytest.mark.parity
@pytest.mark.parametrize("name", HF_NAMES)
def test_real_files_as_shipped_decode_as_tokenizers_live(name):
    """Random id lists (a third special or added tokens), with and without skip_special_tokens,
    on each real tokenizer.json as shipped: invalid byte runs (Mistral, Phi-3, Gemma) and ids
    without a token (GPT-4o's 19) decoded otherwise before."""
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = load_tokenizer(path.parent)
    n = len(tok.spec.vocab)
    special = [i for i, t in enumerate(tok.spec.token_types) if t != 1]
    rng = random.Random(name)
    for _ in range(400):
        ids = [rng.choice(special) if rng.random() < 0.3 else rng.randrange(n) for _ in range(rng.randint(1, 8))]
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip), ids


CORPUS = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"
JOINED = ["mistral-7b-v0.1", "gemma", "phi-3-mini", "llama3", "gpt-4o"]


@pytest.mark.parity
@pytest.mark.parametrize("name", JOINED)
def test_long_id_lists_decode_as_tokenizers_live(name):
    """Whole documents in one call, as the joined-bytes path decodes them (ByteLevel; Replace,
    ByteFallback, Fuse): the ids tokenizers gives for rows of the multilingual corpus (Mistral
    spells newlines and rare characters as byte runs), the same ids with a byte token cut in
    (an invalid run after a valid one), and 20,000 random ids (every kind of run)."""
    tokenizers = pytest.importorskip("tokenizers")
    path = REAL / "hf" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent")
    if not CORPUS.is_file():
        pytest.skip(f"{CORPUS} is absent")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = load_tokenizer(path.parent)
    with CORPUS.open(encoding="utf-8") as f:
        texts = [json.loads(next(f))["text"][:20_000] for _ in range(40)]
    rng = random.Random(name)
    lists = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    lists += [ids[:k] + [rng.randrange(len(tok.spec.vocab))] + ids[k:] for ids in lists[:10]
              for k in [rng.randrange(len(ids) + 1)]]
    lists.append([rng.randrange(len(tok.spec.vocab)) for _ in range(20_000)])
    for ids in lists:
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("name", HF_NAMES)
def test_the_shared_bytes_table_is_the_chain_s_bytes(name):
    """The joined-bytes path reads the Tokenizer's raw token bytes where they agree with the
    chain's: its table equals the bytes worked out per token from the module docstring's rules
    (ByteLevel: the byte alphabet or UTF-8; ByteFallback: a ``<0xXX>`` token's byte after a 0xFF
    marker, else the replaced token's UTF-8; a gap: nothing)."""
    from rmlprep.hf_decode import _BYTE_TOKEN, byte_level_bytes

    path = REAL / "hf" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent")
    tok = load_tokenizer(path.parent)
    tok.decode([])
    dec = tok._chain_decoder
    chain = tok.spec.decode_chain
    want = []
    for t in dec.tokens:
        if t is None:
            want.append(b"")
        elif chain[0] == ("ByteLevel",):
            want.append(byte_level_bytes(t))
        else:
            assert chain[:3] == (("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",))
            m = _BYTE_TOKEN.fullmatch(t)
            want.append(bytes([0xFF, int(m.group(1), 16)]) if m else t.replace("\u2581", " ").encode())
    assert dec._table == want
    assert dec._table is tok._bytes or all(a is b for a, b in zip(dec._table, tok._bytes) if len(a) > 2), (
        "the table shares the Tokenizer's bytes objects")


@pytest.mark.parametrize("kind", ["byte_level", "sentencepiece"])
def test_hand_built_specs_decode_from_their_own_bytes(kind):
    """Where the Tokenizer's raw bytes are not the chain's, the table has its own: a byte-level
    spec without decode_added_byte_level keeps a control token's UTF-8 ("<é>" is 4 bytes)
    while ByteLevel reads "é" as the byte 0xE9; a SentencePiece spec under a ByteLevel chain;
    a "<0x+A>" token that is not BYTE-typed is still a byte (u8::from_str_radix reads "+A")."""
    from rmlprep.spec import TokenType

    if kind == "byte_level":
        spec = TokenizerSpec(kind="byte_level_bpe", vocab=["a", "b", "<é>", "Ã", "©"], merges=[],
                             token_types=[1, 1, TokenType.CONTROL, 1, 1], decode_chain=(("ByteLevel",),))
        tok = Tokenizer.create(spec)
        assert tok.decode_bytes([2]) == "<é>".encode()
        assert tok.decode([2, 0]) == "<\ufffd>a"  # 0xE9 alone is invalid
        assert tok.decode([3, 4, 1]) == "\u00e9b"  # "Ã©" are the bytes C3 A9: "é"
        assert tok.decode([2], skip_special_tokens=True) == ""
    else:
        spec = TokenizerSpec(kind="sentencepiece_bpe", vocab=["\u2581a", "<0x+A>", "<0x0A>", "b"],
                             scores=[0.0] * 4, token_types=[1, 1, TokenType.BYTE, 1],
                             decode_chain=(("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",)))
        tok = Tokenizer.create(spec)
        assert tok.decode([0, 1, 2, 3]) == " a\n\nb"
        assert tok.decode_bytes([1]) == b"<0x+A>"
        bl = Tokenizer.create(spec.replace(decode_chain=(("ByteLevel",),)))
        assert bl.decode([0, 3]) == "\u2581ab"  # "▁" is not in the byte alphabet: its UTF-8


@pytest.mark.parity
@pytest.mark.parametrize("base", ["sp", "bl"])
def test_decoder_chains_live(base):
    """Fresh random id lists (another seed than the fixture's) through every chain, live."""
    tokenizers = pytest.importorskip("tokenizers")
    lists = id_lists(FIXTURE["bases"][base], 60, seed=1234)
    for variant, dec in VARIANTS.items():
        doc = {**FIXTURE["bases"][base], "decoder": dec}
        ref = tokenizers.Tokenizer.from_str(json.dumps(doc))
        tok = Tokenizer.create(spec_from_tokenizer_json(doc)[0])
        for ids in lists:
            for skip in (False, True):
                try:
                    want = ref.decode(ids, skip_special_tokens=skip)
                except BaseException:  # noqa: BLE001 - pyo3's PanicException
                    with pytest.raises(UnsupportedTokenizer, match="tokenizers panics"):
                        tok.decode(ids, skip_special_tokens=skip)
                    continue
                assert tok.decode(ids, skip_special_tokens=skip) == want, (variant, ids, skip)


@pytest.mark.parity
def test_fixture_does_not_drift(tmp_path):
    """Rerunning the generator gives the committed fixture byte for byte."""
    pytest.importorskip("tokenizers")
    for rel in REAL_BASES.values():
        if not (REAL / rel).is_file():
            pytest.skip(f"real tokenizer {REAL / rel} is absent")
    from tools.make_decoder_fixtures import main

    out = tmp_path / "decoders.json"
    assert main(["--out", str(out)]) == 0
    assert out.read_bytes() == (ROOT / "fixtures" / "decoders.json").read_bytes()


# -- what is not mirrored is refused at decode time, never at load ----------------------------
_REGEX = {"type": "Replace", "pattern": {"Regex": "\u2581+"}, "content": " "}


@pytest.mark.parametrize("decoder, where, what", [
    pytest.param({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, _REGEX]}, "decoder.decoders[1]",
                 "a regex Replace decoder is not reproduced", id="regex-replace"),
    pytest.param({"type": "WordPiece"}, "decoder", "WordPiece(prefix=None, cleanup=None) is not a string and a bool",
                 id="wordpiece-without-fields"),
    pytest.param({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Frobnicate"}]}, "decoder.decoders[1]",
                 "type = 'Frobnicate' is not a decoder rmlprep reproduces", id="unknown-type"),
    pytest.param({"type": "Strip", "content": "ab", "start": 1, "stop": 0}, "decoder",
                 "Strip(content='ab', start=1, stop=0)", id="strip-two-characters"),
    pytest.param({"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False}, "decoder",
                 "add_prefix_space = false with prepend_scheme = 'always'", id="metaspace-conflict"),
])
def test_unreproduced_decoders_refuse_at_decode_time(decoder, where, what):
    """Such a file loads and encodes (tests/test_bpe_unknown.py and test_pipeline_trust.py encode
    files with odd decoders); decoding raises one line naming the JSON path and the step."""
    doc = {**FIXTURE["bases"]["sp"], "decoder": decoder}
    tok = Tokenizer.create(spec_from_tokenizer_json(doc)[0])
    ids = tok.encode("ab a")
    assert ids
    with pytest.raises(UnsupportedTokenizer) as e:
        tok.decode(ids)
    msg = str(e.value)
    assert f"tokenizer.json: {where} " in msg and what in msg and "\n" not in msg, msg
    with pytest.raises(UnsupportedTokenizer):
        tok.decode([])


def test_cli_decode_refusal_is_one_line(tmp_path):
    """``rmlprep decode`` goes through Tokenizer.decode: the refusal exits 2 with one line."""
    d = tmp_path / "tok"
    d.mkdir()
    vocab = FIXTURE["bases"]["sp"]["model"]["vocab"]
    ids = [vocab["\u2581a"], vocab["<0xC3>"], vocab["<0xA9>"], vocab["\u2581\u2581"]]
    (d / "tokenizer.json").write_text(json.dumps({**FIXTURE["bases"]["sp"], "decoder": _REGEX}), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "decode", str(d), *map(str, ids)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and "a regex Replace decoder is not reproduced" in r.stderr, r
    assert "Traceback" not in r.stderr and r.stdout == ""
    (d / "tokenizer.json").write_text(json.dumps({**FIXTURE["bases"]["sp"], "decoder": None}), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "decode", str(d), *map(str, ids)], capture_output=True,
                       text=True, cwd=ROOT)
    # no decoder: the tokens joined by " " (the gap-free ids of the fixture's null-decoder cases)
    assert r.returncode == 0 and r.stdout == "\u2581a <0xC3> <0xA9> \u2581\u2581\n", r


def test_out_of_range_ids_are_an_error():
    """tokenizers drops an id it has no token for; rmlprep drops ids inside the vocab that have
    none (a gap) but names one outside it."""
    tok = _tok("bl", "bytelevel")
    with pytest.raises(TokenIdError, match="out of range"):
        tok.decode([len(tok.spec.vocab)])


def test_numpy_and_pyarrow_ids_decode_by_value():
    """decode takes numpy and pyarrow integers by value (what iterating an ``input_ids`` row of a
    Table that tokenize_text returned gives) on a decoder chain too: its one-pass check
    (``min``, then table lookups) raised pyarrow's own TypeError for them. Expected: the
    fixture's text (tokenizers' decode of the same ids)."""
    np = pytest.importorskip("numpy")
    pa = pytest.importorskip("pyarrow")
    tok = _tok("bl", "bytelevel")
    c = next(c for c in FIXTURE["cases"] if c["base"] == "bl" and c["variant"] == "bytelevel"
             and c["text"] and len(c["ids"]) > 1)
    for ids in (np.array(c["ids"]), pa.array(c["ids"]), list(pa.array(c["ids"]))):
        assert tok.decode(ids, skip_special_tokens=c["skip"]) == c["text"]
    with pytest.raises(TokenIdError, match="not an integer"):
        tok.decode(pa.array([c["ids"][0], None]))


def test_a_batch_of_id_rows_is_refused_by_name():
    """``decode(ids_2d)`` (a padded batch as a 2-D array) raised numpy's "truth value of an array
    ... is ambiguous" (torch's "Boolean value of Tensor" for a tensor) from the chain's one-pass
    ``min``: now a TokenIdError saying to decode row by row, as for a nested list."""
    np = pytest.importorskip("numpy")
    tok = _tok("bl", "bytelevel")
    for ids in (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]):
        for decode in (tok.decode, tok.decode_bytes):
            with pytest.raises(TokenIdError, match="not an integer; decode takes one sequence of ids: decode a batch row"):
                decode(ids)


# -- streaming --------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_stream_decoder_concatenates_to_decode(variant):
    """push/flush text concatenates to decode(ids) for every chain (raising where decode raises);
    the chains real files ship stream text as it comes, the others hold it back until flush."""
    streams = 0
    for base in ("sp", "bl"):
        tok = _tok(base, variant)
        for ids in id_lists(FIXTURE["bases"][base], 40, seed=7):
            for skip in (False, True):
                try:
                    want = tok.decode(ids, skip_special_tokens=skip)
                except UnsupportedTokenizer:
                    want = None
                sd = tok.stream_decoder(skip_special_tokens=skip)
                try:
                    pushed = [sd.push(i) for i in ids]
                    got = "".join(pushed) + sd.flush()
                except UnsupportedTokenizer:
                    got = None
                assert got == want, (variant, base, ids, skip)
                streams += any(pushed[:-1]) if got is not None else 0
    assert bool(streams) == (variant not in HELD_BACK), streams


def test_stream_decoder_takes_any_truthy_skip():
    """skip_special_tokens is taken by truth, as decode takes it: None and numpy bools stream the
    text decode gives for False / True (the one-id window's memo indexed its pair of tables with the
    value itself: None raised TypeError at the first emitting push). Expected: decode's text, which
    test_stream_decoder_concatenates_to_decode holds to tokenizers'."""
    np = pytest.importorskip("numpy")
    tok = _tok("bl", "bytelevel")
    for ids in id_lists(FIXTURE["bases"]["bl"], 10, seed=3):
        for skip in (None, np.False_, np.True_, 0, 1):
            sd = tok.stream_decoder(skip_special_tokens=skip)
            got = "".join(sd.push(i) for i in ids) + sd.flush()
            assert got == tok.decode(ids, skip_special_tokens=bool(skip)), (ids, skip)


#: the fixture's chains a stream holds back until flush, and why a window's text is not exact there
HELD_BACK = {
    "fuse-wordpiece": "WordPiece cleanup after Fuse rewrites across tokens (' .' -> '.')",
    "bpe-decoder": "the last token's suffix decodes to '', every other one's to ' '",
    "bytelevel-bpe-decoder": "the same BPEDecoder after ByteLevel",
    "ctc": "repeated tokens collapse, so a window's first token may merge with the one before it",
    "ctc-no-cleanup": "the same collapse",
    "strip-2-1": "Strip after Fuse cuts two leading spaces and a trailing one the next token may follow",
    "bytelevel-strip": "the same trailing cut after ByteLevel",
}


@pytest.mark.parametrize("name", HF_NAMES)
def test_the_real_files_chains_stream(name):
    """Every real tokenizer.json's own chain streams through windows (none is held back);
    the fixture's held-back chains are the ones listed in HELD_BACK, each for its reason."""
    from rmlprep.hf_decode import _window_safe

    path = REAL / "hf" / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent")
    assert load_tokenizer(path.parent).stream_decoder()._chain.windowed
    held = {v for v in VARIANTS if not _window_safe(_tok("sp", v).spec.decode_chain)}
    assert held == set(HELD_BACK)


def test_stream_decoder_holds_a_byte_run_back():
    """A ByteFallback run is held back until a token ends it: "<0x41>" alone would be "A", but
    "<0x41><0xFF>" is two U+FFFD."""
    tok = _tok("sp", "sp-llama")
    vocab = {t: i for i, t in enumerate(tok.spec.vocab)}
    sd = tok.stream_decoder()
    assert sd.push(vocab["\u2581a"]) == "a"
    assert sd.push(vocab["<0x41>"]) == ""
    assert sd.push(vocab["<0xFF>"]) == ""
    assert sd.push(vocab["\u2581b"]) == "\ufffd\ufffd b"
    assert sd.flush() == ""


# -- the spec -----------------------------------------------------------------------------------
def test_decode_chain_round_trips_and_is_validated():
    """decode_chain survives to_dict/from_dict (the load cache and pickles) and enters the
    fingerprint; a hand-made spec with a step no loader writes is refused by Tokenizer.create."""
    spec = spec_from_tokenizer_json({**FIXTURE["bases"]["sp"], "decoder": VARIANTS["nested"]})[0]
    assert spec.decode_chain == (("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",), ("Strip", " ", 1, 0))
    again = TokenizerSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.fingerprint == spec.fingerprint
    null = spec_from_tokenizer_json({**FIXTURE["bases"]["sp"], "decoder": None})[0]
    assert null.decode_chain == () and null.fingerprint != spec.fingerprint
    tok = Tokenizer.create(spec)
    ids = list(range(len(spec.vocab)))
    assert pickle.loads(pickle.dumps(tok)).decode(ids) == tok.decode(ids)
    for bad in [(("Strip", " ", "1", 0),), (("Frobnicate",),), (("Fuse", 1),)]:
        with pytest.raises(SpecError, match=r"decode_chain\[0\]"):
            Tokenizer.create(spec.replace(decode_chain=bad))
    # specs from other loaders keep the field at its default (and their fingerprints)
    plain = copy.copy(spec.to_dict())
    plain.pop("decode_chain")
    assert "decode_chain" not in TokenizerSpec.from_dict(plain).to_dict()
