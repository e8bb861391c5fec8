"""GGUF pre-tokenizer names whose patterns need more than property classes.

- ``kimi-k2``: llama.cpp runs custom code standing for Kimi-K2's tiktoken pattern, which uses
  Script=Han and class intersection ``&&``; rmlprep runs the pattern itself. Reference: tiktoken
  built from real ranks (o200k, from ``hf/gpt-4o/tokenizer.json``) with that pattern.
- ``tiny_aya`` / ``cohere2moe``: the digit split ``\\d{1,3}(?=(?:\\d{3})*\\b)`` needs Oniguruma's
  word boundary. Reference: ``tokenizers`` running the same two ``Split`` pre-tokenizers
  (``Isolated``) as Tiny Aya's tokenizer.json, as llama.cpp quotes it in ``unicode.cpp``.
- ``whitespace`` (model and pre, jina-embeddings-v2-base-zh): BPE over raw UTF-8 tokens behind
  ``tokenizers``' Whitespace pre-tokenizer and Lowercase normalizer. Reference: a ``tokenizers``
  BPE of that shape trained on corpus text, its vocabulary and merges written into the GGUF.

Both run on the pure-Python pre-splitter: the native matchers are keyed by exact known
patterns, so a spec with these patterns must not get a native encoder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmlprep.errors import UnsupportedTokenizer
from rmlprep.gguf import GGUF_PRE_SPLIT, spec_from_gguf
from rmlprep.gguf_pre import _KIMI_K2
from rmlprep.pretokenize import compile_pre_split, pattern_name
from rmlprep.tokenizer import Tokenizer
from rmlprep.unicode import unicode_to_bytes
from tests.test_gguf import CORPORA, REAL, _corpus_texts, _tiny_bpe_kvs, write_gguf

GPT4O = REAL / "hf" / "gpt-4o" / "tokenizer.json"

#: CJK, kana, Hangul and mixed-script cases where Kimi-K2's Han split matters: a Han run is its
#: own piece, kana/Hangul stay with letters, 々 and the CJK radicals are Han, 、。「」 are not.
KIMI_CASES = [
    "天気がいいですね。", "東京タワーは333メートル", "日本語とEnglishのmix", "中文English混合123456",
    "人々は々を使う", "〇一二三", "⺀⺁⼀⼁", "漢字かなカナ한국어", "「引用」と、句読点。", "ＡＢＣ全角１２３",
    "I'm 北京's guest", "IT'S 上海'S TURN", "word天word", "Straße中ß", "e\u0301漢\u0301",
    "\U00020000\U0002a6d6\U0002ebf0", "x\u3005y", " 你好 世界\n\n再见\r\n", "㐀䶿一鿿豈", "", " ",
    "日本\u200d語", "ｶﾀｶﾅ半角", "😀漢字😀", "123漢456字7890",
]

#: Digit and mark edge cases for Tiny Aya's \b: Arabic-Indic digits are \d and word characters,
#: "_" and letters are word characters (no boundary inside "12_345" / "12a345"), a combining
#: mark after the digits is a word character too, superscript ² is a word character in
#: Oniguruma but not a digit.
AYA_CASES = [
    "1234567", "12345\u0301", "\u0661\u0662\u0663\u0664", "12_345", "12a345", "1,234,567.89",
    "x1234", "1234x", "12345 678", "\u00b21234", "1234\u00b2", "1234\u00bd", "\u0966\u0967\u0968\u0969",
    "12\u200d345", "۱۲۳۴۵۶", "(1234567)", "-123456789-", "1234\n5678", "0000000", "a 1 22 333 4444",
]


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path}: real tokenizers absent; run ../shared/real-tokenizers/get.sh")
    return path


def _debian_texts() -> list[str]:
    from tools.make_parity_fixtures import corpus_dir, debian_texts

    base = corpus_dir()
    if not (base / "parts").is_dir():
        return []
    return [t for _, t in debian_texts(per_part=112, max_bytes=4096, base=base)]


def _han_chat_texts(n: int, max_bytes: int = 4096) -> list[str]:
    """The first ``n`` message contents holding Han characters of the shared LLaMA-Factory
    chat sets (en+zh), each at most ``max_bytes`` of UTF-8: Chinese text for the CJK pattern
    tests that does not depend on the optional Debian-built corpus (its zh man pages)."""
    out: list[str] = []
    for name in ("llamafactory-alpaca", "llamafactory-dpo-system", "llamafactory-toolcall"):
        path = CORPORA / "chat" / f"{name}.messages.jsonl"
        if not path.exists():
            continue
        with open(path, encoding="utf-8", newline="\n") as f:
            for line in f:
                for m in json.loads(line)["messages"]:
                    c = m.get("content")
                    if (isinstance(c, str) and any("\u4e00" <= ch <= "\u9fff" for ch in c)
                            and len(c.encode("utf-8", "surrogatepass")) <= max_bytes):
                        out.append(c)
                        if len(out) >= n:
                            return out
    return out


_O200K: dict = {}


def _o200k() -> tuple[list[str], list[str], dict[bytes, int]]:
    """o200k_base from GPT-4o's tokenizer.json: tokens (GPT-2 byte alphabet) for ids 0..199997,
    the merges, and the tiktoken ranks (the tokens' bytes -> id)."""
    if not _O200K:
        doc = json.loads(_need(GPT4O).read_text(encoding="utf-8"))
        vocab = doc["model"]["vocab"]
        by_id = {i: t for t, i in vocab.items() if i < 199998}
        tokens = [by_id[i] for i in range(199998)]
        merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
        u2b = unicode_to_bytes()
        ranks = {bytes(u2b[c] for c in t): i for i, t in enumerate(tokens)}
        _O200K.update(tokens=tokens, merges=merges, ranks=ranks)
    return _O200K["tokens"], _O200K["merges"], _O200K["ranks"]


def _o200k_gguf(path: Path, pre: str) -> Tokenizer:
    tokens, merges, _ = _o200k()
    kvs = [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", pre),
           ("tokenizer.ggml.tokens", "arr:str", tokens),
           ("tokenizer.ggml.token_type", "arr:i32", [1] * len(tokens)),
           ("tokenizer.ggml.merges", "arr:str", merges)]
    spec, _ = spec_from_gguf(write_gguf(path, kvs))
    return Tokenizer.create(spec)


# ----------------------------------------------------------------------------------------------
# kimi-k2


def test_kimi_pattern_splits_han_apart():
    """Worked example (Kimi-K2's pattern read by hand): a Han run is one piece; the letter
    classes exclude Han, so kana and Latin letters around it are pieces of their own, and the
    contraction stays with the Latin word: "I'm北京's" -> "I'm", "北京", "'s"."""
    split = compile_pre_split(GGUF_PRE_SPLIT["kimi-k2"].patterns)
    assert split("天気がいい") == ["天気", "がいい"]
    assert split("I'm北京's") == ["I'm", "北京", "'s"]
    assert split("word天word") == ["word", "天", "word"]
    assert split("人々は") == ["人々", "は"]  # 々 (U+3005) is Script=Han
    assert split("中文123456") == ["中文", "123", "456"]


@pytest.mark.parity
@pytest.mark.slow
def test_kimi_k2_gguf_matches_tiktoken(tmp_path):
    """A kimi-k2 GGUF with o200k's vocabulary and merges gives tiktoken's ids (Encoding with
    Kimi-K2's pat_str over the same ranks) on the targeted CJK cases, >= 2,000 corpus texts
    (multilingual documents and chat messages), 120 Chinese chat messages (so that >= 50 texts
    hold Han without the Debian-built corpus: 23 did, and the test failed on a machine without
    it) and the Debian-built corpus when present.
    tiktoken's regex tables are Unicode 16.0, as ours are (tests/test_unicode.py); the texts
    hold no code point unassigned in 16.0 either (checked)."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken not installed")
    tok = _o200k_gguf(tmp_path / "kimi.gguf", "kimi-k2")
    assert tok.spec.pre_split == (_KIMI_K2,) or _KIMI_K2 in tok.spec.pre_split
    enc = tiktoken.Encoding("kimi-k2-o200k", pat_str=_KIMI_K2, mergeable_ranks=_o200k()[2], special_tokens={})
    corpus = _corpus_texts(2400, max_bytes=4096)
    assert len(corpus) >= 2000
    texts = KIMI_CASES + corpus + _han_chat_texts(120) + _debian_texts()
    from rmlprep._unicode_tables import CATEGORIES

    unassigned = {cp for lo, hi in CATEGORIES["Cn"] for cp in range(lo, hi + 1)}
    assert not any(ord(c) in unassigned for t in texts for c in t)
    n_han = sum(1 for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t))
    assert n_han >= 50
    for text in texts:
        assert tok.encode(text, add_special_tokens=False) == enc.encode_ordinary(text), text[:200]


def test_kimi_k2_gguf_loads_and_stays_off_the_native_path(tmp_path):
    """A GGUF named kimi-k2 loads, round-trips mixed text, runs Kimi-K2's pattern, and gets no
    native encoder (no hand-written matcher has that pattern)."""
    from rmlprep.native import make_native

    spec, _ = spec_from_gguf(write_gguf(tmp_path / "k.gguf", _tiny_bpe_kvs("kimi-k2")))
    assert spec.pre_split == (_KIMI_K2,)
    assert pattern_name(_KIMI_K2) is None
    tok = Tokenizer.create(spec)
    assert make_native(tok) is None
    text = "hello 天気 world"
    assert tok.decode(tok.encode(text)) == text
    _native_control(tmp_path)


def _native_control(tmp_path: Path) -> None:
    """The same vocabulary with pre "gpt-2" does get a native encoder when the extension is
    built, so the None above is the pattern's doing."""
    from rmlprep.native import make_native, native_available

    if native_available():
        spec, _ = spec_from_gguf(write_gguf(tmp_path / "control.gguf", _tiny_bpe_kvs("gpt-2")))
        assert make_native(Tokenizer.create(spec)) is not None


def _kimi_tiny(path: Path) -> tuple[Path, dict[bytes, int]]:
    """The tiny byte-level GGUF of tests/test_gguf.py named kimi-k2, plus one merge "o" + 0xE5
    (the first byte of 天) that only a split keeping "o天" in one piece can apply; and the same
    vocabulary as tiktoken ranks (byte tokens by their byte, merged tokens by their id)."""
    kvs = {k: [t, v] for k, t, v in _tiny_bpe_kvs("kimi-k2")}
    kvs["tokenizer.ggml.tokens"][1] = [*kvs["tokenizer.ggml.tokens"][1], "o\u00e5"]
    kvs["tokenizer.ggml.token_type"][1] = [*kvs["tokenizer.ggml.token_type"][1], 1]
    kvs["tokenizer.ggml.merges"][1] = [*kvs["tokenizer.ggml.merges"][1], "o \u00e5"]
    tokens = kvs["tokenizer.ggml.tokens"][1]
    u2b = unicode_to_bytes()
    ranks = {bytes(u2b[c] for c in t): i for i, t in enumerate(tokens) if not t.startswith("<0x")}
    return write_gguf(path, [(k, t, v) for k, (t, v) in kvs.items()]), ranks


def test_kimi_k2_gguf_through_tokenize_text_and_the_pipeline(tmp_path, capsys):
    """tokenize_text and ``rmlprep run`` load a kimi-k2 GGUF by the same rules: their ids equal
    tiktoken's (Kimi-K2's pat_str over the same ranks) document for document. "xo天" shows the
    Han split: tiktoken keeps "o" and "天" in separate pieces, so the "o" + 0xE5 merge never
    applies (a pattern without the split, like o200k's, would apply it)."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken not installed")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rmlprep.arrow import tokenize_text
    from rmlprep.cli import main
    from rmlprep.load import load_tokenizer
    from rmlprep.packing import unpack

    path, ranks = _kimi_tiny(tmp_path / "kimi.gguf")
    enc = tiktoken.Encoding("kimi-tiny", pat_str=_KIMI_K2, mergeable_ranks=ranks, special_tokens={})
    texts = ["hello world", "xo天気", "I'm 北京's hello", "word天word 1234567", "々o天 hello\n\n"]
    expected = [enc.encode_ordinary(t) for t in texts]
    assert expected[1][:2] == [ord("x"), ord("o")]  # no "o" + 0xE5 merge across the Han split
    tok = load_tokenizer(path)
    fn = tokenize_text(tok, add_special_tokens=False)
    out = fn(pa.RecordBatch.from_pydict({"text": texts}))
    assert out.column("input_ids").to_pylist() == expected
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (tmp_path / "c.toml").write_text(
        f'[input]\npaths = ["{tmp_path / "d.jsonl"}"]\n[tokenizer]\npath = "{path}"\n'
        f'add_special_tokens = false\n[pack]\nseq_len = 16\neos = false\n'
        f'[output]\ndir = "{tmp_path / "out"}"\n[run]\nworkers = 1\nprogress = "none"\nhistogram = false\n')
    assert main(["run", str(tmp_path / "c.toml")]) == 0, capsys.readouterr().err
    shards = sorted((tmp_path / "out").glob("train-*.parquet"))
    docs = unpack([pq.read_table(s) for s in shards])
    assert [list(map(int, d)) for d in docs] == expected


# ----------------------------------------------------------------------------------------------
# tiny_aya / cohere2moe


def _aya_reference():
    tk = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    from rmlprep._gguf_pre_table import PRE_TYPES

    originals = PRE_TYPES["TINY_AYA"]["originals"]  # the tokenizer.json regexes llama.cpp quotes
    return tk.pre_tokenizers.Sequence(
        [tk.pre_tokenizers.Split(tk.Regex(p), behavior="isolated", invert=False) for p in originals]
    )


def test_aya_digit_split_examples():
    """Worked examples of \\d{1,3}(?=(?:\\d{3})*\\b) with Oniguruma's word characters: groups of
    three from the right when the run ends at a word boundary; no split when a word character
    (letter, "_", combining mark) follows the digits; Arabic-Indic digits are \\d."""
    split = compile_pre_split([GGUF_PRE_SPLIT["tiny_aya"].patterns[0]])
    assert split("1234567") == ["1", "234", "567"]
    assert split("12_345") == ["12_", "345"]
    assert split("12a345") == ["12a", "345"]
    assert split("12345\u0301") == ["12345\u0301"]
    assert split("\u0661\u0662\u0663\u0664") == ["\u0661", "\u0662\u0663\u0664"]


@pytest.mark.parity
@pytest.mark.parametrize("pre", ["tiny_aya", "cohere2moe"])
def test_aya_pre_split_matches_tokenizers(pre):
    """The pieces of the tiny_aya / cohere2moe pattern list equal ``tokenizers``' (Oniguruma)
    pre_tokenize_str on the edge cases, >= 2,000 corpus texts and the Debian-built corpus."""
    ref = _aya_reference()
    split = compile_pre_split(GGUF_PRE_SPLIT[pre].patterns)
    texts = AYA_CASES + _corpus_texts(2400, max_bytes=4096) + _debian_texts()
    assert len(texts) >= 2000
    for text in texts:
        assert split(text) == [p for p, _ in ref.pre_tokenize_str(text)], text[:200]


@pytest.mark.parity
@pytest.mark.slow
def test_tiny_aya_gguf_matches_tokenizers(tmp_path):
    """A tiny_aya GGUF (o200k's vocabulary and merges) gives the ids of a ``tokenizers`` BPE over
    the same vocabulary with Tiny Aya's pre-tokenizer (the two Splits, then ByteLevel without
    its regex) on the edge cases and the corpus."""
    tk = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    tokens, merges, _ = _o200k()
    hf = tk.Tokenizer(tk.models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                                    merges=[tuple(m.split(" ", 1)) for m in merges]))
    seq = _aya_reference()
    hf.pre_tokenizer = tk.pre_tokenizers.Sequence(
        [seq, tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = _o200k_gguf(tmp_path / "aya.gguf", "tiny_aya")
    for text in AYA_CASES + _corpus_texts(1200, max_bytes=4096):
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text[:200]


@pytest.mark.parametrize("pre", ["tiny_aya", "cohere2moe"])
def test_aya_gguf_loads_and_stays_off_the_native_path(tmp_path, pre):
    from rmlprep.native import make_native

    spec, _ = spec_from_gguf(write_gguf(tmp_path / "a.gguf", _tiny_bpe_kvs(pre)))
    assert spec.pre_split == GGUF_PRE_SPLIT[pre].patterns
    tok = Tokenizer.create(spec)
    assert make_native(tok) is None
    assert tok.decode(tok.encode("hello 1234567 world")) == "hello 1234567 world"
    _native_control(tmp_path)


# ----------------------------------------------------------------------------------------------
# whitespace (jina-embeddings-v2-base-zh)


def _whitespace_kvs(tokens, merges, *, lowercase: bool | None, model: str = "whitespace", pre: str = "whitespace"):
    kvs = [("tokenizer.ggml.model", "str", model), ("tokenizer.ggml.pre", "str", pre),
           ("tokenizer.ggml.tokens", "arr:str", tokens), ("tokenizer.ggml.token_type", "arr:i32", [1] * len(tokens)),
           ("tokenizer.ggml.merges", "arr:str", merges)]
    if lowercase is not None:
        kvs.append(("tokenizer.ggml.normalizer.lowercase", "bool", lowercase))
    return kvs


def test_whitespace_pre_split_example():
    """Worked example of tokenizers' Whitespace (\\w+|[^\\w\\s]+, the rest dropped): words and
    runs of other non-space characters are pieces, whitespace of any kind is gone."""
    pre = GGUF_PRE_SPLIT["whitespace"]
    split = compile_pre_split(pre.patterns, pre.behaviors)
    assert split("Hello, world!\t天気\u3000x_1 ...") == ["Hello", ",", "world", "!", "天気", "x_1", "..."]


def test_whitespace_model_and_pre_come_together(tmp_path):
    """llama.cpp pins pre "whitespace" to model "whitespace"; a file with only one of them is
    refused by name rather than read as a mix no converter writes."""
    tokens, merges = ["a", "b", "ab"], ["a b"]
    for model, pre in (("gpt2", "whitespace"), ("whitespace", "gpt-2")):
        path = write_gguf(tmp_path / f"{model}-{pre}.gguf", _whitespace_kvs(tokens, merges, lowercase=None,
                                                                         model=model, pre=pre))
        with pytest.raises(UnsupportedTokenizer, match=r"'whitespace' model and pre-tokenizer only come together"):
            spec_from_gguf(path)


@pytest.mark.parity
@pytest.mark.parametrize("lowercase", [True, False])
def test_whitespace_gguf_matches_tokenizers(tmp_path, lowercase):
    """A whitespace GGUF gives the ids of the ``tokenizers`` BPE its vocabulary and merges come
    from (Whitespace pre-tokenizer, Lowercase when the GGUF flag is set, unk_token "<unk>" written
    as tokenizer.ggml.unknown_token_id, as the converter does), on >= 2,000 corpus texts. The BPE
    is trained on 600 of them, so the others hold characters outside the vocabulary (checked):
    each becomes "<unk>" and no merge crosses it, as in ``tokenizers``."""
    tk = pytest.importorskip("tokenizers", reason="tokenizers not installed")
    texts = _corpus_texts(2400, max_bytes=2048)
    assert len(texts) >= 2000
    hf = tk.Tokenizer(tk.models.BPE(unk_token="<unk>"))
    if lowercase:
        hf.normalizer = tk.normalizers.Lowercase()
    hf.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    trainer = tk.trainers.BpeTrainer(vocab_size=6000, show_progress=False, special_tokens=["<unk>"])
    hf.train_from_iterator(texts[:300] + texts[-300:], trainer)
    model = json.loads(hf.to_str())["model"]
    by_id = {i: t for t, i in model["vocab"].items()}
    tokens = [by_id[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    unk = tokens.index("<unk>")
    kvs = _whitespace_kvs(tokens, merges, lowercase=lowercase) + [("tokenizer.ggml.unknown_token_id", "u32", unk)]
    spec, _ = spec_from_gguf(write_gguf(tmp_path / "ws.gguf", kvs))
    assert spec.unk_id == unk
    tok = Tokenizer.create(spec)
    cases = ["Hello, World!", "İstanbul ΣΊΣΥΦΟΣ", "天気\u3000は いい", "x\u00a0y\u2028z", "tab\tand\nnewline", ""]
    n_unk = 0
    for text in cases + texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, add_special_tokens=False) == expected, text[:200]
        n_unk += expected.count(unk)
    assert n_unk > 0
