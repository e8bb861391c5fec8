"""Tests for rmlprep.arrow: map functions over dicts, RecordBatches and Tables, datasets.map.

The tiny tokenizer below is byte-level: the 256 byte tokens in GPT-2's printable alphabet
(ids 0..255 in byte order, so a lone byte b has id b), merges "Ġ"+"t" -> "Ġt" (256),
"h"+"e" -> "he" (257), "Ġt"+"he" -> "Ġthe" (258), and control tokens <|endoftext|> (259, eos),
<|im_start|> (260), <|im_end|> (261). GPT-2 pre-split.

Worked example: "the the" pre-splits into "the", " the"; "the" -> t(116) + he(257);
" the" -> Ġthe(258). So encode("the the") == [116, 257, 258].
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rmlprep.arrow import count_errors, tokenize_chat, tokenize_text
from rmlprep.errors import ConfigError, RowError
from rmlprep.pretokenize import GPT2_PATTERN
from rmlprep.spec import BYTE_LEVEL, TokenizerSpec, TokenType
from rmlprep.tokenizer import Tokenizer
from rmlprep.unicode import bytes_to_unicode

ROOT = Path(__file__).resolve().parents[1]
GPT2_TIKTOKEN = Path.home() / ".cache/rmlprep-real-tokenizers/gpt2/gpt2.tiktoken"
CHAT_SET = ROOT.parent / "shared/corpora/chat/topical-chat.messages.jsonl"


def tiny_spec() -> TokenizerSpec:
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + ["Ġt", "he", "Ġthe", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [TokenType.NORMAL] * 259 + [TokenType.CONTROL] * 3
    return TokenizerSpec(
        kind=BYTE_LEVEL,
        vocab=tuple(vocab),
        token_types=tuple(int(t) for t in types),
        merges=(("Ġ", "t"), ("h", "e"), ("Ġt", "he")),
        pre_split=(GPT2_PATTERN,),
        eos_id=259,
        eot_ids=(261,),
        add_eos=True,
        name="tiny",
    )


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.create(tiny_spec())


TEXTS = ["the the", "", "héllo wörld 😀", "x<|endoftext|>y", "the\n\n  end", "a" * 300]


def enc(tok: Tokenizer, text: str) -> list[int]:
    """What tokenize_text gives with its defaults (add_special_tokens=True, parse_special=False)."""
    return tok.encode(text, add_special_tokens=True, parse_special=False)


def ids_of(col) -> list[list[int]]:
    return [list(map(int, r)) for r in col]


def test_worked_example(tok):
    fn = tokenize_text(tok, add_special_tokens=False)
    out = fn(pa.record_batch({"text": ["the the"]}))
    assert out.column("input_ids").to_pylist() == [[116, 257, 258]]


# -- input kinds -------------------------------------------------------------------------
def test_record_batch_types_values_and_kept_columns(tok):
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())], metadata={b"k": b"v"})
    rb = pa.RecordBatch.from_arrays([pa.array(range(len(TEXTS))), pa.array(TEXTS)], schema=schema)
    out = tokenize_text(tok)(rb)
    assert isinstance(out, pa.RecordBatch)
    assert out.schema.names == ["id", "text", "input_ids", "length"]
    assert out.schema.metadata == {b"k": b"v"}
    assert out.schema.field("input_ids").type == pa.list_(pa.uint32())
    assert out.schema.field("length").type == pa.int32()
    want = [enc(tok, t) for t in TEXTS]
    assert out.column("input_ids").to_pylist() == want
    assert out.column("length").to_pylist() == [len(w) for w in want]
    assert want[0][-1] == 259 and want[1] == [259]  # add_eos from the spec
    assert 259 not in want[3][:-1]  # parse_special=False: the marker text stays text


def test_parse_special_option(tok):
    out = tokenize_text(tok, parse_special=True, add_special_tokens=False)(pa.record_batch({"text": ["x<|endoftext|>y"]}))
    assert out.column("input_ids").to_pylist() == [[ord("x"), 259, ord("y")]]


def test_table_in_table_out_multichunk(tok):
    table = pa.Table.from_batches([pa.record_batch({"text": TEXTS[:3]}), pa.record_batch({"text": TEXTS[3:]})])
    out = tokenize_text(tok)(table)
    assert isinstance(out, pa.Table)
    assert out.column_names == ["text", "input_ids", "length"]
    assert out.column("input_ids").type == pa.list_(pa.uint32())
    assert out.column("input_ids").to_pylist() == [enc(tok, t) for t in TEXTS]


def test_dict_in_dict_out(tok):
    out = tokenize_text(tok)({"text": TEXTS, "other": list(range(len(TEXTS)))})
    assert set(out) == {"input_ids", "length"}  # datasets merges the input columns itself
    assert isinstance(out["input_ids"], np.ndarray) and out["input_ids"].dtype == object
    assert all(r.dtype == np.uint32 for r in out["input_ids"])
    assert out["length"].dtype == np.int32
    assert ids_of(out["input_ids"]) == [enc(tok, t) for t in TEXTS]
    kept = tokenize_text(tok, keep_columns=True)({"text": TEXTS, "other": [1] * len(TEXTS)})
    assert list(kept) == ["text", "other", "input_ids", "length"]
    dropped = tokenize_text(tok, keep_columns=False)(pa.record_batch({"text": TEXTS}))
    assert dropped.schema.names == ["input_ids", "length"]


def test_equal_length_rows_stay_one_dimensional(tok):
    out = tokenize_text(tok)({"text": ["ab", "cd", "ef"]})
    assert out["input_ids"].shape == (3,)
    assert ids_of(out["input_ids"]) == [[97, 98, 259], [99, 100, 259], [101, 102, 259]]


def test_sliced_record_batch(tok):
    rb = pa.record_batch({"text": TEXTS, "n": list(range(len(TEXTS)))})
    fn = tokenize_text(tok)
    for lo, hi in [(2, 5), (0, 1), (5, 6), (3, 3)]:
        out = fn(rb.slice(lo, hi - lo))
        assert out.num_rows == hi - lo
        assert out.column("n").to_pylist() == list(range(lo, hi))
        assert out.column("input_ids").to_pylist() == [enc(tok, t) for t in TEXTS[lo:hi]]


def test_large_string_column(tok):
    rb = pa.record_batch({"text": pa.array(TEXTS, type=pa.large_string())})
    out = tokenize_text(tok)(rb)
    assert out.column("input_ids").to_pylist() == [enc(tok, t) for t in TEXTS]


def test_empty_batch(tok):
    rb = pa.RecordBatch.from_arrays([pa.array([], type=pa.string())], names=["text"])
    out = tokenize_text(tok, on_error="record")(rb)
    assert out.num_rows == 0
    assert out.schema.field("input_ids").type == pa.list_(pa.uint32())
    assert out.schema.field("length").type == pa.int32()
    assert out.schema.field("error").type == pa.string()
    d = tokenize_text(tok)({"text": []})
    assert len(d["input_ids"]) == 0 and len(d["length"]) == 0
    c = tokenize_chat(tok, "chatml")(pa.Table.from_pylist([], schema=pa.schema([("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))])))
    assert c.num_rows == 0 and c.schema.field("labels").type == pa.list_(pa.int32())


def test_missing_column_and_bad_options(tok):
    with pytest.raises(ConfigError, match="no column 'text'.*column="):
        tokenize_text(tok)(pa.record_batch({"body": ["x"]}))
    with pytest.raises(ConfigError, match="on_error"):
        tokenize_text(tok, on_error="skip")
    with pytest.raises(ConfigError, match="distinct"):
        tokenize_text(tok, length_column="input_ids")
    # bool("false") is True: parse_special="false" parsed special-token text in every row
    for flag in ("parse_special", "add_special_tokens"):
        for value in ("false", None):
            with pytest.raises(ConfigError, match=f"tokenize_text: {flag}=.*give True or False"):
                tokenize_text(tok, **{flag: value})


# -- bad rows ----------------------------------------------------------------------------
def test_raise_names_row_id_and_reason(tok):
    rb = pa.record_batch({"id": ["a", "b", "c"], "text": ["ok", None, "ok"]})
    with pytest.raises(RowError) as e:
        tokenize_text(tok)(rb)
    assert e.value.row == 1
    assert "row 1 of the batch" in str(e.value) and "id='b'" in str(e.value)
    assert "'text' is null" in e.value.reason
    assert "on_error='record'" in str(e.value)
    with pytest.raises(RowError, match=r"row 2 of the batch, dataset index 12: 'text' is int, expected str"):
        tokenize_text(tok)({"text": ["a", "b", 7]}, [10, 11, 12])


@pytest.mark.parametrize("kind", ["arrow", "dict"])
def test_record_keeps_every_row(tok, kind):
    texts = ["the", None, "x", 5, "end"]
    fn = tokenize_text(tok, on_error="record")
    if kind == "arrow":
        out = fn(pa.record_batch({"text": pa.array(["the", None, "x", None, "end"])}))
        ids = out.column("input_ids").to_pylist()
        err = out.column("error").to_pylist()
        assert err[0] is None and err[2] is None  # null for good rows
        assert out.schema.field("error").type == pa.string()
        assert count_errors(out) == 2
    else:
        out = fn({"text": texts})
        ids = ids_of(out["input_ids"])
        err = list(out["error"])
        assert err[0] == "" and err[2] == ""  # "" in the dict output (see module docstring)
        assert count_errors(out) == 2
        assert "int, expected str" in err[3]
    assert len(ids) == 5
    assert ids[1] == [] and ids[3] == []
    assert ids[0] == enc(tok, "the") and ids[4] == enc(tok, "end")
    assert "null" in err[1]
    assert fn.stats["errors"] == 2 and fn.stats["rows"] == 5


def test_record_all_good_batch_still_has_typed_error_column(tok):
    out = tokenize_text(tok, on_error="record")(pa.record_batch({"text": ["a", "b"]}))
    assert out.schema.field("error").type == pa.string()
    assert out.column("error").null_count == 2 and count_errors(out) == 0


def test_count_errors_refuses_what_it_cannot_count():
    """count_errors takes a Dataset, a Table / RecordBatch or a dict of columns. A streamed
    IterableDataset (no table to count in) and a list raised AttributeError ("'list' object has
    no attribute 'column_names'"); they are refused naming what it takes and how to count a
    stream."""
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"error": ["", "bad row", None]})
    assert count_errors(ds) == 1
    for data in (ds.to_iterable_dataset(), [{"error": "x"}]):
        with pytest.raises(TypeError, match=r"^count_errors: give a datasets\.Dataset, .* not (IterableDataset|list) "
                                            r"\(an IterableDataset: count its rows as they stream"):
            count_errors(data)


def test_non_string_arrow_column(tok):
    out = tokenize_text(tok, on_error="record")(pa.record_batch({"text": pa.array([1, 2])}))
    assert out.column("input_ids").to_pylist() == [[], []]
    assert all("int, expected str" in e for e in out.column("error").to_pylist())


# -- chat ----------------------------------------------------------------------------------
CONVS = [
    [{"role": "user", "content": "the the"}, {"role": "assistant", "content": "the end"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
     {"role": "assistant", "content": "héllo"}, {"role": "user", "content": "x"}, {"role": "assistant", "content": ""}],
]


def test_chat_columns_aligned_and_equal_to_encode_chat(tok):
    from rmlprep.chat import encode_chat

    table = pa.Table.from_pylist([{"messages": c, "id": i} for i, c in enumerate(CONVS)])
    out = tokenize_chat(tok, "chatml")(table)
    assert out.column_names == ["messages", "id", "input_ids", "assistant_masks", "labels", "length"]
    assert out.schema.field("input_ids").type == pa.list_(pa.uint32())
    assert out.schema.field("assistant_masks").type == pa.list_(pa.uint8())
    assert out.schema.field("labels").type == pa.list_(pa.int32())
    assert out.schema.field("length").type == pa.int32()
    ids = out.column("input_ids").to_pylist()
    masks = out.column("assistant_masks").to_pylist()
    labels = out.column("labels").to_pylist()
    for i, conv in enumerate(CONVS):
        enc = encode_chat(tok, conv, "chatml")
        assert ids[i] == enc.input_ids and masks[i] == enc.assistant_masks and labels[i] == enc.labels
        assert len(masks[i]) == len(ids[i]) == len(labels[i]) == out.column("length")[i].as_py()
        assert labels[i] == [t if m else -100 for t, m in zip(ids[i], masks[i])]
        assert 261 in [t for t, m in zip(ids[i], masks[i]) if m]  # <|im_end|> is learned
    d = tokenize_chat(tok, "chatml")({"messages": CONVS})
    assert ids_of(d["input_ids"]) == ids and ids_of(d["assistant_masks"]) == masks and ids_of(d["labels"]) == labels
    assert d["assistant_masks"][0].dtype == np.uint8 and d["labels"][0].dtype == np.int32


BAD_CONVS = [
    pytest.param(None, "null", id="null"),
    pytest.param("hello", "must be a list", id="string"),
    pytest.param([{"content": "x"}], "no 'role'", id="missing-role"),
    pytest.param([{"role": "developer", "content": "x"}], "role 'developer'", id="bad-role"),
    pytest.param([{"role": "user", "content": 3}], "content must be a string", id="bad-content"),
    pytest.param([{"role": "user", "content": "x"}], "no assistant message", id="no-assistant"),
    pytest.param([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "weight": 0.5}],
                 "'weight'", id="unknown-field"),
    pytest.param([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "reasoning_content": "r"}],
                 "cannot write reasoning_content", id="reasoning-chatml"),
    pytest.param([], "empty conversation", id="empty"),
]


@pytest.mark.parametrize("bad,reason", BAD_CONVS)
def test_chat_bad_rows(tok, bad, reason):
    rows = [CONVS[0], bad, CONVS[1]]
    fn = tokenize_chat(tok, "chatml", on_error="record")
    out = fn({"messages": rows})
    assert reason in out["error"][1] and out["error"][0] == "" == out["error"][2]
    assert len(out["input_ids"][1]) == 0 and len(out["assistant_masks"][1]) == 0
    assert ids_of(out["input_ids"])[2] == tokenize_chat(tok, "chatml")({"messages": [CONVS[1]]})["input_ids"][0].tolist()
    with pytest.raises(RowError, match="row 1 of the batch") as e:
        tokenize_chat(tok, "chatml")({"messages": rows})
    assert reason in e.value.reason


def test_chat_format_rule_error_in_arrow(tok):
    conv = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    out = tokenize_chat(tok, "llama2", on_error="record", text_markers=True)(pa.Table.from_pylist([{"messages": conv}]))
    assert "alternating" in out.column("error")[0].as_py()
    assert out.column("input_ids").to_pylist() == [[]]


def test_generation_prompt_after_a_final_answer_is_a_row_error(tok):
    """add_generation_prompt=True is for prompts. In chatml, worked by hand:

        [user "q", assistant "a"]            would end "...a<|im_end|>\\n<|im_start|>assistant\\n": an
                                             untrained header after the final answer -> row error
        [user "q"]                           a prompt: kept, as before (no_assistant defaults to keep
                                             with a generation prompt), nothing trained
        [user "q", assistant "a", user "r"]  kept: ends on the header, trains "a<|im_end|>" only

    The kept rows equal encode_chat(..., add_generation_prompt=True) and their text ends with the
    header; without add_generation_prompt the answered conversation is kept."""
    from rmlprep.chat import encode_chat, format_chat

    u, a = ({"role": r, "content": c} for r, c in (("user", "q"), ("assistant", "a")))
    rows = [[u, a], [u], [u, a, {"role": "user", "content": "r"}]]
    out = tokenize_chat(tok, "chatml", add_generation_prompt=True, on_error="record")({"messages": rows})
    assert out["error"][0].startswith("the conversation ends on an assistant turn, and add_generation_prompt would")
    assert "chat.add_generation_prompt = false" in out["error"][0] and len(out["input_ids"][0]) == 0
    for i in (1, 2):
        assert out["error"][i] == ""
        enc = encode_chat(tok, rows[i], "chatml", add_generation_prompt=True)
        assert out["input_ids"][i].tolist() == enc.input_ids and out["labels"][i].tolist() == enc.labels
        assert format_chat(rows[i], "chatml", add_generation_prompt=True).endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert not out["assistant_masks"][1].any() and out["assistant_masks"][2].any()
    assert tokenize_chat(tok, "chatml", on_error="record")({"messages": rows[:1]})["error"] == [""]
    with pytest.raises(RowError, match="ends on an assistant turn"):
        tokenize_chat(tok, "chatml", add_generation_prompt=True)({"messages": rows[:1]})


# -- pickling and fingerprints --------------------------------------------------------------
def test_pickle_small_and_rebuilds(tok):
    import rmlprep.arrow as arrow_mod

    fn = tokenize_chat(tok, "chatml", on_error="record")
    blob = pickle.dumps(fn)
    assert len(blob) < len(pickle.dumps(tok.spec)) + 10_000
    assert b"_tok2id" not in blob and b"_merges" not in blob
    arrow_mod._TOKENIZERS.clear()  # force a rebuild from the pickled spec
    fn2 = pickle.loads(blob)
    rb = pa.Table.from_pylist([{"messages": c} for c in CONVS])
    assert fn2(rb).equals(fn(rb))
    assert fn2.tokenizer is pickle.loads(blob).tokenizer  # rebuilt once per process, then cached


def test_hash_ignores_stats_and_cached_state(tok):
    from datasets.fingerprint import Hasher

    fn = tokenize_text(tok)
    h = Hasher.hash(fn)
    fn({"text": ["the"]})
    assert Hasher.hash(fn) == h
    assert Hasher.hash(tokenize_text(tok)) == h
    assert Hasher.hash(tokenize_text(tok, parse_special=True)) != h
    assert Hasher.hash(tokenize_text(Tokenizer.create(tiny_spec().replace(add_eos=False)))) != h


def _spec_file(tmp_path: Path) -> Path:
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(tiny_spec().to_dict()), encoding="utf-8")
    return p


_FINGERPRINT_SCRIPT = textwrap.dedent(
    """
    import json, sys, datasets
    from datasets.fingerprint import Hasher
    from rmlprep.arrow import tokenize_text, tokenize_chat
    from rmlprep.spec import TokenizerSpec
    from rmlprep.tokenizer import Tokenizer
    if sys.argv[1] == "gpt2":
        from rmlprep import load_tokenizer
        tok = load_tokenizer(sys.argv[2], name="gpt2")
    else:
        tok = Tokenizer.create(TokenizerSpec.from_dict(json.load(open(sys.argv[2]))))
    fn = tokenize_text(tok)
    ds = datasets.Dataset.from_dict({"text": ["the the", "b"]})
    out = ds.map(fn, batched=True)
    chat = tokenize_chat(tok, "chatml", text_markers=True)  # GPT-2 has no <|im_end|>
    print(json.dumps([Hasher.hash(fn), out._fingerprint, Hasher.hash(chat)]))
    """
)


def _fingerprints(kind: str, path: Path) -> tuple[list[str], str]:
    env = dict(os.environ, PYTHONHASHSEED="random", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", _FINGERPRINT_SCRIPT, kind, str(path)], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_fingerprint_stable_across_fresh_processes(tmp_path):
    path = _spec_file(tmp_path)
    a, err_a = _fingerprints("tiny", path)
    b, err_b = _fingerprints("tiny", path)
    assert a == b
    assert "could not be hashed" not in err_a + err_b
    assert "random hash" not in err_a + err_b


@pytest.mark.parity
@pytest.mark.skipif(not GPT2_TIKTOKEN.exists(), reason=f"real GPT-2 ranks not found at {GPT2_TIKTOKEN}")
def test_real_gpt2_fingerprint_stable_and_pickle_small():
    from rmlprep import load_tokenizer

    a, err = _fingerprints("gpt2", GPT2_TIKTOKEN)
    b, _ = _fingerprints("gpt2", GPT2_TIKTOKEN)
    assert a == b and "could not be hashed" not in err
    tok = load_tokenizer(GPT2_TIKTOKEN, name="gpt2")
    blob = pickle.dumps(tokenize_text(tok))
    assert len(blob) < len(pickle.dumps(tok.spec)) + 10_000
    out = tokenize_text(tok, add_special_tokens=False)(pa.record_batch({"text": ["Hello world"]}))
    assert out.column("input_ids").to_pylist() == [[15496, 995]]  # tiktoken gpt2


def test_second_identical_map_hits_cache(tok, tmp_path):
    import datasets

    datasets.Dataset.from_dict({"text": TEXTS * 5, "id": list(range(30))}).save_to_disk(str(tmp_path / "ds"))
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    first = ds.map(tokenize_text(tok), batched=True, batch_size=8)
    assert first.cache_files and first.cache_files[0]["filename"].startswith(str(tmp_path))

    fn2 = tokenize_text(Tokenizer.create(tiny_spec()))  # a new but identical function

    def boom(*a, **k):
        raise AssertionError("recomputed instead of hitting the cache")

    fn2._encode = boom  # instance attribute: not part of the pickled state, so not hashed
    ds2 = datasets.load_from_disk(str(tmp_path / "ds"))
    second = ds2.map(fn2, batched=True, batch_size=8)
    assert second.cache_files == first.cache_files
    assert second["input_ids"] == first["input_ids"]


# -- datasets.map, num_proc ------------------------------------------------------------------
def test_datasets_map_types_and_remove_columns(tok):
    import datasets

    ds = datasets.Dataset.from_dict({"text": TEXTS, "id": list(range(len(TEXTS)))})
    out = ds.map(tokenize_text(tok, on_error="record"), batched=True, batch_size=2, remove_columns=["text"])
    assert out.column_names == ["id", "input_ids", "length", "error"]
    assert out.data.schema.field("input_ids").type == pa.list_(pa.uint32())
    assert out.data.schema.field("length").type == pa.int32()
    assert out.data.schema.field("error").type == pa.string()
    assert out["input_ids"] == [enc(tok, t) for t in TEXTS]
    assert count_errors(out) == 0


def test_datasets_map_with_indices_names_dataset_index(tok):
    import datasets

    ds = datasets.Dataset.from_dict({"text": ["a", "b", "c", None]})
    with pytest.raises(RowError, match="row 1 of the batch, dataset index 3"):
        ds.map(tokenize_text(tok), batched=True, batch_size=2, with_indices=True)


def test_datasets_map_input_columns(tok):
    import datasets

    ds = datasets.Dataset.from_dict({"text": TEXTS, "id": list(range(len(TEXTS)))})
    out = ds.map(tokenize_text(tok), batched=True, input_columns=["text"])
    assert out.column_names == ["text", "id", "input_ids", "length"]
    assert out["input_ids"] == [enc(tok, t) for t in TEXTS]


def test_datasets_map_unbatched_text_is_one_example_per_call(tok):
    """``datasets.map(fn)`` without ``batched=True`` (its default) hands the callable one example,
    ``{"text": "the the", "id": 0}``: a string, not a batch's list of them. It was iterated as a
    list (one row per character: [[116], [104], [101], ...]); it is one row, so the ids equal the
    batched map's (worked example: "the the" -> [116, 257, 258] and the tiny spec's eos 259)."""
    import datasets

    ds = datasets.Dataset.from_dict({"text": TEXTS, "id": list(range(len(TEXTS)))})
    out = ds.map(tokenize_text(tok))
    assert out.column_names == ["text", "id", "input_ids", "length"]
    assert out.data.schema.field("input_ids").type == pa.list_(pa.uint32())
    assert out.data.schema.field("length").type == pa.int32()
    assert out["input_ids"] == [enc(tok, t) for t in TEXTS]
    assert out["input_ids"][0] == [116, 257, 258, 259]
    assert out["length"] == [len(enc(tok, t)) for t in TEXTS]
    one = ds.map(tokenize_text(tok), input_columns=["text"], remove_columns=["text", "id"])
    assert one["input_ids"] == out["input_ids"]


def test_datasets_map_unbatched_null_and_indices(tok):
    """An unbatched null row is named by its dataset index (with_indices passes an int), and
    ``on_error="record"`` gives one reason string per row, which count_errors reads."""
    import datasets

    ds = datasets.Dataset.from_dict({"text": ["the", None]})
    with pytest.raises(RowError, match="dataset index 1"):
        ds.map(tokenize_text(tok), with_indices=True)
    out = ds.map(tokenize_text(tok, on_error="record"))
    assert out["input_ids"] == [enc(tok, "the"), []]
    assert out["error"][0] == "" and "null" in out["error"][1]
    assert count_errors(out) == 1


def test_datasets_map_unbatched_chat_is_one_conversation(tok):
    """Unbatched, the messages value is one conversation (a list of message dicts), not a
    batch of conversations: it was taken as a batch of one-message conversations and failed
    with "messages must be a list ... got dict"."""
    import datasets

    from rmlprep.chat import encode_chat

    ds = datasets.Dataset.from_list([{"messages": c} for c in CONVS])
    out = ds.map(tokenize_chat(tok, "chatml"))
    for i, conv in enumerate(CONVS):
        e = encode_chat(tok, conv, "chatml")
        assert out[i]["input_ids"] == e.input_ids and out[i]["labels"] == e.labels
        assert out[i]["length"] == len(e.input_ids)
    assert out["input_ids"] == ds.map(tokenize_chat(tok, "chatml"), batched=True)["input_ids"]


def test_datasets_arrow_format_map(tok):
    import datasets

    ds = datasets.Dataset.from_dict({"text": TEXTS}).with_format("arrow")
    out = ds.map(tokenize_text(tok), batched=True, batch_size=4).with_format(None)
    assert out.column_names == ["text", "input_ids", "length"]
    assert out["input_ids"] == [enc(tok, t) for t in TEXTS]


def _chat_rows(n: int) -> list[dict]:
    if CHAT_SET.exists():
        with open(CHAT_SET, encoding="utf-8") as f:
            rows = [json.loads(line) for line, _ in zip(f, range(n))]
        return [{"messages": r["messages"], "id": str(r.get("id", i))} for i, r in enumerate(rows)]
    return [{"messages": CONVS[i % 2], "id": str(i)} for i in range(n)]


def test_num_proc_1_and_2_identical(tok):
    import datasets

    texts = [f"{t} the {i}" for i in range(40) for t in TEXTS] + [None]
    ds = datasets.Dataset.from_dict({"text": texts})
    fn = tokenize_text(tok, on_error="record")
    one = ds.map(fn, batched=True, batch_size=16, num_proc=1, keep_in_memory=True)
    two = ds.map(fn, batched=True, batch_size=16, num_proc=2, keep_in_memory=True)
    assert one.data.schema == two.data.schema
    assert one.data.table.equals(two.data.table)
    assert count_errors(two) == 1

    chat = datasets.Dataset.from_list(_chat_rows(120))
    cfn = tokenize_chat(tok, "chatml", on_error="record")
    c1 = chat.map(cfn, batched=True, batch_size=32, num_proc=1, keep_in_memory=True, remove_columns=["messages"])
    c2 = chat.map(cfn, batched=True, batch_size=32, num_proc=2, keep_in_memory=True, remove_columns=["messages"])
    assert c1.data.table.equals(c2.data.table)
    assert all(len(m) == len(i) for m, i in zip(c2["assistant_masks"], c2["input_ids"]))


def test_stats_left_in_num_proc_workers_say_so(tok):
    """A read-through finding: after ``ds.map(fn, num_proc=2)`` the caller's ``fn.stats`` was all
    zeros without a word (the workers count on pickled copies, which datasets never hands back);
    said only in README's ``json_tools`` paragraph. Reading it now warns once, naming the cause
    and what to count instead; an object datasets pickled only to hash it and then called
    itself (no ``num_proc``) counts and does not warn."""
    import datasets

    ds = datasets.Dataset.from_dict({"text": ["a b", None, "c"] * 4})
    fn = tokenize_text(tok, on_error="record")
    out = ds.map(fn, batched=True, batch_size=4, num_proc=2, keep_in_memory=True)
    assert count_errors(out) == 4
    with pytest.warns(UserWarning, match=r"tokenize_text: fn\.stats is all zeros: .*num_proc=N.*count_errors"):
        assert fn.stats["rows"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn.stats["batches"] == 0  # said once per object
        here = tokenize_text(tok, on_error="record")
        ds.map(here, batched=True, batch_size=4, keep_in_memory=True)
        assert here.stats["rows"] == 12 and here.stats["errors"] == 4
        sent = tokenize_chat(tok, "chatml")
        pickle.dumps(sent)
        sent({"messages": [CONVS[0]]})  # pickled, then called here: its counts are right
        assert sent.stats["rows"] == 1
    with pytest.warns(UserWarning, match=r"^tokenize_chat: fn\.stats is all zeros"):
        pickle.dumps(cfn := tokenize_chat(tok, "chatml"))
        cfn.stats


def test_spawned_worker_rebuilds_from_pickle(tok, tmp_path):
    """A fresh interpreter (no inherited tokenizer) unpickles the function and gets the same ids."""
    fn = tokenize_text(tok)
    p = tmp_path / "fn.pkl"
    p.write_bytes(pickle.dumps(fn))
    script = (
        "import pickle, sys, json, pyarrow as pa\n"
        "fn = pickle.load(open(sys.argv[1], 'rb'))\n"
        "print(json.dumps(fn(pa.record_batch({'text': sys.argv[2:]})).column('input_ids').to_pylist()))\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(p), *TEXTS], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [enc(tok, t) for t in TEXTS]


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_surrogates_replaced_and_flagged(tok, kind):
    """Python strs may hold surrogates (json.loads of "\\ud800"): every row is encoded after
    tiktoken's replacement, and surrogates_column flags the rows it changed."""
    texts = ["ok", "a\ud800b", "\ud83d\ude00", "caf\u00e9"]
    fn = tokenize_text(tok, surrogates_column="surrogates", add_special_tokens=False)
    out = fn({"text": texts} if kind == "dict" else texts)
    assert [list(r) for r in out["input_ids"]] == [
        tok.encode(t) for t in ["ok", "a\ufffdb", "\U0001F600", "caf\u00e9"]]
    assert out["surrogates"].tolist() == [False, True, True, False]
    assert fn.stats["surrogate_rows"] == 2
    plain = tokenize_text(tok, add_special_tokens=False)({"text": texts})  # same ids without the column
    assert [list(r) for r in plain["input_ids"]] == [list(r) for r in out["input_ids"]]
    assert "surrogates" not in plain


