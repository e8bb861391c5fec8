"""Hugging Face ``Split`` behaviours (rmlprep.split, through rmlprep.pretokenize).

Expected pieces come from ``tokenizers`` itself: the committed fixture
(``fixtures/split_behaviors.json``, written by ``tools/make_split_fixtures.py``) for the default
run, and the installed library live (tests marked ``parity``) on random text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmlprep import pretokenize
from rmlprep.errors import LoaderError
from rmlprep.pretokenize import (
    BEHAVIORS,
    KNOWN_PATTERNS,
    TILING_PATTERNS,
    can_match_empty,
    compile_pre_split,
    isolated_equivalent,
    pre_split,
)
from rmlprep.split import split_spans

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "split_behaviors.json"
DOC = json.loads(FIXTURE.read_text(encoding="ascii"))


def _ours(case: dict) -> str:
    """The fixture's pattern in rmlprep's pattern language (a String pattern is escaped, as the
    tokenizer.json loader does)."""
    if case["kind"] == "String":
        return "".join("\\" + c if c in "\\.^$|?*+()[]{}" else c for c in case["pattern"])
    return case["pattern"]


def test_worked_example_from_the_reference_docs():
    """tokenizers' split.rs tests, "How are you doing?" split on " ": Removed drops the spaces;
    Isolated keeps them apart; MergedWithPrevious glues each to the word before ("How ", "are ",
    ...), MergedWithNext to the word after (" are"); Contiguous keeps runs of spaces whole."""
    text = "How are you  doing?"
    assert pre_split(" ", text, "removed") == ["How", "are", "you", "doing?"]
    assert pre_split(" ", text, "isolated") == ["How", " ", "are", " ", "you", " ", " ", "doing?"]
    assert pre_split(" ", text, "merged_with_previous") == ["How ", "are ", "you ", " ", "doing?"]
    assert pre_split(" ", text, "merged_with_next") == ["How", " are", " you", " ", " doing?"]
    assert pre_split(" ", text, "contiguous") == ["How", " ", "are", " ", "you", "  ", "doing?"]
    # invert: the words are the delimiters, so Removed keeps only the spaces
    assert pre_split(" ", text, "removed", True) == [" ", " ", " ", " "]


def test_split_spans_glue_rules():
    """Spans of "a b" with delimiter " " at (1, 2): merged_with_next gives "a", " b"."""
    assert split_spans("a b", [(1, 2)], "merged_with_next", False) == [(0, 1), (1, 3)]
    assert split_spans("a b", [(1, 2)], "merged_with_previous", False) == [(0, 2), (2, 3)]
    assert split_spans("", [], "isolated", False) == []


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=f"{c['pattern_name']}-{c['behavior']}-{'inv' if c['invert'] else 'fwd'}") for c in DOC["cases"]],
)
def test_fixture_pieces(case):
    split = compile_pre_split((_ours(case),), ((case["behavior"], case["invert"]),))
    for text, pieces in zip(DOC["texts"], case["pieces"]):
        assert split(text) == pieces, (case["pattern"], case["behavior"], case["invert"], text)


def test_fixture_covers_every_behaviour_and_empty_matches():
    assert {(c["behavior"], c["invert"]) for c in DOC["cases"]} == {(b, i) for b in BEHAVIORS for i in (False, True)}
    assert any(can_match_empty(_ours(c)) for c in DOC["cases"])
    assert DOC["banner"]["generator"] == "tools/make_split_fixtures.py"


@pytest.mark.parity
def test_fixture_generator_drift(tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[reference]')")
    if tokenizers.__version__ not in DOC["banner"]["reference"]:
        pytest.skip(f"fixture made with {DOC['banner']['reference']}; installed tokenizers {tokenizers.__version__}")
    out = tmp_path / "split.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_split_fixtures.py"), "--out", str(out)],
                   check=True, cwd=ROOT)
    assert out.read_bytes() == FIXTURE.read_bytes()


def test_bad_behaviours_are_refused():
    with pytest.raises(LoaderError, match="2 split behaviours for 1 patterns"):
        compile_pre_split((" ",), (("isolated", False), ("isolated", False)))
    with pytest.raises(LoaderError, match="is not \\(behavior, invert\\)"):
        compile_pre_split((" ",), (("Removed", False),))


def test_can_match_empty():
    assert can_match_empty(r"\d*") and can_match_empty(r"(?=a)") and can_match_empty(r"a?|b")
    assert not can_match_empty(r"a|(?=c)c") and not can_match_empty(r"\s+")
    for name in TILING_PATTERNS:
        assert not can_match_empty(KNOWN_PATTERNS[name]), name


# -- the combinations run as Isolated are the same as Isolated --------------------------------
_EQUIVALENT = [
    pytest.param(name, b, inv, id=f"{name}-{b}-{'inv' if inv else 'fwd'}")
    for name in sorted(TILING_PATTERNS)
    for b in BEHAVIORS
    for inv in (False, True)
    if isolated_equivalent(KNOWN_PATTERNS[name], b, inv)
]


def test_equivalent_combinations_include_gpt4o():
    """GPT-4o's tokenizer.json: Split(o200k, Removed, invert=true)."""
    assert isolated_equivalent(KNOWN_PATTERNS["o200k_base"], "removed", True)
    assert not isolated_equivalent(KNOWN_PATTERNS["o200k_base"], "contiguous", False)
    assert not isolated_equivalent(KNOWN_PATTERNS["o200k_base"], "removed", False)
    assert not isolated_equivalent(r"\s+", "removed", True)  # not tiling: gaps would be kept
    assert len(_EQUIVALENT) == 5 * 7  # isolated, merged_* (either invert), removed+invert


@pytest.mark.parametrize("name, behavior, invert", _EQUIVALENT)
@settings(max_examples=60, deadline=None)
@given(text=st.text(st.characters(codec="utf-8"), max_size=40) | st.text(" \n\ta1A'\u00e9\u4e2d\u0301!", max_size=40))
def test_isolated_equivalent_is_proved_on_random_text(name, behavior, invert, text):
    """The general Split path (any behaviour, in Python) gives the Isolated pieces wherever
    isolated_equivalent says so: the loader may then run it as Isolated (and natively)."""
    pattern = KNOWN_PATTERNS[name]
    general = pretokenize._general_stage(pattern, behavior, invert)
    assert general(text) == compile_pre_split((pattern,))(text)


# -- live: the installed tokenizers on random text ------------------------------------------------
_LIVE = [(c["pattern_name"], c["kind"], c["pattern"]) for c in DOC["cases"][:: 2 * len(BEHAVIORS)]]


@pytest.mark.parity
@pytest.mark.parametrize("name, kind, pattern", [pytest.param(*p, id=p[0]) for p in _LIVE])
@settings(max_examples=60, deadline=None)
@given(text=st.text("ab c\n1x2\u00e9\u4e2d\u2581'S", max_size=16))
def test_live_split_equals_tokenizers(name, kind, pattern, text):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, pre_tokenizers

    ours_pattern = _ours({"kind": kind, "pattern": pattern})
    for behavior in BEHAVIORS:
        for invert in (False, True):
            ref = pre_tokenizers.Split(Regex(pattern) if kind == "Regex" else pattern, behavior, invert=invert)
            expected = [p for p, _ in ref.pre_tokenize_str(text)]
            assert pre_split(ours_pattern, text, behavior, invert) == expected, (behavior, invert)
    assert tokenizers  # the reference was used
