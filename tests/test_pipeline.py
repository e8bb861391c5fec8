"""The main job end to end: determinism over workers, tail rule, rejects, parity gate, resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmlprep.config import config_from_dict
from rmlprep.errors import ConfigError, PackingError, ParityError, RmlprepError
from rmlprep.packing import unpack
from rmlprep.pipeline import open_tokenizer, run
from rmlprep.pipeline.output import MARKER_VERSION
from rmlprep.shards import read_shard_metadata
from test_pipeline_trust import make_cfg as trust_cfg

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
SHARED = ROOT.parent / "shared"
TEXT = SHARED / "corpora" / "text-multilingual.jsonl"
FORMATS = SHARED / "corpora" / "formats"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


def write_corpus(path: Path, n_docs: int = 300) -> list[str]:
    """Real text when ../shared is there (first documents of text-multilingual), else synthetic."""
    texts: list[str] = []
    if TEXT.exists():
        with open(TEXT, "rb") as f:
            for line in f:
                texts.append(json.loads(line)["text"][:3000])
                if len(texts) == n_docs:
                    break
    else:
        texts = [f"Document {i}: " + "word " * (i % 97) + "\u2028end" for i in range(n_docs)]
    path.write_bytes(b"".join(json.dumps({"text": t}, ensure_ascii=False).encode() + b"\n" for t in texts))
    return texts


def make_cfg(inp: Path, out: Path, **kw):
    """test_pipeline_trust's config (the tiny tokenizer, one worker, seq_len 128), in units of ~40 kB."""
    return trust_cfg(inp, out, **{**kw, "input": {"unit_bytes": 40_000, **kw.get("input", {})}})


def shard_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("train-*.parquet"))}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    return p, write_corpus(p)