def test_chat_surrogates_replaced_and_counted(tok):
    """tokenize_chat replaces surrogates as tokenize_text does (a lone one becomes U+FFFD, a pair
    its character) and counts the conversations it changed in stats["surrogate_rows"], as
    tokenize_text and the sft run do (a week-two trial found the count stuck at 0)."""
    convs = [[{"role": "user", "content": "a\ud800b"}, {"role": "assistant", "content": "ok"}],
             [{"role": "user", "content": "fine"}, {"role": "assistant", "content": "\ud83d\ude00"}],
             [{"role": "user", "content": "caf\u00e9"}, {"role": "assistant", "content": "ok"}]]
    fixed = [[{"role": "user", "content": "a\ufffdb"}, {"role": "assistant", "content": "ok"}],
             [{"role": "user", "content": "fine"}, {"role": "assistant", "content": "\U0001F600"}], convs[2]]
    fn = tokenize_chat(tok, "chatml")
    out = fn({"messages": convs})
    assert ids_of(out["input_ids"]) == ids_of(tokenize_chat(tok, "chatml")({"messages": fixed})["input_ids"])
    assert fn.stats["surrogate_rows"] == 2


def test_surrogates_column_on_arrow_input_is_all_false(tok):
    batch = pa.record_batch([pa.array(["x", "\u00e9"])], names=["text"])
    out = tokenize_text(tok, surrogates_column="surrogates")(batch)
    assert out.column("surrogates").type == pa.bool_() and out.column("surrogates").to_pylist() == [False, False]


