"""Tests for rmlprep.pretokenize: fixtures from the regex module, translation, hostile input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlprep import _unicode_tables as tables
from rmlprep.errors import LoaderError, UnsupportedTokenizer
from rmlprep.pretokenize import (
    CL100K_PATTERN,
    DIGITS_INDIVIDUAL_PATTERN,
    DIGITS_PATTERN,
    GPT2_PATTERN,
    KNOWN_PATTERNS,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    QWEN2_PATTERN,
    PreSplitter,
    compile_pre_split,
    pattern_name,
    pre_split,
    text_anchors,
    translate,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "pretokenizer.json"
SHARED = REPO.parent / "shared"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", "~/.cache/rmlprep-real-tokenizers")).expanduser()
MAIN_PATTERNS = [GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN]
TIKTOKEN_PATTERNS = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}
# GPT-4o's pattern as Hugging Face tokenizer.json writes it (no possessive quantifiers; the same
# string as tiktoken's o200k_base): exercises \p{Lu}, \p{Lt}, \p{Lm}, \p{Lo}, \p{M} and an
# optional (?i:...) group.
O200K_HF_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
    r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def load_fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="ascii"))


def fixture_params():
    doc = load_fixture()
    return [
        pytest.param(doc["patterns"][name], case["text"], pieces, id=f"{case['name']}-{name}")
        for case in doc["cases"]
        for name, pieces in case["splits"].items()
    ] + [
        pytest.param(doc["tiktoken_patterns"][name], case["text"], pieces, id=f"{case['name']}-{name}")
        for case in doc["cases"]
        for name, pieces in case["tiktoken_splits"].items()
    ]


def isolated_reference(regex_mod, pattern: str, text: str) -> list[str]:
    """Hugging Face Isolated split with the regex module (matches and non-empty gaps)."""
    pieces, last = [], 0
    for m in regex_mod.finditer(pattern, text):
        s, e = m.span()
        if s > last:
            pieces.append(text[last:s])
        if e > s:
            pieces.append(text[s:e])
        last = e
    if last < len(text):
        pieces.append(text[last:])
    return pieces


@lru_cache(maxsize=1)
def differing_code_points() -> frozenset[int]:
    """Code points whose category or \\s membership differs between regex's Unicode and ours (16.0)."""
    import regex

    every = "".join(chr(cp) for cp in range(0x110000))
    out: set[int] = set()
    for cat, ranges in tables.CATEGORIES.items():
        ours = {cp for lo, hi in ranges for cp in range(lo, hi + 1)}
        theirs = {cp for m in regex.finditer(r"\p{%s}+" % cat, every) for cp in range(*m.span())}
        out |= ours ^ theirs
    ws = {cp for lo, hi in tables.WHITE_SPACE for cp in range(lo, hi + 1)}
    out |= ws ^ {m.start() for m in regex.finditer(r"\s", every)}
    return frozenset(out)


# -- fixtures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, text, expected", fixture_params())
def test_fixture_split(pattern, text, expected):
    assert pre_split(pattern, text) == expected


def test_fixture_patterns_are_ours_and_enough_texts():
    doc = load_fixture()
    assert {**doc["patterns"], **doc["tiktoken_patterns"]} == dict(KNOWN_PATTERNS)
    assert doc["tiktoken_patterns"] == TIKTOKEN_PATTERNS
    assert len(doc["cases"]) >= 25
    assert doc["banner"]["generator"] == "tools/make_pretokenizer_fixtures.py"
    assert doc["banner"]["rmlprep_unicode_version"] == tables.UNICODE_VERSION


