"""Globs that would read a dataset wrong: part of a numbered shard set
(``train-00002-of-00004.parquet`` missing, :func:`check_shard_sets`), or a ``datasets`` cache
folder's split files together with its ``.map()`` / ``.filter()`` results (:func:`check_cache_files`),
or two revisions of one dataset in the Hub's cache (:func:`check_hub_revisions`)."""

from __future__ import annotations

import fnmatch
import re

from .. import fs
from ..errors import InputError

__all__ = ["check_shard_sets", "check_cache_files", "check_hub_revisions"]

#: ``<prefix>-<index>-of-<count><rest>``: the names ``datasets`` (``push_to_hub``, its cache:
#: ``{split}-{index:05d}-of-{num_shards:05d}``) and TensorFlow give the shards of one set.
#: a ``datasets`` cache file of a ``.map()`` / ``.filter()`` result: ``cache-<16 hex digits>.arrow``
_CACHE = re.compile(r"^cache-[0-9a-f]{16}\.arrow$")
#: a file of the Hub's cache: ``.../datasets--<org>--<name>/snapshots/<revision>/<path>``
_HUB = re.compile(r"^(?P<repo>.*/(?:datasets|models|spaces)--[^/]+)/snapshots/(?P<rev>[^/]+)/")
_SHARD = re.compile(r"^(?P<pre>.+)-(?P<i>\d{1,6})-of-(?P<n>\d{1,6})(?P<post>(?:[^0-9].*)?)$")
#: a shard's own fingerprint after its count: ``datasets`` 2.x ``push_to_hub`` named the shards
#: ``{split}-{index:05d}-of-{num_shards:05d}-{shard._fingerprint}.parquet`` (16 hex digits, one
#: per shard), as many datasets on the Hub still are
_FINGERPRINT = re.compile(r"^-[0-9a-f]{16}(?=\.)")


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
    sets: dict[tuple[str, str, str, str], dict[int, tuple[str, str]]] = {}
    for h in hits:
        m = _SHARD.match(h.rstrip("/").rsplit("/", 1)[-1])
        if m and int(m["i"]) <= int(m["n"]):
            key = (fs.dirname(h), m["pre"], m["n"], _FINGERPRINT.sub("-*", m["post"]))
            sets.setdefault(key, {})[int(m["i"])] = (m["i"], m["post"])
    for (folder, pre, n, post), present in sorted(sets.items()):
        digits, real = next(iter(present.values()))  # a fingerprinted set's missing files: one's fingerprint
        name = f"{pre}-{{:0{len(digits)}d}}-of-{n}{post}".format
        matched = f"{pre}-{{:0{len(digits)}d}}-of-{n}{real}".format
        if not fnmatch.fnmatchcase(fs.join(folder, matched(min(present))), pattern):
            continue  # the names cannot be matched as the glob matched them: no judgement
        # numbered from 0 (datasets, TensorFlow) or from 1 (model-00001-of-00002.safetensors): a set
        # holding its count's number, or without 0, is counted from 1
        first = 1 if int(n) in present or 0 not in present else 0
        missing = [name(i) for i in range(first, first + int(n))
                   if i not in present and fnmatch.fnmatchcase(fs.join(folder, matched(i)), pattern)]
        if missing:
            one = len(missing) == 1
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {len(present)} of the {int(n)} files {pre}-N-of-{n}{post} "
                f"in {folder}; it would match the others too, but "
                f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
                f"{'is' if one else 'are'} missing (a download that stopped?), so the dataset would be read short of "
                f"{'it' if one else 'them'}: fetch {'it' if one else 'them'}, or name the files to read one by one",
                path=fs.join(folder, missing[0]))


def check_cache_files(pattern: str, hits: list[str]) -> None:
    """Refuse a glob matching, in a ``datasets`` cache folder (it holds ``dataset_info.json``),
    both a split's Arrow file and a ``cache-<hash>.arrow`` file: the latter is a ``.map()`` or
    ``.filter()`` result written beside the split, its rows the split's again, transformed.

    Worked example: ``load_dataset("json", data_files=..., cache_dir=C)`` of 100 rows, then
    ``.map(lambda r: {"n": len(r["text"])})``: ``C/**/*.arrow`` matched ``json-train.arrow`` and
    ``cache-164bd45cd34cc0c4.arrow`` and read 200 rows, every text twice (exit 0). A glob matching
    only cache files (``C/**/cache-*.arrow``) reads them, and so do files named one by one.

    Raises:
        InputError: the first such folder, with its cache files (the first three).
    """
    folders: dict[str, tuple[list[str], list[str]]] = {}
    for h in hits:
        name = h.rstrip("/").rsplit("/", 1)[-1]
        if name.endswith(".arrow"):
            folders.setdefault(fs.dirname(h), ([], []))[bool(_CACHE.match(name))].append(name)
    for folder, (split, cache) in sorted(folders.items()):
        if split and cache and fs.isfile(fs.join(folder, "dataset_info.json")):
            raise InputError(
                f"input.paths: the glob {pattern!r} matches, in the datasets cache folder {folder}, its file "
                f"{split[0]} and {len(cache)} cache file{'s' if len(cache) > 1 else ''} of .map() or .filter() results "
                f"({', '.join(sorted(cache)[:3])}{' ...' if len(cache) > 3 else ''}), which hold its rows again, "
                "transformed: name the files to read (or save the dataset with save_to_disk and give that folder)",
                path=fs.join(folder, sorted(cache)[0]))


def check_hub_revisions(pattern: str, hits: list[str]) -> None:
    """Refuse a glob matching files of two revisions of one repository in the Hub's cache
    (``huggingface_hub`` keeps each revision fetched as ``snapshots/<commit>/``, its unchanged
    files links to one blob): ``.../datasets--org--name/snapshots/*/data/*.parquet`` read an
    updated dataset's changed shards in both versions, their rows twice (a file both revisions
    link to is one file, read once).

    Raises:
        InputError: the repository and its revisions (the first three).
    """
    revs: dict[str, set[str]] = {}
    for h in hits:
        m = _HUB.match(h)
        if m:
            revs.setdefault(m["repo"], set()).add(m["rev"])
    for repo, seen in sorted(revs.items()):
        if len(seen) > 1:
            names = sorted(seen)
            raise InputError(
                f"input.paths: the glob {pattern!r} matches files of {len(names)} revisions of {repo} in the Hub's "
                f"cache (snapshots/{', '.join(names[:3])}{' ...' if len(names) > 3 else ''}), which would read a "
                "changed file in each version: name one revision's folder in the glob", path=repo)
