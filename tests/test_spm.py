"""SentencePiece .model -> TokenizerSpec: committed sentencepiece fixtures for the real models,
live parity on >= 2,000 real texts, tiny trained models for user-defined pieces, byte fallback
and unk, and refusals (Unigram, normalization rmlprep does not reproduce, corrupt files).

Real files: env ``RMLPREP_REAL_TOKENIZERS`` (default ``~/.cache/rmlprep-real-tokenizers``, filled by
``bash ../shared/real-tokenizers/get.sh DIR``); tests that need them skip when absent.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rmlprep.errors import LoaderError, TokenizeError, UnsupportedTokenizer
from rmlprep.spec import SENTENCEPIECE, TokenType
from rmlprep.spm import read_sentencepiece_model, spec_from_sentencepiece_model
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import corpus_mismatch
from tools.make_spm_fixtures import (
    CORPORA,
    HARD_STRINGS,
    MODELS,
    real_tokenizers_dir,
    sample_texts,
    sha256_file,
    write_fixtures,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "parity_spm"
REAL = real_tokenizers_dir()
_MISSING = f"not found in {REAL}; run `bash ../shared/real-tokenizers/get.sh {REAL}` or set RMLPREP_REAL_TOKENIZERS"

_TOKENIZERS: dict[str, Tokenizer] = {}


def _real(name: str) -> Path:
    path = REAL / MODELS[name]
    if not path.exists():
        pytest.skip(f"{MODELS[name]} {_MISSING}")
    return path


def _load(path: Path) -> Tokenizer:
    if str(path) not in _TOKENIZERS:
        _TOKENIZERS[str(path)] = Tokenizer.create(spec_from_sentencepiece_model(path))
    return _TOKENIZERS[str(path)]


# ----------------------------------------------------------------------------------------------
# Real models: committed fixtures (no reference library needed).


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in MODELS])
def test_fixture(name):
    """Every case of fixtures/parity_spm/<name>.json: rmlprep's ids == sentencepiece's.

    sentencepiece never parses control pieces from text, hence parse_special=False; user-defined
    pieces (Mistral v3's [REFERENCE_DOC_n]) are still matched everywhere.
    """
    fx = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    path = _real(name)
    assert fx["sha256"] == sha256_file(path), (
        f"{path} is not the file the fixture was made from; rerun tools/make_spm_fixtures.py"
    )
    assert fx["generator"] == "tools/make_spm_fixtures.py" and fx["reference"].startswith("sentencepiece ")
    tok = _load(path)
    cases = fx["cases"]
    assert len(cases) >= 300
    bad = [c for c in cases if tok.encode(c["text"], parse_special=False) != c["ids"]]
    assert not bad, f"{len(bad)}/{len(cases)} mismatches; first text {bad[0]['text'][:200]!r}"


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in MODELS])
def test_real_spec_fields(name):
    spec = spec_from_sentencepiece_model(_real(name))
    assert spec.kind == SENTENCEPIECE and spec.scores is not None and not spec.merges
    assert (spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id) == (0, 1, 2, None)
    assert spec.byte_fallback and not spec.fuse_unk
    assert spec.add_prefix_space and spec.prefix_scheme == "whole_text" and not spec.prefix_if_missing
    assert spec.parse_user_defined_always and spec.decode_strip_prefix == "text"
    assert (spec.add_bos, spec.add_eos) == (False, False)  # sentencepiece adds none unless asked
    b0 = spec.vocab.index("<0x00>")
    assert spec.token_types[b0] == TokenType.BYTE and spec.vocab[b0 + 255] == "<0xFF>"
    with_bos = spec_from_sentencepiece_model(_real(name), add_bos=True)
    assert Tokenizer.create(with_bos).encode("Hello", add_special_tokens=True)[0] == 1


def test_mistral_v3_user_defined_and_control():
    """[REFERENCE_DOC_n] (user-defined) is matched inside words, longest first; [INST] (control)
    is cut by no reference of a .model alone (sentencepiece never cuts it; rmlprep's cut after the
    whole-text '▁' gave ids no one gives): parse_special=True refuses it, user-defined text or not."""
    tok = _load(_real("mistral-v3"))
    d1, d12 = tok.token_to_id("[REFERENCE_DOC_1]"), tok.token_to_id("[REFERENCE_DOC_12]")
    ids = tok.encode("x[REFERENCE_DOC_12]y", parse_special=False)
    assert d12 in ids and d1 not in ids
    inst = tok.token_to_id("[INST]")
    assert inst not in tok.encode("[INST] hi", parse_special=False)
    assert tok.encode("x[REFERENCE_DOC_12]y") == ids  # user-defined: the same parsed or not
    with pytest.raises(TokenizeError, match=r"found the special token '\[INST\]' \(id 3\)"):
        tok.encode("[INST] hi")


# ----------------------------------------------------------------------------------------------
# Real models: live comparison with sentencepiece.


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in MODELS])
def test_live_parity(name):
    """>= 2,000 real texts (multilingual documents and chat messages, up to 4 KB) plus the hard
    strings: ids equal, and decode(encode(x)) equals sentencepiece's decode."""
    spm = pytest.importorskip("sentencepiece")
    path = _real(name)
    if not (CORPORA / "text-multilingual.jsonl").exists():
        pytest.skip(f"corpora not found in {CORPORA}")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = _load(path)
    texts = sample_texts(2400, max_bytes=4096) + HARD_STRINGS
    assert len(texts) >= 2000
    n_tokens = 0
    for text in texts:
        expected = sp.encode(text)
        got = tok.encode(text, parse_special=False)
        assert got == expected, text[:200]
        n_tokens += len(got)
        assert tok.decode(got, skip_special_tokens=True) == sp.decode(expected), text[:200]
    print(f"{name}: {len(texts)} texts, {n_tokens} tokens, 0 mismatches")


@pytest.mark.parity
def test_fixtures_do_not_drift(tmp_path):
    """Rerunning the generator gives the committed fixtures byte for byte.

    The sample includes Debian-built corpus windows, so this needs that corpus, built from the
    same packages (same MANIFEST.tsv sha256 as recorded in the fixture banner).
    """
    pytest.importorskip("sentencepiece")
    for name in MODELS:
        _real(name)
    banner = json.loads((FIXTURES / "llama2.json").read_text(encoding="utf-8"))["debian_corpus"]
    if why := corpus_mismatch(banner):
        pytest.skip(why)
    for path in write_fixtures(tmp_path):
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), path.name