def test_a_unit_imports_no_heavy_module(corpus, tmp_path):
    """A worker forked after the plan imports none of numpy.ma, pyarrow.compute or pandas to
    process a unit: each costs every worker process 0.016 s (numpy.ma, through np.union1d),
    ~0.04 s (pyarrow.compute) or 0.3-0.5 s (pandas) of CPU. Checked in a fresh interpreter."""
    inp, _ = corpus
    probe = f"""
import json, sys
from rmlprep.config import config_from_dict
from rmlprep.pipeline import open_tokenizer
from rmlprep.pipeline.plan import plan
from rmlprep.pipeline.unit import process_unit
cfg = config_from_dict({{"input": {{"paths": [{str(inp)!r}], "unit_bytes": 40_000}}, "tokenizer": {{"path": {str(TINY)!r}}},
                        "pack": {{"seq_len": 128}}, "output": {{"dir": {str(tmp_path / "out")!r}}}}})
tok, _ = open_tokenizer(cfg["tokenizer"]["path"], log=lambda m: None)
units = plan(cfg)
before = set(sys.modules)
rec = process_unit(units[0], cfg, tok)
print(json.dumps([rec["rows"], sorted(set(sys.modules) - before)]))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    rows, new = json.loads(out.stdout.splitlines()[-1])
    assert rows > 0
    assert not {"numpy.ma", "pyarrow.compute", "pandas"} & set(new), new


def test_workers_do_not_change_bytes(corpus, tmp_path):
    inp, _ = corpus
    m1 = run(make_cfg(inp, tmp_path / "w1", workers=1), log=quiet)
    m2 = run(make_cfg(inp, tmp_path / "w2", workers=2), log=quiet)
    a, b = shard_bytes(tmp_path / "w1"), shard_bytes(tmp_path / "w2")
    assert len(a) > 3 and a == b
    assert m1["totals"] == m2["totals"] and m2["workers"] == 2


def test_every_token_kept_and_tail_rule(corpus, tmp_path):
    inp, texts = corpus
    out = tmp_path / "o"
    m = run(make_cfg(inp, out), log=quiet)
    tok = open_tokenizer(str(TINY))[0]
    eos = tok.eos_id
    got: list[list[int]] = []
    for p in sorted(out.glob("train-*.parquet")):
        t = pq.read_table(p)
        lens = [len(r) for r in t.column("input_ids").to_pylist()]
        assert all(n == 128 for n in lens[:-1]) and 0 < lens[-1] <= 128  # only the last row may be short
        docs = unpack(t)
        got.extend(docs[i].tolist() for i in range(len(docs)))
        md = read_shard_metadata(p)
        assert md["rmlprep.tokenizer_fingerprint"] == tok.fingerprint
        assert md["rmlprep.config_hash"] == m["config_hash"]
        assert md["rmlprep.version"]
    expected = [tok.encode(t, parse_special=False) + [eos] for t in texts]
    assert got == expected
    assert m["totals"]["documents"] == len(texts) and m["totals"]["rejects"] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["tokens"] == sum(len(e) - 1 for e in expected)
    assert (out / "stats.json").exists()


def _docs(u) -> list[tuple[int, int, list[int]]]:
    return [(int(u.unit[i]) if u.unit is not None else -1, int(u.index[i]), u[i].tolist()) for i in range(len(u))]


def _without_unit(t: pa.Table) -> pa.Table:
    """A shard as written before the unit column (metadata kept)."""
    return t.drop_columns(["unit"])


def test_unpack_of_a_runs_shards_together_keys_documents_by_unit(corpus, tmp_path):
    """example_index numbers each shard's documents from 0: unpacking the rows of several
    shards as one table joined document k of every shard into one (fewer, longer documents
    came back), with no error: ``datasets.load_dataset`` of the folder (which keeps no
    ``rmlprep.*`` metadata), ``pq.read_table`` of their paths, a list of them. Each shard now
    holds its unit number on every row (``unit``), and unpack keys documents by (unit,
    example_index): every such table gives the documents of unpacking shard by shard, with
    their shard. Without the column the 300 documents of 27 shards came back as 14."""
    datasets = pytest.importorskip("datasets")
    inp, texts = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    paths = sorted(out.glob("train-*.parquet"))
    shards = [pq.read_table(p) for p in paths]
    assert len(shards) > 1
    for i, t in enumerate(shards):
        assert t.schema.field("unit").type == pa.int32() and set(t.column("unit").to_pylist()) == {i}
    want = [d for t in shards for d in _docs(unpack(t))]
    assert len(want) == len(texts) and [d[0] for d in want] == sorted(d[0] for d in want)
    hf = datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf"))["train"]
    card = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf2"))["train"]
    for joined in (shards, pa.concat_tables(shards), pq.read_table([str(p) for p in paths]),
                   hf.with_format("arrow")[:], card.with_format("arrow")[:], shards[::-1]):
        assert _docs(unpack(joined)) == want
    assert not hf.with_format("arrow")[:].schema.metadata.get(b"rmlprep.unit")  # only the unit column tells
    with pytest.raises(PackingError, match=r"documents come from \d+ shards \(unit column\).*key them by"):
        unpack(shards).to_dict()
    assert unpack(shards[1]).to_dict() == {k: d for _, k, d in _docs(unpack(shards[1]))}
    with pytest.raises(PackingError, match=r"got Dataset \(a datasets.Dataset: pass ds.with_format\('arrow'\)\[:\]\)"):
        unpack(hf)
    # without the column (shards of earlier versions), what the metadata shows is refused ...
    old = [_without_unit(t) for t in shards]
    with pytest.raises(PackingError, match=f"the tables are {len(old)} shards of a run .*not all with a 'unit' column.*"
                                           "unpack each shard"):
        unpack(old)
    halves = unpack([old[0].slice(0, 2), old[0].slice(2)])  # one shard in pieces: as the shard
    assert _docs(halves) == [(-1, k, d) for u, k, d in want if u == 0]
    with pytest.raises(PackingError, match=r"shards of a run \(rmlprep.unit 0, 1\), not all with a 'unit' column"):
        unpack([shards[0], old[1]])
    with pytest.raises(PackingError, match=r"different columns.*unpack each on its own"):
        unpack([shards[0], old[0]])
    # ... and what it cannot show is not (the docstring says so): documents are joined
    assert len(unpack(pa.concat_tables(old).replace_schema_metadata(None))) < len(texts)


def test_unpack_refuses_a_pretrain_shard_table_holding_several_shards(corpus, tmp_path):
    """pa.concat_tables of a run's shards written without the unit column (or pq.read_table of
    their paths) is one table with the first shard's metadata: unpack joined document k of every
    shard, with no error. A pretrain shard's example_index never goes down and only its last
    row is short, so such a table is refused; each check is exercised on its own (the second by
    renumbering shard 1's documents after shard 0's, so that only the short row in the middle
    tells). With the unit column each unit's rows are checked so: the same unit twice (unit 0
    of two runs) is refused."""
    inp, texts = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    shards = [_without_unit(pq.read_table(p)) for p in sorted(out.glob("train-*.parquet"))]
    assert len(shards) > 1 and shards[0].schema.metadata[b"rmlprep.pipeline"] == b"pretrain"
    for joined in (pa.concat_tables(shards), pa.concat_tables(shards[:1] + shards),
                   pq.read_table(sorted(str(p) for p in out.glob("train-*.parquet"))).drop_columns(["unit"]),
                   pa.concat_tables([pq.read_table(out / "train-00000.parquet")] * 2)):
        assert joined.schema.metadata[b"rmlprep.unit"] == b"0"  # the first shard's metadata only
        with pytest.raises(PackingError, match=r"marked as one pretrain shard \(rmlprep.unit 0\) but example_index "
                                               r"goes down from \d+ to 0.*unpack each shard on its own"):
            unpack(joined)
    first = shards[0].column("input_ids").to_pylist()
    assert len(first[-1]) < 128  # the tail row: the shard's documents do not fill it
    last = max(max(r) for r in shards[0].column("example_index").to_pylist())
    shifted = shards[1].set_column(shards[1].schema.get_field_index("example_index"), "example_index",
                                   pa.array([[i + last + 1 for i in r] for r in shards[1].column("example_index").to_pylist()],
                                            pa.list_(pa.int64())))
    with pytest.raises(PackingError, match=rf"but row {len(first) - 1} of \d+ is shorter than seq_len 128"):
        unpack(pa.concat_tables([shards[0], shifted]))


def test_unpack_refuses_a_runs_pretrain_rows_out_of_order(corpus, tmp_path):
    """A run's pretrain rows read as one table without the ``rmlprep.*`` metadata
    (``datasets.load_dataset`` of the folder keeps none) and then shuffled unpacked with no
    error, a document continued into the next row joined in the shuffled order (128 of 300
    documents differed after ``ds.shuffle(seed=0)`` in a 7-shard trial). A table with a ``unit``
    column and no ``labels`` is a run's pretrain shards (sft shards hold labels): each unit's
    example_index must not go down in row order, as a shard's never does. Rows in order still
    unpack, shard by shard."""
    inp, texts = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    table = pq.read_table(sorted(str(p) for p in out.glob("train-*.parquet"))).replace_schema_metadata(None)
    assert len(unpack(table)) == len(texts)
    units = table.column("unit").to_numpy()
    first = int(np.flatnonzero(units == units[0]).size)
    assert first > 2  # unit 0 has rows to reorder
    order = np.r_[np.arange(first)[::-1], np.arange(first, table.num_rows)]  # unit 0's rows reversed
    with pytest.raises(PackingError, match=r"^unpack: the rows of unit 0 are a run's pretrain shard \(a 'unit' column, "
                                           r"no labels\) but example_index goes down from \d+ to \d+ in row order.*"
                                           r"shuffled or reordered"):
        unpack(table.take(order))
    marked = pq.read_table(out / "train-00000.parquet")
    with pytest.raises(PackingError, match=r"marked as one pretrain shard \(rmlprep.unit 0\) but example_index goes "
                                           r"down.*or rows out of their shard's order \(shuffled\)"):
        unpack(marked.take(np.arange(marked.num_rows)[::-1]))


def test_unpack_of_sft_shards_loaded_with_datasets(tmp_path):
    """sft shards joined into one table could not be told apart at all (BFD rows repeat and
    reorder example_index legitimately, so no order check applies): document k of every shard
    became one conversation. With the unit column ``datasets.load_dataset`` of the folder
    unpacks to the conversations of each shard, labels and masks too."""
    datasets = pytest.importorskip("datasets")
    p = tmp_path / "chat.jsonl"
    p.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"question {i} " * (1 + i % 7)},
                                                  {"role": "assistant", "content": f"answer {i} " * (1 + i % 5)}]}) + "\n"
                         for i in range(900)))
    out = tmp_path / "o"
    m = run(make_cfg(p, out, pipeline="sft", chat={"format": "chatml"}, pack={"overflow": "truncate"},
                     parity={"chat": False}), log=quiet)
    shards = [pq.read_table(s) for s in sorted(out.glob("train-*.parquet"))]
    assert len(shards) > 1 and m["totals"]["documents"] == 900
    table = datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf"))["train"].with_format("arrow")[:]
    for column in ("input_ids", "labels", "assistant_masks"):
        want = [d for t in shards for d in _docs(unpack(t, column))]
        assert len(want) == 900 and _docs(unpack(table, column)) == want
    assert len(unpack(table.drop_columns(["unit"]))) < 900  # what it was: joined, no error


def test_shards_written_before_the_unit_column_are_redone_on_resume(corpus, tmp_path):
    """A resumed run that kept shards without the unit column and wrote new ones with it would
    leave a folder ``datasets`` cannot load (the card names the column; the old shards lack it)
    and whose old rows unpack cannot key. Their done markers lack ``columns``: such units are
    redone, saying why, and the folder is then a fresh run's, byte for byte."""
    from rmlprep.shards import marker_name, sha256_file

    inp, _ = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    fresh = shard_bytes(out)
    for i, p in enumerate(sorted(out.glob("train-*.parquet"))):  # as written before the column
        pq.write_table(pq.read_table(p).drop_columns(["unit"]), p, compression="zstd", use_dictionary=False,
                       write_statistics=False, store_schema=True)
        mk = json.loads((out / marker_name(i)).read_text())
        del mk["columns"]
        (out / marker_name(i)).write_text(json.dumps({**mk, "sha256": sha256_file(p)}))
    lines: list[str] = []
    m = run(make_cfg(inp, out), resume=True, log=lines.append)
    assert m["units_processed"] == len(fresh) > 1
    assert any("done marker predates the shards' unit column (its shard lacks it)" in x for x in lines), lines
    assert shard_bytes(out) == fresh
    assert json.loads((out / marker_name(0)).read_text())["columns"] == [
        "input_ids", "position_ids", "seq_lengths", "example_index", "unit"]


