"""Corpus readers: plan units of work, then stream each unit as bounded batches of rows.

A **unit** is one input file or one part of a large file; it is planned once from the config and
the files (never from the number of workers), numbered in a stable order (paths sorted, then
offsets), and read on its own, so any worker can process any unit.

===========  ========================================  =======================================
format       files                                     units
===========  ========================================  =======================================
jsonl        ``.jsonl``/``.json``/``.ndjson``          plain: byte ranges of ~``unit_bytes``
             (+ ``.gz``, ``.zst``, ``.bz2``, ``.xz``)  cut after a ``\\n``; multi-frame zstd:
                                                       runs of whole frames of ~``unit_bytes``
                                                       decoded; gz/bz2/xz, one-frame zstd: 1
parquet      ``.parquet``                              row groups gathered up to ``unit_rows``
csv          ``.csv``/``.tsv`` (+ compression)         one unit per file (quoted newlines)
hf           a ``datasets`` ``save_to_disk`` folder     row ranges of ``unit_rows`` per arrow
             (Dataset, or DatasetDict + ``split``), or file
             an ``.arrow`` file (e.g. of the cache)
stdlib       the running interpreter's stdlib ``.py``  files gathered up to ``unit_bytes``
             files (demo input; ``paths`` ignored)
===========  ========================================  =======================================

**Faults.** One rule: a fault in one row is reported in :attr:`Batch.errors` with the row number
and the reason (the pipeline writes it to ``rejects/``); a fault of the file as a whole (truncated
or corrupt compression, a damaged Parquet footer, a CSV quote never closed, broken ``datasets``
JSON) raises :class:`~rmlprep.errors.InputError` with one line naming the file and, where known,
the byte offset. A partial file is never read as a complete one. The plan reads every file's
first bytes: a Git LFS pointer (a clone without ``git lfs pull``), a 0-byte ``.gz``/``.zst`` (no
compressor writes one), or compression the name does not tell is refused before any work.

The package holds one module per format (:mod:`.jsonl`, :mod:`.csvfile`, :mod:`.parquet`,
:mod:`.arrowfiles` for ``datasets`` folders and ``.arrow`` files, :mod:`.stdlib`), the types and
limits they share (:mod:`.base`), the plan with the dispatch by format (:mod:`.units`) and its checks
of globs that would read a dataset wrong (:mod:`.glob_checks`: a shard set missing a file, a
``datasets`` cache folder's ``.map()`` results, two Hub revisions), and the Parquet checks of rows
against the footer and the writer (:mod:`.parquet_checks`).

**Row numbers** (``Batch.rows``, reject records) are 0-based positions in the source file: the
line number for JSONL (blank lines count), the data record number for CSV (the header and blank
lines do not count; a record may span lines), the row number for Parquet and for each Arrow file
of a ``datasets`` folder.

Every batch holds at most ``batch_rows`` rows, so a reader's memory is bounded by the batch and
the largest single row, whatever the file size; the pipeline after it streams too (a worker's
peak RSS is measured in :mod:`rmlprep.pipeline`).
"""

from .base import MAX_JSON_DEPTH, MAX_ROW_BYTES, Batch, Unit
from .stdlib import stdlib_files
from .units import detect_format, plan_units, read_unit

__all__ = ["Unit", "Batch", "plan_units", "read_unit", "detect_format", "stdlib_files",
           "MAX_ROW_BYTES", "MAX_JSON_DEPTH"]
