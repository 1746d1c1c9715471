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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pdbq.errors import PdbqError
from pdbq.graph.builder import csr_from_edges
from pdbq.graph.layout import NO_GROUP, FactorGraph, validate
from pdbq.inference.potentials import hyperedges
from pdbq.language.nodes import FactorFunction

__all__ = [
    "UaiFormatError",
    "UaiModel",
    "read_uai_graph",
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


def _tokens(path: PathLike) -> tuple[str, np.ndarray]:
    text = Path(path).read_text()
    parts = text.split(None, 1)
    if not parts:
        raise UaiFormatError(f"{path}: empty file")
    head = parts[0]
    body = parts[1] if len(parts) > 1 else ""
    if head.upper() not in ("MARKOV", "BAYES"):
        raise UaiFormatError(f"{path}: expected MARKOV or BAYES as the first token, found {head!r}")
    try:
        nums = np.fromstring(body, dtype=np.float64, sep=" ") if body.strip() else np.zeros(0)
    except ValueError:
        nums = None
    # fromstring may stop at the first token it cannot read: compare with the token count.
    tokens = body.split()
    if nums is None or nums.shape[0] != len(tokens):
        for k, tok in enumerate(tokens):
            try:
                float(tok)
            except ValueError:
                raise UaiFormatError(f"{path}: token {k + 2} ({tok!r}) is not a number") from None
        raise UaiFormatError(f"{path}: could not read the numbers")
    return head.upper(), nums


def _int(a: np.ndarray, i: int, path: PathLike, what: str) -> int:
    if i >= a.shape[0]:
        raise UaiFormatError(f"{path}: file ends where {what} was expected")
    x = a[i]
    if x != int(x) or x < 0:
        raise UaiFormatError(f"{path}: {what} must be a non-negative integer, found {x!r}")
    return int(x)


def read_uai_graph(path: PathLike, evid_path: PathLike | None = None) -> UaiModel:
    """Read a UAI network (and optionally its ``.evid`` file) as a graph of TABLE factors.

    Variables keep their file ids; factors keep the file's order and scope order (a variable
    repeated within one scope stays repeated: the table is indexed by every slot).
    """
    kind, a = _tokens(path)
    n = _int(a, 0, path, "the number of variables")
    if a.shape[0] < 1 + n:
        raise UaiFormatError(f"{path}: file ends inside the domain sizes")
    card = a[1 : 1 + n]
    if np.any(card != np.floor(card)) or np.any(card < 1):
        raise UaiFormatError(f"{path}: domain sizes must be positive integers")
    card = card.astype(np.int64)
    i = 1 + n
    m = _int(a, i, path, "the number of factors")
    i += 1
    starts = np.empty(m, dtype=np.int64)
    arity = np.empty(m, dtype=np.int64)
    for f in range(m):  # scopes vary in length: one cheap step per factor
        k = _int(a, i, path, f"the arity of factor {f}")
        starts[f], arity[f] = i + 1, k
        i += 1 + k
    if i > a.shape[0]:
        raise UaiFormatError(f"{path}: file ends inside the factor scopes")
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(arity)[:-1]]), arity) + np.arange(int(arity.sum()))
    scope_vars = a[idx]
    if scope_vars.size and (np.any(scope_vars != np.floor(scope_vars)) or scope_vars.min() < 0 or scope_vars.max() >= n):
        raise UaiFormatError(f"{path}: a factor scope names a variable outside 0..{n - 1}")
    scope_vars = scope_vars.astype(np.int64)
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(arity, out=offsets[1:])
    sizes = _scope_sizes(card, scope_vars, offsets)
    table_start = np.empty(m, dtype=np.int64)
    for f in range(m):
        s = _int(a, i, path, f"the table size of factor {f}")
        if s != sizes[f]:
            raise UaiFormatError(f"{path}: factor {f} has a table of {s} entries; its scope needs {int(sizes[f])}")
        table_start[f] = i + 1
        i += 1 + s
    if i > a.shape[0]:
        raise UaiFormatError(f"{path}: file ends inside the table of a factor")
    if i < a.shape[0]:
        raise UaiFormatError(f"{path}: {a.shape[0] - i} unexpected tokens after the last table")
    values = a[int(table_start[0]) :] if m else np.zeros(0)
    # the tables sit back to back after their size tokens; drop the size tokens
    keep = np.ones(values.shape[0], dtype=bool)
    if m:
        keep[(table_start[1:] - 1) - table_start[0]] = False
    values = values[keep]
    if np.any(values < 0) or np.any(np.isnan(values)):
        raise UaiFormatError(f"{path}: factor tables must hold non-negative numbers")
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
        evidence = read_evid(evid_path, card)
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
    return validate(g)


def read_evid(path: PathLike, cardinality: np.ndarray | None = None) -> dict[int, int]:
    """Evidence ``{variable: value}`` from a ``.evid`` file (both the 2014 and the older form)."""
    a = np.array(Path(path).read_text().split(), dtype=object)
    try:
        nums = [int(x) for x in a]
    except ValueError as e:
        raise UaiFormatError(f"{path}: evidence files hold integers only ({e})") from None
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
    toks = Path(path).read_text().split()
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


def _is_plain_table_graph(g: FactorGraph) -> bool:
    return bool(
        g.n_groups == 0
        and np.all(g.function == int(FactorFunction.TABLE))
        and np.all(g.weights[g.weight] == 1.0)
    )


def write_uai(source: FactorGraph | UaiModel, path: PathLike, *, evid_path: PathLike | None = None) -> None:
    """Write a network as a UAI MARKOV file (and its evidence as ``.evid`` when asked).

    A graph of unit-weight TABLE factors is written factor by factor as stored (a file read by
    `read_uai_graph` round-trips). Any other graph is written as one table per standalone factor
    and per head group: ``exp(w·φ)`` (``exp(w_G·g(Σφ))``) over the variables it mentions
    (docs/factors.md's energy; evidence goes to ``evid_path``), so every answer is preserved. Potentials must fit a double:
    a log-potential above 709 raises `UaiFormatError`.
    """
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
        lines.append(f"{t.size}\n{_format(np.exp(t))}")
    Path(path).write_text("\n".join(lines) + "\n")
    if evid_path is not None:
        ev = {int(v): int(graph.evidence[v]) for v in np.flatnonzero(graph.evidence >= 0)}
        write_evid(ev, evid_path)


def write_evid(evidence: Mapping[int, int], path: PathLike) -> None:
    """Write ``{variable: value}`` as a UAI 2014 ``.evid`` file."""
    items = sorted((int(v), int(x)) for v, x in evidence.items())
    Path(path).write_text(" ".join([str(len(items))] + [f"{v} {x}" for v, x in items]) + "\n")
