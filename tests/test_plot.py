"""Trace plots: `pdbq.answers.plot` and `Result.plot()`."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import pdbq
from pdbq.answers.plot import plot_trace, trace_lines
from pdbq.inference.mcmc.gibbs import GibbsTrace

MODEL = """
CREATE TABLE t AS SELECT * FROM range(5) r(i);
CREATE TABLE links AS SELECT i AS a, i + 1 AS b FROM t WHERE i < 4;
CREATE VARIABLE x(i BIGINT) DOMAIN BOOLEAN FROM (SELECT i FROM t);
CREATE RULE pull WEIGHT 0.5 FUNCTION ISTRUE AS x(i) :- t(i), i < 2;
CREATE RULE tie WEIGHT 0.7 FUNCTION EQUAL AS x(a) = x(b) :- links(a, b);
"""


def _trace():
    steps = np.array([100, 400, 1600])
    est = np.array([[[0.3, 0.7], [0.5, 0.5]], [[0.35, 0.65], [0.5, 0.5]], [[0.4, 0.6], [0.5, 0.5]]])
    return GibbsTrace(steps, est)


def test_lines_and_bands_shrink_as_one_over_sqrt_samples():
    lines = trace_lines({"trace": _trace(), "max_stderr": 0.01, "trace_labels": ["x(0)", "x(1)"]})
    assert [line.label for line in lines] == ["x(0)", "x(1)"]
    np.testing.assert_allclose(lines[0].estimate, [0.7, 0.65, 0.6])  # P(TRUE): the second column
    np.testing.assert_allclose(lines[0].stderr, [0.04, 0.02, 0.01])  # sqrt(1600/100) = 4
    per_var = np.array([[0.0, 0.02], [0.0, 0.005]])
    lines = trace_lines({"trace": _trace(), "trace_stderr": per_var})
    assert lines[1].stderr[-1] == pytest.approx(0.005)
    assert len(trace_lines(_trace(), max_lines=1)) == 1


def test_a_categorical_trace_draws_one_line_per_value():
    est = np.zeros((2, 1, 3))
    est[:, 0] = [[0.2, 0.0, 0.8], [0.25, 0.0, 0.75]]
    lines = trace_lines(GibbsTrace(np.array([10, 20]), est))
    assert [line.label for line in lines] == ["x_q[0] = 0", "x_q[0] = 2"]


def test_nothing_to_plot_is_a_clear_error():
    with pytest.raises(pdbq.PdbqError, match="EXACT"):
        trace_lines({"method": "EXACT"})
    with pytest.raises(pdbq.PdbqError, match="GibbsTrace"):
        trace_lines(42)
    with pytest.raises(pdbq.PdbqError, match="empty"):
        trace_lines(GibbsTrace(np.zeros(0, np.int64), np.zeros((0, 1, 2))))


def test_missing_matplotlib_names_the_extra(monkeypatch):
    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(pdbq.PdbqError, match=r"pdbq\[plot\]"):
        plot_trace(_trace())


def test_result_plot_saves_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    with pdbq.connect() as db:
        db.execute(MODEL)
        r = db.execute("SELECT a.i, PROB(a) FROM x a WHERE a.i IN (1, 3) USING QAM WITH (seed = 3, steps = 2000)")
        path = tmp_path / "trace.png"
        fig = r.plot(path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        ax = fig.axes[0]
        assert len(ax.lines) == 2
        finals = sorted(line.get_ydata()[-1] for line in ax.lines)
        assert finals == pytest.approx(sorted(p for _, p in r.fetchall()))  # the trace ends at the answer
        # the legend names each line by its variable, and each line ends at that variable's answer
        answers = {f"x({i})": p for i, p in r.fetchall()}
        ends = {line.get_label(): line.get_ydata()[-1] for line in ax.lines}
        assert ends == pytest.approx(answers)
        assert [t.get_text() for t in ax.get_legend().get_texts()] == sorted(answers)
        exact = db.execute("SELECT a.i, PROB(a) FROM x a WHERE a.i IN (1, 3) USING EXACT")
        with pytest.raises(pdbq.PdbqError, match="no running estimates"):
            exact.plot()
