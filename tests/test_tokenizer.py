"""Core tokenizer: fixtures from the reference libraries, worked examples, rejections, hostile input."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmlprep import SpecError, TokenIdError, TokenizeError, TokenizerSpec
from rmlprep.spec import BYTE_LEVEL, SENTENCEPIECE, AddedTokenFlags, TokenType
from rmlprep.segment import replace_lone_surrogates
from rmlprep.tokenizer import Tokenizer
from rmlprep.unicode import bytes_to_unicode

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "fixtures" / "tokenizers").glob("*.json"))


def _load(path: Path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    return Tokenizer.create(TokenizerSpec.from_dict(doc["spec"])), doc


_TOKS: dict[str, tuple] = {}


def fixture_tok(name: str):
    if name not in _TOKS:
        _TOKS[name] = _load(ROOT / "fixtures" / "tokenizers" / f"{name}.json")
    return _TOKS[name]


# -- worked example (issue 2) --------------------------------------------------------------


def seed_tokenizer() -> Tokenizer:
    """256 byte symbols (id = byte), "ab" = 256, "abc" = 257, control "<|end|>" = 258.

    Merges: (a, b) rank 0, (ab, c) rank 1.
    """
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["ab", "abc", "<|end|>"]
    types = [TokenType.NORMAL] * 258 + [TokenType.CONTROL]
    spec = TokenizerSpec(
        kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=tuple(int(t) for t in types),
        merges=(("a", "b"), ("ab", "c")), eos_id=258,
    )
    return Tokenizer.create(spec)


def test_worked_example_merges():
    """"abcab": bytes a b c a b; rank 0 merges both (a, b) -> ab c ab; rank 1 merges
    (ab, c) -> abc ab = [257, 256]."""
    tok = seed_tokenizer()
    assert tok.encode("abcab") == [257, 256]


def test_worked_example_special_cut_first():
    """"ab<|end|>c": the control token is cut out first -> "ab" [256], 258, "c" [99]."""
    tok = seed_tokenizer()
    assert tok.encode("ab<|end|>c") == [256, 258, 99]
    # parse_special=False: "<|end|>" is plain text, spelled byte by byte: < | e n d | >
    assert tok.encode("ab<|end|>c", parse_special=False) == [256, 60, 124, 101, 110, 100, 124, 62, 99]


def test_longest_special_wins():
    """Specials "<a>" and "<a>b" share a prefix: in "<a>bc" the longer one wins -> [id("<a>b"), 99]."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["<a>", "<a>b"]
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=(1,) * 256 + (3, 3))
    tok = Tokenizer.create(spec)
    assert tok.encode("<a>bc") == [257, 99]
    assert tok.encode("<a>c") == [256, 99]


def test_leftmost_on_equal_rank():
    """"aaa" with only merge (a, a): positions 0 and 1 both have rank 0; leftmost first -> [aa, a]."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["aa"]
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=(1,) * 257, merges=(("a", "a"),))
    tok = Tokenizer.create(spec)
    assert tok.encode("aaa") == [256, 97]
    assert tok.encode("aaaa") == [256, 256]


def test_missing_byte_is_dropped_or_unk():
    """A byte-level vocab without byte 0x01 (SmolLM2 has no control bytes): dropped without an
    unk token, unk_id with one. "a\\x01b" -> [97, 98] / [97, unk, 98]."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256) if b != 1]
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=(1,) * 255)
    tok = Tokenizer.create(spec)
    a, b = tok.token_to_id("a"), tok.token_to_id("b")
    assert tok.encode("a\x01b") == [a, b]
    spec2 = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab) + ("<unk>",), token_types=(1,) * 255 + (2,), unk_id=255)
    assert Tokenizer.create(spec2).encode("a\x01b") == [a, 255, b]


# -- fixtures from the reference libraries --------------------------------------------------


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in FIXTURES])
def test_fixture_ids(path):
    tok, doc = fixture_tok(path.stem)
    assert doc["cases"], "fixture has no cases"
    for case in doc["cases"]:
        got = tok.encode(case["text"], add_special_tokens=case["add_special_tokens"],
                         parse_special=case["parse_special"])
        assert got == case["ids"], (doc["reference"], case["text"], case["add_special_tokens"])


