"""The main job: a config → packed Parquet shards, one per unit, parallel and resumable.

Stages, and the module that owns each::

    driver.run ─ the whole run, in this order:
      load.open_tokenizer          tokenizer.path → Tokenizer (+ the file that finds its fixture)
      plan.plan                    [input] → units (per-format planning: readers.plan_units)
      parity.run_parity_stage      tokenizer (and chat format) vs references; stop on a mismatch
      output.OutputFolder.check    refuse another config's shards, remove a killed run's temporaries
      output.verify_done           skip the units whose done marker and shard verify (resume)
      engines / ray_engine         run unit.work_unit on every unit left (process pool or Ray)
      │
      │  unit.process_unit ─ one unit, every stage a generator over the one before:
      │    stages.read               readers.read_unit: bounded batches; unreadable rows → rejects
      │    stages.validate_*         a string per row (pretrain) / a list of messages (sft)
      │    stages.tokenize_texts     arrow.tokenize_text
      │    stages.format_and_tokenize  sft: arrow.tokenize_chat (chat format + ids + assistant mask)
      │    pack.pack_documents       pretrain: concat packing, the unit's tail is its last short row
      │    pack.pack_conversations   sft: best-fit-decreasing over the unit
      │    writers.ParquetWriter     shard-NNNNN.parquet (tmp + rename), metadata in the footer
      │    output.write_lines        rejects/rejects-NNNNN.jsonl (tmp + rename)
      │    output.write_done         shard-NNNNN.done.json: the commit, always last
      ▼
      reports.write_reports        manifest.json, stats.json, lengths.png, the summary table

Every stage after reading is a pure function of (unit, config, tokenizer), so the shards are
byte-identical for any number of workers and either engine, and a rerun after a kill gives the
bytes of an uninterrupted run. Engines receive the unit function and its context
``(cfg, tokenizer)``; they never import the pipeline.

Rows that cannot be processed (null or non-string text, malformed messages, a conversation
the chat format refuses, bad JSON) go to ``rejects/rejects-NNNNN.jsonl`` with the source file,
row number and reason, and are counted in the manifest; the run goes on. The tail rule and the
SFT packing are described in :mod:`rmlprep.pipeline.pack`.
"""

from __future__ import annotations

from ..load import open_tokenizer
from .driver import load_run_tokenizer, run
from .engines import Engine, LocalEngine
from .output import OutputFolder
from .pack import SCHEMAS
from .plan import plan
from .reports import HIST_BINS_PER_OCTAVE, hist_edges, summary_table
from .unit import process_unit, work_unit
from .writers import ParquetWriter, Writer

__all__ = ["run", "process_unit", "work_unit", "load_run_tokenizer", "open_tokenizer", "plan", "OutputFolder",
           "Writer", "ParquetWriter", "Engine", "LocalEngine", "SCHEMAS", "HIST_BINS_PER_OCTAVE", "hist_edges",
           "summary_table"]
