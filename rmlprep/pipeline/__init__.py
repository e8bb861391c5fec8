"""The main job: a config → packed Parquet shards, one per unit, parallel and resumable.

Stages, and the module that owns each::

    driver.run ─ the whole run, in this order:
      load.open_tokenizer          tokenizer.path → Tokenizer (+ the file that finds its fixture)
      plan.plan                    [input] → units, each with its input identity (files, byte
                                   range, xxh3); per-format planning: readers.plan_units
      output.OutputFolder.lock     one run per folder (flock), writable: before any corpus work
      parity.run_parity_stage      tokenizer (and chat format) vs references; stop on a mismatch
      output.OutputFolder.check    refuse another config's shards, remove a killed run's temporaries
                                   (store.ObjectStoreFolder: the same folder on s3:// and other stores)
      output.verify_done           skip the units whose done marker, input identity and shard verify
      output.OutputFolder.sweep    remove files of units not in the plan, and stale markers/rejects
      engines / ray_engine         run unit.work_unit on every unit left (process pool or Ray);
                                   an OutputError (disk full, ...) stops the run
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

Faults, one rule each: a **row** that cannot be processed (null or non-string text, malformed
messages, a conversation the chat format refuses, bad JSON) goes to
``rejects/rejects-NNNNN.jsonl`` with the source file, row number and reason, is counted in the
manifest, and the run goes on; a **file** unreadable as a whole (InputError) fails its unit,
the other units finish and the run exits 2 naming it; an **environment** fault (OutputError:
folder held, read-only, disk full) stops the run at once. No file is ever half-written under
its final name, and a done marker is only written after the files it vouches for. The tail rule and the
SFT packing are described in :mod:`rmlprep.pipeline.pack`.
"""

from __future__ import annotations

from ..load import open_tokenizer
from .driver import load_run_tokenizer, run
from .engines import Engine, LocalEngine
from .output import OutputFolder
from .pack import SCHEMAS
from .plan import plan
from .store import ObjectStoreFolder  # registers itself: OutputFolder("s3://...") is one
from .reports import HIST_BINS_PER_OCTAVE, hist_edges, summary_table
from .unit import process_unit, work_unit
from .writers import ParquetWriter, Writer

__all__ = ["run", "process_unit", "work_unit", "load_run_tokenizer", "open_tokenizer", "plan", "OutputFolder",
           "ObjectStoreFolder",
           "Writer", "ParquetWriter", "Engine", "LocalEngine", "SCHEMAS", "HIST_BINS_PER_OCTAVE", "hist_edges",
           "summary_table"]