def test_fixture_generator_drift(tmp_path):
    """Rerunning the fixture generator reproduces the committed file byte for byte."""
    regex = pytest.importorskip("regex", reason="regex not installed (pip install -e '.[reference]')")
    pytest.importorskip("unicodedata2", reason="unicodedata2 not installed")
    banner = load_fixture()["banner"]
    if regex.__version__ not in banner["reference"]:
        pytest.skip(f"fixtures were made with {banner['reference']}; installed regex {regex.__version__}")
    out = tmp_path / "pretokenizer.json"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "make_pretokenizer_fixtures.py"), "--out", str(out)],
        check=True, cwd=REPO,
    )
    assert out.read_bytes() == FIXTURE.read_bytes()


# -- known patterns -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, pattern",
    [pytest.param(n, p, id=n) for n, p in KNOWN_PATTERNS.items()],
)
def test_pattern_name(name, pattern):
    assert pattern_name(pattern) == name
    assert pattern_name(pattern + "|x") is None


def real_split_patterns() -> list[pytest.param]:
    """Every Split regex (and ByteLevel use_regex) of the real tokenizer.json files."""
    hf = REAL / "hf"
    out = []
    for path in sorted(hf.glob("*/tokenizer.json")) if hf.is_dir() else []:
        found: list[str] = []

        def walk(node):
            if isinstance(node, dict):
                if node.get("type") == "Split" and "Regex" in node.get("pattern", {}):
                    found.append(node["pattern"]["Regex"])
                if node.get("type") == "ByteLevel" and node.get("use_regex"):
                    found.append(GPT2_PATTERN)  # tokenizers byte_level.rs applies this regex
                if node.get("type") == "Digits":
                    found.append(DIGITS_INDIVIDUAL_PATTERN if node.get("individual_digits") else DIGITS_PATTERN)
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(json.loads(path.read_text(encoding="utf-8")).get("pre_tokenizer"))
        out += [pytest.param(p, id=f"{path.parent.name}-{i}") for i, p in enumerate(found)]
    return out


REAL_PATTERNS = real_split_patterns()
needs_real = pytest.mark.skipif(
    not REAL_PATTERNS, reason=f"no real tokenizer.json under {REAL}/hf (set RMLPREP_REAL_TOKENIZERS)"
)


@needs_real
def test_real_files_use_our_verbatim_patterns():
    by_model = {p.id.rsplit("-", 1)[0]: p.values[0] for p in REAL_PATTERNS}
    expected = {"llama3": LLAMA3_PATTERN, "qwen2.5": QWEN2_PATTERN, "gpt2": GPT2_PATTERN}
    for model, pattern in expected.items():
        if model in by_model:
            assert by_model[model] == pattern, model
    assert all(pattern_name(p.values[0]) for p in REAL_PATTERNS)


@pytest.mark.parity
def test_gpt2_pattern_matches_tiktoken_source():
    """tiktoken's openai_public.py quotes GPT-2's original regex (with [\\p{L}] brackets).

    Ours is the Hugging Face byte_level.rs spelling; the two differ only by those brackets.
    """
    tiktoken_ext = pytest.importorskip("tiktoken_ext.openai_public", reason="tiktoken not installed")
    source = Path(tiktoken_ext.__file__).read_text(encoding="utf-8")
    quoted = GPT2_PATTERN.replace(r"\p{L}+", r"[\p{L}]+").replace(r"\p{N}+", r"[\p{N}]+")
    assert f'r"""{quoted}"""' in source


def test_o200k_is_the_hf_spelling_of_gpt4o():
    assert O200K_PATTERN == O200K_HF_PATTERN


@pytest.mark.parity
@pytest.mark.parametrize("name", list(TIKTOKEN_PATTERNS))
def test_tiktoken_patterns_match_tiktoken_source(name, monkeypatch):
    """Our cl100k_base / o200k_base strings are the pat_str of the installed tiktoken."""
    public = pytest.importorskip("tiktoken_ext.openai_public", reason="tiktoken not installed")
    monkeypatch.setattr(public, "load_tiktoken_bpe", lambda *a, **k: {})  # no rank download
    assert public.ENCODING_CONSTRUCTORS[name]()["pat_str"] == TIKTOKEN_PATTERNS[name]