#: Two conversations calling different tools, as a user-trial wrote them (F1b).
_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
_SEARCH = {"type": "function", "function": {"name": "search", "description": "Search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


def _tool_conv(name: str, args, question: str, tools) -> dict:
    return {"messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "name": name, "content": "ok"},
        {"role": "assistant", "content": "Done."}], "tools": tools}


def _as_dict_batch(rows: list[dict]) -> dict:
    return {"messages": [r["messages"] for r in rows], "tools": [r["tools"] for r in rows]}


def test_struct_columns_read_without_the_union_padding(tok):
    """A user-trial (F1b): Arrow types ``arguments`` as one struct, the union of every row's keys,
    so from a Table (Parquet, ``datasets``) the get_weather call read as ``{"city": "Paris",
    "query": None}`` and the qwen2.5 text taught ``"query": null`` arguments that the JSONL rows
    (a dict batch) do not have. A struct's null fields are absent when read
    (drop_struct_nulls); the expected text is the dict batch's, whose call is written
    ``{"name": "get_weather", "arguments": {"city": "Paris"}}``."""
    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER, _SEARCH]),
            _tool_conv("search", {"query": "cats"}, "Search cats", [_WEATHER, _SEARCH])]
    fn = tokenize_chat(tok, "qwen2.5")
    want = [list(x) for x in fn(_as_dict_batch(rows))["input_ids"]]
    texts = [tok.decode(x) for x in want]
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in texts[0]
    assert '{"name": "search", "arguments": {"query": "cats"}}' in texts[1]
    table = pa.Table.from_pylist(rows)
    args = table.schema.field("messages").type.value_type.field("tool_calls").type.value_type
    assert pa.types.is_struct(args.field("function").type.field("arguments").type)  # the padded union
    assert fn(table).column("input_ids").to_pylist() == want
    assert fn(table.to_batches()[0]).column("input_ids").to_pylist() == want
    # datasets.map hands over a LazyBatch of Python values; its Arrow table gives the types
    ds = datasets.Dataset.from_list(rows).map(fn, batched=True, load_from_cache_file=False)
    assert ds["input_ids"] == want


