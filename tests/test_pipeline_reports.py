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