def corpus_texts(n: int = 300, width: int = 2000) -> list[str]:
    path = SHARED / "corpora" / "text-multilingual.jsonl"
    if not path.exists():
        pytest.skip(f"real corpus {path} absent")
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"][:width])
            if len(out) == n:
                break
    return out


@pytest.mark.parity
@needs_real
@pytest.mark.parametrize("pattern", REAL_PATTERNS)
def test_real_patterns_vs_regex_module_on_corpus(pattern):
    regex = pytest.importorskip("regex", reason="regex not installed")
    differ = differing_code_points()
    checked = 0
    for text in corpus_texts():
        if any(ord(c) in differ for c in text):
            continue  # properties changed after Unicode 16.0: the engines may disagree
        assert pre_split(pattern, text) == isolated_reference(regex, pattern, text)
        checked += 1
    assert checked > 200


# -- hypothesis ---------------------------------------------------------------------------------

INTERESTING = list(" \t\r\n\x0b\x0c\x1c\x85\xa0\u2009\u3000'sStTrRlLdDkK\u017f\u212a1234567890"
                   "!?.,-_#\u0301\u200d\u00e9\u4e00\u0661\u2167\ud800\udfff\U0001F600\U0001D400")
lone_surrogate = st.integers(0xD800, 0xDFFF).map(chr)  # st.characters() never draws these
any_char = st.one_of(
    st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
    st.sampled_from(INTERESTING),
    lone_surrogate,
)
ROUND_TRIP_PATTERNS = [*MAIN_PATTERNS, DIGITS_PATTERN, DIGITS_INDIVIDUAL_PATTERN, O200K_HF_PATTERN, CL100K_PATTERN]


@settings(max_examples=300, deadline=None)
@given(text=st.text(any_char, max_size=60))
def test_pieces_cover_text_exactly(text):
    for pattern in ROUND_TRIP_PATTERNS:
        pieces = pre_split(pattern, text)
        assert "".join(pieces) == text
        assert all(pieces)


FULL_COMPILED = {p: re.compile(translate(p)) for p in (*MAIN_PATTERNS, CL100K_PATTERN, O200K_PATTERN)}


@settings(max_examples=200, deadline=None)
@given(text=st.text(any_char, max_size=60))
def test_cut_variants_equal_full_classes(text):
    """The ASCII/BMP variants chosen per text give the same pieces as the full translation."""
    for pattern, full in FULL_COMPILED.items():
        assert pre_split(pattern, text) == full.findall(text)


@pytest.fixture(scope="module")
def same_props_char():
    pytest.importorskip("regex", reason="regex not installed")
    differ = differing_code_points()
    return any_char.filter(lambda c: ord(c) not in differ)


@pytest.mark.parity
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_differential_vs_regex_module(data, same_props_char):
    import regex

    text = data.draw(st.text(same_props_char, max_size=80), label="text")
    for pattern in ROUND_TRIP_PATTERNS:
        assert pre_split(pattern, text) == isolated_reference(regex, pattern, text), pattern[:30]


# -- hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize("char", [" ", "a", "1", "\n", "!", "\u00e9", "\ud800"], ids=repr)
@pytest.mark.parametrize("pattern", ROUND_TRIP_PATTERNS[:5], ids=lambda p: pattern_name(p))
def test_hostile_repeats(pattern, char):
    text = char * 100_000
    assert "".join(pre_split(pattern, text)) == text
    text2 = text + "x" + text  # a run followed by something else: lookahead backtracking
    assert "".join(pre_split(pattern, text2)) == text2


@pytest.mark.parametrize("char", [" ", "a", "1", "\n", "!", "\u00e9", "\ud800"], ids=repr)
@pytest.mark.parametrize("pattern", [pytest.param(p, id=n) for n, p in TIKTOKEN_PATTERNS.items()])
def test_hostile_repeats_tiktoken_patterns(pattern, char):
    text = char * 100_000
    assert "".join(pre_split(pattern, text)) == text
    text2 = text + "x" + text
    assert "".join(pre_split(pattern, text2)) == text2


