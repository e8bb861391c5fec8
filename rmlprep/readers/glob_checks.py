"""Globs that would read a dataset wrong: part of a numbered shard set
(``train-00002-of-00004.parquet`` missing, :func:`check_shard_sets`), or a ``datasets`` cache
folder's split files together with its ``.map()`` / ``.filter()`` results (:func:`check_cache_files`),
or two revisions of one dataset in the Hub's cache (:func:`check_hub_revisions`), or the output of a
Spark or Hadoop job that never committed (:func:`check_spark_output`), or the base files of an Apache
Hudi table (:func:`check_hudi_tables`), or the files of another rmlprep run's output folder
(:func:`check_rmlprep_output`), or files of a train split with an evaluation split's
(:func:`check_split_mix`)."""

from __future__ import annotations

import fnmatch
import glob as _glob
import re

from collections.abc import Callable

from .. import fs
from ..errors import InputError

__all__ = ["check_shard_sets", "check_cache_files", "check_hub_revisions", "check_spark_output", "check_hudi_tables",
           "check_rmlprep_output", "check_split_mix"]

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
#: a Hadoop output committer's part file: ``part-00000`` (Spark RDDs), ``part-r-00000`` /
#: ``part-m-00000`` (MapReduce), ``part-00000-<job uuid>-c000.snappy.parquet`` (Spark SQL)
_PART = re.compile(r"^part-(?:[rm]-)?\d{5}")
#: a Spark SQL part file, named by its job's UUID: no other writer names files so
_SPARK_PART = re.compile(r"^part-\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: an Apache Hudi base file: ``<file id>_<write token>_<instant time>.parquet`` (``FSUtils.makeBaseFileName``;
#: the file id a UUID and ``-<n>``, the write token ``<task partition>-<stage>-<attempt>``, the instant
#: time ``yyyyMMddHHmmss[SSS]``), e.g. ``97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_0-119-166_20240418172804498.parquet``
_HUDI_BASE = re.compile(r"^(?P<group>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}-\d+)_\d+-\d+-\d+_(?P<instant>\d{14,17})"
                        r"\.parquet$")
#: a name rmlprep writes into its output folder (shards, done markers, rejects, reports): ``shards.py``
_RMLPREP_NAME = re.compile(r"^(?:train-\d{5,}\.parquet|shard-\d{5,}\..+|rejects-\d{5,}\.jsonl|README\.md|manifest\.json"
                           r"|stats\.json)$")
#: a Delta Lake table's random file prefix folder: ``delta.randomizeFilePrefixes`` (and column mapping on a
#: partitioned table) writes each file under ``<table>/<delta.randomPrefixLength alphanumerics, 2 by default>/``
#: instead of its partition folder (``DelayedCommitProtocol.newTaskTempFile``)
_DELTA_PREFIX = re.compile(r"^[A-Za-z0-9]{1,8}$")
#: a file or folder name that names a split, as ``datasets`` tells splits when it loads a folder or a Hub
#: repository (``datasets.data_files``: SPLIT_KEYWORDS, and NON_WORDS_CHARS around the keyword: ``train-00000-of-00002``,
#: ``dev.jsonl``, ``data/test/``); Source: datasets 5.2.0, data_files.py
_SPLIT_NAME = {split: re.compile(rf"(?:^|[-._ 0-9])(?:{'|'.join(words)})(?:$|[-._ 0-9])", re.IGNORECASE)
               for split, words in (("train", ("train", "training")),
                                    ("validation", ("validation", "valid", "dev", "val")),
                                    ("test", ("test", "testing", "eval", "evaluation")))}
#: a partition folder of ``partitionBy`` (``year=2024``): the job's markers are above it
_PARTITION = re.compile(r"^[^=/]+=[^/]*$")


def _escape(path: str) -> str:
    """``path`` with glob characters escaped (a local path; a URI's are left as they are)."""
    return path if fs.is_remote(path) else _glob.escape(path)


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


def check_spark_output(pattern: str, hits: list[str], log: Callable[[str], None] | None = None) -> None:
    """Refuse a glob's part files of a Spark or Hadoop job that has not committed, and warn of
    Spark's without its ``_SUCCESS``; refuse a glob's Parquet files of a Delta Lake table.

    Hadoop's ``FileOutputCommitter`` (Spark's default) writes each task's files under
    ``<out>/_temporary/`` and moves them into ``<out>`` when the task (algorithm 2) or the job
    (algorithm 1) commits; the job's commit removes ``_temporary/`` and writes an empty
    ``_SUCCESS``. A folder still holding ``_temporary/`` is a job running or killed (an abort
    removes it): the parts beside it are some of the job's, or none, and the files under it are
    task attempts', partial or twice over. Worked example: three Spark parts of 10 rows beside a
    ``_temporary/0/`` read 30 rows, exit 0. On a local disk Hadoop writes a ``.<name>.crc``
    beside each file, so a folder of parts with their ``.crc`` and no ``_SUCCESS`` is one written
    in place by a job that never committed (a failed algorithm-2 job leaves its committed tasks'
    parts). Elsewhere (an object store, a copy) a missing ``_SUCCESS`` proves nothing (a copy may
    leave ``_``-names out; ``mapreduce.fileoutputcommitter.marksuccessfuljobs = false``), so Spark
    SQL's parts (``part-00000-<job uuid>-c000...``) without one are warned of in ``log``. A
    ``partitionBy`` folder (``year=2024/``) has the job's markers in the folder above. Many
    folders of parts have no ``_SUCCESS`` at all (the Hub's Parquet, ``datasets``, Dask): other
    names are not judged.

    A Delta Lake table's folder (or the one above its partition folders, or above the random
    prefix folder ``delta.randomizeFilePrefixes`` writes a Spark part into) holds ``_delta_log/``,
    whose JSON commits add and remove files: the Parquet files of versions an overwrite, a delete,
    a merge or ``OPTIMIZE`` replaced stay in the folder until ``VACUUM``, so a glob over it reads
    rows twice, or rows the table deleted. Worked example: a table of 10 rows overwritten by 10
    others (commit 1 removes the first file, which stays): ``table/*.parquet`` read 20 rows.

    A Spark Structured Streaming file sink writes its parts in place (with their ``.crc`` on a
    local disk) and no ``_SUCCESS``: its ``_spark_metadata/`` log lists the files of each committed
    batch, and ``spark.read`` of the folder reads only those (``MetadataLogFileIndex``); a batch
    that failed or was retried leaves files the log does not list. A glob over it is refused as a
    Delta table's (it was refused as a job that never committed, whose ``touch _SUCCESS`` fix
    would then read the uncommitted files; on an object store only warned of).

    An Apache Iceberg table keeps its data files under ``<table>/data/`` (partition folders below;
    with ``write.object-storage.enabled``, hash folders first: ``data/<hash>/<partition>/``, the
    layout of tables on S3) and chooses them in ``<table>/metadata/`` (``v<N>.metadata.json``, ``version-hint.text`` of a
    Hadoop catalog): the same holds, and is refused the same way.

    Raises:
        InputError: a matched file under a ``_temporary`` folder; part files in a folder (or
            above its partition folders) holding ``_temporary/``; parts with their ``.crc`` and
            no ``_SUCCESS``; Parquet or part files of a folder holding ``_delta_log/`` or
            ``_spark_metadata/``, or Parquet files of an
            Iceberg table's ``data/``.
    """
    folders: dict[str, list[str]] = {}
    for h in hits:
        segs = h.rstrip("/").split("/")
        if "_temporary" in segs[:-1]:
            root = "/".join(segs[: segs.index("_temporary")])
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {h}, a task attempt's file under the _temporary folder of "
                f"a Spark or Hadoop job's output {root}, which the job had not committed (running, or killed): its "
                "files may be partial or twice over; read the folder's committed parts once the job has written "
                f"its _SUCCESS, e.g. {fs.join(root, 'part-*')}", path=h)
        if _PART.match(segs[-1]) or segs[-1].endswith(".parquet"):
            folders.setdefault(fs.dirname(h), []).append(segs[-1])
    for folder, names in sorted(folders.items()):
        root = folder
        while _PARTITION.match(root.rstrip("/").rsplit("/", 1)[-1]) and fs.dirname(root) != root:
            root = fs.dirname(root)
        delta = fs.isdir(fs.join(root, "_delta_log"))
        if (not delta and root == folder and _DELTA_PREFIX.match(root.rstrip("/").rsplit("/", 1)[-1])
                and any(_SPARK_PART.match(n) for n in names) and fs.isdir(fs.join(fs.dirname(root), "_delta_log"))):
            root, delta = fs.dirname(root), True  # a random prefix folder (delta.randomizeFilePrefixes)
        prefixed = delta and not _PARTITION.match(folder.rsplit("/", 1)[-1])
        what = "random file prefix folder" if prefixed else "partition folder"
        where = f"{root} (above its {what} {folder})" if root != folder else root
        if delta:
            raise _log_says(pattern, names, "Parquet file", f"the Delta Lake table {where}", fs.join(root, "_delta_log"),
                            "which files are the table (those an overwrite, delete, merge or OPTIMIZE replaced stay "
                            "until VACUUM)", "deleted", "export the table's current version, e.g. "
                            "deltalake.DeltaTable(PATH).to_pyarrow_table() written to Parquet")
        if fs.isdir(fs.join(root, "_spark_metadata")):
            raise _log_says(pattern, names, "file", f"the output folder {where} of a Spark Structured Streaming file "
                            "sink", fs.join(root, "_spark_metadata"), "which files the committed batches wrote (a "
                            "failed or retried batch leaves files it lists nowhere, and the sink writes no _SUCCESS)",
                            "uncommitted", "export them with Spark, which reads the log "
                            "(spark.read.parquet(PATH).write.parquet(OUT))")
        segs = root.rstrip("/").split("/")  # the table's data/, at or above the partition and hash folders
        table = "/".join(segs[: len(segs) - 1 - segs[::-1].index("data")]) if "data" in segs else ""
        if (table and fs.isdir(fs.join(table, "metadata"))
                and (fs.exists(fs.join(table, "metadata", "version-hint.text"))
                     or fs.glob(fs.join(_escape(table), "metadata", "*.metadata.json")))):
            raise _log_says(pattern, names, "Parquet file", f"the Apache Iceberg table {table}",
                            fs.join(table, "metadata"), "which data files are the table (those an overwrite or delete "
                            "replaced stay until their snapshots expire)", "deleted", "export the table's current "
                            "snapshot (e.g. pyiceberg: table.scan().to_arrow(), written to Parquet)")
        parts = [n for n in names if _PART.match(n)]
        if not parts:
            continue
        if fs.isdir(fs.join(root, "_temporary")):
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {len(parts)} part file{'s' if len(parts) > 1 else ''} of "
                f"the output folder {where}, which holds _temporary/: the Spark or Hadoop job writing it has not "
                "committed (still running, or killed mid-write), so parts may be missing; rerun the job, or wait for "
                "its _SUCCESS", path=fs.join(root, "_temporary"))
        if fs.exists(fs.join(root, "_SUCCESS")):
            continue
        if fs.exists(fs.join(folder, f".{parts[0]}.crc")):
            raise InputError(
                f"input.paths: the glob {pattern!r} matches part files of {where}, written in place by a Spark or "
                f"Hadoop job (each beside its .crc, as {parts[0]}) that never committed: it has no _SUCCESS, which "
                "the job writes last, so parts may be missing (a failed job leaves the tasks it committed); rerun "
                "the job, or, if it did finish and the marker was removed, create it: touch "
                f"{fs.join(root, '_SUCCESS')}", path=fs.join(root, "_SUCCESS"))
        if log is not None and any(_SPARK_PART.match(p) for p in parts):
            log(f"warning: input: {where} holds Spark's part files ({parts[0]} ...) but no _SUCCESS, which Spark "
                "writes when the job commits: if the job failed, parts are missing; a copy that left the marker "
                "out is fine")


