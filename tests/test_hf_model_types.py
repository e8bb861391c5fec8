"""Added tokens whose kind is not what tokenizers' BPE model sees (``TokenizerSpec.model_types``).

tokenizers' model looks characters and (``ignore_merges``) whole words up in ``model.vocab``
alone: a special added token that model.vocab holds is a symbol there like any other, and an
added token model.vocab lacks is none. rmlprep's lookups skip control tokens and take
user-defined ones, so without ``model_types`` a trained Metaspace BPE with ``"é"`` (id 165)
added again as special encoded ``"aéb"`` with ``parse_special=False`` as ``[▁, a, b]``, where
tokenizers 0.23.3 gives ``[1741 '▁', 69 'a', 165 'é', 70 'b']``; an added ``"▁"`` lost every
space. Expected ids: ``fixtures/model_vocab_specials.json``
(``tools/make_model_vocab_specials_fixtures.py``, ``tokenizers``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rmlprep
from rmlprep.native import encode_batch_flat
from rmlprep.tokenizer import Tokenizer

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parent.parent
_FIX = json.loads((ROOT / "fixtures" / "model_vocab_specials.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", sorted(_FIX["variants"]))
def test_added_tokens_are_what_the_model_vocab_says(tmp_path, variant):
    """Each variant's texts, with special-token text parsed (``parse_special=True``) and read as
    text (``False``; tokenizers' ``encode_special_tokens``), through ``encode`` on the compiled
    and the pure-Python path and through ``encode_batch_flat``."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_FIX["variants"][variant]), encoding="utf-8")
    tok = rmlprep.load_tokenizer(path)
    pure = Tokenizer.create(tok.spec)
    pure._native = None
    pure._fast_encode = None
    assert tok._native is not None, "the native encoder declined"
    assert tok.spec.model_types, "the loader listed no token"
    for as_text in (False, True):
        cases = [c for c in _FIX["cases"] if c["variant"] == variant and c["special_as_text"] is as_text]
        texts, expected = [c["text"] for c in cases], [c["ids"] for c in cases]
        for t in (tok, pure):
            assert [t.encode(x, parse_special=not as_text) for x in texts] == expected, ("native" if t._native
                                                                                          else "pure", as_text)
        flat, offsets = encode_batch_flat(tok, texts, parse_special=not as_text)
        assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected


def test_the_spec_round_trips_model_types():
    """``model_types`` survives ``to_dict``/``from_dict`` (the load cache, a run's manifest) and is
    left out of the canonical form when empty, so files without it keep their fingerprint."""
    from rmlprep.spec import TokenizerSpec

    doc = _FIX["variants"]["metaspace-specials-in-vocab"]
    from rmlprep.hf import spec_from_tokenizer_json

    spec, _ = spec_from_tokenizer_json(doc)
    assert TokenizerSpec.from_dict(spec.to_dict()) == spec
    assert "model_types" not in spec.replace(model_types=()).to_dict()


def test_model_vocab_specials_fixture_has_not_drifted(tmp_path, monkeypatch):
    """tools/make_model_vocab_specials_fixtures.py rerun with the installed tokenizers writes the
    committed fixtures/model_vocab_specials.json again."""
    import sys

    from tools import make_model_vocab_specials_fixtures as gen

    if _FIX["reference"] != f"tokenizers {tokenizers.__version__}":
        pytest.skip(f"the fixture was made with {_FIX['reference']}, this is tokenizers {tokenizers.__version__}")
    if not gen.CORPUS.is_file():
        pytest.skip(f"{gen.CORPUS} not found (../shared is beside the clone in CI)")
    out = tmp_path / "model_vocab_specials.json"
    monkeypatch.setattr(sys, "argv", ["make_model_vocab_specials_fixtures.py", "--out", str(out)])
    gen.main()
    assert json.loads(out.read_text(encoding="utf-8")) == _FIX
