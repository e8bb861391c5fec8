"""The paths of a run config: how a relative one is made absolute (against the current
directory, not the config file's folder), and what an error about one that names nothing says
(:func:`relative_note`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import fs
from .errors import ConfigError

__all__ = ["relative_note", "tidy_paths"]


def _check_uri(p: str, key: str) -> None:
    """Refuse an object-store URI whose key holds an empty (``//``), ``.`` or ``..`` segment.

    A key is not a path, and the store's client does not treat such segments one way: pyarrow's
    S3 client refuses ``//`` (an ArrowInvalid), while its requests resolve ``./`` and ``../`` (so
    ``s3://b/c/./a.jsonl`` beside ``s3://b/c/a.jsonl`` read one object twice, and a server-side
    copy, which sends the key as given, missed the object its upload had just written).
    Local paths are normalised instead (``..`` names a folder; the same file reads once).

    Raises:
        ConfigError: naming ``key`` and the URI.
    """
    path = fs._split(p).path.rstrip("/")  # a trailing "/" names the same prefix
    seg = next((s for s in path.split("/") if s in ("", ".", "..")), None) if path else None
    if seg is not None:
        what = "an empty segment ('//')" if seg == "" else f"a {seg!r} segment"
        raise ConfigError(f"{key}: {p!r} has {what}; an object-store key is not a path, and the store's client "
                          "resolves such segments for some requests and not others (the same object read twice, "
                          "a write that lands elsewhere): write the key without them")


def _abs(p: str, key: str = "path") -> str:
    """An absolute local path (of a ``file:///`` URI, its path); ``demo:NAME`` and object-store
    URIs (``s3://...``, see :mod:`rmlprep.fs`) as they are, once :func:`_check_uri` accepts them
    (else a ConfigError naming ``key``)."""
    if p.startswith("demo:"):
        return p
    if p[:7].lower() == "file://":  # a local file URI: its path, as fsspec reads it (file:///data/a -> /data/a)
        if not p[7:].startswith("/"):
            raise ConfigError(f"{key}: {p!r}: a file URI holds an absolute path after file:// (file:///data/...); "
                              "give it so, or the path itself", path=p)
        p = p[7:]
    if fs.is_remote(p):
        _check_uri(p, key)
        return p
    _check_fs_encoding(p, key)
    return str(Path(os.path.expanduser(p)).absolute())


def _check_fs_encoding(p: str, key: str) -> None:
    """Refuse a local path that Python's file system encoding cannot name, when that encoding is
    not UTF-8: a C/POSIX locale with the coercion and UTF-8 mode turned off (``LC_ALL=C
    PYTHONUTF8=0 PYTHONCOERCECLOCALE=0``; PEP 538 and PEP 540 turn it to UTF-8 otherwise) makes it
    ASCII. There ``output.dir = "out-é"`` died in ``os.listdir`` with a UnicodeEncodeError
    traceback (exit 1), and ``--output out-é`` (UTF-8 bytes, decoded as ASCII with
    surrogateescape) was refused as a name "not UTF-8" although it is (review13).

    Raises:
        ConfigError: naming ``key``, the path, the encoding and ``PYTHONUTF8=1``.
    """
    import sys

    enc = sys.getfilesystemencoding()
    if enc.replace("-", "").lower() == "utf8" or p.isascii():
        return
    try:
        raw = os.fsencode(p)  # argv: the bytes as given (surrogateescape)
        raw.decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        if any("\udc80" <= c <= "\udcff" for c in p):
            return  # bytes that are not UTF-8 (a Latin-1 name): _abs_dir says so for output.dir
        raw = None  # text the encoding cannot write (a config's "out-é")
    if raw is None or any("\udc80" <= c <= "\udcff" for c in p):
        shown = raw.decode("utf-8") if raw is not None else p
        raise ConfigError(f"{key}: {shown!r}: Python's file system encoding is {enc!r} (a C/POSIX locale with "
                          "PYTHONUTF8=0), which cannot name this path as UTF-8: run with PYTHONUTF8=1 (or a UTF-8 "
                          "locale, e.g. LC_ALL=C.UTF-8)")


def _abs_dir(p: str, key: str = "output.dir") -> str:
    """``output.dir`` as :func:`_abs` makes it, ``..`` and ``.`` taken out
    (``/work/rmlprep/../out/a1`` → ``/work/out/a1``, the folder the user sees in the log and the
    manifest) when that names the same folder: a ``..`` after a symbolic link goes up from the
    link's target, so there the path is kept as given. ``output.dir`` is not in the config hash.
    A path whose name holds bytes that are not UTF-8 (``--output out-$'\\xe9'``, or a Latin-1 current
    folder) is refused (ConfigError naming ``key``): the run wrote every shard, then failed with a
    UnicodeEncodeError traceback writing the dataset card, which records the folder as text."""
    a = _abs(p, key)
    if a == p and (p.startswith("demo:") or fs.is_remote(p)):
        return a
    if any("\udc80" <= c <= "\udcff" for c in a):  # a byte that is not UTF-8, as Python decodes argv and paths
        raise ConfigError(f"{key}: {a!r} holds bytes that are not UTF-8 in its name; the manifest, the dataset "
                          "card and the log record the output folder as UTF-8 text: choose a folder whose path is "
                          "UTF-8 (or rename it)", path=a)
    n = os.path.normpath(a)
    return n if n == a or os.path.realpath(n) == os.path.realpath(a) else a


def relative_note(relative: tuple[tuple[str, str, str], ...], cwd: str, source: str, path: str | None) -> str:
    """What an error about ``path`` (absolute) should add when the config gave it relative:
    how it was resolved, against which folder, and, when the config file's folder (or the one
    above it, a project holding ``configs/``) has what was meant, that path. "" for a path the
    config gave absolute (or None).

    Args:
        relative: ``(key, as given, absolute)`` of the config's relative paths
            (:attr:`rmlprep.config.RunConfig.relative`); cwd: the folder they resolved against;
            source: the config file ("" for a dict).

    >>> relative_note((("input.paths", "d/*.jsonl", "/home/u/d/*.jsonl"),), "/home/u", "/p/configs/a.toml",
    ...               "/home/u/d/*.jsonl")  # doctest: +NORMALIZE_WHITESPACE
    " (input.paths gives 'd/*.jsonl': a relative path in a config resolves against the current directory,
    /home/u, not against the config file's folder, /p/configs)"
    """
    hit = next(((k, given) for k, given, a in relative if a == path), None) if path else None
    if hit is None:
        return ""
    key, given = hit
    note = f" ({key} gives {given!r}: a relative path in a config resolves against the current directory, {cwd}"
    if not source:
        return note + ")"
    folder = os.path.dirname(os.path.abspath(source))
    hint = ""
    # run from the config's own folder (`cd configs; rmlprep run c.toml`), the one above it may
    # still hold what was meant: look there too, but say nothing of the folder it was resolved in
    for base in (folder, os.path.dirname(folder)):
        if base == cwd:
            continue
        there = os.path.join(base, os.path.expanduser(given))
        glob = any(ch in given for ch in "*?[")
        if fs.glob(there) if glob else os.path.exists(there):
            hint = f"; {there} {'matches' if glob else 'exists'}: run from {base}, or give the absolute path"
            break
    if folder == cwd:
        return note + f", the config file's folder{hint})"
    return note + f", not against the config file's folder, {folder}{hint})"


def tidy_paths(cfg) -> Callable[[str], str]:
    """A function writing, in a line for the user, each local path of ``cfg`` (a RunConfig:
    ``input.paths``, ``tokenizer.path``, ``parity.fixture``, ``parity.chat_renders``) that holds a
    ``.`` or ``..`` segment as the clean path naming the same file: ``../data/x.jsonl`` given in
    ``/p/sub`` is ``/p/sub/../data/x.jsonl`` in the config and shows as ``/p/data/x.jsonl``.
    Display only: these paths are in the config hash and the manifest, the rejects files and
    the done markers keep them as resolved (normalising them there would make an upgraded rerun
    of a running folder "another config"); ``output.dir``, not hashed, is normalised itself
    (:func:`_abs_dir`). After a symbolic link ``..`` goes up from the link's target, so such a
    path shows as it is. The identity when no path needs it.
    """
    given = [*cfg["input"]["paths"], cfg["tokenizer"]["path"], cfg["parity"].get("fixture"),
             cfg["parity"].get("chat_renders")]
    pairs: dict[str, str] = {}
    for p in given:
        if not isinstance(p, str) or not os.path.isabs(p):  # demo:NAME, an object-store URI
            continue
        segs = p.split(os.sep)
        last = max((i for i, s in enumerate(segs) if s in (".", "..")), default=None)
        if last is None:
            continue
        old = os.sep.join(segs[:last + 1])
        new = os.path.normpath(old)
        if os.path.realpath(old) != os.path.realpath(new):
            continue
        pairs[old + os.sep] = new.rstrip(os.sep) + os.sep
        if last == len(segs) - 1:  # the path ends in the segment (a folder): the bare form too
            pairs[old] = new
    if not pairs:
        return lambda text: text
    order = sorted(pairs, key=len, reverse=True)  # a longer prefix first

    def tidy(text: str) -> str:
        for old in order:
            if old in text:
                text = text.replace(old, pairs[old])
        return text

    return tidy