def test_rejects(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "good one"}\n{"text": null}\n{"text": 42}\n{broken\n{"text": "good two"}\n{"id": 1}\n')
    out = tmp_path / "o"
    m = run(make_cfg(p, out), log=quiet)
    assert m["totals"]["documents"] == 2 and m["totals"]["rejects"] == 4
    assert m["totals"]["rows_read"] == 6
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 3, 5]
    assert "null" in recs[0]["reason"] and "int" in recs[1]["reason"] and "JSON" in recs[2]["reason"]
    assert all(r["source"] == str(p) for r in recs)
    assert m["rejects"]["files"] == ["rejects/rejects-00000.jsonl"]


def test_a_key_twice_is_a_read_reject(tmp_path):
    """A careless-user trial: '{"text": "first", "text": "second"}' became the document "second"
    (json.loads keeps a key's last value), the run exiting 0. Now the row is a read reject naming
    the key, counted and written aside; a key twice deeper in a row (metadata) is one too."""
    p = tmp_path / "dup.jsonl"
    p.write_text('{"text": "first", "text": "second"}\n{"text": "good one"}\n'
                 '{"text": "good two", "meta": {"src": "a", "src": "b"}}\n')
    out = tmp_path / "o"
    m = run(make_cfg(p, out), log=quiet)
    assert m["totals"]["rows_read"] == 3 and m["totals"]["documents"] == 1 and m["totals"]["rejects"] == 2
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [(r["row"], r["stage"]) for r in recs] == [(0, "read"), (2, "read")]
    assert recs[0]["reason"].startswith("a JSON object holds the key 'text' twice (the object at $)")
    assert recs[1]["reason"].startswith("a JSON object holds the key 'src' twice (the object at $.meta)")


def _strict_json(line: str):
    """json.loads that refuses what RFC 8259 does not allow (NaN, Infinity): what jq reads."""
    def bad(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(line, parse_constant=bad)


def test_reject_values_are_json_and_whole(tmp_path):
    """A rejected row's ``value`` is the row's value itself as strict JSON, not a repr cut at 300
    characters: json.loads gives it back. Worked example, line by line:

        {"text": 42}                 -> value 42
        {"text": ["a", {"b": NaN}]}  -> value ["a", {"b": "NaN"}], value_encoded {"$[1].b": "float"}
                                        (Python's json reads the bare NaN; JSON has no NaN)
        {"text": {"k": "x" * 1000}}  -> value {"k": "xxx...x"} whole (1000 x's)
        {"text": {"s": "\\ud800"}}   -> value {"s": "\\ud800"} (the lone surrogate as its escape)
    """
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "good"}\n{"text": 42}\n{"text": ["a", {"b": NaN}]}\n'
                 + json.dumps({"text": {"k": "x" * 1000}}) + '\n{"text": {"s": "\\ud800"}}\n')
    m = run(make_cfg(p, tmp_path / "o"), log=quiet)
    assert m["totals"]["documents"] == 1 and m["totals"]["rejects"] == 4
    recs = [_strict_json(x) for x in (tmp_path / "o" / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 3, 4]
    assert recs[0]["value"] == 42 and "value_encoded" not in recs[0]
    assert recs[1]["value"] == ["a", {"b": "NaN"}] and recs[1]["value_encoded"] == {"$[1].b": "float"}
    assert recs[2]["value"] == {"k": "x" * 1000}
    assert recs[3]["value"] == {"s": "\ud800"}


def test_markers_of_versions_that_wrote_repr_values_are_redone(tmp_path):
    """A done marker with rejects written before reject values were JSON (marker version 0, no
    "marker_version") vouches for a rejects file of Python reprs ('42' as a string, "b'..'" for
    bytes): a rerun redoes its unit, and the file holds JSON again. Markers of this version are
    reused."""
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "good"}\n{"text": 42}\n')
    out = tmp_path / "o"
    run(make_cfg(p, out), log=quiet)
    assert run(make_cfg(p, out), log=quiet)["units_skipped"] == 1
    marker = out / "shard-00000.done.json"
    old = json.loads(marker.read_text())
    assert old["marker_version"] == MARKER_VERSION
    del old["marker_version"]
    marker.write_text(json.dumps(old))
    rej = out / "rejects" / "rejects-00000.jsonl"
    rej.write_text(json.dumps({**json.loads(rej.read_text()), "value": "42"}) + "\n")  # as the repr was
    logs: list[str] = []
    m = run(make_cfg(p, out), log=logs.append)
    assert m["units_processed"] == 1 and json.loads(rej.read_text())["value"] == 42
    assert any(f"done marker of marker version 0 (this rmlprep writes {MARKER_VERSION}): 1" in x for x in logs)


def test_resume_redoes_a_unit_whose_rejects_file_changed(tmp_path):
    """A rejects file that is not the one the unit wrote (here a record of another run appended:
    a mixed file) is not trusted by its existence: the rerun redoes the unit, says why, and the
    file is the unit's own again. The marker records the file's sha256 and size."""
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "good"}\n{"text": 42}\n')
    out = tmp_path / "o"
    run(make_cfg(p, out), log=quiet)
    rej = out / "rejects" / "rejects-00000.jsonl"
    good = rej.read_bytes()
    marker = json.loads((out / "shard-00000.done.json").read_text())
    assert marker["rejects_sha256"] == hashlib.sha256(good).hexdigest() and marker["rejects_bytes"] == len(good)
    rej.write_bytes(good + b'{"unit": 0, "row": 7, "reason": "from another run"}\n')
    logs: list[str] = []
    m = run(make_cfg(p, out), log=logs.append)
    assert m["units_processed"] == 1 and rej.read_bytes() == good
    assert any("rejects file sha256 differs from its done marker: 1" in x for x in logs)
    assert run(make_cfg(p, out), log=quiet)["units_skipped"] == 1