def test_fixture_files_are_small():
    for p in FIXTURES.glob("*.json"):
        assert p.stat().st_size < 1_500_000, p


def test_fixtures_hold_every_debian_part():
    """When made with the Debian-built corpus, every part is in the sample, with its name."""
    fx = json.loads((FIXTURES / "llama2.json").read_text(encoding="utf-8"))
    banner = fx["debian_corpus"]
    if banner is None:
        pytest.skip("the fixtures were made without the Debian-built corpus")
    counted: dict[str, int] = {}
    for c in fx["cases"]:
        if "part" in c:
            counted[c["part"]] = counted.get(c["part"], 0) + 1
    assert counted == banner["parts"] and len(counted) >= 9 and min(counted.values()) >= 20


@pytest.mark.parity
def test_reader_matches_protobuf():
    """The wire-format reader agrees with sentencepiece's own protobuf classes."""
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    path = _real("mistral-v3")
    ours = read_sentencepiece_model(path)
    proto = pb.ModelProto()
    proto.ParseFromString(path.read_bytes())
    assert ours.pieces == [p.piece for p in proto.pieces]
    assert ours.scores == [p.score for p in proto.pieces]
    assert ours.types == [p.type for p in proto.pieces]
    ns, ts = proto.normalizer_spec, proto.trainer_spec
    assert (ours.add_dummy_prefix, ours.remove_extra_whitespaces, ours.escape_whitespaces) == (
        ns.add_dummy_prefix, ns.remove_extra_whitespaces, ns.escape_whitespaces)
    assert (ours.model_type, ours.byte_fallback, ours.unk_surface) == (ts.model_type, ts.byte_fallback, ts.unk_surface)


# ----------------------------------------------------------------------------------------------
# Tiny trained models.


