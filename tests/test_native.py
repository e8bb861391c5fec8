"""The compiled hot path (rmlprep._fastbpe via rmlprep.native) against the pure-Python reference.

Every test here needs the extension; they skip, saying so, when it is not built (CI builds it
with ``pip install -e .``). Ids must be identical to the pure path's: fixtures, the pre-split
fixture, differential hypothesis tests over all of Unicode (lone surrogates included), hostile
shapes, and the real tokenizers on real text when they are present.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlprep import native, special_prefix
from rmlprep.errors import TokenizeError
from rmlprep.pretokenize import KNOWN_PATTERNS, compile_pre_split
from rmlprep.spec import BYTE_LEVEL, TokenizerSpec, TokenType
from rmlprep.tokenizer import Tokenizer
from rmlprep.unicode import bytes_to_unicode

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "fixtures" / "tokenizers").glob("*.json"))
PRETOKENIZER_FIXTURE = ROOT / "fixtures" / "pretokenizer.json"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", "~/.cache/rmlprep-real-tokenizers")).expanduser()
CORPUS = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"
SPACE = "\u2581"

pytestmark = pytest.mark.skipif(
    not native.native_available(),
    reason="rmlprep._fastbpe is not built: run `pip install -e .` (needs gcc) to test the native path",
)


# -- helpers ---------------------------------------------------------------------------------


def _pure(tok: Tokenizer) -> Tokenizer:
    """A second tokenizer for the same spec with the native path switched off: no native
    encoder, no whole-text fast path (``encode`` took it even with ``_native`` None, so the
    "pure" side of a comparison ran native too), ``unicodedata.normalize`` on every text."""
    from rmlprep.segment import make_normalizer

    twin = Tokenizer.create(tok.spec)
    twin._native = None
    twin._fast_encode = None
    twin._normalize = make_normalizer(tok.spec.normalizers)
    return twin


def _pure_segment(tok: Tokenizer, text: str) -> list[int]:
    """What the pure path returns for one prepared segment (``tok._native`` is None); a
    SentencePiece segment's spaces as "▁", as the native encoder reads them."""
    if tok.spec.kind == BYTE_LEVEL:
        return tok._encode_byte_level(text)
    return tok._encode_sentencepiece(text.replace(" ", SPACE))  # the native encoder reads " " as "▁"


_TOKS: dict[str, tuple] = {}


def fixture_pair(name: str):
    """(native tokenizer, pure twin, fixture doc) for a fixture, built once."""
    if name not in _TOKS:
        doc = json.loads((ROOT / "fixtures" / "tokenizers" / f"{name}.json").read_text(encoding="utf-8"))
        tok = Tokenizer.create(TokenizerSpec.from_dict(doc["spec"]))
        assert tok._native is not None, f"{name}: make_native declined a fixture tokenizer"
        _TOKS[name] = (tok, _pure(tok), doc)
    return _TOKS[name]


FIXTURE_NAMES = [p.stem for p in FIXTURES]


def byte_tokenizer(patterns: tuple[str, ...], **kw) -> Tokenizer:
    """256 byte tokens (id = byte) plus "ab"; merges (a, b); pre-split by ``patterns``."""
    b2u = bytes_to_unicode()
    vocab = tuple(b2u[b] for b in range(256)) + ("ab",)
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=(1,) * 257,
                         merges=(("a", "b"),), pre_split=patterns, **kw)
    return Tokenizer.create(spec)


# -- fixtures --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_ids_native(name):
    tok, _, doc = fixture_pair(name)
    for case in doc["cases"]:
        got = tok.encode(case["text"], add_special_tokens=case["add_special_tokens"],
                         parse_special=case["parse_special"])
        assert got == case["ids"], (doc["reference"], case["text"])


def _pretok_params():
    doc = json.loads(PRETOKENIZER_FIXTURE.read_text(encoding="ascii"))
    return [
        pytest.param(name, case["text"], pieces, id=f"{case['name']}-{name}")
        for case in doc["cases"]
        for name, pieces in {**case["splits"], **case["tiktoken_splits"]}.items()
    ]


@pytest.mark.parametrize("name,text,pieces", _pretok_params())
def test_pretokenizer_fixture_native(name, text, pieces):
    """Native pieces equal the regex module's (the fixture) for every pattern and text, tiktoken's
    cl100k_base and o200k_base included."""
    tok = byte_tokenizer((KNOWN_PATTERNS[name],))
    spans = tok._native.split_text(text)
    assert [text[a:b] for a, b in spans] == pieces


def test_make_native_declines_unknown_pattern():
    tok = byte_tokenizer((r"\p{L}+|[^\p{L}]+",))
    assert tok._native is None  # pure path, no hand-written matcher
    assert tok.encode("ab cd") == [256, 32, 99, 100]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_known_pattern_without_matcher_takes_pure_path(name, monkeypatch):
    """A known pattern the extension has no matcher for (here: its matcher hidden from the bridge)
    encodes on the pure path (same ids as a tokenizer whose native encoder is switched off), never
    with a wrong matcher."""
    assert name in native.native_pattern_names()
    monkeypatch.delitem(native._PATTERN_CODES, name)
    assert name not in native.native_pattern_names()
    tok = byte_tokenizer((KNOWN_PATTERNS[name],))
    assert tok._native is None and tok._fast_encode is None
    text = "Hello  world's\r\n\tCAFÉ 12345 \U0001F600!"
    assert tok.encode(text) == _pure(tok).encode(text) == list(text.encode("utf-8"))


