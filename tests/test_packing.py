"""Tests for rmlprep.packing: worked examples, round trips, hostile shapes, errors, stats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmlprep.errors import PackingError
from rmlprep.packing import (
    IGNORE_INDEX,
    PackStats,
    flat_offsets,
    naive_padding_ratio,
    pack_bfd,
    pack_concat,
    unpack,
)

CHAT = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "chat"
U32 = pa.list_(pa.uint32())


def cols(batch: pa.RecordBatch) -> dict:
    return batch.to_pydict()


# --------------------------------------------------------------------------------------------
# worked examples


def test_concat_worked_example_with_eos():
    """docs [1,2,3], [4,5], [6,7,8,9]; seq_len 4, eos 0.

    Framed stream: 1 2 3 0 | 4 5 0 | 6 7 8 9 0  (12 tokens = 3 full rows, no tail).
    Rows cut every 4:   [1,2,3,0]  [4,5,0,6]  [7,8,9,0]
    seq_lengths:        [4]        [3,1]      [4]       (doc 2 is split 1 + 4 across rows 1, 2)
    position_ids restart at every fragment, also the continued one in row 2:
                        [0,1,2,3]  [0,1,2,0]  [0,1,2,3]
    example_index:      [0]        [1,2]      [2]
    Doc 2 framed is 5 tokens > 4, so it is the one over-long document.
    """
    r = pack_concat([[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4, eos_id=0)
    assert cols(r.rows) == {
        "input_ids": [[1, 2, 3, 0], [4, 5, 0, 6], [7, 8, 9, 0]],
        "position_ids": [[0, 1, 2, 3], [0, 1, 2, 0], [0, 1, 2, 3]],
        "seq_lengths": [[4], [3, 1], [4]],
        "example_index": [[0], [1, 2], [2]],
    }
    assert r.tail.num_rows == 0
    assert r.over_long.tolist() == [2]
    assert r.stats.rows == 3 and r.stats.packed_tokens == 12 and r.stats.tokens == 9
    assert r.stats.tail_tokens == 0 and r.stats.padding_ratio == 0.0
    assert r.rows.schema.field("input_ids").type == U32
    assert r.rows.schema.field("position_ids").type == pa.list_(pa.int32())
    assert r.rows.schema.field("seq_lengths").type == pa.list_(pa.int32())
    assert r.rows.schema.field("example_index").type == pa.list_(pa.int64())


def test_concat_worked_example_tail():
    """Same docs, no eos: stream 1..9 (9 tokens) -> 2 rows of 4, tail [9].

    rows [1,2,3,4] (doc 0 = 3 tokens, doc 1 starts: seq_lengths [3,1]),
         [5,6,7,8] (doc 1 ends: 1, doc 2 starts: 3 -> [1,3]); tail [9] with seq_lengths [1].
    """
    r = pack_concat([[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4)
    assert cols(r.rows)["input_ids"] == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert cols(r.rows)["seq_lengths"] == [[3, 1], [1, 3]]
    assert cols(r.rows)["position_ids"] == [[0, 1, 2, 0], [0, 0, 1, 2]]
    assert cols(r.tail) == {
        "input_ids": [[9]],
        "position_ids": [[0]],
        "seq_lengths": [[1]],
        "example_index": [[2]],
    }
    assert r.stats.tail_tokens == 1
    assert unpack([r.rows, r.tail]).to_dict() == {0: [1, 2, 3], 1: [4, 5], 2: [6, 7, 8, 9]}


def test_all_rows_holds_the_tail_and_unpacked_is_indexed_by_position():
    """Careless-user trial U10 and unpack(t)["input_ids"]. ``pack_concat(...).rows`` leaves the
    short last row in ``.tail`` (documented), so writing ``.rows`` of a single call lost the
    last 1..seq_len-1 tokens: ``all_rows`` is rows then tail (the worked example above: [9]
    last). An Unpacked indexed by a column name raised numpy's IndexError; it is a PackingError
    naming unpack(rows, column=...). unpacked[-1] was ``values[offsets[-1]:offsets[0]]``, an
    empty array; it is the last document."""
    r = pack_concat([[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4)
    assert cols(r.all_rows)["input_ids"] == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert r.all_rows.schema == r.rows.schema
    full = pack_concat([[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4, eos_id=0)
    assert full.all_rows is full.rows  # no tail (the first worked example)
    u = unpack(r.all_rows)
    assert u.to_dict() == {0: [1, 2, 3], 1: [4, 5], 2: [6, 7, 8, 9]}
    assert u[-1].tolist() == [6, 7, 8, 9] and u[np.int64(1)].tolist() == [4, 5] and len(list(u)) == 3
    with pytest.raises(PackingError, match=r"^Unpacked\['input_ids'\]: documents are indexed by position, .*"
                                           r"unpack\(rows, column='input_ids'\) rebuilds that column$"):
        u["input_ids"]
    with pytest.raises(IndexError, match=r"Unpacked\[3\]: out of range \(3 documents\)"):
        u[3]


def test_concat_worked_example_bos_eos_truncate():
    """bos 100, eos 0, seq_len 4, overflow truncate.

    Framed: [100,1,2,3,0] (5 > 4: keep first 4 -> [100,1,2,3], eos cut: 1 truncated token),
            [100,4,5,0] (4, fits), [100,6,7,8,9,0] (6 > 4 -> [100,6,7,8], 2 truncated).
    Stream: 100 1 2 3 | 100 4 5 0 | 100 6 7 8 -> three full rows, one document each.
    """
    r = pack_concat(
        [[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4, eos_id=0, bos_id=100, overflow="truncate"
    )
    assert cols(r.rows)["input_ids"] == [[100, 1, 2, 3], [100, 4, 5, 0], [100, 6, 7, 8]]
    assert cols(r.rows)["seq_lengths"] == [[4], [4], [4]]
    assert r.stats.truncated_tokens == 3
    assert r.over_long.tolist() == [0, 2]


def test_concat_worked_example_drop():
    """eos 0, seq_len 4, overflow drop: doc 0 framed [1,2,3,0] fits; doc 1 [4,5,0] fits;
    doc 2 framed is 5 > 4 and is dropped (listed, counted).
    Stream 1 2 3 0 | 4 5 0 -> one row [1,2,3,0], tail [4,5,0]."""
    r = pack_concat([[1, 2, 3], [4, 5], [6, 7, 8, 9]], seq_len=4, eos_id=0, overflow="drop")
    assert cols(r.rows)["input_ids"] == [[1, 2, 3, 0]]
    assert cols(r.tail)["input_ids"] == [[4, 5, 0]]
    assert r.dropped.tolist() == [2]
    assert r.stats.dropped_documents == 1 and r.stats.dropped_tokens == 4


def test_bfd_worked_example():
    """examples [1,2,3], [4,5], [6,7,8,9], [10]; seq_len 5.

    Longest first (ties keep input order): #2 (4), #0 (3), #1 (2), #3 (1).
    #2 -> new row 0 (1 free); #0 -> new row 1 (2 free); #1 (2) -> row 1, the fullest it fits
    (0 free); #3 (1) -> row 0 (0 free).
    Rows: [6,7,8,9,10] seq_lengths [4,1]; [1,2,3,4,5] seq_lengths [3,2]. No padding.
    """
    r = pack_bfd([[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]], seq_len=5)
    assert cols(r.rows) == {
        "input_ids": [[6, 7, 8, 9, 10], [1, 2, 3, 4, 5]],
        "position_ids": [[0, 1, 2, 3, 0], [0, 1, 2, 0, 1]],
        "seq_lengths": [[4, 1], [3, 2]],
        "example_index": [[2, 3], [0, 1]],
    }
    assert r.stats.padding_ratio == 0.0
    # one example per row: 10 real tokens in 4 rows of 5 -> 1 - 10/20
    assert naive_padding_ratio([3, 2, 4, 1], 5) == 0.5


def test_bfd_worked_example_padded_with_labels_and_masks():
    """Same examples, seq_len 6, pad 99, labels = ids, masks 1 on the last token of each.

    #2 (4) -> row 0 (2 free); #0 (3) -> row 1 (3 free); #1 (2) fits row 0 (2 free, fuller than
    row 1's 3) -> row 0 full; #3 (1) -> row 1 (2 free).
    Row 0 [6,7,8,9,4,5]; row 1 [1,2,3,10] + 2 pads -> [1,2,3,10,99,99], labels -100 for the
    pads and for each fragment's first token (see test_bfd_masks_the_first_label_of_every_fragment), masks 0; the pad run is a fragment of its own: seq_lengths [3,1,2], example_index
    [0,3,-1], position_ids restart at it: [0,1,2,0,0,1].
    Padding ratio 2 / 12.
    """
    docs = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
    masks = [[0] * (len(d) - 1) + [1] for d in docs]
    r = pack_bfd(docs, docs, seq_len=6, pad_id=99, assistant_masks=masks)
    assert cols(r.rows) == {
        "input_ids": [[6, 7, 8, 9, 4, 5], [1, 2, 3, 10, 99, 99]],
        "labels": [[-100, 7, 8, 9, -100, 5], [-100, 2, 3, -100, -100, -100]],
        "assistant_masks": [[0, 0, 0, 1, 0, 1], [0, 0, 1, 1, 0, 0]],
        "position_ids": [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 0, 1]],
        "seq_lengths": [[4, 2], [3, 1, 2]],
        "example_index": [[2, 1], [0, 3, -1]],
    }
    assert r.stats.pad_tokens == 2 and r.stats.padding_ratio == pytest.approx(2 / 12)
    assert r.rows.schema.field("labels").type == pa.list_(pa.int32())
    assert r.rows.schema.field("assistant_masks").type == pa.list_(pa.uint8())
    assert unpack(r.rows).to_dict() == dict(enumerate(docs))
    assert unpack(r.rows, "assistant_masks").to_dict() == dict(enumerate(masks))


def test_bfd_worked_example_split():
    """[1..7] with seq_len 3, overflow split: chunks [1,2,3], [4,5,6], [7] (same example 0);
    [8,9] is example 1. Longest first: chunk0, chunk1 (full rows 0, 1), [8,9] -> row 2,
    [7] -> row 2 (the only open row)."""
    r = pack_bfd([[1, 2, 3, 4, 5, 6, 7], [8, 9]], seq_len=3, overflow="split")
    assert cols(r.rows)["input_ids"] == [[1, 2, 3], [4, 5, 6], [8, 9, 7]]
    assert cols(r.rows)["example_index"] == [[0], [0], [1, 0]]
    assert r.stats.split_examples == 1
    assert unpack(r.rows).to_dict() == {0: [1, 2, 3, 4, 5, 6, 7], 1: [8, 9]}


def test_bfd_masks_the_first_label_of_every_fragment():
    """Labels are unshifted and a Hugging Face loss shifts them over the flat row, so a
    fragment's first label would be predicted from the previous fragment's last token (another
    example): pack_bfd writes it -100, as TRL's padding-free collator (``labels[position_ids ==
    0] = -100``) and transformers' DataCollatorWithFlattening do (explorer5 X3).

    Worked example (``seq_len=5``, split): example 1 [1..7] is cut into (1..5) and (6, 7);
    longest first: (1..5) -> row 0, example 0 (3) -> row 1, (6, 7) -> row 1. The chunk (6, 7)
    starts inside the answer: its labels [6, 7] become [-100, 7]; example 0's first label
    was -100 already. Assistant masks are not changed."""
    r = pack_bfd([[100, 101, 102], [1, 2, 3, 4, 5, 6, 7]],
                 labels=[[-100, 101, 102], [-100, 2, 3, 4, 5, 6, 7]], seq_len=5, overflow="split",
                 assistant_masks=[[0, 1, 1], [0, 1, 1, 1, 1, 1, 1]])
    d = cols(r.rows)
    assert d["input_ids"] == [[1, 2, 3, 4, 5], [100, 101, 102, 6, 7]]
    assert d["position_ids"] == [[0, 1, 2, 3, 4], [0, 1, 2, 0, 1]]
    assert d["labels"] == [[-100, 2, 3, 4, 5], [-100, 101, 102, -100, 7]]
    assert d["assistant_masks"] == [[0, 1, 1, 1, 1], [0, 1, 1, 1, 1]]
    assert unpack(r.rows, "labels").to_dict() == {0: [-100, 101, 102], 1: [-100, 2, 3, 4, 5, -100, 7]}
    # a whole example is a fragment too, in any mode, padded or not; the input is not changed
    labels = [[9, 8], [7]]
    r = pack_bfd([[1, 2], [3]], labels=labels, seq_len=4, pad_id=0)
    assert cols(r.rows)["labels"] == [[-100, 8, -100, -100]] and labels == [[9, 8], [7]]


# --------------------------------------------------------------------------------------------
# property tests

ids = st.one_of(st.integers(0, 30), st.sampled_from([0, 2**32 - 1]))
docs_st = st.lists(st.lists(ids, max_size=14), max_size=14)
FORMS = ["pylist", "arrow", "sliced", "large", "chunked", "numpy"]


def as_form(docs: list[list[int]], form: str, value_type: pa.DataType = pa.uint32()):
    """The same documents in one of the accepted input forms."""
    if form == "pylist":
        return docs
    if form == "arrow":
        return pa.array(docs, type=pa.list_(value_type))
    if form == "sliced":
        padded = [[7, 7]] + docs + [[9]]
        return pa.array(padded, type=pa.list_(value_type)).slice(1, len(docs))
    if form == "large":
        return pa.array(docs, type=pa.large_list(value_type))
    if form == "chunked":
        half = len(docs) // 2
        t = pa.list_(value_type)
        return pa.chunked_array([pa.array(docs[:half], t), pa.array(docs[half:], t)], type=t)
    if form == "numpy":
        lens = [len(d) for d in docs]
        values = np.array([5, 5] + [x for d in docs for x in d], dtype=np.int64)
        offsets = np.concatenate([[2], 2 + np.cumsum(lens, dtype=np.int64)])
        return values, offsets
    raise AssertionError(form)


def check_boundaries(batch: pa.RecordBatch, seq_len: int) -> None:
    """seq_lengths tile every row; position_ids restart at every fragment; rows <= seq_len."""
    d = cols(batch)
    for row, seq, pos in zip(d["input_ids"], d["seq_lengths"], d["position_ids"]):
        assert len(row) <= seq_len
        assert sum(seq) == len(row) == len(pos)
        assert all(s > 0 for s in seq)
        assert pos == [p for s in seq for p in range(s)]


def framed(doc, bos, eos):
    return ([bos] if bos is not None else []) + doc + ([eos] if eos is not None else [])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=docs_st,
    seq_len=st.integers(1, 9),
    eos=st.sampled_from([None, 0, 2**32 - 1]),
    bos=st.sampled_from([None, 1]),
    overflow=st.sampled_from(["wrap", "truncate", "drop"]),
    form=st.sampled_from(FORMS),
)
def test_concat_round_trip(docs, seq_len, eos, bos, overflow, form):
    r = pack_concat(as_form(docs, form), seq_len=seq_len, eos_id=eos, bos_id=bos, overflow=overflow)
    expected, dropped, over, cut = {}, [], [], 0
    for i, d in enumerate(docs):
        f = framed(d, bos, eos)
        if len(f) > seq_len:
            over.append(i)
            if overflow == "drop":
                dropped.append(i)
                continue
            if overflow == "truncate":
                cut += len(f) - seq_len
                f = f[:seq_len]
        if f:
            expected[i] = f
    assert unpack([r.rows, r.tail]).to_dict() == expected
    assert r.dropped.tolist() == dropped and r.over_long.tolist() == over
    # the stream is the framed documents in input order
    stream = [x for f in expected.values() for x in f]
    got = [x for row in cols(r.rows)["input_ids"] + cols(r.tail)["input_ids"] for x in row]
    assert got == stream
    assert all(len(row) == seq_len for row in cols(r.rows)["input_ids"])
    assert r.tail.num_rows == (1 if len(stream) % seq_len else 0)
    check_boundaries(r.rows, seq_len)
    check_boundaries(r.tail, seq_len - 1 if seq_len > 1 else 0)
    s = r.stats
    assert s.documents == len(docs) and s.tokens == sum(map(len, docs))
    assert s.packed_tokens + s.tail_tokens == len(stream)
    assert s.rows * seq_len == s.packed_tokens and s.pad_tokens == 0
    assert s.truncated_tokens == cut and s.dropped_documents == len(dropped)
    assert s.empty_documents == len(r.empty) == sum(1 for d in docs if not framed(d, bos, eos))


def reference_bfd(lengths: list[int], seq_len: int) -> list[list[int]]:
    """Textbook best-fit-decreasing, O(n^2): item order per bin, bins in opening order."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    free: list[int] = []
    bins: list[list[int]] = []
    for i in order:
        best = None
        for b, room in enumerate(free):
            if room >= lengths[i] and (best is None or room < free[best]):
                best = b
        if best is None:
            free.append(seq_len)
            bins.append([])
            best = len(free) - 1
        free[best] -= lengths[i]
        bins[best].append(i)
    return bins


