"""UAI competition files: read a MARKOV (or BAYES) network as a factor graph, write one back.

Format (UAI inference competition): the network type, the number of variables, their domain
sizes, the number of factors, each factor's scope (``k v1 .. vk``), then each factor's table
(``size t1 .. t_size``) with the LAST scope variable changing fastest: the order of pdbq's
TABLE factors, so tables are copied as they are (as log-potentials: a zero becomes ``-inf``,
which exact inference and the samplers treat as an impossible state). The whole file is parsed
as one numpy token stream (a 10,000-variable file loads in a fraction of a second).

Evidence files: ``n v1 x1 .. vn xn`` (UAI 2014), or the older ``1`` (number of samples)
followed by that; ``0`` means no evidence. Answer files: ``.MAR`` (marginals), ``.PR``
(log10 Z), ``.MAP`` (an assignment).

>>> import tempfile, os
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "tiny.uai")
>>> _ = open(p, "w").write("MARKOV 2  2 3  2  1 0  2 0 1  2 1.0 3e0  6 1 2 3 4 5 6")
>>> m = read_uai_graph(p)
>>> m.graph.n_vars, m.graph.n_factors, m.cardinality.tolist()
(2, 2, [2, 3])
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from pdbq.catalog.names import normalize
from pdbq.catalog.store import in_transaction, transaction
from pdbq.errors import CatalogError, PdbqError
from pdbq.files import atomic_write_text
from pdbq.graph.builder import csr_from_edges
from pdbq.graph.from_store import full_graph
from pdbq.graph.layout import NO_GROUP, FactorGraph, validate, writable
from pdbq.graph.subgraph import subgraph
from pdbq.grounding.ground import prepare
from pdbq.grounding.imported import create_import, evidence_source, variable_source
from pdbq.grounding.limits import GroundingConfig
from pdbq.grounding.store import schema_known
from pdbq.grounding.variables import relation_info
from pdbq.inference.exact.potentials import hyperedges
from pdbq.language.nodes import Column, CreateVariable, Domain, DomainKind, FactorFunction
from pdbq.memory import check_bytes, gib

__all__ = [
    "UaiFormatError",
    "UaiModel",
    "read_uai_graph",
    "read_uai",
    "export_uai",
    "read_evid",
    "read_mar",
    "read_pr",
    "read_map",
    "write_uai",
    "write_evid",
]

PathLike = str | os.PathLike


class UaiFormatError(PdbqError):
    """A UAI, evidence or answer file that does not follow the format (names file and position)."""


@dataclass(frozen=True, eq=False)
class UaiModel:
    """A network read from a UAI file: a graph of TABLE factors (log-potentials, weight 1,
    one factor per file factor, in file order, scopes as written) with the evidence applied to
    ``graph.evidence``; ``evidence`` maps variable → observed value."""

    graph: FactorGraph
    cardinality: np.ndarray
    evidence: dict[int, int] = field(default_factory=dict)
    kind: str = "MARKOV"
    path: str = ""

    @property
    def n_vars(self) -> int:
        return self.graph.n_vars


# Peak memory of parsing a file, per byte of it: the bytes, their text, the text after the network
# type, the float64 token stream (a token takes at least 2 bytes: 4 bytes of floats per byte), and
# the tables cut from it and their logarithms.
_MEMORY_PER_BYTE = 16
_CHUNK = 1 << 24  # bytes read between two cancel checks
_SHOWN = 16  # the longest token an error message quotes


def _shown(token: str) -> str:
    """A token for a message: quoted when short and printable, else only its length (an error
    never echoes the content of a file that may not be a UAI file at all)."""
    if len(token) <= _SHOWN and token.isprintable():
        return repr(token)
    return f"a {len(token):,}-character token"


def _read_text(path: PathLike, what: str = "UAI file", poll: Callable[[], None] | None = None) -> str:
    """The text of a regular file, read in chunks with ``poll`` (a cancel check) between them.

    A device, pipe or socket (``/dev/urandom``, a FIFO) never ends: refused. The size is the
    file's size when opened (a file that grows meanwhile is read that far), and the memory that
    parsing it takes is checked first. Text that is not UTF-8 is not a UAI file."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: opening a FIFO waits for a writer
        raise UaiFormatError(f"{path}: not a {what}: not a regular file (a device, pipe or folder)")
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UaiFormatError(f"{path}: not a {what}: not a regular file (a device, pipe or folder)")
        size = int(info.st_size)
        check_bytes(size * _MEMORY_PER_BYTE, f"reading the {what} '{path}' ({gib(size)})")
        chunks: list[bytes] = []
        left = size
        while left > 0:
            if poll is not None:
                poll()
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    del chunks
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UaiFormatError(f"{path}: not a {what}: it is not text") from None