def test_fixture_set_complete():
    assert {p.stem for p in FIXTURES} == {
        "bl_llama3", "bl_qwen2", "bl_gpt2_digits", "sp_hf_bytefallback", "spm_bpe"
    }


@pytest.mark.parity
def test_tokenizer_fixture_generator_drift(tmp_path):
    """Regenerating the fixtures with the reference libraries gives the committed files."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("sentencepiece")
    if not (ROOT.parent / "shared" / "corpora").is_dir():
        pytest.skip("../shared/corpora not present")
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tokenizer_fixtures.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True)
    for p in FIXTURES:
        assert (tmp_path / p.name).read_bytes() == p.read_bytes(), p.name


# -- Create rejections ----------------------------------------------------------------------


def _bl(**kw):
    b2u = bytes_to_unicode()
    base = dict(kind=BYTE_LEVEL, vocab=tuple(b2u[b] for b in range(256)), token_types=(1,) * 256)
    base.update(kw)
    return TokenizerSpec(**base)


@pytest.mark.parametrize(
    "spec, message",
    [
        pytest.param(TokenizerSpec(kind=BYTE_LEVEL, vocab=(), token_types=()), "the vocab is empty", id="empty"),
        pytest.param(_bl(token_types=(1,) * 255), "token_types has 255 entries but the vocab has 256", id="types-len"),
        pytest.param(_bl(token_types=(1,) * 255 + (9,)), "token_types[255] = 9 is not a TokenType", id="types-val"),
        pytest.param(
            TokenizerSpec(kind=SENTENCEPIECE, vocab=("a", "b"), token_types=(1, 1), scores=(0.0,)),
            "scores has 1 entries but the vocab has 2", id="scores-len",
        ),
        pytest.param(_bl(bos_id=256), "bos_id = 256 is out of range for a vocab of 256", id="bos-range"),
        pytest.param(_bl(eot_ids=(5, -1)), "eot_ids[1] = -1 is out of range", id="eot-range"),
        pytest.param(_bl(add_bos=True), "add_bos is set but bos_id is None", id="add-bos"),
        pytest.param(_bl(merges=(("a", "z"), ("a", "q"))), "merges[0] = 'a' 'z' uses 'az', which is not in the vocab",
                     id="merge-result"),
        pytest.param(_bl(merges=(("a", "€"),)), "merges[0] = 'a' '€' uses '€', which is not in the vocab", id="merge-half"),
        pytest.param(
            TokenizerSpec(kind=BYTE_LEVEL, vocab=("a", "b", "a"), token_types=(1, 1, 1)),
            "vocab[2] = 'a' duplicates vocab[0]", id="duplicate",
        ),
        pytest.param(_bl(kind="unigram"), "kind 'unigram' is not one of", id="kind"),
        pytest.param(_bl(prefix_scheme="sometimes"), "prefix_scheme 'sometimes'", id="prefix-scheme"),
    ],
)
def test_create_rejects(spec, message):
    with pytest.raises(SpecError) as e:
        Tokenizer.create(spec)
    assert message in str(e.value)


def test_constructor_is_private():
    with pytest.raises(TypeError, match="Tokenizer.create"):
        Tokenizer(_bl())


def test_fingerprint_stable_and_sensitive():
    a, b = _bl(), _bl(name="other name")
    assert a.fingerprint == b.fingerprint  # the name is not part of it
    assert a.fingerprint != _bl(add_prefix_space=True).fingerprint
    assert len(a.fingerprint) == 64
    assert TokenizerSpec.from_dict(a.to_dict()) == a


def test_pickle_is_small_and_rebuilds():
    """A Tokenizer pickles as its spec, its merge table (16 bytes a merge: what a worker would
    otherwise rebuild from the spec) and its fingerprint when known, never its other indexes."""
    tok, doc = fixture_tok("bl_llama3")
    blob = pickle.dumps(tok)
    assert len(blob) < len(pickle.dumps(tok.spec)) + 16 * len(tok._merge_table) + 1000
    tok2 = pickle.loads(blob)
    case = doc["cases"][5]
    assert tok2.encode(case["text"], add_special_tokens=case["add_special_tokens"]) == case["ids"]
    np.testing.assert_array_equal(tok2._merge_table, tok._merge_table)


def test_pickle_carries_the_fingerprint_and_reads_the_old_form():
    """The fingerprint travels once computed (a worker does not write the canonical JSON again)
    and equals a recomputation; a pickle of the older form (spec and chat template only)
    still rebuilds the same tokenizer."""
    from rmlprep.spec import _known_fingerprint

    tok, doc = fixture_tok("bl_llama3")
    fp = tok.fingerprint
    again = pickle.loads(pickle.dumps(tok))
    assert _known_fingerprint(again.spec) == fp == TokenizerSpec.from_dict(again.spec.to_dict()).fingerprint
    old = Tokenizer.__new__(Tokenizer)
    old.__setstate__({"spec": tok.spec, "chat_template": None})
    np.testing.assert_array_equal(old._merge_table, tok._merge_table)
    case = doc["cases"][5]
    assert old.encode(case["text"], add_special_tokens=case["add_special_tokens"]) == case["ids"]


# -- decoding --------------------------------------------------------------------------------


def test_out_of_range_ids_raise():
    tok = seed_tokenizer()
    for bad in (259, -1, 10**9):
        with pytest.raises(TokenIdError, match=str(bad)):
            tok.decode([1, bad])
        with pytest.raises(IndexError):
            tok.decode_bytes([bad])
    with pytest.raises(TokenIdError):
        tok.stream_decoder().push(259)


def test_ids_as_numpy_integers():
    """Ids read back from Arrow or Parquet are numpy integers: id_to_token and token_bytes take
    them as decode does (they were refused as 'out of range'); a bool or a float is not an id."""
    tok = seed_tokenizer()
    for i in (0, 5, 258):
        for v in (np.int64(i), np.uint32(i), np.int32(i)):
            assert tok.id_to_token(v) == tok.id_to_token(i) and tok.token_bytes(v) == tok.token_bytes(i)
    assert tok.stream_decoder().push(np.uint32(104)) == tok.decode([104])
    for bad in (True, 5.0, "5"):
        with pytest.raises(TokenIdError, match="not an integer"):
            tok.id_to_token(bad)
    with pytest.raises(TokenIdError, match="out of range"):
        tok.id_to_token(np.int64(259))


def test_decode_skip_special():
    tok = seed_tokenizer()
    assert tok.decode([256, 258, 99]) == "ab<|end|>c"
    assert tok.decode([256, 258, 99], skip_special_tokens=True) == "abc"


def test_sentencepiece_decode_strips_prefix():
    tok, _ = fixture_tok("sp_hf_bytefallback")
    ids = tok.encode("Hello world", add_special_tokens=True)
    assert tok.decode(ids, skip_special_tokens=True) == "Hello world"
    assert tok.decode_bytes(ids, skip_special_tokens=True) == b" Hello world"


def test_stream_decoder_never_emits_partial_character():
    """"é" is 2 bytes and "😀" 4: byte tokens come one at a time, so every push before the last
    byte of a character returns ""."""
    tok = seed_tokenizer()
    ids = tok.encode("é😀x")
    assert len(ids) == 7  # no merges for these bytes: one token per byte
    dec = tok.stream_decoder()
    outs = [dec.push(i) for i in ids]
    assert outs == ["", "é", "", "", "", "😀", "x"]
    assert dec.flush() == ""


def test_stream_decoder_incomplete_tail():
    tok = seed_tokenizer()
    dec = tok.stream_decoder()
    assert dec.push(0xF0) == ""
    assert dec.flush() == "\ufffd"


@pytest.mark.parametrize("name", ["bl_qwen2", "sp_hf_bytefallback", "spm_bpe"])
def test_stream_equals_decode(name):
    tok, doc = fixture_tok(name)
    for case in doc["cases"]:
        dec = tok.stream_decoder(skip_special_tokens=True)
        text = "".join(dec.push(i) for i in case["ids"]) + dec.flush()
        assert text == tok.decode(case["ids"], skip_special_tokens=True)


# -- round trips (hypothesis) -----------------------------------------------------------------

# Surrogate code points are replaced first (tiktoken's rule, rmlprep.segment): a high+low pair
# becomes its astral character, a lone one U+FFFD; the round trip holds for the replaced text.
any_text = st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=60)


@settings(max_examples=300, deadline=None)
@given(s=any_text)
@pytest.mark.parametrize("name", ["bl_llama3", "bl_qwen2", "bl_gpt2_digits"])
def test_byte_level_round_trip(name, s):
    tok, _ = fixture_tok(name)
    ids = tok.encode(s, parse_special=False)
    assert tok.decode_bytes(ids) == replace_lone_surrogates(s).encode("utf-8")


def test_surrogates_replaced_as_tiktoken_does():
    """"a\ud800b": the lone high surrogate becomes U+FFFD (bytes EF BF BD); "\ud83d\ude00" is
    the pair for U+1F600 and becomes that one character (F0 9F 98 80), as in tiktoken."""
    tok, _ = fixture_tok("bl_gpt2_digits")
    assert replace_lone_surrogates("a\ud800b") == "a\ufffdb"
    assert replace_lone_surrogates("\ud83d\ude00") == "\U0001F600"
    assert replace_lone_surrogates("\udfff\ud800") == "\ufffd\ufffd"  # low then high: no pair
    clean = "caf\u00e9"
    assert replace_lone_surrogates(clean) is clean
    assert tok.decode_bytes(tok.encode("a\ud800b")) == b"a\xef\xbf\xbdb"
    assert tok.encode("\ud83d\ude00") == tok.encode("\U0001F600")
    assert tok.encode_batch(["a\ud800b", "x"], num_threads=2) == [tok.encode("a\ufffdb"), tok.encode("x")]
    ids, offs = tok.encode_batch_flat(["\ud800", "\ud83d\ude00"])
    assert ids.tolist() == tok.encode("\ufffd") + tok.encode("\U0001F600")
    got, _ = tok.encode_fragments(["a\ud800", "b"])
    assert got == tok.encode("a\ufffdb", parse_special=False)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("method", ["encode_batch", "encode_batch_flat"])
def test_batch_refuses_a_str_or_a_batch_dict(method, threads):
    """tokenizers 0.23.3's ``encode_batch`` refuses a str (``Can't extract `str` to `Vec```) and
    a dict (``'dict' object is not an instance of 'Sequence'``). Iterated, they gave one row per
    character (``"abc"`` -> ``[[97], [98], [99]]`` on the seed tokenizer, 256 byte ids) or per
    key (a ``datasets`` batch ``{"text": [...]}`` -> the ids of ``"text"``), silently."""
    tok = seed_tokenizer()
    for bad in ("abc", b"abc", {"text": ["abc", "ab"]}):
        with pytest.raises(TokenizeError, match="takes a list of texts"):
            getattr(tok, method)(bad, num_threads=threads)
    assert tok.encode_batch(["abc"], num_threads=threads) == [[257]]  # the worked example's ids


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("method", ["encode_batch", "encode_batch_flat"])
@pytest.mark.parametrize("tokenizer", ["seed", "bl_gpt2_digits"])
def test_batch_names_the_item_that_is_not_a_text(tokenizer, method, threads):
    """A fresh-user finding: ``encode_batch(["a", None])`` said only "encode expects str, got
    NoneType", leaving the user to search a batch of thousands for the bad row; the refusal now
    names its index and type, as the other batch refusals name theirs (tokenizers 0.23.3 says
    only "TextEncodeInput must be Union[...]"). Both fixtures: the seed tokenizer has no special
    tokens, bl_gpt2_digits does (a text holding one takes the per-text path)."""
    tok = seed_tokenizer() if tokenizer == "seed" else fixture_tok(tokenizer)[0]
    for bad, name in ((None, "NoneType"), (b"x", "bytes"), (3, "int")):
        with pytest.raises(TokenizeError, match=rf"^{method}: texts\[2\] is {name} \(.*\), not str"):
            getattr(tok, method)(["a", "b<|endoftext|>", bad, "c"], num_threads=threads)


@pytest.mark.parametrize("value", [None, "false", 0])
def test_encode_flags_must_be_bools(value):
    """``parse_special="false"`` was read as True and None as False by the pure-Python path, and
    the native one raised a bare KeyError; tokenizers 0.23.3 refuses any flag but a bool (a
    numpy bool too) with a TypeError. Each encode method now refuses it by name. None is
    ``parse_special``'s default (the folder's ``split_special_tokens``: test_load), so only
    ``add_special_tokens`` refuses it."""
    tok, _ = fixture_tok("bl_gpt2_digits")
    calls = {
        "encode": lambda **k: tok.encode("a<|endoftext|>", **k),
        "encode_to_numpy": lambda **k: tok.encode_to_numpy("a<|endoftext|>", **k),
        "encode_batch": lambda **k: tok.encode_batch(["a<|endoftext|>"], **k),
        "encode_batch_flat": lambda **k: tok.encode_batch_flat(["a<|endoftext|>"], **k),
    }
    for name, call in calls.items():
        for flag in ("parse_special", "add_special_tokens")[value is None:]:
            with pytest.raises(TokenizeError, match=f"^{flag}=.*give True or False"):
                call(**{flag: value})
    assert tok.encode("a<|endoftext|>", parse_special=np.bool_(False)) == tok.encode("a<|endoftext|>", parse_special=False)


# SentencePiece: decode(encode(s)) == s for text without control characters, surrogates and
# "▁" itself (SentencePiece spells space as "▁", so a literal "▁" decodes as a space, as in
# sentencepiece); fixtures' normalizers are identity; leading spaces survive because the
# prefix is added unconditionally and removed once.
sp_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2581"), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(s=sp_text)
@pytest.mark.parametrize("name", ["sp_hf_bytefallback", "spm_bpe"])
def test_sentencepiece_round_trip(name, s):
    tok, _ = fixture_tok(name)
    ids = tok.encode(s, parse_special=False)
    assert tok.decode(ids) == s


# -- hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bl_llama3", "bl_gpt2_digits", "sp_hf_bytefallback", "spm_bpe"])
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a" * 100_000, id="100k-a"),
        pytest.param(" " * 100_000, id="100k-space"),
        pytest.param("\n" * 100_000, id="100k-newline"),
        pytest.param("7" * 100_000, id="100k-digit"),
        pytest.param("ab" * 500_000, id="1MB-word"),
        pytest.param("\ud800x\udfff\ud83d", id="lone-surrogates"),
        pytest.param("", id="empty"),
    ],
)
def test_hostile_inputs_finish(name, text):
    tok, _ = fixture_tok(name)
    t0 = time.perf_counter()
    ids = tok.encode(text)
    assert time.perf_counter() - t0 < 30
    if tok.spec.kind == BYTE_LEVEL:
        assert tok.decode_bytes(ids) == replace_lone_surrogates(text).encode("utf-8")
    assert (text == "") == (ids == [])


def test_encode_rejects_non_str():
    from rmlprep import TokenizeError

    with pytest.raises(TokenizeError, match="expects str, got bytes"):
        seed_tokenizer().encode(b"abc")


# -- fragments and offsets (used by chat masks) -------------------------------------------------


def test_encode_fragments_offsets():
    """["ab", <|end|>, "c", "abc"]: "ab" -> 256 at 0; 258 at 2 (7 bytes); "cabc" joined -> c at 9,
    abc at 10."""
    tok = seed_tokenizer()
    assert tok.encode_fragments(["ab", 258, "c", "abc"]) == ([256, 258, 99, 257], [0, 2, 9, 10])


def test_added_token_flags_rstrip_lstrip():
    """<|x|> with lstrip and rstrip swallows the spaces around it: "a <|x|> b" -> a, <|x|>, b."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["<|x|>"]
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=(1,) * 256 + (3,),
                         added_token_flags=(AddedTokenFlags(256, lstrip=True, rstrip=True),))
    tok = Tokenizer.create(spec)
    assert tok.encode("a <|x|> b") == [97, 256, 98]