def test_a_redo_that_leaves_no_rejects_leaves_no_rejects_folder(tmp_path):
    """The input mended, the rerun redoes the unit, whose rejects file the sweep removed: no
    empty rejects/ is left to suggest rows were set aside."""
    p = tmp_path / "in.jsonl"
    p.write_text('{"text": "good"}\n{"text": 42}\n')
    out = tmp_path / "o"
    run(make_cfg(p, out), log=quiet)
    assert (out / "rejects" / "rejects-00000.jsonl").exists()
    p.write_text('{"text": "good"}\n{"text": "42"}\n')
    m = run(make_cfg(p, out), log=quiet)
    assert m["units_processed"] == 1 and m["totals"]["rejects"] == 0 and not (out / "rejects").exists()


def test_reject_values_of_a_parquet_binary_column_are_base64(tmp_path):
    """A Parquet binary column under the pretrain pipeline: each row is a reject ("text is bytes
    (a binary column) ...", saying how to make it a string column) whose value is the bytes in standard base64 (RFC 4648), as the proto3
    JSON mapping writes bytes. Worked by hand: b"caf\\xc3\\xa9" = 63 61 66 c3 a9 -> 011000 110110
    000101 100110 | 110000 111010 100100 (padded) -> "Y2Fm" + "w6k="; b"\\xff\\xfe" -> "//4="."""
    import pyarrow as pa

    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": pa.array([b"caf\xc3\xa9", b"\xff\xfe"], pa.binary())}), p)
    m = run(make_cfg(p, tmp_path / "o"), log=quiet)
    assert m["totals"]["documents"] == 0 and m["totals"]["rejects"] == 2
    recs = [_strict_json(x) for f in sorted((tmp_path / "o" / "rejects").iterdir()) for x in f.read_text().splitlines()]
    assert [(r["row"], r["value"], r["value_encoded"]) for r in recs] == [(0, "Y2Fmw6k=", {"$": "base64"}),
                                                                        (1, "//4=", {"$": "base64"})]
    assert recs[0]["reason"].startswith("text is bytes (a binary column), not a string: if it holds UTF-8 text, write "
                                        "the column as a string type")


def test_sft_reject_values_are_json(tmp_path):
    """sft: a conversation the messages schema refuses is written whole, as JSON: a NaN content
    becomes "NaN" (value_encoded names "$[0].content"), an unknown role stays as it is."""
    p = tmp_path / "chat.jsonl"
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    p.write_text(json.dumps({"messages": good}) + '\n{"messages": [{"role": "user", "content": NaN}]}\n'
                 + json.dumps({"messages": [{"role": "wizard", "content": "x"}]}) + "\n")
    m = run(make_cfg(p, tmp_path / "o", pipeline="sft", chat={"format": "chatml"}, pack={"overflow": "truncate"}),
            log=quiet)
    assert m["totals"]["documents"] == 1 and m["totals"]["rejects"] == 2
    recs = [_strict_json(x) for x in (tmp_path / "o" / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert recs[0]["value"] == [{"role": "user", "content": "NaN"}]
    assert recs[0]["value_encoded"] == {"$[0].content": "float"}
    assert recs[1]["value"] == [{"role": "wizard", "content": "x"}] and "value_encoded" not in recs[1]


def test_json_value_of_arrow_types():
    """What pyarrow's to_pylist gives for non-JSON types, each written as the docstring of
    json_value says: dates ISO 8601, a decimal as its exact digits, map entries as [key, value],
    -inf as "-Infinity", a non-string key as str."""
    import datetime
    from decimal import Decimal

    import pyarrow as pa

    from rmlprep.pipeline.stages import json_value

    row = pa.array([{"d": datetime.date(2024, 7, 26), "n": Decimal("1.10"), "m": [("a", 1)], "f": float("-inf")}],
                   pa.struct([("d", pa.date32()), ("n", pa.decimal128(5, 2)), ("m", pa.map_(pa.string(), pa.int64())),
                              ("f", pa.float64())])).to_pylist()[0]
    assert json_value(row) == ({"d": "2024-07-26", "n": "1.10", "m": [["a", 1]], "f": "-Infinity"},
                               {"$.d": "isoformat", "$.n": "str", "$.f": "float"})
    assert json_value({1: "x", "a b": b""}) == ({"1": "x", "a b": ""}, {'$["1"]': "key", '$["a b"]': "base64"})


def test_run_logs_the_split_it_reads(tmp_path):
    """A run on a DatasetDict with input.split unset says which split it reads (train of
    train and test): two documents, train's."""
    datasets = pytest.importorskip("datasets")
    dd = tmp_path / "dd"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["one", "two"]}),
                          "test": datasets.Dataset.from_dict({"text": ["three"]})}).save_to_disk(str(dd))
    logs: list[str] = []
    m = run(make_cfg(dd, tmp_path / "o"), log=logs.append)
    assert m["totals"]["documents"] == 2
    assert f"input: {dd} is a DatasetDict; reading split 'train' of 'train', 'test' (input.split is unset; set it " \
           "to read another)" in logs


def test_sft_rejects_and_bfd(tmp_path):
    p = tmp_path / "chat.jsonl"
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    rows = [good, None, "text", [{"role": "user"}], [{"role": "wizard", "content": "x"}], good]
    p.write_text("".join(json.dumps({"messages": r}) + "\n" for r in rows))
    out = tmp_path / "o"
    m = run(make_cfg(p, out, pipeline="sft", chat={"format": "chatml"}, pack={"overflow": "truncate"}), log=quiet)
    assert m["totals"]["documents"] == 2 and m["totals"]["rejects"] == 4
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 3, 4]
    t = pq.read_table(out / "train-00000.parquet")
    assert set(t.column_names) >= {"input_ids", "labels", "assistant_masks", "seq_lengths"}
    labels = t.column("labels").to_pylist()[0]
    assert -100 in labels and any(x != -100 for x in labels)


def test_sft_reject_reasons_read_as_sentences(tmp_path):
    """A conversation the chat format refuses is a reject whose reason is the format's own
    sentence, not an exception class name ("ChatFormatError: ...")."""
    p = tmp_path / "chat.jsonl"
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    p.write_text("".join(json.dumps({"messages": r}) + "\n" for r in (good, good[::-1])))
    out = tmp_path / "o"
    m = run(make_cfg(p, out, pipeline="sft", chat={"format": "llama2"}, pack={"overflow": "truncate"},
                     parity={"chat": False}), log=quiet)
    assert m["totals"]["documents"] == 1 and m["totals"]["rejects"] == 1
    rec = json.loads((out / "rejects" / "rejects-00000.jsonl").read_text())
    assert rec["row"] == 1 and rec["reason"].startswith("chat format 'llama2': ") and "Error" not in rec["reason"], rec