def _line_of(path: PathLike, k: int | None) -> int:
    """1-based line of the file's token ``k`` (0 = the network type; None = the last line).
    Only error paths call this: it re-reads the file with line breaks kept."""
    lines = _read_text(path).splitlines() or [""]
    counts = np.cumsum([len(line.split()) for line in lines])
    if k is None or k >= int(counts[-1]):
        nonblank = [i for i, line in enumerate(lines) if line.strip()]
        return (nonblank[-1] if nonblank else 0) + 1
    return int(np.searchsorted(counts, k, side="right")) + 1


def _err(path: PathLike, k: int | None, message: str) -> UaiFormatError:
    """UaiFormatError naming the file and the line of number ``k`` of the stream after the
    network type (None: the end of the file)."""
    return UaiFormatError(f"{path}, line {_line_of(path, None if k is None else k + 1)}: {message}")


_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True  # what str.split() splits ASCII text at


def _count_tokens(text: str) -> int:
    """Whitespace-separated tokens of ``text``, counted over its bytes (no string per token)."""
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    if raw.size == 0:
        return 0
    word = ~_SPACE[raw]
    return int(word[0]) + int(np.count_nonzero(word[1:] & ~word[:-1]))


def _tokens(path: PathLike, poll: Callable[[], None] | None = None) -> tuple[str, np.ndarray]:
    text = _read_text(path, poll=poll)
    parts = text.split(None, 1)
    if not parts:
        raise UaiFormatError(f"{path}: empty file")
    head = parts[0]
    body = parts[1] if len(parts) > 1 else ""
    del text
    if head.upper() not in ("MARKOV", "BAYES"):
        raise UaiFormatError(f"{path}: not a UAI file: a UAI file starts with MARKOV or BAYES")
    try:
        nums = np.fromstring(body, dtype=np.float64, sep=" ") if body.strip() else np.zeros(0)
    except ValueError:
        nums = None
    # fromstring may stop at the first token it cannot read: compare with the token count,
    # counted without a Python string per token.
    if nums is None or nums.shape[0] != _count_tokens(body):
        for k, m in enumerate(re.finditer(r"\S+", body)):
            tok = m.group()
            try:
                float(tok)
            except ValueError:
                raise _err(path, k, f"token {k + 2} ({_shown(tok)}) is not a number") from None
        raise UaiFormatError(f"{path}: could not read the numbers")
    return head.upper(), nums


def _int(a: np.ndarray, i: int, path: PathLike, what: str) -> int:
    if i >= a.shape[0]:
        raise _err(path, None, f"file ends where {what} was expected")
    x = a[i]
    if not np.isfinite(x) or x != int(x) or x < 0:
        raise _err(path, i, f"{what} must be a non-negative integer, found {float(x):g}")
    return int(x)


_CPT_TOLERANCE = 1e-3  # a BAYES row may sum to 1 ± this (files print rounded probabilities)


def _check_cpts(path: PathLike, card: np.ndarray, scope_vars: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                values: np.ndarray) -> None:
    """A BAYES factor is a CPT of its last scope variable: every row (one parent assignment,
    the child's values contiguous) must sum to 1. A file that breaks this is not the network it
    claims to be: `UaiFormatError` naming the factor and the row."""
    start = 0
    for f in range(offsets.shape[0] - 1):
        size = int(sizes[f])
        if offsets[f + 1] > offsets[f] and size:
            child = int(scope_vars[offsets[f + 1] - 1])
            rows = values[start : start + size].reshape(-1, int(card[child])).sum(axis=1)
            off = np.abs(rows - 1.0) > _CPT_TOLERANCE
            if np.any(off):
                r = int(np.flatnonzero(off)[0])
                raise UaiFormatError(
                    f"{path}: BAYES factor {f} (the CPT of variable {child}): row {r} sums to {float(rows[r]):.6g}, "
                    "not 1; declare the file MARKOV if its tables are not conditional probabilities"
                )
        start += size


