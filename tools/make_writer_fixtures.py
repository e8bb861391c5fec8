"""Write small Parquet files as writers other than pyarrow write them, for the readers' checks.

Healthy files whose dictionary pages hold entries no row of their row group uses, written by
the writers themselves (not by rmlprep or pyarrow), so a check that takes an unused entry for
damage (:func:`rmlprep.readers.parquet_checks.check_dictionary_use`) is tested against them:

- ``duckdb_enum_roles.parquet``: 300 conversations ``list<struct<role, content>>`` whose role
  is a DuckDB ENUM('system', 'user', 'assistant', 'tool') holding only 'user' and 'assistant';
  DuckDB writes the ENUM's whole type as the role leaf's dictionary.
- ``duckdb_enum_text.parquet``: a text column of that ENUM, 200 rows of 'user'/'assistant'.
- ``fastparquet_categorical.parquet``: a pandas categorical of 'a'/'b' with the unused
  category 'zz', written by fastparquet (its categories are the dictionary page).

Usage: ``python tools/make_writer_fixtures.py [--out fixtures/writers]``. Needs duckdb and
fastparquet (not rmlprep's dependencies: ``pip install --target DIR duckdb fastparquet`` and
``PYTHONPATH=DIR``); made with duckdb 2.0.1 and fastparquet 2026.9.0. rmlprep's tests read the
files only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "writers")
    out = ap.parse_args().out
    out.mkdir(parents=True, exist_ok=True)

    import duckdb
    import fastparquet
    import pandas as pd

    c = duckdb.connect()
    c.execute("CREATE TYPE role AS ENUM ('system', 'user', 'assistant', 'tool')")
    c.execute("CREATE TABLE m AS SELECT [{'role': 'user'::role, 'content': 'question ' || i}, "
              "{'role': 'assistant'::role, 'content': 'answer ' || i}] AS messages FROM range(300) r(i)")
    c.execute(f"COPY m TO '{out / 'duckdb_enum_roles.parquet'}' (FORMAT parquet)")
    c.execute("CREATE TABLE t AS SELECT (['user', 'assistant'])[1 + i % 2]::role AS text FROM range(200) r(i)")
    c.execute(f"COPY t TO '{out / 'duckdb_enum_text.parquet'}' (FORMAT parquet)")
    df = pd.DataFrame({"text": pd.Categorical(["a", "b"] * 50, categories=["a", "b", "zz"])})
    fastparquet.write(str(out / "fastparquet_categorical.parquet"), df)
    print(f"wrote 3 files to {out} (duckdb {duckdb.__version__}, fastparquet {fastparquet.__version__})")


if __name__ == "__main__":
    main()
