"""Typed, frozen statement nodes: what the parser produces and the catalog stores.

SQL fragments that DuckDB evaluates later (a FROM query, a condition, a weight expression, a
constant) are kept as SQL text in the DuckDB dialect, normalised by sqlglot, so that nodes are
hashable, comparable and serialisable into the catalog. Symbols in rule conditions and weight
expressions appear in that text as bare column names (``p <> 'bot'``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

import sqlglot.expressions as exp


class Semantics(enum.IntEnum):
    """How a head group's votes combine (seed 004, eq. 6): g(x) = x, sgn(x), sgn(x)·log(1+|x|)."""

    LINEAR = 0
    LOGICAL = 1
    RATIO = 2


class FactorFunction(enum.IntEnum):
    """Factor-function codes; DeepDive/numbskull's codes where they overlap. docs/factors.md is the
    contract for the value each computes."""

    IMPLY = 0
    OR = 1
    AND = 2
    EQUAL = 3
    ISTRUE = 4
    LINEAR = 7
    RATIO = 8
    LOGICAL = 9
    IMPLY_MLN = 13
    VOTE = 30
    TABLE = 31


class DomainKind(enum.Enum):
    BOOLEAN = "boolean"
    VALUES = "values"  # DOMAIN ('a', 'b', ...): value i <-> values[i]
    CATEGORICAL = "categorical"  # DOMAIN CATEGORICAL(k): values 0 .. k-1
    CLUSTER = "cluster"  # DOMAIN CLUSTER: the value is the entity (cluster of keys) a key belongs to; size 0


# The most values a CATEGORICAL(k) domain may have: the catalog stores k, and the chains hold a
# value, as a 32-bit integer.
MAX_CATEGORIES = 2**31 - 1


@dataclass(frozen=True)
class Domain:
    kind: DomainKind
    values: tuple[str, ...] = ()  # for VALUES, in declaration order (index = internal value)
    size: int = 2  # cardinality: 2 for BOOLEAN, len(values) for VALUES, k for CATEGORICAL


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB type text as written, upper-cased (e.g. "TEXT", "INTEGER", "DECIMAL(10,2)")


class TermKind(enum.Enum):
    SYMBOL = "symbol"
    CONSTANT = "constant"
    WILDCARD = "wildcard"


@dataclass(frozen=True)
class Term:
    kind: TermKind
    text: str = ""  # symbol name (lower-cased), or constant as SQL literal text ("'bot'", "3", "TRUE")
    head: bool = False  # written with ^ (a head symbol)


@dataclass(frozen=True)
class Atom:
    relation: str  # table/view or variable relation name (lower-cased)
    terms: tuple[Term, ...]
    negated: bool = False  # NOT atom(...) in a body: the literal "variable is false"


class HeadKind(enum.Enum):
    ATOM = "atom"  # is_popular(^m)
    COMPARE = "compare"  # tag(^t) = 'PER'  (head literal: variable equals the constant)
    EQUAL = "equal"  # a(x) = b(y)    (FUNCTION EQUAL between two random atoms)


@dataclass(frozen=True)
class Head:
    kind: HeadKind
    atoms: tuple[Atom, ...]  # one atom, or two for EQUAL
    value: str | None = None  # COMPARE: the constant as SQL literal text


class WeightKind(enum.Enum):
    CONSTANT = "constant"  # WEIGHT 0.8
    LEARNABLE = "learnable"  # WEIGHT ?
    TIED = "tied"  # WEIGHT ?(sym, ...): one learnable weight per distinct value of the symbols
    EXPRESSION = "expression"  # WEIGHT = expr: fixed weight per grounding from body symbols
    MODEL = "model"  # WEIGHT MODEL 'name[@version]' ON records: a stored pair model's match weight (cluster rules)


@dataclass(frozen=True)
class Weight:
    kind: WeightKind
    value: float = 1.0  # CONSTANT: the weight; LEARNABLE/TIED: the initial value
    symbols: tuple[str, ...] = ()  # TIED
    # EXPRESSION: DuckDB SQL over symbols; LEARNABLE/TIED: the feature the learnable weight
    # multiplies (`WEIGHT ? * expr`, `WEIGHT ?(sym) * expr`; None: 1), cluster rules only
    expression: str | None = None
    # MODEL: the stored pair model ("name" = its latest version, "name@2") and the table or view
    # holding the records it compares, keyed by the cluster relation's key column
    model: str | None = None
    records: str | None = None


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class PassThrough:
    """Any statement that is not pdbq's: sent to DuckDB as its original text."""

    sql: str
    line: int = 1  # where it starts in the script (1-based), for error messages
    col: int = 1


