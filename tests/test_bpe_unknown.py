"""Characters outside the vocab in a non-byte-level BPE tokenizer.json, against Hugging Face ``tokenizers``.

``tokenizers`` (``models/bpe/model.rs``, ``BPE::merge_word``) turns a character that is not in
the vocab into the unk token when the model has one (one per run with ``fuse_unk``), into
``<0xXX>`` tokens with ``byte_fallback``, and with neither it *skips the character before
merging*: it never becomes a symbol, so its neighbours become adjacent and can merge across it.
Worked example (the model of :func:`_toy`): vocab {a, b, ab, ▁, ▁a, c}, merges (a b), (▁ a);
"a☃b" is "▁a☃b" after Metaspace; skipping ☃ leaves ▁ a b, whose best merge is (a b), so the ids
are [▁, ab] = [3, 2] (dropping ☃ after merging would give [▁a, b] = [4, 1]).

Every expected id list below is computed by ``tokenizers`` in the test, on both of rmlprep's
paths (the compiled encoder and the pure-Python one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rmlprep
from rmlprep.errors import LoaderError, SpecError
from rmlprep.spec import SENTENCEPIECE, TokenizerSpec
from rmlprep.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import models, normalizers, pre_tokenizers, trainers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"
TEXTS = ["a☃b", "a☃☃b", "☃ab", "a b☃c", "a☃b☃a☃b", "☃", "☃ ☃", "ab☃", "c☃a☃b c", "a\u00e9b", ""]


def _toy(unk: str | None, fuse_unk: bool, pre) -> "tokenizers.Tokenizer":
    vocab = {"a": 0, "b": 1, "ab": 2, "\u2581": 3, "\u2581a": 4, "c": 5, "<unk>": 6}
    model = models.BPE(vocab=vocab, merges=[("a", "b"), ("\u2581", "a")], unk_token=unk,
                       fuse_unk=fuse_unk, byte_fallback=False)
    ref = tokenizers.Tokenizer(model)
    pre(ref)
    return ref


def _both_paths(ref, tmp_path: Path, name: str) -> tuple[Tokenizer, Tokenizer]:
    """(rmlprep's tokenizer as loaded, the same spec with the native encoder switched off)."""
    path = tmp_path / f"{name}.json"
    ref.save(str(path))
    return _both_paths_of(path)


def _both_paths_of(path: Path) -> tuple[Tokenizer, Tokenizer]:
    tok = rmlprep.load_tokenizer(path)
    pure = Tokenizer.create(tok.spec)
    pure._native = None
    pure._fast_encode = None  # else encode takes the whole-text native path even with _native None
    return tok, pure


def _metaspace(ref) -> None:
    ref.pre_tokenizer = pre_tokenizers.Metaspace()


def _llama2_normalizer(ref) -> None:  # Llama 2's tokenizer.json: no pre-tokenizer, "▁" by normalizer
    ref.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])


PRE = {"metaspace": _metaspace, "llama2-normalizer": _llama2_normalizer}


@pytest.mark.parametrize("pre", sorted(PRE))
@pytest.mark.parametrize("unk,fuse_unk", [(None, False), ("<unk>", False), ("<unk>", True)])
def test_unknown_characters_match_tokenizers(tmp_path, pre, unk, fuse_unk):
    ref = _toy(unk, fuse_unk, PRE[pre])
    tok, pure = _both_paths(ref, tmp_path, f"{pre}-{unk}-{fuse_unk}")
    if unk is None:
        assert tok.spec.unk_id is None and not tok.spec.byte_fallback
    for text in TEXTS:
        expected = ref.encode(text).ids
        assert tok.encode(text) == expected, (text, "native" if tok._native else "pure")
        assert pure.encode(text) == expected, (text, "pure")