@pytest.mark.parametrize("pattern", [*MAIN_PATTERNS, CL100K_PATTERN, O200K_PATTERN], ids=lambda p: pattern_name(p) or p[:8])
def test_hostile_one_megabyte_word(pattern):
    word = ("abcdefghij\u00e9\u4e00" * 90_000)[:1_000_000]
    pieces = pre_split(pattern, word)
    assert pieces == [word]


def test_empty_and_lone_surrogates():
    for pattern in ROUND_TRIP_PATTERNS:
        assert pre_split(pattern, "") == []
        assert "".join(pre_split(pattern, "\ud800\udc00\udfff")) == "\ud800\udc00\udfff"
    assert pre_split(GPT2_PATTERN, "a\ud800b") == ["a", "\ud800", "b"]


# -- translation --------------------------------------------------------------------------------


def test_contractions_follow_simple_case_folding():
    assert pre_split(LLAMA3_PATTERN, "it'\u017f 'S '\u212a") == ["it", "'\u017f", " '", "S", " '", "\u212a"]
    assert pre_split(GPT2_PATTERN, "IT'S it's") == ["IT", "'", "S", " it", "'s"]
    ascii_variant = translate(LLAMA3_PATTERN, limit=0x7F)
    assert "\\u017f" not in ascii_variant and "\\u017f" in translate(LLAMA3_PATTERN)


def test_translation_is_ascii_and_uses_white_space_not_isspace():
    t = translate(GPT2_PATTERN)
    assert t.isascii()
    assert pre_split(GPT2_PATTERN, "a\x1cb") == ["a", "\x1c", "b"]  # \x1c is not White_Space
    assert pre_split(GPT2_PATTERN, "a\x85b") == ["a", "\x85", "b"]  # U+0085 is White_Space


def test_keep_last_space_for_next_word():
    assert pre_split(GPT2_PATTERN, "a   b") == ["a", "  ", " b"]
    assert pre_split(LLAMA3_PATTERN, "a  \n\n  b") == ["a", "  \n\n", " ", " b"]


@pytest.mark.parametrize(
    "pattern, text, expected",
    [
        pytest.param(r"\p{N}", "ab12c", ["ab", "1", "2", "c"], id="gaps-kept"),
        pytest.param(r"(?=a)", "bab", ["b", "ab"], id="empty-matches-split-gaps"),
        pytest.param(r"x", "", [], id="empty-text"),
        pytest.param(r"[^\P{L}a]+", "xyaz1", ["xy", "a", "z", "1"], id="negated-property-in-class"),
        pytest.param(r"\pN+|\pL+", "ab12", ["ab", "12"], id="single-letter-property"),
        pytest.param(r"(?i:ab)", "xABy", ["x", "AB", "y"], id="icase-group"),
        pytest.param(r"[a-c]{2,3}?", "abcab", ["ab", "ca", "b"], id="lazy-brace"),
        pytest.param(r"\d", "a\u0661\u00b2", ["a", "\u0661", "\u00b2"], id="d-is-Nd-only"),
        pytest.param(r"\x{41}|\u0042|\x43", "ABCD", ["A", "B", "C", "D"], id="hex-escapes"),
        pytest.param(r"(?<name>a)(?:b)", "abab", ["ab", "ab"], id="named-group"),
        pytest.param(r"a(?#comment)b", "xab", ["x", "ab"], id="comment"),
        pytest.param(r"\.{1}|{", "a.{", ["a", ".", "{"], id="literal-brace"),
        pytest.param(r"^a|b$", "ab\nab", ["a", "b", "\n", "a", "b"], id="line-anchors-onig"),
        pytest.param(r"\Aa|b\z", "ab\nab", ["a", "b\na", "b"], id="text-anchors"),
        pytest.param(r"(?<=a)b", "abcb", ["a", "b", "cb"], id="lookbehind"),
        # possessive: a*+ keeps every a, so "a*+ab" never matches; greedy a*ab gives one back
        pytest.param(r"a*+ab|a", "aab", ["a", "a", "b"], id="possessive-star"),
        pytest.param(r"a*ab|a", "aab", ["aab"], id="greedy-star-backtracks"),
        pytest.param(r"a?+ab|b", "ab", ["a", "b"], id="possessive-optional"),
        pytest.param(r"\d{1,3}+3|\d", "123", ["1", "2", "3"], id="possessive-brace"),
        pytest.param(r"\d{1,3}3|\d", "123", ["123"], id="greedy-brace"),
        pytest.param(r"(?>a+)a|a", "aaa", ["a", "a", "a"], id="atomic-group"),
        pytest.param(r"(?>a|ab)c|.", "abc", ["a", "b", "c"], id="atomic-alternation-commits"),
        pytest.param(r"(?:a|ab)c|.", "abc", ["abc"], id="plain-alternation-backtracks"),
        # tiktoken's \s++$: the possessive run takes the final newline, so all $ readings agree
        pytest.param(r"\s++$|\s", "a \n", ["a", " \n"], id="possessive-space-dollar"),
        pytest.param(text_anchors(r"ab$|a|b|\n"), "ab\n", ["a", "b", "\n"], id="fancy-dollar-is-text-end"),
        pytest.param(r"ab$|a|b|\n", "ab\nab", ["ab", "\n", "ab"], id="onig-dollar-is-line-end"),
    ],
)
def test_general_patterns(pattern, text, expected):
    assert pre_split(pattern, text) == expected