@dataclass(frozen=True)
class CreateVariable:
    name: str
    columns: tuple[Column, ...]
    domain: Domain
    source: str  # the FROM (select) query text
    evidence: str | None = None  # the EVIDENCE (select keys..., value) query text
    or_replace: bool = False
    text: str = ""  # the statement as written
    # Importers (UAI): the FROM query yields the key columns then one INTEGER column holding each
    # variable's own cardinality (>= 2); `domain` is then CATEGORICAL with size = the largest.
    per_row_cardinality: bool = False


@dataclass(frozen=True)
class CreateRule:
    name: str
    head: Head
    body: tuple[Atom, ...]
    conditions: tuple[str, ...] = ()  # DuckDB boolean expressions over symbols
    weight: Weight = Weight(WeightKind.CONSTANT, 1.0)
    semantics: Semantics = Semantics.LINEAR
    function: FactorFunction = FactorFunction.VOTE  # EQUAL when the head is a(x) = b(y)
    head_symbols: tuple[str, ...] = ()  # resolved: ^-marked symbols, else the head atoms' symbols
    or_replace: bool = False
    text: str = ""


@dataclass(frozen=True)
class Drop:
    kind: str  # "VARIABLE" | "RULE"
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class DropRelation:
    """DuckDB's ``DROP TABLE|VIEW [IF EXISTS] name [CASCADE]``: sent to DuckDB as written, once pdbq
    has checked that no rule or variable relation reads the relation (with CASCADE: dropped them)."""

    sql: str
    kind: str  # "TABLE" | "VIEW"
    names: tuple[str, ...]  # lower-cased, without a schema
    if_exists: bool = False
    cascade: bool = False
    line: int = 1
    col: int = 1


@dataclass(frozen=True)
class AlterRelation:
    """DuckDB's ``ALTER TABLE|VIEW name ...`` or ``CREATE OR REPLACE TABLE|VIEW name ...``: sent to
    DuckDB as written, then the rules and variable relations that read ``name`` are checked against
    the changed relation, and the change is undone (an error naming them) when one no longer holds."""

    sql: str
    kind: str  # "TABLE" | "VIEW"
    name: str  # lower-cased, without a schema
    line: int = 1
    col: int = 1


@dataclass(frozen=True)
class Show:
    # "VARIABLES" | "RULES" | "WEIGHTS" | "CALIBRATION" | "TABLES" | "ALL TABLES" (DuckDB's, without pdbq's storage)
    kind: str


class LearnMethod(enum.Enum):
    SGD = "SGD"
    SAMPLERANK = "SAMPLERANK"


class EstimateKind(enum.Enum):
    PROB = "PROB"
    DIST = "DIST"
    MAP = "MAP"
    STDERR = "STDERR"


@dataclass(frozen=True)
class Estimate:
    """One PROB/DIST/MAP/STDERR call in the SELECT list."""

    kind: EstimateKind
    alias: str  # the FROM alias (or relation name) it names: PROB(m)
    value: str | None = None  # PROB(m = 'PER'): the value as SQL literal text
    placeholder: str = ""  # the column name that stands for it in `select` (see ProbQuery)
    # PROB(a = b) / STDERR(a = b): the second alias (two aliases of one DOMAIN CLUSTER relation:
    # P(the rows' mentions are one entity), per pair of rows the query's FROM/WHERE select)
    other: str | None = None


@dataclass(frozen=True)
class GivenAtom:
    """GIVEN rel(key, ...) = value"""

    relation: str
    keys: tuple[str, ...]  # SQL literal texts
    value: str  # SQL literal text


@dataclass(frozen=True)
class GivenQuery:
    """GIVEN (select keys..., value) AS rel"""

    relation: str
    query: str


class Method(enum.Enum):
    AUTO = "AUTO"
    QAM = "QAM"
    GIBBS = "GIBBS"
    EXACT = "EXACT"
    ANNEAL = "ANNEAL"


OptionValue = Union[int, float, str, bool, None]