@pytest.mark.skipif(not FORMATS.is_dir(), reason=f"{FORMATS} is absent")
def test_sft_real_chat_parquet(tmp_path):
    m = run(make_cfg(FORMATS / "chat_hh.parquet", tmp_path / "o", pipeline="sft", chat={"format": "chatml"},
                     seq_len=512, input={"unit_rows": 600}), log=quiet)
    assert m["totals"]["rows_read"] == 2312
    assert m["totals"]["documents"] + m["totals"]["rejects"] == 2312


def test_parity_failure_stops_the_run(corpus, tmp_path):
    inp, _ = corpus
    fx = json.loads(TINY.read_text())
    case = next(c for c in fx["cases"] if len(c["ids"]) > 1)
    case["ids"][1] += 1
    bad = tmp_path / "doctored.json"
    bad.write_text(json.dumps(fx))
    out = tmp_path / "o"
    with pytest.raises(ParityError) as e:
        run(make_cfg(inp, out, parity={"fixture": str(bad)}), log=quiet)
    assert e.value.position == 1
    assert not list(out.glob("train-*")) + list(out.glob("shard-*")) if out.exists() else True


def test_parity_required_without_fixture(corpus, tmp_path):
    inp, _ = corpus
    spec = tmp_path / "t.spec.json"
    spec.write_text(json.dumps(open_tokenizer(str(TINY))[0].spec.to_dict()))
    cfg = make_cfg(inp, tmp_path / "o", tokenizer={"path": str(spec)}, parity={"require": True})
    with pytest.raises(ConfigError, match="parity.require"):
        run(cfg, log=quiet)


def test_resume_skips_and_redoes(corpus, tmp_path):
    inp, _ = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    ref = shard_bytes(out)
    (out / "train-00001.parquet").write_bytes(b"garbage")
    (out / "shard-00002.done.json").unlink()
    logs: list[str] = []
    m = run(make_cfg(inp, out, workers=2), resume=True, log=logs.append)
    assert m["units_processed"] == 2 and m["units_skipped"] == len(ref) - 2
    assert shard_bytes(out) == ref
    assert any("shard sha256 differs" in x for x in logs)


def test_other_config_refused(corpus, tmp_path):
    """A rerun into a folder of another config is refused, and the refusal names what changed
    (from the folder's manifest.json): pack.seq_len 128 -> 64 and pack.overflow, the keys that
    differ; workers (not in the hash) are not named. Without the manifest it still refuses."""
    inp, _ = corpus
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    logs: list[str] = []
    with pytest.raises(ConfigError, match=r"; this config changes pack.overflow \"wrap\" -> \"truncate\"; "
                                          r"pack.seq_len 128 -> 64\); pass --overwrite"):
        run(make_cfg(inp, out, seq_len=64, workers=2, pack={"overflow": "truncate"}), log=logs.append)
    # before the parity stage (seconds for an sft run's probes and renders: a trial waited through them)
    assert not any(x.startswith("parity:") for x in logs), logs
    (out / "manifest.json").rename(tmp_path / "manifest.json")
    with pytest.raises(ConfigError, match=r"e\.g\. shard-00000\.done\.json\); pass --overwrite"):
        run(make_cfg(inp, out, seq_len=64), log=quiet)
    m = run(make_cfg(inp, out, seq_len=64), overwrite=True, log=quiet)
    assert m["units_processed"] == len(m["shards"])



@pytest.mark.parametrize("old_chat,new_chat,want", [
    pytest.param({"format": "qwen3"}, {"format": "qwen3", "options": {"enable_thinking": False}},
                 'chat.options null -> {"enable_thinking": false}', id="options-set"),
    pytest.param({"format": "qwen3", "options": {"enable_thinking": False}}, {"format": "qwen3"},
                 'chat.options {"enable_thinking": false} -> null', id="options-unset"),
    pytest.param({"format": "qwen3", "options": {"enable_thinking": False}},
                 {"format": "qwen3", "options": {"enable_thinking": True}},
                 "chat.options.enable_thinking false -> true", id="options-changed"),
])
def test_other_config_refusal_names_a_table_as_one_change(old_chat, new_chat, want):
    """A table set where there was none (``chat.options``) was two changes of noise:
    ``chat.options null -> (unset); chat.options.enable_thinking (unset) -> false``. It is one
    change of the whole table; a key inside tables on both sides is named by its path."""
    from rmlprep.pipeline.config_diff import config_change

    def cfg(chat):
        return config_from_dict({"pipeline": "sft", "input": {"paths": ["/x.jsonl"], "column": "messages"},
                                 "tokenizer": {"path": "/t.json"}, "pack": {"seq_len": 64},
                                 "output": {"dir": "/o"}, "chat": chat})

    old = cfg(old_chat)
    manifest = json.loads(json.dumps({"config_hash": old.config_hash, "config": old.to_dict()}))
    assert config_change(manifest, cfg(new_chat), old.config_hash) == want

def test_other_config_refusal_names_a_changed_template(tmp_path):
    """chat.format = "template": the run adds the template's sha256 to [chat] (the hash follows the
    template), which config_from_dict refuses as a key of a file, so the refusal of a folder written
    with another template named no change at all (explorer6 m3). It names the sha256 now."""
    from rmlprep.pipeline.config_diff import config_change

    def cfg(sha):
        c = config_from_dict({"pipeline": "sft", "input": {"paths": ["/x.jsonl"], "column": "messages"},
                              "tokenizer": {"path": "/t.json"}, "pack": {"seq_len": 64},
                              "output": {"dir": "/o"}, "chat": {"format": "template"}})
        c["chat"]["template_sha256"] = sha  # as rmlprep.chat_parity.resolve_chat_config records it
        return c

    old = cfg("a" * 64)
    manifest = json.loads(json.dumps({"config_hash": old.config_hash, "config": old.to_dict()}))
    assert config_change(manifest, cfg("b" * 64), old.config_hash) == f'chat.template_sha256 "{"a" * 64}" -> "{"b" * 64}"'


