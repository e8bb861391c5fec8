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


_BYTES = [bytes([b]) for b in range(256)]


def _with_bytes(tmp_path, tokens: list[bytes], ranks=None) -> Path:
    """A rank file of the 256 single bytes (rank = byte value) followed by ``tokens`` (ranks
    256, 257, ... unless given)."""
    ranks = list(range(256, 256 + len(tokens))) if ranks is None else ranks
    return _write(tmp_path, [*_BYTES, *tokens], [*range(256), *ranks])


def test_lowest_rank_merges_first(tmp_path):
    """Ranks: the single bytes (a=97 b=98 c=99), bc=256, ab=257. In "abc" the pair b+c (rank 256)
    beats a+b (rank 257), so the result is [a, bc] = [97, 256]; "ab" is a token and is taken
    whole: [257]; "ba" cannot merge: [98, 97]."""
    p = _with_bytes(tmp_path, [b"bc", b"ab"])
    tok = Tokenizer.create(spec_from_tiktoken(p, pattern=WORDS))
    assert tok.encode("abc") == [97, 256]
    assert tok.encode("ab") == [257]
    assert tok.encode("ba") == [98, 97]
    assert tok.decode([97, 256]) == "abc"


def test_whole_piece_wins_over_merges(tmp_path):
    """"abc" is a token (rank 258) though no merge builds it from [a, bc]: tiktoken takes it whole."""
    p = _with_bytes(tmp_path, [b"bc", b"ab", b"abc"])
    spec = spec_from_tiktoken(p, pattern=WORDS)
    assert spec.ignore_merges and spec.scores[258] == -258.0
    assert Tokenizer.create(spec).encode("abc") == [258]


def test_specials_and_gaps_filled_by_specials(tmp_path):
    """p50k-style: rank 256 is missing from the file and filled by a special token; ids 258 and
    259, between the last rank (257) and the special 260, become placeholders."""
    p = _with_bytes(tmp_path, [b"ab"], ranks=[257])
    spec = spec_from_tiktoken(p, pattern=WORDS, special_tokens={"<|x|>": 256, "<|y|>": 260})
    assert spec.vocab[256] == "<|x|>" and spec.token_types[256] == TokenType.CONTROL
    assert spec.token_types[258] == spec.token_types[259] == TokenType.UNUSED  # placeholders
    tok = Tokenizer.create(spec)
    assert tok.encode("ab<|x|>b<|y|>") == [257, 256, 98, 260]
    assert tok.encode_ordinary("a <|z|>") == list(b"a <|z|>")  # single bytes, no special id


def test_ordinary_text_never_becomes_a_special_id(tmp_path):
    p = _with_bytes(tmp_path, [])
    tok = Tokenizer.create(spec_from_tiktoken(p, pattern=WORDS, special_tokens={"<|x|>": 256}))
    assert tok.encode_ordinary("<|x|>") == list(b"<|x|>")  # tiktoken: the bytes' own ranks


def test_byte_alphabet_spelling(tmp_path):
    """Tokens are spelled in the GPT-2 byte alphabet: " " is "Ġ" (U+0120), "\\n" is "Ċ" (U+010A)."""
    p = _with_bytes(tmp_path, [b" a"])
    spec = spec_from_tiktoken(p, pattern=r" ?\S+|\s+")
    assert (spec.vocab[32], spec.vocab[10], spec.vocab[97], spec.vocab[256]) == ("\u0120", "\u010a", "a", "\u0120a")
    assert Tokenizer.create(spec).encode(" a\n") == [256, 10]


