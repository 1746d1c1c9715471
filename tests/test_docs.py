"""The documentation cannot drift from pdbq: every example marked as one in README.md and docs/*.md
runs, its shown output is checked, every internal link resolves, and user docs speak of features,
not of issue numbers or seed files.

The marker convention (docs/architecture.md, "Examples in the docs"):

* a fenced block whose info string is ``sql example`` runs in the ``pdbq`` shell, every such block of
  a page in order on one in-memory database; ``python example`` blocks run in order in one namespace
  per page. Both run in a fresh temporary directory, so examples may write files there.
* ``<!-- sql example ... -->`` / ``<!-- python example ... -->`` comments are hidden setup steps
  (data a reader has in their own files), run the same way but not shown.
* python examples see the database the page's sql examples run on as ``db`` (snippets written
  against "your" database run against the page's model).
* the temporary directory they run in has ``examples/`` of the checkout, as a reader's checkout does.
* a ``text output`` block right after an example is what that example prints; it is compared line
  by line (trailing spaces ignored). Only deterministic output (EXACT answers, fixed seeds) is
  shown this way; wall times (``0.803 s``, ``real 0.012``) are the one thing not compared.
* a ``sql example`` block whose lines start with ``pdbq> `` is a shell transcript: each ``pdbq> ``
  line (with its ``...> `` continuation lines) runs in the page's shell, and the lines up to the
  next prompt are what it prints, results and then warnings and errors, compared as above. A step
  may fail only where its shown output says ``Error:``. ``$ pdbq [FILE]`` opens ``FILE`` (the
  banner it prints is checked by its own test, not in transcripts).
* a ``sh example`` block holds ``pdbq`` command lines (``pdbq ARGS``, ``pdbq ARGS > FILE``,
  ``cat FILE | pdbq ARGS``; ``# comments``); each runs through ``pdbq.shell.cli.main`` with an
  empty standard input (so ``pdbq FILE`` opens the file and exits) and must exit with status 0.
  They run in the page's command directory, a fresh one apart from the page's database files
  (a reader's own shell, not the page's session), holding ``examples/`` and the page's files:
* ``<!-- file NAME`` ... ``-->`` is a hidden file (data a reader has) written into both
  directories, and ``sql example file=NAME`` saves a shown block as NAME there too (the
  ``model.sql`` a page tells the reader to write).* ``needs=MODULE[,MODULE]`` after ``example`` (an optional extra: matplotlib, distributed): without
  the module that example is left out, the rest still run, and the test is skipped naming it.
* every ``sql`` / ``python`` / ``sh`` fence outside benchmarks.md and architecture.md is an example
  or has ``<!-- not run: REASON -->`` on the line above it.
* a fence with no language, or ``text``, right after an example (only prose between) reads as that
  example's output: it must be a ``text output`` block (compared), or have
  ``<!-- not output: REASON -->`` on the line above it (a grammar, a banner checked elsewhere).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import pdbq
from pdbq.shell.repl import Shell
from pdbq.shell.session import banner

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages that keep the project's history and provenance, where issue numbers and papers' files may appear.
HISTORY_PAGES = {"benchmarks.md"}
# Pages for contributors (measurement recipes, the package map) whose code fences need not run.
UNCHECKED_PAGES = {"benchmarks.md", "architecture.md"}
# Fences of these languages are examples, or say why they are not run.
CODE_LANGS = {"sql", "python", "py", "sh", "bash", "shell", "console"}

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(.*)$")
_HIDDEN = re.compile(r"^<!--\s*(sql|python|sh) example(?:\s+needs=(\S+))?\s*$")
_HIDDEN_FILE = re.compile(r"^<!--\s*file\s+(\S+)\s*$")
_INTERNAL_HISTORY = re.compile(r"\bissues?\s+#?\d+|\bseeds?\s+0\d\d\b|\bNOTES\.md\b", re.IGNORECASE)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_PROMPT = "pdbq> "
_MORE = re.compile(r"^\.\.\.> ?")
_COMMAND = re.compile(r"^\$ pdbq(?:\s+(\S+))?\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
_NOT_OUTPUT = re.compile(r"^<!--\s*not output:\s*(\S.*?)\s*-->\s*$")
_SECONDS = re.compile(r"\b\d+(?:\.\d+)?(?= s\b)|(?<=real )\d+\.\d+")


@dataclass
class Block:
    lang: str  # sql, python, text, ...
    role: str  # "example", "output" or ""
    text: str
    line: int  # 1-based line of the opening fence
    hidden: bool = False
    file: str | None = None  # a hidden file's name, or ``file=NAME`` on an example
    needs: tuple[str, ...] = ()  # ``needs=mod,...``: optional modules the example imports


def blocks(text: str) -> list[Block]:
    """Fenced blocks at the left margin and hidden example comments, in page order."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        hidden = _HIDDEN.match(lines[i])
        if fence:
            marker, info = fence.group(1), fence.group(2).split()
            body, j = [], i + 1
            while j < len(lines) and not lines[j].startswith(marker[0] * len(marker)):
                body.append(lines[j])
                j += 1
            lang = info[0] if info else ""
            role = info[1] if len(info) > 1 else ""
            name = next((t[len("file="):] for t in info[2:] if t.startswith("file=")), None)
            needs = next((tuple(t[len("needs="):].split(",")) for t in info[2:] if t.startswith("needs=")), ())
            found.append(Block(lang, role, "\n".join(body), i + 1, file=name, needs=needs))
            i = j + 1
        elif hidden or _HIDDEN_FILE.match(lines[i]):
            body, j = [], i + 1
            while j < len(lines) and lines[j].strip() != "-->":
                body.append(lines[j])
                j += 1
            if hidden:
                needs = tuple(hidden.group(2).split(",")) if hidden.group(2) else ()
                found.append(Block(hidden.group(1), "example", "\n".join(body), i + 1, hidden=True, needs=needs))
            else:
                name = _HIDDEN_FILE.match(lines[i]).group(1)
                found.append(Block("file", "example", "\n".join(body) + "\n", i + 1, hidden=True, file=name))
            i = j + 1
        else:
            i += 1
    return found


