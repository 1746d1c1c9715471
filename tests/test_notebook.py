"""The notebook view of results (`Result._repr_html_`) and the shell's HTML/list modes, without Jupyter."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import pdbq
from pdbq.answers.render import render

MODEL = """
CREATE TABLE t AS SELECT * FROM range(3) r(i);
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE r WEIGHT 1.0 FUNCTION ISTRUE AS x(i) :- t(i), i > 0;
"""


def _bars(html: str) -> list[float]:
    return [float(w) for w in re.findall(r"width:([0-9.]+)%;height:100%", html)]


def test_probabilities_are_bars_and_standard_errors_sit_beside_them():
    with pdbq.connect() as db:
        db.execute(MODEL)
        exact = db.execute("SELECT a.i, PROB(a) AS p FROM x a ORDER BY a.i USING EXACT")
        html = exact._repr_html_()
        # P = 0.5 for x(0) and sigmoid(2 * 1.0) for the others, one bar each, as a percentage
        assert _bars(html) == [50.0, 88.1, 88.1]
        assert "method EXACT" in html and "3 rows" in html
        sampled = db.execute("SELECT a.i, PROB(a), STDERR(a) FROM x a ORDER BY a.i USING GIBBS "
                             "WITH (seed = 1, steps = 400)")
        html = sampled._repr_html_()
        ses = [float(s) for s in re.findall(r"± ([0-9.e-]+)</td>", html)]
        assert len(_bars(html)) == 3 and len(ses) == 3  # the STDERR column is not drawn as a bar
        assert ses == pytest.approx([se for _, _, se in sampled.fetchall()], rel=1e-3)
        assert "steps" in html and "largest standard error" in html


def test_plain_results_get_no_bars_and_cells_are_escaped():
    r = pdbq.Result(pa.table({"name": ["<script>"], "share": [0.5]}))
    html = r._repr_html_()
    assert _bars(html) == [] and "&lt;script&gt;" in html and "<script>" not in html


def test_html_list_and_tabs_modes():
    t = pa.table({"a": ["x|y", None], "b": [1, 2]})
    assert render(t, "html") == "<table>\n<tr><th>a</th><th>b</th></tr>\n<tr><td>x|y</td><td>1</td></tr>\n" \
        "<tr><td>NULL</td><td>2</td></tr>\n</table>"
    assert render(t, "list") == "a|b\nx|y|1\n|2"
    assert render(t, "list", separator=";", header=False) == "x|y;1\n;2"
    assert render(t, "tabs") == "a\tb\nx|y\t1\n\t2"
    assert render(t, "csv", separator=";") == "a;b\nx|y;1\n;2"


def test_charts_are_bare_figures_a_notebook_shows_once():
    """Result.plot() and the calibration plot return Figures outside pyplot's global state: a
    notebook shows the returned figure inline, once, and no backend is switched."""
    pytest.importorskip("matplotlib")
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    import numpy as np

    from pdbq.learning.holdout import calibration_report, plot_calibration

    backend = matplotlib.get_backend()
    before = plt.get_fignums()
    with pdbq.connect() as db:
        db.execute(MODEL)
        fig = db.execute("SELECT a.i, PROB(a) FROM x a USING GIBBS WITH (seed = 1, steps = 300)").plot()
    report = calibration_report(np.array([[0.9, 0.1], [0.3, 0.7]]), np.array([0, 1]), np.array([2, 2]))
    calibration = plot_calibration(report)
    assert isinstance(fig, Figure) and isinstance(calibration, Figure)
    assert plt.get_fignums() == before and matplotlib.get_backend() == backend


# ---------------------------------------------------------------- numbers as a reader sees them

from html.parser import HTMLParser  # noqa: E402

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pdbq.answers.notebook import ESTIMATE_DIGITS, FLOAT_DIGITS, result_html  # noqa: E402

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


class _Text(HTMLParser):
    """The text a browser shows (tags and their style attributes left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _shown_numbers(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    return [m.group(0) for part in parser.parts for m in _NUMBER.finditer(part)]


def _significant(token: str) -> int:
    mantissa = token.lstrip("-").split("e")[0].replace(",", "").replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if "." not in token.split("e")[0] else len(mantissa)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 0.5), st.floats(-1e6, 1e6).filter(lambda x: not 0 <= x <= 1)), min_size=1,
                max_size=5),
       st.floats(0, 0.5), st.floats(0.9, 3.0))
@example([(0.0, 0.0, 100000.0), (0.5, 0.1, -99999.0)], 0.0, 1.0)  # whole numbers at the digit limit
def test_every_number_the_notebook_shows_is_rounded(rows, max_se, rhat):
    """The HTML as a browser shows it: every number has at most ESTIMATE_DIGITS significant digits
    beside a bar, after ± and in the footer, at most FLOAT_DIGITS in other cells, and reads back as
    the value it stands for within that precision."""
    table = pa.table({"p": [r[0] for r in rows], "se": [r[1] for r in rows], "score": [r[2] for r in rows]})
    page = result_html(table, {"method": "GIBBS", "steps": 4000, "chains": 4, "max_stderr": max_se,
                               "rhat_max": rhat, "seconds": 0.25})
    shown = _shown_numbers(page)
    assert shown, page
    for token in shown:
        assert _significant(token) <= FLOAT_DIGITS, (token, page)
    p_text = re.findall(r"<span>([^<]*)</span>", page)
    se_text = re.findall(r"± ([^<]*)</td>", page)
    assert len(p_text) == len(se_text) == len(rows)
    for (p, se, _), pt, st_ in zip(rows, p_text, se_text):
        assert _significant(pt) <= ESTIMATE_DIGITS and _significant(st_) <= ESTIMATE_DIGITS, (pt, st_)
        assert float(pt) == pytest.approx(p, rel=10 ** (1 - ESTIMATE_DIGITS), abs=1e-300)
        assert float(st_) == pytest.approx(se, rel=10 ** (1 - ESTIMATE_DIGITS), abs=1e-300)
    foot = page.split("</table>")[1]
    assert f"R-hat {float(re.search(r'R-hat ([0-9.e+-]+)', foot).group(1)):.{ESTIMATE_DIGITS}g}" in foot
