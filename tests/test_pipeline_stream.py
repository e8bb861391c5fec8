"""A unit streams through the pipeline: rows are written as they are packed, so a worker's memory
does not grow with the unit (measured in bench/bench_unit_memory.py, never asserted here); the
bytes are those of writing the unit's whole table at once."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmlprep.config import config_from_dict
from rmlprep.errors import RmlprepError
from rmlprep.packing import pack_bfd, unpack
from rmlprep.pipeline import open_tokenizer, run
from rmlprep.pipeline import pack as pack_mod
from rmlprep.pipeline import stages as stages_mod
from rmlprep.pipeline import writers as writers_mod
from rmlprep.pipeline.output import OutputFolder
from rmlprep.pipeline.pack import SCHEMAS
from rmlprep.pipeline.writers import ParquetWriter, row_groups
from rmlprep.shards import shard_name

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


def docs(n: int) -> bytes:
    return b"".join(json.dumps({"text": f"Document {i}: " + "word " * (i % 61)}).encode() + b"\n" for i in range(n))


def make_cfg(inp: Path, out: Path, **extra):
    d = {"input": {"paths": [str(inp)], "batch_rows": 16},
         "tokenizer": {"path": str(TINY)},
         "pack": {"seq_len": 64},
         "output": {"dir": str(out), "row_group_rows": 8},
         "run": {"workers": 1, "progress": "none", "histogram": False}}
    for k, v in extra.items():
        d.setdefault(k, {}).update(v) if isinstance(v, dict) else d.__setitem__(k, v)
    if d["output"].get("format") == "megatron":
        del d["output"]["row_group_rows"]  # a Parquet option: refused for .bin/.idx output
    return config_from_dict(d)


def packed_table(n_rows: int, seed: int = 0) -> pa.Table:
    """Rows of the pretrain schema with lengths 1..50 (varied page layouts)."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 50, n_rows)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offs), pa.array(rng.integers(0, 60000, offs[-1]).astype(np.uint32)))
    pos_flat = np.concatenate([np.arange(k) for k in lens] or [np.zeros(0)]).astype(np.int32)
    pos = pa.ListArray.from_arrays(pa.array(offs), pa.array(pos_flat))
    one = pa.array(np.arange(n_rows + 1, dtype=np.int32))
    seq = pa.ListArray.from_arrays(one, pa.array(lens.astype(np.int32)))
    ex = pa.ListArray.from_arrays(one, pa.array(np.arange(n_rows, dtype=np.int64)))
    return pa.table([ids, pos, seq, ex], schema=SCHEMAS["pretrain"])


def pieces_of(table: pa.Table, cuts: list[int]) -> list[pa.Table]:
    bounds = [0, *sorted(c % (table.num_rows + 1) for c in cuts), table.num_rows]
    return [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=40, deadline=None)