@st.composite
def sft_batch(draw):
    docs = draw(docs_st)
    labels = [[draw(st.sampled_from([IGNORE_INDEX, min(x, 2**31 - 1), -(2**31)])) for x in d] for d in docs]  # int32
    masks = [[draw(st.integers(0, 1)) for _ in d] for d in docs]
    return docs, labels, masks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=sft_batch(),
    seq_len=st.integers(1, 9),
    overflow=st.sampled_from(["truncate", "split", "drop"]),
    pad=st.sampled_from([None, 3]),
    form=st.sampled_from(FORMS),
    with_extras=st.booleans(),
)
def test_bfd_round_trip(batch, seq_len, overflow, pad, form, with_extras):
    docs, labels, masks = batch
    kw = {}
    if with_extras:
        kw = dict(labels=as_form(labels, form, pa.int64()), assistant_masks=as_form(masks, form))
    r = pack_bfd(as_form(docs, form), seq_len=seq_len, overflow=overflow, pad_id=pad, **kw)
    keep = {}
    for i, d in enumerate(docs):
        if not d or (overflow == "drop" and len(d) > seq_len):
            continue
        keep[i] = len(d) if overflow == "split" else min(len(d), seq_len)
    assert unpack(r.rows).to_dict() == {i: docs[i][:n] for i, n in keep.items()}
    if with_extras:  # every fragment's first label is -100: at every seq_len-th token (split)
        assert unpack(r.rows, "labels").to_dict() == {
            i: [IGNORE_INDEX if j % seq_len == 0 else x for j, x in enumerate(labels[i][:n])]
            for i, n in keep.items()
        }
        assert unpack(r.rows, "assistant_masks").to_dict() == {
            i: masks[i][:n] for i, n in keep.items()
        }
    check_boundaries(r.rows, seq_len)
    d = cols(r.rows)
    if pad is not None:
        assert all(len(row) == seq_len for row in d["input_ids"])
    # never split unless asked: one fragment per example; with split, ceil(len / seq_len)
    frags = [x for row in d["example_index"] for x in row if x >= 0]
    for i in keep:
        want = -(-len(docs[i]) // seq_len) if overflow == "split" else 1
        assert frags.count(i) == want
    # pad runs carry pad values, -100 labels and 0 masks
    for row_ids, ex_row, seq_row, *extra in zip(
        d["input_ids"], d["example_index"], d["seq_lengths"], *(
            [d["labels"], d["assistant_masks"]] if with_extras else []
        )
    ):
        if ex_row[-1] == -1:
            n = seq_row[-1]
            assert row_ids[-n:] == [pad] * n
            if extra:
                assert extra[0][-n:] == [IGNORE_INDEX] * n and extra[1][-n:] == [0] * n
    # the placement is exactly best-fit-decreasing (fragments = items for split)
    if overflow != "split":
        items = sorted(keep)
        bins = reference_bfd([keep[i] for i in items], seq_len)
        assert [[x for x in row if x >= 0] for row in d["example_index"]] == [
            [items[k] for k in b] for b in bins
        ]
    s = r.stats
    real = sum(keep.values())
    assert s.packed_tokens == real and s.rows == r.rows.num_rows
    assert s.pad_tokens == s.rows * seq_len - real
    if overflow == "truncate":
        assert s.truncated_tokens == sum(max(0, len(x) - seq_len) for x in docs)
    assert r.dropped.tolist() == ([i for i, x in enumerate(docs) if len(x) > seq_len]
                                  if overflow == "drop" else [])
    if s.rows and overflow != "split":  # (naive truncates, so it is no baseline for split)
        assert s.padding_ratio <= naive_padding_ratio([keep[i] for i in keep], seq_len) + 1e-12


@settings(max_examples=50, deadline=None)
@given(docs=docs_st, seq_len=st.integers(1, 9))
def test_deterministic(docs, seq_len):
    a = pack_bfd(docs, seq_len=seq_len, overflow="split")
    b = pack_bfd(as_form(docs, "arrow"), seq_len=seq_len, overflow="split")
    assert a.rows.equals(b.rows)
    c = pack_concat(docs, seq_len=seq_len, eos_id=0)
    d = pack_concat(as_form(docs, "numpy"), seq_len=seq_len, eos_id=0)
    assert c.rows.equals(d.rows) and c.tail.equals(d.tail)


# --------------------------------------------------------------------------------------------
# inputs and hostile shapes


def test_sliced_list_array_uses_the_slice():
    arr = pa.array([[50, 51], [1, 2, 3], [4], [60, 61, 62]], type=U32).slice(1, 2)
    """Slice [1,2,3], [4] of a 4-row array; eos 0, seq_len 3: stream 1 2 3 0 4 0 -> rows
    [1,2,3], [0,4,0] with seq_lengths [3], [1,2] (the eos that ends doc 0 opens row 1)."""
    r = pack_concat(arr, seq_len=3, eos_id=0)
    assert cols(r.rows)["input_ids"] == [[1, 2, 3], [0, 4, 0]]
    assert cols(r.rows)["seq_lengths"] == [[3], [1, 2]]
    assert cols(r.rows)["example_index"] == [[0], [0, 1]]
    assert r.tail.num_rows == 0


def test_flat_offsets_forms():
    values, offsets = flat_offsets(pa.array([[9], [1, 2], [], [3]], type=U32).slice(1))
    assert values.tolist() == [1, 2, 3] and offsets.tolist() == [0, 2, 2, 3]
    values, offsets = flat_offsets((np.arange(10), np.array([4, 6, 6, 9])))
    assert values.tolist() == [4, 5, 6, 7, 8] and offsets.tolist() == [0, 2, 2, 5]


@pytest.mark.parametrize("fn", [pack_concat, pack_bfd], ids=["concat", "bfd"])
def test_a_tuple_of_two_lists_is_refused_as_ambiguous(fn):
    """A tuple of two documents was read as ``(values, offsets)``: ``([5, 6, 7, 8, 9, 10], [1,
    3])`` packed one document, ``values[1:3]`` = ``[6, 7]``, where a list or a tuple of three
    gives each document (``[1, 2]`` of a Llama row is BOS, EOS: ascending, so it passed the
    offsets checks). Now refused; numpy arrays keep the (values, offsets) form."""
    for bad in (([5, 6, 7, 8, 9, 10], [1, 3]), ((5, 6), (1, 2))):
        with pytest.raises(PackingError, match=r"^input_ids: a tuple of two lists reads either as two documents"):
            fn(bad, seq_len=8)
    with pytest.raises(PackingError, match=r"^labels: a tuple of two lists"):
        pack_bfd([[5, 6], [1, 2]], labels=([5, 6], [1, 2]), seq_len=8)
    assert fn([[5, 6, 7, 8, 9, 10], [1, 3]], seq_len=8).rows.column("example_index").to_pylist()[0] == [0, 1]
    assert pack_bfd((np.array([5, 6, 7, 8]), np.array([1, 3])), seq_len=8).rows.column("input_ids").to_pylist() == [[6, 7]]


@pytest.mark.parametrize("fn", [pack_concat, pack_bfd], ids=["concat", "bfd"])
def test_python_floats_and_huge_ints_are_refused_not_truncated(fn):
    """pyarrow converts a Python float to int64 by truncating it, with no error (asserted
    below, the reference behaviour), so ``[[1.5, 2, 3]]`` was packed as ``[1, 2, 3]``: an id no
    tokenizer produced (explorer7). Floats are refused as a float numpy array is; an int past
    64 bits raised OverflowError, not PackingError."""
    assert pa.array([[1.5, 2, 3]], type=pa.list_(pa.int64())).to_pylist() == [[1, 2, 3]]
    with pytest.raises(PackingError, match=r"input_ids\[1\] holds 1\.5: values must be integers"):
        fn([[4, 5], [1.5, 2, 3]], seq_len=8)
    with pytest.raises(PackingError, match=r"input_ids\[0\] holds 2\.0"):
        fn([[2.0]], seq_len=8)
    with pytest.raises(PackingError, match="cannot read as lists of integers"):
        fn([[2 ** 64]], seq_len=8)
    assert cols(fn([[4, 5], [], [6]], seq_len=8).all_rows)["input_ids"][0][:2] == [4, 5]


@pytest.mark.parametrize("fn", [pack_concat, pack_bfd], ids=["concat", "bfd"])
def test_a_float_among_int_rows_is_named_at_its_row(fn):
    """pyarrow infers ``[[1, 2], [3.0, 4]]`` as list<double> (asserted below, the reference
    behaviour): the ints of row 0 become floats too, so the refusal named row 0 and ``1.0``, a
    value the user never wrote (review14). The float is row 1's ``3.0``; a float past the first
    value of its row (``[[7], [8, 9.0]]``) is named the same way."""
    assert pa.array([[1, 2], [3.0, 4]]).type == pa.list_(pa.float64())
    with pytest.raises(PackingError, match=r"input_ids\[1\] holds 3\.0: values must be integers, got float"):
        fn([[1, 2], [3.0, 4]], seq_len=8)
    with pytest.raises(PackingError, match=r"input_ids\[1\] holds 9\.0"):
        fn([[7], [8, 9.0]], seq_len=8)
    with pytest.raises(PackingError, match=r"labels\[1\] holds 5\.0"):
        pack_bfd([[1], [2]], labels=[[-100], [5.0]], seq_len=4)


@pytest.mark.parametrize("fn", [pack_concat, pack_bfd], ids=["concat", "bfd"])
def test_decimal_ids_are_refused_not_truncated(fn):
    """Rows pyarrow infers no single type for took the typed int64 conversion, which truncates
    a ``Decimal`` as it does a float (asserted below, the reference behaviour): ``[[4, 5],
    [Decimal("1.5"), 2]]`` (``json.loads(..., parse_float=Decimal)``) was packed as ``[4, 5, 1, 2]``.
    Each value there must be an integer: row 1 holds ``Decimal('1.5')``; a string is named
    likewise; numpy integers beside Python ints are kept."""
    from decimal import Decimal

    assert pa.array([[Decimal("1.5"), 2]], type=pa.list_(pa.int64())).to_pylist() == [[1, 2]]
    with pytest.raises(PackingError, match=r"input_ids\[1\] holds Decimal\('1\.5'\): values must be integers"):
        fn([[4, 5], [Decimal("1.5"), 2]], seq_len=8)
    with pytest.raises(PackingError, match=r"input_ids\[0\] holds Decimal\('2'\)"):
        fn([[Decimal("2")]], seq_len=8)
    with pytest.raises(PackingError, match=r"input_ids\[1\] holds 'a': values must be integers, got str"):
        fn([[1], ["a", 2]], seq_len=8)
    assert cols(fn([[4, np.int64(5)], np.array([6], dtype=np.uint16)], seq_len=8).all_rows)["input_ids"][0][:3] == [4, 5, 6]


def test_python_float_labels_are_refused():
    with pytest.raises(PackingError, match=r"labels\[0\] holds 2\.7"):
        pack_bfd([[1, 2, 3]], labels=[[-100, 2.7, 3]], seq_len=4)


@pytest.mark.parametrize("fn", [pack_concat, pack_bfd], ids=["concat", "bfd"])
@pytest.mark.parametrize("form", ["pylist", "arrow", "numpy"])
def test_empty_input(fn, form):
    docs = as_form([], form) if form != "pylist" else []
    r = fn(docs, seq_len=4)
    assert r.rows.num_rows == 0 and r.tail.num_rows == 0
    assert r.stats.rows == 0 and r.stats.documents == 0 and r.stats.padding_ratio == 0.0
    assert len(unpack([r.rows, r.tail])) == 0


def test_only_empty_documents_are_listed_not_lost():
    r = pack_bfd([[], [1], []], seq_len=4)
    assert r.empty.tolist() == [0, 2] and r.stats.empty_documents == 2
    assert cols(r.rows)["input_ids"] == [[1]]
    r = pack_concat([[], []], seq_len=4)
    assert r.empty.tolist() == [0, 1] and r.rows.num_rows == 0 and r.tail.num_rows == 0
    r = pack_concat([[], []], seq_len=4, eos_id=0)  # framed, so not empty
    assert cols(r.tail)["input_ids"] == [[0, 0]] and cols(r.tail)["seq_lengths"] == [[1, 1]]


def test_single_huge_document():
    n = 1_000_003
    doc = (np.arange(n, dtype=np.uint32), np.array([0, n]))
    r = pack_concat(doc, seq_len=1000, eos_id=0)
    assert r.stats.rows == 1000 and r.stats.tail_tokens == 4
    assert cols(r.tail)["input_ids"] == [[1000000, 1000001, 1000002, 0]]
    assert np.array_equal(unpack([r.rows, r.tail])[0][:-1], doc[0])
    pos = r.rows.column("position_ids").flatten().to_numpy()
    assert pos.max() == 999  # restarts per row: never beyond seq_len - 1
    r = pack_bfd(doc, seq_len=1000, overflow="split")
    assert r.stats.rows == 1001 and np.array_equal(unpack(r.rows)[0], doc[0])
    r = pack_bfd(doc, seq_len=1000)
    assert r.stats.rows == 1 and r.stats.truncated_tokens == n - 1000
    r = pack_bfd(doc, seq_len=1000, overflow="drop")
    assert r.stats.rows == 0 and r.dropped.tolist() == [0] and r.stats.dropped_tokens == n


def test_seq_len_one():
    """seq_len 1: every token is its own row and its own fragment."""
    r = pack_concat([[5, 6], [7]], seq_len=1, eos_id=0)
    assert cols(r.rows)["input_ids"] == [[5], [6], [0], [7], [0]]
    assert cols(r.rows)["example_index"] == [[0], [0], [0], [1], [1]]
    assert cols(r.rows)["position_ids"] == [[0]] * 5
    r = pack_concat([[5, 6], [7]], seq_len=1, eos_id=0, bos_id=1, overflow="truncate")
    assert cols(r.rows)["input_ids"] == [[1], [1]]
    r = pack_bfd([[5, 6], [7]], seq_len=1, overflow="split")
    assert cols(r.rows)["input_ids"] == [[5], [6], [7]]
    r = pack_bfd([[5, 6], [7]], seq_len=1, pad_id=0)
    assert cols(r.rows)["input_ids"] == [[5], [7]] and r.stats.truncated_tokens == 1


# --------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param(dict(seq_len=0), r"seq_len must be from 1 to 16,777,216 \(2\*\*24\), got 0$", id="seq_len-0"),
        pytest.param(dict(seq_len=2**24 + 1), r"from 1 to 16,777,216 \(2\*\*24\), got 16,777,217$", id="seq_len-2**24+1"),
        pytest.param(dict(seq_len=np.int64(2_000_000_000)), "got 2,000,000,000$", id="seq_len-np-2e9"),
        pytest.param(dict(seq_len=2048.0), "seq_len must be an int, got float", id="seq_len-float"),
        pytest.param(dict(seq_len=True), "seq_len must be an int", id="seq_len-bool"),
        pytest.param(dict(seq_len=4, overflow="split"), "unknown overflow='split'", id="split"),
        pytest.param(dict(seq_len=4, eos_id=2**32), "eos_id=4294967296", id="eos-too-big"),
        pytest.param(dict(seq_len=4, bos_id=-1), "bos_id=-1", id="bos-negative"),
    ],
)
def test_concat_argument_errors(kwargs, match):
    with pytest.raises(PackingError, match=match):
        pack_concat([[1]], **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param(dict(seq_len=-3), "seq_len must be from 1 to 16,777,216", id="seq_len-negative"),
        pytest.param(dict(seq_len=2**31, pad_id=0), r"from 1 to 16,777,216 \(2\*\*24\), got 2,147,483,648$",
                     id="seq_len-2**31-padded"),
        pytest.param(dict(seq_len=4, overflow="wrap"), "unknown overflow='wrap'", id="wrap"),
        pytest.param(dict(seq_len=4, pad_id=2**32), "pad_id", id="pad-too-big"),
        pytest.param(
            dict(seq_len=4, labels=[[1], [2, 3], [4]]),
            r"labels\[1\] has 2 values but input_ids\[1\] has 1",
            id="labels-misaligned",
        ),
        pytest.param(dict(seq_len=4, labels=[[1]]), "labels has 1 rows", id="labels-rows"),
        pytest.param(dict(seq_len=4, labels=[[1], [2**31], [3, 4]]),
                     r"labels\[1\] holds 2147483648, outside \[-2147483648, 2147483647\]", id="label-past-int32"),
        pytest.param(
            dict(seq_len=4, assistant_masks=[[1], [1], [0, 1, 1]]),
            r"assistant_masks\[2\] has 3 values",
            id="mask-misaligned",
        ),
        pytest.param(
            dict(seq_len=4, assistant_masks=[[1], [2], [0, 1]]),
            r"assistant_masks\[1\] holds 2",
            id="mask-not-binary",
        ),
    ],
)
def test_bfd_argument_errors(kwargs, match):
    with pytest.raises(PackingError, match=match):
        pack_bfd([[1], [2], [3, 4]], **kwargs)