def test_pure_python_env_turns_native_off():
    code = (
        "from rmlprep.tokenizer import Tokenizer\n"
        "from rmlprep.spec import TokenizerSpec\n"
        "from rmlprep.unicode import bytes_to_unicode\n"
        "b = bytes_to_unicode()\n"
        "s = TokenizerSpec(kind='byte_level_bpe', vocab=tuple(b[i] for i in range(256)), token_types=(1,)*256)\n"
        "print(Tokenizer.create(s)._native is None)\n"
    )
    env = dict(os.environ, RMLPREP_PURE_PYTHON="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_missing_extension_warns_once_and_falls_back():
    """Without the extension, make_native returns None and warns once, naming `pip install -e .`."""
    code = (
        "import sys, warnings\n"
        "sys.modules['rmlprep._fastbpe'] = None  # import fails as if it were not built\n"
        "from rmlprep.tokenizer import Tokenizer\n"
        "from rmlprep.spec import TokenizerSpec\n"
        "from rmlprep.unicode import bytes_to_unicode\n"
        "b = bytes_to_unicode()\n"
        "s = TokenizerSpec(kind='byte_level_bpe', vocab=tuple(b[i] for i in range(256)), token_types=(1,)*256)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    toks = [Tokenizer.create(s) for _ in range(3)]\n"
        "print(all(t._native is None for t in toks), toks[0].encode('hi') == [104, 105])\n"
        "print(len(w), w[0].category.__name__, 'pip install -e .' in str(w[0].message))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RMLPREP_PURE_PYTHON", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "1", "RuntimeWarning", "True"]


# -- differential: native == pure -------------------------------------------------------------

# Characters that exercise every branch of the matchers: each White_Space kind (and U+001C..1F,
# which are not), CR/LF, contraction letters and their (?i) twins (U+017F long s, Kelvin sign),
# numbers of every N category, letters, marks, symbols, astral and lone surrogates, "▁".
SPECIAL_CHARS = list(
    " \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000"
    "'sStTrReEvVmMlLdDkK\u017f\u212a\u0130i"
    "0179\u0663\u00bd\u2167\u2460\U0001d7ce"
    "aZ\u00e9\u4e2d\u05d0\u0301\u200d!.,(-_\u00ad\U0001f600\U00010400\ud800\udbff\udc00\udfff\u2581"
)
any_char = st.one_of(
    st.sampled_from(SPECIAL_CHARS),
    st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
    st.integers(0xD800, 0xDFFF).map(chr),
)
ws_heavy = st.sampled_from(list(" \t\n\r\x0b\x0c\x85\xa0\u3000\u2028") + ["a", "'", "1", "s", "."])
texts = st.one_of(
    st.text(any_char, max_size=80),
    st.text(ws_heavy, max_size=80),
    st.lists(st.sampled_from(["'s", "'S", "'\u017f", "'ll", "'LL", "'Re", "'ve", "'d", "'m", "'t",
                              " ", "  ", "\n", "\r\n", "123", "4567", "word", " word", "\u2581",
                              "\u2581\u2581", "x"]), max_size=20).map("".join),
)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_differential_segment(name, text):
    tok, pure, _ = fixture_pair(name)
    if not text:
        return
    assert tok._native.encode_text(text) == _pure_segment(pure, text)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_differential_encode(name, text):
    """The whole pipeline (specials, prefix space, spaces -> "▁") through both paths."""
    tok, pure, _ = fixture_pair(name)
    assert tok.encode(text) == pure.encode(text)
    assert tok.encode(text, add_special_tokens=True, parse_special=True) == pure.encode(
        text, add_special_tokens=True, parse_special=True)


@pytest.mark.parametrize("pattern", sorted(native.native_pattern_names()))
@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_differential_split(pattern, text):
    """Native pieces == the translated-re pieces, for each pattern alone and chained."""
    for patterns in ((KNOWN_PATTERNS[pattern],), (KNOWN_PATTERNS[pattern], KNOWN_PATTERNS["digits_individual"])):
        tok = _split_tok(patterns)
        spans = tok._native.split_text(text)
        assert [text[a:b] for a, b in spans] == compile_pre_split(patterns)(text)


def _block_edge_texts() -> list[str]:
    """Texts putting what the block splitters (split_gpt2_last, split_llama3_last,
    split_o200k_last: 64 bytes of piece starts at a time) work out across bytes at every offset
    around a 64-byte window: a
    White_Space run ending in a multi-byte character (\\s+(?!\\S) gives it back), CR/LF in a run
    and after an O run (and o200k's '/'), " ?" joins, a lone O character joining the letters after
    it, contractions in both cases (o200k: as a suffix), digit runs longer than 3, o200k's upper
    and lower sets (camel case, marks, Lo beside Lu), runs reaching the text's end, pieces over 56
    bytes."""
    mids = ["\u3000", "\u3000\u3000", " \u3000", "\u3000 ", "\u00a0\u00a0", "\u0085", "  ", "\n ", " \n",
            "\r\n  ", ".\n", ".\n ", "'ll", "'s", "'re", " 's", "''s", "'s's", "'S", "'LL", "'\u017f", "1'2",
            "1234567", "\u0661\u0662\u0663\u0664", "\uff0c", "\u3002\u4e2d", "\t", "\U0001F600", "-" * 70,
            "camelCaseHTMLParser", "it's'S", "DON'T", ".\n/", ".\n/'x", "e\u0301", "\u4e2dA\u4e2dB", "\u01c5a"]
    tails = ["", "b", " b", "\n", "'t", "\u3000", "\uff0c\u4e2d", ".\n x", "12345"]
    out = []
    for pre in ("a", "\u00e9", " ", "1", "\n", "\u4e2d"):
        for k in range(55, 69):
            for m in mids:
                for t in tails:
                    out.append(pre * k + m + t)
    return out


@pytest.mark.parametrize("name", ["gpt2", "llama3", "qwen2", "o200k_base"])
def test_block_splitters_at_window_edges(name):
    """The pieces of each pattern with a block splitter, at the windows' edges, == the
    translated-re pieces (the reference the regex-module fixtures check), and == the per-piece
    matchers' (m_gpt2, m_llama3, m_o200k; RMLPREP_SPLIT_SCALAR=1, in a fresh process): every text of
    _block_edge_texts."""
    texts = _block_edge_texts()
    tok = _split_tok((KNOWN_PATTERNS[name],))
    ref = compile_pre_split((KNOWN_PATTERNS[name],))
    got = [tok._native.split_text(t) for t in texts]
    for t, spans in zip(texts, got):
        assert [t[a:b] for a, b in spans] == ref(t), t
    code = ("import json, sys\n"
            "from tests.test_native import _block_edge_texts, _split_tok, KNOWN_PATTERNS\n"
            f"tok = _split_tok((KNOWN_PATTERNS[{name!r}],))\n"
            "json.dump([tok._native.split_text(t) for t in _block_edge_texts()], sys.stdout)\n")
    env = dict(os.environ, RMLPREP_SPLIT_SCALAR="1")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert [[tuple(p) for p in r] for r in json.loads(run.stdout)] == [list(map(tuple, r)) for r in got]


_SPLIT_TOKS: dict[tuple, Tokenizer] = {}


def _split_tok(patterns):
    if patterns not in _SPLIT_TOKS:
        _SPLIT_TOKS[patterns] = byte_tokenizer(patterns)
    return _SPLIT_TOKS[patterns]


def test_equal_scores_go_leftmost():
    """Scores mode: "aaa" with "aa" scored: (a,a) at 0 and 1 tie -> leftmost: "aa" "a"."""
    vocab = ("<unk>", "a", "aa", "b")
    spec = TokenizerSpec(kind="sentencepiece_bpe", vocab=vocab, token_types=(2, 1, 1, 1),
                         scores=(0.0, -1.0, -1.0, -1.0), unk_id=0)
    tok = Tokenizer.create(spec)
    assert tok._native is not None
    assert tok._native.encode_text("aaa") == [2, 1] == _pure_segment(_pure(tok), "aaa")
    assert tok._native.encode_text("aaaab\u00e9") == [2, 2, 3, 0] == _pure_segment(_pure(tok), "aaaab\u00e9")


def test_merge_ranks_against_id_order():
    """Merges ranked against their merged ids' order (rank 0 makes id 257, rank 1 id 256) are
    applied by rank: "abc" is "ab" "c", not "a" "bc" (the real vocabularies rank merges in id
    order, where the native table stores the merged id for the rank). Pure path agrees."""
    b2u = bytes_to_unicode()
    vocab = tuple(b2u[b] for b in range(256)) + ("bc", "ab")
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=(1,) * 258,
                         merges=(("a", "b"), ("b", "c")), pre_split=(KNOWN_PATTERNS["gpt2"],))
    tok = Tokenizer.create(spec)
    assert tok._native is not None
    for text, want in (("abc", [257, ord("c")]), ("xbc abcab", [ord("x"), 256, ord(" "), 257, ord("c"), 257])):
        assert tok._native.encode_text(text) == want == _pure_segment(_pure(tok), text)



@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n.startswith("bl_")])
def test_joinable_pairs_are_the_merges_byte_pairs(name):
    """A missed piece is cut between bytes no merge joins: the native table holds, for every merge
    (left, right), the pair (left's last byte, right's first byte), counted here from the spec."""
    from rmlprep.unicode import unicode_to_bytes

    tok, _, _ = fixture_pair(name)
    u2b = unicode_to_bytes()
    want = {(u2b[a[-1]], u2b[b[0]]) for a, b in tok.spec.merges}
    assert tok._native._enc.joinable_pairs() == len(want)


def test_dense_vocabulary_is_not_cut():
    """Merges joining over a quarter of the (continuation byte, lead byte) pairs (here 1000 of
    3264) leave pieces uncut (joinable_pairs() None); the sparse fixture above is cut. Ids equal
    the pure path's either way."""
    b2u = bytes_to_unicode()
    pairs = [(a, b) for a in range(0x80, 0xC0) for b in range(0xC2, 0xF5)][:1000]
    vocab = tuple(b2u[b] for b in range(256)) + tuple(b2u[a] + b2u[b] for a, b in pairs)
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=(1,) * len(vocab),
                         merges=tuple((b2u[a], b2u[b]) for a, b in pairs), pre_split=(KNOWN_PATTERNS["gpt2"],))
    tok = Tokenizer.create(spec)
    assert tok._native is not None and tok._native._enc.joinable_pairs() is None
    text = "\u65e5\u672c\u8a9e \u0436\u0438\u0437\u043d\u044c \u00e9t\u00e9"
    assert tok._native.encode_text(text) == _pure_segment(_pure(tok), text)
    assert fixture_pair("bl_gpt2_digits")[0]._native._enc.joinable_pairs() is not None

def test_cut_piece_part_that_is_a_whole_token():
    """ignore_merges: "abc" is a token (made by the merge (ab, c)) but merging its bytes gives
    "a" "bc" ((b, c) ranks first). The piece "abc" is taken whole; "abcd" is not a token, its
    merge is a bc d, and c|d is a point no merge joins, so natively it is cut into "abc" + "d":
    the part "abc" must be merged, and not remembered as the piece "abc" is."""
    b2u = bytes_to_unicode()
    vocab = tuple(b2u[b] for b in range(256)) + ("bc", "ab", "abc")
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=(1,) * 259,
                         merges=(("b", "c"), ("a", "b"), ("ab", "c")), ignore_merges=True,
                         pre_split=(KNOWN_PATTERNS["gpt2"],))
    tok = Tokenizer.create(spec)
    assert tok._native is not None and tok._native._enc.joinable_pairs() == 2  # (a, b), (b, c)
    abcd, abc, comma = [97, 256, 100], [258], [44]
    for text, want in (("abcd,abc,abcd,abc", abcd + comma + abc + comma + abcd + comma + abc),
                       ("abc,abcd,abc", abc + comma + abcd + comma + abc)):
        tok._native.clear_cache()
        assert tok._native.encode_text(text) == want == _pure_segment(_pure(tok), text)
        assert tok._native.encode_text(text) == want  # from the cache


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n.startswith("bl_")])
def test_long_words_every_length(name):
    """Words of 40-270 letters (one piece each) cross the merge loops' bounds: a scan up to 48
    symbols, block minima up to 255, a heap above. Ids equal the pure path's at every length."""
    import random

    tok, pure, _ = fixture_pair(name)
    rng = random.Random(14)
    for n in range(40, 271):
        word = "".join(rng.choice("etaoinshrdlu") for _ in range(n))
        assert tok._native.encode_text(word) == _pure_segment(pure, word), n

# -- the merge loop's builds ---------------------------------------------------------------------
# A byte-level spec whose pair values are both merged id and priority (merges ranked in their merged
# ids' order: tiktoken files, the byte-level tokenizer.json files at hand) runs lean builds of the
# merge loop for words of up to 255 symbols, their SSE4.1 copy when the CPU has it: on such a CPU
# the SSE2 lean build runs only when RMLPREP_NATIVE_LEAN=1 asks for it (a CPU without SSE4.1 runs it).


def _cpu_has_sse41() -> bool | None:
    """Whether /proc/cpuinfo's flags list sse4_1 (None: no such file, or not x86)."""
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    except (OSError, StopIteration):
        return None
    return "sse4_1" in flags.split()


