"""The read rules version of each input format, written into every done marker (``read_rules``).

A reader's rules change when it reads some file otherwise or refuses a file it once read: a
resumed run would keep a unit done under the old rules (its input's hash is the same), so a
folder could hold shards of a file today's reader refuses, with nothing to tell them apart.
:func:`rmlprep.pipeline.late_keys.unit_needs` therefore has a unit redone when its marker holds
another version of its format's rules, or none (written before the key: every format's rules
changed within marker version 3 without one to tell). Raise a format's number with any change of
what its reader accepts or reads; the run's log names the units redone and why.

Version 1 (the first recorded) includes, for each format, the checks added before the key:

- ``jsonl``: a run of 16 NUL bytes (a hole of zeros) is a file fault (37bd547); a last line cut
  short, a lone ``\\r`` line end, compressed streams cut short or followed by other data, a
  ``.gz`` ending in zeros.
- ``csv``: the same holes; a record of the header's names is a reject (``csv_header_rows``).
- ``parquet``: a text holding 16 NUL bytes (97152b0, nested leaves 521489f, e156c3d), a text read
  empty below its row group's footer minimum (5b26879, b1c32db), a dictionary entry no row uses
  (6820e87), a page failing its CRC-32.
- ``hf`` (``datasets`` folders, ``.arrow`` files): the NUL-run checks, two streams joined or
  zeros where a message starts (10c1a2d), a cache folder's ``.map()`` results beside the split.
- ``stdlib``: the demo input (no change; versioned so every format has one). Its reader read
  every file as version 1 does before the key too, so a stdlib marker without ``read_rules``
  vouches for its unit as one of version 1 does (:data:`RULES_BEFORE_KEY`) and is kept.
"""

from __future__ import annotations

__all__ = ["READ_RULES", "RULES_BEFORE_KEY"]

#: input format (:attr:`rmlprep.readers.Unit.format`) -> the version of its reader's rules.
READ_RULES: dict[str, int] = {"jsonl": 1, "csv": 1, "parquet": 1, "hf": 1, "stdlib": 1}
#: input format -> the rules version its reader followed throughout marker version 3 before the
#: key existed, where that is known: a marker of such a unit without ``read_rules`` is read as
#: holding that version. The other formats' rules changed within marker version 3 with nothing
#: to tell (see above), so their keyless markers are redone.
RULES_BEFORE_KEY: dict[str, int] = {"stdlib": 1}