@pytest.mark.parametrize(
    "docs, match",
    [
        pytest.param([[1], [2, 2**32]], r"input_ids\[1\] holds 4294967296", id="too-big"),
        pytest.param(
            (np.array([1, -2]), np.array([0, 1, 2])), r"input_ids\[1\] holds -2", id="negative"
        ),
        pytest.param(pa.array([[1], None], type=U32), r"input_ids\[1\] is null", id="null-row"),
        pytest.param(pa.array([[1, None]], type=U32), r"input_ids\[0\] contains a null", id="null"),
        pytest.param(pa.array([["a"]]), "expected list<int>|integers", id="strings"),
        pytest.param("abc", "expected a pyarrow list array", id="str"),
    ],
)
def test_bad_ids(docs, match):
    for fn in (pack_concat, pack_bfd):
        with pytest.raises(PackingError, match=match):
            fn(docs, seq_len=4)


def test_seq_len_ceiling_is_the_configs():
    """The pack functions take what the run config takes, 1 to 2**24, and refuse one more with
    the same bound in the message: a library caller's mistyped seq_len is a PackingError, not a
    MemoryError from numpy. At the ceiling a one-token document packs as usual (a tail of 2:
    the token and its eos). naive_padding_ratio takes the same range."""
    from rmlprep.config import MAX_SEQ_LEN as CONFIG_MAX
    from rmlprep.packing.common import MAX_SEQ_LEN

    assert MAX_SEQ_LEN == CONFIG_MAX == 2**24
    r = pack_concat([[7]], seq_len=2**24, eos_id=0)
    assert r.stats.rows == 0 and cols(r.tail)["input_ids"] == [[7, 0]]
    assert cols(pack_bfd([[7]], seq_len=2**24).rows)["input_ids"] == [[7]]
    with pytest.raises(PackingError, match=r"^seq_len must be from 1 to 16,777,216 \(2\*\*24\), got 16,777,217$"):
        naive_padding_ratio([1], 2**24 + 1)


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        pack_bfd([[1]], seq_len=0)