def _builds(tok: Tokenizer, monkeypatch) -> dict[int, native.NativeEncoder]:
    """One native encoder of ``tok``'s spec per RMLPREP_NATIVE_LEAN value (0, 1, 2), and the build
    each took checked: 0 the generic loop; 1 the SSE2 lean build; 2 its SSE4.1 copy where the CPU
    has SSE4.1 (x86-64)."""
    import platform

    encs = {}
    for limit in (0, 1, 2):
        monkeypatch.setenv("RMLPREP_NATIVE_LEAN", str(limit))
        encs[limit] = native.make_native(tok)
    monkeypatch.delenv("RMLPREP_NATIVE_LEAN")
    got = [encs[k]._enc.merge_build() for k in (0, 1, 2)]
    sse41 = _cpu_has_sse41() if platform.machine() in ("x86_64", "AMD64") else False
    assert got[:2] == [0, 1] and got[2] in ((1, 2) if sse41 is None else (2 if sse41 else 1,)), got
    assert native.make_native(tok)._enc.merge_build() == got[2]  # unset: the best
    return encs


def _words_every_length(letters: str, seed: int = 14) -> list[str]:
    """Words of 2-300 letters: every length the scan (up to 48 symbols), the block minima (up to
    255) and the heap take."""
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(letters) for _ in range(n)) for n in range(2, 301)]


def _same_ids_every_build(encs: dict, texts: list[str]) -> np.ndarray:
    ids0, off0 = encs[0].encode_batch(texts)
    for k in (1, 2):
        ids, off = encs[k].encode_batch(texts)
        if not np.array_equal(ids, ids0):
            i = next(i for i in range(len(texts)) if not np.array_equal(ids[off[i]:off[i + 1]], ids0[off0[i]:off0[i + 1]]))
            pytest.fail(f"build {k}: text {i} ({texts[i][:40]!r}) differs from the generic loop's ids")
    ids, off = encs[1].encode_batch(texts, num_threads=2)
    assert np.array_equal(ids, ids0) and np.array_equal(off, off0)
    return ids0


def test_lean_builds_equal_generic_synthetic(monkeypatch):
    """A byte-level vocabulary without "q" (unk: a word holding it takes the symbol path, not the
    byte-pair table) whose merges are ranked in id order: every build gives the pure path's ids,
    on words of every length and on words holding the unknown byte."""
    import random

    b2u = bytes_to_unicode()
    letters = "etaoinshrd"
    byte_toks = [b2u[b] for b in range(256) if b != ord("q")]
    vocab, merges = byte_toks + ["<unk>"], []
    rng, have = random.Random(3), set(letters)
    pool = list(letters)
    while len(merges) < 400:  # merges in id order: merge k makes id 256 + k
        a, b = rng.choice(pool), rng.choice(pool)
        if a + b in have or len(a + b) > 6:
            continue
        merges.append((a, b))
        vocab.append(a + b)
        have.add(a + b)
        pool.append(a + b)
    types = [1] * len(vocab)
    types[255] = 2  # <unk>
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=tuple(types), merges=tuple(merges),
                         unk_id=255, pre_split=(KNOWN_PATTERNS["gpt2"],))
    tok = Tokenizer.create(spec)
    pure = _pure(tok)
    encs = _builds(tok, monkeypatch)
    assert encs[1]._enc.joinable_pairs() is None  # a byte without a token: pieces are never cut
    words = _words_every_length(letters)
    texts = words + ["q".join(w[i:i + 9] for i in range(0, len(w), 9)) for w in words]
    _same_ids_every_build(encs, texts)
    for k in (0, 1, 2):
        for t in texts[::7]:
            assert encs[k].encode_text(t) == _pure_segment(pure, t), (k, t)


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n.startswith("bl_")])
def test_lean_builds_equal_generic_fixtures(name, monkeypatch):
    """The byte-level fixtures: every build of the merge loop gives the same ids (the SSE2 lean
    build included, which a CPU with SSE4.1 never takes unless told)."""
    tok, _, doc = fixture_pair(name)
    encs = _builds(tok, monkeypatch)
    texts = _words_every_length("etaoinshrdlu") + _mixed_docs(60) + [c["text"] for c in doc["cases"]]
    _same_ids_every_build(encs, texts)


LEAN_REAL = {"gpt2": REAL / "gpt2" / "gpt2.tiktoken", "llama3": REAL / "llama3" / "llama3.tiktoken",
             "qwen2.5": REAL / "hf" / "qwen2.5" / "tokenizer.json", "gpt-4o": REAL / "hf" / "gpt-4o" / "tokenizer.json"}


@pytest.mark.parametrize("name", sorted(LEAN_REAL))
def test_lean_builds_equal_generic_real(name, monkeypatch):
    """Real tokenizers (GPT-2 and Llama 3 rank files, Qwen2.5 and GPT-4o tokenizer.json) on real
    multilingual text and on words of every length: every build of the merge loop gives the same ids."""
    path = LEAN_REAL[name]
    if not path.exists() or not CORPUS.exists():
        pytest.skip(f"{path} or {CORPUS} not found (set RMLPREP_REAL_TOKENIZERS)")
    from rmlprep import load_tokenizer

    tok = load_tokenizer(path, **({"name": name} if path.suffix == ".tiktoken" else {}))
    encs = _builds(tok, monkeypatch)
    texts = _words_every_length("etaoinshrdlu") + _words_every_length("абвгдежзик") + _corpus_docs(120, 3000)
    _same_ids_every_build(encs, texts)


def test_lean_limit_refused():
    """RMLPREP_NATIVE_LEAN other than 0, 1, 2 is refused in one line when an encoder is made."""
    from rmlprep.errors import ConfigError

    tok, _, _ = fixture_pair("bl_llama3")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMLPREP_NATIVE_LEAN", "sse2")
        with pytest.raises(ConfigError, match="RMLPREP_NATIVE_LEAN='sse2': give 0"):
            native.make_native(tok)

# -- hostile shapes ----------------------------------------------------------------------------

HOSTILE = [
    pytest.param("a" * 100_000, id="100k-a"),
    pytest.param(" " * 100_000, id="100k-space"),
    pytest.param("\n" * 50_000 + " " * 50_000 + "x", id="newlines-spaces"),
    pytest.param("7" * 100_000, id="100k-digit"),
    pytest.param("ab" * 200_000, id="400k-word"),
    pytest.param("'s" * 50_000, id="contractions"),
    pytest.param("\ud800x\udfff\ud83d" * 1000, id="lone-surrogates"),
    pytest.param("\U0001f600" * 20_000, id="astral"),
    pytest.param("\u65e5\u672c\u8a9e\u306e\u6587\u5b57\u5217" * 5000, id="cjk-run"),  # one 105 KB piece, cut
    pytest.param(SPACE * 50_000 + "a", id="sp-spaces"),
]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_native_equals_pure(name, text):
    tok, pure, _ = fixture_pair(name)
    assert tok._native.encode_text(text) == _pure_segment(pure, text)


# -- batch and threads --------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_encode_batch_matches_encode_text(name, num_threads):
    tok, _, doc = fixture_pair(name)
    segs = [c["text"] for c in doc["cases"] if c["text"]] + ["", "x", "a" * 5000]
    if tok.spec.kind != BYTE_LEVEL:
        segs = [s.replace(" ", SPACE) for s in segs]
    ids, offsets = tok._native.encode_batch(segs, num_threads=num_threads)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    assert len(offsets) == len(segs) + 1 and offsets[0] == 0 and offsets[-1] == len(ids)
    for i, s in enumerate(segs):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == tok._native.encode_text(s)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_encode_to_numpy_equals_encode(name):
    """encode_to_numpy gives the fixture's reference ids (tokenizers, sentencepiece, tiktoken) as
    a read-only uint32 array, as tiktoken's Encoding.encode_to_numpy does: on the native whole-text
    path, on the general one (special-token text, BOS/EOS) and on the pure path."""
    tok, pure, doc = fixture_pair(name)
    for case in doc["cases"]:
        kw = {"add_special_tokens": case["add_special_tokens"], "parse_special": case["parse_special"]}
        for t in (tok, pure):
            got = t.encode_to_numpy(case["text"], **kw)
            assert got.dtype == np.uint32 and got.shape == (len(case["ids"]),), (name, case["text"])
            assert got.tolist() == case["ids"], (doc["reference"], case["text"])
    got = tok.encode_to_numpy("a" * 5000, parse_special=False)  # GIL released; ids owned by the array
    assert not got.flags.writeable and got.tolist() == tok.encode("a" * 5000, parse_special=False)


def test_result_lists_outlive_their_releases():
    """encode_text's lists share one int object per id (pinned on CPython 3.11, see
    ids_to_list): building and freeing 400k lists' worth of those ids, mutating and copying
    them on the way, leaves every int intact (a count that reached zero would free an int the
    table still hands out) and the lists ordinary, GC-untracked lists."""
    import gc

    tok, pure, doc = fixture_pair("bl_llama3")
    text = next(c["text"] for c in doc["cases"] if len(c["text"]) > 20)
    want = _pure_segment(pure, text)
    for _ in range(20_000):
        ids = tok._native.encode_text(text)
        ids.append(ids[0])
        ids.sort()
        del ids[:1], ids
    ids = tok._native.encode_text(text)
    assert ids == want and type(ids) is list and not gc.is_tracked(ids)
    assert [int(str(i)) for i in ids] == want
    assert tok._native.encode_text("") == [] and not gc.is_tracked(tok._native.encode_text(""))


