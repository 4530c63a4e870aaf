"""The parity sweep: every op x dtype x distribution, summarised as one library x op matrix."""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._data import DISTRIBUTIONS, DTYPES
from ._exact import OP_NAMES
from ._parity import (
    ParityReport,
    ParityRow,
    check_axes,
    check_count,
    check_distribution,
    check_dtype,
    check_expected,
    check_names,
    check_shape,
    describe_problem,
    listed_names,
    named_errors,
    op_name,
    parity,
)

__all__ = ["SweepCell", "SweepReport", "parity_sweep", "plan", "write_html", "write_json"]

Progress = Callable[[int, int, str], None]


@dataclass
class SweepCell:
    """One library on one op over every dtype and distribution it ran.

    A cell of :attr:`SweepReport.matrix`; ``text()`` gives it as the printed matrix shows it.

    Attributes
    ----------
    runs : int
        Comparisons with a result.
    disagreed : int
        Those of them that disagree with the exact result.
    errors : int
        Unexpected errors.
    worst_ulps : float
        The largest error of any comparison, in units in the last place of its dtype.
    worst : str
        The dtype and distribution of that comparison, or ``""``.

    Examples
    --------
    >>> from anyreduce.testing import SweepCell
    >>> SweepCell(runs=36, worst_ulps=0.5).text()
    '0.5 ok'
    >>> SweepCell(runs=36, disagreed=3, worst_ulps=float("inf")).text()
    'inf 3/36 NO'
    >>> SweepCell().text()
    '-'
    """

    runs: int = 0  # comparisons with a result
    disagreed: int = 0
    errors: int = 0  # unexpected errors
    worst_ulps: float = 0.0
    worst: str = ""  # the dtype and distribution of the worst comparison

    def text(self) -> str:
        """``"0.5 ok"``, ``"inf 3/36 NO"``, ``"- 4 err"``; ``"-"`` when nothing ran."""
        if not self.runs and not self.errors:
            return "-"
        ulps = _number(self.worst_ulps) if self.runs else "-"
        if not self.disagreed and not self.errors:
            return f"{ulps} ok"
        text = f"{ulps} {self.disagreed}/{self.runs} NO" if self.disagreed else ulps
        return f"{text} {self.errors} err" if self.errors else text

    def status(self) -> str:
        if not self.runs and not self.errors:
            return "none"
        return "failed" if self.disagreed or self.errors else "passed"