def _log_says(pattern: str, names: list[str], noun: str, whose: str, log_dir: str, says: str, other: str,
              export: str) -> InputError:
    """The refusal of a glob over the files of a table or sink whose log (``log_dir``) chooses
    them (:func:`check_spark_output`): what it matched, whose they are, what the log says, and
    the export to read instead."""
    n = len(names)
    return InputError(f"input.paths: the glob {pattern!r} matches {n} {noun}{'s' if n > 1 else ''} of {whose}: its "
                      f"{log_dir.rstrip('/').rsplit('/', 1)[-1]}/ says {says}, so a glob reads rows twice or {other}; "
                      f"{export}, and read that", path=log_dir)


def check_hudi_tables(pattern: str, hits: list[str]) -> None:
    """Refuse a glob's base files of an Apache Hudi table.

    A Hudi table keeps its timeline in ``<table>/.hoodie/`` and writes each partition's files
    (partition folders ``2024/01/01/`` or ``city=sf/``, each with its ``.hoodie_partition_metadata``)
    as file groups: a copy-on-write update writes a new version of a group's base file
    (``<file id>_<write token>_<instant>.parquet``) beside the old one, which stays until the cleaner
    removes it (by default after 10 commits); a merge-on-read table keeps updates and deletes in
    hidden log files (``.<file id>_<instant>.log.1_...``) that a glob does not read. Which versions
    are the table only the timeline says, so a glob reads rows twice or stale. Worked example:
    hudi-rs's test table ``sample_table/cow/v6_simplekeygen_nonhivestyle`` (4 rows, the second
    commit updating partition ``10``'s file group): ``table/*/*.parquet`` read 6 rows, Alice and
    Carol twice (exit 0). Base files without ``.hoodie/`` above them (copied out) are read, unless
    their names show one file group in two versions.

    Raises:
        InputError: the first table (or file group) found, naming it and the export to read instead.
    """
    folders: dict[str, list[str]] = {}
    for h in hits:
        name = h.rstrip("/").rsplit("/", 1)[-1]
        if _HUDI_BASE.match(name):
            folders.setdefault(fs.dirname(h), []).append(name)
    for folder, names in sorted(folders.items()):
        if root := _hudi_root(folder):
            under = root.rstrip("/") + "/"
            inside = [n for f, v in folders.items() if f == root or f.startswith(under) for n in v]
            raise _log_says(pattern, inside, "Parquet file", f"the Apache Hudi table {root}", fs.join(root, ".hoodie"),
                            "which file versions are the table (an update writes a new version of a file group's "
                            "base file beside the old one, which stays until the cleaner removes it; a merge-on-read "
                            "table keeps updates in log files a glob does not read)", "stale",
                            "export the table's latest snapshot (e.g. spark.read.format(\"hudi\").load(PATH), or "
                            "the hudi package's HudiTableBuilder.from_base_uri(PATH)) written to Parquet")
        groups: dict[str, list[str]] = {}
        for n in names:
            groups.setdefault(_HUDI_BASE.match(n)["group"], []).append(n)
        if twice := next((g for g, v in sorted(groups.items()) if len(v) > 1), None):
            versions = sorted(groups[twice])
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {len(versions)} versions of the Apache Hudi file group "
                f"{twice} in {folder} ({', '.join(versions[:3])}{' ...' if len(versions) > 3 else ''}): each holds "
                "the group's rows as of one commit, so a glob reads them twice over, and no .hoodie/ timeline above "
                "the folder says which is current; export the table's latest snapshot from the table itself, or "
                "name only the newest file of each group (the largest instant time, after the last _)",
                path=fs.join(folder, versions[0]))