def test_encode_batch_rejects_non_str():
    tok, _, _ = fixture_pair("bl_llama3")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        tok._native.encode_batch(["a", 3])
    with pytest.raises(ValueError, match="num_threads"):
        tok._native.encode_batch(["a"], num_threads=0)


def _mixed_docs(n: int, seed: int = 7) -> list[str]:
    """n documents of 0 to ~6k characters mixing scripts, sizes and the hostile shapes."""
    import random

    rng = random.Random(seed)
    parts = ["The quick brown fox's den. ", "Ça coûte 12€ — naïve ", "Привет, мир! ", "中文分词测试。",
             "  \t\n\n  ", "def f(x):\n    return x ** 2\n", "\U0001F600\u200d\U0001F600 ", "7" * 40, "\ud800x"]
    return ["".join(rng.choice(parts) for _ in range(rng.randrange(0, 250))) for _ in range(n)]


@pytest.mark.parametrize("name", ["bl_gpt2_digits", "bl_llama3", "spm_bpe", "sp_hf_bytefallback"])
@pytest.mark.parametrize("num_threads", [2, 3, 8])
def test_threaded_batch_equals_one_thread(name, num_threads):
    """Hundreds of documents (several units per thread, so threads take units from each other's
    runs): the same ids and offsets as one thread, for byte-level and SentencePiece."""
    tok, _, _ = fixture_pair(name)
    docs = _mixed_docs(400)
    if tok.spec.kind != BYTE_LEVEL:
        docs = [d.replace(" ", SPACE) for d in docs]
    assert sum(map(len, docs)) > 8 * 64 * 1024  # more units than threads
    ids1, off1 = tok._native.encode_batch(docs, num_threads=1)
    idsn, offn = tok._native.encode_batch(docs, num_threads=num_threads)
    assert np.array_equal(off1, offn) and np.array_equal(ids1, idsn)
    for i in (0, 1, 199, 399):
        assert ids1[off1[i]:off1[i + 1]].tolist() == tok._native.encode_text(docs[i])


@pytest.mark.parametrize("name", ["bl_gpt2_digits", "sp_hf_bytefallback"])
@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_batch_uneven_documents(name, num_threads):
    """Documents of very uneven size (one larger than all the others together, first, last or
    alone; three of them, whose ids' bound is over 8 MB, so one thread writes a mapping too) and
    texts whose ids come near their bound (characters spelled as byte tokens): each row equals
    encode_text. On 2+ threads ranges 0 and 1 meet in a mapping sized by that bound, so this
    checks where they meet."""
    tok, _, _ = fixture_pair(name)
    big = "\U0001F600\u0101\u00ff\u4e2d " * 40_000
    small = _mixed_docs(60, seed=3)
    if tok.spec.kind != BYTE_LEVEL:
        big, small = big.replace(" ", SPACE), [d.replace(" ", SPACE) for d in small]
    want = {d: tok._native.encode_text(d) for d in set(small) | {big, ""}}
    for docs in ([big] + small, small + [big], [big], ["", big, ""], small[:3] + [big] + small[3:] + [big],
                 [big] * 3):
        ids, off = tok._native.encode_batch(docs, num_threads=num_threads)
        assert off.tolist() == np.cumsum([0] + [len(want[d]) for d in docs]).tolist()
        assert ids.tolist() == [t for d in docs for t in want[d]]


@pytest.mark.parametrize("num_threads", [1, 2, 3])
def test_batch_mappings_reused(num_threads):
    """The written part of a batch's result mapping (ids' bound over 8 MB) and of its workers' side
    mappings is kept when freed and moved into the next batch's mapping (fastbpe.c map_take /
    map_keep): a live result's pages are never handed out, a reused part is written whole, batches
    of other sizes take what fits, and what the pool keeps stays within 64 MiB. Expected ids:
    encode_text of each document."""
    from rmlprep import _fastbpe

    tok, _, _ = fixture_pair("bl_gpt2_digits")
    big = "\U0001F600\u0101\u00ff\u4e2d " * 40_000
    small = _mixed_docs(60, seed=5)
    want = {d: tok._native.encode_text(d) for d in set(small) | {big}}

    def check(docs, got):
        ids, off = got
        assert off.tolist() == np.cumsum([0] + [len(want[d]) for d in docs]).tolist()
        assert ids.tolist() == [t for d in docs for t in want[d]]

    a_docs, b_docs, c_docs = [big] * 3 + small, small + [big] * 2, [big] * 2
    a = tok._native.encode_batch(a_docs, num_threads=num_threads)
    b = tok._native.encode_batch(b_docs, num_threads=num_threads)  # a alive: its mapping is not reused
    check(a_docs, a)
    check(b_docs, b)
    nbytes = len(a[0]) * 4
    del a
    (size, _), *_ = _fastbpe.map_pool_info()  # newest first: a's result, its 2 MB pages
    assert nbytes <= size < nbytes + (4 << 20)
    for docs in (a_docs, c_docs, b_docs, a_docs):  # each takes what the one before freed
        b = None
        b = tok._native.encode_batch(docs, num_threads=num_threads)
        check(docs, b)
        assert sum(t for _, t in _fastbpe.map_pool_info()) <= 64 << 20


