"""The run's reports: the summary table says what the rows hold."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmlprep.config import config_from_dict
from rmlprep.pipeline import run

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
    in_rows = sum(len(r) for r in pq.read_table(out / "shard-00000.parquet")["input_ids"].to_pylist())
    return m, line, in_rows


@pytest.mark.parametrize("bos,eos,names", [(False, True, "eos"), (True, True, "bos/eos")])
def test_summary_tokens_count_the_framing(tmp_path, bos, eos, names):
    """Five documents, each framed with eos (and bos): the summary's tokens line adds 5 (10)
    framing tokens to the documents' own, and the sum is what the shard's rows hold."""
    m, line, in_rows = _run(tmp_path, bos=bos, eos=eos)
    docs = m["totals"]["tokens"]
    n = 5 * (bos + eos)
    assert line.split(None, 1)[1] == f"{docs:,} in documents + {n} {names} = {docs + n:,} in rows"
    assert in_rows == docs + n == m["totals"]["written_tokens"]


def test_summary_tokens_without_framing_and_with_cuts(tmp_path):
    m, line, in_rows = _run(tmp_path / "a", eos=False)
    assert line.split(None, 1)[1] == f"{m['totals']['tokens']:,} (all in rows)" and in_rows == m["totals"]["tokens"]
    m, line, in_rows = _run(tmp_path / "b", overflow="truncate")
    cut = m["totals"]["truncated_tokens"]
    assert cut > 0 and line.split(None, 1)[1] == (f"{m['totals']['tokens']:,} in documents + 5 eos - {cut:,} cut "
                                                  f"(over-long) = {in_rows:,} in rows")


def test_output_folder_loads_with_datasets_and_has_a_card(tmp_path):
    """The Hub's conventions: the card's YAML names the shards and their features, so
    load_dataset(OUTPUT) reads exactly the shards, with the packed schema's types."""
    datasets = pytest.importorskip("datasets")
    m, _, in_rows = _run(tmp_path)
    out = tmp_path / "o"
    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: shard-*.parquet\n")
    assert f"config hash: `{m['config_hash']}`" in card and m["tokenizer"]["fingerprint"] in card
    for ds in (datasets.load_dataset(str(out), split="train"),
               datasets.load_dataset("parquet", data_dir=str(out), data_files="shard-*.parquet", split="train")):
        assert ds.num_rows == m["totals"]["rows"]
        assert ds.features["input_ids"] == datasets.List(datasets.Value("uint32"))
        assert ds.features["example_index"] == datasets.List(datasets.Value("int64"))
        assert sum(len(r) for r in ds["input_ids"]) == in_rows
