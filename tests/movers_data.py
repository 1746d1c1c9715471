"""A generator of person records where people move: households, duplicates with typos, swaps,
blanks, new addresses and phones.

`movers(n, seed)` returns (table, entity) for about `n` records with columns
`rid, first_name, last_name, dob, email, phone, address, city, zip`:

* people live alone (80%, `HOUSEHOLDS`) or in households of 2–4 (a household shares last name, address, city, zip and,
  in 60% of households, a landline phone; members have their own first name, date of birth
  and, in 85% of cases, their own email; the rest share the household's email);
* twins (same date of birth in one household) occur in 3% of households;
* a share `dup` of the people have 1–3 further records, each with, independently: a typo in a
  name (25%), first and last name swapped (3%), day and month of birth swapped (5%), a blank
  field (8% per field), a **move** (45%: new address, city and zip together, and a new phone
  in 70% of moves), a new email (10%).

The stable identifiers (date of birth, email) agree on most pairs of one person, while the
moved fields (address, city, zip, phone) disagree *together*: among matches the fields are
dependent, which a model assuming independence within a class takes for strong evidence against.

Used by tests/test_coref_movers.py and examples/bench/er_movers.py (loaded by path).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# household sizes 1-4: their probabilities
HOUSEHOLDS = (0.8, 0.12, 0.05, 0.03)
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _word(rng, lo, hi):
    return "".join(rng.choice(_LETTERS, size=int(rng.integers(lo, hi))))


def _typo(rng, s):
    if not s:
        return s
    i = int(rng.integers(0, len(s)))
    r = rng.random()
    if r < 0.4:
        return s[:i] + str(rng.choice(_LETTERS)) + s[i + 1:]  # substitution
    if r < 0.7 and len(s) > 2:
        return s[:i] + s[i + 1:]  # deletion
    if r < 0.85 and i + 1 < len(s):
        return s[:i] + s[i + 1] + s[i] + s[i + 2:]  # transposition
    return s[:i] + str(rng.choice(_LETTERS)) + s[i:]  # insertion


def _phone(rng):
    return f"{rng.integers(200, 999)}-{rng.integers(100, 999)}-{rng.integers(1000, 9999)}"


def _place(rng, cities, streets):
    c = int(rng.integers(len(cities)))
    city, zips = cities[c]
    return f"{rng.integers(1, 9999)} {rng.choice(streets)} {rng.choice(_KINDS)}", city, str(rng.choice(zips))


_KINDS = np.array(["st", "ave", "rd", "ln", "dr", "ct", "way", "pl", "blvd"])


def movers(n: int, seed: int = 0, dup: float = 0.2) -> tuple[pa.Table, np.ndarray]:
    """About `n` person records (module docstring) and their entity (person) per record."""
    rng = np.random.default_rng(seed)
    streets = np.array([_word(rng, 4, 10) for _ in range(max(50, n // 20))])
    firsts = np.array([_word(rng, 3, 9) for _ in range(max(200, n // 30))])
    lasts = np.array([_word(rng, 4, 11) for _ in range(max(500, n // 8))])
    domains = np.array(["mail.com", "post.net", "inbox.org", "web.de", "fast.io", "corp.com"])
    n_cities = max(20, n // 500)
    cities = [(_word(rng, 5, 12), rng.integers(10000, 99999, size=int(rng.integers(1, 6)))) for _ in range(n_cities)]
    # Zipf-ish popularity of first and last names: common names recur
    pf = 1.0 / np.arange(1, firsts.size + 1) ** 0.8
    pl = 1.0 / np.arange(1, lasts.size + 1) ** 0.6
    pf, pl = pf / pf.sum(), pl / pl.sum()
    cols = {k: [] for k in ("first_name", "last_name", "dob", "email", "phone", "address", "city", "zip")}
    ent: list[int] = []
    person = 0
    while len(ent) < n:
        last = str(rng.choice(lasts, p=pl))
        address, city, zipc = _place(rng, cities, streets)
        landline = _phone(rng) if rng.random() < 0.6 else None
        family_email = f"{last}{rng.integers(1, 999)}@{rng.choice(domains)}"
        size = int(rng.choice([1, 2, 3, 4], p=HOUSEHOLDS))
        twins_dob = None
        if size >= 2 and rng.random() < 0.03:
            twins_dob = f"{rng.integers(1940, 2010)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
        for member in range(size):
            first = str(rng.choice(firsts, p=pf))
            dob = twins_dob if (twins_dob and member < 2) else \
                f"{rng.integers(1940, 2010)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
            email = family_email if rng.random() < 0.15 else f"{first}.{last}{rng.integers(1, 9999)}@{rng.choice(domains)}"
            phone = landline if landline is not None else _phone(rng)
            base = {"first_name": first, "last_name": last, "dob": dob, "email": email, "phone": phone,
                    "address": address, "city": city, "zip": zipc}
            k = 1 + (int(rng.integers(1, 4)) if rng.random() < dup else 0)
            for d in range(k):
                r = dict(base)
                if d:
                    if rng.random() < 0.45:  # moved: a new place, often a new phone
                        r["address"], r["city"], r["zip"] = _place(rng, cities, streets)
                        if rng.random() < 0.7:
                            r["phone"] = _phone(rng)
                    if rng.random() < 0.10:
                        r["email"] = f"{first}{rng.integers(1, 999)}@{rng.choice(domains)}"
                    for f in ("first_name", "last_name", "address", "email"):
                        if rng.random() < 0.25 / 2:
                            r[f] = _typo(rng, r[f])
                    if rng.random() < 0.03:
                        r["first_name"], r["last_name"] = r["last_name"], r["first_name"]
                    if rng.random() < 0.05:
                        y, mth, day = r["dob"].split("-")
                        if int(day) <= 12:
                            r["dob"] = f"{y}-{day}-{mth}"
                    for f in r:
                        if rng.random() < 0.08:
                            r[f] = None
                for f in cols:
                    cols[f].append(r[f])
                ent.append(person)
            person += 1
    tbl = pa.table({"rid": np.arange(len(ent)), **{f: pa.array(v, pa.string()) for f, v in cols.items()}})
    return tbl, np.asarray(ent)