def test_native_encoder_is_built_for_the_no_unk_model(tmp_path):
    """The compiled path itself skips the character (not a fallback to the pure path)."""
    from rmlprep import native

    if not native.native_available():
        pytest.skip("rmlprep._fastbpe is not built: run `pip install -e .` (needs gcc)")
    tok, _ = _both_paths(_toy(None, False, PRE["metaspace"]), tmp_path, "native")
    assert tok._native is not None
    assert tok.encode("a☃b☃a☃b") == [3, 2, 2]  # the module docstring's worked example, twice more


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab c☃é\u2581", max_size=24))
def test_hypothesis_no_unk(tmp_path_factory, text):
    if not hasattr(test_hypothesis_no_unk, "toks"):
        ref = _toy(None, False, PRE["metaspace"])
        test_hypothesis_no_unk.toks = (ref, *_both_paths(ref, tmp_path_factory.mktemp("hyp"), "hyp"))
    ref, tok, pure = test_hypothesis_no_unk.toks
    expected = ref.encode(text).ids
    assert tok.encode(text) == expected
    assert pure.encode(text) == expected


def _corpus() -> list[str]:
    if not CORPUS.is_file():
        pytest.skip(f"{CORPUS} is absent (the shared corpora sit beside the repository)")
    texts: list[str] = []
    for line in CORPUS.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        texts.append(json.loads(line)["text"])
    return texts


@pytest.mark.slow
@pytest.mark.parity
@pytest.mark.parametrize("unk", [None, "<unk>"])
def test_trained_bpe_on_corpus(tmp_path, unk):
    """A tiny BPE trained by tokenizers' BpeTrainer on 300 corpus texts with a 60-character
    alphabet (most scripts stay outside the vocab), then 2,000 corpus lines compared."""
    texts = _corpus()
    model = models.BPE(unk_token=unk, byte_fallback=False)
    ref = tokenizers.Tokenizer(model)
    ref.normalizer = normalizers.NFC()
    ref.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=400, limit_alphabet=60, show_progress=False,
                                  special_tokens=[unk] if unk else [])
    ref.train_from_iterator(texts[:300], trainer=trainer)
    tok, pure = _both_paths(ref, tmp_path, f"trained-{unk}")
    lines = [ln[:400] for t in texts for ln in t.split("\n") if ln.strip()][:2000]
    assert len(lines) == 2000
    expected = [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)]
    assert sum(e != [] for e in expected) > 1900
    for line, ids in zip(lines, expected):
        assert tok.encode(line) == ids, line
        assert pure.encode(line) == ids, line


# -- byte fallback with <0xXX> tokens missing ------------------------------------------------------
def _fallback_toy(missing: set[int], unk: str | None = "<unk>", fuse_unk: bool = True,
                  extra: tuple[str, ...] = ()) -> "tokenizers.Tokenizer":
    """A Llama-2-style byte-fallback BPE (built with tokenizers) whose vocab lacks the byte
    tokens of ``missing``: vocab {<0xXX> but missing, ▁, a, b, ab, ▁ab, x, y, xy, *extra},
    merges (a b), (▁ ab), (x y)."""
    vocab = ([unk] if unk else []) + [f"<0x{b:02X}>" for b in range(256) if b not in missing]
    vocab += ["\u2581", "a", "b", "ab", "\u2581ab", "x", "y", "xy", *extra]
    model = models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=[("a", "b"), ("\u2581", "ab"), ("x", "y")],
                       unk_token=unk, byte_fallback=True, fuse_unk=fuse_unk)
    ref = tokenizers.Tokenizer(model)
    _llama2_normalizer(ref)
    return ref


