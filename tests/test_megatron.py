"""output.format = "megatron": every document read back, by the layout and by megatron-core.

Expected ids: each input document encoded by the tokenizer (checked against its reference ids by
the parity stage of the same run) followed by eos, in input order — what Megatron-LM's
``preprocess_data.py --append-eod`` writes for a document.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from rmlprep.config import config_from_dict
from rmlprep.errors import ConfigError
from rmlprep.load import open_tokenizer
from rmlprep.pipeline import run
from rmlprep.pipeline.megatron import MegatronWriter
from rmlprep.pipeline.output import OutputFolder

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
TEXT = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    texts: list[str] = []
    if TEXT.exists():
        with open(TEXT, "rb") as f:
            for line in f:
                texts.append(json.loads(line)["text"][:2000])
                if len(texts) == 200:
                    break
    else:
        texts = [f"Document {i}: " + "word " * (i % 97) for i in range(200)]
    rows = [json.dumps({"text": t}) for t in texts]
    rows.insert(7, '{"text": null}')  # a reject: not a document
    p = tmp_path_factory.mktemp("c") / "c.jsonl"
    p.write_text("\n".join(rows) + "\n")
    return p, texts


def make_cfg(inp, out, workers=2, **output):
    return config_from_dict({"input": {"paths": [str(inp)], "unit_bytes": 50_000},
                             "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 128},
                             "output": {"dir": str(out), "format": "megatron", **output},
                             "run": {"workers": workers, "progress": "none", "histogram": False}})


def read_idx(path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray]:
    """The .idx layout of megatron-core's indexed_dataset.py (_IndexWriter), read with numpy."""
    raw = path.read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    version, code, n_seq, n_doc = struct.unpack_from("<QBQQ", raw, 9)
    assert version == 1
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
             8: np.uint16}[code]
    off = 9 + 8 + 1 + 8 + 8
    lengths = np.frombuffer(raw, "<i4", n_seq, off)
    pointers = np.frombuffer(raw, "<i8", n_seq, off + 4 * n_seq)
    docs = np.frombuffer(raw, "<i8", n_doc, off + 12 * n_seq)
    assert len(raw) == off + 12 * n_seq + 8 * n_doc
    return np.dtype(dtype), lengths, pointers, docs