def test_struct_padding_is_left_out_in_an_unbatched_map_too(tok):
    """A fresh-user trial: ``datasets.map(fn)`` without ``batched=True`` hands over one row as a
    LazyRow of Python values, Arrow's struct padding included (``{"city": None, "query": "x"}``);
    it is cleaned by the row's table types as a batch is, so the ids equal the batched map's.
    A bad row is named as the example, not as 'row 0 of the batch'."""
    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER, _SEARCH]),
            _tool_conv("search", {"query": "cats"}, "Search cats", [_WEATHER, _SEARCH])]
    fn = tokenize_chat(tok, "qwen2.5")
    want = [list(x) for x in fn(_as_dict_batch(rows))["input_ids"]]
    ds = datasets.Dataset.from_list(rows)
    assert ds.map(fn, load_from_cache_file=False)["input_ids"] == want
    bad = datasets.Dataset.from_list([{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(RowError, match=r"^the example \(an unbatched map\), dataset index 0: "):
        bad.map(tokenize_chat(tok, "qwen2.5"), with_indices=True, load_from_cache_file=False)


def test_streamed_struct_padding_is_refused_and_arrow_format_matches(tok):
    """An explorer finding (G13): ``IterableDataset.map`` (``load_dataset(..., streaming=True)``,
    ``Dataset.to_iterable_dataset()``) and ``Dataset.map(..., input_columns=[...])`` hand plain
    dicts and lists made from the Arrow rows, struct padding included and no table types beside
    them, so the qwen2.5 text taught ``{"city": "Paris", "query": null}``. Such a row is refused
    with the fix in the message; with
    ``.with_format("arrow")`` the ids equal the dict batch's (the JSONL rows); a streamed batch
    with no null in its arguments or tools is written as usual."""
    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER, _SEARCH]),
            _tool_conv("search", {"query": "cats"}, "Search cats", [_WEATHER, _SEARCH])]
    fn = tokenize_chat(tok, "qwen2.5")
    want = [list(x) for x in fn(_as_dict_batch(rows))["input_ids"]]
    streamed = datasets.Dataset.from_list(rows).to_iterable_dataset()
    for batched in (True, False):
        with pytest.raises(ConfigError, match=r"arguments\.query, .*with_format\(\"arrow\"\)"):
            list(streamed.map(fn, batched=batched))
    with pytest.raises(ConfigError, match=r"arguments\.query, .*leave out input_columns"):
        datasets.Dataset.from_list(rows).map(fn, batched=True, input_columns=["messages"], load_from_cache_file=False)
    as_arrow = streamed.with_format("arrow").map(fn, batched=True)
    assert [list(r["input_ids"]) for r in as_arrow.with_format(None)] == want
    same_keys = [_tool_conv("get_weather", {"city": c}, f"Weather in {c}?", [_WEATHER]) for c in ("Paris", "Rome")]
    want = [list(x) for x in fn(_as_dict_batch(same_keys))["input_ids"]]
    got = datasets.Dataset.from_list(same_keys).to_iterable_dataset().map(fn, batched=True)
    assert [list(r["input_ids"]) for r in got] == want