def _examples(page: Path) -> list[tuple[Block, Block | None]]:
    """Each example with the ``text output`` block that follows it, if any."""
    bs = blocks(page.read_text(encoding="utf-8"))
    out = []
    for k, b in enumerate(bs):
        if b.role == "example":
            nxt = bs[k + 1] if k + 1 < len(bs) else None
            out.append((b, nxt if nxt is not None and nxt.role == "output" else None))
    return out


def _same(got: str, want: str) -> bool:
    """Line by line, trailing spaces ignored, wall times (the one thing no seed fixes) not compared."""
    strip = lambda s: [_SECONDS.sub("<t>", ln.rstrip()) for ln in s.strip("\n").splitlines()]  # noqa: E731
    return strip(got) == strip(want)


@dataclass
class Step:
    """One input of a shell transcript and what the page shows it printing (None: not compared)."""

    text: str
    shown: str | None
    line: int


def is_transcript(block: Block) -> bool:
    first = next((ln for ln in block.text.splitlines() if ln.strip()), "")
    return block.lang == "sql" and (first.startswith(_PROMPT) or bool(_COMMAND.match(first)))


def transcript(block: Block) -> list[Step]:
    """The steps of a ``pdbq>`` transcript: prompts and continuation lines are what is typed, every
    other line what the step before printed."""
    steps: list[Step] = []
    typing = False
    for k, line in enumerate(block.text.splitlines()):
        number = block.line + 1 + k
        command = _COMMAND.match(line)
        if line.startswith(_PROMPT.rstrip()):
            steps.append(Step(line[len(_PROMPT):], "", number))
            typing = True
        elif typing and _MORE.match(line):
            steps[-1].text += "\n" + line[len(_MORE.match(line).group(0)):]
        elif command:
            steps.append(Step(f".open {command.group(1) or ':memory:'}", None, number))
            typing = False
        elif not steps:
            raise AssertionError(f"line {number}: a transcript starts with 'pdbq> ' or '$ pdbq'")
        else:
            typing = False
            if steps[-1].shown is not None:
                steps[-1].shown += line + "\n"
    return steps