def _hudi_root(folder: str) -> str:
    """The nearest folder at or above ``folder`` holding Hudi's ``.hoodie/`` timeline, or ``""``.
    Asked only of folders holding Hudi base files (:func:`check_hudi_tables`): one question per
    level up, on an object store a request each."""
    root = folder or "."
    while not fs.isdir(fs.join(root, ".hoodie")):
        parent = fs.dirname(root) or "."
        if parent == root:
            return ""
        root = parent
    return root


def check_rmlprep_output(pattern: str, hits: list[str]) -> None:
    """Refuse a glob matching files of an rmlprep output folder (one holding
    ``.rmlprep.folder.json`` or, written by an older rmlprep, ``.rmlprep.lock``) other than this
    run's own, which is never input: a corpus folder holding an earlier run's output
    (``data/tokenized/``) under ``data/**/*.jsonl`` read its rejects files as rows (each a
    ``missing_field`` reject, exit 0 with a warning), and ``data/**/*`` refused its ``README.md``
    as plain text, with the ``jq`` line to make JSON Lines of it. Asked only of folders whose
    matched names are rmlprep's (``train-00000.parquet``, ``rejects/rejects-00000.jsonl``,
    ``README.md``, ...): one or two questions each.

    Raises:
        InputError: the first such folder, with what the glob matched there.
    """
    folders: dict[str, list[str]] = {}
    for h in hits:
        folder, _, name = h.rstrip("/").rpartition("/")
        if _RMLPREP_NAME.match(name):
            if name.startswith("rejects-") and folder.rpartition("/")[2] == "rejects":
                folder = folder.rpartition("/")[0]
            folders.setdefault(folder, []).append(h)
    for folder, matched in sorted(folders.items()):
        if fs.exists(fs.join(folder, ".rmlprep.folder.json")) or fs.exists(fs.join(folder, ".rmlprep.lock")):
            n = len(matched)
            raise InputError(
                f"input.paths: the glob {pattern!r} matches {n} file{'s' if n > 1 else ''} of {folder}, the output "
                f"folder of another rmlprep run ({matched[0].rpartition('/')[2]}{' ...' if n > 1 else ''}): its shards, "
                "rejects and reports are not corpus files; narrow the glob to the corpus (its suffix or folder), or "
                "move that output out of the input folder", path=folder)