def test_a_tools_column_that_tools_column_does_not_name_is_refused(tok):
    """Explorer G4: tool definitions in a ``functions`` column (OpenAI's older name; glaive,
    LLaMA-Factory) were silently left out of every prompt (qwen2.5 wrote its default system
    turn instead of the ``# Tools`` block), also under ``datasets.map``, while the sft run
    refuses the same input. Now refused alike, naming the column and ``tools_column=``;
    ``tools_column="functions"`` writes them (the text of the same tools in ``tools``), and
    ``tools_column=None`` leaves them out on purpose."""
    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER])]
    want = [list(x) for x in tokenize_chat(tok, "qwen2.5")(_as_dict_batch(rows))["input_ids"]]
    assert "# Tools" in tok.decode(want[0])
    funcs = {"messages": [r["messages"] for r in rows], "functions": [r["tools"] for r in rows]}
    refused = (r"^tokenize_chat: the batch has a column 'functions' .*tools_column='tools' does not name.*"
               r"pass tools_column='functions' .*or tools_column=None to leave them out on purpose$")
    fn = tokenize_chat(tok, "qwen2.5")
    with pytest.raises(ConfigError, match=refused):
        fn(funcs)
    with pytest.raises(ConfigError, match=refused):
        fn(pa.Table.from_pydict(funcs))
    with pytest.raises(ConfigError, match=refused):
        datasets.Dataset.from_dict(funcs).map(fn, batched=True, load_from_cache_file=False)
    with pytest.raises(ConfigError, match=refused):
        datasets.Dataset.from_dict(funcs).map(fn, load_from_cache_file=False)
    assert [list(x) for x in tokenize_chat(tok, "qwen2.5", tools_column="functions")(funcs)["input_ids"]] == want
    left_out = tokenize_chat(tok, "qwen2.5", tools_column=None)(funcs)["input_ids"]
    assert "# Tools" not in tok.decode(left_out[0])
    with pytest.raises(ConfigError, match=r"column 'tools' .*tools_column='functions' does not name"):
        tokenize_chat(tok, "qwen2.5", tools_column="functions")({**funcs, "tools": funcs["functions"]})


