"""Pretraining pipeline: text documents → token ids → rows of seq_len with eos between documents.

    python pipelines/pretrain.py CORPUS... --tokenizer TOKENIZER --output DIR [--seq-len 2048]
        [--name gpt2] [--column text] [--workers N] [--max-reject-fraction 0.1]

The same job as ``rmlprep run configs/pretrain.toml``, built from a dict: stages are
rmlprep's (readers → parity → arrow.tokenize_text → packing.pack_concat → shards); the tail of
each unit is its shard's last, short row (see rmlprep.pipeline.pack).
"""

from __future__ import annotations

import argparse
import sys

from rmlprep.cli import run_exit_status
from rmlprep.config import config_from_dict


def config(paths, *, tokenizer, output, seq_len=2048, name=None, column="text", workers=0, bos=None,
           max_reject_fraction=0.1):
    """The run config; ``bos`` None leaves ``pack.bos`` out (false, and the run warns when the
    tokenizer's own encode adds a BOS), True or False writes it (no warning)."""
    tok = {"path": tokenizer}
    if name:
        tok["name"] = name
    pack = {"seq_len": seq_len, "eos": True, "overflow": "wrap"}
    if bos is not None:
        pack["bos"] = bos
    return config_from_dict({
        "pipeline": "pretrain",
        "input": {"paths": list(paths), "column": column},
        "tokenizer": tok,
        "pack": pack,
        "output": {"dir": output},
        "run": {"workers": workers, "max_reject_fraction": max_reject_fraction},
    })


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="corpus files or globs (jsonl[.gz|.zst], parquet, csv, HF dataset dir)")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--name", help="tiktoken encoding name for rank files")
    p.add_argument("--output", required=True)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--column", default="text")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--max-reject-fraction", type=float, default=0.1,
                   help="exit 2 when more than this share of the rows read is rejected (run.max_reject_fraction)")
    a = p.parse_args(argv)
    # the CLI's exit rules: 2 for an error, an empty dataset (every row rejected) or rejects over
    # --max-reject-fraction, 3 for parity
    return run_exit_status(lambda: config(a.paths, tokenizer=a.tokenizer, output=a.output, seq_len=a.seq_len,
                                          name=a.name, column=a.column, workers=a.workers,
                                          max_reject_fraction=a.max_reject_fraction))


if __name__ == "__main__":
    sys.exit(main())
