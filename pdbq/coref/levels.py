"""Comparison levels per field for the Fellegi–Sunter pair model, chosen from the values.

A field's comparison of two records is one of a few ordered *levels*, computed in DuckDB:

    -1 NULL on either side (no evidence: weight 0)
     0 exact (equal normalised values)
     1.. the field kind's similarity levels, most similar first
     L-1 else

Kinds, sniffed from the values themselves (not from the declared column type):

| kind | values | levels after "exact" (default thresholds) |
|---|---|---|
| `string` | short strings: names, streets, phones | Jaro–Winkler ≥ 0.92, ≥ 0.80 |
| `text` | long or many-word strings: titles, citations | token-set Jaccard ≥ 0.7, ≥ 0.4, ≥ 0.15 |
| `category` | strings with few distinct values | – |
| `code` | integers and digit strings (separators allowed): ids, phones, postcodes, street numbers, years | Damerau–Levenshtein ≤ 1, or as integers at most 1 apart |
| `date` | DATE columns, or values that parse as YYYYMMDD, YYYY-MM-DD, D/M/YYYY | day–month transposed, ≤ 1 edit, within 365 days |
| `number` | non-integer numbers | relative difference ≤ 0.01, ≤ 0.1 |
| `list` | LIST columns, compared as sets | Jaccard ≥ 0.5, > 0 |
| `codes` | derived, not a column: the model numbers and codes in a record's string and text fields (tokens mixing letters and digits, punctuation removed: "PS-LX350H" = "pslx350h") | shares a code / shares a code stem (the code up to its last digit: "SD1100IS" and "SD1100", "EL6985A" and "EL6985B") |

A `codes` field is added by `sniff_fields` when the string/text fields hold such tokens in many
records (product offers: `codes_field`); its `sources` are the columns it reads, and it is NULL
in a record without a code.

`FieldSpec(field, kind=None, thresholds=None)` overrides the kind and/or thresholds of one
field. Values are normalised once per record into `pdbq_fs_values` (column `v{k}` per field k,
plus `t{k}` token lists for text, `d{k}` dates, and `f{k}`: the share of non-NULL records
holding the record's value, for term-frequency adjustment).

Identifiers are quoted by sqlglot; thresholds are formatted numbers; no user text is pasted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sqlglot import exp

from pdbq.coref.kinds import KINDS
from pdbq.coref.layout import CorefInputError

__all__ = ["KINDS", "FieldSpec", "FieldLevels", "sniff_fields", "prepare_values", "gamma_sql", "VALUES"]

VALUES = "pdbq_fs_values"
_GENERATION = 0  # bumped whenever `pdbq_fs_values` is rebuilt: caches of its contents key on it
_DEFAULTS = {
    "string": (0.92, 0.80),
    "text": (0.7, 0.4, 0.15),
    "category": (),
    "code": (1,),
    "date": (365,),
    "number": (0.01, 0.1),
    "list": (0.5, 0.0),
    "codes": (),
}
# TF-IDF cosine levels of a text field that holds codes (`FieldLevels.tfidf`)
_TFIDF_DEFAULTS = (0.8, 0.6, 0.45, 0.3, 0.15)
_DATE_FORMATS = ("%Y%m%d", "%Y-%m-%d", "%d/%m/%Y", "%m/%d/%Y")
_SNIFF_SAMPLE = 5_000
# a string field with at most this many distinct values, each held by many records, is a category
_CATEGORY_MAX_DISTINCT = 30


def q(name: str) -> str:
    """A quoted DuckDB identifier."""
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _num(x: float) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x:
        raise CorefInputError(f"a threshold must be a number, got {x!r}")
    return repr(float(x))


@dataclass(frozen=True)
class FieldSpec:
    """A user's choice for one field: `kind` (one of `KINDS`, None = sniffed) and the similarity
    `thresholds` of its levels (None = the kind's defaults; see the module table)."""

    field: str
    kind: str | None = None
    thresholds: tuple[float, ...] | None = None


@dataclass(frozen=True)
class FieldLevels:
    """A field's resolved comparison: its kind, thresholds, level names (index = level), for
    dates the format the values were parsed with, and `swap_with`: another string field whose
    values this one's are often written in (given name and surname, two address lines), which
    adds the level "swapped": this record's value is the other record's value of that field;
    `words`: for strings of several words (restaurant names, street addresses), a level after
    the Jaro–Winkler ones for pairs sharing at least this Jaccard share of their words ("the
    palm" and "palm the (los angeles)", where the characters' order differs too much)."""

    field: str
    kind: str
    thresholds: tuple[float, ...]
    date_format: str | None = None
    swap_with: str | None = None
    words: float | None = None
    sources: tuple[str, ...] = ()
    tfidf: bool = False

    def __post_init__(self):
        # these reach SQL text (formatted numbers, a fixed format): only known values pass
        if self.kind not in KINDS:
            raise CorefInputError(f"field {self.field!r}: unknown comparison kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.date_format is not None and self.date_format not in _DATE_FORMATS:
            raise CorefInputError(f"field {self.field!r}: date format must be one of {', '.join(_DATE_FORMATS)}")
        if self.swap_with is not None and (self.kind != "string" or self.swap_with == self.field):
            raise CorefInputError(f"field {self.field!r}: a swapped level needs a string field and another field to swap with")
        if self.words is not None and (self.kind != "string" or not 0.0 < float(self.words) <= 1.0):
            raise CorefInputError(f"field {self.field!r}: a words level needs a string field and a share in (0, 1]")
        if self.tfidf and self.kind != "text":
            raise CorefInputError(f"field {self.field!r}: TF-IDF cosine levels need a text field")
        if (self.kind == "codes") != bool(self.sources):
            raise CorefInputError(f"field {self.field!r}: a codes comparison is derived from source columns, "
                                  "and only it has sources")
        for x in self.thresholds:
            _num(x)

    @property
    def derived(self) -> bool:
        """Whether the field is computed from other columns (`sources`) rather than read."""
        return bool(self.sources)

    @property
    def names(self) -> tuple[str, ...]:
        t = self.thresholds
        if self.kind == "string":
            mid = tuple(f"jaro_winkler>={x:g}" for x in t)
            if self.words is not None:
                mid += (f"words jaccard>={self.words:g}",)
        elif self.kind == "text" and self.tfidf:
            mid = tuple(f"tfidf cosine>={x:g}" for x in t)
        elif self.kind in ("text", "list"):
            mid = tuple(f"jaccard>={x:g}" if x > 0 else "jaccard>0" for x in t)
        elif self.kind == "code":
            mid = tuple(f"edits<={int(x)} or diff<={int(x)}" for x in t)
        elif self.kind == "date":
            mid = ("day-month transposed", "edits<=1") + tuple(f"within {int(x)} days" for x in t)
        elif self.kind == "number":
            mid = tuple(f"relative diff<={x:g}" for x in t)
        elif self.kind == "codes":
            mid = ("shares a code", "shares a code stem")
        else:
            mid = ()
        swap = (f"swapped with {self.swap_with}",) if self.swap_with is not None else ()
        return ("exact", *swap, *mid, "else")

    @property
    def n_levels(self) -> int:
        return len(self.names)

    @property
    def first_similar(self) -> int:
        """The level of the first similarity threshold (after exact and a swapped level)."""
        return 2 if self.swap_with is not None else 1

    def describe(self) -> str:
        src = f" of {', '.join(self.sources)}" if self.sources else ""
        return f"{self.field}: {self.kind}{src} ({' / '.join(self.names)})"


def _check_spec(spec: FieldSpec) -> None:
    if spec.kind is not None and spec.kind not in KINDS:
        raise CorefInputError(f"field {spec.field!r}: unknown comparison kind {spec.kind!r}; expected one of {', '.join(KINDS)}")
    if spec.thresholds is not None:
        for x in spec.thresholds:
            _num(x)
        if spec.kind in ("string", "text", "list", "number") or spec.kind is None:
            if any(not 0 <= float(x) <= 1 for x in spec.thresholds) and spec.kind != "number":
                raise CorefInputError(f"field {spec.field!r}: similarity thresholds must be in [0, 1], got {spec.thresholds}")


def _sniff_one(con, source: str, field: str, dtype: str) -> tuple[str, str | None]:
    t = dtype.upper()
    if t.endswith("[]") or t.startswith("LIST") or t.startswith("STRUCT") or t.startswith("MAP"):
        return ("list", None) if t.endswith("[]") or t.startswith("LIST") else ("string", None)
    if t in ("DATE",) or t.startswith("TIMESTAMP"):
        return "date", "%Y-%m-%d"
    if t == "BOOLEAN":
        return "category", None
    col = q(field)
    rows = con.execute(
        f"SELECT trim(CAST({col} AS VARCHAR)) AS s FROM {source} WHERE {col} IS NOT NULL "
        f"AND trim(CAST({col} AS VARCHAR)) <> '' USING SAMPLE {_SNIFF_SAMPLE} ROWS (reservoir, 7)"
    ).fetchall()
    vals = [r[0] for r in rows]
    if not vals:
        return "string", None
    n = len(vals)
    for fmt, pat in (("%Y%m%d", r"^\d{8}$"), ("%Y-%m-%d", r"^\d{4}-\d{1,2}-\d{1,2}$"), ("%d/%m/%Y", r"^\d{1,2}/\d{1,2}/\d{4}$")):
        rx = re.compile(pat)
        if sum(1 for v in vals if rx.match(v)) >= 0.95 * n:
            fmts = [fmt] if fmt != "%d/%m/%Y" else ["%d/%m/%Y", "%m/%d/%Y"]
            best, ok = None, -1
            probe = vals[:500]  # strptime is slow; a few hundred values decide the format
            for f in fmts:
                good = sum(1 for v in probe if _parses(v, f))
                if good > ok:
                    best, ok = f, good
            if ok >= 0.8 * len(probe):
                return "date", best
    if (t in ("DOUBLE", "FLOAT", "REAL") or t.startswith("DECIMAL")) and not all(re.match(r"^[+-]?\d+(\.0+)?$", v) for v in vals):
        return "number", None  # a decimal column with fractions (prices) is a number, never a digit code
    if all(re.match(r"^[+-]?\d+(\.0+)?$", v) for v in vals):
        return "code", None
    # numbers with a fraction (prices, measurements: 12.50, 149): compared by relative
    # difference; checked before the separators rule below, which would read 12.50 as code 1250
    if all(re.match(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", v) for v in vals):
        return "number", None
    # phones, ids and postcodes written with separators: digits once punctuation and spaces go
    digits = [re.sub(r"[^0-9a-zA-Z]", "", v) for v in vals]
    if sum(1 for d in digits if d.isdigit() and len(d) >= 3) >= 0.95 * n:
        return "code", None
    distinct = len(set(v.lower() for v in vals))
    words = sum(len(v.split()) for v in vals) / n
    chars = sum(len(v) for v in vals) / n
    if distinct <= _CATEGORY_MAX_DISTINCT and distinct * 20 <= n:
        return "category", None
    if chars > 30 or words >= 4:
        return "text", None
    return "string", None


def _parses(v: str, fmt: str) -> bool:
    import datetime

    try:
        datetime.datetime.strptime(v, fmt)
        return True
    except ValueError:
        return False


def sniff_fields(con, source: str, columns: dict[str, str], fields: list[str], specs: dict[str, FieldSpec] | None = None) -> tuple[FieldLevels, ...]:
    """Resolve each field's kind (sniffed from its values unless `specs` names one) and thresholds."""
    specs = specs or {}
    out = []
    for f in fields:
        if f not in columns:
            from pdbq.errors import suggest

            raise CorefInputError(f"field {f!r} is not a column of the records.{suggest(f, columns)}")
        spec = specs.get(f, FieldSpec(f))
        _check_spec(spec)
        kind, fmt = _sniff_one(con, source, f, columns[f])
        if spec.kind is not None and spec.kind != kind:
            if spec.kind == "date" and fmt is None:
                fmt = "%Y%m%d"
            kind = spec.kind
        th = tuple(spec.thresholds) if spec.thresholds is not None else _DEFAULTS[kind]
        out.append(FieldLevels(f, kind, th, fmt if kind == "date" else None))
    strings = [fl.field for fl in out if fl.kind == "string"]
    partners = _swap_partners(con, source, strings)
    several = {f for f in strings if _several_words(con, source, f)}
    out = [FieldLevels(fl.field, fl.kind, fl.thresholds, fl.date_format, partners.get(fl.field),
                       _WORDS_LEVEL if fl.field in several else None) for fl in out]
    codes = codes_field(con, source, [fl.field for fl in out if fl.kind in ("string", "text")], set(columns))
    if codes is None:
        return tuple(out)
    # text that carries codes (product offers) is compared by TF-IDF cosine over words and
    # character 3-grams: "PS-LX350H" and "PSLX350H" share most grams, and a rare shared word
    # weighs more than a common one; in text without codes (titles, author lists) word-set
    # Jaccard is kept
    out = [replace(fl, tfidf=True, thresholds=tuple(specs[fl.field].thresholds) if fl.field in specs and
                   specs[fl.field].thresholds is not None else _TFIDF_DEFAULTS) if fl.kind == "text" else fl for fl in out]
    return tuple(out + [codes])


# a record holds a model number / code: a token of letters and digits mixed, ≥ 3 characters once
# its punctuation goes ("PS-LX350H", "KDL-40Z4100/B", "9UEA.017.00"), or of ≥ 8 digits (a part
# number, a UPC); a code field is added when
# at least this share of the records hold one: then codes identify things (product offers), where
# in person or citation records such tokens are rare (a flat "12a")
_CODES_MIN_SHARE = 0.3
CODES_FIELD = "codes"


def _code_tokens(cols: list[str]) -> str:
    """SQL: the sorted distinct code tokens of the columns `cols` (quoted) of one record. Only
    values of several words are read: a code inside a name or description identifies a thing,
    where a value that is one code ("city12", an id) is already its own field's exact level."""
    text = " || ' ' || ".join(f"coalesce(CASE WHEN strpos(trim(CAST({c} AS VARCHAR)), ' ') > 0 THEN "
                              f"lower(CAST({c} AS VARCHAR)) END, '')" for c in cols)
    toks = f"list_transform(string_split_regex({text}, '[\\s,;()\\[\\]]+'), lambda w: regexp_replace(w, '[^a-z0-9]', '', 'g'))"
    # part numbers and UPCs are digits only ("010-10609-00"): a long run of digits written with
    # separators is a code too, where a short one is a quantity
    keep = ("lambda w: (length(w) >= 3 AND regexp_matches(w, '[a-z]') AND regexp_matches(w, '[0-9]')) OR "
            "(length(w) >= 8 AND regexp_full_match(w, '[0-9]+'))")
    return f"list_sort(list_distinct(list_filter({toks}, {keep})))"


def codes_field(con, source: str, fields: list[str], taken: set[str]) -> FieldLevels | None:
    """The derived `codes` comparison of the string/text `fields` (module docstring), or None
    when fewer than `_CODES_MIN_SHARE` of the (sampled) records hold a code."""
    if not fields:
        return None
    cols = [q(f) for f in fields]
    share = con.execute(f"SELECT avg(CASE WHEN len({_code_tokens(cols)}) > 0 THEN 1.0 ELSE 0.0 END) FROM "
                        f"(SELECT * FROM {source} USING SAMPLE {_SNIFF_SAMPLE} ROWS (reservoir, 7))").fetchall()[0][0]
    if share is None or float(share) < _CODES_MIN_SHARE:
        return None
    name = CODES_FIELD
    while name in taken:
        name = "_" + name
    return FieldLevels(name, "codes", _DEFAULTS["codes"], sources=tuple(fields))


_WORDS_LEVEL = 0.5  # half the words shared (Jaccard): "the palm" / "palm the (los angeles)"


def _several_words(con, source: str, field: str) -> bool:
    """Whether most (sampled) values of a string field have more than one word."""
    col = _norm_string(q(field))
    x = con.execute(f"SELECT avg(CASE WHEN strpos(v, ' ') > 0 THEN 1.0 ELSE 0.0 END) FROM (SELECT {col} AS v FROM {source} "
                    f"USING SAMPLE {_SNIFF_SAMPLE} ROWS (reservoir, 7)) WHERE v IS NOT NULL").fetchall()[0][0]
    return x is not None and float(x) >= 0.5


# two string fields are swap partners when at least this share of each one's records (sampled)
# holds a value that is also a value of the other: names and surnames, two address lines; below
# it (a suburb that is also a street name) a swapped level would cost a comparison per pair for
# pairs that hardly ever occur
_SWAP_OVERLAP = 0.05


def _swap_partners(con, source: str, fields: list[str]) -> dict[str, str]:
    """Each string field's swap partner (`FieldLevels.swap_with`), chosen from the values: the
    field whose value set holds the largest share of this one's values, both ways at least
    `_SWAP_OVERLAP`; each field has at most one partner and partners are mutual."""
    if len(fields) < 2:
        return {}
    sampled = " UNION ALL ".join(f"SELECT {k} AS f, {_norm_string(q(x))} AS v FROM s" for k, x in enumerate(fields))
    distinct = " UNION ALL ".join(f"SELECT DISTINCT {k} AS g, {_norm_string(q(x))} AS v FROM {source}" for k, x in enumerate(fields))
    # per ordered pair (f, g): how many of f's sampled non-NULL values are values of g
    rows = con.execute(
        f"WITH s AS (SELECT * FROM {source} USING SAMPLE {_SNIFF_SAMPLE} ROWS (reservoir, 7)), "
        f"sv AS ({sampled}), dv AS ({distinct}), tot AS (SELECT f, count(v) AS n FROM sv GROUP BY f) "
        f"SELECT sv.f, dv.g, count(*) / any_value(tot.n) FROM sv JOIN dv ON sv.v = dv.v AND sv.f <> dv.g "
        f"JOIN tot ON tot.f = sv.f GROUP BY sv.f, dv.g").fetchall()
    share = {(f, g): 0.0 for f in fields for g in fields if f != g}
    share.update({(fields[a], fields[b]): float(x) for a, b, x in rows})
    pairs = sorted(((min(share[(f, g)], share[(g, f)]), f, g) for f in fields for g in fields if f < g), reverse=True)
    out: dict[str, str] = {}
    for s, f, g in pairs:
        if s >= _SWAP_OVERLAP and f not in out and g not in out:
            out[f], out[g] = g, f
    return out


def _norm_string(col: str) -> str:
    return (f"nullif(trim(regexp_replace(regexp_replace(strip_accents(lower(CAST({col} AS VARCHAR))), "
            f"'[^a-z0-9 ]', '', 'g'), ' +', ' ', 'g')), '')")


def _norm_words(col: str) -> str:
    # punctuation separates words in free text: "cascade-correlation" and "cascade correlation",
    # "S.E." and "S. E." are the same words, where deleting it would fuse them into another word
    return (f"nullif(trim(regexp_replace(regexp_replace(strip_accents(lower(CAST({col} AS VARCHAR))), "
            f"'[^a-z0-9 ]', ' ', 'g'), ' +', ' ', 'g')), '')")


def _value_columns(k: int, fl: FieldLevels, dtype: str) -> list[str]:
    col = q(fl.field)
    t = dtype.upper()
    if fl.kind in ("string", "category"):
        return [f"{_norm_string(col)} AS v{k}"]
    if fl.kind == "text":
        # the value is its sorted word set: "exact" = the same words in any order, as the token levels see it
        t = f"list_sort(list_distinct(list_filter(string_split({_norm_words(col)}, ' '), lambda x: x <> '')))"
        return [f"nullif(array_to_string({t}, ' '), '') AS v{k}", f"{t} AS t{k}"]
    if fl.kind == "code":
        raw = f"CAST(TRY_CAST({col} AS BIGINT) AS VARCHAR)" if t in ("DOUBLE", "FLOAT", "REAL") or t.startswith("DECIMAL") else f"CAST({col} AS VARCHAR)"
        return [f"nullif(regexp_replace(lower({raw}), '[^a-z0-9]', '', 'g'), '') AS v{k}"]
    if fl.kind == "number":
        return [f"TRY_CAST({col} AS DOUBLE) AS v{k}"]
    if fl.kind == "date":
        if t == "DATE" or t.startswith("TIMESTAMP"):
            d = f"CAST({col} AS DATE)"
            return [f"strftime({d}, '%Y%m%d') AS v{k}", f"{d} AS d{k}"]
        s = f"trim(CAST({col} AS VARCHAR))"
        fmt = (fl.date_format or "%Y%m%d").replace("'", "")
        d = f"CAST(try_strptime({s}, '{fmt}') AS DATE)"
        return [f"coalesce(strftime({d}, '%Y%m%d'), nullif(regexp_replace({s}, '[^0-9]', '', 'g'), '')) AS v{k}", f"{d} AS d{k}"]
    if fl.kind == "codes":
        # a code held by more than 1% of the records (a "1080p", a "2gb") names a feature, not a thing
        toks = _code_tokens([q(f) for f in fl.sources])
        return [f"{toks} AS c{k}"]
    if fl.kind == "list":
        return [f"CASE WHEN len({col}) > 0 THEN list_sort(list_distinct(list_transform({col}, lambda x: lower(CAST(x AS VARCHAR))))) END AS v{k}"]
    raise CorefInputError(f"unknown kind {fl.kind!r}")


def prepare_values(con, records_table: str, mention: str, columns: dict[str, str], fields: tuple[FieldLevels, ...]) -> None:
    """Create `pdbq_fs_values(m, v0.., t.., d.., f..)` (module docstring), one row per record."""
    for fl in fields:
        if fl.derived:
            missing = [c for c in fl.sources if c not in columns]
            if missing:
                raise CorefInputError(f"field {fl.field!r} is derived from column {missing[0]!r}, which the records lack")
            continue
        if fl.kind == "list" and not columns[fl.field].upper().endswith("[]"):
            raise CorefInputError(f"field {fl.field!r} has type {columns[fl.field]}; kind 'list' needs a LIST column")
    sel = [f"{q(mention)} AS m"]
    for k, fl in enumerate(fields):
        sel.extend(_value_columns(k, fl, columns.get(fl.field, "")))
    con.execute(f"CREATE OR REPLACE TEMP TABLE __pdbq_fs_raw AS SELECT {', '.join(sel)} FROM {q(records_table)}")
    for k, fl in enumerate(fields):
        if fl.kind == "codes":
            _codes_values(con, k)
    tf = []
    for k, _ in enumerate(fields):
        # share of the non-NULL records holding this record's value (term frequency)
        tf.append(f"CASE WHEN v{k} IS NOT NULL THEN count(*) OVER (PARTITION BY v{k}) / "
                  f"greatest(count(v{k}) OVER (), 1) END AS f{k}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {VALUES} AS SELECT *, {', '.join(tf)} FROM __pdbq_fs_raw ORDER BY m")
    global _GENERATION
    _GENERATION += 1
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary AND "
                               "starts_with(table_name, '__pdbq_words')").fetchall():
        con.execute(f"DROP TABLE IF EXISTS {q(name)}")  # word tables of the previous values
    con.execute("DROP TABLE IF EXISTS __pdbq_fs_raw")


_CODE_MAX_SHARE = 0.01


def _codes_values(con, k: int) -> None:
    """Columns v{k} (the record's identifying codes, space-joined: "exact" = the same codes) and
    t{k} (their list) of a codes field from its raw lists c{k}: codes held by more than
    `_CODE_MAX_SHARE` of the records (at least 3) are dropped (module docstring)."""
    n = int(con.execute("SELECT count(*) FROM __pdbq_fs_raw").fetchall()[0][0])
    cap = max(3, int(_CODE_MAX_SHARE * n))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE __pdbq_fs_codes AS WITH t AS (SELECT m, unnest(c{k}) AS w FROM __pdbq_fs_raw), "
        f"df AS (SELECT w FROM t GROUP BY w HAVING count(DISTINCT m) <= {cap}) "
        f"SELECT m, list_sort(list_distinct(list(t.w))) AS t{k} FROM t JOIN df USING (w) GROUP BY m")
    # a code's stem: up to its last digit (a colour or region suffix goes), kept when it still has a
    # letter and 4 characters, and like a code dropped when held by more than the cap
    stem = "regexp_extract(w, '^(.*[0-9])', 1)"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE __pdbq_fs_stems AS WITH t AS (SELECT DISTINCT m, {stem} AS w FROM "
        f"(SELECT m, unnest(c{k}) AS w FROM __pdbq_fs_raw)), t2 AS (SELECT * FROM t WHERE length(w) >= 4 AND "
        f"regexp_matches(w, '[a-z]')), df AS (SELECT w FROM t2 GROUP BY w HAVING count(*) <= {cap}) "
        f"SELECT m, list_sort(list(t2.w)) AS s{k} FROM t2 JOIN df USING (w) GROUP BY m")
    con.execute(f"CREATE OR REPLACE TEMP TABLE __pdbq_fs_raw AS SELECT r.* EXCLUDE (c{k}), "
                f"nullif(array_to_string(c.t{k}, ' '), '') AS v{k}, c.t{k}, coalesce(s.s{k}, []) AS s{k} "
                f"FROM __pdbq_fs_raw r LEFT JOIN __pdbq_fs_codes c USING (m) LEFT JOIN __pdbq_fs_stems s USING (m)")
    con.execute("DROP TABLE IF EXISTS __pdbq_fs_stems")
    con.execute("DROP TABLE IF EXISTS __pdbq_fs_codes")


def values_generation() -> int:
    """A number that changes whenever `prepare_values` rebuilds `pdbq_fs_values`."""
    return _GENERATION


def _jaccard(a: str, b: str) -> str:
    inter = f"len(list_intersect({a}, {b}))"
    return f"(CAST({inter} AS DOUBLE) / greatest(len({a}) + len({b}) - {inter}, 1))"


def _edits(a: str, b: str, x: float) -> str:
    # Damerau–Levenshtein is ~6x slower than Levenshtein in DuckDB: only asked where a
    # transposition could be what separates two equally long values
    return (f"(levenshtein({a}, {b}) <= {_num(x)} OR (length({a}) = length({b}) AND "
            f"levenshtein({a}, {b}) <= {_num(x + 1)} AND damerau_levenshtein({a}, {b}) <= {_num(x)}))")


def _within(a: str, b: str, x: float) -> str:
    # two integers a unit apart can differ in every digit ("1989" / "1990", "099" / "100"):
    # the edit distance alone puts a year off by one across a decade in "else"
    return f"coalesce(abs(TRY_CAST({a} AS HUGEINT) - TRY_CAST({b} AS HUGEINT)) <= {_num(x)}, false)"


def gamma_sql(k: int, fl: FieldLevels, left: str = "l", right: str = "r", partner: int | None = None,
              words: bool = True) -> str:
    """The level of field k for a pair of `pdbq_fs_values` rows aliased `left`, `right` (SQL);
    `partner`: the column index of `fl.swap_with` (needed when it is set). `words=False` leaves
    out the words level (its pairs and the else level's share the words level's index), for a
    caller that splits them itself (`pdbq.coref.pair_levels`: per-pair word lists in DuckDB
    cost ~40 µs a pair)."""
    lv, rv = f"{left}.v{k}", f"{right}.v{k}"
    whens = [f"WHEN {lv} IS NULL OR {rv} IS NULL THEN -1", f"WHEN {lv} = {rv} THEN 0"]
    preds: list[str] = []
    if fl.swap_with is not None:
        if partner is None:
            raise CorefInputError(f"field {fl.field!r}: the swapped level needs the column of {fl.swap_with!r}")
        lp, rp = f"{left}.v{int(partner)}", f"{right}.v{int(partner)}"
        preds.append(f"coalesce({lv} = {rp} OR {rv} = {lp}, false)")
    t = fl.thresholds
    if fl.kind == "string":
        preds += [f"jaro_winkler_similarity({lv}, {rv}) >= {_num(x)}" for x in t]
        if fl.words is not None and words:
            w = _jaccard(f"list_distinct(string_split({lv}, ' '))", f"list_distinct(string_split({rv}, ' '))")
            preds.append(f"{w} >= {_num(fl.words)}")
    elif fl.kind == "text":
        jac = _jaccard(f"{left}.t{k}", f"{right}.t{k}")
        preds = [f"{jac} >= {_num(x)}" if x > 0 else f"{jac} > 0" for x in t]
    elif fl.kind == "codes":
        preds = [f"len(list_intersect({left}.t{k}, {right}.t{k})) > 0",
                 f"len(list_intersect({left}.s{k}, {right}.s{k})) > 0"]
    elif fl.kind == "list":
        jac = _jaccard(lv, rv)
        preds = [f"{jac} >= {_num(x)}" if x > 0 else f"{jac} > 0" for x in t]
    elif fl.kind == "code":
        preds = [f"({_edits(lv, rv, x)} OR {_within(lv, rv, x)})" for x in t]
    elif fl.kind == "number":
        preds = [f"abs({lv} - {rv}) <= {_num(x)} * greatest(abs({lv}), abs({rv}))" for x in t]
    elif fl.kind == "date":
        ld, rd = f"{left}.d{k}", f"{right}.d{k}"
        preds = [
            f"coalesce(year({ld}) = year({rd}) AND month({ld}) = day({rd}) AND day({ld}) = month({rd}), false)",
            _edits(lv, rv, 1),
        ] + [f"coalesce(abs(date_diff('day', {ld}, {rd})) <= {_num(x)}, false)" for x in t]
    for i, p in enumerate(preds, start=1):
        whens.append(f"WHEN {p} THEN {i}")
    return f"CAST(CASE {' '.join(whens)} ELSE {len(preds) + 1} END AS TINYINT)"