def test_train_on_reasoning_off_needs_a_format_with_reasoning(tok):
    """Explorer G3: train_on_reasoning=False was silently ignored by every format but qwen3 (a
    <think>…</think> in content trained as answer text). A format with no reasoning is refused
    when the function is built (and by encode_chat); one with reasoning counts the conversations
    whose reasoning it left out."""
    from rmlprep.chat import encode_chat

    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\nHello."}]
    for call in (lambda: tokenize_chat(tok, "qwen2.5", train_on_reasoning=False),
                 lambda: encode_chat(tok, conv, "llama3", train_on_reasoning=False, text_markers=True)):
        with pytest.raises(ConfigError, match=r"train_on_reasoning=False\): format '(qwen2.5|llama3)' has no reasoning: "
                                              r"its template writes a <think>…</think> in an answer's content as answer "
                                              r"text, so it would be trained all the same"):
            call()
    fn = tokenize_chat(tok, "qwen3", train_on_reasoning=False)
    out = fn({"messages": [conv, conv[:1] + [{"role": "assistant", "content": "Hello."}]]})
    assert fn.stats["reasoning_untrained"] == 1
    trained = tok.decode([i for i, k in zip(out["input_ids"][0], out["assistant_masks"][0]) if k])
    assert trained == "Hello.<|im_end|>"


def test_train_on_reasoning_off_rejects_a_think_block_a_format_writes_as_answer_text():
    """Explorer8 E1: gpt-oss and gemma4 have reasoning (their own channel), so
    train_on_reasoning=False is not refused up front, but their templates write a
    <think>…</think> in content verbatim into the answer (jinja render of the real gpt-oss
    template: ``<|channel|>final<|message|><think>\\nr\\n</think>\\n\\nHello.<|return|>``), so the
    R1-style reasoning was trained as answer text without a word. Such a conversation is now
    a reject naming the tag; one without it is written as before."""
    from rmlprep import load_tokenizer
    from rmlprep.chat import encode_chat
    from rmlprep.errors import ChatFormatError

    tok = load_tokenizer(str(Path.home() / ".cache/rmlprep-real-tokenizers/hf/gpt-oss"))
    think = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\nHello."}]
    plain = think[:1] + [{"role": "assistant", "content": "Hello.", "reasoning_content": "r"}]
    for fmt in ("gpt-oss", "gemma4"):
        with pytest.raises(ChatFormatError, match=r"<think>.*train_on_reasoning"):
            encode_chat(tok, think, fmt, train_on_reasoning=False, text_markers=True)
        assert "<think>" in tok.decode(list(encode_chat(tok, think, fmt, text_markers=True).input_ids))
    fn = tokenize_chat(tok, "gpt-oss", train_on_reasoning=False, on_error="record")
    out = fn({"messages": [think, plain]})
    assert count_errors(out) == 1
    trained = tok.decode([i for i, k in zip(out["input_ids"][1], out["assistant_masks"][1]) if k])
    assert trained == "<|start|>assistant<|channel|>final<|message|>Hello.<|return|>"  # analysis untrained


def test_an_unbatched_map_of_typed_rows_is_not_refused(tok):
    """A review finding: ``Dataset.map(fn)`` unbatched cleans its LazyRow by the row's table
    types, then ran the plain-rows refusal on the cleaned row, so a null inside a list argument
    (``{"ids": [1, None]}``, a value, not struct padding) was refused while the batched map
    writes it. Worked example: both maps give the same ids."""
    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris", "ids": [1, None]}, "Weather?", [_WEATHER])]
    fn = tokenize_chat(tok, "qwen2.5")
    ds = datasets.Dataset.from_list(rows)
    batched = ds.map(fn, batched=True, load_from_cache_file=False)["input_ids"]
    assert '"ids": [1, null]' in tok.decode(batched[0])
    assert ds.map(fn, load_from_cache_file=False)["input_ids"] == batched


def test_json_nulls_in_string_columns_are_kept(tok):
    """A null in JSON (``"default": null`` in a tool's schema, a ``null`` argument) is a value
    the template renders; tools and arguments stored as JSON strings keep it from Arrow too,
    and the text equals the dict batch's."""
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "default": None}},
        "required": ["city"]}}}
    args = {"city": "Paris", "unit": None}
    rows = [_tool_conv("get_weather", args, "Weather in Paris?", [tool])]
    fn = tokenize_chat(tok, "qwen2.5")
    want = [list(x) for x in fn(_as_dict_batch(rows))["input_ids"]]
    text = tok.decode(want[0])
    assert '"unit": {"type": "string", "default": null}' in text
    assert '{"name": "get_weather", "arguments": {"city": "Paris", "unit": null}}' in text
    as_strings = [_tool_conv("get_weather", json.dumps(args), "Weather in Paris?", json.dumps([tool]))]
    table = pa.Table.from_pylist(as_strings)
    assert pa.types.is_string(table.schema.field("tools").type)
    assert fn(table).column("input_ids").to_pylist() == want


def test_a_system_prompt_column_is_written_or_refused(tok):
    """A batch with a "system" / "system_prompt" column (LLaMA-Factory's and OpenOrca's layouts)
    lost it without a word, the format's default system prompt standing in (explorer G11):
    with system_column=None (the default) it is refused; system_column="system" writes each
    row's value as its system message, exactly as the same message inside the messages would
    be (a leading system message of the same text is kept once, a different one is a row
    error; null or "" is none); system_column=False leaves it out on purpose."""
    from rmlprep.chat import encode_chat

    conv = CONVS[0]
    batch = {"messages": [conv, conv, [{"role": "system", "content": "be kind"}, *conv],
                          [{"role": "system", "content": "other"}, *conv]],
             "system": ["be kind", None, "be kind", "be kind"]}
    for name in ("system", "system_prompt"):
        with pytest.raises(ConfigError, match=rf"^tokenize_chat: the batch has a column '{name}' \(each conversation's "
                                              rf"system prompt\): .*system_column='{name}' .*system_column=False"):
            tokenize_chat(tok, "chatml")({"messages": batch["messages"], name: batch["system"]})
    out = tokenize_chat(tok, "chatml", system_column="system", on_error="record")(pa.table(batch))
    with_system = encode_chat(tok, [{"role": "system", "content": "be kind"}, *conv], "chatml").input_ids
    assert ids_of(out["input_ids"]) == [with_system, encode_chat(tok, conv, "chatml").input_ids, with_system, []]
    assert out["error"].to_pylist()[:3] == [None] * 3
    assert out["error"][3].as_py().startswith("the row has a system prompt in 'system' and a different system message")
    one = tokenize_chat(tok, "chatml", system_column="system")({"messages": conv, "system": "be kind"})  # unbatched
    assert one["input_ids"].tolist() == with_system
    off = tokenize_chat(tok, "chatml", system_column=False)(batch)
    assert ids_of(off["input_ids"])[0] == encode_chat(tok, conv, "chatml").input_ids
    with pytest.raises(ConfigError, match="system_column=True: name the column"):
        tokenize_chat(tok, "chatml", system_column=True)


