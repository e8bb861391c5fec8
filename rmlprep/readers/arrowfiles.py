"""``datasets`` folders (``save_to_disk``: a Dataset, or a DatasetDict and its ``split``) and lone
``.arrow`` files (e.g. of the ``datasets`` cache): units of row ranges per Arrow file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from .. import fs
from ..errors import ConfigError, InputError
from .base import LFS_POINTER, Batch, Unit, check_column, column_batches, one_line, sniff

def _read_json_file(path: str, what: str) -> Any:
    try:
        with fs.open(path, "rb") as f:
            data = f.read(1 << 24)
            if f.read(1):
                raise InputError(f"{path}: {what} is over 16 MB; this is not a datasets file", path=str(path))
        if data.startswith(LFS_POINTER):
            sniff(str(path), "hf")
        return json.loads(data.decode("utf-8-sig"))
    except InputError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: {what} is not valid JSON ({one_line(e, 120)}); the datasets folder "
                         "is damaged: save it again with save_to_disk", path=str(path)) from None


def _hf_files(path: str, split: str | None, log: Callable[[str], None] | None = None) -> list[str]:
    """The Arrow files of a ``save_to_disk`` folder: a Dataset's, or the chosen split's of a
    DatasetDict (``split``; unset: the only split, else ``train``, else refused). The choice
    of an unset ``split`` is logged with the splits there are, so a run never reads one split
    of several unannounced. A Dataset folder (no ``dataset_dict.json``) is read whole: ``split``
    applies to DatasetDicts (:func:`rmlprep.readers.plan_units` refuses a ``split`` that no input
    can honour)."""
    p = path
    if fs.exists(fs.join(p, "dataset_dict.json")):
        dd = _read_json_file(fs.join(p, "dataset_dict.json"), "dataset_dict.json")
        splits = dd.get("splits") if isinstance(dd, dict) else None
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
            raise InputError(f"{fs.join(p, 'dataset_dict.json')}: no \"splits\" list of names; the datasets folder "
                             "is damaged: save it again with save_to_disk", path=fs.join(p, "dataset_dict.json"))
        if split is None:
            split = splits[0] if len(splits) == 1 else ("train" if "train" in splits else None)
            if split is None:
                raise ConfigError(f"input.split: {path} is a DatasetDict with splits {', '.join(splits)} and none is "
                                  "'train'; name the one to read, e.g. input.split = " + json.dumps(splits[0]))
            if log is not None:
                which = (f"its only split {split!r}" if len(splits) == 1 else
                         f"split {split!r} of {', '.join(map(repr, splits))}")
                log(f"input: {path} is a DatasetDict; reading {which} (input.split is unset"
                    + ("" if len(splits) == 1 else "; set it to read another") + ")")
        if split not in splits:
            raise ConfigError(f"input.split: {split!r} is not a split of {path}; its splits: {', '.join(splits)}")
        if "/" in split or "\\" in split or split in (".", "..") or not fs.isdir(fs.join(p, split)):
            raise InputError(f"{fs.join(p, 'dataset_dict.json')}: split {split!r} has no folder {fs.join(p, split)}",
                             path=fs.join(p, "dataset_dict.json"))
        p = fs.join(p, split)
    state = _read_json_file(fs.join(p, "state.json"), "state.json")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list):
        raise InputError(f"{fs.join(p, 'state.json')}: no \"_data_files\" list; the datasets folder is damaged: "
                         "save it again with save_to_disk", path=fs.join(p, "state.json"))
    out = []
    for i, d in enumerate(files):
        name = d.get("filename") if isinstance(d, dict) else None
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise InputError(f"{fs.join(p, 'state.json')}: _data_files[{i}] has no plain \"filename\" ({d!r:.80}); "
                             "the datasets folder is damaged", path=fs.join(p, "state.json"))
        if not fs.isfile(fs.join(p, name)):
            raise InputError(f"{fs.join(p, 'state.json')}: _data_files[{i}] names {name}, which is not in {p}",
                             path=fs.join(p, "state.json"))
        sniff(fs.join(p, name), "hf")
        out.append(fs.join(p, name))
    return out


def _open_arrow(path: str):
    try:
        src = fs.open_arrow(path)
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"{path}: cannot open: {one_line(e)}", path=path) from None
    try:
        return pa.ipc.open_stream(src)
    except pa.ArrowInvalid:
        pass
    try:
        return pa.ipc.open_file(src)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file (truncated or damaged?): {one_line(e)}",
                         path=path) from None


#: the end-of-stream marker a closed IPC stream writer writes last: the continuation token and a
#: zero metadata length (Arrow columnar format, "IPC Streaming Format"); before Arrow 0.15, four
#: zero bytes
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_EOS_LEGACY = b"\x00\x00\x00\x00"


def _check_stream_end(path: str) -> None:
    """Refuse an Arrow IPC stream that lacks its end-of-stream marker, or holds more after it.

    pyarrow's stream reader takes the end of the bytes at a message boundary as a clean end, so
    a stream cut right after a record batch (a writer killed mid-way, a copy cut short) reads
    as a complete, shorter file. A closed writer (``datasets``' ``ArrowWriter`` on finalize,
    ``pa.ipc.new_stream(...).close()``) always writes the marker. This walks the messages'
    framing (no batch is decoded) and checks that the marker follows the last one.

    It also stops at the first marker, or at zeros where a message should start (the legacy
    marker): two streams joined (``cat a.arrow b.arrow``: 200 rows) read as the first alone
    (100 rows, exit 0), and a hole of zeros from a message's start on read as the end of the
    stream (500 of 1,000 rows). Bytes after the marker other than zeros refuse the file.

    Raises:
        InputError: the stream ends after a complete message without the marker; bytes that are
            not zeros follow the marker; zeros stand where a message should start; a message's
            framing cannot be read.
    """
    with fs.open_arrow(path) as src:
        size = src.size()
        pos = 0
        messages = 0
        while pos < size:
            head = src.read_at(min(8, size - pos), pos)
            if head == _EOS or head[:4] == _EOS_LEGACY:
                end = pos + (len(_EOS) if head == _EOS else len(_EOS_LEGACY))
                at = end
                while at < size:  # what follows the marker: nothing, or zeros (a preallocated tail)
                    chunk = src.read_at(min(1 << 20, size - at), at)
                    if chunk.strip(b"\x00"):
                        at += len(chunk) - len(chunk.lstrip(b"\x00"))
                        break
                    at += len(chunk)
                else:
                    if head == _EOS or end == size:
                        return
                if head == _EOS:
                    why = (f"byte {pos}: the stream's end-of-stream marker is followed by {size - end} more bytes "
                           f"(data from byte {at}: streams joined with cat, or data appended?); a reader stops at the "
                           "marker, so they would not be read: keep one stream per file")
                else:
                    why = (f"byte {pos}: zeros stand where the next message should start, {size - pos} bytes before "
                           "the end (a hole of zeros: a crash, or a copy or download that stopped); a reader takes "
                           "them for the end of the stream, so the rest would not be read: fetch the file again")
                raise InputError(f"{path}: {why}", path=path, offset=pos)
            try:
                pa.ipc.read_message(src)
            except (EOFError, pa.ArrowException, OSError) as e:
                raise InputError(f"{path}: byte {pos}: the Arrow message there cannot be read ({one_line(e)}): the "
                                 "file is damaged or truncated; fetch it again", path=path, offset=pos) from None
            messages += 1
            pos = src.tell()
    raise InputError(f"{path}: the Arrow stream ends after {messages} messages (byte {size}) without its "
                     "end-of-stream marker: the file is truncated (its writer stopped before closing it, "
                     "or a copy was cut short)",
                     path=path)


def _arrow_rows(path: str) -> tuple[int, list[str]]:
    """The rows of an Arrow file (a stream is walked to its end-of-stream marker) and its
    schema's column names."""
    try:
        r = _open_arrow(path)
        if isinstance(r, pa.ipc.RecordBatchFileReader):
            return sum(r.get_batch(i).num_rows for i in range(r.num_record_batches)), r.schema.names
        n = sum(b.num_rows for b in r)
        _check_stream_end(path)
        return n, r.schema.names
    except InputError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file (truncated or damaged?): {one_line(e)}",
                         path=path) from None


