"""The Ray engine: the pipeline's units of work as Ray tasks, on this machine or a cluster.

``[run] engine = "ray"`` (or ``rmlprep run --engine ray``) sends every unit to the unit
function the run hands over (:func:`rmlprep.pipeline.unit.work_unit`) in a Ray task instead
of a local process pool; the engine itself never imports the pipeline. Nothing else changes: the driver plans the units, runs the parity stage, checks done markers
(resume), and writes the manifest, stats and histogram from the tasks' done records; each task
reads its input range and writes ``train-NNNNN.parquet``, its rejects and its done marker
itself, exactly as a pool worker does. So the shards are byte-identical to the local engine's
and a run started with one engine resumes with the other.

**Tasks, not Ray Data ``map_batches``.** A unit is packed as one stream (its last, short row
is the tail rule in :mod:`rmlprep.pipeline.pack`), so a unit must be processed whole by one call.
``map_batches`` cuts a dataset into batches of rows that do not follow unit borders and writes
files named after its own blocks; making each batch one unit descriptor would be these tasks
with a streaming executor added. Ray Data's row-level checkpointing would not survive packing
either; resume stays the done marker per unit.

**The context** (the config, the tokenizer, which pickles as its
:class:`~rmlprep.spec.TokenizerSpec`, and on an object store the run's lease token) is put in the object store once per run and handed to
tasks *nested* in a tuple, so Ray does not resolve it per task; a worker process fetches it
and builds the tokenizer's indexes on its first unit only, then reuses it from a per-process
cache keyed by the run (:data:`_CONTEXTS`).

**Where Ray runs.** ``ray_address`` absent: the run starts a private local Ray with
``num_cpus = workers``, no dashboard, usage stats off, worker output not forwarded (a failed
unit still returns its error or traceback), a unit killed by Ray's memory monitor retried
:data:`OOM_RETRIES` times (Ray's default is without end: the run hung), and shuts it down at the end. ``"auto"`` or
``"ray://host:10001"``: the run connects to that cluster, uses all its CPUs, and only
disconnects at the end. A Ray already initialized in this process (a notebook, a test) is used
as it is and left running.

**A cluster out of reach fails fast.** ``ray.init`` retries an unreachable GCS for more than ten
minutes (printing its connect warnings), so before calling it the engine resolves the address
the way Ray does (``"auto"``: ``RAY_ADDRESS``, else the address the last ``ray start`` wrote) and
opens a TCP connection to the GCS (or Ray Client) port, for at most
:data:`CONNECT_TIMEOUT_S` seconds; a refused or timed-out connection is a one-line
:class:`~rmlprep.errors.ConfigError` (exit 2). Past the probe, Ray's own GCS wait is cut to one
attempt (``RAY_gcs_server_port_wait_time_s=1``, about 35 s at worst, unless the user set it). Every node needs the same rmlprep installed and must see the input
files and the output directory at the same paths (a shared filesystem).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._version import __version__
from ..errors import ConfigError, RmlprepError

__all__ = ["RAY_INSTALL", "CONNECT_TIMEOUT_S", "OOM_RETRIES", "require_ray", "probe_ray_address", "RayEngine"]

RAY_INSTALL = "pip install 'rmlprep[ray]'"
#: seconds the TCP probe of a cluster's GCS (or Ray Client) port may take before the run fails
CONNECT_TIMEOUT_S = 5.0
_START_FIX = "start one with `ray start --head`, or leave ray_address out to start a local Ray"
_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # local Ray: run contexts and done records only
#: times a local Ray retries a unit its memory monitor killed (Ray's own default retries such a
#: task without end, so a run that cannot fit in memory hung instead of failing)
OOM_RETRIES = 2
_QUIET_LOGGERS = ("ray._private.authentication.authentication_token_setup",)

# worker side: run key -> the run's context (config, tokenizer), fetched once per Ray worker process
_CONTEXTS: dict[str, tuple] = {}


def require_ray():
    """Import Ray, or fail before any work with the command that installs it.

    Raises:
        ConfigError: Ray is not importable (names ``pip install 'rmlprep[ray]'``).
    """
    try:
        import ray  # optional dependency (rmlprep[ray])
    except ImportError as e:
        raise ConfigError(f"run.engine = 'ray' needs Ray, which cannot be imported ({e}): {RAY_INSTALL}") from None
    return ray


def _worker_context(key: str, box: tuple) -> tuple:
    context = _CONTEXTS.get(key)
    if context is None:
        import ray  # optional dependency, present on every Ray worker

        context = ray.get(box[0])  # unpickles the spec and builds the indexes: once per process
        _CONTEXTS.clear()  # one run's context at a time
        _CONTEXTS[key] = context
    return context


def _unit_task(fn, unit, key: str, box: tuple, driver_version: str) -> dict[str, Any]:
    """One unit in a Ray task: the same function as a pool worker runs."""
    if driver_version != __version__:
        return {"unit": unit.index, "kind": "ConfigError", "fatal": True,
                "error": f"this Ray worker runs rmlprep {__version__}, the driver {driver_version}; install the "
                         "same rmlprep on every node"}
    return fn(unit, *_worker_context(key, box))


def _bootstrap_address(address: str) -> tuple[str, int]:
    """The ``(host, port)`` that ``ray.init(address)`` would connect to first.

    ``ray://host[:port]`` is Ray Client (port 10001 by default); anything else is resolved by
    Ray's own ``canonicalize_bootstrap_address`` (``"auto"`` → ``RAY_ADDRESS`` or the address
    file of the last ``ray start``; ``localhost`` → this node's address).

    Raises:
        ConfigError: no cluster can be found for ``"auto"``, or the address is not host:port.
    """
    where = f"run.ray_address = {address!r}"
    if address.startswith("ray://"):
        hostport = address[len("ray://"):].split("/", 1)[0]
        host, sep, port = hostport.rpartition(":")
        if not sep:
            host, port = hostport, "10001"
    else:
        try:
            from ray._private.services import canonicalize_bootstrap_address  # Ray's own resolution
        except ImportError:  # pragma: no cover - a Ray without it: parse host:port ourselves
            resolved = (os.environ.get("RAY_ADDRESS") or address) if address == "auto" else address
        else:
            try:
                resolved = canonicalize_bootstrap_address(address)
            except (ConnectionError, ValueError) as e:
                raise ConfigError(f"{where}: no Ray cluster to connect to ({_one_line(e)}); {_START_FIX}") from None
        if not resolved or resolved == "auto":
            raise ConfigError(f"{where}: no Ray cluster to connect to (RAY_ADDRESS is not set and no `ray start` "
                              f"address was found); {_START_FIX}")
        host, sep, port = resolved.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{where}: not a Ray address; give \"auto\", \"host:6379\" or \"ray://host:10001\"")
    return host.strip("[]"), int(port)


def probe_ray_address(address: str, *, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast when nothing answers at a Ray cluster's address (``ray.init`` would retry for minutes).

    Args:
        address: ``run.ray_address`` (``"auto"``, ``"host:port"`` or ``"ray://host:port"``).
        timeout: seconds to wait for the TCP connection.
    Raises:
        ConfigError: the address cannot be resolved, or its port refuses or does not answer
            within ``timeout`` (the message names the address Ray resolved it to).
    """
    host, port = _bootstrap_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__).lower()
        shown = f"{host}:{port}" if f"{host}:{port}" in address else f"{host}:{port}, resolved by Ray"
        raise ConfigError(f"run.ray_address = {address!r}: cannot connect to a Ray cluster ({shown}: "
                          f"{why}{f' within {timeout:g} s' if why == 'no answer' else ''}); {_START_FIX}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def _auth_failure(e: BaseException | None, ray) -> bool:
    """Whether a failed ``ray.init`` comes from token authentication (anywhere in the chain)."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, ray.exceptions.AuthenticationError) or "InvalidAuthToken" in str(e):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


@contextmanager
def _env(**values: str) -> Iterator[None]:
    """Set environment variables for the block (Ray reads some of its settings from them)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class RayEngine:
    """Connect to (or start) Ray, run units as tasks, and stop what the run started.

    Use as a context manager::

        with RayEngine(cfg["run"]["ray_address"], num_cpus=2, log=print) as eng:
            for rec in eng.imap_unordered(work_unit, units, (cfg, tokenizer)):
                ...

    Args:
        address: None → start a private local Ray with ``num_cpus`` CPUs; ``"auto"`` or
            ``"ray://host:port"`` → connect to that cluster (``num_cpus`` is then ignored).
        num_cpus: CPUs of the local Ray (one task per CPU).
    Attributes:
        workers: CPUs Ray can run tasks on (tasks in flight at once).
        startup_seconds: time to start or connect to Ray.
    Raises:
        ConfigError: Ray is missing, or the cluster at ``address`` cannot be reached.
    """

    def __init__(self, address: str | None, *, num_cpus: int, log: Callable[[str], None] = print):
        self.address = address
        self.num_cpus = max(1, num_cpus)
        self.log = log
        self.workers = 0
        self.startup_seconds = 0.0
        self._owns = False
        self._ray = None

    def __enter__(self) -> "RayEngine":
        ray = self._ray = require_ray()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no prompt, no report
        t = time.perf_counter()
        quiet = [(lg, lg.level) for lg in map(logging.getLogger, _QUIET_LOGGERS)]
        for lg, _ in quiet:  # "token authentication is enabled" on every start: the safe default
            lg.setLevel(logging.ERROR)
        try:
            if ray.is_initialized():
                where = "the Ray already running in this process"
            elif self.address is None:
                # a user's RAY_task_oom_retries wins; a cluster keeps its own setting
                system = {} if "RAY_task_oom_retries" in os.environ else {"task_oom_retries": OOM_RETRIES}
                ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False,
                         log_to_driver=False, logging_level=logging.WARNING,
                         object_store_memory=_OBJECT_STORE_BYTES, _system_config=system)
                self._owns = True
                where = "a local Ray started for this run"
            else:
                probe_ray_address(self.address)
                try:
                    with _env(RAY_gcs_server_port_wait_time_s=os.environ.get("RAY_gcs_server_port_wait_time_s", "1")):
                        ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    if _auth_failure(e, ray):
                        fix = ("the cluster wants its token: export RAY_AUTH_MODE=token, with the token in "
                               "~/.ray/auth_token or RAY_AUTH_TOKEN")
                    else:
                        fix = _START_FIX
                    raise ConfigError(f"run.ray_address = {self.address!r}: cannot connect to a Ray cluster "
                                      f"({_one_line(e)}); {fix}") from None
                self._owns = True  # our connection; shutting it down leaves the cluster running
                where = f"the Ray cluster at {self.address}"
        finally:
            for lg, level in quiet:
                lg.setLevel(level)
        self.startup_seconds = time.perf_counter() - t
        res = ray.cluster_resources()
        self.workers = max(1, int(res.get("CPU", 1)))
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        self.log(f"ray: {where}: {self.workers} CPUs on {nodes} node{'s' if nodes != 1 else ''} "
                 f"(ready in {self.startup_seconds:.1f} s)")
        return self

    def __exit__(self, *exc) -> None:
        if self._owns and self._ray is not None:
            self._ray.shutdown()
            self._owns = False

    def imap_unordered(self, fn: Callable[..., dict[str, Any]], units: Sequence[Any],
                       context: tuple) -> Iterator[dict[str, Any]]:
        """Run ``fn(unit, *context)`` on every unit as a Ray task; yield each result (a done
        record, or ``{"unit": i, "error": ...}``) as it completes.

        Raises:
            RmlprepError: a worker process died and Ray's retries ran out (rerun to resume).
            Exception: the original exception of a unit that failed with a bug (not an
                RmlprepError), with the worker's traceback.
        """
        ray = self._ray
        if ray is None:
            raise RuntimeError("RayEngine.imap_unordered outside its `with` block")
        # the context travels once; nested in a tuple so tasks fetch it lazily
        box = (ray.put(context),)
        key = uuid.uuid4().hex
        # a dead worker's unit is retried: units are idempotent (tmp file + rename, marker last)
        task = ray.remote(num_cpus=1, max_retries=2)(_unit_task)
        pending = {task.remote(fn, u, key, box, __version__): u for u in units}
        try:
            while pending:
                # no timeout needed (unlike engines._POLL_SECONDS): Ray's core worker runs Python's signal
                # check while it waits (~1 s), so a SIGINT handled by any thread leaves the wait (tests/test_ray.py)
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    unit = pending.pop(ref)
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        raise e.as_instanceof_cause() from None
                    except ray.exceptions.OutOfMemoryError as e:
                        used = re.search(r"was (\S+ used / \S+ limit)", str(e))
                        raise RmlprepError(
                            f"unit {unit.index} ({unit.describe()}): Ray's memory monitor killed its worker "
                            f"{OOM_RETRIES + 1} times (node memory {used[1] if used else 'over its threshold'}); "
                            f"lower run.workers or free memory, then rerun the same command to resume"
                        ) from None
                    except ray.exceptions.RayError as e:
                        raise RmlprepError(
                            f"unit {unit.index} ({unit.describe()}): Ray could not run it ({type(e).__name__}: "
                            f"{e}); rerun the same command to resume from the units that are done"
                        ) from None
        finally:
            for ref in pending:  # an error or Ctrl-C: queued units are not started
                ray.cancel(ref)