def read_uai_graph(path: PathLike, evid_path: PathLike | None = None, *,
                   poll: Callable[[], None] | None = None) -> UaiModel:
    """Read a UAI network (and optionally its ``.evid`` file) as a graph of TABLE factors.

    Variables keep their file ids; factors keep the file's order and scope order (a variable
    repeated within one scope stays repeated: the table is indexed by every slot).
    """
    kind, a = _tokens(path, poll)
    n = _int(a, 0, path, "the number of variables")
    if a.shape[0] < 1 + n:
        raise _err(path, None, "file ends inside the domain sizes")
    card = a[1 : 1 + n]
    bad_card = (card != np.floor(card)) | (card < 1)
    if np.any(bad_card):
        j = int(np.flatnonzero(bad_card)[0])
        raise _err(path, 1 + j, f"domain sizes must be positive integers (variable {j}: {float(card[j]):g})")
    card = card.astype(np.int64)
    i = 1 + n
    m = _int(a, i, path, "the number of factors")
    i += 1
    starts = np.empty(m, dtype=np.int64)
    arity = np.empty(m, dtype=np.int64)
    if m > a.shape[0]:
        raise _err(path, i - 1, f"{m:,} factors declared, but the file holds only {a.shape[0]:,} numbers")
    for f in range(m):  # scopes vary in length: one cheap step per factor
        if poll is not None and not f & 0xFFFF:
            poll()
        k = _int(a, i, path, f"the arity of factor {f}")
        starts[f], arity[f] = i + 1, k
        i += 1 + k
    if i > a.shape[0]:
        raise _err(path, None, "file ends inside the factor scopes")
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(arity)[:-1]]), arity) + np.arange(int(arity.sum()))
    scope_vars = a[idx]
    bad_scope = (scope_vars != np.floor(scope_vars)) | (scope_vars < 0) | (scope_vars >= n)
    if np.any(bad_scope):
        j = int(np.flatnonzero(bad_scope)[0])
        raise _err(path, int(idx[j]), f"a factor scope names variable {float(scope_vars[j]):g}, outside 0..{n - 1}")
    scope_vars = scope_vars.astype(np.int64)
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(arity, out=offsets[1:])
    sizes = _scope_sizes(card, scope_vars, offsets)
    table_start = np.empty(m, dtype=np.int64)
    for f in range(m):
        if poll is not None and not f & 0xFFFF:
            poll()
        s = _int(a, i, path, f"the table size of factor {f}")
        if s != sizes[f]:
            raise _err(path, i, f"factor {f} has a table of {s} entries; its scope needs {int(sizes[f])}")
        table_start[f] = i + 1
        i += 1 + s
    if i > a.shape[0]:
        raise _err(path, None, "file ends inside the table of a factor")
    if i < a.shape[0]:
        raise _err(path, i, f"{a.shape[0] - i} unexpected tokens after the last table")
    values = a[int(table_start[0]) :] if m else np.zeros(0)
    # the tables sit back to back after their size tokens; drop the size tokens
    keep = np.ones(values.shape[0], dtype=bool)
    if m:
        keep[(table_start[1:] - 1) - table_start[0]] = False
    values = values[keep]
    bad_value = (values < 0) | np.isnan(values)
    if np.any(bad_value):
        j = int(np.flatnonzero(keep)[np.flatnonzero(bad_value)[0]]) + int(table_start[0])
        raise _err(path, j, f"factor tables must hold non-negative numbers, found {float(a[j]):g}")
    if kind == "BAYES":
        _check_cpts(path, card, scope_vars, offsets, sizes, values)
    with np.errstate(divide="ignore"):
        tables = np.log(values)
    if card.size and card.min() < 2:
        # pdbq variables have at least two values: a one-value variable is padded with an
        # impossible second value (weight -inf), which leaves every answer unchanged.
        card, tables, scope_vars, offsets, extra = _pad_unary_domains(card, tables, scope_vars, offsets, sizes)
        m += extra
        sizes = None
    graph = _table_graph(card, scope_vars, offsets, tables)
    evidence: dict[int, int] = {}
    if evid_path is not None:
        evidence = read_evid(evid_path, card, poll=poll)
        ev = graph.evidence.copy()
        for v, x in evidence.items():
            ev[v] = x
        graph = graph._replace(evidence=ev)
    return UaiModel(graph, card.astype(np.int64), evidence, kind, str(path))