def test_a_tokenizer_file_changed_under_the_same_config_is_not_resumed(corpus, tmp_path):
    """The config names the tokenizer by path, so another tokenizer at that path keeps the config
    hash. Found in a fresh-user trial: the second run skipped every unit as done, its shards
    held the first tokenizer's ids while the manifest and card named the second. Done markers
    now name the tokenizer fingerprint: a folder made with another one is refused (exit 2
    through the CLI), --overwrite redoes it, and a marker naming no tokenizer (an earlier
    rmlprep's) is redone rather than trusted."""
    inp, _ = corpus
    tk = tmp_path / "tk.json"
    tk.write_bytes(TINY.read_bytes())
    out = tmp_path / "o"
    first = run(make_cfg(inp, out, tokenizer={"path": str(tk)}), log=quiet)
    before = shard_bytes(out)
    tk.write_bytes((ROOT / "fixtures" / "tokenizers" / "bl_qwen2.json").read_bytes())
    with pytest.raises(ConfigError, match=r"holds shards made with another tokenizer \(\d+ done markers, e\.g\. "
                                          rf"shard-\d+\.done\.json: tokenizer {first['tokenizer']['fingerprint'][:12]}, "):
        run(make_cfg(inp, out, tokenizer={"path": str(tk)}), resume=True, log=quiet)
    m = run(make_cfg(inp, out, tokenizer={"path": str(tk)}), overwrite=True, log=quiet)
    assert m["units_processed"] == len(m["shards"]) and m["units_skipped"] == 0
    assert m["tokenizer"]["fingerprint"] != first["tokenizer"]["fingerprint"]
    after = shard_bytes(out)
    assert after.keys() == before.keys() and after != before
    for name in after:
        meta = read_shard_metadata(out / name)
        assert meta["rmlprep.tokenizer_fingerprint"] == m["tokenizer"]["fingerprint"]
    # a marker of an earlier rmlprep (no "tokenizer"): the unit is redone, not trusted
    marker = out / "shard-00000.done.json"
    d = json.loads(marker.read_text())
    assert d.pop("tokenizer") == m["tokenizer"]["fingerprint"]
    marker.write_text(json.dumps(d))
    logs: list[str] = []
    again = run(make_cfg(inp, out, tokenizer={"path": str(tk)}), resume=True, log=logs.append)
    assert again["units_processed"] == 1 and shard_bytes(out) == after
    assert any("done marker is for another tokenizer" in x for x in logs)


def test_kill_and_resume_gives_same_bytes(tmp_path):
    inp = tmp_path / "c.jsonl"
    write_corpus(inp, 600)
    toml = tmp_path / "c.toml"
    toml.write_text(
        f'[input]\npaths = ["{inp}"]\nunit_bytes = 25000\nbatch_rows = 32\n'
        f'[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 256\n'
        f'[output]\ndir = "{tmp_path / "killed"}"\n[run]\nworkers = 1\nprogress = "log"\nhistogram = false\n'
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "rmlprep.cli", "run", str(toml)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    out = tmp_path / "killed"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(out.glob("*.done.json"))) < 2 and proc.poll() is None:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(out.glob("*.done.json")))
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "manifest.json").exists()  # it really died mid-way
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["units_skipped"] >= done_before >= 2
    assert not list(out.glob("*.tmp-*"))
    r = subprocess.run(cmd + ["--output", str(tmp_path / "clean")], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert shard_bytes(out) == shard_bytes(tmp_path / "clean")
    assert len(shard_bytes(out)) == len(m["shards"]) > done_before


def test_histogram_png(corpus, tmp_path):
    pytest.importorskip("matplotlib")
    inp, _ = corpus
    out = tmp_path / "o"
    cfg = make_cfg(inp, out, run={"histogram": True})
    run(cfg, log=quiet)
    assert (out / "lengths.png").read_bytes()[:4] == b"\x89PNG"
    stats = json.loads((out / "stats.json").read_text())
    assert sum(stats["document_tokens"]["hist"].values()) == 300
    assert np.isfinite(stats["document_tokens"]["mean"])


def test_histogram_without_matplotlib_is_said_only_when_asked(corpus, tmp_path, monkeypatch):
    """A fresh-user finding: every run without matplotlib (the ``live`` extra brings none) logged
    "lengths.png skipped", as ``run.histogram`` defaulted to true. The default is now ``"auto"``
    (drawn when matplotlib is there, skipped quietly when not); ``true``, asking for it, still says
    it; ``false`` draws nothing. Any other value is refused."""
    from rmlprep.errors import ConfigError

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    inp, _ = corpus
    assert config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 8},
                             "output": {"dir": str(tmp_path / "x")}})["run"]["histogram"] == "auto"
    for i, (hist, said) in enumerate((("auto", False), (True, True), (False, False))):
        lines: list[str] = []
        run(make_cfg(inp, tmp_path / f"o{i}", run={"histogram": hist}), log=lines.append)
        assert [x for x in lines if "matplotlib is not installed" in x] == (
            ["histogram: matplotlib is not installed (pip install 'rmlprep[plot]'); lengths.png skipped"] if said else [])
        assert not (tmp_path / f"o{i}" / "lengths.png").exists()
    with pytest.raises(ConfigError, match=r'run\.histogram: must be true, false or "auto", got \'yes\''):
        make_cfg(inp, tmp_path / "o", run={"histogram": "yes"})


def test_a_run_from_a_subfolder_shows_paths_without_dotdot(tmp_path, monkeypatch):
    """A fresh-user finding: run from ``proj/sub`` with ``paths = ["../data/x.jsonl"]``, the log
    and errors showed ``/proj/sub/../data/x.jsonl``. Lines now show ``/proj/data/x.jsonl`` (the
    same file); the manifest and the rejects keep the path as resolved, since it is hashed (an
    upgraded rerun of a running folder must not become "another config"). A rerun of the same
    files from the project folder is refused as another config, as before, and says they are the
    same files; that line shows both paths as compared."""
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "sub").mkdir()
    (proj / "data" / "x.jsonl").write_text('{"text": "a b"}\n{"text": 5}\n{"text": "c"}\n')
    monkeypatch.chdir(proj / "sub")
    lines: list[str] = []
    c = make_cfg(Path("../data/x.jsonl"), Path("../out"))  # 1 reject of 3: over 0.1, a summary line
    m = run(c, log=lines.append)
    assert m["config"]["input"]["paths"] == [str(proj / "sub" / ".." / "data" / "x.jsonl")]  # as hashed
    assert not [x for x in lines if "/../" in x]
    assert any(str(proj / "data" / "x.jsonl") in x for x in lines)  # the summary's reject-share line
    (proj / "data" / "y.jsonl").write_bytes(b'{"text": "a"}\n{"tex')
    with pytest.raises(RmlprepError) as e:
        run(make_cfg(Path("../data/y.jsonl"), Path("../out-y")), log=quiet)
    assert str(proj / "data" / "y.jsonl") in str(e.value) and "/../" not in str(e.value)
    monkeypatch.chdir(proj)
    with pytest.raises(ConfigError, match=r"input\.paths \[\"\S* -> \[\"\S* \(the same files\).*run from the folder "
                                          r"the shards were made from"):
        run(make_cfg(Path("data/x.jsonl"), Path("out")), log=quiet)


def _has_jinja2() -> bool:
    import importlib.util

    return importlib.util.find_spec("jinja2") is not None