def test_unpack_rejects_foreign_rows():
    with pytest.raises(PackingError, match="no 'seq_lengths' column"):
        unpack(pa.record_batch({"input_ids": pa.array([[1]], type=U32)}))
    bad = pack_bfd([[1, 2]], seq_len=4).rows.set_column(
        2, "seq_lengths", pa.array([[1]], type=pa.list_(pa.int32()))
    )
    with pytest.raises(PackingError, match="row 0: seq_lengths sum to 1"):
        unpack(bad)


# --------------------------------------------------------------------------------------------
# stats


def test_stats_merge_across_batches():
    docs = [[1] * n for n in (3, 5, 2, 7, 1, 4)]
    a = pack_bfd(docs[:3], seq_len=6).stats
    b = pack_bfd(docs[3:], seq_len=6).stats
    total = a + b
    assert total == a.merge(b) == sum([a, b])
    assert total.documents == 6 and total.tokens == 22 and total.rows == a.rows + b.rows
    assert total.padding_ratio == pytest.approx(total.pad_tokens / (total.rows * 6))
    assert total.as_dict()["padding_ratio"] == total.padding_ratio
    with pytest.raises(PackingError, match="seq_len 6 and 5"):
        a + pack_bfd(docs, seq_len=5).stats
    assert PackStats() + a == a