@pytest.mark.parametrize(
    "pattern, construct",
    [
        pytest.param(r"(a)\1", "backreference", id="backreference"),
        pytest.param(r"a+++", "quantifier applied to a quantifier", id="possessive-then-quantifier"),
        pytest.param(r"\X", "grapheme cluster", id="grapheme"),
        pytest.param(r"\p{Greek}", "Unicode property \\p{Greek}", id="script-property"),
        pytest.param(r"\p{scx=Han}", "Unicode property \\p{scx=Han}", id="script-extensions"),
        pytest.param(r"[\b]", "\\b inside a class", id="class-backspace"),
        pytest.param(r"(?i)abc", "inline flags", id="bare-inline-flag"),
        pytest.param(r"(?x:a b)", "inline flags", id="verbose-flag"),
        pytest.param(r"[[:alpha:]]", "POSIX bracket", id="posix-class"),
        pytest.param(r"[&&a]", "intersection && with an empty side", id="intersection-empty-left"),
        pytest.param(r"[a&&]", "intersection && with an empty side", id="intersection-empty-right"),
        pytest.param(r"(?i:[a-z&&[^c]])", "(?i) on a class with a nested class or &&", id="icase-intersection"),
        pytest.param(r"[a-[b]]", "class range ending in '['", id="range-into-nested"),
        pytest.param(r"(?i:\u00e9)", "(?i) on non-ASCII", id="icase-non-ascii"),
        pytest.param(r"(?i:\p{L})", "(?i) on non-ASCII", id="icase-property"),
        pytest.param(r"(?i:in)", "letter i", id="icase-letter-i"),
        pytest.param(r"\k<x>", "named backreference", id="named-backreference"),
        pytest.param(r"(?<=a+)b", "stdlib re rejects", id="variable-lookbehind"),
        pytest.param(r"a**", "quantifier applied to a quantifier", id="nested-quantifier"),
        pytest.param(r"\R", "linebreak", id="linebreak"),
    ],
)
def test_unsupported_constructs_raise(pattern, construct):
    with pytest.raises(UnsupportedTokenizer) as info:
        compile_pre_split([pattern])
    assert construct in str(info.value)
    assert repr(pattern) in str(info.value)