def test_added_token_matcher_is_compiled_once_for_both_parse_special(monkeypatch):
    """With ``unparsed_specials="pass_over"`` the parse_special=False matcher finds the same
    literals as the True one (it passes over the special ones): one compiled trie serves both
    (Gemma 3's 6k added tokens cost ~30 ms a trie), and each still cuts as before:
    "a<s>b" -> [a, <s>, b] with parse_special, and "<s>" read as text without."""
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=("a", "b", "<s>", "<", "s", ">"),
                         token_types=(1, 1, TokenType.CONTROL, 1, 1, 1),
                         parse_user_defined_always=True, unparsed_specials="pass_over")
    from rmlprep import tokenizer_build

    built = []
    trie = tokenizer_build._literal_trie
    monkeypatch.setattr(tokenizer_build, "_literal_trie", lambda strings: built.append(1) or trie(strings))
    tokenizer_build._literal_regex.cache_clear()
    tok = Tokenizer.create(spec)
    assert len(built) == 1 and tok._matchers[True][0][0] is tok._matchers[False][0][0]
    assert tok.encode("a<s>b") == [0, 2, 1]
    assert tok.encode("a<s>b", parse_special=False) == [0, 3, 4, 5, 1]


def test_the_ids_repr_shows_are_attributes():
    """``repr(tok)`` shows ``unk_id``, ``pad_id`` and ``eot_ids`` beside ``bos_id``/``eos_id``;
    trial19b wrote ``pack_bfd(..., pad_id=tok.pad_id)`` from it and got AttributeError (only
    ``tok.spec.pad_id`` existed). Each is the spec's value."""
    import re

    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["<pad>", "<eot>"]
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=(1,) * 256 + (3, 3), pad_id=256,
                         eot_ids=(257,))
    tok = Tokenizer.create(spec)
    assert (tok.unk_id, tok.pad_id, tok.eot_ids) == (None, 256, (257,))
    r = repr(tok)
    assert re.search(r"unk_id=None, pad_id=256, eot_ids=\[257\]", r), r


