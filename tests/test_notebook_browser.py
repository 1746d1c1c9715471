"""The notebook view (`Result._repr_html_`) as a real browser shows it: headless Chromium lays the
HTML out and reads back its text (``innerText``, what a reader sees), and every number in it is
rounded — estimates and standard errors to `ESTIMATE_DIGITS` significant digits, other floats to
`FLOAT_DIGITS` — never a raw double such as ``0.002885115627100098``.

The models and numbers are drawn fresh each run (the seed is printed on failure). Skipped, with
the reason, only when no Chromium/Chrome can be found (``.ci/run`` installs Debian's chromium
where it can; ``PDBQ_BROWSER`` names another binary)."""

from __future__ import annotations

import html
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

import pdbq
from pdbq.answers.notebook import ESTIMATE_DIGITS, FLOAT_DIGITS, result_html

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?|-?\.\d+(?:e[+-]?\d+)?", re.IGNORECASE)


def _browser() -> str | None:
    named = os.environ.get("PDBQ_BROWSER")
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    return next((p for p in map(shutil.which, _NAMES) if p), None)


def _rendered_text(tmp_path: Path, fragments: list[str]) -> list[dict]:
    """Each fragment's table cells and footer as Chromium lays them out (``innerText``)."""
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser: install Chromium (Debian: apt-get install chromium) or set PDBQ_BROWSER")
    blocks = "".join(f'<div class="nb" id="nb{i}">{f}</div>' for i, f in enumerate(fragments))
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{blocks}<pre id='out'></pre><script>"
        "const shown = e => e.innerText.replace(/\\s+/g, ' ').trim();"
        "document.getElementById('out').textContent = JSON.stringify("
        "Array.from(document.querySelectorAll('.nb')).map(d => ({"
        "rows: Array.from(d.querySelectorAll('tr')).map(r => Array.from(r.cells).map(shown)),"
        "foot: Array.from(d.querySelectorAll('p')).map(shown).join(' ')})));</script></body></html>"
    )
    path = tmp_path / "notebook.html"
    path.write_text(page, encoding="utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-extensions", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
           path.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = re.search(r"<pre id=\"out\">(.*?)</pre>", p.stdout, re.DOTALL)
    assert p.returncode == 0 and found, f"{browser} did not render the page: rc {p.returncode}\n{p.stderr[-2000:]}"
    import json

    return json.loads(html.unescape(found.group(1)))


def _significant(token: str) -> int:
    mantissa = token.lstrip("-").split("e")[0].split("E")[0].replace(",", "")
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) if "." in mantissa else len(digits.rstrip("0"))


def _drawn_results(rng: random.Random) -> list[tuple[str, pa.Table, dict]]:
    """Real query results (sampled, with standard errors and R-hat) and tables of awkward floats."""
    out = []
    for _ in range(2):
        db = pdbq.connect()
        n = rng.randint(3, 8)
        db.execute(f"""
            CREATE TABLE t AS SELECT * FROM range({n}) r(i);
            CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
            CREATE RULE r WEIGHT {rng.uniform(-2, 2):.6f} FUNCTION ISTRUE AS x(i) :- t(i), i % 2 = 1;
            CREATE RULE c WEIGHT {rng.uniform(-1, 1):.6f} FUNCTION EQUAL AS x(a) = x(b) :- t(a), t(b), b = a + 1;
        """)
        r = db.execute(f"SELECT v.i, PROB(v) AS p, STDERR(v) AS se, v.i / 7.0 AS seventh FROM x AS v "
                       f"USING GIBBS WITH (steps = {rng.randint(2, 20) * 1000}, seed = {rng.randint(1, 10**6)})")
        out.append((r._repr_html_(), r.arrow(), dict(r.diagnostics)))
        db.close()
    for _ in range(3):
        rows = rng.randint(1, 6)
        table = pa.table({
            "p": [rng.random() ** rng.choice([1, 3, 9]) for _ in range(rows)],
            "se": [rng.random() * 10.0 ** -rng.randint(1, 6) for _ in range(rows)],
            "score": [rng.choice([-1, 1]) * rng.random() * 10.0 ** rng.randint(-7, 9) for _ in range(rows)],
        })
        diag = {"method": "GIBBS", "steps": rng.randint(1, 10**6), "chains": 4, "max_stderr": rng.random() / 50,
                "rhat_max": 1 + rng.random() / 3, "seconds": rng.random() * 5}
        out.append((result_html(table, diag), table, diag))
    return out


def test_a_browser_shows_every_number_rounded(tmp_path):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    drawn = _drawn_results(rng)
    texts = _rendered_text(tmp_path, [h for h, _, _ in drawn])
    assert len(texts) == len(drawn), f"seed {seed}"
    for (page, table, diag), shown in zip(drawn, texts):
        header, *rows = shown["rows"]
        footer = shown["foot"]
        text = "\n".join("\t".join(r) for r in shown["rows"]) + "\n" + footer
        assert header[:3] in (["i", "p", "se"], ["p", "se", "score"]), f"seed {seed}: {text}"
        assert len(rows) == table.num_rows, f"seed {seed}: {text}"
        for token in _NUMBER.findall(text):
            assert _significant(token) <= FLOAT_DIGITS, f"seed {seed}: {token!r} shown raw in\n{text}"
        p_at, se_at = table.column_names.index("p"), table.column_names.index("se")
        for cells, p, se in zip(rows, table.column("p").to_pylist(), table.column("se").to_pylist()):
            shown_p, shown_se = cells[p_at].strip(), cells[se_at].strip()
            assert shown_se.startswith("± "), f"seed {seed}: {cells}"
            shown_se = shown_se[2:]
            for shown, value in ((shown_p, p), (shown_se, se)):
                assert _significant(shown) <= ESTIMATE_DIGITS, f"seed {seed}: {shown!r} for {value!r}"
                assert float(shown) == pytest.approx(value, rel=10 ** (1 - ESTIMATE_DIGITS), abs=1e-300), \
                    f"seed {seed}: {shown!r} for {value!r}"
        for key, label in (("max_stderr", "largest standard error"), ("rhat_max", "R-hat")):
            if diag.get(key) is not None:
                m = re.search(re.escape(label) + r" ([0-9.e+-]+)", footer)
                assert m and _significant(m.group(1)) <= ESTIMATE_DIGITS, f"seed {seed}: {footer}"
                assert float(m.group(1)) == pytest.approx(float(diag[key]), rel=10 ** (1 - ESTIMATE_DIGITS))


def test_the_check_sees_a_raw_float():
    # the digit count the browser test applies: a raw double fails it, a rounded one passes
    assert _significant("0.002885115627100098") > FLOAT_DIGITS and _significant("4.059872523806129e-05") > FLOAT_DIGITS
    assert _significant("0.002885") <= ESTIMATE_DIGITS and _significant("4.06e-05") <= ESTIMATE_DIGITS
    assert _significant("100000") == 1 and _significant("1.0861793987752324") > FLOAT_DIGITS