@pytest.mark.parametrize("num_threads", [1, 2])
def test_encode_utf8_equals_encode_batch(num_threads):
    """UTF-8 bytes + offsets (an Arrow string column's buffers) give encode_batch's ids."""
    import pyarrow as pa

    tok, _, _ = fixture_pair("bl_gpt2_digits")
    docs = [d for d in _mixed_docs(300) if "\ud800" not in d]  # Arrow strings are valid UTF-8
    arr = pa.array(docs, pa.string())
    _, offsets, data = arr.buffers()
    offs = np.frombuffer(offsets, np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    got = tok._native.encode_utf8(data, offs, num_threads=num_threads)
    want = tok._native.encode_batch(docs, num_threads=num_threads)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_encode_utf8_refuses_bad_input():
    tok, _, _ = fixture_pair("bl_gpt2_digits")
    good, bad = "héllo".encode(), b"\xed\xa0\x80"  # a UTF-8-encoded surrogate is not UTF-8
    data = good + bad + good
    with pytest.raises(ValueError, match=r"texts\[1\] is not well-formed UTF-8"):
        tok._native.encode_utf8(data, np.array([0, 6, 9, 15]))
    with pytest.raises(ValueError, match="out of the 15-byte data"):
        tok._native.encode_utf8(data, np.array([0, 6, 16]))
    with pytest.raises(ValueError, match="out of"):
        tok._native.encode_utf8(data, np.array([6, 0]))
    ids, off = tok._native.encode_utf8(good + good, np.array([0, 6, 6, 12]))  # an empty text too
    n = len(tok._native.encode_text("héllo"))
    assert off.tolist() == [0, n, n, 2 * n] and ids.tolist() == 2 * tok._native.encode_text("héllo")


def test_threads_share_one_encoder():
    """Concurrent encode_text / encode_batch calls (GIL released) give the single-thread ids."""
    tok, _, doc = fixture_pair("bl_gpt2_digits")
    segs = [c["text"] * 300 for c in doc["cases"] if c["text"]]
    want = [tok._native.encode_text(s) for s in segs]
    errors = []

    def work():
        for _ in range(3):
            if [tok._native.encode_text(s) for s in segs] != want:
                errors.append("encode_text")
            ids, off = tok._native.encode_batch(segs)
            if [ids[off[i]:off[i + 1]].tolist() for i in range(len(segs))] != want:
                errors.append("encode_batch")

    threads = [threading.Thread(target=work) for _ in range(10)]  # more threads than cache slots
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _letters(i: int) -> str:
    out = ""
    while True:
        out += "abcdefghijklmnopqrstuvwxyz"[i % 26]
        i //= 26
        if not i:
            return out


@pytest.mark.parametrize("name", ["bl_gpt2_digits", "bl_llama3", "bl_qwen2"])
def test_missed_words_merged_two_at_a_time(name):
    """flush merges missed words of 2-16 bytes two at a time (fastbpe.c merge_group, the lean
    builds): a word met again while it waits for a partner, an odd one left at the end of a batch
    of 128 pieces, whole tokens and non-ASCII pieces between them (resolved alone), and the same
    texts again from the cache: each text's ids equal the pure path's."""
    tok, pure, _ = fixture_pair(name)
    words = [_letters(i) + _letters(7 * i + 3) for i in range(2000)]
    texts = ["abcd,abcd efgh efgh", "xy", "zzzz zzzz zzzz q", " ".join(words), ",".join(reversed(words)),
             " ".join(w + " héllo " + w + " the " for w in words[:300]), "".join(words[:50]), "a b c"]
    for _ in range(2):  # cold, then every piece from the cache
        tok._native.clear_cache()
        for text in texts:
            assert tok.encode(text) == pure.encode(text)
        for text in texts:
            assert tok.encode(text) == pure.encode(text)


def test_cache_is_bounded():
    """700k distinct pieces overflow the piece cache (2**20 slots, at most 5/8 used): it sweeps
    instead of growing, stays under 64 MB, and ids stay the pure path's after the sweeps."""
    tok, pure, _ = fixture_pair("bl_llama3")
    tok._native.clear_cache()
    words = " ".join("q" + _letters(i) for i in range(700_000))
    ids = tok._native.encode_text(words)
    info = tok._native.cache_info()
    assert len(info) == 1 and info[0]["sweeps"] >= 1
    assert info[0]["slots"] <= 1 << 20 and info[0]["entries"] <= (1 << 20) * 5 // 8
    assert info[0]["bytes"] < 64 << 20
    sample = words[-30_000:]
    assert tok._native.encode_text(sample) == _pure_segment(pure, sample)
    assert len(ids) >= 700_000


def test_cache_arenas_move_and_sweep():
    """Pieces of more than 16 bytes and 3 ids keep their key and ids in the cache's arenas, which
    from 2 MB on are mappings that double by mremap (fastbpe.c arena_grow) and are rebuilt by a
    sweep once 4 M ids are kept: 300k such pieces (~20 ids each in this fixture) take them past
    4 MB and through a sweep; ids stay the pure path's for pieces swept out and pieces kept, and
    a piece answered from the moved arena gives the ids of its first encode."""
    tok, pure, _ = fixture_pair("bl_llama3")
    tok._native.clear_cache()
    words = [" qwjxvbkzqpfgyhmd" + _letters(i) for i in range(300_000)]
    head = "".join(words[:100_000])
    first = tok._native.encode_text(head)
    info = tok._native.cache_info()[0]
    assert info["bytes"] - info["slots"] * 32 > 4 << 20 and info["sweeps"] == 0  # arenas past one move
    assert tok._native.encode_text(head) == first  # every piece a hit, read from the moved arenas
    tok._native.encode_text("".join(words[100_000:]))
    assert tok._native.cache_info()[0]["sweeps"] >= 1
    for sample in ("".join(words[:1500]), "".join(words[-1500:])):
        assert tok._native.encode_text(sample) == _pure_segment(pure, sample)


def test_a_sweep_mid_batch_looks_up_the_front_hits_again():
    """fastbpe.c ``flush`` answers a batch's front hits first (phase 1: a piece of more than 3 ids
    as an offset into the cache's id arena), then resolves its misses and puts them (phase 2).
    A put that fills the arena (4 M ids) sweeps it: the kept entries' ids move, so phase 1's
    offsets are stale and ``flush_relookup`` (6e0fea9) looks those pieces up again before the
    ids are copied out. Here four pieces W of ~20 ids stand, in turn, between 300k new pieces of
    ~20 ids, so every batch of 128 pieces holds ~64 front hits of a W beside ~64 misses, and the
    batch whose puts fill the arena sweeps it under them. Every piece's ids must be what it gives alone on
    a fresh cache; W's and a sample of the new pieces' the pure path's."""
    tok, pure, _ = fixture_pair("bl_llama3")
    nat = tok._native
    ws = [" qwjxvbkzqpfgyhmdzzy" + c for c in "xyzw"]
    new = [" qwjxvbkzqpfgyhmd" + _letters(i) for i in range(300_000)]
    # the Ws learned after 5,000 others: their ids sit deep in the arena, where the sweep's
    # compaction moves them (learned first, a W kept alone would stay at offset 0)
    pieces = new[:5000] + [p for k, x in enumerate(new[5000:]) for p in (ws[k % 4], x)]
    nat.clear_cache()
    ids = nat.encode_text("".join(pieces))
    assert nat.cache_info()[0]["sweeps"] >= 1
    nat.clear_cache()
    alone = {}
    for p in dict.fromkeys(pieces):
        if len(alone) % 20_000 == 0:
            nat.clear_cache()  # fresh caches never reach a sweep
        alone[p] = nat.encode_text(p)
    assert nat.cache_info()[0]["sweeps"] == 0
    for w in ws:
        assert alone[w] == _pure_segment(pure, w) and len(alone[w]) > 3
    for p in new[::3001]:
        assert alone[p] == _pure_segment(pure, p), p
    want = [i for p in pieces for i in alone[p]]
    assert len(ids) == len(want)
    bad = next((k for k, (a, b) in enumerate(zip(ids, want)) if a != b), None)
    assert bad is None, f"ids differ from id {bad} on"


_NO_FRONT_SHIM = r"""
#include <errno.h>
#include <stddef.h>
extern void *__libc_calloc(size_t, size_t);
/* the piece cache's front (fastbpe.c: calloc(1 << FRONT_BITS, sizeof(CEntry)) = 8192 x 32) */
void *calloc(size_t n, size_t size)
{
    if (n == 8192 && size == 32) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_calloc(n, size);
}
"""


def test_a_piece_cache_without_memory_for_its_front_still_encodes(tmp_path):
    """Out of memory for the piece cache's front (a 256 KB calloc, failed here by an LD_PRELOAD
    shim, glibc's ``__libc_calloc`` for every other call): the cache must then stay off, and the
    ids stay right. ``pcache_put`` allocated the table first and returned when the front's calloc
    failed, leaving a table without a front, which the next lookup probes first: a NULL read,
    the process killed by SIGSEGV (review14). The child encodes texts twice (the second pass
    would look pieces up) in one call and in a 1- and 2-thread batch, and prints its ids, which
    must equal the pure path's."""
    import shutil

    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "gcc builds rmlprep's extension: the test needs it too"
    (tmp_path / "shim.c").write_text(_NO_FRONT_SHIM)
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "shim.so"), str(tmp_path / "shim.c")],
                   check=True)
    tok, pure, _ = fixture_pair("bl_llama3")
    texts = ["hello world, the cache has no front " * 3, " qwjxvbkzqpfgyhmd" + "abc" * 9, "x" * 40]
    child = (
        "import json, sys\n"
        "from rmlprep.spec import TokenizerSpec\nfrom rmlprep.tokenizer import Tokenizer\n"
        f"doc = json.loads(open({str(ROOT / 'fixtures' / 'tokenizers' / 'bl_llama3.json')!r}, encoding='utf-8').read())\n"
        "nat = Tokenizer.create(TokenizerSpec.from_dict(doc['spec']))._native\n"
        f"texts = {texts!r}\n"
        "out = [nat.encode_text(t) for t in texts] + [nat.encode_text(t) for t in texts]\n"
        "for k in (1, 2):\n"
        "    ids, off = nat.encode_batch(texts * 2, num_threads=k)\n"
        "    out += [ids[off[i]:off[i + 1]].tolist() for i in range(len(off) - 1)]\n"
        "print(json.dumps([out, nat.cache_info()]))\n")
    env = dict(os.environ, LD_PRELOAD=str(tmp_path / "shim.so"), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    out, info = json.loads(p.stdout)
    want = [_pure_segment(pure, t) for t in texts]
    assert out == want * 6
    assert all(c["entries"] == 0 for c in info)  # no front, no cache


def test_one_thread_batch_sizes_its_cache_once():
    """A batch on one thread grows its slot's piece cache once, before it starts, to the size the
    shared cache is given (room at 5/8 full for one entry per 24 bytes of the texts' storage, in
    the table's 4x steps from 4096 to 2**20 slots; fastbpe.c cache_presize), also from a cleared
    cache, which then has no front yet; ids stay encode_text's."""
    tok, _, _ = fixture_pair("bl_llama3")
    docs = _mixed_docs(400)
    storage = sum(len(d) * (1 if max(d, default="a") < "\u0100" else 2 if max(d) < "\U00010000" else 4) for d in docs)
    want = 4096
    while want < 1 << 20 and want * 5 // 8 < storage // 24:
        want *= 4
    assert want > 4096
    tok._native.clear_cache()
    ids, off = tok._native.encode_batch(docs, num_threads=1)
    (info,) = tok._native.cache_info()
    assert info["slots"] == want and info["entries"] < want * 5 // 32  # its own growth stops below
    for i in (0, 1, 199, 399):
        assert ids[off[i]:off[i + 1]].tolist() == tok._native.encode_text(docs[i])


def test_batch_threads_share_one_piece_cache():
    """A batch on 2+ threads shares one piece cache (fastbpe.c "the shared piece cache", slot -1 of
    cache_info): a cold batch learns each piece once, as one thread does (give or take a piece two
    workers missed at the same moment), where each worker's own cache learned the common pieces
    again. When it cannot take more during a batch (here 200k distinct pieces of ~20 ids: more
    than its 4 M ids, padded to 8 each) the workers go on with their slots' caches, and the next
    batch finds it over its bounds and sweeps it. Ids stay the one-thread batch's throughout."""
    tok, _, _ = fixture_pair("bl_llama3")
    docs = _mixed_docs(400)
    tok._native.clear_cache()
    ids1, off1 = tok._native.encode_batch(docs, num_threads=1)
    (one,) = tok._native.cache_info()
    tok._native.clear_cache()
    ids2, off2 = tok._native.encode_batch(docs, num_threads=2)
    (shared,) = tok._native.cache_info()  # the workers' slots learned nothing
    assert shared["slot"] == -1 and one["entries"] <= shared["entries"] <= one["entries"] + 8
    assert np.array_equal(off1, off2) and np.array_equal(ids1, ids2)

    words = [" qwjxvbkzqpfgyhmd" + _letters(i) for i in range(200_000)]
    docs = ["".join(words[i:i + 500]) for i in range(0, len(words), 500)]
    tok._native.clear_cache()
    ids2, off2 = tok._native.encode_batch(docs, num_threads=2)
    info = {d["slot"]: d for d in tok._native.cache_info()}
    assert info[-1]["sweeps"] == 0 and len(info) >= 2  # full: a slot's cache took the rest
    again, _ = tok._native.encode_batch(docs[::-1], num_threads=2)
    assert tok._native.cache_info()[-1]["sweeps"] == 1
    ids1, off1 = tok._native.encode_batch(docs, num_threads=1)
    assert np.array_equal(off1, off2) and np.array_equal(ids1, ids2)
    n = int(off1[-1])
    assert np.array_equal(np.concatenate([ids1[off1[i]:off1[i + 1]] for i in range(len(docs) - 1, -1, -1)]), again)
    assert n == len(again)


def test_concurrent_threaded_batches_share_one_encoder():
    """Four Python threads each run 2- and 3-worker batches on one Encoder at once (the GIL is
    released: one batch holds the shared piece cache, the others fall back to their slots'
    caches, fastbpe.c "the shared piece cache"), beside a thread calling encode_text and one
    calling clear_cache (which waits for the batch holding the shared cache, then frees it).
    Texts: mixed scripts, and pieces of more than 16 bytes and 3 ids (the shared key and id
    arenas). Every batch gives the ids and offsets of a one-thread batch of the same texts, and
    every encode_text its own first result (review-chatc10; ThreadSanitizer and AddressSanitizer
    clean on a longer run of this, tenth sitting)."""
    tok, _, _ = fixture_pair("bl_llama3")
    nat = tok._native
    sets = [_mixed_docs(120, seed=1), _mixed_docs(120, seed=2),
            ["".join(" qwjxvbkzqpfgyhmd" + _letters(i) for i in range(k, k + 400)) for k in range(0, 24_000, 400)]]
    nat.clear_cache()
    want = [tuple(a.copy() for a in nat.encode_batch(s, num_threads=1)) for s in sets]
    singles = sets[0][:30]
    want_single = [nat.encode_text(d) for d in singles]
    errors: list = []
    stop = threading.Event()

    def batches(k: int) -> None:
        for r in range(4):
            for j in range(len(sets)):
                s = (k + j) % len(sets)
                ids, off = nat.encode_batch(sets[s], num_threads=2 + k % 2)
                if not (np.array_equal(ids, want[s][0]) and np.array_equal(off, want[s][1])):
                    errors.append(("batch", k, s, r))

    def texts() -> None:
        while not stop.is_set():
            if [nat.encode_text(d) for d in singles] != want_single:
                errors.append("encode_text")

    def clears() -> None:
        while not stop.wait(0.02):
            nat.clear_cache()

    workers = [threading.Thread(target=batches, args=(k,)) for k in range(4)]
    aux = [threading.Thread(target=texts), threading.Thread(target=clears)]
    for t in workers + aux:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in aux:
        t.join()
    assert errors == []
    nat.clear_cache()
    ids, off = nat.encode_batch(sets[2], num_threads=2)  # and the shared cache came back after the clears
    assert [d["slot"] for d in nat.cache_info()] == [-1]
    assert np.array_equal(ids, want[2][0]) and np.array_equal(off, want[2][1])


# -- generated tables ---------------------------------------------------------------------------


def test_native_tables_generator_drift(tmp_path):
    """tools/make_native_tables.py rerun into tmp_path gives the committed header byte for byte."""
    out = tmp_path / "unicode_classes.h"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_native_tables.py"), "--out", str(out),
                    "--norm-out", str(tmp_path / "normalize_qc.h")], check=True, capture_output=True)
    committed = ROOT / "rmlprep" / "_native" / "unicode_classes.h"
    assert out.read_bytes() == committed.read_bytes(), "rerun tools/make_native_tables.py and rebuild"