def _pad_unary_domains(card, tables, scope_vars, offsets, sizes):
    """Give each one-value variable a second, impossible value: re-lay tables over the padded
    domains and add a TABLE factor (0, -inf) over each such variable."""
    m = offsets.shape[0] - 1
    new_card = np.maximum(card, 2)
    new_tables = []
    pos = 0
    for f in range(m):
        sv = scope_vars[offsets[f] : offsets[f + 1]]
        old = tables[pos : pos + int(sizes[f])].reshape([int(card[v]) for v in sv] or [])
        pos += int(sizes[f])
        padded = np.full([int(new_card[v]) for v in sv], -np.inf)
        padded[tuple(slice(0, int(card[v])) for v in sv)] = old
        new_tables.append(padded.ravel())
    unary = np.flatnonzero(card < 2)
    for _ in unary:
        new_tables.append(np.array([0.0, -np.inf]))
    scope_vars = np.concatenate([scope_vars, unary])
    offsets = np.concatenate([offsets, offsets[-1] + 1 + np.arange(unary.shape[0], dtype=np.int64)])
    return new_card, np.concatenate(new_tables) if new_tables else np.zeros(0), scope_vars, offsets, unary.shape[0]


def _scope_sizes(card: np.ndarray, scope_vars: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Table size of each factor: the product of its scope's domain sizes (1 for no scope)."""
    m = offsets.shape[0] - 1
    sizes = np.ones(m, dtype=np.int64)
    nonempty = np.diff(offsets) > 0
    if scope_vars.size:
        # empty scopes hold no variables, so each nonempty start's segment is its own scope
        sizes[nonempty] = np.multiply.reduceat(card[scope_vars].astype(np.int64), offsets[:-1][nonempty])
    return sizes


def _table_graph(card: np.ndarray, scope_vars: np.ndarray, offsets: np.ndarray, tables: np.ndarray) -> FactorGraph:
    n, m = card.shape[0], offsets.shape[0] - 1
    sizes = _scope_sizes(card, scope_vars, offsets)
    table_offset = np.zeros(m, dtype=np.int64)
    if m:
        np.cumsum(sizes[:-1], out=table_offset[1:])
    group = np.full(m, NO_GROUP, dtype=np.int32)
    factor_vars = scope_vars.astype(np.int32)
    var_offsets, var_factors = csr_from_edges(offsets, factor_vars, group, n)
    g = FactorGraph(
        cardinality=card.astype(np.int32),
        evidence=np.full(n, -1, dtype=np.int32),
        var_offsets=var_offsets,
        var_factors=var_factors,
        function=np.full(m, int(FactorFunction.TABLE), dtype=np.int8),
        weight=np.zeros(m, dtype=np.int32),
        group=group,
        factor_offsets=offsets.astype(np.int64),
        factor_vars=factor_vars,
        factor_literals=np.full(factor_vars.shape[0], -1, dtype=np.int32),
        table_offset=table_offset,
        tables=np.ascontiguousarray(tables, dtype=np.float64),
        weights=np.ones(1, dtype=np.float64),
        learnable=np.zeros(1, dtype=np.bool_),
        semantics=np.zeros(0, dtype=np.int8),
        group_weight=np.zeros(0, dtype=np.int32),
    )
    return validate(writable(g))


def read_evid(path: PathLike, cardinality: np.ndarray | None = None, *,
              poll: Callable[[], None] | None = None) -> dict[int, int]:
    """Evidence ``{variable: value}`` from a ``.evid`` file (both the 2014 and the older form)."""
    text = _read_text(path, "UAI evidence file", poll)
    try:
        got = np.fromstring(text, dtype=np.float64, sep=" ") if text.strip() else np.zeros(0)
    except ValueError:
        got = None
    if got is None or got.shape[0] != _count_tokens(text) or not np.all(np.isfinite(got) & (got == np.floor(got))):
        raise UaiFormatError(f"{path}: not a UAI evidence file: evidence files hold integers only")
    if got.size and np.abs(got).max() >= 2**62:
        raise UaiFormatError(f"{path}: an integer of the evidence file is out of range")
    nums = got.astype(np.int64).tolist()
    if not nums:
        return {}
    if len(nums) == 1 + 2 * nums[0]:
        pairs = nums[1:]
    elif len(nums) >= 2 and nums[0] == 1 and len(nums) == 2 + 2 * nums[1]:
        pairs = nums[2:]  # older form: number of samples (1), then one sample
    else:
        raise UaiFormatError(f"{path}: expected 'n v1 x1 .. vn xn' ({len(nums)} integers do not fit)")
    out: dict[int, int] = {}
    for v, x in zip(pairs[0::2], pairs[1::2]):
        if cardinality is not None:
            if not 0 <= v < len(cardinality):
                raise UaiFormatError(f"{path}: evidence names variable {v}, outside 0..{len(cardinality) - 1}")
            if not 0 <= x < int(cardinality[v]):
                raise UaiFormatError(f"{path}: evidence value {x} for variable {v} outside its domain")
        if v in out and out[v] != x:
            raise UaiFormatError(f"{path}: variable {v} observed twice with different values")
        out[v] = x
    return out


def _answer_tokens(path: PathLike, tag: str) -> list[str]:
    toks = _read_text(path, f"{tag} answer file").split()
    if not toks or toks[0].upper() != tag:
        raise UaiFormatError(f"{path}: expected a {tag} answer file")
    return toks[1:]


def read_mar(path: PathLike) -> list[np.ndarray]:
    """Marginals from a ``.MAR`` file: one probability vector per variable."""
    toks = _answer_tokens(path, "MAR")
    a = np.array(toks, dtype=np.float64)
    n, i, out = int(a[0]), 1, []
    for _ in range(n):
        d = int(a[i])
        out.append(a[i + 1 : i + 1 + d].copy())
        i += 1 + d
    return out


def read_pr(path: PathLike) -> float:
    """log10 Z (evidence applied) from a ``.PR`` file (UAI answers are base-10 logarithms)."""
    toks = _answer_tokens(path, "PR")
    return float(toks[-1])


def read_map(path: PathLike) -> np.ndarray:
    """An assignment from a ``.MAP`` file."""
    toks = _answer_tokens(path, "MAP")
    a = np.array(toks, dtype=np.int64)
    return a[1 : 1 + int(a[0])]


def _format(values: np.ndarray) -> str:
    return " ".join(repr(float(x)) for x in values)


def _potentials(log_table: np.ndarray) -> np.ndarray:
    """``exp(log_table)``, each entry the number with the fewest significant digits whose log is
    the same double: a table read as 0.1 is written back as 0.1, not as exp(log(0.1)) =
    0.10000000000000002, and reading the file gives the same log-potentials."""
    t = np.asarray(log_table, dtype=np.float64)
    out = np.exp(t)
    open_ = np.flatnonzero(np.isfinite(t))
    with np.errstate(divide="ignore"):
        for digits in range(1, 18):
            if not open_.size:
                break
            short = np.char.mod(f"%.{digits - 1}e", out[open_]).astype(np.float64)
            hit = np.log(short) == t[open_]
            out[open_[hit]] = short[hit]
            open_ = open_[~hit]
    return out


def _is_plain_table_graph(g: FactorGraph) -> bool:
    return bool(
        g.n_groups == 0
        and np.all(g.function == int(FactorFunction.TABLE))
        and np.all(g.weights[g.weight] == 1.0)
    )


def write_uai(
    source: FactorGraph | UaiModel | Any,
    path: PathLike,
    target: PathLike | None = None,
    *,
    evid_path: PathLike | None = None,
) -> None:
    """Write a network as a UAI MARKOV file (and its evidence as ``.evid`` when asked).

    ``write_uai(graph_or_model, path)`` writes a factor graph; ``write_uai(db, relation, path)``
    writes variable relation ``relation`` of a pdbq database (see `export_uai`).

    A graph of unit-weight TABLE factors is written factor by factor as stored (a file read by
    `read_uai_graph` round-trips). Any other graph is written as one table per standalone factor
    and per head group: ``exp(w·φ)`` (``exp(w_G·g(Σφ))``) over the variables it mentions
    (docs/factors.md's energy; evidence goes to ``evid_path``), so every answer is preserved. Potentials must fit a double:
    a log-potential above 709 raises `UaiFormatError`.
    """
    if _is_database(source):
        if target is None:
            raise TypeError("write_uai(db, relation, path): the path is missing")
        export_uai(source, str(path), target, evid_path=evid_path)
        return
    if target is not None:
        raise TypeError("write_uai(graph, path) takes no third positional argument")
    graph = source.graph if isinstance(source, UaiModel) else source
    card = graph.cardinality
    scopes: list[np.ndarray] = []
    tables: list[np.ndarray] = []
    if _is_plain_table_graph(graph):
        for f in range(graph.n_factors):
            sv = graph.factor_args(f)
            size = int(np.prod(card[sv].astype(np.int64))) if sv.size else 1
            off = int(graph.table_offset[f])
            scopes.append(sv)
            tables.append(graph.tables[off : off + size])
    else:
        for h in hyperedges(graph):
            scopes.append(h.scope)
            tables.append(h.log_table.ravel())
    lines = ["MARKOV", str(graph.n_vars), " ".join(str(int(c)) for c in card), str(len(scopes))]
    lines += [" ".join([str(len(s))] + [str(int(v)) for v in s]) for s in scopes]
    for k, t in enumerate(tables):
        if t.size and np.max(t) > 709.0:
            raise UaiFormatError(f"table {k}: a log-potential of {float(np.max(t)):.6g} overflows exp() in a UAI file")
        lines.append(f"{t.size}\n{_format(_potentials(t))}")
    atomic_write_text(path, "\n".join(lines) + "\n", "UAI file")
    if evid_path is not None:
        ev = {int(v): int(graph.evidence[v]) for v in np.flatnonzero(graph.evidence >= 0)}
        write_evid(ev, evid_path)


def write_evid(evidence: Mapping[int, int], path: PathLike) -> None:
    """Write ``{variable: value}`` as a UAI 2014 ``.evid`` file."""
    items = sorted((int(v), int(x)) for v, x in evidence.items())
    atomic_write_text(path, " ".join([str(len(items))] + [f"{v} {x}" for v, x in items]) + "\n", "evidence file")


# ------------------------------------------------------------------------- into a database


def _is_database(obj: object) -> bool:
    return hasattr(obj, "catalog") and hasattr(obj, "duckdb")


def _contiguous_tables(graph: FactorGraph) -> tuple[np.ndarray, np.ndarray]:
    """(table_offsets[n_factors + 1], tables) with factor f's log-table at
    ``tables[table_offsets[f]:table_offsets[f+1]]`` (gathered when the graph's are not back to back)."""
    sizes = _scope_sizes(graph.cardinality.astype(np.int64), graph.factor_vars.astype(np.int64), graph.factor_offsets)
    offsets = np.zeros(graph.n_factors + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if np.array_equal(graph.table_offset, offsets[:-1]) and graph.tables.shape[0] == offsets[-1]:
        return offsets, graph.tables
    idx = np.repeat(graph.table_offset - offsets[:-1], sizes) + np.arange(int(offsets[-1]))
    return offsets, graph.tables[idx]


def read_uai(db: Any, path: PathLike, name: str, *, evidence: PathLike | None = None,
             poll: Callable[[], None] | None = None) -> UaiModel:
    """Load a UAI network into a pdbq database as variable relation ``name(id INTEGER)``.

    Variables keep their file ids as keys, each with its own domain size (per-row cardinality;
    the relation's domain is CATEGORICAL(largest)); the file's factors become unit-weight TABLE
    factors stored with the relation (``pdbq_fs_imported__<name>``), which query-driven grounding
    and full graphs include. ``evidence`` (an ``.evid`` path; only when given) becomes the
    relation's stored evidence. ``DROP VARIABLE name`` removes the import. One transaction: a bad
    file (`UaiFormatError` naming the file and line) or a taken name (`CatalogError`) leaves the
    database as it was. ``poll`` is called while the file is read (a cancel check that raises).
    Returns the network as read (`read_uai_graph`).

    >>> # db = pdbq.connect(); read_uai(db, "Grids_12.uai", "grid")
    >>> # db.execute("SELECT v.id, PROB(v = 1) FROM grid v WHERE v.id < 5 USING EXACT")
    """
    if not _is_database(db):
        raise TypeError(f"read_uai takes a pdbq database (pdbq.connect()), not {type(db).__name__}")
    rel = normalize(name)
    catalog = db.catalog
    if rel in catalog.variables():
        raise CatalogError(f"cannot import '{path}' as '{rel}': a variable relation of that name exists; drop it first")
    if catalog.is_read_only():
        raise PdbqError(f"cannot import '{path}': the database is open read-only")
    model = read_uai_graph(path, evidence, poll=poll)
    g = model.graph
    table_offsets, tables = _contiguous_tables(g)
    ev_ids = np.array(sorted(model.evidence), dtype=np.int64)
    ev_vals = np.array([model.evidence[int(v)] for v in ev_ids], dtype=np.int64)
    card = g.cardinality
    node = CreateVariable(
        name=rel,
        columns=(Column("id", "INTEGER"),),
        domain=Domain(DomainKind.CATEGORICAL, size=int(card.max()) if card.size else 2),
        source=variable_source(rel),
        evidence=evidence_source(rel) if evidence is not None else None,
        per_row_cardinality=True,
    )
    con = db.duckdb
    with transaction(con):
        create_import(
            con, rel, card, g.factor_offsets, g.factor_vars, table_offsets, tables,
            evidence=(ev_ids, ev_vals), origin=str(path),
        )
        catalog.create_variable(node)
    _prebuild(db, rel)
    return model


def _prebuild(db: Any, rel: str) -> None:
    """Build the new relation's vid map and stored evidence now, as a database builds an index at
    load time, so the first query does not. Best effort, in its own transaction after the import
    committed: a problem elsewhere in the database (another relation's bad evidence) is reported
    by the next query, as it would have been without this step."""
    con = db.duckdb
    if in_transaction(con):  # the caller's transaction: a failure here would abort it
        return
    # a pdbq Database does what a first query does before inference (pdbq.planning.after_import)
    warm = getattr(db, "_prepare_after_import", None)
    try:
        if warm is not None:
            warm(rel)
        else:
            with transaction(con), schema_known(con):
                variables, rules = db.catalog.definitions()
                prepare(con, variables, rules, GroundingConfig())
    except (PdbqError, duckdb.Error):
        pass  # rolled back; the next query reports it


def export_uai(db: Any, name: str, path: PathLike, *, evid_path: PathLike | None = None) -> FactorGraph:
    """Write variable relation ``name`` of a database as a UAI file (variable i = the relation's
    i-th variable in key order: the file id for an imported relation).

    Every factor over the relation's variables is written (imported TABLE factors as stored, so an
    import round-trips; grounded rules as tables of ``exp(w·φ)``, grounding them in full first).
    A factor that also involves another relation cannot be expressed in the file and raises
    `PdbqError`. Stored evidence goes to ``evid_path`` when given. Returns the graph written.
    """
    rel = normalize(name)
    catalog = db.catalog
    variables = catalog.variables()
    if rel not in variables:
        catalog.variable(rel)  # CatalogError with suggestions
    if variables[rel].domain.kind is DomainKind.CLUSTER:
        raise PdbqError(f"cannot write '{rel}' as a UAI file: it is a cluster relation (DOMAIN CLUSTER), whose "
                        "values are entities, not a fixed list of values a UAI file can hold")
    g, _, _ = full_graph(db.duckdb, variables, catalog.rules())
    info = relation_info(db.duckdb).get(rel)
    if info is None:
        raise PdbqError(f"cannot write '{rel}' as a UAI file: it has no variables in the factor store")
    inside = np.zeros(g.n_vars, dtype=bool)
    inside[info.base : info.base + info.n] = True
    edge_factor = np.repeat(np.arange(g.n_factors), np.diff(g.factor_offsets))
    n_in = np.bincount(edge_factor, weights=inside[g.factor_vars], minlength=g.n_factors)
    arity = np.diff(g.factor_offsets)
    mixed = (n_in > 0) & (n_in < arity)
    if np.any(mixed):
        f = int(np.flatnonzero(mixed)[0])
        raise PdbqError(
            f"cannot write '{rel}' as a UAI file: factor {f} also involves variables of other relations"
        )
    # constant (zero-variable) factors belong to the file only when the relation is the whole model
    keep = (n_in > 0) | ((arity == 0) & (info.n == g.n_vars))
    sub, _ = subgraph(g, np.arange(info.base, info.base + info.n), factors=keep)
    write_uai(sub, path, evid_path=evid_path)
    return sub
