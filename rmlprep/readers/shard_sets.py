"""Numbered shard sets (``train-00002-of-00004.parquet``): a glob that matches some of a set's
files and would match the others, had they been there, reads a dataset short of them."""

from __future__ import annotations

import fnmatch
import re

from .. import fs
from ..errors import InputError

__all__ = ["check_shard_sets"]

#: ``<prefix>-<index>-of-<count><rest>``: the names ``datasets`` (``push_to_hub``, its cache:
#: ``{split}-{index:05d}-of-{num_shards:05d}``) and TensorFlow give the shards of one set.
_SHARD = re.compile(r"^(?P<pre>.+)-(?P<i>\d{1,6})-of-(?P<n>\d{1,6})(?P<post>(?:[^0-9].*)?)$")


def check_shard_sets(pattern: str, hits: list[str]) -> None:
    """Refuse a glob's matches that hold part of a numbered shard set whose other files the
    glob would match too: the set's name counts its files, so those are missing, not left out.

    Worked example: ``data/train-*.parquet`` over ``data/train-00000-of-00004.parquet``,
    ``-00001-``, ``-00003-`` (``-00002-of-00004`` absent, as an interrupted ``snapshot_download``
    or ``huggingface-cli download`` leaves a folder: the Hub's cache links a file into the
    snapshot only once it is whole) read 300 of the 400 rows, exit 0; it is refused naming
    ``train-00002-of-00004.parquet``. A glob that leaves the missing names out on purpose
    (``data/train-0000[01]-*``: a sample) reads what it matches, and so do files named one by one.

    Raises:
        InputError: the first such set, with its missing files (the first three).
    """
    sets: dict[tuple[str, str, str, str], dict[int, str]] = {}
    for h in hits:
        m = _SHARD.match(h.rstrip("/").rsplit("/", 1)[-1])
        if m and int(m["i"]) <= int(m["n"]):
            sets.setdefault((fs.dirname(h), m["pre"], m["n"], m["post"]), {})[int(m["i"])] = m["i"]
    for (folder, pre, n, post), present in sorted(sets.items()):
        width = len(next(iter(present.values())))
        name = f"{pre}-{{:0{width}d}}-of-{n}{post}".format
        if not fnmatch.fnmatchcase(fs.join(folder, name(min(present))), pattern):
            continue  # the names cannot be matched as the glob matched them: no judgement
        # numbered from 0 (datasets, TensorFlow) or from 1 (model-00001-of-00002.safetensors): a set
        # holding its count's number, or without 0, is counted from 1
        first = 1 if int(n) in present or 0 not in present else 0
        missing = [name(i) for i in range(first, first + int(n))
                   if i not in present and fnmatch.fnmatchcase(fs.join(folder, name(i)), pattern)]
        if missing:
            one = len(missing) == 1
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {len(present)} of the {int(n)} files {pre}-N-of-{n}{post} "
                f"in {folder}; it would match the others too, but "
                f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
                f"{'is' if one else 'are'} missing (a download that stopped?), so the dataset would be read short of "
                f"{'it' if one else 'them'}: fetch {'it' if one else 'them'}, or name the files to read one by one",
                path=fs.join(folder, missing[0]))