def plan_hf(path: str, split: str | None, unit_rows: int,
            log: Callable[[str], None] | None = None, column: str | None = None) -> list[dict[str, Any]]:
    """Units of row ranges of ``unit_rows`` for a ``datasets`` folder (see :func:`_hf_files`) or
    a lone ``.arrow`` file. With ``column`` (``input.column``), every Arrow file's schema must
    hold it once (:func:`~rmlprep.readers.base.check_column`: checked here, before any unit runs).

    Raises:
        ConfigError: ``split`` is not a split of the DatasetDict, or is unset with several
            splits and no ``train``; no ``column``.
        InputError: a damaged folder or Arrow file; ``column`` named twice.
    """
    out = []
    files = [path] if fs.isfile(path) else _hf_files(path, split, log)
    for f in files:
        n, names = _arrow_rows(f)
        if column is not None:
            check_column(f, names, column)
        size = fs.getsize(f)
        for a in range(0, max(n, 1), unit_rows):
            b = min(n, a + unit_rows)
            out.append(dict(format="hf", path=f, start=a, stop=b, first_row=a,
                            nbytes=size * (b - a) // max(n, 1)))
    return out


def read_hf(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    r = _open_arrow(unit.path)
    try:
        table = r.read_all()  # memory-mapped: no copy of the buffers
        if not isinstance(r, pa.ipc.RecordBatchFileReader):
            _check_stream_end(unit.path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{unit.path}: not a readable Arrow file (truncated or damaged?): {one_line(e)}",
                         path=unit.path) from None
    check_column(unit.path, table.schema.names, column)
    if table.num_rows < unit.stop:
        raise InputError(f"{unit.path}: holds {table.num_rows} rows, the plan expected {unit.stop}; "
                         "the file changed since the plan", path=unit.path)
    part = table.select([column]).slice(unit.start, unit.stop - unit.start)
    yield from column_batches(iter(part.to_batches(max_chunksize=batch_rows)), column, unit.first_row,
                               unit.path, unit.nbytes, part.num_rows)
