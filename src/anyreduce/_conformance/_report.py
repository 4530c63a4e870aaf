"""The conformance report as a terminal matrix, JSON and a self-contained HTML page."""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ._divergences import DIVERGENCES
from ._engine import Report
from ._execute import DIVERGENT, FAILED, PASSED

__all__ = ["cell_text", "matrix_lines", "write_html", "write_json"]


def cell_text(cell: Counter[str]) -> str:
    """``"12 ok"``, ``"10 ok 2 div"``, ``"9 ok 1 FAIL"``; ``"-"`` for no cases."""
    if not any(cell.values()):
        return "-"
    text = f"{cell[PASSED]} ok"
    if cell[DIVERGENT]:
        text += f" {cell[DIVERGENT]} div"
    if cell[FAILED]:
        text += f" {cell[FAILED]} FAIL"
    return text


def cell_status(cell: Counter[str]) -> str:
    if not any(cell.values()):
        return "none"
    if cell[FAILED]:
        return FAILED
    return DIVERGENT if cell[DIVERGENT] else PASSED


def matrix_lines(report: Report) -> list[str]:
    """The op x column matrix as plain text lines."""
    matrix = report.matrix()
    header = ["op", *report.columns]
    rows = [[op, *(cell_text(cells[c]) for c in report.columns)] for op, cells in matrix.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return lines


def write_json(report: Report, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.as_json(), indent=1, allow_nan=False) + "\n")


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table.matrix { border-collapse: collapse; margin: 1em 0; }
table.matrix th, table.matrix td { border: 1px solid #bbb; padding: 4px 8px; text-align: center; }
table.matrix th.op { text-align: left; }
td.passed { background: #c8efc8; } td.divergent { background: #ffe3a3; }
td.failed { background: #f5a3a3; font-weight: bold; } td.none { background: #eee; color: #888; }
details { margin: 0.3em 0; border-left: 4px solid #bbb; padding-left: 0.6em; }
details.failed { border-color: #d33; } details.divergent { border-color: #e9a400; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 90%; }
table.divergences td { border-bottom: 1px solid #ddd; padding: 4px; vertical-align: top; }
.summary span { margin-right: 1.5em; }
"""


def _pre(value: Any) -> str:
    return f"<pre>{html.escape(json.dumps(value, indent=1))}</pre>"


def write_html(report: Report, path: str | Path) -> None:
    """A single HTML file (inline CSS, no scripts or external resources)."""
    data = report.as_json()
    summary = data["summary"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>anyreduce conformance</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>anyreduce {html.escape(data['anyreduce'])} conformance</h1>",
        "<p class='summary'>",
        f"<span>passed: {summary[PASSED]}</span><span>failed: {summary[FAILED]}</span>",
        f"<span>divergent: {summary[DIVERGENT]}</span><span>{data['seconds']} s</span></p>",
        "<table class='matrix'><tr><th class='op'>op</th>",
    ]
    parts += [f"<th>{html.escape(c)}</th>" for c in report.columns]
    parts.append("</tr>")
    for op, cells in report.matrix().items():
        parts.append(f"<tr><th class='op'>{html.escape(op)}</th>")
        for column in report.columns:
            cell = cells[column]
            title = f"passed {cell[PASSED]}, failed {cell[FAILED]}, divergent {cell[DIVERGENT]}"
            text = html.escape(cell_text(cell))
            parts.append(f"<td class='{cell_status(cell)}' title='{title}'>{text}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    if report.not_tested:
        parts.append("<h2>Not tested</h2><ul>")
        parts += [
            f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in report.not_tested.items()
        ]
        parts.append("</ul>")
    problems = report.problems()
    parts.append(f"<h2>Failed and divergent cases ({len(problems)})</h2>")
    for result in problems:
        summary_line = (
            f"{result.status.upper()} {result.column} · {result.op} · {result.case}"
            f" — {result.detail[:200]}"
        )
        parts.append(
            f"<details class='{result.status}'><summary>{html.escape(summary_line)}</summary>"
            f"<h4>inputs</h4>{_pre(result.inputs)}<h4>expected</h4>{_pre(result.expected)}"
            f"<h4>actual</h4>{_pre(result.actual)}</details>"
        )
    seen = {d["id"]: d["seen"] for d in data["divergences"]}
    parts.append("<h2>Documented divergences</h2><table class='divergences'>")
    parts.append(
        "<tr><th>id</th><th>runtime</th><th>case</th><th>theirs</th><th>ours</th>"
        "<th>why</th><th>seen</th></tr>"
    )
    for d in DIVERGENCES:
        texts = [d.id, d.runtime, d.case, d.theirs, d.ours, d.why, str(seen[d.id])]
        parts.append("<tr>" + "".join(f"<td>{html.escape(t)}</td>" for t in texts) + "</tr>")
    parts.append("</table>")
    parts.append(f"<h2>Versions</h2>{_pre(data['versions'])}</body></html>")
    Path(path).write_text("".join(parts) + "\n")