def test_byte_fallback_with_a_byte_token_missing_is_refused(tmp_path):
    """No reference gives ids rmlprep could match when a character outside the vocab needs a
    missing byte token, so the tokenizer is refused at load. Worked example (the vocab lacks
    <0xA9>; "é" is C3 A9, "€" is E2 82 AC): tokenizers writes "é€" as ▁ <0xE2> <0x82> <0xAC>
    <unk>, the unk of "é" *after* the bytes of "€" (its pending unk is flushed only by a
    character in the vocab), and "é€é" as the same ids (fuse_unk: one unk for both "é").
    rmlprep used to give ▁ <0xC3> <unk> <0xE2> <0x82> <0xAC>: ids no reference produces."""
    ref = _fallback_toy({0xA9})
    tokens = lambda text: ref.encode(text).tokens  # noqa: E731
    assert tokens("é€") == ["\u2581", "<0xE2>", "<0x82>", "<0xAC>", "<unk>"]
    assert tokens("é€é") == ["\u2581", "<0xE2>", "<0x82>", "<0xAC>", "<unk>"]
    path = tmp_path / "tokenizer.json"
    ref.save(str(path))
    with pytest.raises(LoaderError, match=r"byte_fallback is on but the vocab has no <0xA9> token \(1 of the 256 "
                                          r"byte tokens are missing\), and '©' \(U\+00A9\), a character outside"):
        rmlprep.load_tokenizer(path)
    spec = TokenizerSpec(kind=SENTENCEPIECE, vocab=("<unk>", "<0x41>", "a"), token_types=(2, 6, 1),
                         scores=(0.0,) * 3, unk_id=0, byte_fallback=True)
    with pytest.raises(SpecError, match=r"no <0x00> token \(255 of the 256 byte tokens are missing\), and '\\x00'"):
        Tokenizer.create(spec)


def test_sentencepiece_refuses_a_model_missing_a_byte_piece_and_so_does_rmlprep(tmp_path):
    """sentencepiece itself will not load a byte-fallback .model without all 256 byte pieces."""
    spm = pytest.importorskip("sentencepiece")
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(["the cat sat on the mat", "a b c abc abab the then there"] * 50))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "m"), model_type="bpe",
                                   vocab_size=300, byte_fallback=True, normalization_rule_name="identity",
                                   remove_extra_whitespaces=False,
                                   minloglevel=2)
    m = pb.ModelProto()
    m.ParseFromString((tmp_path / "m.model").read_bytes())
    piece = next(p for p in m.pieces if p.piece == "<0xA9>")
    piece.piece, piece.type = "\u00e9", pb.ModelProto.SentencePiece.NORMAL  # a normal piece instead
    bad = tmp_path / "missing.model"
    bad.write_bytes(m.SerializeToString())
    with pytest.raises(RuntimeError, match="there are not 256 byte pieces although `byte_fallback` is true"):
        spm.SentencePieceProcessor(model_file=str(bad))
    with pytest.raises(LoaderError, match=r"byte_fallback is true but 1 byte pieces are missing \(first <0xA9>\)"):
        rmlprep.load_tokenizer(bad)


@pytest.mark.parametrize("unk,fuse_unk", [(None, False), ("<unk>", False), ("<unk>", True)])
def test_a_byte_token_no_unknown_character_needs_may_be_missing(tmp_path, unk, fuse_unk):
    """Gemma's tokenizer.json has no <0x09>: "\\t" is a token, and byte 0x09 is in no other
    character. Such a vocab loads, and its ids are tokenizers' (0xC0 and 0xFF never occur in
    UTF-8 at all)."""
    ref = _fallback_toy({0x09, 0xC0, 0xFF}, unk, fuse_unk, extra=("\t",))
    tok, pure = _both_paths(ref, tmp_path, f"tab-{unk}-{fuse_unk}")
    assert tok.spec.byte_fallback
    for text in ["a\tb", "\t\té\t", "x\u00e9y€ab", "☃\t☃", ""]:
        expected = ref.encode(text).ids
        assert tok.encode(text) == expected, (text, "native" if tok._native else "pure")
        assert pure.encode(text) == expected, (text, "pure")