@dataclass(frozen=True)
class ProbQuery:
    """A SELECT using PROB/DIST/MAP/STDERR.

    ``select`` is the query with every estimate call replaced by a column reference named by its
    ``Estimate.placeholder`` (and GIVEN/USING/WITH removed): DuckDB evaluates it once the
    estimates exist as a relation. ``tree`` is the same as a sqlglot tree (do not mutate; copy).
    """

    select: str
    estimates: tuple[Estimate, ...]
    given: tuple[GivenAtom | GivenQuery, ...] = ()
    method: Method = Method.AUTO
    options: tuple[tuple[str, OptionValue], ...] = ()  # WITH (name = value, ...) in written order
    explain: bool = False
    text: str = ""
    tree: exp.Expression | None = field(default=None, compare=False, hash=False, repr=False)
    #: The same query with its long IN lists as literals (`pdbq.language.long_lists`), when
    #: ``tree`` reads any of them from one bound constant: asked when DuckDB refuses to compare
    #: the bound members' type with the other side's.
    as_written: ProbQuery | None = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class LearnWeights:
    """LEARN WEIGHTS [FOR rule, ...] [USING SGD | SAMPLERANK] [WITH (name = value, ...)].

    ``rules``: lower-cased rule names (empty: every rule with a learnable weight)."""

    rules: tuple[str, ...] = ()
    method: LearnMethod = LearnMethod.SGD
    options: tuple[tuple[str, OptionValue], ...] = ()
    text: str = ""



class SaveKind(enum.Enum):
    CREATE_TABLE = "CREATE TABLE"
    INSERT = "INSERT"
    COPY = "COPY"


#: The table name that stands for a `SaveAnswer`'s answer in its ``outer`` statement.
ANSWER_SOURCE = "__pdbq_answer__"


@dataclass(frozen=True)
class SaveAnswer:
    """``CREATE TABLE t AS``, ``INSERT INTO t`` or ``COPY (...) TO`` with a probabilistic query as
    the source: pdbq answers ``query``, then DuckDB runs ``outer``, the statement as written with
    the query replaced by ``SELECT * FROM __pdbq_answer__`` (`ANSWER_SOURCE`); ``query`` may also
    be an `ExplainMatch` (its rows saved). ``tree`` is ``outer`` as a sqlglot tree (do not mutate;
    copy)."""

    kind: SaveKind
    query: ProbQuery | ExplainMatch
    outer: str
    text: str = ""
    tree: exp.Expression | None = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class ImportUai:
    """IMPORT UAI 'file.uai' AS name [EVIDENCE 'file.evid']"""

    path: str
    name: str
    evidence: str | None = None
    text: str = ""


@dataclass(frozen=True)
class ExportUai:
    """EXPORT UAI name TO 'file.uai' [EVIDENCE 'file.evid']"""

    name: str
    path: str
    evidence: str | None = None
    text: str = ""


@dataclass(frozen=True)
class ExplainMatch:
    """EXPLAIN MATCH relation [(key, key), ...]: per candidate pair of a DOMAIN CLUSTER relation
    (all, or those listed; keys as SQL literal text) and field, the stored pair model's
    comparison level and contribution (rules with WEIGHT MODEL)."""

    relation: str
    pairs: tuple[tuple[str, str], ...] = ()
    text: str = ""


Statement = Union[PassThrough, CreateVariable, CreateRule, Drop, DropRelation, AlterRelation, Show, ProbQuery, LearnWeights, SaveAnswer, ImportUai,
                  ExportUai, ExplainMatch]

__all__ = [
    "ANSWER_SOURCE",
    "MAX_CATEGORIES",
    "AlterRelation",
    "Atom",
    "Column",
    "CreateRule",
    "CreateVariable",
    "Domain",
    "DomainKind",
    "Drop",
    "DropRelation",
    "Estimate",
    "EstimateKind",
    "ExplainMatch",
    "ExportUai",
    "FactorFunction",
    "GivenAtom",
    "GivenQuery",
    "Head",
    "HeadKind",
    "ImportUai",
    "LearnMethod",
    "LearnWeights",
    "Method",
    "OptionValue",
    "PassThrough",
    "ProbQuery",
    "SaveAnswer",
    "SaveKind",
    "Semantics",
    "Show",
    "Statement",
    "Term",
    "TermKind",
    "Weight",
    "WeightKind",
]
