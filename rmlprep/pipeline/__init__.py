"""The main job: a config → packed Parquet shards, one per unit, parallel and resumable.

Stages, and the module that owns each::

    driver.run ─ the whole run, in this order:
      load.open_tokenizer          tokenizer.path → Tokenizer (+ the file that finds its fixture)
      framing.framing              [pack] against the tokenizer (bos/eos/pad ids): one ConfigError line
      owner.check_owner            a folder rmlprep did not write is refused (read only)
      plan.plan                    [input] → units, each with its input identity (files, byte
                                   range, xxh3); per-format planning: readers.plan_units
      output.OutputFolder.lock     one run per folder (flock), writable: before any corpus work
      owner.claim                  .rmlprep.folder.json: the folder is rmlprep's from here on
      parity.run_parity_stage      tokenizer (and chat format) vs references; stop on a mismatch
      previous.discard_previous    what a rerun killed mid-way set aside (.rmlprep.previous)
      owner.check_shards           refuse another config's shards (--overwrite: set them aside;
                                   config_diff.config_change: what changed), remove a killed run's
                                   temporaries (store.ObjectStoreFolder: the same folder on s3:// and
                                   other stores, locked by store_lease's lease)
      output.verify_done           skip the units whose done marker, input identity and shard verify
                                   (late_keys.marker_needs: keys a marker must hold for this config)
      previous.sweep               set aside the files of units not in the plan or redone, and the
                                   reports, until the run completes (previous.discard_previous); a run
                                   that fails puts a complete previous run back (restore_previous)
      renumber.adopt_moved         done units whose input only moved to another unit number (a file
                                   added or removed before them): renumbered from what was set aside
      engines / ray_engine         run unit.work_unit on every unit left (process pool or Ray);
                                   an OutputError (disk full, ...) stops the run
      output.remove_temporaries    on every way out: what a stopped or killed worker left
      │
      │  unit.process_unit ─ one unit, every stage a generator over the one before, pulled
      │  by the writer as it writes (nothing of the unit is held whole):
      │    stages.read               readers.read_unit: bounded batches; unreadable rows → rejects
      │    stages.validate_texts     a string per row (pretrain)
      │    chat_stages.validate_conversations  a list of messages (sft)
      │    stages.tokenize_texts     arrow.tokenize_text
      │    chat_stages.format_and_tokenize  sft: arrow.tokenize_chat (chat format + ids + assistant mask)
      │    pack.pack_documents       pretrain: concat packing, the unit's tail is its last short row
      │    pack.pack_conversations   sft: best-fit-decreasing over windows of unit_rows conversations
      │    writers.ParquetWriter     train-NNNNN.parquet, one row group at a time into the
      │                              temporary, renamed when the last row is in; metadata in the footer;
      │                              adds the unit column (the shard's number on every row)
      │                              (writers.writer_for: megatron.MegatronWriter for .bin/.idx)
      │    unit._then_checked        before that rename: the input is unchanged since the plan, and
      │                              rows read (the reader's count) = documents + rejects
      │    stages.Tally.write_rejects  rejects/rejects-NNNNN.jsonl (tmp + rename), spooled per batch
      │    output.write_done         shard-NNNNN.done.json: the commit, always last
      ▼
      reports.write_reports        manifest.json, stats.json, lengths.png, the summary table
                                   (late_keys.late_counts: a count a kept marker predates is null);
                                   README.md, the dataset card (card.dataset_card)
      verdict.run_verdict          no document, or rejects over run.max_reject_fraction: the CLI's
                                   exit 2 (verdict.rejects_by_stage: the count per stage)

Every stage after reading is a pure function of (unit, config, tokenizer), so the shards are
byte-identical for any number of workers and either engine, and a rerun after a kill gives the
bytes of an uninterrupted run. Engines receive the unit function and its context
``(cfg, tokenizer)``; they never import the pipeline.

Faults, one rule each: a **row** that cannot be processed (null or non-string text, malformed
messages, a conversation the chat format refuses, bad JSON) goes to
``rejects/rejects-NNNNN.jsonl`` with the source file, row number, stage and reason, is counted in the
manifest, and the run goes on (so does a document ``pack.overflow = "drop"`` leaves out,
found in the pack stage); a **file** unreadable as a whole (InputError) fails its unit,
the other units finish and the run exits 2 naming it; an **environment** fault (OutputError:
folder held, read-only, disk full) stops the run at once. No file is ever half-written under
its final name, and a done marker is only written after the files it vouches for. The tail rule and the
SFT packing are described in :mod:`rmlprep.pipeline.pack`.

**Memory per worker** does not grow with the unit. The writer pulls the stages: a batch of
``input.batch_rows`` rows is read, validated and tokenized; its documents are concat-packed
every ~1M tokens (:data:`.pack.CHUNK_TOKENS`) and the rows cut into row groups of
``output.row_group_rows`` that go into the shard's temporary file at once; a suspended stage
keeps no reference to a batch it has handed on; reject records leave memory batch by batch. A
pretrain worker holds the batch, one packing chunk, one row group (``row_group_rows x seq_len``
tokens, 8 bytes each) and the tokenizer with its piece cache. SFT holds one window of
``input.unit_rows`` conversations (BFD must see a whole window before its first row): its
tokens (13 bytes each), their packed rows (17 bytes each) and the packer's scratch, about 80
bytes per token of the window at the peak (measured: 12.2M tokens in 50,000 conversations →
~970 MB over the tokenizer); lower ``unit_rows`` to lower it.

Peak RSS of one worker (``VmHWM``; pretrain: ``bench/bench_unit_memory.py``, GPT-2, seq_len
2048, row groups of 1024 rows, batches of 512 rows; sft: the chat corpora of ``../shared`` x8
in one ``.jsonl.gz``, Qwen2.5, seq_len 2048, the default row groups and windows; the tokenizer
alone is ~100 MB for GPT-2, ~185 MB for Qwen2.5, ~400 MB for Gemma):

==================================  ==============  ===========================
one unit                            before          streaming
==================================  ==============  ===========================
.jsonl.gz, 60 MB of text            545 MB          405 MB
.jsonl.gz, 240 MB of text           1917 MB         436 MB
.csv.gz, 60 / 240 MB                559 / 2237 MB   328 / 396 MB
.jsonl.zst (1 frame), 60 / 240 MB   549 / 2174 MB   415 / 428 MB
one 50 MB document, Gemma (256k)    1010 MB         1021 MB (the tokenizer's encode)
sft .jsonl.gz, 187 / 374 MB         2394 MB / -     1157 / 1162 MB (unit_rows 50,000)
==================================  ==============  ===========================

The growth left between 60 and 240 MB is the tokenizer's bounded piece cache. A single
document is held whole by the reader (its UTF-8 line, then the str: 4 bytes per character when
it holds one character past U+FFFF) and by the encoder, so its peak is about 10x its size plus
the tokenizer; a JSONL line over :data:`rmlprep.readers.MAX_ROW_BYTES` is a reject.
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