def documents(out: Path) -> list[list[int]]:
    """Every document of every unit, in unit order, read with numpy.memmap."""
    found = []
    for idx in sorted(out.glob("shard-*.idx")):
        dtype, lengths, pointers, docs = read_idx(idx)
        data = np.memmap(idx.with_suffix(".bin"), dtype=dtype, mode="r") if lengths.sum() else np.zeros(0, dtype)
        assert np.array_equal(docs, np.arange(len(lengths) + 1))  # one sequence per document
        for n, p in zip(lengths, pointers):
            found.append(data[p // dtype.itemsize: p // dtype.itemsize + n].tolist())
    return found


def test_megatron_documents_read_back(corpus, tmp_path):
    inp, texts = corpus
    m = run(make_cfg(inp, tmp_path / "o"), log=quiet)
    tok = open_tokenizer(str(TINY))[0]
    expected = [tok.encode(t) + [tok.eos_id] for t in texts]
    assert documents(tmp_path / "o") == expected
    dtype = read_idx(tmp_path / "o" / "shard-00000.idx")[0]
    assert dtype == np.uint16  # vocab 600 < 65,500
    assert m["totals"]["documents"] == len(texts) and m["totals"]["rejects"] == 1
    args = (tmp_path / "o" / "megatron-data-args.txt").read_text().split()
    assert args[1] == str(tmp_path / "o" / "shard-00000") and len(args) == 2 * len(m["shards"])
    assert sum(map(int, args[0::2])) == sum(len(d) for d in expected)
    assert not list((tmp_path / "o").glob("*.parquet")) and not (tmp_path / "o" / "README.md").exists()


def test_megatron_summary_names_sequences_not_packed_rows(corpus, tmp_path):
    """explorer5 X6: the summary of a Megatron run said "packed rows 15 x 64 (2 short)",
    "unfilled ... in the short last row of each shard" and "tokens ... = 874 in rows": rows no
    file holds."""
    lines: list[str] = []
    run(make_cfg(corpus[0], tmp_path / "o", workers=1), log=lines.append)
    summary = next(x for x in lines if x.startswith("summary"))
    assert "packed rows" not in summary and "unfilled" not in summary and "short last row" not in summary, summary
    assert "each document one sequence of shard-NNNNN.bin/.idx" in summary, summary
    assert " in rows" not in summary and "in the .bin files" in summary, summary


def test_megatron_without_a_document_writes_no_data_args(tmp_path):
    """Every row rejected: no megatron-data-args.txt to point Megatron at an empty dataset, but
    the README that says there is no data, as a Parquet run writes."""
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"text": 1}\n{"text": null}\n')
    m = run(make_cfg(inp, tmp_path / "o", workers=1), log=quiet)
    assert m["totals"]["documents"] == 0 and m["totals"]["rejects"] == 2
    assert not (tmp_path / "o" / "megatron-data-args.txt").exists()
    assert (tmp_path / "o" / "README.md").read_text().startswith("# No data")


def test_megatron_same_bytes_any_workers_and_resume(corpus, tmp_path):
    inp, _ = corpus
    run(make_cfg(inp, tmp_path / "a", workers=1), log=quiet)
    run(make_cfg(inp, tmp_path / "b", workers=2), log=quiet)
    files = lambda d: {p.name: p.read_bytes() for p in sorted(d.glob("shard-*.[bi][id][nx]"))}  # noqa: E731
    ref = files(tmp_path / "a")
    assert len(ref) >= 4 and ref == files(tmp_path / "b")
    (tmp_path / "b" / "shard-00001.idx").unlink()
    (tmp_path / "b" / "shard-00002.bin").write_bytes(b"xx")
    m = run(make_cfg(inp, tmp_path / "b"), log=quiet)
    assert m["units_processed"] == 2 and files(tmp_path / "b") == ref


def test_a_megatron_folder_is_not_mistaken(corpus, tmp_path):
    """A Megatron folder keeps its shard-NNNNN.bin/.idx names (the --data-path prefixes): a rerun
    resumes it (they are not taken for Parquet shards of an earlier version, which are refused),
    a Parquet run into it is refused as another config, and datasets finds no split-named data
    file in it (its patterns fall back to every file), so load_dataset fails rather than reading
    the done markers or the manifest as rows."""
    datasets = pytest.importorskip("datasets")
    from datasets.data_files import get_data_patterns

    inp, _ = corpus
    out = tmp_path / "o"
    m0 = run(make_cfg(inp, out), log=quiet)
    logs: list[str] = []
    m = run(make_cfg(inp, out), log=logs.append)
    assert m["units_processed"] == 0 and m["units_skipped"] == len(m0["shards"]) >= 4
    assert any(x.startswith(f"resume: {len(m0['shards'])} of {len(m0['shards'])} units already done") for x in logs)
    parquet = config_from_dict({"input": {"paths": [str(inp)], "unit_bytes": 50_000}, "tokenizer": {"path": str(TINY)},
                               "pack": {"seq_len": 128}, "output": {"dir": str(out)},
                               "run": {"workers": 2, "progress": "none", "histogram": False}})
    with pytest.raises(ConfigError, match="holds shards of a different config"):
        run(parquet, log=quiet)
    assert get_data_patterns(str(out)) == {"train": ["**"]}
    run(parquet.with_overrides(output=str(tmp_path / "p")), log=quiet)  # beside it, the Parquet folder's patterns
    patterns = get_data_patterns(str(tmp_path / "p"))
    assert list(patterns) == ["train"] and patterns["train"][0] == "**/train[-._ 0-9]*"
    for load in (lambda: datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf")),
                 lambda: datasets.load_dataset("parquet", data_dir=str(out), cache_dir=str(tmp_path / "hf"))):
        with pytest.raises(Exception):  # noqa: B017 - datasets' own error; what matters is that nothing loads
            load()


def test_megatron_int32_for_a_large_vocab(tmp_path):
    """A vocab of 65,500 ids or more is written as int32 (dtype code 4), as megatron-core does."""
    import pyarrow as pa

    from rmlprep.packing import pack_concat

    ids = pa.array([[1, 70_000, 3], [65_535, 5]], type=pa.list_(pa.uint32()))
    rows = pack_concat(ids, seq_len=4, eos_id=0)
    table = pa.concat_tables([pa.Table.from_batches([b]) for b in [rows.rows, rows.tail] if b is not None and b.num_rows])
    out = OutputFolder(tmp_path)
    MegatronWriter(vocab_size=80_000).write(out, 0, table, {})
    assert documents(tmp_path) == [[1, 70_000, 3, 0], [65_535, 5, 0]]
    assert read_idx(tmp_path / "shard-00000.idx")[0] == np.int32
    with pytest.raises(ConfigError, match="does not fit uint16"):
        MegatronWriter(vocab_size=600).write(out, 1, table, {})


def test_megatron_config():
    with pytest.raises(ConfigError, match="output.format: must be one of"):
        make_cfg("x.jsonl", "o", format="arrow")
    with pytest.raises(ConfigError, match="the sft pipeline writes parquet"):
        config_from_dict({"pipeline": "sft", "input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": str(TINY)},
                          "chat": {"format": "chatml"}, "pack": {"seq_len": 8},
                          "output": {"dir": "o", "format": "megatron"}})
    a = config_from_dict({"input": {"paths": ["x.jsonl"]}, "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 8},
                          "output": {"dir": "o"}})
    assert "format" not in a.hashed_part()["output"]  # configs hashed before the key existed keep their hash
    assert make_cfg("x.jsonl", "o").config_hash != a.config_hash