def _train(tmp: Path, name: str, **kw) -> Path:
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp / "corpus.txt"
    if not corpus.exists():
        texts = sample_texts(400, max_bytes=1024) if (CORPORA / "text-multilingual.jsonl").exists() else []
        lines = [ln for t in texts for ln in t.splitlines() if ln.strip()]
        lines += ["hello world <tool> call @@ done"] * 20 + ["the quick brown fox jumps"] * 20
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = dict(
        input=str(corpus), model_prefix=str(tmp / name), vocab_size=2000, model_type="bpe",
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        character_coverage=0.98, minloglevel=2, num_threads=1,
    )
    args.update(kw)
    spm.SentencePieceTrainer.train(**args)
    return tmp / f"{name}.model"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    tmp = tmp_path_factory.mktemp("spm")
    return {
        "fallback": _train(tmp, "fallback", byte_fallback=True, user_defined_symbols=["<tool>", "@@", "<tool>x"],
                           control_symbols=["<ctrl>"]),
        "unk": _train(tmp, "unk", byte_fallback=False, user_defined_symbols=["<tool>"]),
        "nodummy": _train(tmp, "nodummy", byte_fallback=True, add_dummy_prefix=False),
    }


TINY_TEXTS = [
    "", " ", "hello world", " hello  world ", "<tool>", "<tool>x", "a<tool>b", "<tool>xyz @@@",
    "x@@y@@@", "<ctrl> is control", "hello<ctrl>world", "Zürich 東京 🦙", "ĳ ǅ \u2581 \u2581x",
    "unknown: ꙮ ᚠ ☃ 𝔘", "ꙮꙮꙮ ☃☃", "tab\there\nnewline", "<tool><tool> <tool>",
] + HARD_STRINGS


@pytest.mark.parity
@pytest.mark.parametrize("kind", ["fallback", "unk", "nodummy"])
def test_tiny_models_match_sentencepiece(tiny, kind):
    """User-defined pieces inside words (longest first), control text left alone, byte fallback,
    unk runs fused into one, and no dummy prefix: all as sentencepiece encodes them."""
    import sentencepiece as spm

    path = tiny[kind]
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = Tokenizer.create(spec_from_sentencepiece_model(path))
    texts = TINY_TEXTS + sample_texts(300, max_bytes=1024)
    for text in texts:
        expected = sp.encode(text)
        assert tok.encode(text, parse_special=False) == expected, text
        assert tok.decode(expected) == sp.decode(expected), text  # unk decodes as " \u2047 "


def _decode_cases(spec, n_random: int = 3000) -> list[list[int]]:
    """Every id alone, then random short id lists biased to the ids whose decoding has rules:
    byte pieces (runs, invalid UTF-8), control and unknown pieces, pieces starting with "▁"."""
    import random

    rng = random.Random(1234)
    n = len(spec.vocab)
    special = [i for i, t in enumerate(spec.token_types) if t != TokenType.NORMAL]
    spaced = [i for i, p in enumerate(spec.vocab) if p.startswith("\u2581")][:500]
    cases = [[i] for i in range(n)]
    for _ in range(n_random):
        k = rng.randint(1, 8)
        cases.append([rng.choice(special if rng.random() < 0.5 else spaced if rng.random() < 0.5 else range(n))
                      for _ in range(k)])
    return cases


def _assert_decodes_like(tok, sp, cases):
    bad = []
    for ids in cases:
        expected = sp.decode_ids(ids)
        got = tok.decode(ids)
        stream = tok.stream_decoder()
        streamed = "".join(stream.push(i) for i in ids) + stream.flush()
        if got != expected or streamed != expected:
            bad.append((ids, expected, got, streamed))
    assert not bad, f"{len(bad)}/{len(cases)} differ, first: {bad[0]!r}"


@pytest.mark.parity
@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in MODELS])
def test_decode_every_id_like_sentencepiece(name):
    """decode(ids) == SentencePieceProcessor.decode_ids(ids) for every id of the real model alone
    (control pieces empty, <unk> as " \u2047 ", a lone byte piece as U+FFFD or its ASCII
    character, "▁x" as "x" at the start) and for 3,000 random id lists; the stream decoder too."""
    spm = pytest.importorskip("sentencepiece")
    path = _real(name)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = _load(path)
    assert tok.spec.decoder == "sentencepiece"
    _assert_decodes_like(tok, sp, _decode_cases(tok.spec))


