"""The run's reports: the summary table says what the rows hold."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmlprep.config import config_from_dict
from rmlprep.errors import OutputError
from rmlprep.pipeline import run
from rmlprep.pipeline.output import OutputFolder

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def _run(tmp_path: Path, **pack) -> tuple[dict, str, int]:
    tmp_path.mkdir(exist_ok=True)
    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": "word " * n}) + "\n" for n in (3, 50, 7, 200, 1)))
    out = tmp_path / "o"
    cfg = config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 32, **pack}, "output": {"dir": str(out)},
                            "run": {"progress": "none", "histogram": False, "workers": 1}})
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    line = next(x for x in logs[-1].splitlines() if x.startswith("tokens "))
    in_rows = sum(len(r) for r in pq.read_table(out / "train-00000.parquet")["input_ids"].to_pylist())
    return m, line, in_rows


@pytest.mark.parametrize("bos,eos,names", [(False, True, "eos <|end_of_text|>"),
                                           (True, True, "bos <|begin_of_text|>/eos <|end_of_text|>")])
def test_summary_tokens_count_the_framing(tmp_path, bos, eos, names):
    """Five documents, each framed with eos (and bos): the summary's tokens line adds 5 (10)
    framing tokens to the documents' own, and the sum is what the shard's rows hold. It names
    them: TINY's spec has bos_id 0 and eos_id 1, vocab[0] = '<|begin_of_text|>' and vocab[1] =
    '<|end_of_text|>'."""
    m, line, in_rows = _run(tmp_path, bos=bos, eos=eos)
    docs = m["totals"]["tokens"]
    n = 5 * (bos + eos)
    assert line.split(None, 1)[1] == f"{docs:,} in documents + {n} {names} = {docs + n:,} in rows"
    assert in_rows == docs + n == m["totals"]["written_tokens"]


REAL_QWEN = Path.home() / ".cache" / "rmlprep-real-tokenizers" / "hf" / "qwen2.5"


@pytest.mark.parametrize("tokenizer", [
    pytest.param(TINY, id="tiny"),
    pytest.param(REAL_QWEN, id="qwen2.5-instruct", marks=pytest.mark.skipif(
        not (REAL_QWEN / "tokenizer_config.json").exists(), reason=f"{REAL_QWEN} is absent")),
])
def test_a_pretraining_run_names_its_eos_before_any_work(tmp_path, tokenizer):
    """The eos the pack stage puts after every document is the tokenizer's; a model folder's may
    not be the one a user expects (Qwen2.5-Instruct's is its turn end '<|im_end|>', not
    '<|endoftext|>'), and a run never said which: the log names it before the units start (right
    before the "run:" line: a run refused before that stays one line), and the manifest records
    it (tokenizer.framing). Expected: the eos_token of the folder's
    tokenizer_config.json, and its id in tokenizer.json's added_tokens; TINY's spec: eos_id 1,
    vocab[1] '<|end_of_text|>'."""
    if tokenizer == TINY:
        want = {"id": 1, "token": "<|end_of_text|>"}
    else:
        name = json.loads((tokenizer / "tokenizer_config.json").read_text())["eos_token"]
        added = json.loads((tokenizer / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
        want = {"id": next(t["id"] for t in added if t["content"] == name), "token": name}
    inp = tmp_path / "c.jsonl"
    inp.write_text('{"text": "one"}\n{"text": "two"}\n')
    cfg = config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(tokenizer)},
                            "pack": {"seq_len": 32}, "output": {"dir": str(tmp_path / "o")},
                            "run": {"progress": "none", "histogram": False, "workers": 1}})
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    line = f"pack: every document ends with eos {want['token']!r} (id {want['id']})"
    assert line in logs and logs.index(line) + 1 == min(i for i, x in enumerate(logs) if x.startswith("run:"))
    assert m["tokenizer"]["framing"] == {"eos": want}


def test_summary_tokens_without_framing_and_with_cuts(tmp_path):
    m, line, in_rows = _run(tmp_path / "a", eos=False)
    assert line.split(None, 1)[1] == f"{m['totals']['tokens']:,} (all in rows)" and in_rows == m["totals"]["tokens"]
    m, line, in_rows = _run(tmp_path / "b", overflow="truncate")
    cut = m["totals"]["truncated_tokens"]
    assert cut > 0 and line.split(None, 1)[1] == (f"{m['totals']['tokens']:,} in documents + 5 eos <|end_of_text|> - {cut:,} cut "
                                                  f"(over-long) = {in_rows:,} in rows")


def _folder_with_rejects(tmp_path: Path, pipeline: str, out_name: str = "o") -> tuple[Path, dict]:
    """A real output folder of three units: one with good and bad rows, one with bad rows only
    (its shard has no row group), one with good rows; rejects/ holds the bad ones."""
    good = ({"text": "word " * n} for n in (3, 50, 7, 200, 1)) if pipeline == "pretrain" else (
        {"messages": [{"role": "user", "content": f"q{i} " * i}, {"role": "assistant", "content": f"a{i} " * i}]}
        for i in range(1, 6))
    good = [json.dumps(r) for r in good]
    inp = tmp_path / "in"
    inp.mkdir(parents=True, exist_ok=True)
    (inp / "a.jsonl").write_text("\n".join([good[0], "not json", good[1], '{"other": 1}']) + "\n")
    (inp / "b.jsonl").write_text("not json either\n{}\n")
    (inp / "c.jsonl").write_text("\n".join(good[2:]) + "\n")
    out = tmp_path / out_name
    d = {"pipeline": pipeline, "input": {"paths": [str(inp / f"{n}.jsonl") for n in "abc"]},
         "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 32}, "output": {"dir": str(out)},
         "run": {"progress": "none", "histogram": False, "workers": 1}}
    if pipeline == "sft":
        d.update(chat={"format": "chatml", "text_markers": True}, parity={"chat": False}, pack={"seq_len": 64, "overflow": "truncate"})
    m = run(config_from_dict(d), log=lambda _: None)
    assert len(m["shards"]) == 3 and m["totals"]["rejects"] == 4 and list((out / "rejects").iterdir())
    return out, m


@pytest.mark.parametrize("pipeline", ["pretrain", "sft"])
def test_output_folder_loads_with_datasets(tmp_path, pipeline):
    """The Hub's conventions: the shards are train-NNNNN.parquet, so load_dataset("parquet",
    data_dir=OUTPUT) reads them and nothing else (not the done markers, manifest.json,
    stats.json or rejects/*.jsonl beside them), and the card's YAML names the same files for
    load_dataset(OUTPUT); with or without the card, every row of every shard (pyarrow's count),
    with the packed schema's types: input_ids list<uint32>, position_ids and seq_lengths
    list<int32>, example_index list<int64> (sft: labels list<int32>, assistant_masks list<int8>),
    and the shard's number as unit int32 (the card's features name it too)."""
    datasets = pytest.importorskip("datasets")
    from rmlprep.pipeline.pack import SCHEMAS
    from rmlprep.pipeline.writers import shard_schema

    out, m = _folder_with_rejects(tmp_path, pipeline)
    shards = sorted(out.glob("train-*.parquet"))
    assert [p.name for p in shards] == [s["shard"] for s in m["shards"]] == [f"train-0000{i}.parquet" for i in range(3)]
    rows = [pq.read_metadata(p).num_rows for p in shards]
    assert rows[1] == 0 and pq.read_metadata(shards[1]).num_row_groups == 0 and sum(rows) == m["totals"]["rows"] > 0
    want = datasets.Features.from_arrow_schema(shard_schema(SCHEMAS[pipeline]))
    assert want["input_ids"] == datasets.List(datasets.Value("uint32"))
    assert list(want)[-1] == "unit" and want["unit"] == datasets.Value("int32")
    assert "  - name: unit\n    dtype: int32\n" in (out / "README.md").read_text()
    assert "; `unit` (the shard's number, `N` of `train-N.parquet`, on each of its rows). A document is (`unit`, " \
           "`example_index`)" in (out / "README.md").read_text()
    assert want["example_index"] == datasets.List(datasets.Value("int64"))
    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: train-*.parquet\n")
    assert f"config hash: `{m['config_hash']}`" in card and m["tokenizer"]["fingerprint"] in card
    assert f'`datasets.load_dataset("{out}")`' in card  # where it was written, marked as local
    expect = pq.read_table(shards[0]).to_pylist() + pq.read_table(shards[2]).to_pylist()

    def check(ds) -> None:
        assert list(ds) == ["train"]
        assert ds["train"].features == want
        assert ds["train"].num_rows == m["totals"]["rows"]
        assert ds["train"].to_list() == expect

    cache = str(tmp_path / "hf")
    check(datasets.load_dataset("parquet", data_dir=str(out), cache_dir=cache))
    check(datasets.load_dataset(str(out), cache_dir=cache))
    (out / "README.md").unlink()  # the names alone
    check(datasets.load_dataset("parquet", data_dir=str(out), cache_dir=cache))
    check(datasets.load_dataset(str(out), cache_dir=cache))


def test_card_gives_the_split_size_and_datasets_checks_it(tmp_path):
    """The card's ``dataset_info.splits`` gives the train split's num_examples (the rows of every
    shard, pyarrow's count) and num_bytes (Packed.arrow_bytes: offsets and values of every list
    column, row group by row group, and the int32 unit column), so datasets loads it without a warning and checks the
    count: a folder that lost a shard after its card was written is refused, not loaded short."""
    datasets = pytest.importorskip("datasets")
    out, m = _folder_with_rejects(tmp_path, "pretrain")
    shards = sorted(out.glob("train-*.parquet"))
    rows = sum(pq.read_metadata(p).num_rows for p in shards)
    assert rows == m["totals"]["rows"] > 0
    card = (out / "README.md").read_text()
    assert f"  splits:\n  - name: train\n    num_bytes: {m['totals']['arrow_bytes']}\n    num_examples: {rows}\n" in card
    # worked by hand from the shards: 4 x (rows + row groups) per column, plus the values' bytes
    want = 0
    for p in shards:
        t, groups = pq.read_table(p), pq.read_metadata(p).num_row_groups
        for name, width in (("input_ids", 4), ("position_ids", 4), ("seq_lengths", 4), ("example_index", 8)):
            want += 4 * (t.num_rows + groups) + width * len(t.column(name).combine_chunks().flatten())
        want += 4 * t.num_rows  # the unit column: int32, no offsets
    assert m["totals"]["arrow_bytes"] == want
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))
    assert ds["train"].info.splits["train"].num_examples == rows
    assert want <= ds["train"].info.splits["train"].num_bytes <= want * 1.04  # datasets' own, with bitmaps
    big = max(shards, key=lambda p: pq.read_metadata(p).num_rows)
    big.unlink()
    with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
        datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf2"))


def test_a_folder_whose_run_did_not_complete_does_not_load_as_the_data(tmp_path):
    """A run of two inputs whose second, a .gz cut short, fails its unit (exit 2) leaves unit 0's
    shard and marker and no manifest. ``datasets.load_dataset(FOLDER)``, the form the README
    calls checked, loaded that shard as the whole train split (explore19b: 831 rows of a 5-unit
    run whose unit 4 failed); the incomplete card refuses it, naming why. Before the failing
    rerun the folder was complete: the failure puts its card back, so it loads as before. The
    input made whole, a rerun completes and the folder loads every row of both shards."""
    import gzip

    datasets = pytest.importorskip("datasets")
    from rmlprep.errors import RmlprepError

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.jsonl").write_text("".join(json.dumps({"text": "word " * n}) + "\n" for n in (3, 50, 7)))
    whole = gzip.compress(("".join(json.dumps({"text": "more " * n}) + "\n" for n in range(1, 400))).encode())
    (inp / "b.jsonl.gz").write_bytes(whole[:len(whole) // 2])
    out = tmp_path / "o"
    cfg = config_from_dict({"input": {"paths": [str(inp / "*")]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 32}, "output": {"dir": str(out)},
                            "run": {"progress": "none", "histogram": False, "workers": 1}})
    with pytest.raises(RmlprepError, match="unit 1 failed"):
        run(cfg, log=lambda _: None)
    assert (out / "train-00000.parquet").exists() and not (out / "manifest.json").exists()
    with pytest.raises(FileNotFoundError, match="rmlprep run not complete"):
        datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))
    (inp / "b.jsonl.gz").write_bytes(whole)
    m = run(cfg, log=lambda _: None)
    rows = sum(pq.read_metadata(out / s["shard"]).num_rows for s in m["shards"])
    assert len(m["shards"]) == 2 and rows == m["totals"]["rows"] > 0
    assert datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf2"))["train"].num_rows == rows
    (inp / "b.jsonl.gz").write_bytes(whole[:len(whole) // 2])  # a failing rerun of a complete folder
    with pytest.raises(RmlprepError, match="unit 1 failed"):
        run(cfg, log=lambda _: None)
    assert datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf3"))["train"].num_rows == rows


def test_card_moves_with_the_folder(tmp_path, monkeypatch):
    """The card's loading lines work from where the card sits: the folder is moved (as a copy
    to another machine or an upload to the Hub would), and in it the relative
    ``load_dataset("parquet", data_files="train-*.parquet")``, and from beside it the folder by
    its new path, both give every row of every shard (pyarrow's count). The absolute path where
    the run wrote it appears on one line only, the one that says it is local. (``load_dataset(".")``
    is not offered: datasets 5.2 cannot name a dataset "." and raises.) The same config run
    into another folder gives a card that differs in that line only."""
    datasets = pytest.importorskip("datasets")
    import shutil

    out, m = _folder_with_rejects(tmp_path, "pretrain")
    card = (out / "README.md").read_text()
    assert [x for x in card.splitlines() if str(out) in x] == [
        f'- where this run wrote it (on the machine that ran it, not a portable path): `{out}`: '
        f'`datasets.load_dataset("{out}")`']
    assert '- in the folder that holds this card, without that check: `datasets.load_dataset("parquet", ' \
           'data_files="train-*.parquet")`' in card
    _folder_with_rejects(tmp_path, "pretrain", "o2")  # the same config, another folder
    diff = [(x, y) for x, y in zip(card.splitlines(), (tmp_path / "o2" / "README.md").read_text().splitlines()) if x != y]
    assert len(diff) == 1 and diff[0][0].startswith("- where this run wrote it")
    moved = tmp_path / "elsewhere" / "copy"
    moved.parent.mkdir()
    shutil.move(str(out), str(moved))
    monkeypatch.chdir(moved)
    cache = str(tmp_path / "hf")
    for ds in (datasets.load_dataset("parquet", data_files="train-*.parquet", cache_dir=cache),
               datasets.load_dataset("../copy", cache_dir=cache)):
        assert ds["train"].num_rows == m["totals"]["rows"] == sum(
            pq.read_metadata(p).num_rows for p in moved.glob("train-*.parquet"))


def test_card_lists_the_form_that_checks_the_row_count_first(tmp_path, monkeypatch):
    """The card's first loading line is the folder form, the one that reads the card (datasets
    checks num_examples: a folder short of a shard is refused), as the README recommends; the
    card listed load_dataset("parquet", data_files="train-*.parquet") first, which reads no card
    and loads a folder short of a shard silently. That form is now last and says so, and both
    claims hold: with a shard gone it loads the rows left, the folder form raises."""
    datasets = pytest.importorskip("datasets")
    out, m = _folder_with_rejects(tmp_path, "pretrain")
    card = (out / "README.md").read_text()
    loading = card.split("## Loading\n\n", 1)[1]
    assert "only that form reads this card, and `datasets` then checks the\nsplit's `num_examples`" in loading
    lines = [x for x in loading.splitlines() if x.startswith("- ")]
    assert lines[0] == '- by the folder\'s path, wherever it is now: `datasets.load_dataset("path/to/the/folder")`'
    assert lines[-1].startswith('- in the folder that holds this card, without that check: `datasets.load_dataset('
                                '"parquet", data_files="train-*.parquet")` reads every `train-*.parquet` there and not '
                                'this card, so a folder short of a shard loads short, silently')
    assert sum("data_files=" in x for x in lines) == 1
    shards = sorted(out.glob("train-*.parquet"))
    big = max(shards, key=lambda p: pq.read_metadata(p).num_rows)
    left = m["totals"]["rows"] - pq.read_metadata(big).num_rows
    big.unlink()
    monkeypatch.chdir(out)
    ds = datasets.load_dataset("parquet", data_files="train-*.parquet", cache_dir=str(tmp_path / "hf"))
    assert ds["train"].num_rows == left < m["totals"]["rows"]
    with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
        datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf2"))
    # the check is the non-streaming load's (verification of split sizes): a stream reads the shards
    # left, and the card says so (explore19b: 1,452 of 1,691 rows streamed with a shard gone)
    assert sum(1 for _ in datasets.load_dataset(str(out), streaming=True)["train"]) == left
    assert "A streamed load\n(`streaming=True`) checks no count: such a folder streams short." in loading


def test_summary_says_unfilled_when_rows_are_not_padded():
    """Worked example: 2 SFT rows of seq_len 128 holding 109 tokens leave 147 slots (57.42%).
    With pack.pad = false nothing is padded, so the summary must not call them padding (a
    fresh-user trial read "padding 147 tokens" for rows that were simply shorter)."""
    from rmlprep.pipeline.reports import _padding_line
    totals = {"pad_tokens": 0, "unfilled_tokens": 147, "padding_ratio": 147 / 256}
    label, text = _padding_line({"totals": totals, "config": {"pack": {"seq_len": 128, "pad": False}}})
    assert label == "unfilled" and text.startswith("147 tokens (57.42%)") and "not padded" in text
    totals = {"pad_tokens": 147, "unfilled_tokens": 147, "padding_ratio": 147 / 256}
    label, text = _padding_line({"totals": totals, "config": {"pack": {"seq_len": 128, "pad": True}}})
    assert (label, text) == ("padding", "147 tokens (57.42%)")
    zero = {"pad_tokens": 0, "unfilled_tokens": 0, "padding_ratio": 0.0}
    # pretraining rows are never padded: the room is in each shard's short last row
    assert _padding_line({"totals": zero, "config": {"pipeline": "pretrain", "pack": {"seq_len": 128, "pad": False}}}
                         ) == ("unfilled", "0 tokens (0.00%) left below seq_len in the short last row of each shard; "
                                           "rows are not padded")
    # an sft run whose every row was rejected has no row and no room: still not padding
    assert _padding_line({"totals": zero, "config": {"pipeline": "sft", "pack": {"seq_len": 128, "pad": False}}}) == (
        "unfilled", "0 tokens (0.00%) left below seq_len; rows are not padded (pack.pad = false)")


@pytest.mark.parametrize("pad", [False, True])
def test_pad_tokens_count_only_pad_ids_written(tmp_path, pad):
    """stats.json and the manifest counted the room below seq_len as pad_tokens with
    pack.pad = false too. pad_tokens now counts the pad ids in the rows (read back from the
    shard: the pieces of example_index -1), unfilled_tokens the room in either case."""
    inp = tmp_path / "c.jsonl"
    conv = lambda n: {"messages": [{"role": "user", "content": "q " * n}, {"role": "assistant", "content": "a"}]}  # noqa: E731
    inp.write_text("".join(json.dumps(conv(n)) + "\n" for n in (3, 9, 20, 5)))
    out = tmp_path / "o"
    cfg = config_from_dict({"pipeline": "sft", "input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)},
                            "chat": {"format": "chatml", "text_markers": True}, "parity": {"chat": False},
                            "pack": {"seq_len": 64, "pad": pad}, "output": {"dir": str(out)},
                            "run": {"progress": "none", "histogram": False, "workers": 1}})
    m = run(cfg, log=lambda _: None)
    rows = pq.read_table(out / "train-00000.parquet").to_pylist()
    docs = [(n, i) for r in rows for n, i in zip(r["seq_lengths"], r["example_index"])]
    room = 64 * len(rows) - sum(n for n, i in docs if i >= 0)
    written_pads = sum(n for n, i in docs if i == -1)  # a padding piece has example_index -1
    assert room > 0 and written_pads == (room if pad else 0)
    stats = json.loads((out / "stats.json").read_text())
    for t in (m["totals"], stats["totals"], m["shards"][0]):
        assert (t["pad_tokens"], t["unfilled_tokens"]) == (written_pads, room)
        assert t["padding_ratio"] == room / (64 * len(rows))


def test_tokens_rate_never_reads_zero_millions():
    """A small sft run of 4,300 tokens in 0.84 s read "0.01 M tokens/s" (and a smaller one
    "0.00 M"): below 0.1 M the rate is written in tokens. Worked: 4300 / 0.84 = 5,119.05 ->
    "5,119 tokens/s"; 99,999.4 -> "99,999 tokens/s"; 100,000 -> "0.10 M"; 1,234,567 -> "1.23 M"."""
    from rmlprep.pipeline.reports import tokens_rate

    assert tokens_rate(4300 / 0.84) == "5,119 tokens/s"
    assert tokens_rate(99_999.4) == "99,999 tokens/s"
    assert tokens_rate(100_000) == "0.10 M tokens/s"
    assert tokens_rate(1_234_567) == "1.23 M tokens/s"
    assert tokens_rate(0.0) == "0 tokens/s"


def test_progress_bar_draws_a_tqdm_bar_on_stderr(capsys):
    """``run.progress = "bar"``: a tqdm bar of the bytes done (tqdm is imported there, not with
    the pipeline); nothing goes to the log. 2,000,000 bytes read "2.00M" (tqdm's
    ``format_sizeof(2_000_000, divisor=1000)``); with ``unit_divisor=1_000_000`` they read
    "2.00k", a prefix per million."""
    from rmlprep.pipeline.reports import Progress

    lines: list[str] = []
    p = Progress("bar", 2_000_000, 1, lines.append)
    p.unit_done({"bytes": 2_000_000, "documents": 3, "tokens": 10, "rejects": 0, "shard": "shard-00000.parquet"})
    p.close()
    err = capsys.readouterr().err
    assert "rmlprep: 100%" in err and "2.00M/2.00M " in err and not lines


def test_lines_logged_under_the_bar_start_on_their_own_line(tmp_path, capsys):
    """A run with the bar on stderr logged its "pack: ..." and "run: ..." lines (and the engine's)
    into the bar's line, as ``rmlprep:   0%|          | 0.00/41.6k [00:00<?, ?B/s]pack: every
    document ...``: the bar leaves the cursor at its end. Each line logged while the bar is drawn
    now clears it first (tqdm's external_write_mode: a carriage return, then the line), so what a
    terminal shows from the last carriage return on is the line itself."""
    import sys

    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": "word " * n}) + "\n" for n in range(1, 40)))
    cfg = config_from_dict({"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 32}, "output": {"dir": str(tmp_path / "o")},
                            "run": {"progress": "bar", "histogram": False, "workers": 1}})
    run(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))  # as rmlprep.cli logs
    lines = capsys.readouterr().err.split("\n")
    shown = {x.split(":")[0]: x for x in (line.rsplit("\r", 1)[-1] for line in lines)}
    assert shown["pack"].startswith("pack: every document ends with eos"), lines
    assert shown["run"].startswith("run: 1 unit, "), lines


# -- the reports are committed as one set --------------------------------------------------------
REPORTS = ("manifest.json", "stats.json", "README.md", "lengths.png")


def _reports(out: Path) -> dict[str, bytes]:
    return {n: (out / n).read_bytes() for n in REPORTS if (out / n).exists()}


def _reports_cfg(tmp_path: Path, histogram: bool = False):
    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": "word " * n}) + "\n" for n in range(1, 120)))
    return config_from_dict({"input": {"paths": [str(inp)], "unit_bytes": 4000}, "tokenizer": {"path": str(TINY)},
                             "pack": {"seq_len": 64}, "output": {"dir": str(tmp_path / "o")},
                             "run": {"progress": "none", "histogram": histogram, "workers": 1}})


def _disk_full_writing(monkeypatch, name: str) -> None:
    """The write of report ``name`` fails half way with ENOSPC, as on a full disk."""
    real = OutputFolder.stage

    def stage(self, n, write, **kw):
        if n == name:
            def write(f):
                f.write(b"half a report")
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, n, write, **kw)

    monkeypatch.setattr(OutputFolder, "stage", stage)


@pytest.mark.parametrize("name", ["stats.json", "README.md", "lengths.png", "manifest.json"])
def test_a_full_disk_during_the_reports_leaves_the_previous_set(tmp_path, monkeypatch, name):
    """A rerun (every unit skipped) rewrites the reports; a full disk while writing any one of
    them leaves the previous set byte for byte (before: manifest.json was new, the others old)."""
    histogram = name == "lengths.png"
    if histogram:
        pytest.importorskip("matplotlib", reason="lengths.png needs matplotlib (pip install 'rmlprep[plot]')")
    cfg = _reports_cfg(tmp_path, histogram)
    out = tmp_path / "o"
    run(cfg, log=lambda _: None)
    before = _reports(out)
    assert name in before
    _disk_full_writing(monkeypatch, name)
    with pytest.raises(OutputError, match=f"{name}: No space left on device; the disk is full"):
        run(cfg, log=lambda _: None)
    assert _reports(out) == before and not list(out.rglob("*.tmp-*"))
    monkeypatch.undo()
    m = run(cfg, log=lambda _: None)
    assert m["units_skipped"] == len(m["shards"]) and json.loads((out / "manifest.json").read_text()) == m


def test_a_full_disk_during_a_first_run_s_reports_leaves_none(tmp_path, monkeypatch):
    cfg = _reports_cfg(tmp_path)
    out = tmp_path / "o"
    _disk_full_writing(monkeypatch, "README.md")
    with pytest.raises(OutputError, match="the disk is full"):
        run(cfg, log=lambda _: None)
    assert _reports(out) == {} and not list(out.rglob("*.tmp-*"))


def test_a_failed_rename_leaves_no_manifest_beside_newer_reports(tmp_path, monkeypatch):
    """The old manifest.json goes before the first rename and the new one comes last: a rename
    that fails between them leaves no manifest (the next run writes the set), never an old
    manifest beside a new stats.json."""
    cfg = _reports_cfg(tmp_path)
    out = tmp_path / "o"
    run(cfg, log=lambda _: None)
    real = OutputFolder.publish

    def publish(self, tmp, name):
        if name == "README.md":
            self.discard(tmp)
            raise OutputError(f"{self.path / name}: Input/output error; check the output folder and rerun")
        real(self, tmp, name)

    monkeypatch.setattr(OutputFolder, "publish", publish)
    with pytest.raises(OutputError, match="Input/output error"):
        run(cfg, log=lambda _: None)
    assert not (out / "manifest.json").exists() and not list(out.rglob("*.tmp-*"))
    monkeypatch.undo()
    m = run(cfg, log=lambda _: None)
    assert m["units_skipped"] == len(m["shards"]) and set(_reports(out)) == {"manifest.json", "stats.json", "README.md"}


def test_a_resumed_run_s_summary_has_the_speed_of_the_units_it_wrote(tmp_path):
    """A rerun that redoes 1 unit of several and skips the rest: the summary had no speed line
    (rates were given only when a run did all the work). Now the rates are those of the unit
    written, over this run's processing seconds, and the line says so; a run that skipped
    every unit measured nothing and has none."""
    cfg = _reports_cfg(tmp_path)
    out = tmp_path / "o"
    m = run(cfg, log=lambda _: None)
    assert len(m["shards"]) >= 3
    (out / "shard-00001.done.json").unlink()
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    speed = [x for x in logs[-1].splitlines() if x.startswith("speed ")]
    assert len(speed) == 1 and speed[0].endswith(f"1 worker; of the 1 unit written, not the {len(m['shards']) - 1} skipped)")
    th = json.loads((out / "stats.json").read_text())["throughput"]
    unit = m["shards"][1]
    # the unit's own counts over one duration (the manifest's seconds are rounded: compare ratios)
    assert th["units"] == 1 and th["documents_per_s"] / th["mb_per_s"] == pytest.approx(unit["documents"] / (unit["bytes"] / 1e6))
    assert th["tokens_per_s"] / th["mb_per_s"] == pytest.approx(unit["tokens"] / (unit["bytes"] / 1e6))
    logs.clear()
    run(cfg, log=logs.append)
    assert not [x for x in logs[-1].splitlines() if x.startswith("speed ")]


@pytest.mark.parametrize("kind", ["pretrain", "sft", "megatron"])
def test_the_manifest_s_config_is_a_config_again(tmp_path, kind):
    """config_from_dict refused a manifest's config (unset keys are null, and a pretrain
    manifest held the [chat] keys only sft takes); it now gives back the run's config, hash
    and all, from the manifest.json on disk."""
    inp = tmp_path / "c.jsonl"
    conv = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    inp.write_text("".join(json.dumps(conv if kind == "sft" else {"text": f"word {i} " * 9}) + "\n" for i in range(9)))
    d = {"input": {"paths": [str(inp)]}, "tokenizer": {"path": str(TINY)}, "pack": {"seq_len": 32},
         "output": {"dir": str(tmp_path / "o")}, "run": {"progress": "none", "histogram": False, "workers": 1}}
    if kind == "sft":
        d.update(pipeline="sft", chat={"format": "chatml", "text_markers": True}, parity={"chat": False})
    if kind == "megatron":
        d["output"]["format"] = "megatron"
    cfg = config_from_dict(d)
    run(cfg, log=lambda _: None)
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    back = config_from_dict(m["config"])
    assert back.data == cfg.data and back.config_hash == m["config_hash"] == cfg.config_hash


def _pretrain_room(out: Path, seq_len: int) -> tuple[int, int, int]:
    """(rows, real tokens, room below seq_len) of a pretraining folder, read back from its shards."""
    lens = [len(r) for p in sorted(out.glob("train-*.parquet")) for r in pq.read_table(p)["input_ids"].to_pylist()]
    return len(lens), sum(lens), seq_len * len(lens) - sum(lens)


def test_pretrain_unfilled_tokens_count_the_short_last_rows(tmp_path):
    """The README calls unfilled_tokens the room below seq_len; pretraining counted 0 (the
    summary said "padding 0 tokens") although each unit's last row is short. Worked: 5
    documents of 3, 50, 7, 200 and 1 words plus an eos each, concat-packed into rows of 32:
    every row but the last is full, and the room is 32 * rows - the tokens in the rows, read
    back from the shard (markers, manifest shards and totals, stats.json and the summary)."""
    m, _, in_rows = _run(tmp_path)
    rows, real, room = _pretrain_room(tmp_path / "o", 32)
    assert real == in_rows and 0 < room < 32  # one short row, in the one unit
    marker = json.loads((tmp_path / "o" / "shard-00000.done.json").read_text())
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    for t in (marker, m["shards"][0], m["totals"], stats["totals"]):
        assert (t["rows"], t["unfilled_tokens"], t["pad_tokens"]) == (rows, room, 0)
        assert t["padding_ratio"] == room / (32 * rows)
    from rmlprep.pipeline.reports import _padding_line
    assert _padding_line(m)[1].startswith(f"{room:,} tokens ({100 * room / (32 * rows):.2f}%) left below seq_len")


def test_pretrain_markers_of_the_old_count_are_kept_and_counted_again(tmp_path):
    """A done marker written before (pretraining unfilled_tokens 0) vouches for the same shard,
    so a rerun keeps it; the reports work the room out from its rows and written_tokens."""
    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(json.dumps({"text": "word " * (n % 37)}) + "\n" for n in range(120)))
    out = tmp_path / "o"
    cfg = config_from_dict({"input": {"paths": [str(inp)], "unit_bytes": 1000}, "tokenizer": {"path": str(TINY)},
                            "pack": {"seq_len": 32}, "output": {"dir": str(out)},
                            "run": {"progress": "none", "histogram": False, "workers": 1}})
    first = run(cfg, log=lambda _: None)
    rows, _, room = _pretrain_room(out, 32)
    assert len(first["shards"]) > 2 and first["totals"]["unfilled_tokens"] == room > 32
    for p in sorted(out.glob("shard-*.done.json")):  # as the previous version wrote them
        mk = json.loads(p.read_text())
        mk["unfilled_tokens"], mk["padding_ratio"] = 0, 0.0
        p.write_text(json.dumps(mk))
    again = run(cfg, log=lambda _: None)
    assert again["units_skipped"] == len(first["shards"]) and again["units_processed"] == 0
    assert again["totals"]["unfilled_tokens"] == room and again["totals"]["padding_ratio"] == room / (32 * rows)
    assert [s["unfilled_tokens"] for s in again["shards"]] == [s["unfilled_tokens"] for s in first["shards"]]