_BYTE_LINES = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"YQ== 0\nYg== 1\nYQ== 2\n", "line 3: token b'a' repeats", id="duplicate-token"),
        pytest.param(b"YQ== 0\nYg== 0\n", "line 2: rank 0 repeats (first on line 1)", id="duplicate-rank"),
        pytest.param(b"YQ== 0\n!!!! 1\n", "line 2: '!!!!' is not valid base64", id="bad-base64"),
        pytest.param(b"YQ== 0\nYg==\n", "line 2: expected '<base64 token> <rank>'", id="no-rank"),
        pytest.param(_BYTE_LINES + b"YWI= 257\n", "line 257: rank 257 leaves rank 256 unused", id="gap"),
        pytest.param(_BYTE_LINES + b"YWI= 2147483647\n", "line 257: rank 2147483647 leaves rank 256 unused",
                     id="gap-to-max-id"),
        pytest.param(b"", "has no tokens", id="empty"),
        # the seeds of the trust issue: each once raised a traceback or exhausted memory
        pytest.param(b"YQ== " + b"9" * 5000 + b"\n", "line 1: rank " + "9" * 24 + "... (5000 digits) is above 2147483647",
                     id="rank-5000-digits"),
        pytest.param(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(20))
                     + b"YQ== %d\n" % 2**40, "line 21: rank 1099511627776 (13 digits) is above 2147483647",
                     id="rank-2**40"),
        pytest.param(base64.b64encode("\u201c".encode()) + b" 0\nYQ== 1\n",
                     "255 of the 256 single bytes have no rank (0x00, 0x01,", id="missing-single-bytes"),
        pytest.param(_BYTE_LINES.replace(b"AA== 0\n", b"").replace(b"/w== 255\n", b"") + b"AAA= 0\n",
                     "2 of the 256 single bytes have no rank (0x00, 0xFF)", id="two-bytes-missing"),
    ],
)
def test_malformed_rank_files(tmp_path, content, message):
    """Each file is refused with LoaderError naming the line (or the bytes) before any id range
    it claims is walked or allocated."""
    p = tmp_path / "bad.tiktoken"
    p.write_bytes(content)
    with pytest.raises(LoaderError) as e:
        spec_from_tiktoken(p, pattern=WORDS)
    assert message in str(e.value) and str(e.value).startswith(str(p))


def test_unknown_name_and_nothing_to_guess(tmp_path):
    p = _with_bytes(tmp_path, [b"ab"])
    with pytest.raises(LoaderError, match="unknown tiktoken encoding name 'nope'"):
        spec_from_tiktoken(p, name="nope")
    with pytest.raises(LoaderError, match="cannot tell which tiktoken encoding"):
        spec_from_tiktoken(p)


def test_missing_file(tmp_path):
    with pytest.raises(LoaderError, match="cannot read"):
        spec_from_tiktoken(tmp_path / "nope.tiktoken", name="gpt2")