@pytest.mark.parametrize(
    "pattern",
    [pytest.param(p, id=p) for p in ["(ab", "ab)", "[abc", "a{3,1}", "*a", "\\", r"\p{L", r"\xZZ"]],
)
def test_malformed_patterns_raise_loader_error(pattern):
    with pytest.raises(LoaderError) as info:
        compile_pre_split([pattern])
    assert not isinstance(info.value, UnsupportedTokenizer)
    assert repr(pattern) in str(info.value)


@pytest.mark.parametrize(
    "pattern, expected",
    [
        pytest.param(r"a$|b", r"a\z|b", id="dollar"),
        pytest.param(r"^a", r"\Aa", id="caret"),
        pytest.param(r"\$|\^x", r"\$|\^x", id="escaped"),
        pytest.param(r"[$^]|[^$]|[]$]|[^]^]", r"[$^]|[^$]|[]$]|[^]^]", id="in-classes"),
        pytest.param(CL100K_PATTERN, CL100K_PATTERN.replace("++$", r"++\z"), id="cl100k"),
    ],
)
def test_text_anchors(pattern, expected):
    assert text_anchors(pattern) == expected


def test_cl100k_dollar_readings_agree():
    r"""In cl100k's \s++$ the end-of-text (fancy-regex), before-final-newline (regex, re) and
    end-of-line (onig) readings of $ give the same pieces: the possessive run has taken every
    newline, so only "end of text" can follow it."""
    for text in ["a \n", "a\n\n", "a \n b", " \n \n", "x\r\n", "\n", "a  ", "a \nb\n "]:
        onig = pre_split(CL100K_PATTERN, text)
        assert pre_split(text_anchors(CL100K_PATTERN), text) == onig, repr(text)
        assert pre_split(CL100K_PATTERN.replace("++$", r"++(?=\n?\Z)"), text) == onig, repr(text)


@pytest.mark.parity
@pytest.mark.parametrize("name", list(TIKTOKEN_PATTERNS))
def test_tiktoken_patterns_vs_regex_module_on_corpora(name):
    """cl100k_base / o200k_base pieces == regex's on the original pattern, over the shared
    corpora (multilingual documents, chat messages) and the Debian-built corpus parts, each also
    with a final newline, trailing spaces and both appended; texts holding a code point whose
    properties changed after Unicode 16.0 are skipped."""
    regex = pytest.importorskip("regex", reason="regex not installed")
    from tools.make_parity_fixtures import corpus_texts as shared_texts
    from tools.make_parity_fixtures import debian_texts

    pattern = TIKTOKEN_PATTERNS[name]
    try:
        texts = shared_texts(n_text=300, n_chat=300, max_bytes=2048)
    except FileNotFoundError:
        texts = []
    texts += [t for _, t in debian_texts(per_part=40, max_bytes=2048)]
    if not texts:
        pytest.skip("neither ../shared/corpora nor the Debian-built corpus is present")
    differ = differing_code_points()
    checked = 0
    for text in texts:
        if any(ord(c) in differ for c in text):
            continue
        for variant in (text, text + "\n", text + "  ", text + " \n\n "):
            assert pre_split(pattern, variant) == isolated_reference(regex, pattern, variant), variant[:100]
        checked += 1
    assert checked > 300


# -- splitter -----------------------------------------------------------------------------------


def test_compile_pre_split_chains_and_caches():
    splitter = compile_pre_split([LLAMA3_PATTERN, DIGITS_INDIVIDUAL_PATTERN])
    assert isinstance(splitter, PreSplitter)
    assert splitter("abc 12345 x") == ["abc", " ", "1", "2", "3", "4", "5", " x"]
    assert compile_pre_split((LLAMA3_PATTERN, DIGITS_INDIVIDUAL_PATTERN)) is splitter
    assert compile_pre_split(GPT2_PATTERN)("a b") == ["a", " b"]  # a str is one pattern
    assert compile_pre_split([])("a b") == ["a b"]
    assert compile_pre_split([])("") == []
    assert "llama3" in repr(splitter)
