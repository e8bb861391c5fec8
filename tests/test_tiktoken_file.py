"""tiktoken rank files (rmlprep.tiktoken_file): worked examples, malformed files, real files."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from rmlprep import LoaderError, UnsupportedTokenizer
from rmlprep.spec import TokenType
from rmlprep.tiktoken_file import KNOWN_ENCODINGS, looks_like_tiktoken, spec_from_tiktoken
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import HARD_STRINGS, TIKTOKEN_FILES, corpus_texts, real_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "parity"
REAL = real_dir()
WORDS = r"\S+|\s+"


def _write(tmp_path, tokens: list[bytes], ranks=None, name="ranks.tiktoken") -> Path:
    ranks = list(range(len(tokens))) if ranks is None else ranks
    p = tmp_path / name
    p.write_bytes(b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in zip(tokens, ranks)))
    return p


def test_lowest_rank_merges_first(tmp_path):
    """Ranks a=0 b=1 c=2 bc=3 ab=4: in "abc" the pair b+c (rank 3) beats a+b (rank 4), so the
    result is [a, bc] = [0, 3]; "ab" is a token and is taken whole: [4]; "ba" cannot merge: [1, 0]."""
    p = _write(tmp_path, [b"a", b"b", b"c", b"bc", b"ab"])
    tok = Tokenizer.create(spec_from_tiktoken(p, pattern=WORDS))
    assert tok.encode("abc") == [0, 3]
    assert tok.encode("ab") == [4]
    assert tok.encode("ba") == [1, 0]
    assert tok.decode([0, 3]) == "abc"


def test_whole_piece_wins_over_merges(tmp_path):
    """"abc" is a token (rank 5) though no merge builds it from [a, bc]: tiktoken takes it whole."""
    p = _write(tmp_path, [b"a", b"b", b"c", b"bc", b"ab", b"abc"])
    spec = spec_from_tiktoken(p, pattern=WORDS)
    assert spec.ignore_merges and spec.scores[5] == -5.0
    assert Tokenizer.create(spec).encode("abc") == [5]


def test_specials_and_gaps_filled_by_specials(tmp_path):
    """p50k-style: rank 2 is missing from the file and filled by a special token."""
    p = _write(tmp_path, [b"a", b"b", b"ab"], ranks=[0, 1, 3])
    spec = spec_from_tiktoken(p, pattern=WORDS, special_tokens={"<|x|>": 2, "<|y|>": 6})
    assert spec.vocab[2] == "<|x|>" and spec.token_types[2] == TokenType.CONTROL
    assert spec.token_types[4] == spec.token_types[5] == TokenType.UNUSED  # placeholders
    tok = Tokenizer.create(spec)
    assert tok.encode("ab<|x|>b<|y|>") == [3, 2, 1, 6]
    assert tok.encode_ordinary("a <|z|>") == [0]  # no byte of " <|z|>" is a token: dropped


def test_ordinary_text_never_becomes_a_special_id(tmp_path):
    p = _write(tmp_path, [b"a", b"b"])
    tok = Tokenizer.create(spec_from_tiktoken(p, pattern=WORDS, special_tokens={"<|x|>": 2}))
    assert tok.encode_ordinary("<|x|>") == []  # tiktoken: no rank for any of its bytes


def test_byte_alphabet_spelling(tmp_path):
    p = _write(tmp_path, [b" ", b"\n", b"a", b" a"])
    spec = spec_from_tiktoken(p, pattern=r" ?\S+|\s+")
    assert spec.vocab[:4] == ("\u0120", "\u010a", "a", "\u0120a")
    assert Tokenizer.create(spec).encode(" a\n") == [3, 1]


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"YQ== 0\nYg== 1\nYQ== 2\n", "line 3: token b'a' repeats", id="duplicate-token"),
        pytest.param(b"YQ== 0\nYg== 0\n", "line 2: rank 0 repeats (first on line 1)", id="duplicate-rank"),
        pytest.param(b"YQ== 0\n!!!! 1\n", "line 2: '!!!!' is not valid base64", id="bad-base64"),
        pytest.param(b"YQ== 0\nYg==\n", "line 2: expected '<base64 token> <rank>'", id="no-rank"),
        pytest.param(b"YQ== 0\nYg== 1\nYw== 3\n", "line 3: rank 3 leaves rank 2 unused", id="gap"),
        pytest.param(b"", "has no tokens", id="empty"),
    ],
)
def test_malformed_rank_files(tmp_path, content, message):
    p = tmp_path / "bad.tiktoken"
    p.write_bytes(content)
    with pytest.raises(LoaderError) as e:
        spec_from_tiktoken(p, pattern=WORDS)
    assert message in str(e.value) and str(e.value).startswith(str(p))


def test_unknown_name_and_nothing_to_guess(tmp_path):
    p = _write(tmp_path, [b"a", b"b"])
    with pytest.raises(LoaderError, match="unknown tiktoken encoding name 'nope'"):
        spec_from_tiktoken(p, name="nope")
    with pytest.raises(LoaderError, match="cannot tell which tiktoken encoding"):
        spec_from_tiktoken(p)


def test_missing_file(tmp_path):
    with pytest.raises(LoaderError, match="cannot read"):
        spec_from_tiktoken(tmp_path / "nope.tiktoken", name="gpt2")


def test_cl100k_pattern_is_refused_by_name(tmp_path):
    """cl100k_base's pattern uses possessive quantifiers, which pretokenize does not translate."""
    p = _write(tmp_path, [b"a", b"b"])
    with pytest.raises(UnsupportedTokenizer, match="cl100k_base.*possessive"):
        spec_from_tiktoken(p, name="cl100k_base")


