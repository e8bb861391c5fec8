"""Ids on text of the code points Unicode 16.0 added: the pre-tokenizer tables are the references'.

``fixtures/unicode_ids.json`` (``tools/make_unicode_fixtures.py``) holds the ids ``tokenizers``
and ``tiktoken`` give real GPT-2, Llama 3, GPT-4o (o200k) and Qwen2.5 tokenizers on texts of
Garay, Kirat Rai, Tulu-Tigalari, Sunuwar, Todhri, Gurung Khema, Ol Onal, the new digits, U+1171E,
and of code points only Unicode 17.0 assigns; both references agreed on every text when it was
made. Both rmlprep encoders must give them: the native one (class table
``rmlprep/_native/unicode_classes.h``) and the pure-Python one (``rmlprep/_unicode_tables.py``
through ``rmlprep.regex_translate``). On the former Unicode 15.1.0 tables every tokenizer here
differs (e.g. Llama 3 read Garay digits as punctuation: one piece where ``\\p{N}{1,3}`` gives
four).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from rmlprep.load import load_tokenizer
from rmlprep.segment import make_normalizer
from rmlprep.tiktoken_file import spec_from_tiktoken
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import TIKTOKEN_FILES, real_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_PATH = ROOT / "fixtures" / "unicode_ids.json"
FIXTURE = json.loads(FIXTURE_PATH.read_text(encoding="ascii"))
NAMES = list(FIXTURE["tokenizers"])

_loaded: dict[str, tuple[Tokenizer, Tokenizer]] = {}


def _pure(tok: Tokenizer) -> Tokenizer:
    """The same spec with the native path off (no native encoder, no whole-text fast path,
    no native normalization check), as tests/test_native.py builds its pure twin."""
    twin = Tokenizer.create(tok.spec)
    twin._native = None
    twin._fast_encode = None
    twin._normalize = make_normalizer(tok.spec.normalizers)
    return twin


def _pair(name: str) -> tuple[Tokenizer, Tokenizer]:
    """(native tokenizer, pure twin) for a fixture source; skips when the real file is absent."""
    fx = FIXTURE["tokenizers"][name]
    path = real_dir() / fx["source"]
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} is absent: run ../shared/real-tokenizers/get.sh")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fx["sha256"], (
        f"{path} differs from the file the fixture was made from; rerun tools/make_unicode_fixtures.py")
    if name not in _loaded:
        if name.startswith("tiktoken-"):
            tok = Tokenizer.create(spec_from_tiktoken(path, name=TIKTOKEN_FILES[name][1]))
        else:
            tok = load_tokenizer(path.parent)
        _loaded[name] = (tok, _pure(tok))
    return _loaded[name]


def test_fixture_banner_and_texts():
    assert FIXTURE["banner"]["generator"] == "tools/make_unicode_fixtures.py"
    assert {"hf-gpt2", "hf-llama3", "hf-gpt-4o", "tiktoken-llama3"} <= set(NAMES)
    texts = {c["name"]: c["text"] for c in FIXTURE["tokenizers"]["hf-llama3"]["cases"]}
    assert "\U00010D40" in texts["garay"] and "\U0001171E" in texts["ahom_medial_ra"]
    assert "\U00010940" in texts["new_in_17_stay_other"]


@pytest.mark.parametrize("path", ["native", "pure"])
@pytest.mark.parametrize("name", NAMES)
def test_ids_match_the_references(name, path):
    tok, pure = _pair(name)
    if path == "native":
        if tok._native is None:
            pytest.skip("native extension not built (python3 setup.py build_ext --inplace)")
        enc = tok
    else:
        enc = pure
    fx = FIXTURE["tokenizers"][name]
    bad = [c["name"] for c in fx["cases"] if enc.encode(c["text"], add_special_tokens=False, parse_special=False) != c["ids"]]
    assert not bad, f"{path} path differs from {fx['reference']} on {bad}"


def test_llama3_garay_digits_worked_example():
    """Llama 3's ``\\p{N}{1,3}`` reads Garay's ten digits (U+10D40..U+10D49, Nd since 16.0) as
    four pieces of 3, 3, 3 and 1 digits, on both paths. On 15.1 tables the digits were one
    punctuation piece."""
    tok, pure = _pair("hf-llama3")
    from rmlprep.pretokenize import LLAMA3_PATTERN, pre_split

    digits = "".join(map(chr, range(0x10D40, 0x10D4A)))
    assert pre_split(LLAMA3_PATTERN, digits) == [digits[0:3], digits[3:6], digits[6:9], digits[9:]]
    assert tok.encode(digits, add_special_tokens=False) == pure.encode(digits, add_special_tokens=False)


@pytest.mark.parity
def test_fixture_generator_drift(tmp_path):
    """Rerunning tools/make_unicode_fixtures.py (live tokenizers and tiktoken, which must agree
    with each other) gives the committed fixture byte for byte."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("tiktoken")
    for name in NAMES:
        _pair(name)  # skips when a real file is absent
    sys.path.insert(0, str(ROOT))
    from tools.make_unicode_fixtures import main

    out = tmp_path / "unicode_ids.json"
    assert main(["--out", str(out)]) == 0
    assert out.read_bytes() == FIXTURE_PATH.read_bytes(), "rerun tools/make_unicode_fixtures.py"