def test_native_unicode_version_matches():
    from rmlprep import _fastbpe
    from rmlprep.unicode import unicode_version

    assert _fastbpe.UNICODE_VERSION == unicode_version()


# -- real tokenizers on real text ---------------------------------------------------------------

REAL_HF = ["gpt2", "llama3", "qwen2.5", "mistral-7b-v0.1", "gemma", "phi-3-mini"]


def _load_real(name: str) -> Tokenizer | None:
    path = REAL / "hf" / name / "tokenizer.json"
    if not path.exists():
        return None
    try:
        from rmlprep import load_tokenizer

        return load_tokenizer(path)
    except NotImplementedError:  # the loader entry point is still a stub: read tokenizer.json
        from rmlprep.hf import spec_from_tokenizer_json

        spec, _ = spec_from_tokenizer_json(path)
        return Tokenizer.create(spec)


def _corpus_docs(n: int, max_chars: int) -> list[str]:
    docs = []
    with CORPUS.open(encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"][:max_chars])
            if len(docs) >= n:
                break
    return docs


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_HF)
def test_real_tokenizers_native_equals_pure(name):
    if not CORPUS.exists():
        pytest.skip(f"{CORPUS} not found")
    tok = _load_real(name)
    if tok is None:
        pytest.skip(f"{REAL}/hf/{name}/tokenizer.json not found (set RMLPREP_REAL_TOKENIZERS)")
    assert tok._native is not None, f"{name}: make_native declined a real tokenizer"
    pure = _pure(tok)
    docs = _corpus_docs(300, 6000)
    for i, doc in enumerate(docs):
        got, want = tok.encode(doc), pure.encode(doc)
        if got != want:
            k = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            pytest.fail(f"{name}: doc {i} differs at token {k}: native {got[k:k + 8]} pure {want[k:k + 8]}")


@pytest.mark.parity
@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["cl100k_base", "o200k_base"])
def test_tiktoken_patterns_native_equals_pure_real(pattern):
    """Llama 3's real ranks pre-split by cl100k_base / o200k_base (their C matchers): native ids ==
    pure ids on real multilingual text, cut at odd places so pieces end mid-run."""
    path = REAL / "llama3" / "llama3.tiktoken"
    if not path.exists() or not CORPUS.exists():
        pytest.skip(f"{path} or {CORPUS} not found (set RMLPREP_REAL_TOKENIZERS)")
    import dataclasses

    from rmlprep import load_tokenizer

    spec = load_tokenizer(path, name="llama3").spec
    tok = Tokenizer.create(dataclasses.replace(spec, pre_split=(KNOWN_PATTERNS[pattern],)))
    assert tok._native is not None, f"{pattern}: make_native declined"
    pure = _pure(tok)
    for i, doc in enumerate(_corpus_docs(300, 4000)):
        doc = doc[: 1000 + 7 * i]
        got, want = tok.encode(doc), pure.encode(doc)
        assert got == want, f"{pattern}: doc {i} differs"


# -- whole-text fast paths (plain_encoder, encode_batch_flat) ------------------------------------


def _with_specials(text: str, tok: Tokenizer) -> str:
    """Sprinkle the tokenizer's special-token text into ``text`` (exercises the slow path)."""
    specials = sorted(tok.special_tokens)
    return text + (specials[len(text) % len(specials)] + text[:3] if specials and len(text) % 3 == 0 else "")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_plain_encoder_equals_pure_encode(name, text):
    tok, pure, _ = fixture_pair(name)
    fast = native.plain_encoder(tok)
    assert fast is not None
    text = _with_specials(text, tok)
    for parse_special in (True, False):
        got = fast(text, parse_special)
        if got is not None:
            assert got == pure.encode(text, parse_special=parse_special)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize("add_special_tokens", [False, True])
@pytest.mark.parametrize("num_threads", [1, 2])
def test_encode_batch_flat_equals_encode(name, add_special_tokens, num_threads):
    tok, pure, doc = fixture_pair(name)
    batch = [c["text"] for c in doc["cases"]] + ["", " ", "  x"]
    batch += [_with_specials(t, tok) for t in batch[:20]]
    for parse_special in (True, False):
        kw = {"add_special_tokens": add_special_tokens, "parse_special": parse_special}
        wants, ok = [], []
        for t in batch:
            try:
                wants.append(pure.encode(t, **kw))
                ok.append(t)
            except TokenizeError:  # parsed control text in a .model's text (rmlprep.spm_special)
                assert parse_special and tok.spec.prefix_scheme == "whole_text", t
        if len(ok) < len(batch):
            with pytest.raises(TokenizeError, match="parse_special=True found the special token"):
                native.encode_batch_flat(tok, batch, num_threads=num_threads, **kw)
        ids, offsets = native.encode_batch_flat(tok, ok, num_threads=num_threads, **kw)
        assert ids.dtype == np.uint32 and offsets.dtype == np.int64 and len(offsets) == len(ok) + 1
        for i, t in enumerate(ok):
            assert ids[offsets[i]:offsets[i + 1]].tolist() == wants[i], (t, parse_special)


def test_plain_encoder_declines_whole_text_prefix_with_normalizers():
    b2u = bytes_to_unicode()
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(b2u[b] for b in range(256)), token_types=(1,) * 256,
                         normalizers=(("nfc",),), add_prefix_space=True, prefix_scheme="whole_text")
    tok = Tokenizer.create(spec)
    assert tok._native is not None and native.plain_encoder(tok) is None
    ids, offsets = native.encode_batch_flat(tok, ["e\u0301", "a"])
    assert ids.tolist() == tok.encode("e\u0301") + tok.encode("a") and offsets.tolist() == [0, 3, 5]


_NORM_TOKS: dict[tuple, tuple] = {}


