"""What an input file that is not UTF-8 text holds, told from its bytes, for the one line that
refuses it: a UTF-16/32 byte-order mark, UTF-16 without one (a NUL byte beside every ASCII
character), Latin-1 / Windows-1252 text (invalid UTF-8 whose bytes read as letters there), or
another file format under a text name (Parquet, Arrow, zip). rmlprep reads UTF-8 only: these
only word the refusal or the reject better, they never read the file another way. Also: a
compression rmlprep does not read (lz4, ...), and what columns missing ``input.column`` look like
(:func:`layout_hint`).
"""

from __future__ import annotations

import tarfile

__all__ = ["WIDE_BOMS", "LFS_POINTER", "wide_encoding", "binary_format", "tar_member", "web_page", "not_utf8_hint",
           "EXTRACT", "extract_advice", "OTHER_COMPRESSIONS", "OTHER_FORMATS", "other_compression", "layout_hint"]

#: (byte-order mark, the encoding's name, iconv's name for it); the 4-byte marks first
WIDE_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32-BE", "UTF-32BE"), (b"\xff\xfe\x00\x00", "UTF-32-LE", "UTF-32LE"),
             (b"\xfe\xff", "UTF-16-BE", "UTF-16BE"), (b"\xff\xfe", "UTF-16-LE", "UTF-16LE"))

#: The first bytes of a Git LFS pointer: the small text file a clone without ``git lfs`` holds
#: in place of a large file (a Hub repo's tokenizer.json, tokenizer.model, .gguf, .parquet).
LFS_POINTER = b"version https://git-lfs.github.com/spec/"

#: a file format's magic number at byte 0 -> (its name, the suffix that names it)
_FORMATS = ((b"PAR1", "a Parquet file (magic PAR1 at byte 0)", ".parquet"),
            (b"ARROW1", "an Arrow IPC file (magic ARROW1 at byte 0)", ".arrow"),
            (b"PK\x03\x04", "a zip archive (magic PK at byte 0)", ".zip"),
            (b"SQLite format 3\x00", "an SQLite database", ".sqlite"))


def wide_encoding(head: bytes) -> tuple[str, str, str] | None:
    """(encoding, iconv name, how it shows) of a file starting with ``head`` when that is
    UTF-16/32: a byte-order mark, or (UTF-16, no mark) a NUL byte beside each of its first 4
    ASCII characters (``{\\x00"\\x00t\\x00e\\x00``: little-endian); None otherwise."""
    for bom, name, iconv in WIDE_BOMS:
        if head.startswith(bom):
            return name, iconv, "byte-order mark at byte 0"
    if len(head) >= 8:
        even, odd = head[0:8:2], head[1:8:2]
        if odd == b"\x00" * 4 and all(0x09 <= b < 0x80 for b in even):
            return "UTF-16-LE", "UTF-16LE", "no byte-order mark, a NUL byte after each ASCII character"
        if even == b"\x00" * 4 and all(0x09 <= b < 0x80 for b in odd):
            return "UTF-16-BE", "UTF-16BE", "no byte-order mark, a NUL byte before each ASCII character"
    return None


def binary_format(head: bytes) -> tuple[str, str] | None:
    """(what the file is, the suffix that names it) when ``head`` starts with the magic number
    of a format that is not text (Parquet ``PAR1``, Arrow ``ARROW1``, zip, SQLite) and does not
    read as text after it (a Parquet page header, Arrow's padding, a zip's version bytes are
    control bytes); else None. ``PAR1`` and ``ARROW1`` are letters and digits: a CSV whose
    first column is named ``PAR1_id`` starts with them and is text (it was refused as Parquet)."""
    found = next(((what, suffix) for magic, what, suffix in _FORMATS if head.startswith(magic)), None)
    return None if found is None or _reads_as_text(head) else found