def test_naive_padding_ratio():
    """lengths 2, 8 (cut to 4), 0 with seq_len 4: 2 + 4 + 0 = 6 real of 12 -> 0.5."""
    assert naive_padding_ratio(np.array([2, 8, 0]), 4) == 0.5
    assert naive_padding_ratio(pa.array([[1, 1], [1] * 8, []]), 4) == 0.5
    assert naive_padding_ratio([], 4) == 0.0
    with pytest.raises(PackingError):
        naive_padding_ratio([1, -1], 4)


# --------------------------------------------------------------------------------------------
# real chat lengths


def test_bfd_on_real_chat_lengths():
    """Topical-Chat, proxy token length = utf-8 bytes of all contents // 4: BFD never pads more
    than one example per row, and every conversation is placed (padding with real token counts
    is reported by the bench and the run's manifest, not here)."""
    path = CHAT / "topical-chat.messages.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent (it ships in ../shared, which CI has)")
    lengths = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            msgs = json.loads(line)["messages"]
            lengths.append(max(1, sum(len(m["content"].encode()) for m in msgs) // 4))
    lens = np.array(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    values = (np.arange(offsets[-1]) % 50_000).astype(np.uint32)
    for seq_len in (1024, 2048, 4096):
        r = pack_bfd((values, offsets), seq_len=seq_len)
        naive = naive_padding_ratio(lens, seq_len)
        assert r.stats.padding_ratio <= naive
        assert r.stats.documents == len(lens)