def test_looks_like_tiktoken(tmp_path):
    assert looks_like_tiktoken(_write(tmp_path, [b"a", b"b"]))
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert not looks_like_tiktoken(tmp_path / "x.json")
    (tmp_path / "x.model").write_bytes(b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02")
    assert not looks_like_tiktoken(tmp_path / "x.model")


def test_llama3_specials_follow_meta():
    sp = KNOWN_ENCODINGS["llama3"]["special_tokens"]
    assert len(sp) == 256 and sp["<|begin_of_text|>"] == 128000 and sp["<|eot_id|>"] == 128009
    assert sp["<|start_header_id|>"] == 128006 and sp["<|reserved_special_token_250|>"] == 128255


def test_llama3_specials_equal_hf_added_tokens():
    p = REAL / "hf" / "llama3" / "tokenizer.json"
    if not p.is_file():
        pytest.skip(f"{p} is absent")
    added = {a["content"]: a["id"] for a in json.loads(p.read_text(encoding="utf-8"))["added_tokens"]}
    assert added == dict(KNOWN_ENCODINGS["llama3"]["special_tokens"])


# -- real files --------------------------------------------------------------------------------
def _real(name: str) -> tuple[Tokenizer, Path]:
    rel, enc = TIKTOKEN_FILES[name]
    path = REAL / rel
    if not path.is_file():
        pytest.skip(f"real rank file {path} is absent: run ../shared/real-tokenizers/get.sh "
                    "(or set RMLPREP_REAL_TOKENIZERS)")
    return Tokenizer.create(spec_from_tiktoken(path, name=enc)), path


@pytest.mark.parametrize("name", list(TIKTOKEN_FILES))
def test_real_rank_file_matches_fixture(name):
    fx = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    tok, path = _real(name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fx["sha256"], f"{path} changed; rerun the generator"
    bad = [c["text"][:80] for c in fx["cases"] if tok.encode(c["text"]) != c["ids"]]
    assert not bad, f"{len(bad)} of {len(fx['cases'])} differ from {fx['reference']}: {bad[:3]}"
    for c in fx["cases"]:
        if "decode" in c:
            assert tok.decode(c["ids"]) == c["decode"]


def test_name_guessed_from_file():
    _tok, path = _real("tiktoken-llama3")
    spec = spec_from_tiktoken(path)  # llama3.tiktoken -> "llama3"
    assert (spec.name, spec.bos_id, spec.eos_id, spec.eot_ids, len(spec.vocab)) == (
        "llama3", 128000, 128001, (128009,), 128256)


@pytest.mark.parity
@pytest.mark.parametrize("name", list(TIKTOKEN_FILES))
def test_parity_with_tiktoken_on_real_documents(name):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    tok, path = _real(name)
    known = KNOWN_ENCODINGS[TIKTOKEN_FILES[name][1]]
    ref = tiktoken.Encoding(name=f"t-{name}", pat_str=known["pattern"], mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=dict(known["special_tokens"]))
    try:
        texts = HARD_STRINGS + corpus_texts(n_text=855, n_chat=1500, max_bytes=4096)
    except FileNotFoundError:
        pytest.skip("../shared/corpora is absent")
    assert len(texts) >= 2000
    n = 0
    for text in texts:
        r = ref.encode(text, allowed_special="all")
        assert tok.encode(text) == r, f"{name}: {text[:100]!r}"
        assert tok.encode_ordinary(text) == ref.encode_ordinary(text), f"{name} ordinary: {text[:100]!r}"
        assert tok.decode(r) == ref.decode(r)
        n += len(r)
    print(f"{name}: {len(texts)} documents, {n} tokens, 0 mismatches")
