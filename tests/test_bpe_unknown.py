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
    tok = rmlprep.load_tokenizer(path)
    pure = Tokenizer.create(tok.spec)
    pure._native = None
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