@given(n_rows=st.integers(0, 120), group=st.integers(1, 50), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_row_groups_are_the_cuts_of_the_whole_table(n_rows, group, cuts):
    table = packed_table(n_rows)
    got = list(row_groups(pieces_of(table, cuts), group))
    assert [g.num_rows for g in got] == [min(group, n_rows - i) for i in range(0, n_rows, group)]
    assert all(c.num_chunks == 1 for g in got for c in g.columns)  # contiguous, as a slice of one table
    if got:
        assert pa.concat_tables(got).equals(table)


@settings(max_examples=25, deadline=None)
@given(n_rows=st.integers(0, 300), group=st.sampled_from([1, 7, 64, 4096]),
       cuts=st.lists(st.integers(0, 400), max_size=6), codec=st.sampled_from(["zstd", "snappy", "none"]))
def test_a_streamed_shard_has_the_bytes_of_write_table(tmp_path_factory, n_rows, group, cuts, codec):
    """The reference is what the writer did before it streamed: ``pq.write_table`` over the
    unit's whole table and its ``unit`` column (only that column dictionary-encoded, no
    statistics, schema stored; no row group when empty)."""
    table = packed_table(n_rows, seed=n_rows)
    meta = {"rmlprep.unit": "7", "rmlprep.config_hash": "h"}
    ref = io.BytesIO()
    whole = table.append_column(pa.field("unit", pa.int32()), pa.array([7] * n_rows, pa.int32()))
    whole = whole.replace_schema_metadata({k.encode(): v.encode() for k, v in meta.items()})
    if n_rows:
        pq.write_table(whole, ref, compression=codec, row_group_size=group, use_dictionary=["unit"],
                       write_statistics=False, store_schema=True)
    else:
        pq.ParquetWriter(ref, whole.schema, compression=codec, use_dictionary=["unit"], write_statistics=False,
                         store_schema=True).close()
    out = OutputFolder(tmp_path_factory.mktemp("o"))
    ParquetWriter(compression=codec, row_group_rows=group).write(
        out, 7, iter(pieces_of(table, cuts)), meta, schema=table.schema)
    assert out.read_bytes(shard_name(7)) == ref.getvalue()


def test_rows_are_written_before_the_unit_is_read(tmp_path, monkeypatch):
    """One unit (a .gz is one unit) of 40 batches, packed every ~256 tokens instead of every
    ~1M: its first row group is on disk while the reader has handed on only a few batches, and
    the shard has the bytes of packing the unit in one chunk."""
    inp = tmp_path / "c.jsonl.gz"
    inp.write_bytes(gzip.compress(docs(640)))
    run(make_cfg(inp, tmp_path / "one-chunk"), log=quiet)
    monkeypatch.setattr(pack_mod, "CHUNK_TOKENS", 256)
    read_so_far = []
    real_read = stages_mod.read_unit

    def counting(unit, column, batch_rows, watch=()):
        for b in real_read(unit, column, batch_rows, watch):
            read_so_far.append(len(b.rows))
            yield b

    at_write: list[int] = []
    real_write = writers_mod.pq.ParquetWriter.write_table

    def noting(self, table, row_group_size=None):
        at_write.append(sum(read_so_far))
        real_write(self, table, row_group_size=row_group_size)

    monkeypatch.setattr(stages_mod, "read_unit", counting)
    monkeypatch.setattr(writers_mod.pq.ParquetWriter, "write_table", noting)
    m = run(make_cfg(inp, tmp_path / "o"), log=quiet)
    assert len(m["shards"]) == 1 and sum(read_so_far) == 640
    assert len(at_write) > 10 and at_write[0] < 100 and at_write == sorted(at_write)
    assert (tmp_path / "o" / shard_name(0)).read_bytes() == (tmp_path / "one-chunk" / shard_name(0)).read_bytes()


def test_a_fault_after_rows_were_written_is_the_inputs(tmp_path, monkeypatch):
    """A .gz cut short: row groups are written before the reader reaches the cut; the unit
    fails as an InputError naming the file (not as an output fault: the run is not stopped as
    for a full disk), and nothing is under the shard's name."""
    rng = np.random.default_rng(1)
    words = [f"w{x}" for x in range(5000)]
    body = b"".join(json.dumps({"text": " ".join(rng.choice(words, 100))}).encode() + b"\n" for _ in range(3000))
    data = gzip.compress(body)  # ~1.8 MB of text: the decoder reads 1 MB at a time
    inp = tmp_path / "c.jsonl.gz"
    inp.write_bytes(data[: len(data) * 3 // 4])
    out = tmp_path / "o"
    monkeypatch.setattr(pack_mod, "CHUNK_TOKENS", 256)
    groups = []
    real_write = writers_mod.pq.ParquetWriter.write_table

    def noting(self, table, row_group_size=None):
        groups.append(table.num_rows)
        real_write(self, table, row_group_size=row_group_size)

    monkeypatch.setattr(writers_mod.pq.ParquetWriter, "write_table", noting)
    with pytest.raises(RmlprepError, match=r"^unit 0 failed: .*c\.jsonl\.gz: truncated gzip data") as e:
        run(make_cfg(inp, out), log=quiet)
    assert type(e.value) is RmlprepError and len(groups) > 10
    assert not list(out.glob("train-*")) + list(out.glob("shard-*")) and not list(out.rglob("*.tmp-*"))


def test_rejects_spooled_to_disk_give_the_same_file(tmp_path, monkeypatch):
    """Reject records leave memory batch by batch: with a 1-byte spool they go to a temporary
    file, and rejects-00000.jsonl is the same, in source-row order, over many batches."""
    body = b"".join(b'{"text": null}\n' if i % 3 == 0 else b"{broken\n" if i % 7 == 0 else line
                    for i, line in enumerate(docs(400).splitlines(keepends=True)))
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(body)
    run(make_cfg(inp, tmp_path / "a"), log=quiet)
    monkeypatch.setattr(stages_mod, "REJECT_SPOOL_BYTES", 1)
    m = run(make_cfg(inp, tmp_path / "b"), log=quiet)
    a = (tmp_path / "a" / "rejects" / "rejects-00000.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "rejects" / "rejects-00000.jsonl").read_bytes()
    rows = [json.loads(x)["row"] for x in a.splitlines()]
    expected = [i for i in range(400) if i % 3 == 0 or i % 7 == 0]
    assert rows == expected and m["totals"]["rejects"] == len(expected)


def chats(n: int) -> bytes:
    rows = []
    for i in range(n):
        c = [{"role": "user", "content": f"question {i}: " + "why " * (i % 13)},
             {"role": "assistant", "content": f"answer {i} " + "because " * (i * 7 % 29)}]
        rows.append(json.dumps({"messages": c}).encode() + b"\n")
    return b"".join(rows)


@pytest.mark.parametrize("n", [28, 30])
@pytest.mark.parametrize("pad", [False, True])
def test_sft_packs_windows_of_unit_rows_conversations(tmp_path, n, pad):
    """A unit of n conversations with input.unit_rows = 7 (a .gz is one unit whatever its
    rows): its rows are pack_bfd over conversations 0-6, then 7-13, ..., each window's
    example_index offset by its first conversation; the conversations are the documents of the
    same unit packed as one window (unit_rows = 1000)."""
    inp = tmp_path / "c.jsonl.gz"
    inp.write_bytes(gzip.compress(chats(n)))
    kw = {"pipeline": "sft", "chat": {"format": "chatml", "text_markers": True}, "pack": {"seq_len": 96, "overflow": "truncate", "pad": pad}}
    run(make_cfg(inp, tmp_path / "one", input={"unit_rows": 1000}, **kw), log=quiet)
    one = pq.read_table(tmp_path / "one" / shard_name(0))
    convs = {c: unpack(one, c) for c in ("input_ids", "labels", "assistant_masks")}
    assert list(convs["input_ids"].index) == list(range(n))
    m = run(make_cfg(inp, tmp_path / "win", input={"unit_rows": 7}, **kw), log=quiet)
    got = pq.read_table(tmp_path / "win" / shard_name(0))
    tok = open_tokenizer(str(TINY), log=quiet)[0]
    pad_id = (tok.spec.pad_id if tok.spec.pad_id is not None else tok.eos_id) if pad else None  # as pack.pad picks it
    expected = []
    for first in range(0, n, 7):
        docs = range(first, min(first + 7, n))
        res = pack_bfd([convs["input_ids"][i] for i in docs], [convs["labels"][i] for i in docs], seq_len=96,
                       overflow="truncate", pad_id=pad_id, assistant_masks=[convs["assistant_masks"][i] for i in docs])
        t = pa.Table.from_batches([res.rows])
        ex = [[e + first if e >= 0 else e for e in r] for r in t.column("example_index").to_pylist()]
        expected.append(t.set_column(t.schema.get_field_index("example_index"), "example_index",
                                     pa.array(ex, pa.list_(pa.int64()))))
    want = pa.concat_tables(expected)
    for c in ("input_ids", "labels", "assistant_masks", "position_ids", "seq_lengths", "example_index"):
        assert got.column(c).to_pylist() == want.column(c).to_pylist(), c
    assert m["totals"]["documents"] == n and m["shards"][0]["rows"] == want.num_rows


def test_megatron_documents_across_pieces(tmp_path, monkeypatch):
    """output.format = "megatron" from a stream: documents that run over many packing chunks
    (~256 tokens here) give the .bin/.idx bytes of packing the unit in one chunk."""
    body = b"".join(json.dumps({"text": f"doc {i} " + "long text " * (600 if i % 5 == 0 else i)}).encode() + b"\n"
                    for i in range(60))
    inp = tmp_path / "c.jsonl.gz"
    inp.write_bytes(gzip.compress(body))
    kw = {"output": {"format": "megatron"}, "pack": {"seq_len": 128}}
    run(make_cfg(inp, tmp_path / "one", **kw), log=quiet)
    monkeypatch.setattr(pack_mod, "CHUNK_TOKENS", 256)
    m = run(make_cfg(inp, tmp_path / "many", **kw), log=quiet)
    for name in ("shard-00000.bin", "shard-00000.idx"):
        assert (tmp_path / "many" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert m["totals"]["documents"] == 60
    idx = (tmp_path / "many" / "shard-00000.idx").read_bytes()
    n = int.from_bytes(idx[18:26], "little")  # sequence count, after magic (9), version (8), dtype (1)
    lengths = np.frombuffer(idx, "<i4", n, 34)
    data = np.frombuffer((tmp_path / "many" / "shard-00000.bin").read_bytes(), "<u2")
    tok = open_tokenizer(str(TINY), log=quiet)[0]
    expected = [tok.encode(json.loads(x)["text"]) + [tok.eos_id] for x in body.splitlines()]
    assert [len(d) for d in expected] == lengths.tolist() and data.tolist() == sum(expected, [])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=12), max_size=30), st.integers(1, 8),
       st.sampled_from([(None, None), (7, None), (None, 8), (7, 8)]), st.sampled_from(["wrap", "truncate", "drop"]),
       st.integers(1, 40), st.randoms(use_true_random=False))
def test_chunked_concat_packing_is_one_pack(docs, seq_len, bos_eos, overflow, chunk, rnd):
    """The pack stage's packer, fed the documents in batches of random sizes and packing every
    ``chunk`` tokens (the fragments of a chunk's last row carried into the next), gives the rows
    and tail of one ``pack_concat`` over all documents, and the same counts."""
    from rmlprep.packing import pack_concat
    from rmlprep.pipeline.stages import Docs

    bos, eos = bos_eos
    batches, i = [], 0
    while i < len(docs):
        j = i + rnd.randint(0, 5)  # empty batches too
        part = docs[i:j]
        batches.append(Docs(np.array([t for d in part for t in d], dtype=np.uint32),
                            np.array([len(d) for d in part], dtype=np.int64), np.arange(i, i + len(part))))
        i = j
    packer = pack_mod._ConcatPacker(seq_len, bos, eos, overflow)
    got: list[pa.RecordBatch] = []
    held, n_tokens, first = [], 0, 0
    for d in batches:
        held.append(d)
        n_tokens += len(d.ids)
        if n_tokens >= chunk:
            lens = np.concatenate([h.lengths for h in held])
            got += packer.add(held, lens, first)
            first += len(lens)
            held, n_tokens = [], 0
    got += packer.add(held, np.concatenate([h.lengths for h in held]) if held else np.zeros(0, np.int64), first,
                      final=True)
    ref = pack_concat([np.array(d, dtype=np.uint32) for d in docs] if docs else [], seq_len=seq_len, bos_id=bos,
                      eos_id=eos, overflow=overflow)
    names = ["input_ids", "position_ids", "seq_lengths", "example_index"]
    want = pa.Table.from_batches([ref.rows, ref.tail]).select(names).to_pydict()
    have = (pa.Table.from_batches([b.select(names) for b in got]).to_pydict() if got
            else {k: [] for k in names})
    assert have == want
    assert (packer.dropped, packer.truncated_tokens, packer.over_long) == \
        (ref.stats.dropped_documents, ref.stats.truncated_tokens, ref.stats.over_long)