def test_a_media_column_is_refused_as_the_sft_run_refuses_it(tok):
    """A vision SFT batch (an "images" column beside messages holding <image>) was encoded as
    text by tokenize_chat while the sft run refused it (chat.ignore_media, explorer G10): now
    refused alike, in the same words with the keyword for the config key, in a dict, a Table
    and both datasets maps; ignore_media=True leaves the column out on purpose (the ids of
    the messages alone); a column named as the messages column is not media."""
    import datasets

    conv = [{"role": "user", "content": "<image>\nWhat is shown?"}, {"role": "assistant", "content": "A bus."}]
    alone = tokenize_chat(tok, "chatml")({"messages": [conv]})["input_ids"]
    fn = tokenize_chat(tok, "chatml")
    for name in ("images", "image", "audio", "video"):
        batch = {"messages": [conv], name: [[{"bytes": b"\x89PNG", "path": "a.png"}]]}
        want = (f"tokenize_chat: the batch has a column {name!r} (media beside the messages, which a vision trainer "
                "passes to its processor): every row would be trained as text, an <image> placeholder as words; "
                "rmlprep writes text only: drop the column if the placeholders are meant as text, or pass "
                "ignore_media=True to leave it out on purpose")
        for call in (lambda: fn(batch), lambda: fn(pa.table(batch)),
                     lambda: datasets.Dataset.from_dict(batch).map(fn, batched=True, load_from_cache_file=False),
                     lambda: datasets.Dataset.from_dict(batch).map(fn, load_from_cache_file=False)):
            with pytest.raises(ConfigError) as e:
                call()
            assert str(e.value) == want
        off = tokenize_chat(tok, "chatml", ignore_media=True)
        assert ids_of(off(batch)["input_ids"]) == ids_of(alone)
        ds = datasets.Dataset.from_dict(batch).map(off, batched=True, load_from_cache_file=False)
        assert ds["input_ids"] == ids_of(alone)
    # an Image feature (the Hugging Face vision sets) is decoded by datasets when a row's column
    # is read: an unbatched map read every column, so an image it could not decode (or no
    # Pillow) failed the map instead of the refusal, or of ignore_media=True's ids
    ds = datasets.Dataset.from_dict({"messages": [conv], "image": [{"bytes": b"not a png", "path": "a.png"}]})
    ds = ds.cast_column("image", datasets.Image())
    with pytest.raises(ConfigError, match=r"^tokenize_chat: the batch has a column 'image' \(media"):
        ds.map(fn, load_from_cache_file=False)
    with pytest.raises(ConfigError, match=r"^tokenize_chat: the batch has a column 'image' \(media"):
        ds.map(tokenize_chat(tok, "chatml", keep_columns=True), load_from_cache_file=False)  # reads every column
    off = tokenize_chat(tok, "chatml", ignore_media=True)
    assert ds.map(off, load_from_cache_file=False)["input_ids"] == ids_of(alone)
    images_as_messages = tokenize_chat(tok, "chatml", column="images")({"images": [conv]})["input_ids"]
    assert ids_of(images_as_messages) == ids_of(alone)
    # the default callable pickles as before (datasets' cache fingerprint unchanged)
    assert "ignore_media" not in pickle.loads(pickle.dumps(fn))._options


def test_input_columns_naming_a_second_column_is_refused(tok):
    """``datasets.map(fn, input_columns=["messages", "tools"])`` passes each named column as its
    own argument: the second arrived where the dataset indices go and its values went unread,
    so tools the user named, a system prompt or images (the columns the callable refuses when it
    sees them) reached no prompt without a word. Refused, batched and unbatched; one column, and
    with_indices's ints, still map."""
    import datasets

    conv = [{"role": "user", "content": "<image>\nWhat is shown?"}, {"role": "assistant", "content": "A bus."}]
    tools = [{"type": "function", "function": {"name": "f", "description": "d",
                                               "parameters": {"type": "object", "properties": {}}}}]
    fn = tokenize_chat(tok, "chatml", tools_column="tools")
    for other, value in (("tools", tools), ("system", "be kind"), ("images", ["a.png"])):
        ds = datasets.Dataset.from_dict({"messages": [conv, conv], other: [value, value]})
        for kw in ({"batched": True}, {}):
            with pytest.raises(ConfigError, match=r"^TokenizeChat: called with a second column .*name only "
                                                  r"'messages' in input_columns"):
                ds.map(fn, input_columns=["messages", other], load_from_cache_file=False, **kw)
        alone = ds.map(fn, input_columns=["messages"], with_indices=True, batched=True, load_from_cache_file=False)
        assert alone["input_ids"] == [ids_of(fn({"messages": [conv]})["input_ids"])[0]] * 2
    texts = datasets.Dataset.from_dict({"text": ["a b", "c"], "src": ["x", "y"]})
    with pytest.raises(ConfigError, match="called with a second column"):
        texts.map(tokenize_text(tok), batched=True, input_columns=["text", "src"], load_from_cache_file=False)
    # a caller's own indices, a list or an integer numpy array, still name the rows
    for idx in ([7, 8], np.array([7, 8])):
        with pytest.raises(RowError, match="row 1 of the batch, dataset index 8"):
            tokenize_text(tok)(["a", None], idx)


