"""The plan (the config's ``[input]`` → units, in a stable order) and the read of one unit,
dispatched to the reader of its format."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from .. import fs
from ..compressed import COMPRESSED_SUFFIXES, compression_of, open_decompressed
from ..encoding_hints import extract_advice, other_compression, wide_encoding
from ..errors import ConfigError, InputError, RmlprepError
from .arrowfiles import _open_arrow, plan_hf, read_hf
from .base import MAX_ROW_BYTES, Batch, Unit, check_column, decoded_size_estimate, is_blank_line, sniff
from .csvfile import csv_header, read_csv
from .jsonl import EMPTY_VALUES, plan_jsonl, read_jsonl
from .parquet import plan_parquet, read_parquet
from .glob_checks import (check_cache_files, check_hub_revisions, check_hudi_tables, check_rmlprep_output,
                          check_shard_sets, check_spark_output, check_split_mix)
from .stdlib import read_stdlib, stdlib_files

_JSONL_EXT = (".jsonl", ".json", ".ndjson")
#: files a glob leaves out, as datasets' data_files patterns do (FILES_TO_IGNORE, unless the glob's own last
#: part names one): a Hub repository's dataset card and metadata, never data. Source: datasets 5.2.0, data_files.py
_NOT_DATA = frozenset({"README.md", "config.json", "dataset_info.json", "dataset_infos.json", "dummy_data.zip",
                       "dataset_dict.json"})
#: the names of files a transfer is still writing: Firefox ``.part``, Chrome ``.crdownload``, Safari
#: ``.download``, ``huggingface_hub``'s ``.incomplete``, gsutil / gcloud storage ``_.gstmp``, ``.partial``
_UNFINISHED = (".part", ".partial", ".crdownload", ".download", ".incomplete", "_.gstmp")
#: archives, by the end of a name (after a compression suffix is taken off: .tar.gz is .tar)
_ARCHIVES = (("tar", (".tar", ".tgz", ".tbz2", ".txz")), ("zip", (".zip",)), ("7z", (".7z",)), ("rar", (".rar",)))


def detect_format(path: str) -> str:
    """The reader for one path, from its name (or, for a directory, its ``datasets`` files).

    Raises:
        ConfigError: the kind cannot be told; set ``input.format``.
    """
    if fs.isdir(path):
        if is_hf_dir(path):
            return "hf"
        raise ConfigError(
            f"input.paths: {path} is a directory but not a datasets save_to_disk folder "
            "(no dataset_dict.json or state.json); give files or a glob like 'dir/*.jsonl'"
        )
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
    if (other := other_compression(path)) is not None:
        raise ConfigError(f"input.paths: {other}")
    for c in COMPRESSED_SUFFIXES:
        if name.endswith(c):
            name = name[: -len(c)]
            break
    if name.endswith(_JSONL_EXT):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    if name.endswith(".arrow") and not path.rstrip("/").rsplit("/", 1)[-1].lower().endswith(COMPRESSED_SUFFIXES):
        return "hf"  # one Arrow file of a datasets cache or save_to_disk folder
    archive = next((a for a, suffixes in _ARCHIVES if name.endswith(suffixes)), None)
    if archive is not None:
        raise ConfigError(f"input.paths: {path} is a {archive} archive; " + extract_advice(path, archive))
    if name.endswith((".crc", ".md5", ".sha1", ".sha256", ".sha512")):
        raise ConfigError(f"input.paths: {path} is a checksum file beside the data, not data; leave it out of the "
                          "glob (name the data's suffix, e.g. 'dir/*.parquet')")
    if name.endswith((".txt", ".text", ".md")):
        if _starts_a_json_object(path):
            raise ConfigError(f"input.paths: {path} is named as plain text but its first line starts a JSON object: "
                              "if it is JSON Lines, set input.format = \"jsonl\" (or rename it to end in .jsonl); "
                              "wrapping its lines as text (jq -Rc '{text: .}') would train on the JSON itself")
        raise ConfigError(f"input.paths: {path} is plain text, which rmlprep does not read: it takes one document per "
                          "row, as JSON Lines; make one: jq -Rsc '{text: .}' FILE > FILE.jsonl (the file one document) or "
                          "jq -Rc '{text: .}' FILE > FILE.jsonl (each line one)")
    raise ConfigError(
        f"input.paths: cannot tell the format of {path}; set input.format to one of "
        "jsonl, parquet, csv, hf (a datasets folder or an .arrow file; compressed: .gz, .zst, .bz2, .xz "
        "after the format's suffix)"
    )


def _starts_a_json_object(path: str) -> bool:
    """Whether the first non-blank byte of a file's first 4 kB (decompressed) is ``{``: a file
    named ``.txt`` that holds JSON Lines (read on the error path only; a hint: False when it
    cannot be read)."""
    try:
        with open_decompressed(path) as f:
            return f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"
    except Exception:  # noqa: BLE001 - a hint only: the plain-text refusal stands
        return False


def is_hf_dir(p: str) -> bool:
    return fs.isfile(fs.join(p, "dataset_dict.json")) or fs.isfile(fs.join(p, "state.json"))


def _inside(path: str, dirs: list[str]) -> bool:
    rp = fs.realpath(path)
    return any(rp == d or rp.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def _identity(path: str) -> Any:
    """The file ``path`` names, however it is named: (device, inode) for a local path (hard
    links, symbolic links, ``..``: the same file reads once), the URI for a remote one."""
    if not fs.is_remote(path):
        try:
            st = os.stat(path)
            return st.st_dev, st.st_ino
        except OSError:
            pass
    return fs.realpath(path)


def _glob_escape(path: str) -> str:
    """``path`` with its glob characters escaped (:func:`glob.escape`; ``[`` -> ``[[]``)."""
    import glob

    return glob.escape(path)


def _expand_one(pat: str, ex: list[str], exclude: Sequence[str | os.PathLike],
                log: Callable[[str], None] | None = None) -> list[str]:
    """The files and ``datasets`` folders one entry of ``input.paths`` names (see :func:`_expand`);
    ``ex`` holds ``exclude``'s real paths; ``log`` gets the glob checks' warnings."""
    if any(ch in pat for ch in "*?["):
        hits = fs.glob(pat, recursive=True)
        if fs.exists(pat) and fs.realpath(pat) not in {fs.realpath(h) for h in hits}:
            # a file named like a glob ("a[1].jsonl"): the glob reads other files, or none
            other = f"matches {', '.join(hits[:3])}{' ...' if len(hits) > 3 else ''}" if hits else "matches no file"
            raise ConfigError(f"input.paths: {pat!r} names a file but reads as a glob (it holds *, ? or [), "
                              f"which {other}, not that file; to name the file, escape it: "
                              f"{_glob_escape(pat)!r}")
        if not hits:
            raise ConfigError(f"input.paths: the glob {pat!r} matches no file", path=pat)
        hf_dirs = [fs.realpath(h) for h in hits if fs.isdir(h) and is_hf_dir(h)]
        kept, in_hf, ignored = [], "", []
        not_data = _NOT_DATA - {pat.rstrip("/").rsplit("/", 1)[-1]}
        for h in hits:
            if ex and _inside(h, ex):
                continue  # the run's own output folder is never input
            if fs.isdir(h):
                if fs.realpath(h) in hf_dirs:
                    kept.append(h)
                continue
            if _inside(fs.dirname(h), hf_dirs) or is_hf_dir(fs.dirname(h)):
                in_hf = in_hf or fs.dirname(h)
                continue  # state.json, data-*.arrow of a datasets folder
            if h.rstrip("/").rsplit("/", 1)[-1] in not_data:
                ignored.append(h)
                continue
            kept.append(h)
        check_rmlprep_output(pat, sorted(kept + ignored))
        if ignored and log is not None:
            log(f"input: the glob {pat!r} leaves out {', '.join(ignored[:3])}{' ...' if len(ignored) > 3 else ''}: "
                "a dataset card or metadata, which datasets never reads as data")
        if not kept:  # (no path=: the glob resolved right, the run's note on relative paths would mislead)
            own = sum(1 for h in hits if ex and _inside(h, ex))
            what = (f"{own} of them in the output folder {exclude[0]}, which a run never reads" if own
                    else f"files of the datasets save_to_disk folder {in_hf}, which is read as a whole, by its "
                    f"state.json (an earlier save's files may remain beside the current ones): give the folder itself, "
                    f"input.paths = [{in_hf!r}]" if in_hf else "directories or datasets metadata")
            raise ConfigError(f"input.paths: the glob {pat!r} matches no corpus file ({len(hits)} matches: {what})")
        check_shard_sets(pat, kept)
        check_cache_files(pat, kept)
        check_hub_revisions(pat, kept)
        check_spark_output(pat, kept, log)
        check_hudi_tables(pat, kept)
        check_split_mix(pat, kept)
        return kept
    if not fs.exists(pat):
        raise ConfigError(f"input.paths: {pat} does not exist", path=pat)
    if ex and _inside(pat, ex):
        raise ConfigError(f"input.paths: {pat} is inside the output folder {exclude[0]}; "
                          "a run never reads its own output")
    return [pat]


def _expand(paths: list[str], exclude: Sequence[str | os.PathLike] = (),
            log: Callable[[str], None] | None = None) -> list[str]:
    """Files and ``datasets`` folders named by ``paths`` (globs expanded, sorted), deduplicated.

    A glob skips directories that are not ``datasets`` folders (their files are matched or not by
    the glob itself), files inside a ``datasets`` folder (the folder is the input), and anything
    under ``exclude``. An explicit path under ``exclude`` is an error. A file named again (by a
    second entry or glob, a symlink, a hard link: :func:`_identity`) is read once, and ``log``
    says which: listing a file twice does not repeat its rows, which a user upsampling by
    repetition would otherwise learn only from the counts.

    Worked example: ``["d/*.jsonl", "d/a.jsonl"]`` over ``d/a.jsonl``, ``d/b.jsonl`` and the
    symlink ``d/c.jsonl -> a.jsonl`` gives ``["d/a.jsonl", "d/b.jsonl"]`` and logs that
    ``d/c.jsonl`` and the second ``d/a.jsonl`` are ``d/a.jsonl``.
    """
    ex = [fs.realpath(str(d)) for d in exclude]
    out: list[str] = []
    for i, pat in enumerate(paths):
        try:
            found = _expand_one(pat, ex, exclude, log)
        except ConfigError as e:
            if not str(e).startswith("input.paths"):  # the file system's words (an unknown scheme): name the key
                raise ConfigError(f"input.paths[{i}]: {e}", path=e.path) from None
            raise
        if bad := next((f for f in found if any("\udc80" <= c <= "\udcff" for c in f)), None):
            # a name holding bytes that are not UTF-8 (a Latin-1 file name), as Python decodes them
            # (surrogateescape): the manifest, rejects and the log record input files as text, where
            # it could only stand escaped ('caf\udce9.jsonl'), not as the file's name
            raw = os.fsencode(bad)
            raise ConfigError(f"input.paths[{i}]: {pat!r} names a file whose name is not UTF-8: {raw!r}; the manifest "
                              "and rejects record input files by name as UTF-8 text: rename it (e.g. convmv -f "
                              "latin1 -t utf-8 --notest FILE), or leave it out of the glob")
        out.extend(found)
    seen: dict[Any, str] = {}
    uniq = []
    again = []
    for p in out:
        key = _identity(p)
        if key not in seen:
            seen[key] = p
            uniq.append(p)
        else:
            again.append(f"{p} again" if p == seen[key] else f"{p} = {seen[key]}")
    if again and log is not None:
        log(f"input: {len(again)} of the {len(out)} paths input.paths expands to name a file already listed, "
            "and each file is read once (naming a file twice does not repeat its rows): "
            f"{'; '.join(again[:3])}{' ...' if len(again) > 3 else ''}")
    return uniq


def plan_units(inp: dict[str, Any], *, exclude: Sequence[str | os.PathLike] = (),
               log: Callable[[str], None] | None = None, seen: dict[str, tuple[int, int]] | None = None) -> list[Unit]:
    """Cut the config's ``[input]`` into units, in a stable order.

    Args:
        inp: the validated ``[input]`` section (see :mod:`rmlprep.config`).
        exclude: directories whose files are never input (the run's output folder): glob matches
            under them are skipped, an explicit path under them is refused.
        log: where the split read from a DatasetDict with ``input.split`` unset is announced, and
            a plain CSV file that does not end with a line break warned of (cut short?).
        seen: filled with each input file's ``(size, mtime_ns)`` as it was before its units were
            cut, for the caller to compare with the file it hashes (:func:`rmlprep.pipeline.plan.plan`).
    **Columns.** With ``inp["column"]`` set (``input.column``; a run always sets it), every
    file with a schema or header (Parquet, Arrow, ``datasets`` folders, CSV) must hold that
    column exactly once: the schema is read here anyway (Parquet's footer, an Arrow file's
    schema message; a CSV file's header is its first record), so a file of a glob that lacks it
    stops the run before any unit starts, naming the file. JSONL has no schema: a row without
    the field is a reject of its unit (a CSV header that cannot be read is left to its unit too).

    Raises:
        ConfigError: a path that does not exist, a glob matching nothing, an unknown format;
            ``input.split`` set when no input is a ``datasets`` DatasetDict folder (it would be
            ignored: a Dataset folder or ``.arrow`` file is read whole); a DatasetDict split
            that is not there, or unset with several splits and no ``train``; a Parquet, Arrow
            or CSV file without ``input.column``.
        InputError: a file that is unreadable as a whole (a damaged Parquet footer, a truncated
            zstd frame, broken ``datasets`` JSON, a JSON document that is not JSON Lines, a plain
            JSONL file whose last line is cut short: :func:`.jsonl.plan_jsonl`); a Parquet, Arrow
            or CSV file with two columns named ``input.column``.
    """
    specs: list[dict[str, Any]] = []
    if inp["format"] == "stdlib":
        root, files = stdlib_files(inp["max_bytes"])
        group: list[str] = []
        size = 0
        for rel, n in files:
            group.append(rel)
            size += n
            if size >= inp["unit_bytes"]:
                specs.append(dict(format="stdlib", path=root, nbytes=size, files=tuple(group)))
                group, size = [], 0
        if group:
            specs.append(dict(format="stdlib", path=root, nbytes=size, files=tuple(group)))
    else:
        formats = set()
        column = inp.get("column")
        for path in _expand(inp["paths"], exclude, log=log):
            if not fs.isfile(path) and not fs.isdir(path):
                if not fs.is_remote(path) and os.path.islink(path) and not os.path.exists(path):
                    raise ConfigError(f"input.paths: {path} is a symbolic link to {os.readlink(path)}, which does not "
                                      "exist (a file moved or not fetched, as a Hub cache link whose blob is gone?)")
                raise ConfigError(f"input.paths: {path} is not a regular file (a named pipe, socket or device?); "
                                  "the plan sizes and hashes every input file: save the stream to a file first")
            if (unfinished := next((x for x in _UNFINISHED if path.lower().endswith(x)), None)) is not None:
                raise ConfigError(f"input.paths: {path} is named as a download or copy still being written (its name "
                                  f"ends in {unfinished}: the temporary name a browser, huggingface_hub or gsutil gives a "
                                  "file until the transfer completes), so it may be partial; wait for it to finish "
                                  "(or, if it is complete, rename it), or leave it out of the glob")
            if path.rstrip("/").rsplit("/", 1)[-1] in ("_metadata", "_common_metadata"):
                raise ConfigError(f"input.paths: {path} is a Parquet dataset's summary file (Dask, Spark and "
                                  "pyarrow's write_metadata write it beside the parts: the schema, and in _metadata the "
                                  "parts' row groups, no rows of its own); leave it out of the glob (name the parts: "
                                  "'dir/*.parquet')")
            fmt = inp["format"] if inp["format"] != "auto" else detect_format(path)
            formats.add("DatasetDict" if fmt == "hf" and fs.isfile(fs.join(path, "dataset_dict.json")) else fmt)
            if fmt != "hf" and fs.isdir(path):
                raise ConfigError(f"input.paths: {path} is a directory; input.format = {fmt!r} reads files")
            if fs.isfile(path):
                if seen is not None:
                    st = fs.stat(path)
                    seen[path] = (st.st_size, st.st_mtime_ns)
                sniff(path, fmt)
            if fmt == "jsonl":
                specs.extend(plan_jsonl(path, inp["unit_bytes"], column))
            elif fmt == "parquet":
                specs.extend(plan_parquet(path, inp["unit_rows"], column))
            elif fmt == "csv":
                if column is not None:
                    _check_csv_header(path, column)
                if log is not None and _ends_without_line_break(path):
                    log(f"warning: input: {path} does not end with a line break: its last CSV record is read as "
                        "complete, though a file cut short (an interrupted download or copy) ends so too, with its "
                        "last value cut")
                specs.append(dict(format="csv", path=path, nbytes=decoded_size_estimate(path)))
            elif fmt == "hf":
                specs.extend(plan_hf(path, inp.get("split"), inp["unit_rows"], log, column))
            else:  # pragma: no cover - config validates formats
                raise ConfigError(f"input.format: unknown format {fmt!r}")
        if inp.get("split") is not None and "DatasetDict" not in formats:
            names = {"hf": "a Dataset folder or .arrow file", "jsonl": "JSONL", "parquet": "Parquet", "csv": "CSV"}
            what = ", ".join(sorted(names.get(f, f) for f in formats))
            raise ConfigError(f"input.split = {inp['split']!r}: a split is chosen in a datasets DatasetDict folder, "
                              f"and input.paths names none (only {what}, read whole); remove input.split")
    return [Unit(i, **s) for i, s in enumerate(specs)]


def _ends_without_line_break(path: str) -> bool:
    """Whether a plain (uncompressed) file's last byte is neither ``\n`` nor ``\r``: a CSV file cut
    in its last record's last value reads as a complete record (its reader refuses a last record
    with fewer fields than the header and no line break: :func:`.csvfile.read_csv`)."""
    if compression_of(path) is not None:
        return False  # a cut compressed stream is its decoder's fault to find
    size = fs.getsize(path)
    if not size:
        return False
    with fs.open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1) not in (b"\n", b"\r")


def _check_csv_header(path: str, column: str) -> None:
    """:func:`~rmlprep.readers.base.check_column` on a CSV file's header; a header that cannot
    be read (a broken quote, bytes that are not UTF-8) is left to the file's unit, whose reader
    names the fault as it does for the rest of the file."""
    try:
        header = csv_header(path)
    except (RmlprepError, OSError, ValueError, csv.Error):
        return
    if header and column not in header and "\x00" in "".join(header):
        # UTF-16 without a byte-order mark inside a compressed file (the plan's sniff sees the
        # compressed bytes only): its header reads as 't\x00e\x00x\x00t\x00'
        with open_decompressed(path) as f:
            wide = wide_encoding(f.read(64))
        if wide is not None:
            raise InputError(f"{path}: the file is {wide[0]} ({wide[2]}) once decompressed; rmlprep reads UTF-8: "
                             f"convert it with iconv -f {wide[1]} -t UTF-8", path=path, offset=0)
    if header:  # an empty file holds no rows: nothing to miss
        check_column(path, header, column)


def read_unit(unit: Unit, column: str, batch_rows: int, watch: Sequence[str] = ()) -> Iterator[Batch]:
    """Stream a unit's ``column`` as :class:`Batch` objects of at most ``batch_rows`` rows.

    Args:
        watch: JSONL only: fields whose presence in a row (a value that is not null or empty)
            is reported in :attr:`Batch.watched`. The other formats have a schema: see
            :func:`column_names`.
    Raises:
        InputError: a file fault (see the module docstring); the unit must not be counted done.
        ConfigError: the file has no ``column`` (Parquet, CSV, Arrow).
    """
    if unit.format == "jsonl":
        yield from read_jsonl(unit, column, batch_rows, watch)
    elif unit.format == "parquet":
        yield from read_parquet(unit, column, batch_rows)
    elif unit.format == "csv":
        yield from read_csv(unit, column, batch_rows)
    elif unit.format == "hf":
        yield from read_hf(unit, column, batch_rows)
    elif unit.format == "stdlib":
        yield from read_stdlib(unit, batch_rows)
    else:  # pragma: no cover
        raise ConfigError(f"input.format: unknown format {unit.format!r}")


def column_names(unit: Unit) -> tuple[list[str], bool] | None:
    """The columns of a unit's file, read without reading its rows, and whether they are all
    of them: the schema of a Parquet or Arrow file and the header of a CSV file (complete), the
    keys of a JSONL file's first object that hold something (rows may hold other keys; a key
    holding null, ``""``, ``[]`` or ``{}`` is left out, as the reader's watched fields leave it:
    a first row's ``"tools": []`` is no tools, as a later row's is). None for what cannot be
    told this way (a first line that is not a JSON object, the stdlib demo). Errors of the file
    are left to its reader (None).
    """
    try:
        if unit.format == "parquet":
            from .parquet import parquet_file

            return list(parquet_file(unit.path).schema_arrow.names), True
        if unit.format == "hf":
            return list(_open_arrow(unit.path).schema.names), True
        if unit.format == "csv":
            return csv_header(unit.path), True
        if unit.format == "jsonl":
            with open_decompressed(unit.path) as f:
                while line := f.readline(MAX_ROW_BYTES + 1):
                    if not is_blank_line(line):
                        obj = json.loads(line.removeprefix(b"\xef\xbb\xbf"))
                        if not isinstance(obj, dict):
                            return None
                        return [k for k, v in obj.items() if v not in EMPTY_VALUES], False
    except (RmlprepError, OSError, ValueError, RecursionError, pa.ArrowException, csv.Error):
        return None
    return None
