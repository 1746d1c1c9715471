"""Template-level analysis of one rule (seed 004, §3.1, Definitions 5 and 6).

Which atoms are the template's *terms*. In the paper every term of a template factor is a template
variable (random). In pdbq a rule's body also names observed tables; they only decide which
groundings exist (a subset of the paper's object-symbol assignments), and dropping factors or
variables never raises hierarchy width, so they are not terms. The terms are therefore the head
atom(s) and the body atoms over variable relations (``random_relations``). Without that set every
atom counts — the paper's literal reading, and the cautious one: an extra term can only shorten
the common prefix.

Object symbols of a term: its symbol arguments, in order. Constants are not object symbols and
are skipped; a wildcard ``_`` is an anonymous symbol that equals no other, so it ends the common
prefix at its position. Conditions and weight expressions filter groundings and play no part.

Hierarchy depth (Definition 5): the length d of the longest common prefix of the terms' symbol
sequences; the symbols of that prefix are the hierarchical symbols. Hierarchical (Definition 6):
every head symbol is hierarchical. Head symbols are the rule's resolved ``head_symbols`` (the
``^``-marked symbols, else the head atoms' symbols).

Lemma 7 (hw ≤ E for an instance of a hierarchical template with E template factors) speaks of one
factor per head-symbol assignment. pdbq grounds LOGICAL and RATIO rules that way (one head group
per head assignment) but stores each grounding of a LINEAR rule as its own factor, with bag
semantics: even a rule whose symbols are all head symbols gets two parallel factors from a
duplicated input row (docs/grounding.md). So only LOGICAL and RATIO rules are taken to give one
factor per head assignment (``one_factor_per_head``) and count towards Lemma 7.

>>> from pdbq.language.nodes import Atom, CreateRule, Head, HeadKind, Term, TermKind
>>> s = lambda name, hat=False: Term(TermKind.SYMBOL, name, hat)
>>> q = Atom("q", (s("x", True), s("y", True)))
>>> rule = CreateRule("ex7", Head(HeadKind.ATOM, (q,)),
...                   (Atom("a", (s("x"), s("y"), s("z"))), Atom("b", (s("x"), s("y")))),
...                   head_symbols=("x", "y"))
>>> t = analyze_template(rule)
>>> t.hierarchy_depth, t.hierarchical_symbols, t.hierarchical
(2, ('x', 'y'), True)
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pdbq.language.nodes import Atom, CreateRule, Semantics, TermKind

__all__ = ["TemplateAnalysis", "analyze_template", "atom_symbols", "head_symbols"]


@dataclass(frozen=True)
class TemplateAnalysis:
    rule: str
    semantics: Semantics
    terms: tuple[str, ...]  # relations of the atoms counted as terms, head first
    ignored: tuple[str, ...]  # body relations left out as observed
    head_symbols: tuple[str, ...]
    hierarchy_depth: int  # Definition 5
    hierarchical_symbols: tuple[str, ...]
    hierarchical: bool  # Definition 6
    one_factor_per_head: bool  # the grounding has one factor or head group per head assignment
    lemma7: bool  # counts as one template factor for Lemma 7's hw ≤ E on pdbq's ground graph

    def describe(self) -> str:
        """One line for SHOW RULES / EXPLAIN."""
        if self.hierarchical:
            verdict = f"hierarchical (depth {self.hierarchy_depth}"
            verdict += f": {', '.join(self.hierarchical_symbols)})" if self.hierarchical_symbols else ")"
        else:
            missing = [s for s in self.head_symbols if s not in self.hierarchical_symbols]
            verdict = f"not hierarchical (depth {self.hierarchy_depth}; head symbols {', '.join(missing)} not shared first)"
        if len(self.terms) == 1:
            # one random variable per factor (a prior): factors couple nothing, semantics cannot matter
            verdict += "; one variable per factor: mixes immediately"
        elif self.hierarchical and not self.lemma7:
            verdict += f"; {self.semantics.name} semantics: no guarantee of fast mixing (RATIO or LOGICAL give one)"
        elif self.lemma7 and self.semantics != Semantics.LINEAR:
            verdict += f"; {self.semantics.name} semantics: mixes in polynomial time when weights are bounded"
        return verdict


def atom_symbols(atom: Atom, fresh: list[int] | None = None) -> tuple[str, ...]:
    """The object-symbol sequence of an atom: symbols in order, constants skipped, each wildcard
    a fresh name that matches nothing."""
    fresh = [0] if fresh is None else fresh
    out = []
    for t in atom.terms:
        if t.kind == TermKind.SYMBOL:
            out.append(t.text)
        elif t.kind == TermKind.WILDCARD:
            fresh[0] += 1
            out.append(f"\x00_{fresh[0]}")
    return tuple(out)


def head_symbols(rule: CreateRule) -> tuple[str, ...]:
    """The rule's head symbols: ``rule.head_symbols`` when resolved, else the ``^``-marked symbols
    anywhere in the rule, else the head atoms' symbols (the parser's resolution)."""
    if rule.head_symbols:
        return tuple(rule.head_symbols)
    atoms = list(rule.head.atoms) + list(rule.body)
    marked = _unique(t.text for a in atoms for t in a.terms if t.kind == TermKind.SYMBOL and t.head)
    if marked:
        return marked
    return _unique(t.text for a in rule.head.atoms for t in a.terms if t.kind == TermKind.SYMBOL)


def _unique(items) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for x in items:
        seen.setdefault(x, None)
    return tuple(seen)


def analyze_template(rule: CreateRule, random_relations: Collection[str] | None = None) -> TemplateAnalysis:
    """Hierarchy depth and the hierarchical test of one rule (see the module docstring).

    ``random_relations``: names of variable relations; body atoms over other relations are
    observed and not terms. None counts every atom.
    """
    random = None if random_relations is None else {r.lower() for r in random_relations}
    terms = list(rule.head.atoms)
    ignored = []
    for atom in rule.body:
        if random is None or atom.relation.lower() in random:
            terms.append(atom)
        else:
            ignored.append(atom.relation)
    fresh = [0]
    seqs = [atom_symbols(a, fresh) for a in terms]
    depth = 0
    if seqs:
        shortest = min(len(s) for s in seqs)
        while depth < shortest and all(s[depth] == seqs[0][depth] for s in seqs):
            depth += 1
    hier = seqs[0][:depth] if seqs else ()
    heads = head_symbols(rule)
    hierarchical = all(h in hier for h in heads)
    one_per_head = rule.semantics in (Semantics.LOGICAL, Semantics.RATIO)
    return TemplateAnalysis(
        rule=rule.name,
        semantics=Semantics(rule.semantics),
        terms=tuple(a.relation for a in terms),
        ignored=tuple(ignored),
        head_symbols=heads,
        hierarchy_depth=depth,
        hierarchical_symbols=tuple(hier),
        hierarchical=hierarchical,
        one_factor_per_head=one_per_head,
        lemma7=hierarchical and one_per_head,
    )
