"""Pretraining pipeline: text documents → token ids → rows of seq_len with eos between documents.

    python pipelines/pretrain.py CORPUS... --tokenizer TOKENIZER --output DIR [--seq-len 2048]
        [--name gpt2] [--column text] [--workers N]

The same job as ``rmlprep run configs/pretrain.toml``, built from a dict: stages are
rmlprep's (readers → parity → arrow.tokenize_text → packing.pack_concat → shards); the tail of
each unit is its shard's last, short row (see rmlprep.pipeline.pack).
"""

from __future__ import annotations

import argparse
import sys

from rmlprep.cli import run_exit_status
from rmlprep.config import config_from_dict


def config(paths, *, tokenizer, output, seq_len=2048, name=None, column="text", workers=0, bos=False):
    tok = {"path": tokenizer}
    if name:
        tok["name"] = name
    return config_from_dict({
        "pipeline": "pretrain",
        "input": {"paths": list(paths), "column": column},
        "tokenizer": tok,
        "pack": {"seq_len": seq_len, "eos": True, "bos": bos, "overflow": "wrap"},
        "output": {"dir": output},
        "run": {"workers": workers},
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
    a = p.parse_args(argv)
    # the CLI's exit rules: 2 for an error or an empty dataset (every row rejected), 3 for parity
    return run_exit_status(lambda: config(a.paths, tokenizer=a.tokenizer, output=a.output, seq_len=a.seq_len,
                                          name=a.name, column=a.column, workers=a.workers))


if __name__ == "__main__":
    sys.exit(main())