def _printed(shell: Shell, text: str) -> str:
    """Run ``text`` in the shell; what it printed: results, then warnings and errors (stderr)."""
    out, err = shell.out.tell(), shell.err.tell()
    shell.run_text(text)
    shell.out.seek(out)
    shell.err.seek(err)
    return shell.out.read() + _without_compile_notices(shell.err.read())


def _without_compile_notices(text: str) -> str:
    """stderr without the kernels' one-time compilation notices: whether they appear depends on
    numba's cache on the machine (like wall times), not on what the page shows."""
    keep = [line for line in text.splitlines(keepends=True)
            if not line.startswith(("pdbq: compiling", "first use on this machine: compiled"))]
    return "".join(keep)


EXAMPLE_PAGES = [p for p in PAGES if _examples(p)]


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_examples_run_and_print_what_the_page_shows(page: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # as in a checkout: examples/movies.sql
    run_examples(page)


def run_examples(page: Path) -> None:
    """Run the page's examples in the current directory; an AssertionError says what drifted."""
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    db = pdbq.connect()
    shell = Shell(db, out=io.StringIO(), err=io.StringIO(), progress=False)
    namespace: dict = {"__name__": f"docs_{page.stem}", "db": db}
    commands = Path("sh").resolve()  # the page's command directory (see the module docstring)
    commands.mkdir()
    (commands / "examples").symlink_to(ROOT / "examples")
    missing: dict[str, list[str]] = {}  # optional module -> the examples that need it
    try:
        for block, shown in _examples(page):
            where = f"{name}:{block.line}"
            absent = [m for m in block.needs if importlib.util.find_spec(m) is None]
            if absent:
                for m in absent:
                    missing.setdefault(m, []).append(where)
                continue
            if block.lang == "file":
                for folder in (Path.cwd(), commands):
                    (folder / block.file).write_text(block.text, encoding="utf-8")
                continue
            if block.lang == "sh":
                printed = "".join(run_command(line, commands, f"{name}:{number}")
                                  for number, line in command_lines(block))
                if shown is not None:
                    assert _same(printed, shown.text), f"{where}: the commands printed\n{printed}\nthe page shows\n{shown.text}"
                continue
            if block.file is not None:
                for folder in (Path.cwd(), commands):
                    (folder / block.file).write_text(block.text + "\n", encoding="utf-8")
            if block.lang == "sql" and is_transcript(block):
                assert shown is None, f"{where}: a transcript shows its output after each prompt"
                for step in transcript(block):
                    _check_step(shell, step, f"{name}:{step.line}")
                continue
            if block.lang == "sql":
                printed = _printed(shell, block.text)
                assert not shell.failed, f"{where}: the example failed:\n{printed}"
            elif block.lang == "python":
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    exec(compile(block.text, where, "exec"), namespace)  # noqa: S102 - the docs' own examples
                printed = buffer.getvalue()
            else:
                raise AssertionError(f"{where}: examples are sql or python, not {block.lang!r}")
            if shown is not None:
                assert _same(printed, shown.text), f"{where}: the example printed\n{printed}\nthe page shows\n{shown.text}"
        if missing:  # the rest ran and passed; say what did not run rather than pass quietly
            pytest.skip("not run without " + "; ".join(f"{m}: {', '.join(w)}" for m, w in missing.items()))
    finally:
        own = namespace.get("db")
        if own is not db and isinstance(own, pdbq.Database):  # one the page's examples opened
            own.close()
        db.close()


def command_lines(block: Block) -> list[tuple[int, str]]:
    """The command lines of a ``sh example`` with their page line numbers; a line ending in ``\\``
    goes on on the next one, as in a terminal."""
    out: list[tuple[int, str]] = []
    going_on = False
    for k, line in enumerate(block.text.splitlines()):
        if going_on:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
        else:
            out.append((block.line + 1 + k, line))
        going_on = out[-1][1].rstrip().endswith("\\")
        if going_on:
            out[-1] = (out[-1][0], out[-1][1].rstrip()[:-1])
    return out


def run_command(line: str, folder: Path, where: str) -> str:
    """Run one ``pdbq`` command line of a ``sh example`` in ``folder``; what it printed to the
    terminal (standard output unless redirected, then standard error)."""
    from pdbq.shell.cli import main

    words = shlex.split(line, comments=True)
    if not words:
        return ""
    stdin, target = "", None
    if words[:1] == ["cat"] and "|" in words:
        bar = words.index("|")
        stdin = "".join((folder / w).read_text(encoding="utf-8") for w in words[1:bar])
        words = words[bar + 1:]
    if ">" in words:
        at = words.index(">")
        words, target = words[:at], words[at + 1]
    assert words[:1] == ["pdbq"] and "|" not in words, f"{where}: a sh example runs pdbq command lines, not {line!r}"
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    saved = sys.stdin
    os.chdir(folder)
    try:
        sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(words[1:])
    finally:
        sys.stdin = saved
        os.chdir(old)
    assert status == 0, f"{where}: {line!r} exited with status {status}:\n{out.getvalue()}{err.getvalue()}"
    if target is not None:
        (folder / target).write_text(out.getvalue(), encoding="utf-8")
        return _without_compile_notices(err.getvalue())
    return out.getvalue() + _without_compile_notices(err.getvalue())


def _check_step(shell: Shell, step: Step, where: str) -> None:
    printed = _printed(shell, step.text)
    if step.shown is None:
        assert not shell.failed, f"{where}: {step.text!r} failed:\n{printed}"
        return
    assert not shell.failed or "Error:" in step.shown, f"{where}: the step failed:\n{printed}"
    shell.failed = False
    assert _same(printed, step.shown), f"{where}: the step printed\n{printed}\nthe page shows\n{step.shown}"


def unmarked_fences(text: str) -> list[int]:
    """Lines of ``sql`` / ``python`` / ``sh`` fences that are neither examples nor right under a
    ``<!-- not run: REASON -->`` comment (blank lines between allowed)."""
    lines = text.splitlines()
    found: list[int] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        marker, info = fence.group(1), fence.group(2).split()
        if info and info[0] in CODE_LANGS and info[1:2] != ["example"]:
            above = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            if not _NOT_RUN.match(above.strip()):
                found.append(i + 1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(marker[0] * len(marker)):
            j += 1
        i = j + 1
    return found


def assert_fences_marked(page: Path) -> None:
    """An AssertionError naming the page's code fences that neither run nor say why not."""
    lines = unmarked_fences(page.read_text(encoding="utf-8"))
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    assert not lines, (f"{name}: the fences at lines {lines} are neither examples (```sql example, "
                       "```python example, ```sh example) nor under a '<!-- not run: REASON -->' line")


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in UNCHECKED_PAGES], ids=lambda p: p.name)
def test_every_code_fence_runs_or_says_why_not(page: Path) -> None:
    assert_fences_marked(page)


