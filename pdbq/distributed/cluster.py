"""The Dask plumbing every distributed run shares: a client (in-process cluster, a local process
cluster, an existing scheduler, or the caller's own), and submitting one round of pure tasks with
re-runs when the cluster loses a worker or the data scattered to it.

A round's tasks are pure functions of their inputs (their random streams come from the seed and
the task's place in the run), so a task Dask re-runs elsewhere, or a round submitted again from
the same inputs, gives the same answer as an undisturbed one.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pdbq.errors import InferenceError, OptionError, PdbqError

__all__ = ["dask_module", "open_client", "lost", "run_round", "RoundRun", "RoundCut", "scheduler_address",
           "local_workers", "check_local_partitions", "LOCAL_PARTITIONS_PER_CORE", "wait_futures",
           "stop_flag", "stop_poll", "raise_stop", "pinned", "await_round", "round_or_cut", "check_scheduler"]


def dask_module() -> Any:
    """The `distributed` package, or a `PdbqError` saying how to install it."""
    try:
        import distributed  # noqa: PLC0415 - optional, loaded only for distributed runs
    except ModuleNotFoundError:
        raise PdbqError("distributed inference needs Dask: pip install 'pdbq[distributed]'") from None
    return distributed


_CONNECT_TIMEOUT = 30.0  # seconds to reach a scheduler when the run has no time_limit
# A Dask server speaks first: the 8-byte length of its handshake, a small dict of versions and
# options (hundreds of bytes). Anything claiming far more is not a Dask scheduler: distributed
# itself would try to allocate that many bytes (exabytes for the first bytes of an HTTP reply).
_HANDSHAKE_BYTES = 1 << 20


def check_scheduler(address: str, wait: float) -> None:
    """`InferenceError` naming ``address`` unless a TCP endpoint there answers as a Dask server
    within ``wait`` seconds (reads only its first 8 bytes). Other schemes (``tls://``, ``ws://``,
    ``inproc://``) are left to distributed's own checks."""
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme.lower() != "tcp":
        return
    try:
        from distributed.comm.addressing import parse_host_port  # noqa: PLC0415 - optional dependency

        host, port = parse_host_port(rest if sep else address)
    except (ValueError, TypeError) as exc:
        raise InferenceError(f"option 'scheduler': {address!r} is not a scheduler address such as "
                             f"'tcp://host:8786' ({exc})") from None
    try:
        with socket.create_connection((host, port), timeout=wait) as s:
            s.settimeout(wait)
            head = b""
            while len(head) < 8:
                got = s.recv(8 - len(head))
                if not got:
                    raise InferenceError(f"option 'scheduler': {address!r} closed the connection without the Dask "
                                         "handshake: it is not a Dask scheduler")
                head += got
    except socket.timeout:
        raise InferenceError(f"option 'scheduler': {address!r} did not answer as a Dask scheduler within {wait:g} s "
                             "(a Dask scheduler greets every connection at once)") from None
    except OSError as exc:
        raise InferenceError(f"could not reach the Dask scheduler at {address!r} within {wait:g} s: "
                             f"{exc.strerror or exc}") from None
    (size,) = struct.unpack("Q", head)  # distributed's own frame header
    if size > _HANDSHAKE_BYTES:
        raise InferenceError(f"option 'scheduler': {address!r} is not a Dask scheduler (its first bytes are not a "
                             "Dask handshake)")


def local_workers(partitions: int) -> int:
    """Workers of an in-process cluster for ``partitions`` tasks per round: one per partition up
    to twice the cores (more only queue on the same cores; the answer depends on the partitions
    and the seed, not on how many workers run them)."""
    return max(1, min(partitions, 2 * (os.cpu_count() or 1)))


# Tasks per round on an in-process cluster, per core of this machine. Each task costs the
# coordinator a few milliseconds per round (measured: 1,024 tasks of a 5-mention graph, one round
# 6.5 s on 2 cores), and tasks beyond the cores only queue; this many still lets a run of a
# 64-worker cluster be replayed on a 1-core machine (the answer depends on the partitions).
LOCAL_PARTITIONS_PER_CORE = 64


def check_local_partitions(workers: int) -> None:
    """`OptionError` when ``workers`` tasks per round are more than an in-process cluster of
    this machine runs sensibly (`LOCAL_PARTITIONS_PER_CORE` per core)."""
    cores = os.cpu_count() or 1
    top = LOCAL_PARTITIONS_PER_CORE * cores
    if workers > top:
        raise OptionError(f"option 'workers' must be at most {top:,} on this machine's in-process Dask cluster "
                          f"({LOCAL_PARTITIONS_PER_CORE} per core, {cores} core(s): each is a task per round and "
                          f"the cores run them in turn), got {workers:,}; give scheduler = 'tcp://host:port' to "
                          "run more on a cluster")


def open_client(client: Any, scheduler: str | None, processes: bool, workers: int,
                timeout: float | None = None) -> tuple[Any, Callable[[], None]]:
    """(client, close): the caller's ``client`` (close does nothing), a client of the cluster at
    ``scheduler`` (close disconnects it), or one of a local cluster we start (close stops both).
    An unreachable or malformed scheduler is an `InferenceError` within ``timeout`` seconds
    (default 30)."""
    if client is not None:
        if scheduler is not None or processes:
            raise OptionError(f"{'scheduler' if scheduler is not None else 'processes'} has no effect with a client "
                              "of your own: the run uses that client's cluster")
        return client, lambda: None
    if scheduler is not None and processes:
        raise OptionError("processes has no effect with a scheduler: it starts a local process cluster instead of "
                          "connecting to one")
    dask = dask_module()
    if scheduler is not None:
        wait = _CONNECT_TIMEOUT if timeout is None else max(0.5, timeout)
        check_scheduler(scheduler, wait)
        try:
            own = dask.Client(scheduler, timeout=wait)
        except MemoryError:  # a non-Dask endpoint's bytes read as an enormous message length
            raise InferenceError(f"option 'scheduler': {scheduler!r} is not a Dask scheduler (its handshake "
                                 "claimed more memory than there is)") from None
        except (OSError, TimeoutError) as exc:
            raise InferenceError(f"could not reach the Dask scheduler at {scheduler!r} within {wait:g} s: {exc}") from None
        except (ValueError, TypeError) as exc:
            raise InferenceError(f"option 'scheduler': {scheduler!r} is not a scheduler address such as "
                                 f"'tcp://host:8786' ({exc})") from None
        return own, own.close
    check_local_partitions(workers)
    cluster = dask.LocalCluster(n_workers=local_workers(workers), threads_per_worker=1, processes=processes,
                                dashboard_address=":0", silence_logs=50)
    own = dask.Client(cluster)

    def close() -> None:
        own.close()
        cluster.close()

    return own, close


def scheduler_address(client: Any) -> str:
    """Where the client's scheduler is (``inproc://…`` for an in-process cluster)."""
    try:
        return str(client.scheduler.address)
    except AttributeError:  # a client of an unusual kind: say so rather than fail
        return "unknown"


def lost(exc: BaseException) -> bool:
    """A failure of the cluster (a worker or its data gone), not of the task's own code."""
    dask = dask_module()
    return isinstance(exc, (concurrent.futures.CancelledError, dask.KilledWorker, OSError, TimeoutError))


def stop_flag(name: str) -> Callable[[], bool]:
    """In a task: whether the client raised the stop flag ``name`` (`raise_stop`). A cancelled
    Dask task that already runs is not stopped, so a long task asks this between chunks."""
    event = dask_module().Event(name)
    return event.is_set


def stop_poll(name: str | None) -> Callable[[], None] | None:
    """A ``poll`` for a sampler running in a task: raises once the client raised the stop flag
    ``name`` (None: no flag, no poll)."""
    if name is None:
        return None
    stopped = stop_flag(name)

    def poll() -> None:
        if stopped():
            raise InferenceError("the statement was cancelled: this task stops")

    return poll


def raise_stop(client: Any, name: str) -> None:
    """Raise the stop flag ``name`` for the tasks of a cancelled statement (a cluster that is
    already gone has no task to stop)."""
    try:
        dask_module().Event(name, client=client).set()
    except Exception:  # noqa: BLE001 - best effort: the error being raised is the cancel's
        pass


class RoundCut(InferenceError):
    """The deadline came while a round's tasks were running: they were cancelled and the round
    has no result (the caller answers from its last finished round, or says why it cannot)."""


_WAIT_MAX = 0.05  # seconds between looks at a running round's futures (the deadline, a cancel)


def wait_futures(futures: list, deadline: float | None, poll: Callable[[], None] | None) -> bool:
    """Until every future is done (True) or the ``deadline`` passes (False); ``poll()`` between
    looks (a cancelled statement raises from it). Each look waits on the futures themselves, so
    a finished round is seen at once."""
    if deadline is None and poll is None:
        return True  # gather waits
    dask = dask_module()
    while True:
        if poll is not None:
            poll()
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return all(f.done() for f in futures)
        try:
            dask.wait(futures, timeout=_WAIT_MAX if left is None else min(_WAIT_MAX, left))
            return True
        except TimeoutError:
            pass


class RoundRun(NamedTuple):
    """One gathered round: the tasks' results in submission order, the scattered data's
    futures (new ones when the round had to scatter again), how often the round was submitted
    again, and its wall time from first submit to gather."""

    results: list
    shared: list
    reruns: int
    wall: float


def pinned(preferred: str | None, alive: list[str], i: int) -> dict:
    """``client.submit`` keywords placing task ``i`` on ``preferred`` while that worker is in the
    cluster (``alive``: its sorted addresses), else on the ``i``-th worker round-robin. A
    preference, not a restriction: pinned to a worker that dies, a task would wait for it."""
    w = preferred if preferred in alive else (alive[i % len(alive)] if alive else None)
    return dict(workers=[w], allow_other_workers=True) if w is not None else {}


def await_round(client: Any, futures: list, wait_on: list, deadline: float | None,
                poll: Callable[[], None] | None, what: str) -> None:
    """Wait until ``wait_on`` (the round's results, among its ``futures``) are done. Whatever
    ``poll()`` raises cancels ``futures`` and propagates; at ``deadline`` they are cancelled and
    `RoundCut` raised, naming the round ``what``."""
    try:
        finished = wait_futures(wait_on, deadline, poll)
    except BaseException:
        client.cancel(futures)
        raise
    if not finished:
        client.cancel(futures)
        raise RoundCut(f"{what} was still running at the deadline: its tasks were cancelled")


def round_or_cut(client: Any, stop: str | None, submit: Callable[[], Any]) -> Any:
    """``submit()``'s round, or None when the deadline cut it (`RoundCut`). Anything else raised
    (a cancel) first raises the stop flag ``stop`` so the running tasks stop themselves."""
    try:
        return submit()
    except RoundCut:
        return None
    except BaseException:
        if stop is not None:
            raise_stop(client, stop)
        raise


def run_round(client: Any, fn: Callable, shared: list, scatter: Callable[[], list], tasks: list, key: str,
              retries: int, what: str, placement: list[str | None] | None = None, *, deadline: float | None = None,
              poll: Callable[[], None] | None = None) -> RoundRun:
    """Submit ``fn(*shared, task)`` for every task and gather them.

    One task per worker, round-robin: left to itself Dask may queue two tasks on one
    single-threaded worker and run them one after the other; ``allow_other_workers`` keeps the
    pin a preference, so a task whose worker died runs elsewhere (Dask re-runs it, up to
    ``retries`` times). When the round still fails because the cluster lost a worker or the
    scattered data (``shared``), the data are scattered again (``scatter()``) and the whole round
    is submitted again, at most ``retries`` times; errors of the tasks' own code propagate
    unchanged. ``what`` names the round in the error. ``placement[i]``: the worker task i
    prefers instead (one that holds its data), when it is still in the cluster. At ``deadline``
    (a `time.perf_counter()` instant) the round's futures are cancelled and `RoundCut` raised;
    ``poll()`` is called while waiting (whatever it raises cancels the futures and propagates).
    """
    t0 = time.perf_counter()
    attempt = 0
    while True:
        addresses = sorted(client.scheduler_info()["workers"])
        futures = [
            client.submit(fn, *shared, task, key=f"{key}-t{i}-a{attempt}", retries=retries, pure=False,
                          **pinned(None if placement is None else placement[i], addresses, i))
            for i, task in enumerate(tasks)
        ]
        await_round(client, futures, futures, deadline, poll, what)
        try:
            return RoundRun(client.gather(futures), shared, attempt, time.perf_counter() - t0)
        except Exception as exc:
            if not lost(exc):
                raise
            if attempt == retries:
                raise InferenceError(f"{what} failed {retries + 1} times (the cluster lost workers or data: "
                                     f"{type(exc).__name__}: {exc})") from exc
            client.cancel(futures)
            shared = scatter()
            attempt += 1