@pytest.mark.parametrize("key, value", [("compression", "snappy"), ("compression", "none"), ("row_group_rows", 64)])
def test_parquet_options_are_refused_for_megatron(key, value):
    """output.compression and output.row_group_rows shape Parquet files only: a Megatron run
    writes .bin/.idx (raw ids, no row groups), so a value set there was ignored and the user got
    other output than asked. Refused at load, naming the key; its default is accepted (in any
    case, as pyarrow takes codecs), so a manifest's config (every key) loads back."""
    with pytest.raises(ConfigError, match=rf"^output\.{key} = {value!r}: only Parquet output reads it.*"
                                          rf"remove output\.{key}, or write Parquet$"):
        make_cfg("x.jsonl", "o", **{key: value})
    assert make_cfg("x.jsonl", "o", format="parquet", **{key: value})["output"][key] == value
    c = make_cfg("x.jsonl", "o", compression="ZSTD", row_group_rows=4096)
    assert config_from_dict(c.to_dict()).config_hash == c.config_hash


def test_megatron_core_reads_every_document(corpus, tmp_path):
    """The reference reader: megatron-core's IndexedDataset (needs torch; skips where it is absent)."""
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    except Exception as e:  # noqa: BLE001 - ImportError, or torch failing to load
        pytest.skip(f"megatron-core does not import here ({type(e).__name__}: {e}); pip install -e '.[reference]'")
    inp, texts = corpus
    run(make_cfg(inp, tmp_path / "o"), log=quiet)
    tok = open_tokenizer(str(TINY))[0]
    expected = [tok.encode(t) + [tok.eos_id] for t in texts]
    got = []
    for idx in sorted((tmp_path / "o").glob("shard-*.idx")):
        ds = IndexedDataset(str(idx.with_suffix("")))
        assert list(ds.document_indices) == list(range(len(ds) + 1))
        got.extend(ds[i].tolist() for i in range(len(ds)))
        assert ds[0].dtype == np.uint16
    assert got == expected