@pytest.mark.parametrize("unk,fuse_unk", [(None, False), ("<unk>", False), ("<unk>", True)])
def test_byte_fallback_without_any_byte_token_is_no_byte_fallback(tmp_path, unk, fuse_unk):
    """byte_fallback = true and no <0xXX> token at all: tokenizers' fallback never succeeds, so
    every character outside the vocab takes the unk path (one unk per character, fused with
    fuse_unk) or, without an unk token, is skipped before merging: "aéb" is ▁ab. rmlprep read
    the flag and wrote one unk per UTF-8 byte, and without an unk kept "é" as a barrier."""
    ref = _fallback_toy(set(range(256)), unk, fuse_unk)
    tok, pure = _both_paths(ref, tmp_path, f"nobytes-{unk}-{fuse_unk}")
    assert not tok.spec.byte_fallback
    if unk is None:
        assert ref.encode("aéb").tokens == ["\u2581ab"]
    for text in ["aéb", "xééy", "ab é", "é", "☃x☃y", ""]:
        expected = ref.encode(text).ids
        assert tok.encode(text) == expected, (text, "native" if tok._native else "pure")
        assert pure.encode(text) == expected, (text, "pure")


@pytest.mark.parametrize("pre", sorted(PRE))
def test_typed_unk_tokens_are_not_fused(tmp_path, pre):
    """``fuse_unk`` fuses the unknown characters of one model call (``BPE::merge_word``); an
    added token typed in the text ("<unk>" in a WikiText-style corpus) is a piece of its own,
    so "<unk><unk>" stays two ids, and so does "☃<unk>" (an unknown character, then the added
    token). Mistral, Gemma and Phi-3 ship ``fuse_unk: true``. Expected ids from ``tokenizers``,
    through ``encode``, the pure path and the batch paths."""
    from rmlprep.native import encode_batch_flat

    ref = _toy("<unk>", True, PRE[pre])
    ref.add_special_tokens(["<unk>"])
    tok, pure = _both_paths(ref, tmp_path, f"typed-{pre}")
    texts = ["<unk><unk>", "a <unk><unk><unk> b", "☃<unk>", "<unk>☃☃", "a☃☃<unk>☃b", "<unk> <unk>", "☃☃"]
    expected = [ref.encode(t).ids for t in texts]
    assert expected[0] == [6, 6]  # the reference keeps both (it is what this test is about)
    for text, ids in zip(texts, expected):
        assert tok.encode(text) == ids, text
        assert pure.encode(text) == ids, text
    for t in (tok, pure):
        flat, offsets = encode_batch_flat(t, texts)
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    fn = rmlprep.tokenize_text(tok, parse_special=True)
    import pyarrow as pa
    assert fn(pa.table({"text": texts}))["input_ids"].to_pylist() == expected