#: Spark and Hadoop write a part file's lz4 / Snappy / deflate in their own block format (``part-00000.json.lz4``)
_HADOOP = "; a Spark or Hadoop part file's: hadoop fs -text FILE > OUT"
#: compressions rmlprep does not read: (magic number at byte 0 or None, name, the suffixes that name it,
#: the command that decompresses FILE). Source: the LZ4 frame format (0x184D2204 little-endian; the legacy
#: format 0x184C2102), Snappy's framing_format.txt (stream identifier chunk ``ff 06 00 00 sNaPpY``), zlib's
#: default header (RFC 1950: ``78 9c``; Hadoop's DefaultCodec, Spark's ``compression="deflate"``), lzip's
#: ``LZIP`` + version 1, lzop's 9-byte magic, compress(1)'s ``1f 9d``; Brotli has no magic number.
OTHER_COMPRESSIONS = ((b"\x04\x22\x4d\x18", "lz4", (".lz4",), "lz4 -d FILE" + _HADOOP),
                      (b"\x02\x21\x4c\x18", "lz4 (legacy format)", (), "lz4 -d FILE"),
                      (b"\xff\x06\x00\x00sNaPpY", "Snappy", (".sz", ".snappy"),
                       "python -m snappy -d FILE OUT for Snappy's framing format" + _HADOOP),
                      (b"\x78\x9c", "zlib (deflate)", (".deflate",), "python3 -c \"import sys, zlib; sys.stdout.buffer."
                       "write(zlib.decompress(sys.stdin.buffer.read()))\" < FILE > OUT" + _HADOOP),
                      (b"LZIP\x01", "lzip", (".lz",), "lzip -d FILE"),
                      (b"\x89LZO\x00\r\n\x1a\n", "lzop", (".lzo",), "lzop -d FILE"),
                      (b"\x1f\x9d", "Unix compress", (".z",), "uncompress FILE"),
                      (None, "Brotli", (".br",), "brotli -d FILE"))


#: how to make a CSV file of a spreadsheet
_SHEET = ("to CSV: save it as \"CSV UTF-8\" (Excel, LibreOffice), or python3 -c \"import pandas as p; "
          "p.read_excel('FILE').to_csv('OUT.csv', index=False)\"")