@pytest.mark.parametrize(
    "name, specials, n_vocab",
    [
        pytest.param("cl100k_base", {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                                     "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}, 100277, id="cl100k"),
        pytest.param("o200k_base", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, 200019, id="o200k"),
    ],
)
def test_openai_encodings_by_name(tmp_path, name, specials, n_vocab):
    """cl100k_base / o200k_base: tiktoken's pattern and special tokens (openai_public.py); ids
    between the last rank and the specials are unused placeholders."""
    p = _write(tmp_path, [*_BYTES, b"ab", b"abc"])
    spec = spec_from_tiktoken(p, name=name, check_ranks=False)
    assert spec.pre_split == (KNOWN_ENCODINGS[name]["pattern"],) and spec.name == name
    assert {spec.vocab[i]: i for i in specials.values()} == specials
    assert (len(spec.vocab), spec.bos_id, spec.eos_id, spec.eot_ids) == (n_vocab, None, specials["<|endoftext|>"],
                                                                         (specials["<|endoftext|>"],))
    assert spec.token_types[258] == TokenType.UNUSED
    tok = Tokenizer.create(spec)
    # "abc" is a token (257): taken whole; "'S" is a contraction piece, "  \n" one \s++$ piece
    assert tok.encode("abc<|endoftext|>") == [257, specials["<|endoftext|>"]]
    assert tok.encode("abab") == [256, 256]
    assert tok.encode("x  \n") == [120, 32, 32, 10]


def test_cl100k_splits_whitespace_before_newline_unlike_llama3(tmp_path):
    """cl100k's \\s++$|\\s*[\\r\\n] vs Llama 3's \\s*[\\r\\n]+: "\\n\\n  " at the end is one piece
    in cl100k, two in Llama 3 (token " \\n" = 256 shows the piece boundaries)."""
    p = _write(tmp_path, [*_BYTES, b"\n\n ", b"\n\n"])
    cl = Tokenizer.create(spec_from_tiktoken(p, name="cl100k_base", check_ranks=False))
    ll = Tokenizer.create(spec_from_tiktoken(p, name="llama3", check_ranks=False))
    assert cl.encode("a\n\n ") == [97, 256]  # one piece "\n\n " (\s++$)
    assert ll.encode("a\n\n ") == [97, 257, 32]  # "\n\n" (\s*[\r\n]+), then " "


def test_explicit_pattern_reads_dollar_as_fancy_regex_does(tmp_path):
    """pattern= is tiktoken's (fancy-regex) syntax: a bare $ is the end of the text only, so
    "ab$" does not match before the final newline of "ab\\n" (it would in re/regex and onig)."""
    p = _write(tmp_path, [*_BYTES, b"ab"])
    spec = spec_from_tiktoken(p, pattern=r"ab$|a|b|\n", special_tokens={})
    assert spec.pre_split == (r"ab\z|a|b|\n",)
    tok = Tokenizer.create(spec)
    assert tok.encode("ab\n") == [97, 98, 10] and tok.encode("aab") == [97, 256]


def test_unsupported_pattern_is_named(tmp_path):
    p = _write(tmp_path, [*_BYTES])
    with pytest.raises(UnsupportedTokenizer, match=r"ranks.tiktoken: tiktoken encoding 'pattern'.*backreference"):
        spec_from_tiktoken(p, pattern=r"(a)\1", special_tokens={})


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


def test_known_name_refuses_a_rank_file_cut_short(tmp_path):
    """A rank file cut at a line boundary parses as a smaller vocabulary: GPT-2's name (given, or
    guessed from the file name gpt2.tiktoken) with 258 ranks instead of 50256 is refused, and
    with 50256 ranks that are not the published ones too. check_ranks=False takes GPT-2's
    pattern and <|endoftext|> over the same file (ids 258..50255 unused)."""
    p = _write(tmp_path, [*_BYTES, b"ab", b"abc"], name="gpt2.tiktoken")
    for kw in ({"name": "gpt2"}, {}):
        with pytest.raises(LoaderError, match=r"gpt2.tiktoken: 258 ranks, but the tiktoken encoding 'gpt2' has "
                                              r"50256: the file is cut short or another encoding"):
            spec_from_tiktoken(p, **kw)
    with pytest.raises(LoaderError, match=r"258 ranks, but the tiktoken encoding 'cl100k_base' has 100256"):
        spec_from_tiktoken(p, name="cl100k_base")
    spec = spec_from_tiktoken(p, name="gpt2", check_ranks=False)
    assert len(spec.vocab) == 50257 and spec.eos_id == 50256
    # 50256 ranks (the count is right) that are not GPT-2's: by name, and guessed by the count
    other = _write(tmp_path, [*_BYTES, *(b"%d" % i for i in range(1000, 1000 + 50000))], name="mine.tiktoken")
    for kw in ({"name": "gpt2"}, {}):
        with pytest.raises(LoaderError, match=r"mine.tiktoken: 50256 ranks as 'gpt2' has, but not its published "
                                              r"ranks \(sha256 of the ranks [0-9a-f]{16}\.\.\., published 306cd27f"):
            spec_from_tiktoken(other, **kw)


def test_published_sha256_are_tiktoken_s():
    """KNOWN_ENCODINGS' sha256 of the OpenAI rank files are tiktoken's expected_hash
    (tiktoken_ext/openai_public.py), read from its source."""
    import inspect
    import re

    pytest.importorskip("tiktoken")
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    for name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base"):
        src = inspect.getsource(getattr(openai_public, name))
        (want,) = re.findall(r'expected_hash="([0-9a-f]{64})"', src)
        assert KNOWN_ENCODINGS[name]["sha256"] == want, name
    assert KNOWN_ENCODINGS["gpt2"]["sha256"] == KNOWN_ENCODINGS["r50k_base"]["sha256"]  # the same ranks


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
    bad = [c["text"][:80] for c in fx["cases"]
           if tok.encode(c["text"], parse_special=c.get("parse_special", True)) != c["ids"]]
    assert not bad, f"{len(bad)} of {len(fx['cases'])} differ from {fx['reference']}: {bad[:3]}"
    for c in fx["cases"]:
        if "decode" in c:
            assert tok.decode(c["ids"]) == c["decode"]


@pytest.mark.parametrize("name", list(TIKTOKEN_FILES))
def test_real_rank_file_cut_or_changed_is_refused(tmp_path, name):
    """The real file cut at a line boundary (every single byte still has a rank) is refused by
    its name; the same ranks with CRLF line endings load and encode as the published file; one
    token changed (the count still right) is refused. The published sha256 is the fixture's
    (written by tools/make_parity_fixtures.py from the file get.sh checks)."""
    tok, path = _real(name)
    enc = TIKTOKEN_FILES[name][1]
    fx = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    assert KNOWN_ENCODINGS[enc]["sha256"] == fx["sha256"]
    lines = path.read_bytes().splitlines(keepends=True)
    cut = tmp_path / path.name
    cut.write_bytes(b"".join(lines[:40000]))
    with pytest.raises(LoaderError, match=rf"40000 ranks, but the tiktoken encoding '{enc}' has {len(lines)}: the "
                                          "file is cut short"):
        spec_from_tiktoken(cut, name=enc)
    with pytest.raises(LoaderError, match="cut short"):
        spec_from_tiktoken(cut)  # the name guessed from the file name
    crlf = tmp_path / "crlf.tiktoken"
    crlf.write_bytes(b"".join(ln.rstrip(b"\n") + b"\r\n" for ln in lines))
    text = "Hello, world! Grüße 123 \u4f60\u597d"
    assert Tokenizer.create(spec_from_tiktoken(crlf, name=enc)).encode(text) == tok.encode(text)
    changed = tmp_path / "changed.tiktoken"
    lines[30000] = base64.b64encode(b"\xff\xfe\xfd\xfc") + b" 30000\n"
    changed.write_bytes(b"".join(lines))
    with pytest.raises(LoaderError, match=rf"changed.tiktoken: {len(lines)} ranks as '{enc}' has, but not its "
                                          "published ranks"):
        spec_from_tiktoken(changed, name=enc)


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
        assert tok.encode_to_numpy(text).tolist() == ref.encode_to_numpy(text, allowed_special="all").tolist()
        assert tok.decode(r) == ref.decode(r)
        n += len(r)
    print(f"{name}: {len(texts)} documents, {n} tokens, 0 mismatches")


# -- cl100k_base / o200k_base patterns vs tiktoken itself ----------------------------------------
def _trained_ranks(texts: list[str], vocab_size: int = 1200) -> dict[bytes, int]:
    """Ranks for a synthetic rank file: the 256 bytes (rank = byte), then the merges of a tiny
    byte-level BPE trained with Hugging Face ``tokenizers`` on ``texts``, in merge order."""
    tokenizers = pytest.importorskip("tokenizers")
    from rmlprep.unicode import unicode_to_bytes

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    u2b = unicode_to_bytes()
    ranks = {bytes([b]): b for b in range(256)}
    for m in merges:
        a, b = m.split(" ") if isinstance(m, str) else m
        piece = bytes(u2b[c] for c in a + b)
        if piece not in ranks:
            ranks[piece] = len(ranks)
    return ranks


def _sample_docs() -> list[str]:
    from tools.make_parity_fixtures import debian_texts

    try:
        docs = corpus_texts(n_text=150, n_chat=150, max_bytes=2048)
    except FileNotFoundError:
        docs = []
    docs += [t for _, t in debian_texts(per_part=20, max_bytes=2048)]
    if len(docs) < 200:
        pytest.skip("../shared/corpora and the Debian-built corpus are absent")
    return docs


@pytest.mark.parity
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_parity_with_tiktoken_openai_pattern_synthetic_ranks(tmp_path, name):
    """rmlprep vs tiktoken.Encoding with tiktoken's own pattern and a rank file with ~900
    multi-byte merges trained on the same kind of text, on a few hundred real documents (each
    also with trailing whitespace and a final newline, where \\s++$ and \\s*[\\r\\n] decide)."""
    tiktoken = pytest.importorskip("tiktoken")
    docs = _sample_docs()
    ranks = _trained_ranks(docs[::3])
    path = tmp_path / f"{name}-synthetic.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in ranks.items()))
    known = KNOWN_ENCODINGS[name]
    ref = tiktoken.Encoding(name=f"t-{name}", pat_str=known["pattern"], mergeable_ranks=ranks,
                            special_tokens=dict(known["special_tokens"]))
    tok = Tokenizer.create(spec_from_tiktoken(path, name=name, check_ranks=False))
    n = merged = 0
    for doc in docs + HARD_STRINGS:
        for text in (doc, doc + "\n", doc + "  \n\n  ", doc + " "):
            r = ref.encode(text, allowed_special="all")
            assert tok.encode(text) == r, f"{name}: {text[:100]!r}"
            n += len(r)
            merged += sum(1 for i in r if 256 <= i < len(ranks))
    assert merged > n // 3  # the merges are really exercised
    print(f"{name} synthetic ({len(ranks)} ranks): {4 * len(docs + HARD_STRINGS)} texts, {n} tokens, 0 mismatches")


@pytest.mark.parity
def test_tiktoken_dollar_is_end_of_text():
    """fancy-regex (tiktoken) reads a bare $ as the end of the text: with "ab" a token, pattern
    "ab$|a|b|\\n" splits "ab\\n" into a, b, \\n in tiktoken (ids 97, 98, 10), as
    rmlprep.pretokenize.text_anchors makes it; Python's regex would give "ab", "\\n"."""
    tiktoken = pytest.importorskip("tiktoken")
    regex = pytest.importorskip("regex")
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    ref = tiktoken.Encoding(name="dollar", pat_str=r"ab$|a|b|\n", mergeable_ranks=ranks, special_tokens={})
    assert ref.encode("ab\n") == [97, 98, 10] and ref.encode("aab") == [97, 256]
    assert regex.findall(r"ab$|a|b|\n", "ab\n") == ["ab", "\n"]  # the regex module differs
    assert regex.findall(r"a*+ab|a|b", "aab") == ["a", "a", "b"]
    ranks |= {b"aa": 257, b"aab": 258}
    pos = tiktoken.Encoding(name="possessive", pat_str=r"a*+ab|a|b", mergeable_ranks=ranks, special_tokens={})
    assert pos.encode("aab") == [97, 97, 98]  # a*+ never gives an a back: three pieces


def test_decoding_an_unused_id_is_refused_as_tiktoken_refuses_it(tmp_path):
    """An id between the ranks and the specials that neither uses: tiktoken's ``decode`` and
    ``decode_bytes`` raise ``KeyError`` ("Invalid token for decoding"), the same as for an id
    out of range; rmlprep's gave the placeholder's text. Now each raises TokenIdError naming
    the id; the ids around it decode as tiktoken decodes them."""
    tiktoken = pytest.importorskip("tiktoken")
    from rmlprep.errors import TokenIdError

    p = _with_bytes(tmp_path, [b"ab"], ranks=[256])
    spec = spec_from_tiktoken(p, pattern=WORDS, special_tokens={"<|y|>": 259})
    tok = Tokenizer.create(spec)
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    enc = tiktoken.Encoding("gap", pat_str=WORDS, mergeable_ranks=ranks, special_tokens={"<|y|>": 259})
    for gap in (257, 258):
        for ref in (enc.decode, enc.decode_bytes):
            with pytest.raises(KeyError, match=f"Invalid token for decoding: {gap}"):
                ref([97, gap])
        for ours in (tok.decode, tok.decode_bytes):
            with pytest.raises(TokenIdError, match=f"^token id {gap} has no token"):
                ours([97, gap])
        with pytest.raises(TokenIdError, match=f"^token id {gap} has no token"):
            tok.stream_decoder().push(gap)
    assert tok.decode_bytes([256, 259, 98]) == enc.decode_bytes([256, 259, 98]) == b"ab<|y|>b"