@dataclass
class SweepReport:
    """The sweep's results: ``.ok``, ``.matrix``, ``.lines()``, ``.as_json()``.

    Returned by :func:`anyreduce.testing.parity_sweep`. ``matrix[library][op]`` is a
    :class:`SweepCell`; ``problems`` lists every disagreement and unexpected error with its
    worst element and how to reproduce it.

    Attributes
    ----------
    ops : tuple of str
        The reductions swept.
    dtypes : tuple of str
        The dtypes swept.
    distributions : tuple of str
        The distributions of the generated data.
    shape : tuple of int
        The shape of the generated data.
    axes : tuple of int or None
        The axes reduced over; None for all.
    seed : int
        The seed of the generated data.
    native : bool
        Whether the frameworks' own expressions ran.
    libraries : list of str
        Every backend, runtime and native expression that ran, in the order met.
    kinds : dict of str to str
        Each library's kind: ``"backend"``, ``"runtime"`` or ``"native"``.
    matrix : dict of str to dict of str to SweepCell
        Per library and op, its results over every dtype and distribution.
    problems : list of dict of str to str
        Every disagreement and unexpected error: ``library``, ``kind``, ``op``, ``dtype``,
        ``distribution``, ``what`` and ``reproduce``.
    not_run : dict of str to str
        What never ran, with the reasons.
    comparisons : int
        How many comparisons had a result.
    seconds : float
        How long the sweep took.
    ok : bool
        Something was compared and every comparison agrees, with no unexpected error.

    Examples
    --------
    >>> from anyreduce.testing import parity_sweep
    >>> report = parity_sweep(["reduce_max"], ["float32"], ["normal"], backends=["numpy"])
    >>> report.ok, report.comparisons, report.problems
    (True, 1, [])
    >>> for line in report.lines():
    ...     print(line)
    library  kind     reduce_max
    -------  -------  ----------
    numpy    backend  0 ok
    """

    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    distributions: tuple[str, ...]
    shape: tuple[int, ...]
    axes: tuple[int, ...] | None
    seed: int
    native: bool
    libraries: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    matrix: dict[str, dict[str, SweepCell]] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)
    comparisons: int = 0
    seconds: float = 0.0
    _reasons: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """Something was compared and every comparison agrees, with no unexpected error."""
        return self.comparisons > 0 and not self.problems

    def add(self, report: ParityReport, distribution: str) -> None:
        for row in report.rows:
            if row.name not in self.matrix:
                self.libraries.append(row.name)
                self.kinds[row.name] = row.kind
                self.matrix[row.name] = {op: SweepCell() for op in self.ops}
            cell = self.matrix[row.name][report.op]
            expected = row.name in report.expected_errors
            if row.error:
                if not expected:
                    cell.errors += 1
                    self._problem(report, row, distribution)
                continue
            cell.runs += 1
            self.comparisons += 1
            if row.max_ulps >= cell.worst_ulps:
                cell.worst_ulps = row.max_ulps
                cell.worst = f"{report.dtype} {distribution}"
            if not row.agrees:
                cell.disagreed += 1
                self._problem(report, row, distribution)
        for name, why in report.not_run.items():
            reasons = self._reasons.setdefault(name, [])
            if why not in reasons:
                reasons.append(why)

    def finish(self, seconds: float) -> None:
        """Record the time; list what never ran, with its reasons."""
        self.seconds = seconds
        for name, reasons in self._reasons.items():
            if name not in self.matrix:
                more = f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else ""
                self.not_run[name] = "; ".join(reasons[:3]) + more

    def _problem(self, report: ParityReport, row: ParityRow, distribution: str) -> None:
        self.problems.append(
            {
                "library": row.name,
                "kind": row.kind,
                "op": report.op,
                "dtype": report.dtype,
                "distribution": distribution,
                "what": describe_problem(row),
                "reproduce": report.reproduce().splitlines()[0],
            }
        )

    def lines(self) -> list[str]:
        """The library x op matrix as plain text: worst ulps over every dtype and
        distribution, and ok or how many comparisons disagree."""
        header = ["library", "kind", *self.ops]
        rows = [
            [name, self.kinds[name], *(self.matrix[name][op].text() for op in self.ops)]
            for name in self.libraries
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return lines

    def summary(self) -> str:
        verdict = "ok" if self.ok else "NOT OK"
        if not self.comparisons:
            verdict += ": nothing was compared"
        return (
            f"{verdict}: {self.comparisons} comparisons, {len(self.problems)} disagree or fail "
            f"({len(self.ops)} ops x {len(self.dtypes)} dtypes x "
            f"{len(self.distributions)} distributions in {self.seconds:.1f} s)"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "ops": list(self.ops),
            "dtypes": list(self.dtypes),
            "distributions": list(self.distributions),
            "shape": list(self.shape),
            "axes": None if self.axes is None else list(self.axes),
            "seed": self.seed,
            "native": self.native,
            "comparisons": self.comparisons,
            "seconds": round(self.seconds, 2),
            "libraries": [
                {
                    "name": name,
                    "kind": self.kinds[name],
                    "ops": {
                        op: {
                            "runs": cell.runs,
                            "disagreed": cell.disagreed,
                            "errors": cell.errors,
                            "worst_ulps": _json_number(cell.worst_ulps),
                            "worst": cell.worst,
                        }
                        for op, cell in self.matrix[name].items()
                    },
                }
                for name in self.libraries
            ],
            "problems": self.problems,
            "not_run": self.not_run,
        }


def _number(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3g}"


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def plan(
    ops: Sequence[str] | None,
    dtypes: Sequence[str] | None,
    distributions: Sequence[str] | None,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], list[tuple[str, str, str]]]:
    """The sweep's ops, dtypes and distributions (checked; default all) and its cases.

    Each is None (all), one name, or a sequence of at least one name.
    """
    listed_ops = listed_names(ops, "ops")
    listed_dtypes = listed_names(dtypes, "dtypes")
    listed_distributions = listed_names(distributions, "distributions")
    op_names = OP_NAMES if listed_ops is None else tuple(op_name(op) for op in listed_ops)
    dtype_names = DTYPES if listed_dtypes is None else tuple(check_dtype(d) for d in listed_dtypes)
    chosen = (
        DISTRIBUTIONS
        if listed_distributions is None
        else tuple(check_distribution(d) for d in listed_distributions)
    )
    cases = [
        (op, dtype, distribution)
        for op in op_names
        for dtype in dtype_names
        for distribution in chosen
        if dtype != "bool" or op in ("reduce_max", "reduce_min")
    ]
    if not cases:
        msg = "no op takes the dtypes given (bool: only reduce_max, reduce_min)"
        raise TypeError(msg)
    return op_names, dtype_names, chosen, cases