@pytest.mark.parametrize("eos, empty", [(False, 1), (True, 0)])
def test_an_empty_document_is_counted(tmp_path, eos, empty):
    """A fresh-user trial: with ``pack.eos = false`` the empty text of row 1 has no token, so no
    row holds it (example_index 0 and 2 only), yet nothing counted it. It is counted as
    ``empty_documents`` (and said in the summary); with eos it is a lone eos document."""
    import pyarrow.parquet as pq

    inp = tmp_path / "e.jsonl"
    inp.write_text('{"text": "a"}\n{"text": ""}\n{"text": "b"}\n')
    lines: list[str] = []
    m = run(make_cfg(inp, tmp_path / "o", pack={"seq_len": 16, "eos": eos}), log=lines.append)
    assert m["totals"]["documents"] == 3 and m["totals"]["rejects"] == 0
    assert m["totals"]["empty_documents"] == empty
    idx = {i for r in pq.read_table(next((tmp_path / "o").glob("train-*.parquet")))["example_index"].to_pylist()
           for i in r}
    assert idx == ({0, 2} if empty else {0, 1, 2})
    assert any("1 document has no token" in line for line in lines) == bool(empty)


def test_a_rerun_with_nothing_to_do_says_so_instead_of_a_worker_count(corpus, tmp_path):
    """A fresh-user trial: the demo's first run logged "2 workers" and its no-op rerun "1 worker"
    (the pool is sized to the units left, and no pool starts for none), which read as a change
    of setting. The rerun's line says that every unit is done instead."""
    inp, _ = corpus
    first: list[str] = []
    run(make_cfg(inp, tmp_path / "o", workers=2), log=first.append)
    again: list[str] = []
    m = run(make_cfg(inp, tmp_path / "o", workers=2), log=again.append)
    assert m["units_processed"] == 0
    (line1,) = [x for x in first if x.startswith("run: ")]
    (line2,) = [x for x in again if x.startswith("run: ")]
    assert ", 2 workers, tokenizer " in line1
    assert ", every unit done, nothing to process, tokenizer " in line2 and "worker" not in line2


@pytest.mark.parametrize("eos", [False, True])
def test_a_kept_marker_older_than_the_empty_documents_count_is_not_read_as_0(tmp_path, eos):
    """``empty_documents`` came into the done markers within marker version 3 (e4c4bf2), so a unit
    written before it is kept on resume without the count. Without framing (``pack.eos =
    false``) its empty documents are not known: the total is null in the manifest and stats.json
    and the summary says so (it read as 0, leaving out row 1's empty document). With eos no
    document is empty, so 0 is exact; ``--overwrite`` counts again."""
    inp = tmp_path / "e.jsonl"
    inp.write_text('{"text": "a"}\n{"text": ""}\n{"text": "b"}\n')
    out = tmp_path / "o"
    run(make_cfg(inp, out, pack={"seq_len": 16, "eos": eos}), log=quiet)
    for p in out.glob("shard-*.done.json"):  # as a marker written before e4c4bf2
        mk = json.loads(p.read_text())
        del mk["empty_documents"]
        p.write_text(json.dumps(mk))
    lines: list[str] = []
    m = run(make_cfg(inp, out, pack={"seq_len": 16, "eos": eos}), resume=True, log=lines.append)
    assert m["units_processed"] == 0 and m["totals"]["documents"] == 3
    assert m["totals"]["empty_documents"] == (0 if eos else None)
    assert json.loads((out / "stats.json").read_text())["totals"]["empty_documents"] == (0 if eos else None)
    unknown = "documents of no token (empty text, and no bos/eos framing): not known (units written before"
    assert any(unknown in line for line in lines) == (not eos)
    m = run(make_cfg(inp, out, pack={"seq_len": 16, "eos": eos}), overwrite=True, log=quiet)
    assert m["totals"]["empty_documents"] == (0 if eos else 1)


def test_input_files_with_the_same_bytes_are_named(tmp_path):
    """A copy of a file under a recursive glob (``data/**/*.jsonl`` reaching ``data/backup/``)
    is read as a second file, and every row of it trained twice (explorer6: a 50-row file and
    its copy gave 100 documents, exit 0, no word). The plan hashes every byte anyway, so it says
    so: a JSONL file cut into several units and a Parquet file each equal their copy; a file of
    the same size but other bytes, and empty files, are not named."""
    from rmlprep.pipeline.plan import plan

    data = tmp_path / "data"
    (data / "backup").mkdir(parents=True)
    text = "".join(json.dumps({"text": f"document {i:03d}"}) + "\n" for i in range(50))  # 28 bytes a line
    (data / "a.jsonl").write_text(text)
    (data / "backup" / "a.jsonl").write_text(text)
    (data / "b.jsonl").write_text(text.replace("document 000", "document 999"))  # same size, other bytes
    (data / "e1.jsonl").write_text("")
    (data / "e2.jsonl").write_text("")
    table = pa.table({"text": [f"row {i}" for i in range(10)]})
    pq.write_table(table, data / "p.parquet", row_group_size=3)
    pq.write_table(table, data / "backup" / "p.parquet", row_group_size=3)
    cfg = config_from_dict({"input": {"paths": [f"{data}/**/*.jsonl", f"{data}/**/*.parquet"], "unit_bytes": 500,
                                      "unit_rows": 3},
                            "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 64},
                            "output": {"dir": str(tmp_path / "out")}})
    logs: list[str] = []
    units = plan(cfg, log=logs.append)
    assert sum(u.path == str(data / "a.jsonl") for u in units) == 3  # 1400 bytes in 500-byte units
    warned = [m for m in logs if m.startswith("warning: input:")]
    assert [m.split(" holds the same bytes as ")[0] for m in warned] == [
        f"warning: input: {data / 'backup' / 'a.jsonl'}", f"warning: input: {data / 'p.parquet'}"]  # glob order
    assert f"as {data / 'a.jsonl'} (xxh3-128 " in warned[0]
    assert f"as {data / 'backup' / 'p.parquet'} (xxh3-128 " in warned[1]
    assert "rows are in the shards twice" in warned[0]