@pytest.mark.parity
@pytest.mark.parametrize("kind", ["fallback", "unk", "nodummy"])
def test_decode_every_id_like_sentencepiece_tiny(tiny, kind):
    """The same on the tiny models: user-defined and control pieces, no byte fallback (unk
    surface), no dummy prefix (no leading "▁" is dropped)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tiny[kind]))
    tok = Tokenizer.create(spec_from_sentencepiece_model(tiny[kind]))
    _assert_decodes_like(tok, sp, _decode_cases(tok.spec))


def test_decode_rule_worked_examples():
    """sentencepiece's rule on a hand-made vocabulary (ids: 0 <unk>, 1 <s>, 2 ▁, 3 ▁a, 4 b,
    5 <0xE3>, 6 <0x81>, 7 <0x82>, 8 <0x41>):

    - [1, 3] -> "a": the control piece is empty and "▁a" is still the first text, so it loses "▁";
    - [2, 3] -> " a": the lone "▁" took the strip (it output ""), "▁a" keeps its space;
    - [4, 3] -> "b a": text came first;
    - [0, 3] -> " \u2047  a": the unknown piece's surface is text;
    - [5, 6, 7] -> "\u3042" (E3 81 82); [5, 3, 6] -> "\ufffd a\ufffd": two separate byte runs;
    - [5, 6, 8] -> "\ufffd\ufffdA": E3 81 does not finish a character, one U+FFFD per byte.
    """
    from rmlprep.spec import TokenizerSpec

    vocab = ("<unk>", "<s>", "\u2581", "\u2581a", "b", "<0xE3>", "<0x81>", "<0x82>", "<0x41>")
    # the other 252 byte tokens after these (byte fallback needs all 256: Tokenizer.create)
    vocab += tuple(f"<0x{b:02X}>" for b in range(256) if f"<0x{b:02X}>" not in vocab)
    types = (2, 3, 1, 1, 1) + (6,) * 256
    spec = TokenizerSpec(kind=SENTENCEPIECE, vocab=vocab, token_types=types, scores=(0.0,) * len(vocab), unk_id=0,
                         byte_fallback=True, decode_strip_prefix="text", decoder="sentencepiece")
    tok = Tokenizer.create(spec)
    assert tok.decode([1, 3]) == "a"
    assert tok.decode([2, 3]) == " a"
    assert tok.decode([4, 3]) == "b a"
    assert tok.decode([0, 3]) == " \u2047  a"
    assert tok.decode([5, 6, 7]) == "\u3042"
    assert tok.decode([5, 3, 6]) == "\ufffd a\ufffd"
    assert tok.decode([5, 6, 8]) == "\ufffd\ufffdA"
    assert tok.decode([0, 3], skip_special_tokens=True) == "a"


def test_tiny_unk_is_fused(tiny):
    """Without byte fallback, a run of unknown characters is one unk id (sentencepiece merges
    consecutive unknown pieces in PopulateSentencePieceText)."""
    spec = spec_from_sentencepiece_model(tiny["unk"])
    assert spec.fuse_unk and not spec.byte_fallback
    tok = Tokenizer.create(spec)
    ids = tok.encode("ꙮꙮꙮ")
    assert ids.count(spec.unk_id) == 1


def test_tiny_control_piece_is_only_cut_when_parsing_specials(tiny):
    tok = Tokenizer.create(spec_from_sentencepiece_model(tiny["fallback"]))
    ctrl = tok.token_to_id("<ctrl>")
    assert tok.spec.token_types[ctrl] == TokenType.CONTROL
    assert ctrl not in tok.encode("a<ctrl>b", parse_special=False)
    with pytest.raises(TokenizeError, match=r"found the special token '<ctrl>'"):
        tok.encode("a<ctrl>b")  # parsed after the whole-text prefix: no reference's ids (spm_special)


# ----------------------------------------------------------------------------------------------
# Refusals.


def test_unigram_is_refused_by_name(tmp_path):
    path = _train(tmp_path, "uni", model_type="unigram")
    with pytest.raises(UnsupportedTokenizer, match=r"model_type = UNIGRAM is not supported"):
        spec_from_sentencepiece_model(path)


def _proto(*fields: bytes) -> bytes:
    return b"".join(fields)


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, wt: int, payload: bytes | int) -> bytes:
    key = _varint((num << 3) | wt)
    if wt == 0:
        return key + _varint(payload)
    if wt == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _piece(text: str, score: float = 0.0, typ: int = 1) -> bytes:
    return _field(1, 2, _field(1, 2, text.encode()) + _field(2, 5, struct.pack("<f", score)) + _field(3, 0, typ))


def _model(model_type: int = 2, normalizer: bytes | None = None, trainer_extra: bytes = b"", pieces=None) -> bytes:
    pieces = pieces if pieces is not None else [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3), ("a", -1, 1)]
    if normalizer is None:
        normalizer = _field(1, 2, b"identity") + _field(4, 0, 0)
    return _proto(
        *(_piece(t, s, ty) for t, s, ty in pieces),
        _field(2, 2, _field(3, 0, model_type) + trainer_extra),
        _field(3, 2, normalizer),
    )


def test_crafted_bpe_model_loads(tmp_path):
    """A hand-written ModelProto (defaults everywhere but the fields set) loads and encodes."""
    p = tmp_path / "m.model"
    p.write_bytes(_model())
    tok = Tokenizer.create(spec_from_sentencepiece_model(p))
    assert tok.encode("aa") == [0, 3, 3]  # "▁" is unknown -> unk, then "a" "a"
    assert tok.encode("b b") == [0]  # "▁b▁b": one run of unknown characters, fused


@pytest.mark.parametrize(
    "kw, match",
    [
        pytest.param(dict(model_type=1), r"model_type = UNIGRAM is not supported", id="unigram"),
        pytest.param(dict(model_type=3), r"model_type = WORD is not supported", id="word"),
        pytest.param(dict(model_type=4), r"model_type = CHAR is not supported", id="char"),
        pytest.param(
            dict(normalizer=_field(1, 2, b"nmt_nfkc") + _field(2, 2, b"\x04\x00\x00\x00xxxxyy") + _field(4, 0, 0)),
            r"precompiled_charsmap is not empty \(rule 'nmt_nfkc'",
            id="charsmap",
        ),
        pytest.param(dict(normalizer=_field(1, 2, b"identity")), r"remove_extra_whitespaces = true", id="extra-ws"),
        pytest.param(
            dict(normalizer=_field(4, 0, 0) + _field(5, 0, 0)), r"escape_whitespaces = false", id="no-escape"
        ),
        pytest.param(dict(trainer_extra=_field(24, 0, 1)), r"treat_whitespace_as_suffix = true", id="suffix"),
        pytest.param(
            dict(pieces=[("<unk>", 0, 2), ("a", 0, 1), ("ab", 0, 5)]), r"'ab' is an UNUSED piece", id="unused"
        ),
        pytest.param(
            dict(pieces=[("<unk>", 0, 2), ("a b", 0, 4)]), r"user-defined piece 'a b' \(id 1\) contains a space",
            id="ud-space",
        ),
        pytest.param(
            dict(trainer_extra=_field(35, 0, 1)), r"byte_fallback is true but 256 byte pieces are missing",
            id="no-byte-pieces",
        ),
    ],
)
def test_unsupported_models_are_refused(tmp_path, kw, match):
    p = tmp_path / "m.model"
    p.write_bytes(_model(**kw))
    with pytest.raises(UnsupportedTokenizer, match=match):
        spec_from_sentencepiece_model(p)


def test_default_trained_normalization_is_refused(tmp_path):
    """sentencepiece's default training (nmt_nfkc, remove_extra_whitespaces) is refused by name."""
    path = _train(tmp_path, "nfkc", normalization_rule_name="nmt_nfkc", remove_extra_whitespaces=True)
    with pytest.raises(UnsupportedTokenizer, match=r"precompiled_charsmap is not empty \(rule 'nmt_nfkc'"):
        spec_from_sentencepiece_model(path)