@pytest.mark.parametrize("scheme", ["first", "always"])
@pytest.mark.parametrize("normalizers", [(("nfc",),), (("nfkc",), ("replace", "a", " "))])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_plain_encoder_with_normalizers(scheme, normalizers, text):
    """Normalizers run before the prefix decision, as in Tokenizer._encode_text."""
    key = (scheme, normalizers)
    if key not in _NORM_TOKS:
        tok = byte_tokenizer((KNOWN_PATTERNS["llama3"],), normalizers=normalizers, add_prefix_space=True,
                             prefix_scheme=scheme, prefix_if_missing=True)
        _NORM_TOKS[key] = (tok, _pure(tok), native.plain_encoder(tok))
    tok, pure, fast = _NORM_TOKS[key]
    text = "\u0301" + text if len(text) % 2 else text
    assert fast(text, True) == pure.encode(text)
    ids, offsets = native.encode_batch_flat(tok, [text, text[::-1]])
    assert ids[offsets[0]:offsets[1]].tolist() == pure.encode(text)
    assert ids[offsets[1]:offsets[2]].tolist() == pure.encode(text[::-1])


# -- normalization quick check (nfc_suspects / nfkc_suspects) -----------------------------------

# Code points around every branch of the check: composed and decomposed Latin (â + dot below
# recomposes to ậ across the order of the marks), marks of several classes (U+0316 is Yes with
# class 220, U+05B0 class 10, U+0591 class 220), No code points (U+0344, the singleton U+212B
# Angstrom, U+0958 Devanagari qa), Hangul L/V/T jamo and LV/LVT syllables, Indic vowel signs of
# class 0 that compose (U+09C7 + U+09BE = U+09CB), kana voicing marks, NFKC-only No (U+FB01 fi,
# U+2460, U+00A0, U+00AA), a mark new in Unicode 15.0 (U+1E4EC, class 232; unassigned for a
# Python whose unicodedata is 14.0), unassigned code points (U+0378, U+E0080), astral, ASCII,
# and code points that Unicode 9.0.0 (tokenizers' tables) lacks: U+0C3C (class 7 since 14.0),
# U+11935 U+11930 (compose since 13.0), U+32FF (NFKC since 12.1).
NORM_CHARS = list(
    "aeAkx \u00e2\u00e9\u00fc\u1ea1\u0301\u0300\u0302\u0304\u0308\u0323\u0331\u0316\u05b0\u0591"
    "\u0344\u212b\u212a\u0958\u093c\u0915\u1100\u1161\u11a8\uac00\uac01\u09c7\u09be\u0b47\u0b3e"
    "\u304b\u3099\u309a\ufb01\u2460\u00a0\u00aa\u4e2d\U0001e4ec\u0378\U000e0080\U0001f600\u0345"
    "\u0c3c\U00011935\U00011930\u32ff"
)
norm_texts = st.one_of(
    st.text(st.sampled_from(NORM_CHARS), max_size=40),
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",)), max_size=40),
    st.text(st.sampled_from(NORM_CHARS[:8] + ["\u0301", "\u0323", "\u1161", "\u09be", "\U0001e4ec"]), max_size=40),
)


def _checked(form: str):
    from rmlprep.segment import make_normalizer

    return make_normalizer(((form.lower(),),), native.normalization_suspects())


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
@settings(max_examples=400, deadline=None)
@given(text=norm_texts)
def test_checked_normalizer_equals_unicodedata(form, text):
    """The span-wise normalizer gives the str normalize_reference (unicodedata.normalize between
    the code points Unicode 9.0.0 lacks, tests/test_segment.py) gives for the whole text, and
    text the check passes (None) is in the form for both."""
    import unicodedata

    from rmlprep.segment import normalize_reference

    want = normalize_reference(form, text)
    assert _checked(form)(text) == want
    for t in (text, "x" + text, text * 3):
        if native.normalization_suspects()[form](t) is None:
            assert unicodedata.normalize(form, t) == t == normalize_reference(form, t)


@pytest.mark.parametrize("text,nfc,spans", [
    pytest.param("Cafe\u0301 ok", "Caf\u00e9 ok", [3, 5], id="decomposed-acute"),  # e + U+0301 -> é
    pytest.param("caf\u00e9 \u4e2d\u6587", "caf\u00e9 \u4e2d\u6587", None, id="already-nfc"),
    pytest.param("\u1100\u1161\u11a8!", "\uac01!", [0, 3], id="hangul-jamo"),  # L V T -> 각 (U+AC01)
    pytest.param("x\u0301", "x\u0301", [0, 2], id="maybe-unchanged"),  # no x-acute: a Maybe that stays
    pytest.param("a\u09c7\u09be", "a\u09cb", [1, 3], id="bengali-o"),  # E sign + AA sign -> O sign
    pytest.param("\u00e2\u0323", "\u1ead", [0, 2], id="reordered-compose"),  # â + dot below -> ậ
    pytest.param("a\u0591\u05b0b", "a\u05b0\u0591b", [0, 3], id="class-order"),  # classes 220, 10
    pytest.param("\u212b\u00e9\u0301\u00e9", "\u00c5\u00e9\u0301\u00e9", [0, 3], id="singleton-and-merge"),
    pytest.param("\u00e9\u0378", "\u00e9\u0378", [0, 2], id="unassigned-whole-text"),
])
def test_nfc_suspects_worked_examples(text, nfc, spans):
    """Spans run from the last boundary (a Yes code point of class 0) before a suspect code point
    to the next one after it; touching spans merge; an unassigned code point flags the whole text."""
    import unicodedata

    assert unicodedata.normalize("NFC", text) == nfc
    assert native.normalization_suspects()["NFC"](text) == spans
    assert _checked("NFC")(text) == nfc


@pytest.mark.parametrize("kind", ["", "\u4e2d", "\U0001f600"], ids=["1-byte", "2-byte", "4-byte"])
def test_suspects_across_the_vector_steps(kind):
    """Long runs below the first suspect code point are skipped 16, 8 or 4 code units at a time:
    a decomposed acute (NFC) or a no-break space (NFKC) at every position of a 40-unit text is
    found, its span from the code point before it to the one after."""
    check = native.normalization_suspects()
    for pos in range(40):
        nfc = "a" * pos + "e\u0301" + "b" * (38 - pos) + kind
        assert check["NFC"](nfc) == [pos, pos + 2]
        assert _checked("NFC")(nfc) == "a" * pos + "\u00e9" + "b" * (38 - pos) + kind
        nfkc = "a" * pos + "\u00a0" + "b" * (39 - pos) + kind
        assert check["NFKC"](nfkc) == [max(pos - 1, 0), pos + 1]
        assert _checked("NFKC")(nfkc) == "a" * pos + " " + "b" * (39 - pos) + kind
        assert check["NFC"](nfkc) is None and check["NFKC"]("a" * pos + kind) is None


def test_nfkc_suspects_compatibility():
    """NFKC flags what NFC passes: ﬁ -> fi, NBSP -> space, ª -> a (a 1-byte-kind str)."""
    check = native.normalization_suspects()
    assert check["NFC"]("\ufb01 \u00a0\u00aa") is None and check["NFC"]("\u00aa\u00a0") is None
    assert check["NFKC"]("\u00aa\u00a0") == [0, 2]
    assert _checked("NFKC")("x \ufb01 \u00a0\u00aa") == "x fi  a"


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_quick_check_table_agrees_with_unicodedata(form):
    """Every code point the table passes (Yes, class 0 or not) is one that the unicodedata this
    Python runs normalizes to itself, and no code point passes that this unicodedata would
    compose onto a preceding one (its NFC_QC Maybe: the second part of each primary composite's
    two-code-point decomposition, the Hangul V and T jamo). The table is Unicode 16.0
    (unicodedata2), the normalizer is Python's unicodedata (14.0 on 3.11): code points they
    disagree on are new ones, unassigned in the older, which must stay in the form too."""
    import unicodedata

    check = native.normalization_suspects()[form]
    maybe = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp):
            maybe.add(int(d.split()[1], 16))
    passed = 0
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if check(ch) is None:
            passed += 1
            assert unicodedata.normalize(form, ch) == ch, f"U+{cp:04X} passes but {form} changes it"
            assert cp not in maybe, f"U+{cp:04X} passes but composes with a preceding code point"
    assert passed > 280_000  # of the 292,531 code points 16.0 assigns outside the surrogates


def test_quick_check_classes_agree_with_unicodedata():
    """The table's combining classes are unicodedata's (two marks out of class order are flagged,
    in order they pass) for every code point of nonzero class assigned in both versions."""
    import unicodedata

    from rmlprep import _unicode_norm

    ccc = {cp: c for lo, hi, c in _unicode_norm.COMBINING_CLASS for cp in range(lo, hi + 1)}
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)) != "Cn":
            assert ccc.get(cp, 0) == unicodedata.combining(chr(cp)), f"U+{cp:04X}"
    check = native.normalization_suspects()["NFC"]
    assert check("a\u0316\u0316") is None and check("a\u05b0\u0316") is None  # 10 <= 220
    assert check("a\u0316\u05b0") == [0, 3]  # 220 > 10


def test_normalize_tables_generator_drift(tmp_path):
    """tools/make_native_tables.py rerun into tmp_path gives the committed quick-check header."""
    classes, out = tmp_path / "unicode_classes.h", tmp_path / "normalize_qc.h"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_native_tables.py"), "--out", str(classes),
                    "--norm-out", str(out)], check=True, capture_output=True)
    committed = ROOT / "rmlprep" / "_native" / "normalize_qc.h"
    assert out.read_bytes() == committed.read_bytes(), "rerun tools/make_native_tables.py and rebuild"