_FUSE = json.loads((ROOT / "fixtures" / "fuse_unk.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", sorted(_FUSE["variants"]))
def test_fuse_unk_is_per_pre_tokenized_word(tmp_path, variant):
    """A review finding: tokenizers fuses unknown characters inside one pre-tokenized word
    (``BPE::merge_word``), not across a segment: under a Digits pre-tokenizer "é12ü" is the
    words "é", "1", "2", "ü", four ids (two unks). Such files were refused at load; rmlprep now
    fuses per piece in both encoders. Expected ids: ``fixtures/fuse_unk.json``
    (``tools/make_fuse_unk_fixtures.py``, ``tokenizers``): Digits, Split (on punctuation too), Metaspace
    with and without split, ByteLevel with byte characters left out of the vocab, and "▁" itself
    unknown (where the words rmlprep's SentencePiece encoder splits for speed are no words of
    the reference), through ``encode``, the pure path and ``encode_batch_flat``."""
    from rmlprep.native import encode_batch_flat

    path = tmp_path / f"{variant}.json"
    path.write_text(json.dumps(_FUSE["variants"][variant]), encoding="utf-8")
    tok, pure = _both_paths_of(path)
    cases = [c for c in _FUSE["cases"] if c["variant"] == variant]
    assert len(cases) > 100 and tok.spec.fuse_unk and tok.spec.unk_id is not None
    if variant == "digits-individual":
        assert next(c["ids"] for c in cases if c["text"] == "é12ü") == [7, 5, 6, 7]  # the docstring's example
    texts, expected = [c["text"] for c in cases], [c["ids"] for c in cases]
    for t in (tok, pure):
        assert [t.encode(x) for x in texts] == expected, "native" if t._native else "pure"
        flat, offsets = encode_batch_flat(t, texts)
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected


def test_fuse_unk_fixture_has_not_drifted(tmp_path, monkeypatch):
    """tools/make_fuse_unk_fixtures.py rerun with the installed tokenizers writes the committed
    fixtures/fuse_unk.json again (a newer tokenizers that fused otherwise would show here)."""
    import sys

    from tools import make_fuse_unk_fixtures

    if _FUSE["reference"] != f"tokenizers {tokenizers.__version__}":
        pytest.skip(f"the fixture was made with {_FUSE['reference']}, this is tokenizers {tokenizers.__version__}")
    out = tmp_path / "fuse_unk.json"
    monkeypatch.setattr(sys, "argv", ["make_fuse_unk_fixtures.py", "--out", str(out)])
    make_fuse_unk_fixtures.main()
    assert json.loads(out.read_text(encoding="utf-8")) == _FUSE


_EMPTY = json.loads((ROOT / "fixtures" / "empty_merges.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", sorted(_EMPTY["variants"]))
def test_a_bpe_with_no_merges_encodes_as_tokenizers_does(tmp_path, variant):
    """A tokenizer.json BPE with ``"merges": []`` (a character-level vocab) was refused at load
    for a SentencePiece-style file ("needs one score per token"); tokenizers loads and encodes
    it: each word is its characters' ids (byte-level: its bytes'), the multi-character tokens
    of the vocab are never produced unless ``ignore_merges`` takes a whole word, and unknown
    characters follow unk / fuse_unk / byte_fallback as with merges. A file with merges and
    ``"dropout": 1.0`` (the ``-dropout-1`` variants) was loaded with its merges, which tokenizers
    drops every one of (and the whole-word lookup of ``ignore_merges`` with them): "the" was
    ``[the]``, tokenizers ``[t, h, e]``. Expected ids and decodes:
    ``fixtures/empty_merges.json`` (``tools/make_empty_merges_fixtures.py``, ``tokenizers``),
    through ``encode``, the pure path, ``encode_batch_flat`` and ``decode``."""
    from rmlprep.native import encode_batch_flat

    path = tmp_path / f"{variant}.json"
    path.write_text(json.dumps(_EMPTY["variants"][variant]), encoding="utf-8")
    tok, pure = _both_paths_of(path)
    assert tok.spec.merges == () and tok.spec.scores is None
    cases = [c for c in _EMPTY["cases"] if c["variant"] == variant]
    texts, expected = [c["text"] for c in cases], [c["ids"] for c in cases]
    if variant == "metaspace-unk":  # worked example: "▁the" is a token, but nothing merges into it
        v = _EMPTY["variants"][variant]["model"]["vocab"]
        assert next(c["ids"] for c in cases if c["text"] == "the thing")[:4] == [v["\u2581"], v["t"], v["h"], v["e"]]
    assert tok._native is not None, "the native encoder declined"
    for t in (tok, pure):
        assert [t.encode(x) for x in texts] == expected, "native" if t._native else "pure"
        flat, offsets = encode_batch_flat(t, texts)
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    assert [tok.decode(c["ids"]) for c in cases] == [c["decoded"] for c in cases]


def test_empty_merges_fixture_has_not_drifted(tmp_path, monkeypatch):
    """tools/make_empty_merges_fixtures.py rerun with the installed tokenizers writes the committed
    fixtures/empty_merges.json again."""
    import sys

    from tools import make_empty_merges_fixtures

    if _EMPTY["reference"] != f"tokenizers {tokenizers.__version__}":
        pytest.skip(f"the fixture was made with {_EMPTY['reference']}, this is tokenizers {tokenizers.__version__}")
    if not make_empty_merges_fixtures.CORPUS.is_file():
        pytest.skip(f"{make_empty_merges_fixtures.CORPUS} not found (../shared is beside the clone in CI)")
    out = tmp_path / "empty_merges.json"
    monkeypatch.setattr(sys, "argv", ["make_empty_merges_fixtures.py", "--out", str(out)])
    make_empty_merges_fixtures.main()
    assert json.loads(out.read_text(encoding="utf-8")) == _EMPTY