def test_missing_unk_piece(tmp_path):
    p = tmp_path / "m.model"
    p.write_bytes(_model(pieces=[("<s>", 0, 3), ("a", 0, 1)]))
    with pytest.raises(LoaderError, match=r"unk_piece '<unk>' is not an UNKNOWN piece"):
        spec_from_sentencepiece_model(p)


_BASE = [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3), ("a", -1, 1)]


@pytest.mark.parametrize(
    "pieces, trainer, match",
    [
        pytest.param(_BASE + [("", 0, 4)], b"", r"pieces\[4\] \(''\): .*\(piece must not be empty\)", id="empty"),
        pytest.param(_BASE + [("<unk2>", 0, 2)], b"", r"pieces\[4\] .*unk is already defined \(pieces\[0\]",
                     id="two-unk"),
        pytest.param(_BASE + [("<0x41>", 0, 6)], b"", r"byte piece <0x41> is found although `byte_fallback` is false",
                     id="byte-without-fallback"),
        pytest.param(_BASE + [(f"<0x{b:02X}>", 0, 6) for b in range(256)] + [("<0xZZ>", 0, 6)], _field(35, 0, 1),
                     r"pieces\[260\] \('<0xZZ>'\): .*\(byte piece <0xZZ> is invalid\)", id="bad-byte-name"),
    ],
)
def test_models_sentencepiece_refuses_are_refused(tmp_path, pieces, trainer, match):
    """Edited models (``pieces.add()``) that ``SentencePieceProcessor`` refuses to load
    (``ModelInterface::InitializePieces``; asserted below when sentencepiece is installed) were
    loaded and encoded, ids no reference gives; now LoaderError with sentencepiece's reason."""
    p = tmp_path / "m.model"
    p.write_bytes(_model(pieces=pieces, trainer_extra=trainer))
    with pytest.raises(LoaderError, match=match):
        spec_from_sentencepiece_model(p)
    spm = pytest.importorskip("sentencepiece")
    with pytest.raises(Exception, match="INTERNAL"):
        spm.SentencePieceProcessor(model_file=str(p))


