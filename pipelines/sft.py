"""SFT pipeline: conversations → chat format → input_ids + labels (assistant-only) → BFD rows.

    python pipelines/sft.py CORPUS... --tokenizer TOKENIZER --format chatml --output DIR
        [--seq-len 2048] [--pad] [--workers N] [--tools-column tools|false]
        [--system-column system|false] [--ignore-media] [--text-markers] [--max-reject-fraction 0.1]

The same job as ``rmlprep run configs/sft.toml``: rmlprep's readers → parity →
arrow.tokenize_chat (chat.encode_chat: no Jinja, mask on assistant content and turn
terminators) → packing.pack_bfd per unit → shards. Conversations the format refuses go to
rejects/ with the reason.
"""

from __future__ import annotations

import argparse
import sys

from rmlprep.cli import run_exit_status
from rmlprep.config import config_from_dict


def config(paths, *, tokenizer, fmt, output, seq_len=2048, column="messages", workers=0, pad=False,
           overflow="truncate", tools_column=None, system_column=None, ignore_media=False, text_markers=False,
           max_reject_fraction=0.1):
    return config_from_dict({
        "pipeline": "sft",
        "input": {"paths": list(paths), "column": column},
        "tokenizer": {"path": tokenizer},
        "chat": {"format": fmt, "text_markers": text_markers,
                 **({"tools_column": tools_column} if tools_column is not None else {}),
                 **({"system_column": system_column} if system_column is not None else {}),
                 **({"ignore_media": True} if ignore_media else {})},
        "pack": {"seq_len": seq_len, "overflow": overflow, "pad": pad},
        "output": {"dir": output},
        "run": {"workers": workers, "max_reject_fraction": max_reject_fraction},
    })


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="files with a messages column (jsonl[.gz|.zst], parquet, HF dataset dir)")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--format", required=True, help="chat format name (chatml, llama3, ...)")
    p.add_argument("--output", required=True)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--column", default="messages")
    p.add_argument("--pad", action="store_true", help="pad rows to seq_len")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--tools-column", type=lambda v: False if v == "false" else v, default=None,
                   help="the column of tool definitions (chat.tools_column), or false to read none")
    p.add_argument("--system-column", type=lambda v: False if v == "false" else v, default=None,
                   help="the column of per-conversation system prompts (chat.system_column), or false to read none")
    p.add_argument("--ignore-media", action="store_true",
                   help="leave an images/image/audio/video column out on purpose (chat.ignore_media)")
    p.add_argument("--text-markers", action="store_true",
                   help="run a format whose turn terminator is not a special token of the tokenizer, its markers "
                        "written as text (chat.text_markers)")
    p.add_argument("--max-reject-fraction", type=float, default=0.1,
                   help="exit 2 when more than this share of the rows read is rejected (run.max_reject_fraction)")
    a = p.parse_args(argv)
    # the CLI's exit rules: 2 for an error, an empty dataset (every row rejected) or rejects over
    # --max-reject-fraction, 3 for parity
    return run_exit_status(lambda: config(a.paths, tokenizer=a.tokenizer, fmt=a.format, output=a.output,
                                          seq_len=a.seq_len, column=a.column, workers=a.workers, pad=a.pad,
                                          tools_column=a.tools_column, system_column=a.system_column,
                                          ignore_media=a.ignore_media, text_markers=a.text_markers,
                                          max_reject_fraction=a.max_reject_fraction))


if __name__ == "__main__":
    sys.exit(main())