#: file formats rmlprep does not read: (magic number at byte 0, what it is, the suffixes that name it, how
#: to convert FILE). Source: the ORC specification (``ORC`` at byte 0), Avro's object container files
#: (``Obj`` and 1), OLE2's compound file signature (``.xls``); an ``.xlsx`` / ``.ods`` is a zip (told by its name:
#: a zip's advice, to extract it, would give XML).
OTHER_FORMATS = ((b"ORC", "an ORC file", (".orc",), "to Parquet: python3 -c \"import pyarrow.orc as o, pyarrow.parquet "
                  "as p; p.write_table(o.read_table('FILE'), 'OUT.parquet')\""),
                 (b"Obj\x01", "an Avro object container file", (".avro",),
                  "to JSON Lines: avro-tools tojson FILE > OUT.jsonl"),
                 (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Excel 97-2003 workbook (an OLE2 file)", (".xls",), _SHEET),
                 (None, "a spreadsheet workbook (a zip of XML)", (".xlsx", ".xlsm", ".ods"), _SHEET))


def other_compression(path: str, head: bytes | None = None) -> str | None:
    """The refusal of a file compressed in a way rmlprep does not read (:data:`OTHER_COMPRESSIONS`)
    or of a format it does not read (:data:`OTHER_FORMATS`: ORC, Avro, spreadsheets), told by
    ``head`` (its first bytes) or, without it or for a kind without a magic number of its own
    (Brotli; an ``.xlsx`` is a zip), by the name's last suffix; else None. Such a file read as text
    (``input.format = "jsonl"``) was refused as "the last line is cut short ... the file looks
    truncated", a cause that sends one to fetch it again."""
    low = str(path).lower()
    for magic, name, suffixes, command in OTHER_COMPRESSIONS + OTHER_FORMATS:
        if head is not None and magic is not None and head.startswith(magic) and not (
                magic[:1].isalpha() and _reads_as_text(head)):  # a CSV header "ORCID,text" is text
            how = f"magic number {magic[:4].hex(' ')} at byte 0"
        elif (head is None or magic is None) and suffixes and low.endswith(suffixes):
            how = f"its name ends in {path[-len(next(x for x in suffixes if low.endswith(x))):]}"
        else:
            continue
        if (magic, name, suffixes, command) in OTHER_FORMATS:
            return (f"{path}: is {name} ({how}), which rmlprep does not read (it reads JSON Lines, CSV, Parquet and "
                    f"Arrow files): convert it {command}")
        return (f"{path}: is {name}-compressed ({how}), which rmlprep does not read (it reads gzip, zstd, bzip2 and "
                f"xz, named .gz, .zst, .bz2, .xz): decompress it ({command}) and give that file, or recompress it "
                "with zstd")
    return None


#: how to extract an archive of each kind into DIR (``{p}``: its path)
EXTRACT = {"tar": "tar xf {p} -C DIR", "zip": "unzip {p} -d DIR", "7z": "7z x {p} -oDIR", "rar": "unrar x {p} DIR/"}


def extract_advice(path: str, kind: str, holder: str = "an archive") -> str:
    """The end of every refusal of an archive given as input: read what it holds, with the command
    that extracts an archive of ``kind`` (:data:`EXTRACT`)."""
    return (f"rmlprep reads the files {holder} holds, not the archive: extract it ({EXTRACT[kind].format(p=path)}) "
            "and give those files (input.paths = [\"DIR/*.jsonl\"])")


def tar_member(head: bytes) -> str | None:
    """The first member's name when ``head`` (a file's first 512 bytes, decompressed) is a tar
    header: ``ustar`` at byte 257 (POSIX, GNU and pax tar all write it) and a valid header
    checksum (bytes 148-155, as Python's :mod:`tarfile` checks it: the magic alone is five bytes a
    text may hold); else None.

    Source: POSIX ``pax`` ustar header layout (name: bytes 0-99, NUL-padded; chksum at 148; magic
    at 257); ``tarfile.TarInfo.frombuf``.
    """
    if len(head) < 512 or head[257:262] != b"ustar":
        return None
    try:
        tarfile.TarInfo.frombuf(bytes(head[:512]), "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return None
    return head[:100].split(b"\0", 1)[0].decode("utf-8", "replace")


def web_page(head: bytes) -> str | None:
    """What a file's first bytes are when they are a web server's answer saved in place of the
    file: an HTML page (a Hub link with ``/blob/``, which shows the file, where ``/resolve/``
    gives it; a login or error page) or an object store's XML error (S3's ``<Error><Code>
    AccessDenied</Code>``, fetched without credentials); else None."""
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "an HTML page (a web page saved in place of the file: a Hub link with /blob/ where /resolve/ gives the file, or a login or error page?)"
    if start.startswith(b"<?xml") and b"<error>" in head.lower():
        code = head[head.find(b"<Code>") + 6 : head.find(b"</Code>")] if b"<Code>" in head and b"</Code>" in head else b""
        what = f" ({code.decode('ascii', 'replace')})" if 0 < len(code) < 64 else ""
        return f"an object store's XML error response{what} saved in place of the file (fetched without credentials?)"
    return None


def _reads_as_text(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) is UTF-8 of printable characters, tabs and line
    ends (a character cut by the end of ``head`` counts as text)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return False
        text = head[: e.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\r\n" for c in text)


def not_utf8_hint(data: bytes, start: int, reason: str) -> str:
    """``; read as Windows-1252 it is 'café crème': convert the file with iconv -f CP1252 -t
    UTF-8`` when the invalid UTF-8 at ``start`` of ``data`` (a line, a value) looks like Latin-1
    / Windows-1252 text: the byte there reads as a letter or common sign in Windows-1252 beside
    an ASCII letter or digit, the whole of ``data`` reads as printable text so, and no valid
    UTF-8 beyond ASCII comes before it; "" otherwise (binary bytes; UTF-8 text with a bad byte; UTF-8 cut at the end: ``reason``
    "unexpected end of data"). A lone byte that ASCII follows may be either (a UTF-8 character
    cut mid-way, or Latin-1): the hint says "if". Worked example: ``b'caf\\xe9 cr\\xe8me'``
    fails at byte 3 (``\\xe9`` starts a 3-byte sequence, ``' '`` does not continue it); 0xE9 is
    'é' in Windows-1252, so the hint names ``'café crème'``."""
    if reason == "unexpected end of data" or not 0 <= start < len(data) or data[start] < 0x80:
        return ""
    if any(b >= 0x80 for b in data[:start]):  # valid UTF-8 beyond ASCII before it: UTF-8 with a bad byte
        return ""
    text = data.decode("cp1252", errors="replace")
    if "\ufffd" in text or any(c < " " and c not in "\t\r\n" for c in text):
        return ""
    ch = text[start]  # cp1252 is one byte per character
    if not (ch.isalpha() or ch in "’‘“”–—…«»°£€©®±·§¿¡"):
        return ""
    if not any(chr(b).isalnum() for b in data[max(0, start - 1):start] + data[start + 1:start + 2] if b < 0x80):
        return ""  # a Latin-1 letter or sign sits in a word: beside an ASCII letter or digit
    lo, hi = max(0, start - 12), min(len(text), start + 12)
    word = text[lo:hi].strip()
    return (f"; read as Windows-1252 (Latin-1) it is {word!r}: if the file is so encoded, convert it with "
            "iconv -f CP1252 -t UTF-8")


#: the delimiters of files named .csv that are not comma-separated (Excel's in locales whose decimal
#: mark is a comma writes ``;``)
_OTHER_DELIMITERS = {";": "semicolon", "|": "pipe", "\t": "tab"}
#: the one-liner that rewrites a ``{d}``-separated file with commas, as Python's csv reads and writes it
_RECAST = ("python3 -c \"import csv,sys; csv.writer(sys.stdout).writerows(csv.reader(sys.stdin, "
           "delimiter='{d}'))\" < FILE > NEW.csv")


def layout_hint(column: str, names) -> str:
    """``""``, or what the columns (or a JSON row's fields) missing ``column`` look like, for the
    line that refuses them: TRL's prompt-completion layout (a ``prompt`` and a ``completion``
    field, each a message list or a string, where rmlprep reads one conversation column); a CSV
    whose first line is Excel's separator line (``sep=,``, which Excel writes and reads as no
    row; Python's ``csv``, pandas and ``datasets`` read it as the header); a CSV separated by
    ``;``, ``|`` or a tab, whose header reads as one column; a dotted name whose first part is a
    column (a struct's field); the column's name with spaces around it, or in another case
    (``Text``)."""
    names = list(names)
    if column == "messages" and {"prompt", "completion"} <= set(names):
        return ("; this is TRL's prompt-completion layout: rmlprep reads one conversation column, so join them "
                "first (messages = prompt + completion, as message lists); naming the completion column alone "
                "would train answers with no prompt")
    first = str(names[0]) if names else ""
    if first.startswith("sep=") and len(first) <= 5 and len(names) <= 2:
        d = first[4:] or ","
        then = f" | {_RECAST.format(d=d).removesuffix(' < FILE > NEW.csv')} > NEW.csv" if d != "," else " > NEW.csv"
        return (f"; its first line, 'sep={d}', is Excel's separator line, not the header: remove it "
                f"(tail -n +2 FILE{then})")
    if len(names) == 1 and (d := next((c for c in _OTHER_DELIMITERS if c in first), None)) and column in first.split(d):
        return (f"; the header reads as one column holding {_OTHER_DELIMITERS[d]}s: a {_OTHER_DELIMITERS[d]}-separated "
                f"file? rmlprep reads commas in a .csv and tabs in a .tsv: rewrite it with commas ({_RECAST.format(d=d)})"
                if d != "\t" else "; the header reads as one column holding tabs: a tab-separated file? name it .tsv")
    if "." in column and (outer := column.split(".", 1)[0]) in names:
        return (f"; {outer!r} is a column: rmlprep reads a top-level column, not a field inside one; flatten it "
                f"first (pyarrow: table.flatten(), which names the field's column {column!r})")
    if near := next((n for n in names if isinstance(n, str) and n != column and n.strip() == column), None):
        return f"; {near!r} is {column!r} with spaces around it: rename that column"
    if near := next((n for n in names if isinstance(n, str) and n.lower() == column.lower()), None):
        return f"; {near!r} differs only in case: set input.column = {near!r} if it is that column"
    return ""
