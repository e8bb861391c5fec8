"""rmlprep.segment's normalizers against ``tokenizers``: the Unicode version of the forms.

``tokenizers``' NFC/NFD/NFKC/NFKD use the Unicode 9.0.0 tables of the crate
unicode-normalization-alignments; Python's ``unicodedata`` is newer (14.0 on 3.11). The fixture
``fixtures/normalization.json`` (``tools/make_norm_fixtures.py``, from ``tokenizers``) lists
every text of a sweep on which the versions disagree, with ``tokenizers``' four forms.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmlprep import native
from rmlprep.segment import lowercase, make_normalizer, normalize_reference

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "fixtures" / "normalization.json").read_text(encoding="ascii"))
CASES = FIXTURE["cases"]
FORMS = ("NFC", "NFD", "NFKC", "NFKD")


def test_fixture_banner():
    """The banner names the generator, tokenizers' Unicode 9.0.0 and the unicodedata2 version
    the sweep ran on, which is the one pyproject's [reference] extra pins (the sweep's texts
    depend on it: 15.1.0 missed 88 that 16.0.0 finds, marks and compositions new in 16.0)."""
    banner = FIXTURE["banner"]
    assert banner["generator"] == "tools/make_norm_fixtures.py" and "Unicode 9.0.0" in banner["reference"]
    pin = re.search(r'"unicodedata2==([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pin and f"unicodedata2 (Unicode {pin.group(1)})" in banner["sweep"], (pin, banner["sweep"])
    # the sweep found the disagreements the user trial reported, and more than the controls
    texts = {c["text"] for c in CASES}
    assert {"\u32ff", "x\u0301\u0c3c", "\U00011935\U00011930"} <= texts and len(CASES) > 200


@pytest.mark.parity
def test_fixture_does_not_drift(tmp_path):
    """Rerunning tools/make_norm_fixtures.py with the installed tokenizers and unicodedata2 gives
    the committed fixture byte for byte (its banner records the versions, so a fixture swept with
    another unicodedata2 than the installed one fails here)."""
    pytest.importorskip("tokenizers", reason="tokenizers not installed")
    pytest.importorskip("unicodedata2", reason="unicodedata2 not installed (pip install -e '.[reference]')")
    from tools.make_norm_fixtures import main

    out = tmp_path / "normalization.json"
    assert main(["--out", str(out)]) == 0
    assert out.read_bytes() == (ROOT / "fixtures" / "normalization.json").read_bytes()


@pytest.mark.parametrize("form", FORMS)
def test_normalize_reference_matches_fixture(form):
    """normalize_reference gives tokenizers' form for every fixture text."""
    bad = [c["text"] for c in CASES if normalize_reference(form, c["text"]) != c[form]]
    assert not bad, [ascii(t) for t in bad[:10]]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("checked", [False, True], ids=["plain", "quick-check"])
def test_make_normalizer_matches_fixture(form, checked):
    """The spec normalizer (with the native quick check for NFC/NFKC, and without) gives
    tokenizers' form, alone and with the fixture texts joined (spans between old code points)."""
    suspects = native.normalization_suspects() if checked else None
    if checked and suspects is None:
        pytest.skip("native extension not built (python3 setup.py build_ext --inplace)")
    normalize = make_normalizer(((form.lower(),),), suspects)
    bad = [c["text"] for c in CASES if normalize(c["text"]) != c[form]]
    assert not bad, [ascii(t) for t in bad[:10]]
    joined = " ".join(c["text"] for c in CASES)
    assert normalize(joined) == " ".join(c[form] for c in CASES)


def test_worked_examples():
    """Unicode 9.0.0, not this Python's unicodedata: U+0C3C (Telugu nukta, class 7 since 14.0)
    is class 0, so it stays after U+0301 (14.0 puts it first; x + U+0301 composes to nothing);
    U+11935 U+11930 stay apart (U+11938 is new in 13.0);
    U+32FF (Reiwa, 12.1) has no compatibility decomposition; e + U+0301 still composes to é and
    the new emoji U+1F970 (11.0) is kept as it is, as a boundary."""
    assert normalize_reference("NFC", "x\u0301\u0c3c") == "x\u0301\u0c3c"
    assert normalize_reference("NFD", "x\u0301\u0c3c") == "x\u0301\u0c3c"
    assert normalize_reference("NFC", "\U00011935\U00011930") == "\U00011935\U00011930"
    assert normalize_reference("NFKC", "\u32ff\u00bd") == "\u32ff1\u20442"
    assert normalize_reference("NFC", "e\u0301\U0001F970e\u0301") == "\u00e9\U0001F970\u00e9"
    with pytest.raises(ValueError):
        normalize_reference("NFX", "\u00e9")