def test_tokenizer_normalizes_with_the_quick_check():
    """A Tokenizer with an NFC normalizer uses the native check when built, and its ids equal
    those of the text normalized by unicodedata (decomposed accents, jamo)."""
    import unicodedata

    tok = byte_tokenizer((KNOWN_PATTERNS["llama3"],), normalizers=(("nfc",),))
    assert tok._normalize.__qualname__.startswith("_checked_normalizer")
    for text in ("Cafe\u0301 \u1100\u1161\u11a8", "plain", "\u00e2\u0323 x\u0301"):
        assert tok.encode(text) == list(unicodedata.normalize("NFC", text).encode("utf-8"))



@pytest.mark.parametrize("prefixes", [(), ("<|",), ("</", "<t", "<|"), ("a", "ab", "<|"), ("\u2581", "\u2581x"),
                                      ("<|a", "<t"), ("<",)])
@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(st.sampled_from(list("<|/tab x\u2581\u00e9\u4e2d")), max_size=12),
                      st.lists(st.sampled_from(["<", "<a", "< ", "x" * 30, "<|", "</", "<t", "\u00e9"]),
                               max_size=120).map("".join)))
def test_holds_any_equals_any_in(prefixes, text):
    """The special-token prefix filter answers any(p in text for p in prefixes), also past its
    budget of looks at a first character not followed by a second one (many "<a")."""
    assert special_prefix._holds_any(prefixes)(text) == any(p in text for p in prefixes)


@pytest.mark.parametrize("kind", ["byte_level", "sentencepiece"])
def test_nosur_conversion_finds_surrogates(kind):
    """encode_text_nosur: the str->UTF-8 conversion itself reports a surrogate code unit (lone or
    paired, in a 2- or 4-byte-kind str, inside a run of non-ASCII text or in the scalar tail) as
    None; every other text gets encode_text's ids. The tokenizer's fast path then replaces the
    surrogates as tiktoken does (a lone one becomes U+FFFD), so "a\\ud800b" encodes as "a\\ufffdb"."""
    if kind == "byte_level":
        b2u = bytes_to_unicode()
        vocab = tuple(b2u[b] for b in range(256))
        spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=(1,) * 256, merges=(),
                             pre_split=(KNOWN_PATTERNS["gpt2"],))
    else:
        vocab = ("<unk>", "a", "b", "\u2581")
        spec = TokenizerSpec(kind="sentencepiece_bpe", vocab=vocab, token_types=(2, 1, 1, 1),
                             scores=(0.0, -1.0, -1.0, -1.0), unk_id=0, byte_fallback=False)
    tok = Tokenizer.create(spec)
    enc = tok._native._enc
    for text in ["a\ud800b", "\udfff", "é" * 20 + "\ud800" + "é" * 20, "ж" * 31 + "\udc00",
                 "\U0001F600\ud83d\ude00", "x" * 17 + "\ud83d"]:
        assert enc.encode_text_nosur(text) is None, ascii(text)
        assert enc.encode_text_array_nosur(text) is None, ascii(text)
    for text in ["ab", "é" * 40, "ж" * 31 + "\ue000\ud7ff", "\U0001F600ab", "a" * 50]:
        assert enc.encode_text_nosur(text) == enc.encode_text(text), ascii(text)
        assert list(np.frombuffer(enc.encode_text_array_nosur(text), dtype=np.uint32)) == enc.encode_text(text)
    assert tok.encode("a\ud800b") == tok.encode("a\ufffdb")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_workers_find_surrogates(threads):
    """encode_batch(surrogates=True): each worker's str->UTF-8 conversion reports the strs holding
    a surrogate code unit (lone or paired, in a 2- or 4-byte-kind str), returned as row indices,
    which encode_batch_flat then encodes again through Tokenizer.encode (no serial scan of every
    text first). Worked example: "a\\ud800b" is such a row and encodes as tiktoken does, as
    "a\\ufffdb"; "\\U0001F600" (one astral code point) and "é" are not."""
    b2u = bytes_to_unicode()
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(b2u[b] for b in range(256)), token_types=(1,) * 256,
                         merges=(), pre_split=(KNOWN_PATTERNS["gpt2"],))
    tok = Tokenizer.create(spec)
    bad = ["a\ud800b", "\udfff", "é" * 20 + "\ud800" + "é" * 20, "ж" * 31 + "\udc00", "\U0001F600\ud83d\ude00",
           "x" * 17 + "\ud83d"]
    good = ["ab", "é" * 40, "ж" * 31 + "\ue000\ud7ff", "\U0001F600ab", "a" * 50, ""]
    texts = [t for k in range(40) for t in (good[k % len(good)] * (k + 1), bad[k % len(bad)])]
    ids, off, rows = tok._native._enc.encode_batch(texts, threads, surrogates=True)
    assert rows == list(range(1, len(texts), 2))
    ids, off = tok.encode_batch_flat(texts, num_threads=threads)
    assert [ids[off[i]:off[i + 1]].tolist() for i in range(len(texts))] == [tok.encode(t) for t in texts]
    assert tok.encode_batch_flat(["a\ud800b"])[0].tolist() == tok.encode("a\ufffdb")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only; the lock state it copies is what is tested")
def test_clear_cache_in_a_child_forked_during_an_encode_returns():
    """A process forked while another of its threads is inside an encode (the GIL released, the
    Encoder's slot lock held) copies that lock held, and the thread holding it does not exist in
    the child: it is never unlocked there. Encoding in the child skips such a slot (trylock);
    ``clear_cache()`` waited for it, forever. Now it leaves a slot (or the shared cache) held from
    the parent process as it is and returns. The child encodes before and after, ids equal to the
    parent's, and exits 0 within its 15 s alarm (main: the child hangs, SIGALRM, rc -14)."""
    import time

    tok, _, _ = fixture_pair("bl_llama3")
    nat = tok._native
    big = " ".join("q" + _letters(i) for i in range(1_500_000))  # ~0.2-0.5 s in the encoder
    want = nat.encode_text("hello world, again")
    started, stop = threading.Event(), threading.Event()

    def work():
        started.set()
        for _ in range(40):  # until the parent has forked inside an encode (or ~10-20 s)
            if stop.is_set():
                return
            nat.encode_text(big)
            nat.encode_batch([big[:4_000_000], big[4_000_000:8_000_000]], num_threads=2)

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    rc = 2
    try:
        # A fork can miss the encode (slot 0 free in the child: exit 2) when the machine's speed
        # moves the encode's window; fork again until one lands inside it (a fixed sleep failed
        # 3-6 runs of 8 on a loaded machine once the encoder got faster).
        for _ in range(60):
            if not t.is_alive():
                break
            time.sleep(0.07)
            pid = os.fork()
            if pid == 0:  # the child: only this thread
                import signal

                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(15)
                ok = nat.encode_text("hello world, again") == want
                if any(d["slot"] == 0 for d in nat.cache_info()):  # slot 0 was free: the fork missed the encode
                    os._exit(2)
                nat.clear_cache()
                ok = ok and nat.encode_text("hello world, again") == want
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            rc = os.waitstatus_to_exitcode(status)
            if rc != 2:
                break
    finally:
        stop.set()
        t.join()
    assert rc == 0, rc


@pytest.mark.parametrize("parse_special", [True, False])
@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(["</div>", "</tool_call>", "<tool_call>", "<|im_end|>", "</tool_cal", "<t",
                                       "<|", "a", " b", "\n", "\u00e9t\u00e9 ", "<|im_start|>x"]), max_size=12))
def test_added_filter_says_no_only_where_encode_cuts_nothing(parse_special, parts):
    """special_prefix.added_filter (the fast paths' test before a text is encoded whole): on the
    real Qwen2.5 tokenizer.json, where it says a text holds no added token, ``encode``'s added-token
    cut (``_cut_added``) finds none with that ``parse_special``; and ``encode_batch_flat`` gives
    HF ``tokenizers``' ids (parse_special=True, as its ``encode``) or the pure-Python path's
    (False) for texts with closing tags beside Qwen2.5's non-special ``<tool_call>`` tokens."""
    tok, pure = _qwen25()
    text = "".join(parts)
    if not special_prefix.added_filter(tok, parse_special)(text):
        assert not any(isinstance(f, int) for f in tok._cut_added(text, parse_special)), text
    texts = [text, "see </div> and </p>", "x</tool_call>y", text + "</b>"]
    ids, offsets = tok.encode_batch_flat(texts, parse_special=parse_special, num_threads=2)
    rows = [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))]
    if parse_special:
        hf = _hf_qwen25()
        assert rows == [hf.encode(t, add_special_tokens=False).ids for t in texts]
    else:
        assert rows == [pure.encode(t, parse_special=False) for t in texts]


@functools.cache
def _qwen25() -> tuple[Tokenizer, Tokenizer]:
    """The real Qwen2.5 tokenizer.json, native and pure Python, loaded once."""
    tok = _load_real("qwen2.5")
    if tok is None:
        pytest.skip(f"{REAL}/hf/qwen2.5/tokenizer.json not found (set RMLPREP_REAL_TOKENIZERS)")
    return tok, _pure(tok)


@functools.cache
def _hf_qwen25():
    """HF tokenizers' Tokenizer of the real Qwen2.5 folder (the reference), loaded once."""
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(REAL / "hf" / "qwen2.5" / "tokenizer.json"))