def test_an_unmarked_fence_fails(tmp_path: Path) -> None:
    page = ("```sql example\nSELECT 1;\n```\n\n<!-- not run: a grammar sketch -->\n```sql\nCREATE RULE ...\n```\n"
            "```python\nimport pdbq\n```\n<!-- not run: -->\n```sh\npip install pdbq\n```\n"
            "```text\nplain text is not code\n```\n````markdown\n```sql\ninside another fence\n```\n````\n")
    assert unmarked_fences(page) == [9, 13]   # no marker; a marker without a reason
    path = tmp_path / "p.md"
    path.write_text(page, encoding="utf-8")
    with pytest.raises(AssertionError, match=r"lines \[9, 13\]"):
        assert_fences_marked(path)
    path.write_text(page.replace("```python\n", "```python example\n").replace("<!-- not run: -->",
                    "<!-- not run: installs a package -->"), encoding="utf-8")
    assert_fences_marked(path)


def uncompared_outputs(text: str) -> list[int]:
    """Lines of fences that a reader takes for an example's output (no language or ``text``, right
    after an example) but that are not ``text output`` blocks, nor under ``<!-- not output: REASON -->``."""
    lines = text.splitlines()
    found = []
    bs = blocks(text)
    for before, block in zip(bs, bs[1:]):
        if before.role != "example" or block.role == "output" or block.lang not in ("", "text"):
            continue
        above = next((ln for ln in reversed(lines[:block.line - 1]) if ln.strip()), "")
        if not _NOT_OUTPUT.match(above.strip()):
            found.append(block.line)
    return found


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in UNCHECKED_PAGES], ids=lambda p: p.name)
def test_every_output_shown_after_an_example_is_compared(page: Path) -> None:
    lines = uncompared_outputs(page.read_text(encoding="utf-8"))
    assert not lines, (f"{page.name}: the fences at lines {lines} follow an example, so they read as its output, but "
                       "are not compared: make them ```text output blocks, or put '<!-- not output: REASON -->' above")