def parity_sweep(
    ops: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    distributions: Sequence[str] | None = None,
    *,
    shape: Sequence[int] = (8, 32),
    axes: int | Sequence[int] | None = -1,
    keepdims: bool = True,
    seed: int = 0,
    backends: Sequence[str] | None = None,
    native: bool = False,
    expected_errors: Collection[str] = (),
    progress: Progress | None = None,
) -> SweepReport:
    """Run :func:`parity` for every op x dtype x distribution and gather one matrix.

    Parameters
    ----------
    ops : sequence of str, optional
        Only these reductions (``"reduce_l2"`` or ``"ReduceL2"``); default: all ten.
    dtypes : sequence of str, optional
        Only these dtypes; default: every dtype. A dtype an op does not take (bool for
        all but max and min) is left out of its row.
    distributions : sequence of str, optional
        Only these distributions of the generated data (as in :func:`parity`); default:
        every distribution.
    shape : sequence of int, default (8, 32)
        Shape of the generated data.
    axes : int, sequence of int or None, default -1
        Axes to reduce over; None reduces over all.
    keepdims : bool, default True
    seed : int, default 0
        Seed of the generated data.
    backends : sequence of str, optional
        Only these backends, runtimes and frameworks.
    native : bool, default False
        Also the frameworks' own expressions of each op.
    expected_errors : collection of str
        Names whose errors do not count as failures.
    progress : callable, optional
        Called as ``progress(done, total, label)`` after each comparison.

    Returns
    -------
    SweepReport
        ``.ok``, ``.lines()`` (the library x op matrix), ``.problems``, ``.as_json()``.

    Examples
    --------
    >>> from anyreduce.testing import parity_sweep
    >>> report = parity_sweep(["reduce_max"], ["float32"], ["normal"], backends=["numpy"])
    >>> report.ok, report.matrix["numpy"]["reduce_max"].text()
    (True, '0 ok')
    """
    with named_errors("parity_sweep"):
        op_names, dtype_names, chosen, cases = plan(ops, dtypes, distributions)
        dims = check_shape(shape)
        seed = check_count(seed, "seed")
        wanted = check_names(backends)
        expected = check_expected(expected_errors)
        given_axes, _ = check_axes("", axes, len(dims))
    axes_tuple = None if given_axes is None else tuple(given_axes)
    report = SweepReport(op_names, dtype_names, chosen, dims, axes_tuple, seed, native)
    start = time.perf_counter()
    for done, (op, dtype, distribution) in enumerate(cases, start=1):
        one = parity(
            op,
            dims,
            dtype,
            axes_tuple,
            distribution=distribution,
            keepdims=keepdims,
            seed=seed,
            backends=wanted,
            native=native,
            expected_errors=expected,
        )
        report.add(one, distribution)
        if progress is not None:
            progress(done, len(cases), f"{op} {dtype} {distribution}")
    report.finish(time.perf_counter() - start)
    return report


def write_json(report: SweepReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.as_json(), indent=1, allow_nan=False) + "\n")


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table.matrix { border-collapse: collapse; margin: 1em 0; }
table.matrix th, table.matrix td { border: 1px solid #bbb; padding: 4px 8px; text-align: center; }
table.matrix th.library { text-align: left; }
td.passed { background: #c8efc8; } td.failed { background: #f5a3a3; font-weight: bold; }
td.none { background: #eee; color: #888; }
table.problems td { border-bottom: 1px solid #ddd; padding: 4px; vertical-align: top; }
code { font-size: 90%; }
"""


def write_html(report: SweepReport, path: str | Path) -> None:
    """A single HTML file (inline CSS, no scripts or external resources)."""
    from .. import __version__

    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>anyreduce parity sweep</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>anyreduce {e(__version__)} parity sweep</h1>",
        f"<p>{e(report.summary())}</p>",
        f"<p>Data: shape {list(report.shape)}, axes "
        f"{'all' if report.axes is None else list(report.axes)}, seed {report.seed}; dtypes "
        f"{e(', '.join(report.dtypes))}; distributions {e(', '.join(report.distributions))}. "
        "Each cell: the worst error in ulps over every dtype and distribution, and ok or how "
        "many comparisons disagree with the exact result.</p>",
        "<table class='matrix'><tr><th class='library'>library</th><th>kind</th>",
    ]
    parts += [f"<th>{e(op)}</th>" for op in report.ops]
    parts.append("</tr>")
    for name in report.libraries:
        parts.append(f"<tr><th class='library'>{e(name)}</th><td>{e(report.kinds[name])}</td>")
        for op in report.ops:
            cell = report.matrix[name][op]
            title = e(f"runs {cell.runs}, disagreed {cell.disagreed}, errors {cell.errors}")
            if cell.worst:
                title += e(f"; worst: {cell.worst}")
            parts.append(f"<td class='{cell.status()}' title='{title}'>{e(cell.text())}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    if report.not_run:
        parts.append("<h2>Not run</h2><ul>")
        parts += [f"<li>{e(k)}: {e(v)}</li>" for k, v in report.not_run.items()]
        parts.append("</ul>")
    parts.append(f"<h2>Disagreements and errors ({len(report.problems)})</h2>")
    parts.append("<table class='problems'>")
    parts.append("<tr><th>library</th><th>op</th><th>dtype</th><th>data</th><th>what</th></tr>")
    for p in report.problems:
        parts.append(
            f"<tr><td>{e(p['library'])}</td><td>{e(p['op'])}</td><td>{e(p['dtype'])}</td>"
            f"<td>{e(p['distribution'])}</td><td>{e(p['what'])}<br>"
            f"<code>{e(p['reproduce'])}</code></td></tr>"
        )
    parts.append("</table></body></html>")
    Path(path).write_text("".join(parts) + "\n")
