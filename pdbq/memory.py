"""How much memory this process may still allocate, and a check before a large allocation.

Exact inference, exact block moves and cutset sampling allocate clique tables whose size the
model decides (2^width entries). A table beyond the memory left is refused with an
`InferenceError` naming its size and the memory, before NumPy fails with a MemoryError or the
operating system kills the process.

>>> available_bytes() > 0
True
"""

from __future__ import annotations

import os
import resource

from pdbq.errors import InferenceError

__all__ = ["available_bytes", "check_fits", "check_bytes", "table_cap", "TABLE_BYTES", "WORKING_COPIES", "gib"]

TABLE_BYTES = 8  # float64 log-potentials
# Peak working memory of one pass over a clique table: the table, its shifted copy, its exp, and
# the message summed out of it.
WORKING_COPIES = 4


def gib(n: float) -> str:
    """``n`` bytes as '1.5 GiB' / '512 MiB'."""
    if n >= 1 << 30:
        return f"{n / (1 << 30):,.1f} GiB"
    return f"{n / (1 << 20):,.0f} MiB"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_left() -> int | None:
    """Memory left under a cgroup v2 limit (containers), if one is set."""
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            used = int(f.read().strip())
        return max(int(limit) - used, 0)
    except (OSError, ValueError):
        return None


def available_bytes() -> int:
    """Bytes this process can still allocate: the least of the system's available memory, a
    cgroup limit and the address-space limit (``ulimit -v``) where these are known."""
    candidates = [c for c in (_meminfo_available(), _cgroup_left()) if c is not None]
    if not candidates:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            candidates.append(1 << 62)
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            used = 0
        candidates.append(max(soft - used, 0))
    return int(min(candidates))


def check_fits(entries: int, what: str, *, copies: int = WORKING_COPIES, option: str = "") -> None:
    """`InferenceError` when ``copies`` float64 tables of ``entries`` entries do not fit in the
    memory left. ``what`` names the table in the message; ``option`` the option that bounds it."""
    need = int(entries) * TABLE_BYTES * copies
    left = available_bytes()
    if need > left:
        hint = f"; lower {option} or use MCMC" if option else ""
        raise InferenceError(
            f"{what} needs a table of {int(entries):,} entries ({gib(need)} of working memory), "
            f"but only {gib(left)} of memory is available{hint}"
        )


def check_bytes(need: int, what: str, *, option: str = "") -> None:
    """`InferenceError` when ``need`` bytes do not fit in the memory left. ``what`` says what
    needs them (its size in its own terms); ``option`` the option that bounds it."""
    left = available_bytes()
    if int(need) > left:
        hint = f"; lower {option}" if option else ""
        raise InferenceError(f"{what} needs {gib(need)} of memory, but only {gib(left)} is available{hint}")


def table_cap(copies: int = WORKING_COPIES) -> int:
    """The most entries a float64 table may have so that ``copies`` of it fit in the memory
    left: a search for an elimination order or a block stops beyond it instead of first
    building what cannot be allocated."""
    return max(2, available_bytes() // (TABLE_BYTES * copies))