def test_input_columns_messages_alone_with_tool_calls_is_refused(tok):
    """Careless-user trial S3: ``ds.map(fn, input_columns=["messages"])`` hands over the messages
    alone, so the dataset's ``tools`` column never reached the callable and a conversation with
    tool calls was written without its definitions (qwen2.5: 83 ids instead of 205), counted
    only in ``fn.stats``. Now refused, batched and unbatched, naming both fixes; rows without
    tool calls still map alone; ``tools_column=None`` writes them without definitions on
    purpose, the same ids as a batch without a tools column. Where the batch is seen whole and
    holds no tools, the row is written, counted and warned of once (the sft run names it in its
    summary)."""
    import warnings

    import datasets

    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER])]
    ds = datasets.Dataset.from_list(rows)
    fn = tokenize_chat(tok, "qwen2.5")
    for kw in ({"batched": True}, {}):
        with pytest.raises(ConfigError, match=r"^tokenize_chat: row 0 of the batch calls a tool \(tool_calls\), "
                                              r"and the batch is the 'messages' column alone .*leave input_columns "
                                              r"out so the 'tools' column is read, or pass tools_column=None"):
            ds.map(fn, input_columns=["messages"], load_from_cache_file=False, **kw)
    whole = ds.map(fn, batched=True, load_from_cache_file=False)["input_ids"]
    assert "# Tools" in tok.decode(whole[0])
    off = tokenize_chat(tok, "qwen2.5", tools_column=None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        alone = ds.map(off, input_columns=["messages"], batched=True, load_from_cache_file=False)["input_ids"]
        assert seen == []  # tools_column=None: left out on purpose, no warning
        bare = fn({"messages": [rows[0]["messages"]] * 2})
    assert ids_of(bare["input_ids"])[0] == alone[0] and len(alone[0]) < len(whole[0])
    assert fn.stats["tool_calls_without_tools"] == 2
    assert [str(w.message) for w in seen] == [
        "tokenize_chat: a conversation calls tools (tool_calls) with no tool definitions beside it (a null or "
        "empty tools value, or no tools column in the batch): it is written, and the model learns to call tools "
        "its prompt never shows; fn.stats['tool_calls_without_tools'] counts them (the sft run names them in its "
        "summary)"]
    tool_turn_only = [{"role": "user", "content": "x"}, {"role": "tool", "content": "20C"},
                      {"role": "assistant", "content": "ok"}]
    with pytest.raises(ConfigError, match=r"row 1 of the batch holds a tool turn"):
        fn([[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], tool_turn_only])
    plain = datasets.Dataset.from_dict({"messages": [[{"role": "user", "content": "x"},
                                                      {"role": "assistant", "content": "y"}]], "tools": [None]})
    assert len(plain.map(fn, input_columns=["messages"], batched=True, load_from_cache_file=False)) == 1


def test_arrow_map_columns_read_as_the_dicts_they_are(tok):
    """An explorer finding (n2): Spark and Delta write Python dicts as Arrow ``map<string,
    string>``; ``to_pylist`` gives a map's (key, value) pairs, so ``list<map>`` messages and map
    ``arguments`` were refused per row as "got list". A map is read as its dict (a null value is
    the row's own, kept); the expected ids are those of the same rows as a dict batch (JSONL).
    A map holding a key twice is no dict: refused per row, naming the key."""
    m = pa.map_(pa.string(), pa.string())
    conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    fn = tokenize_chat(tok, "qwen2.5", on_error="record")
    want = ids_of(fn({"messages": [conv]})["input_ids"])
    table = pa.table({"messages": pa.array([[list(x.items()) for x in conv]], type=pa.list_(m))})
    out = fn(table)
    assert out.column("error").to_pylist() == [None] and out.column("input_ids").to_pylist() == want
    rows = [_tool_conv("get_weather", {"city": "Paris"}, "Weather in Paris?", [_WEATHER])]
    want = ids_of(fn(_as_dict_batch(rows))["input_ids"])
    assert '"arguments": {"city": "Paris"}' in tok.decode(want[0])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", pa.struct(
        [("name", pa.string()), ("arguments", m)]))])
    msg = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                     ("tool_call_id", pa.string()), ("name", pa.string())])
    msgs = [{**x, "tool_calls": [{**c, "function": {**c["function"], "arguments": list(c["function"]["arguments"].items())}}
                                 for c in x["tool_calls"]]} if "tool_calls" in x else x for x in rows[0]["messages"]]
    table = pa.table({"messages": pa.array([msgs], type=pa.list_(msg)), "tools": pa.array([rows[0]["tools"]])})
    assert fn(table).column("input_ids").to_pylist() == want
    dup = pa.table({"messages": pa.array([[[("role", "user"), ("role", "user"), ("content", "Hi")],
                                            list(conv[1].items())]], type=pa.list_(m))})
    (err,) = fn(dup).column("error").to_pylist()
    assert "message 0: must be a dict with 'role' and 'content', got an Arrow map with the key 'role' twice" in err


def test_decode_takes_an_arrow_row_of_ids(tok):
    """An explorer finding (n1): a Table from tokenize_text holds ``input_ids`` as
    ``list<uint32>``; iterating a row gives pyarrow scalars, and ``tok.decode(list(row))`` raised
    a bare TypeError. Worked example: the row decodes as its Python ints do; a null id is a
    TokenIdError naming it."""
    from rmlprep.errors import TokenIdError

    out = tokenize_text(tok, add_special_tokens=False)(pa.table({"text": ["ab cd", "x"]}))
    row = out.column("input_ids")[0]
    want = tok.decode(row.as_py())
    assert want == "ab cd"
    assert tok.decode(list(row)) == tok.decode(row) == tok.decode(row.values) == want
    assert tok.decode_bytes(list(row)) == b"ab cd"
    with pytest.raises(TokenIdError, match="is not an integer"):
        tok.decode(pa.array([row.as_py()[0], None], pa.uint32()))


def test_json_tools_off_warns_once_per_callable_what_it_counts(tok):
    """tokenize_chat(json_tools=False) writes LLaMA-Factory's tool calls (JSON text in the
    assistant's content) as that text and tool parameters stored as a JSON string as one escaped
    string, and said so only in fn.stats, which a datasets .map(num_proc=2) never hands back
    (each worker holds its own copy): the user saw nothing. Now the first such conversation of a
    callable warns (once per process, so once per num_proc worker), as tool calls without
    definitions already did; the sft run (fn.warn = False) names them in its summary instead."""
    import warnings

    call = json.dumps({"name": "get_time", "arguments": {"tz": "UTC"}})
    conv = [{"role": "user", "content": "time?"}, {"role": "assistant", "content": call}]
    plain = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    fn = tokenize_chat(tok, "chatml", text_markers=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn({"messages": [plain]})
        assert seen == []
        fn({"messages": [conv, conv, plain]})
    assert fn.stats["json_tool_calls_as_text"] == 2
    assert [str(w.message) for w in seen] == [
        "tokenize_chat: a conversation writes tool calls as JSON text in the assistant's content (LLaMA-Factory's "
        "shape): it is trained as that text, not as the format's tool calls; json_tools=True converts them; "
        "fn.stats['json_tool_calls_as_text'] counts them"]
    quiet = tokenize_chat(tok, "chatml", text_markers=True)
    quiet.warn = False
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet({"messages": [conv]})
    assert seen == [] and quiet.stats["json_tool_calls_as_text"] == 1


def test_json_tools_off_warning_reaches_the_user_from_num_proc_workers(tok, tmp_path):
    """The same warning from datasets .map(num_proc=2), in a fresh interpreter as a user runs it
    (pytest records warnings instead of printing them): each worker warns once on its stderr,
    the parent's, so the user sees it though fn.stats stays in the workers."""
    p = tmp_path / "fn.pkl"
    p.write_bytes(pickle.dumps(tokenize_chat(tok, "chatml", text_markers=True)))
    script = (
        "import json, pickle, sys, datasets\n"
        "fn = pickle.load(open(sys.argv[1], 'rb'))\n"
        "call = json.dumps({'name': 'get_time', 'arguments': {'tz': 'UTC'}})\n"
        "conv = [{'role': 'user', 'content': 'time?'}, {'role': 'assistant', 'content': call}]\n"
        "ds = datasets.Dataset.from_list([{'messages': conv}] * 4)\n"
        "out = ds.map(fn, batched=True, batch_size=2, num_proc=2, load_from_cache_file=False)\n"
        "print(len(out), fn.stats['json_tool_calls_as_text'])\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(p)], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), HF_DATASETS_DISABLE_PROGRESS_BARS="1"), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "0"]  # the parent's callable counted nothing: the workers did
    assert r.stderr.count("tokenize_chat: a conversation writes tool calls as JSON text") == 2, r.stderr


def test_the_pickled_callable_names_its_output_version(tok, monkeypatch):
    """``datasets.map`` keys its cache by the callable's pickle, which carries
    ``OUTPUT_VERSION`` for that reason (a cache an older rmlprep wrote must not be reused when
    the output changed). cf67745 changed tokenize_chat's output on a SentencePiece ``.model``
    read alone without a bump: the ``llama2`` format on Llama 2's ``.model`` was refused (an
    error row with ``on_error="record"``) and now encodes (``[1, 518, 25580, ...]``), on Mistral
    v3's it encoded (``[1, 3, 16127, ...]``) and is now refused; a map cached by 33ef2e2 was
    served by the newer code (verified: the same datasets fingerprint, 0f5491d6bfa73e98, and the
    cached error row came back). Here the pickle differs from the one of version 5, the last
    before that change."""
    import rmlprep.arrow_base as base

    fn = tokenize_chat(tok, "chatml")
    now = pickle.dumps(fn)
    monkeypatch.setattr(base, "OUTPUT_VERSION", 5)
    assert pickle.dumps(fn) != now
