"""The benchmark engine behind ``anyreduce bench`` and ``benchmarks/run.py``.

It times every reduction on every installed backend against three anchors measured in the
same run, interleaved: the backend's plain sum over the same array and axes (the one-pass
floor), the backend's best native expression for the operator, and onnxruntime's kernel.
Nothing here is imported by ``import anyreduce``.
"""

from __future__ import annotations

from ._engine import Settings, run_suite
from ._report import format_table, plot_ratios, to_markdown

__all__ = ["Settings", "format_table", "plot_ratios", "run_suite", "to_markdown"]
