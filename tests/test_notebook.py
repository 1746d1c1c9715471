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