def test_an_uncompared_output_fails(tmp_path: Path, monkeypatch) -> None:
    page = ("```sh example\npdbq -c \"SELECT 42 AS answer;\"\n```\n\nprints\n\n```\nanswer\n43\n```\n\n"
            "```sql example\nSELECT 1;\n```\n<!-- not output: a grammar -->\n```\nSELECT expr\n```\n")
    assert uncompared_outputs(page) == [7]
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "o.md"
    path.write_text(page.replace("```\nanswer", "```text output\nanswer"), encoding="utf-8")
    assert uncompared_outputs(path.read_text(encoding="utf-8")) == []
    with pytest.raises(AssertionError, match="the commands printed"):  # now compared: 42 is not 43
        run_examples(path)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and line.startswith("#"):
            slug = _slug(line.lstrip("#"))
            n = seen.get(slug, 0)
            out.add(slug if n == 0 else f"{slug}-{n}")
            seen[slug] = n + 1
    return out


def _prose(text: str) -> str:
    """The page without fenced blocks and inline code (links there are examples, not links)."""
    kept, in_fence = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        kept.append("" if in_fence else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_internal_links_resolve(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in HISTORY_PAGES], ids=lambda p: p.name)
def test_user_docs_name_features_not_issues_or_seed_files(page: Path) -> None:
    hits = [f"{n}: {line.strip()[:100]}" for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if _INTERNAL_HISTORY.search(line)]
    assert not hits, f"{page.relative_to(ROOT)} (provenance goes in references.md, history in benchmarks.md):\n" \
        + "\n".join(hits)


def test_the_checks_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A `code` title, here\n\n[x](p.md#a-code-title-here) [y](p.md#nope) [z](missing.md)\n"
                    "```sql example\nSELECT 1 AS one;\n```\n```text output\nwrong\n```\n", encoding="utf-8")
    assert anchors(page) == {"a-code-title-here"}
    assert _LINK.findall(_prose(page.read_text())) == ["p.md#a-code-title-here", "p.md#nope", "missing.md"]
    (example, shown), = _examples(page)
    assert example.text == "SELECT 1 AS one;" and shown is not None and not _same("one\n", shown.text)
    assert _INTERNAL_HISTORY.search("as issue 16 asked") and _INTERNAL_HISTORY.search("Seed 004's")
    assert not _INTERNAL_HISTORY.search("with seed 7, the issues of scale")