@pytest.mark.parity
@pytest.mark.parametrize("form", FORMS)
def test_fixture_matches_live_tokenizers(form):
    """The installed tokenizers still gives the fixture's forms (a release with newer tables
    would change them: regenerate the fixture and the reference table)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    ref = getattr(tokenizers.normalizers, form)()
    bad = [c["text"] for c in CASES if ref.normalize_str(c["text"]) != c[form]]
    assert not bad, [ascii(t) for t in bad[:10]]


@pytest.mark.parity
def test_qwen_ids_match_tokenizers():
    """Qwen2.5 (an NFC normalizer) gives tokenizers' ids on the fixture texts, one by one and
    joined (the user-trial repro: U+11935 U+11930, x U+0301 U+0C3C, U+065E U+089A)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    from _chat_common import REAL, real_tokenizer

    tok = real_tokenizer("hf/qwen2.5")
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf" / "qwen2.5" / "tokenizer.json"))
    texts = [c["text"] for c in CASES] + [" ".join(c["text"] for c in CASES)]
    bad = [t for t in texts if tok.encode(t) != ref.encode(t, add_special_tokens=False).ids]
    assert not bad, [ascii(t) for t in bad[:10]]


def test_reference_table_drift(tmp_path):
    """tools/make_unicode_tables.py --ref-norm-out rebuilds _unicode_norm_ref.py byte for byte
    from the pinned unicodedata2 9.0.0 archive (cached under ~/.cache/rmlprep-unicode, fetched
    with pip download when absent)."""
    pytest.importorskip("unicodedata2", reason="unicodedata2 not installed (pip install -e '.[reference]')")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import make_unicode_tables as gen
    finally:
        sys.path.pop(0)
    if not (gen.REF_CACHE / gen.REF_SDIST).exists():
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                  "-d", str(gen.REF_CACHE), f"unicodedata2=={gen.REF_NORM_VERSION}"],
                                 capture_output=True)
        if fetched.returncode != 0:
            pytest.skip(f"{gen.REF_SDIST} is not cached and pip could not fetch it (no package index)")
    import unicodedata2

    old = gen.SdistUCD(gen.reference_sdist(None))
    text = gen.render_ref_norm(gen.reference_not_assigned(unicodedata2, old))
    assert text == (ROOT / "rmlprep" / "_unicode_norm_ref.py").read_text(encoding="utf-8")


# -- Lowercase ----------------------------------------------------------------------------------

LOWER_FIXTURE = json.loads((ROOT / "fixtures" / "lowercase.json").read_text(encoding="ascii"))


def test_lowercase_worked_examples():
    """Every "Σ" is "σ" (no Final_Sigma); "İ" is "i" + U+0307; GARAY CAPITAL LETTER A (16.0) is
    U+10D70 and BERIA ERFE CAPITAL LETTER ARKAB (17.0) U+16EBB, which Python 3.11's str.lower
    (Unicode 14.0) leaves as they are; U+1C89 (16.0) is U+1C8A."""
    assert lowercase("ΑΣ Σ.") == "ασ σ."
    assert lowercase("\u0130x") == "i\u0307x"
    assert lowercase("A\U00010D50b\U00016EA0\u1c89") == "a\U00010D70b\U00016EBB\u1c8a"
    assert lowercase("HELLO") == "hello" and lowercase("") == ""


def test_lowercase_matches_fixture():
    """lowercase gives tokenizers' Lowercase output on the fixture texts (tools/make_lowercase_table.py)."""
    assert "Lowercase" in LOWER_FIXTURE["banner"]["reference"]
    bad = [c["text"] for c in LOWER_FIXTURE["cases"] if lowercase(c["text"]) != c["lowercase"]]
    assert not bad, [ascii(t) for t in bad]


def test_lowercase_table_banner():
    from rmlprep import _lowercase_ref

    head = (ROOT / "rmlprep" / "_lowercase_ref.py").read_text(encoding="utf-8")[:800]
    assert "Generated by tools/make_lowercase_table.py" in head and "DO NOT EDIT" in head
    assert _lowercase_ref.UNICODE_VERSION == "17.0.0" and len(_lowercase_ref.LOWER) == 1488


@pytest.mark.parity
def test_lowercase_matches_live_tokenizers_on_every_code_point():
    """lowercase equals tokenizers' Lowercase on every code point but the surrogates (one a
    line), and on the same code points as one text."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    low = tokenizers.normalizers.Lowercase()
    every = "\n".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A)
    assert lowercase(every) == low.normalize_str(every)
    joined = every.replace("\n", "")
    assert lowercase(joined) == low.normalize_str(joined)


def test_lowercase_table_drift(tmp_path):
    """tools/make_lowercase_table.py rerun gives the committed table and fixture byte for byte
    (with the tokenizers version they were made with: another build may have other Unicode)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[reference]')")
    made_with = LOWER_FIXTURE["banner"]["reference"].split()[1]
    if tokenizers.__version__ != made_with:
        pytest.skip(f"the table was made with tokenizers {made_with}; installed {tokenizers.__version__} "
                    "(test_lowercase_matches_live_tokenizers_on_every_code_point checks it)")
    out, fixture = tmp_path / "_lowercase_ref.py", tmp_path / "lowercase.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_lowercase_table.py"), "--out", str(out),
                    "--fixture", str(fixture)], check=True, cwd=ROOT)
    assert out.read_bytes() == (ROOT / "rmlprep" / "_lowercase_ref.py").read_bytes()
    assert fixture.read_bytes() == (ROOT / "fixtures" / "lowercase.json").read_bytes()