@pytest.mark.parametrize(
    "blob, match",
    [
        pytest.param(b"", r"at byte 0: the file is empty", id="empty"),
        pytest.param(b"\x0a", r"at byte 1 \(in ModelProto\): varint runs past", id="no-length"),
        pytest.param(b"\x0a" + _varint(1 << 40) + b"xx", r"at byte 0 \(in ModelProto\): field 1 claims 1099511627776 bytes but only 2 remain", id="huge-length"),
        pytest.param(b"\x0a\x02\x0a\x05ab", r"at byte 2 \(in pieces\[0\]\): field 1 claims 5 bytes", id="inner-length"),
        pytest.param(b"\x0b", r"at byte 0 \(in ModelProto\): field 1 has wire type 3", id="group"),
        pytest.param(b"\x12\x02\x18\xff", r"at byte 3 \(in trainer_spec\): varint runs past", id="bad-varint"),
    ],
)
def test_corrupt_models(tmp_path, blob, match):
    p = tmp_path / "bad.model"
    p.write_bytes(blob)
    with pytest.raises(LoaderError, match=match):
        spec_from_sentencepiece_model(p)


def test_truncated_real_model(tmp_path):
    """The Llama 2 model cut at several offsets: LoaderError with the byte offset (a cut that
    falls exactly between two fields would parse, so cuts land inside a piece)."""
    data = _real("llama2").read_bytes()
    for cut in (1, 2, 5, 17, 1000, 100_001, len(data) // 2 + 3, len(data) - 2):
        p = tmp_path / f"cut{cut}.model"
        p.write_bytes(data[:cut])
        try:
            spec_from_sentencepiece_model(p)
        except LoaderError as e:  # UnsupportedTokenizer (missing trainer_spec -> UNIGRAM) also
            assert str(p) in str(e)
            if not isinstance(e, UnsupportedTokenizer):
                assert "at byte" in str(e)
        else:
            pytest.fail(f"cut at {cut} of {len(data)} bytes loaded")


def test_bare_model_parses_special_text_only_when_asked():
    """The decision ``Tokenizer.encode``'s docstring records: ``parse_special`` defaults to True
    for every format; a bare ``.model``'s reference, sentencepiece, never parses control
    pieces, and its ids are ``parse_special=False``. Expected: sentencepiece's own ids (Llama 2)
    for text holding "<s>" and "</s>"; with the default such text is refused (it gave ``▁``,
    ``<s>``, ``Hi`` for ``"<s>Hi"``: the dummy prefix, then the cut control piece, ids neither
    sentencepiece nor transformers gives: rmlprep.spm_special)."""
    spm = pytest.importorskip("sentencepiece")
    path = REAL / "llama2" / "tokenizer.model"
    if not path.is_file():
        pytest.skip(f"{path} {_MISSING}")
    import rmlprep

    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = rmlprep.load_tokenizer(path)
    for text in ("<s>Hi", "a</s> <s>b", "<s>"):
        assert tok.encode(text, parse_special=False) == sp.encode(text)
    with pytest.raises(TokenizeError, match=r"^tokenizer.model: parse_special=True found the special token '<s>'"):
        tok.encode("<s>Hi")
    assert tok.encode("Hi there") == sp.encode("Hi there")  # no special-token text: parsed or not
