"""The shapes the Python inference API accepts for targets and evidence, made one shape.

Targets (what to answer), for a relation with one key column::

    {"smokes": "bob"}                  one key
    {"smokes": ["bob", "ann"]}         several keys
    [("smokes", "bob"), ("smokes", "ann")]
    {"knows": ("ann", "bob")}          one key of a two-column relation
    {"knows": [("ann", "bob"), ...]}   several keys of it

Evidence (``given``), as pgmpy users write it::

    {"smokes": {"ann": True}}          relation -> {key: value}
    {("smokes", "ann"): True}          (relation, key) -> value
    [("smokes", "ann", True)]          (relation, key, value) triples (and GivenAtom/GivenQuery)

A str is always one key, never a sequence of letters.

>>> normalize_targets({"smokes": "bob"}, {"smokes": 1})
{'smokes': [('bob',)]}
>>> normalize_targets([("knows", ("a", "b")), ("smokes", "c")], {"knows": 2, "smokes": 1})
{'knows': [('a', 'b')], 'smokes': [('c',)]}
>>> normalize_given({"smokes": {"ann": True}, ("cancer", "bob"): False})
[('smokes', ('ann',), True), ('cancer', ('bob',), False)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pdbq.errors import CatalogError, PdbqError, suggest

__all__ = ["normalize_targets", "normalize_given"]

_SCALARS = (str, bytes, int, float, bool)


def _is_scalar(x: Any) -> bool:
    return x is None or isinstance(x, _SCALARS) or not isinstance(x, (tuple, list, set, frozenset)) and not hasattr(x, "__iter__")


def _keys(relation: str, value: Any, arity: int) -> list[tuple]:
    """The key tuples ``value`` names for a relation with ``arity`` key columns."""
    if _is_scalar(value):
        return [(value,)]
    if isinstance(value, tuple) and arity > 1 and len(value) == arity and all(_is_scalar(v) for v in value):
        return [value]  # one multi-column key
    out = []
    for k in value:
        key = tuple(k) if isinstance(k, (tuple, list)) else (k,)
        if len(key) != arity:
            raise CatalogError(f"{relation} has {arity} key column{'s' if arity != 1 else ''}, got the key {k!r}")
        out.append(key)
    return out


def normalize_targets(targets: Any, arities: Mapping[str, int]) -> dict[str, list[tuple]]:
    """relation -> key tuples, from any accepted shape; ``arities`` maps each variable relation
    to its number of key columns (unknown relations raise `CatalogError` with suggestions)."""
    if isinstance(targets, Mapping):
        pairs: Iterable[tuple[Any, Any]] = targets.items()
    elif isinstance(targets, (str, bytes)) or not isinstance(targets, Iterable):
        raise PdbqError(f"targets are a dict {{relation: keys}} or (relation, key) pairs, not {targets!r}")
    else:
        pairs = []
        for item in targets:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise PdbqError(f"a target pair is (relation, key), got {item!r}")
            pairs.append((item[0], item[1]))
    out: dict[str, list[tuple]] = {}
    for rel, value in pairs:
        name = str(rel).lower()
        if name not in arities:
            raise CatalogError(f"'{rel}' is not a variable relation.{suggest(name, arities)}")
        keys = _keys(name, value, arities[name])
        bucket = out.setdefault(name, [])
        bucket.extend(k for k in keys if k not in bucket)
    return out


def normalize_given(given: Any) -> list[Any]:
    """(relation, key tuple, value) triples (GivenAtom/GivenQuery passed through) from any
    accepted evidence shape; None or empty gives []."""
    if not given:
        return []
    if isinstance(given, Mapping):
        out: list[Any] = []
        for k, v in given.items():
            if isinstance(k, tuple):
                if len(k) < 2:
                    raise PdbqError(f"an evidence key is (relation, key...), got {k!r}")
                rel, key = k[0], k[1:] if len(k) > 2 else k[1]
                out.append((rel, key if isinstance(key, tuple) else (key,), v))
            elif isinstance(v, Mapping):
                for key, value in v.items():
                    out.append((k, key if isinstance(key, tuple) else (key,), value))
            else:
                raise PdbqError(
                    f"evidence for '{k}' must be a dict {{key: value}} (e.g. {{'{k}': {{'ann': True}}}}), got {v!r}"
                )
        return out
    if isinstance(given, (str, bytes)):
        raise PdbqError(f"evidence is a dict or (relation, key, value) triples, not {given!r}")
    return list(given)