def test_the_same_text_in_another_compression_is_named(tmp_path):
    """``a.jsonl`` beside ``a.jsonl.gz`` (or ``.zst``) is the same data read twice, but their
    bytes differ, so the same-bytes warning (d101239) said nothing: 2 lines and their gzip gave
    4 documents, no word. The plan compares the decompressed heads when the input mixes
    compressions: s.jsonl (2 lines of 20 bytes) and s.jsonl.zst hold the same text (whole);
    a.jsonl (2,400 lines of 31 bytes, 74,400 bytes, over the 65,536 compared) and a.jsonl.gz the
    same first 64 KiB; b.jsonl.gz, a.jsonl with its first line changed, is not named."""
    import gzip

    import zstandard

    from rmlprep.pipeline.plan import plan

    d = tmp_path / "d"
    d.mkdir()
    small = "".join(json.dumps({"text": f"doc {i:03d}"}) + "\n" for i in range(2)).encode()
    big = "".join(json.dumps({"text": f"document {i:06d} xx"}) + "\n" for i in range(2400)).encode()
    assert (len(small), len(big)) == (40, 74400)
    (d / "s.jsonl").write_bytes(small)
    (d / "s.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(small))
    (d / "a.jsonl").write_bytes(big)
    (d / "a.jsonl.gz").write_bytes(gzip.compress(big))
    (d / "b.jsonl.gz").write_bytes(gzip.compress(big.replace(b"000000", b"999999")))
    cfg = config_from_dict({"input": {"paths": [f"{d}/*"]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "out")}})
    logs: list[str] = []
    plan(cfg, log=logs.append)
    warned = [m for m in logs if m.startswith("warning: input:")]
    assert warned == [
        f"warning: input: {d / 'a.jsonl.gz'} holds the same first 64 KiB of text as {d / 'a.jsonl'} once decompressed "
        "(likely the same data in another compression): both are read, so their rows are in the shards twice if "
        "the rest matches too; leave one out of input.paths (or its glob) unless that is meant",
        f"warning: input: {d / 's.jsonl.zst'} holds the same text as {d / 's.jsonl'} once decompressed (the same "
        "data in another compression): both are read, so their rows are in the shards twice; leave one out of "
        "input.paths (or its glob) unless that is meant"], logs


def test_one_name_in_two_formats_is_named(tmp_path):
    """A dataset repository holding its split twice (``train.jsonl`` and the Hub's converted
    ``train.parquet``; ``valid.csv`` and ``valid.jsonl.gz``) read by ``d/*`` (now one entry per split): every row trained
    twice, and neither warning above could tell (other bytes, other formats): 2 + 2 rows gave 4
    documents, no word. The plan names the pair by their names (no read); ``test.jsonl`` alone
    and ``a.jsonl`` beside ``a.jsonl.gz`` (the compression warning's) are not named here."""
    import gzip

    from rmlprep.pipeline.plan import plan

    d = tmp_path / "d"
    d.mkdir()
    rows = [{"text": "first document"}, {"text": "second document"}]
    lines = "".join(json.dumps(r) + "\n" for r in rows)
    (d / "train.jsonl").write_text(lines)
    pq.write_table(pa.Table.from_pylist(rows), d / "train.parquet")
    (d / "test.jsonl").write_text(lines.replace("document", "test"))
    (d / "valid.csv").write_text("text\nfirst valid\n")
    (d / "valid.jsonl.gz").write_bytes(gzip.compress(b'{"text": "first valid"}\n'))
    (d / "a.jsonl").write_text(lines.replace("document", "a"))
    (d / "a.jsonl.gz").write_bytes(gzip.compress(lines.replace("document", "b").encode()))
    # each split its own entry: one glob over train and test files is refused (test_readers'
    # test_a_glob_over_a_train_and_an_eval_split_is_refused); the pair warning is the plan's, across entries
    paths = [f"{d}/train*", f"{d}/test*", f"{d}/valid*", f"{d}/a*"]
    cfg = config_from_dict({"input": {"paths": paths}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "out")}})
    logs: list[str] = []
    plan(cfg, log=logs.append)
    tail = ("have one name in two formats, likely one dataset saved twice (a repository's train.jsonl beside its "
            "train.parquet): both are read, so their rows may be in the shards twice; leave one out of input.paths "
            "(or its glob) unless they differ")
    assert [m for m in logs if m.startswith("warning: input:")] == [
        f"warning: input: {d / 'train.parquet'} and {d / 'train.jsonl'} {tail}",
        f"warning: input: {d / 'valid.jsonl.gz'} and {d / 'valid.csv'} {tail}"], logs


def test_two_gzips_of_one_file_are_named(tmp_path):
    """``gzip`` writes the time (and the file's name) into its header, so ``c.jsonl.gz`` made
    from the same 40 bytes as ``b.jsonl.gz`` a second later has other bytes: the same-bytes
    warning cannot see it, and the head check ran only for inputs of two compressions, so a
    folder all of gzips read the same data twice without a word (review13). Here mtime 1 and 2:
    named, as the same text compressed twice; ``d.jsonl.gz`` (other text) and the two plain
    files ``p.jsonl`` / ``q.jsonl`` (one line of 21 bytes in common, other bytes) are not."""
    import gzip

    from rmlprep.pipeline.plan import plan

    d = tmp_path / "d"
    d.mkdir()
    small = "".join(json.dumps({"text": f"doc {i:03d}"}) + "\n" for i in range(2)).encode()
    assert len(small) == 40
    (d / "b.jsonl.gz").write_bytes(gzip.compress(small, mtime=1))
    (d / "c.jsonl.gz").write_bytes(gzip.compress(small, mtime=2))
    (d / "d.jsonl.gz").write_bytes(gzip.compress(small.replace(b"001", b"002"), mtime=1))
    assert (d / "b.jsonl.gz").read_bytes() != (d / "c.jsonl.gz").read_bytes()
    (d / "p.jsonl").write_bytes(small[:20])
    (d / "q.jsonl").write_bytes(small[:20] + b'{"text": "other"}\n')
    cfg = config_from_dict({"input": {"paths": [f"{d}/*"]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "out")}})
    logs: list[str] = []
    plan(cfg, log=logs.append)
    assert [m for m in logs if m.startswith("warning: input:")] == [
        f"warning: input: {d / 'c.jsonl.gz'} holds the same text as {d / 'b.jsonl.gz'} once decompressed (the same "
        "data compressed twice, e.g. with another time or name in its header): both are read, so their rows are in "
        "the shards twice; leave one out of input.paths (or its glob) unless that is meant"], logs


def test_a_glob_matching_only_the_output_folder_says_so(tmp_path, monkeypatch):
    """``paths = ["in/same/*.parquet"]`` with ``output.dir = "in/same"``: the glob's only match is
    in the output folder, which a run never reads. The refusal said "(1 matches: directories,
    datasets metadata or the output folder)" and then the note on relative paths, "run from
    /tmp/explorer6, or give the absolute path", although the run was started there (explorer6)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in" / "same").mkdir(parents=True)
    pq.write_table(pa.table({"text": ["a", "b"]}), tmp_path / "in" / "same" / "a.parquet")
    cfg = config_from_dict({"input": {"paths": ["in/same/*.parquet"]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 64}, "output": {"dir": "in/same"}})
    with pytest.raises(ConfigError) as e:
        run(cfg, overwrite=True, log=lambda m: None)
    assert str(e.value) == (f"input.paths: the glob '{tmp_path}/in/same/*.parquet' matches no corpus file (1 matches: "
                            f"1 of them in the output folder {tmp_path}/in/same, which a run never reads)")