def _split_of(rel: str) -> str | None:
    """The split ``datasets`` would put a file in, by its name, else its folders' (nearest
    first), relative to the glob's fixed folder; None when none names one."""
    segs = rel.split("/")
    for seg in [segs[-1], *reversed(segs[:-1])]:
        found = [split for split, rx in _SPLIT_NAME.items() if rx.search(seg)]
        if len(found) == 1:
            return found[0]
    return None


def check_split_mix(pattern: str, hits: list[str]) -> None:
    """Refuse one glob matching files of the train split and of an evaluation split (validation
    or test), as ``datasets`` names splits by file and folder names (:data:`_SPLIT_NAME`).

    A Hub dataset's folder holds each split's files (``data/train-00000-of-00002.parquet``,
    ``data/test-00000-of-00001.parquet``, ``validation/...``); ``load_dataset`` reads them as
    separate splits, a glob as one dataset. Worked example: ``data/*.parquet`` over 2 train, 1
    test and 1 validation shard of 5 rows each read 20 rows into the shards, the test and
    validation rows trained on (exit 0). Giving each split as its own entry of ``input.paths``
    (``["data/train-*", "data/test-*"]``) says every split is meant, and reads; names above the
    glob's first wildcard are not judged (``runs/training/*.jsonl``).

    Raises:
        InputError: the two splits, with a file of each.
    """
    segs = pattern.split("/")
    fixed = next((i for i, seg in enumerate(segs) if any(c in seg for c in "*?[")), len(segs))
    base = "/".join(segs[:fixed]).rstrip("/") + "/"
    found: dict[str, str] = {}
    for h in hits:
        rel = h[len(base):] if h.startswith(base) else h.rstrip("/").rsplit("/", 1)[-1]
        if (split := _split_of(rel)) is not None:
            found.setdefault(split, h)
    other = next((s for s in ("test", "validation") if s in found), None)
    if "train" in found and other is not None:
        raise InputError(
            f"input.paths: the glob {pattern!r} matches files of the train split and of the {other} split "
            f"({found['train']}, {found[other]}), as datasets tells splits by file and folder names: read as one "
            f"dataset, the {other} rows would be trained on; narrow the glob to the train files, or, if every split "
            "is meant, give each as its own entry of input.paths", path=found[other])