_QWEN = Path.home() / ".cache" / "rmlprep-real-tokenizers" / "hf" / "qwen2.5"


@pytest.mark.skipif(not (_QWEN / "tokenizer.json").exists(), reason=f"{_QWEN} is absent (get.sh)")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "<", "|", "im_end", "|>", "<|im_end|>", "<tool_call>", "<|endoftext|>",
                                 "é", "\n", "<|im_start|>"]), max_size=12))
def test_may_hold_added_is_false_only_where_cut_added_cuts_nothing(parts):
    """``may_hold_added`` is the quick test ``chat.template.parsed_special_text`` makes before
    its two cuts: when it says False, ``cut_added(text, parse_special=True)`` must cut no
    token, or a conversation holding special-token text would go uncounted. Worked example
    (Qwen2.5's tokenizer.json: ``<|im_end|>`` special, ``<tool_call>`` not): ``"a<|im_end|>b"``
    and ``"a<tool_call>b"`` may (True), ``"plain text"`` may not (False)."""
    from rmlprep.load import load_tokenizer

    tok = _qwen_tokenizer(load_tokenizer)
    text = "".join(parts)
    if not tok.may_hold_added(text):
        assert not any(isinstance(f, int) for f in tok.cut_added(text, parse_special=True)), text
    assert tok.may_hold_added("a<|im_end|>b") and tok.may_hold_added("a<tool_call>b")
    assert not tok.may_hold_added("plain text")


def _qwen_tokenizer(load, _cache: dict = {}):  # noqa: B006 (one load for the examples)
    if "t" not in _cache:
        _cache["t"] = load(str(_QWEN))
    return _cache["t"]
