"""``pdbq warm-up``: compile every pdbq kernel for this machine into numba's on-disk cache ahead
of the first query, in parallel processes, with a progress report on stderr.

pdbq's numba kernels are compiled on first use and cached (next to the installed package, or
under ``NUMBA_CACHE_DIR``); a later process loads them in about a second. A fresh install pays
the compilation once, on its first query of each kind; this command pays it up front, for all of
them at once, using several cores. Each task runs in a process of its own and writes the cache;
a task whose kernels build on another's (the mixing moves reuse the Gibbs kernels) starts once
that one is done, so it loads them from the cache instead of compiling them twice.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from pdbq.progress import Progress, ProgressBar

__all__ = ["TASKS", "main", "build_parser"]

# task -> (what it prepares, the tasks it waits for)
TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "core": ("graph, Gibbs sampling, query-aware selection and exact inference", ()),
    "dedupe": ("entity resolution (pdbq dedupe)", ()),
    "anneal": ("annealed MAP (USING ANNEAL)", ("core",)),
    "moves": ("AUTO's mixing moves", ("core",)),
    "wide": ("variables whose values do not fit a byte", ("core",)),
    # its kernels are the int32 signatures of the moves': it needs wide's chain kernels cached, not
    # the moves' uint8 ones, so it runs beside "moves" instead of after it (the longest path)
    "wide-moves": ("mixing moves over variables whose values do not fit a byte", ("wide",)),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pdbq warm-up",
        description="Compile pdbq's kernels for this machine into numba's cache now, so that no first query "
        "waits for them (a fresh install: a minute or more of compilation; afterwards about a second to load).",
    )
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="processes compiling at once (default: the CPUs this process may use)")
    p.add_argument("--only", metavar="TASK,...",
                   help=f"warm only these (with what they build on): {', '.join(TASKS)}")
    return p


def _run(task: str) -> tuple[str, float, int]:
    """In a worker process: warm ``task``; (task, seconds, kernel signatures compiled)."""
    t0 = time.perf_counter()
    if task == "dedupe":
        from pdbq.answers.warmup import _misses  # noqa: PLC0415
        from pdbq.linkage.warmup import warm_up_dedupe  # noqa: PLC0415

        from pdbq.progress import CompileNotice  # noqa: PLC0415

        before = _misses()
        with warnings.catch_warnings():  # this command's own lines say what compiles, not a Python warning
            warnings.simplefilter("ignore", CompileNotice)
            warm_up_dedupe()
        return task, time.perf_counter() - t0, _misses() - before
    from pdbq.answers.warmup import warm_up  # noqa: PLC0415

    w = warm_up(task)
    return task, time.perf_counter() - t0, 0 if w is None else w.compiled


def _closure(names: list[str]) -> list[str]:
    """The tasks named and those they wait for, in `TASKS` order."""
    want: set[str] = set()
    todo = list(names)
    while todo:
        t = todo.pop()
        if t not in want:
            want.add(t)
            todo.extend(TASKS[t][1])
    return [t for t in TASKS if t in want]


def _cache_dir() -> str:
    return os.environ.get("NUMBA_CACHE_DIR") or "next to pdbq's modules (__pycache__)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = list(TASKS)
    if args.only:
        names = [t.strip() for t in args.only.split(",") if t.strip()]
        bad = [t for t in names if t not in TASKS]
        if bad:
            sys.stderr.write(f"error: --only {', '.join(bad)}: not a warm-up task; the tasks are {', '.join(TASKS)}\n")
            return 2
    if args.jobs is not None and args.jobs < 1:
        sys.stderr.write(f"error: --jobs {args.jobs}: give 1 or more\n")
        return 2
    tasks = _closure(names)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = max(1, min(args.jobs or cpus, len(tasks)))
    err = sys.stderr
    err.write(f"pdbq warm-up: compiling pdbq's kernels for this machine ({len(tasks)} tasks, {jobs} processes; "
              f"cache: {_cache_dir()}); a fresh install takes a minute or more, once\n")
    err.flush()
    bar = ProgressBar(err, delay=0.0)
    # fork where there is one: this process has imported nothing heavy, and a child then
    # starts without importing pdbq again
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    t0 = time.perf_counter()
    done: list[str] = []
    failed = 0
    running: dict[Future, str] = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        def submit_ready() -> None:
            started = set(running.values()) | set(done)
            for t in tasks:
                if t not in started and all(d in done for d in TASKS[t][1] if d in tasks):
                    running[pool.submit(_run, t)] = t

        submit_ready()
        while running:
            finished, _ = wait(list(running), timeout=0.25, return_when=FIRST_COMPLETED)
            for f in finished:
                task = running.pop(f)
                try:
                    _, secs, compiled = f.result()
                    what = f"compiled {compiled} kernel signatures" if compiled else "already in the cache"
                    line = f"  {task:<11} {secs:6.1f} s  {what}: {TASKS[task][0]}"
                except Exception as exc:  # noqa: BLE001 - one task's failure is reported, the others go on
                    failed += 1
                    line = f"  {task:<11} failed: {type(exc).__name__}: {exc}"
                done.append(task)
                bar(Progress("compiling", len(done), len(tasks), elapsed=time.perf_counter() - t0,
                             detail="warm-up", notice=line))
            if failed and not running:
                break
            submit_ready()
            bar(Progress("compiling", len(done), len(tasks), elapsed=time.perf_counter() - t0,
                         detail=", ".join(running.values())))
    bar.close()
    total = time.perf_counter() - t0
    if failed:
        err.write(f"pdbq warm-up: {failed} of {len(tasks)} tasks failed ({total:.1f} s)\n")
        return 1
    err.write(f"pdbq warm-up: done in {total:.1f} s; later processes load the kernels from the cache\n")
    return 0
