"""Engines: where the units run. An engine receives the unit function; it never imports the pipeline.

Every engine has the same small interface (:class:`Engine`): used as a context manager, it
runs ``fn(unit, *context)`` for each unit and yields the results as they complete, in any order.
``context`` (the config, the tokenizer, the lease token) is sent to each worker once, not once per unit. The
output never depends on the engine, its number of workers or the order of completion: each
unit's files are a function of (unit, config, tokenizer) alone.

==========  ==========================================================================
engine      where ``fn`` runs
==========  ==========================================================================
local       1 worker: in this process, in the order given. More: a ``multiprocess``
            pool (fork where available), ``context`` passed to each worker's initializer
ray         Ray tasks on a local Ray or a cluster (:mod:`.ray_engine`)
==========  ==========================================================================
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import multiprocess
from multiprocess.context import ForkProcess
from multiprocess.pool import TERMINATE, Pool

from ..errors import RmlprepError
from .ray_engine import RayEngine

__all__ = ["Engine", "UnitFn", "LocalEngine", "open_engine", "cores"]

#: ``fn(unit, *context) -> record``; a module-level function, so it pickles by reference.
UnitFn = Callable[..., dict[str, Any]]


class Engine(Protocol):
    """What the run needs from an engine.

    Attributes:
        workers: units in flight at once (for the manifest and the log line).
        startup_seconds: time it took to get the workers ready (0 for a local pool).
    """

    workers: int
    startup_seconds: float

    def __enter__(self) -> "Engine": ...

    def __exit__(self, *exc) -> None: ...

    def imap_unordered(self, fn: UnitFn, units: Sequence[Any], context: tuple) -> Iterator[dict[str, Any]]:
        """Yield ``fn(unit, *context)`` for every unit as each completes."""


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class LocalEngine:
    """This machine: ``workers == 1`` runs in this process; more use a process pool.

    Args:
        workers: processes (at least 1).
    """

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.startup_seconds = 0.0

    def __enter__(self) -> "LocalEngine":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def imap_unordered(self, fn: UnitFn, units: Sequence[Any], context: tuple) -> Iterator[dict[str, Any]]:
        if self.workers == 1:
            for u in units:
                yield fn(u, *context)
            return
        ctx = multiprocess.get_context("fork" if sys.platform != "win32" else "spawn")
        gc.freeze()  # the parent's objects (the tokenizer's) out of the workers' collections: no copy-on-write by the GC
        try:
            _WORKER["parent"] = os.getpid()  # seen by the forked workers (_die_with_parent)
            with _Pool(self.workers, initializer=_init_worker, initargs=(fn, context), context=ctx) as pool:
                results = pool.imap_unordered(_pool_task, units)
                while True:
                    try:
                        record = results.next(timeout=_POLL_SECONDS)
                    except multiprocess.TimeoutError:
                        _check_workers(pool)  # back in Python: an interrupt that came meanwhile is raised here
                        continue
                    except StopIteration:
                        return
                    yield record
        finally:
            gc.unfreeze()


def _check_workers(pool: "_Pool") -> None:
    """Raise when a worker of ``pool`` has ended while the run waits for units.

    A pool's workers end only when the pool is closed, so one that ended meanwhile was killed
    (``kill -9``, the kernel's OOM killer) or crashed: the pool starts another, but the unit it
    was running is lost and ``imap_unordered`` would wait for its result forever (Python's
    ``multiprocessing.Pool`` does; ``concurrent.futures`` raises ``BrokenProcessPool``): trial22's
    run of 29 units waited 55 minutes with 28 done. ``pool.started`` holds every worker it started
    (a killed one is replaced within the pool's 0.1 s poll, before the run's thread looks).

    Raises:
        RmlprepError: naming the worker's pid and how it ended; done units are kept.
    """
    for w in list(pool.started):
        code = w.exitcode
        if code is None:
            continue
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
            if code == -signal.SIGKILL:
                how += " (kill -9, or the kernel's OOM killer when memory ran out: see dmesg)"
        else:
            how = f"exited with status {code}"
        pool.lost = True
        raise RmlprepError(
            f"a worker process (pid {w.pid}) {how} while the run waited for its unit: the unit is lost to "
            "this run; the units done are kept: rerun the same command to resume (if memory ran out, "
            "lower run.workers or input.unit_bytes)")


#: How long the run's thread waits for a result before it looks at the signals again. Ctrl-C
#: (SIGINT) runs Python's handler, which only sets a flag; the KeyboardInterrupt is raised when
#: the main thread next runs Python code. A wait without a timeout is left by the signal only
#: if it interrupts that very system call: one handled just before the thread blocks (it was
#: preempted between its last check and the futex, as on a loaded machine) or by another of
#: the process's threads left the run waiting for its next unit to end (a test saw no exit
#: within 60 s). A wait of this length, repeated, bounds that to it.
_POLL_SECONDS = 0.1

# worker side of the pool: the unit function and its context, set once per process
_WORKER: dict[str, Any] = {}


def _init_worker(fn: UnitFn, context: tuple) -> None:
    # Ctrl-C in a terminal signals the whole process group: the parent turns it into "interrupted"
    # (exit 130) and its pool's exit terminates the workers, so a worker ignores it rather than
    # printing a KeyboardInterrupt traceback from the middle of its unit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM likewise (`kill` of the group, `docker stop`): the parent says "terminated" (exit
    # 143, rmlprep.cli) and its pool kills the workers (_Worker). A worker killed by the signal
    # itself could die waiting for a task, holding the task queue's lock, and the pool's
    # terminate would wait for that lock forever; one left to a Python handler could miss a
    # signal that comes just before it blocks in that lock, and the pool would wait for it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # SIGHUP likewise: a closed terminal signals its foreground process group (rmlprep.cli_signals:
    # the parent says "hung up", exit 129)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _die_with_parent()
    _keep_freed_memory()
    _WORKER["fn"], _WORKER["context"] = fn, context


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def _keep_freed_memory() -> None:
    """Have this worker reuse the memory its units free instead of giving it back to the system
    and faulting in fresh, zeroed pages for the next unit's buffers: Arrow's buffers from
    glibc's malloc (the system pool, not mimalloc, which returns freed pages), whose heap keeps
    freed memory (``M_TRIM_THRESHOLD`` 1 GB) and serves blocks up to 32 MB
    (``M_MMAP_THRESHOLD``; glibc itself slides it up to 32 MB at most, from 128 kB) from it
    rather than from a new mapping each. A unit's ids, framing and Parquet pages are tens of MB;
    zeroing them anew for every unit (2 MB transparent huge pages where numpy asks for them) was
    a third of the workers' CPU samples in ``perf``. The worker keeps its peak heap until it
    ends (the peak RSS is not higher: 195-200 MB against 215 MB for the main job). ``rmlprep
    run`` of the 30 MB main job, 8 paired runs: user + system 0.88x, the units' CPU 1.39 -> 1.13
    s, system 0.57 -> 0.32 s, huge-page faults 290-400 -> 110-180 per job, shards identical; how
    much it saves depends on how many huge pages the kernel hands out (6 pairs run beside test
    files: no difference); bench/README.md, seventh sitting. A worker only: the settings are
    process-wide, and the run's own process may be a library user's. Elsewhere than glibc: a
    no-op for malloc."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return
    if mallopt(_M_MMAP_THRESHOLD, 32 << 20) and mallopt(_M_TRIM_THRESHOLD, 1 << 30):
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def _die_with_parent() -> None:
    """On Linux, have the kernel SIGKILL this worker when the run's process dies (prctl
    PR_SET_PDEATHSIG): a run killed with SIGKILL (the OOM killer, ``kill -9``) left its workers
    finishing their units and holding the output folder's lock (inherited with the fork), so a
    rerun was refused naming a pid that no longer existed. A parent already gone before the
    call is caught by its pid. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    parent = _WORKER.get("parent")
    if parent is not None and os.getppid() != parent:
        os._exit(1)


class _Worker(ForkProcess):
    """A pool worker that its pool's terminate kills (SIGKILL: it ignores SIGINT, SIGTERM and SIGHUP);
    a killed worker's temporaries are removed by the run (:meth:`.output.OutputFolder.remove_temporaries`)."""

    def terminate(self) -> None:
        self.kill()


class _Pool(Pool):
    """multiprocess's pool, of :class:`_Worker` processes where workers are forked; ``started``
    holds every worker it has started (the pool's own list drops the ones it replaces)."""

    def __init__(self, *args, **kwds):
        self.started: list[Any] = []
        self.lost = False  # set by _check_workers: a worker ended while the run waited
        super().__init__(*args, **kwds)

    def terminate(self) -> None:
        """Pool.terminate, after a lost worker first: the pool's terminate takes the task queue's
        read lock, which a worker holds while it waits for a task (the one started in place of
        the killed one does, forever: tests/test_cli.py's killed-worker test waited 45 s there).
        So the worker handler is stopped (no worker started in place of those killed next),
        every worker is killed and joined, and the lock a killed worker held is released."""
        if self.lost:
            self._worker_handler._state = TERMINATE
            self._change_notifier.put(None)
            self._worker_handler.join()
            for w in self.started:
                if w.exitcode is None:
                    w.kill()
                w.join()
            rlock = self._inqueue._rlock
            rlock.acquire(block=False)  # taken now, or held by a worker now dead: free either way
            rlock.release()
        super().terminate()

    def Process(self, ctx, *args, **kwds):  # noqa: N802 - multiprocess's name; called bound, as self.Process(ctx, ...)
        w = _Worker(*args, **kwds) if ctx.get_start_method() == "fork" else ctx.Process(*args, **kwds)
        self.started.append(w)
        return w


def _pool_task(unit: Any) -> dict[str, Any]:
    return _WORKER["fn"](unit, *_WORKER["context"])


def open_engine(name: str, *, workers: int, ray_address: str | None = None,
                log: Callable[[str], None] = print) -> Engine:
    """The engine ``run.engine`` names (``"local"`` or ``"ray"``), not yet entered.

    Raises:
        ConfigError: an unknown engine; Ray missing (:func:`.ray_engine.require_ray`).
    """
    if name == "ray":
        return RayEngine(ray_address, num_cpus=workers, log=log)
    return LocalEngine(workers)