@pytest.mark.parametrize("shows, fails", [
    ("pdbq> SELECT 1 AS one;\none\n", "the step printed"),           # a wrong table
    ("pdbq> SELECT nope;\n", "the step failed"),                          # an error the page hides
    ("pdbq> SELECT 2 AS two;\n", "the step printed"),                   # output the page does not show
])
def test_transcripts_are_checked(tmp_path: Path, monkeypatch, shows: str, fails: str) -> None:
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "t.md"
    page.write_text(f"```sql example\n{shows}```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=fails):
        run_examples(page)


def test_a_transcript_that_matches_passes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "t.md"
    page.write_text("```sql example\n$ pdbq t.duckdb\npdbq> .timer on\npdbq> SELECT 1 AS one\n...>  ;\n"
                    "┌───────┐\n│  one  │\n│ int32 │\n├───────┤\n│     1 │\n└───────┘\n1 row\n"
                    "Run Time (s): real 0.001\npdbq> .mode nope\n"
                    "Error: unknown mode 'nope'. Modes: table, line, csv, json, markdown, list, tabs, html\n```\n", encoding="utf-8")
    steps = transcript(blocks(page.read_text(encoding="utf-8"))[0])
    assert [s.text for s in steps] == [".open t.duckdb", ".timer on", "SELECT 1 AS one\n ;", ".mode nope"]
    run_examples(page)
    assert (tmp_path / "t.duckdb").exists()


def test_the_shell_page_shows_the_banner_the_shell_prints() -> None:
    text = (ROOT / "docs" / "shell.md").read_text(encoding="utf-8")
    with pdbq.connect() as db:
        want = banner(db)
    version = re.compile(r"\d+\.\d+\.\d+\S*")
    shown = [b.text for b in blocks(text) if "Connected to" in b.text]
    assert shown and version.sub("X", shown[0]) == version.sub("X", want)


def test_sh_examples_run_their_command_lines_and_fail_on_a_failing_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- file setup.sql\nCREATE OR REPLACE TABLE t AS SELECT 42 AS x;\n-->\n\n"
        "```sh example\npdbq t.duckdb -f setup.sql   # a comment\ncat setup.sql | pdbq t.duckdb\n"
        "pdbq t.duckdb -c \".mode csv\" \\\n    -c \"SELECT x FROM t;\" > t.csv\npdbq -c \"SELECT 1 AS one;\"\n```\n",
        encoding="utf-8")
    run_examples(page)
    assert (tmp_path / "sh" / "t.csv").read_text() == "x\n42\n"
    page.write_text("```sh example\npdbq -f missing.sql\n```\n", encoding="utf-8")
    (tmp_path / "sh").rename(tmp_path / "sh-before")
    with pytest.raises(AssertionError, match="exited with status 1"):
        run_examples(page)


def test_an_example_that_needs_a_missing_module_is_reported_as_skipped(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "n.md"
    page.write_text("```python example needs=pdbq_no_such_module\nimport pdbq_no_such_module\n```\n"
                    "```python example\nprint(1)\n```\n```text output\n1\n```\n", encoding="utf-8")
    with pytest.raises(pytest.skip.Exception, match=r"pdbq_no_such_module: n.md:1"):
        run_examples(page)
    page.write_text(page.read_text(encoding="utf-8").replace("text output\n1", "text output\n2"), encoding="utf-8")
    (tmp_path / "sh").rename(tmp_path / "sh-before")
    with pytest.raises(AssertionError, match="the example printed"):  # the rest still runs and is checked
        run_examples(page)


def _statements(text: str) -> list[str]:
    """SQL statements with comments dropped and whitespace collapsed (for comparing two copies)."""
    text = re.sub(r"--[^\n]*", "", text)
    return [" ".join(s.split()) for s in text.split(";") if s.strip()]


def test_getting_started_shows_the_queries_examples_movies_sql_runs() -> None:
    """The page walks through examples/movies.sql: the query it shows is the file's, options too."""
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    script = _statements((ROOT / "examples" / "movies.sql").read_text(encoding="utf-8"))
    shown = [s for b in blocks(page) if b.lang == "sql" and b.role == "example" for s in _statements(b.text)
             if "PROB(" in s and "is_popular AS m" in s]
    assert shown and all(s in script for s in shown), (shown, [s for s in script if "PROB(" in s])
