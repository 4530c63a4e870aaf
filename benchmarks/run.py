"""Run the full benchmark and refresh its published results.

    python benchmarks/run.py            # the default suite (5-6 minutes on 2 cores)
    python benchmarks/run.py --quick    # a smoke test, about a minute

Writes ``benchmarks/results/latest.json``, ``docs/performance-ratios.png`` and the tables
of ``docs/performance.md`` (between its ``<!-- bench -->`` markers). Other arguments are
passed to ``anyreduce bench`` (see ``anyreduce bench --help``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from anyreduce._cli import main

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "latest.json"
PLOT = ROOT / "docs" / "performance-ratios.png"
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- bench -->", "<!-- /bench -->"


def _publish(markdown: str) -> None:
    """Put the new tables between the markers of docs/performance.md."""
    if not DOC.exists():
        return
    text = DOC.read_text()
    if START not in text or END not in text:
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{markdown}\n{END}{tail}")


def run(argv: list[str]) -> int:
    quick = "--quick" in argv
    results = RESULTS.with_name("quick.json") if quick else RESULTS
    table = results.with_suffix(".md")
    args = ["bench", *argv, "--json", str(results), "--markdown", str(table)]
    if not quick:
        args += ["--plot", str(PLOT)]
    status = main(args)
    if not quick:
        meta = json.loads(results.read_text())["meta"]
        note = (
            f"Measured {meta['date']} on {meta['machine']['cpus']} CPUs "
            f"({meta['machine']['processor']}), {meta['seconds']:.0f} s for the suite."
        )
        _publish(note + "\n\n" + table.read_text())
    return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
