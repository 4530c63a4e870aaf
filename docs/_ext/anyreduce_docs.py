"""Sphinx directives that render facts the code owns, so that the docs cannot drift from it.

``anyreduce-toctree``
    A toctree that lists only the pages that exist, for pages other parts of the project add.
``anyreduce-cli-help``
    The ``--help`` text of ``anyreduce`` and of every sub-command, from the real parser.
``anyreduce-ops``
    The ten operators from the registry ``anyreduce._lib._ops.OPS``.
``anyreduce-onnx-versions``
    The ONNX version table of every op, from the opset table of ``anyreduce.onnx``.
``anyreduce-divergences``
    Every documented divergence, from the conformance suite's divergence data.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.directives.other import TocTree
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
SOURCE_URL = "https://github.com/anyreduce/anyreduce/blob/main"

Cell = str | nodes.Node


def _cell(value: Cell) -> nodes.entry:
    entry = nodes.entry()
    if isinstance(value, nodes.Node):
        entry += value if isinstance(value, nodes.paragraph) else nodes.paragraph("", "", value)
    else:
        entry += nodes.paragraph("", str(value))
    return entry


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> nodes.table:
    """A docutils table of ``headers`` over ``rows``; a cell is text or an inline node."""
    tab = nodes.table(classes=["anyreduce-table"])
    group = nodes.tgroup(cols=len(headers))
    tab += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    row = nodes.row()
    for h in headers:
        row += _cell(h)
    head += row
    group += head
    body = nodes.tbody()
    for values in rows:
        row = nodes.row()
        for v in values:
            row += _cell(v)
        body += row
    group += body
    return tab


def literal(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def source_link(path: str, line: int | None = None, text: str | None = None) -> nodes.reference:
    """A link to ``path`` (relative to the repository root) in the source repository."""
    url = f"{SOURCE_URL}/{path}" + (f"#L{line}" if line else "")
    ref = nodes.reference("", "", refuri=url)
    ref += literal(text or path)
    return ref


def object_link(obj: Any, text: str) -> nodes.Node:
    """A source link to the definition of a Python object (a test, a table), else its name."""
    try:
        path = Path(inspect.getsourcefile(obj) or "").resolve().relative_to(ROOT)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError, ValueError):
        return literal(text)
    return source_link(path.as_posix(), line, text)


class OptionalTocTree(TocTree):
    """A toctree that silently leaves out entries whose page does not exist (yet)."""

    def run(self) -> list[nodes.Node]:
        found = self.env.found_docs
        self.content.data = [
            line
            for line in self.content.data
            if not line.strip() or line.strip().split("<")[-1].rstrip(">").strip() in found
        ]
        return super().run()


class CliHelp(SphinxDirective):
    """The help of the command line, one literal block per command."""

    def run(self) -> list[nodes.Node]:
        from anyreduce import _cli

        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "88"
        try:
            parser = _cli.build_parser()
            out: list[nodes.Node] = [_help_section("anyreduce --help", parser.format_help())]
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            for name, command in sub.choices.items():
                out.append(_help_section(f"anyreduce {name} --help", command.format_help()))
        finally:
            if old is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = old
        return out


def _help_section(command: str, text: str) -> nodes.Node:
    sid = nodes.make_id(command.replace("--help", "").strip())
    section = nodes.section(ids=[sid])
    section += nodes.title("", "", literal(command.replace(" --help", "")))
    block = nodes.literal_block(text, f"$ {command}\n{text}")
    block["language"] = "text"
    section += block
    return section


class OpsTable(SphinxDirective):
    """The ten operators: public function, ONNX name, what it computes, empty-set values.

    The empty-set values are computed by the library itself, on float32, int32 and bool.
    """

    def run(self) -> list[nodes.Node]:
        import numpy as np

        import anyreduce
        from anyreduce._lib._ops import OPS

        def empty(name: str, dtype: type) -> str:
            value = getattr(anyreduce, name)(np.zeros((0,), dtype), keepdims=False)
            return str(value.item()) if dtype is not np.int32 else str(int(value))

        rows: list[list[Cell]] = []
        for name, op in OPS.items():
            summary = (getattr(anyreduce, name).__doc__ or "").strip().splitlines()[0]
            rows.append(
                [
                    _api_ref(name),
                    literal(op.onnx_name),
                    summary.split(" (ONNX")[0].rstrip("."),
                    literal(empty(name, np.float32)),
                    literal(empty(name, np.int32)),
                    literal(empty(name, np.bool_)) if op.accepts_bool else "not accepted",
                ]
            )
        headers = ["function", "ONNX op", "computes", "empty: float32", "int32", "bool"]
        return [table(headers, rows)]


def _api_ref(name: str, module: str = "anyreduce") -> nodes.Node:
    from sphinx.addnodes import pending_xref

    ref = pending_xref(
        "", refdomain="py", reftype="func", reftarget=f"{module}.{name}", refexplicit=False
    )
    ref += literal(f"{name}()")
    return ref


_SHORT_DTYPES = {
    "bool": "bool",
    "bfloat16": "bf16",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
}


def _dtype_list(dtypes: Iterable[str]) -> str:
    order = list(_SHORT_DTYPES)
    return " ".join(_SHORT_DTYPES[d] for d in sorted(dtypes, key=order.index))


class OnnxVersions(SphinxDirective):
    """The ONNX version table of every op, read from ``anyreduce.onnx``'s own opset table.

    One row per version of each operator: the opsets that use it, whether ``axes`` is an
    attribute or an input, whether negative axes and ``noop_with_empty_axes`` exist, whether
    the schema is a function of other ops, and the input types it admits.
    """

    def run(self) -> list[nodes.Node]:
        from anyreduce.onnx import _opsets

        rows: list[list[Cell]] = []
        for versions in _opsets.VERSIONS.values():
            for i, v in enumerate(versions):
                end = versions[i + 1].since - 1 if i + 1 < len(versions) else _opsets.NEWEST_OPSET
                opsets = str(v.since) if end == v.since else f"{v.since}-{end}"
                rows.append(
                    [
                        nodes.strong(v.label, v.label) if i == len(versions) - 1 else v.label,
                        opsets,
                        "input" if v.axes_input else "attribute",
                        "yes" if v.negative_axes else "no",
                        "yes" if v.noop_with_empty_axes else "no",
                        "yes" if v.function else "no",
                        _dtype_list(v.dtypes),
                    ]
                )
        headers = [
            "version",
            "opsets",
            "axes",
            "negative axes",
            "noop_with_empty_axes",
            "function",
            "input types",
        ]
        return [table(headers, rows)]


def _load_test_module(relative: str) -> types.ModuleType:
    """Import a module of the test suite by path (``tests/`` is not a package)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file is in the repo
        msg = f"cannot import {relative}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(path.stem, module)
    spec.loader.exec_module(module)
    return module


def _line_of(relative: str, needle: str) -> int | None:
    for number, line in enumerate((ROOT / relative).read_text().splitlines(), start=1):
        if needle in line:
            return number
    return None


class FrameworkDivergences(SphinxDirective):
    """The framework rows: ``DIVERGENCES`` of ``tests/test_framework_divergences.py``."""

    TESTS = "tests/test_framework_divergences.py"

    def run(self) -> list[nodes.Node]:
        module = _load_test_module(self.TESTS)
        self.env.note_dependency(str(ROOT / self.TESTS))
        rows: list[list[Cell]] = []
        for case in module.DIVERGENCES:
            line = _line_of(self.TESTS, f'id="{case.id}"')
            rows.append(
                [
                    case.framework,
                    literal(case.data),
                    _code_then_text(case.theirs_call, str(case.theirs)),
                    _code_then_text(case.ours_call.replace("anyreduce.", ""), str(case.ours)),
                    case.why,
                    source_link(self.TESTS, line, case.id),
                ]
            )
        headers = ["framework", "input x", "theirs", "anyreduce", "why", "test"]
        return [table(headers, rows)]


class RuntimeDivergences(SphinxDirective):
    """The runtime rows: ``DIVERGENCES`` of the conformance suite, each linked to its test.

    The conformance suite uses the same records to judge a runtime's disagreement as a
    documented divergence rather than a failure, and its test runs each record's example
    on the runtime and on anyreduce.
    """

    DATA = "src/anyreduce/_conformance/_divergences.py"
    TESTS = "conformance/test_divergences.py"
    RUNTIMES = {  # noqa: RUF012 - a constant
        "onnx.reference": "ONNX reference",
        "onnxruntime": "onnxruntime",
        "openvino": "OpenVINO",
    }

    def run(self) -> list[nodes.Node]:
        from anyreduce._conformance import _divergences

        self.env.note_dependency(str(ROOT / self.DATA))
        tests = ROOT / self.TESTS
        test = "test_runtime_diverges_as_documented"
        test_line = _line_of(self.TESTS, f"def {test}(") if tests.is_file() else None
        rows: list[list[Cell]] = []
        for d in _divergences.DIVERGENCES:
            if test_line is not None:
                link = source_link(self.TESTS, test_line, f"{test}[{d.id}]")
            else:
                link = source_link(self.DATA, _line_of(self.DATA, f'"{d.id}"'), d.id)
            rows.append(
                [self.RUNTIMES.get(d.runtime, d.runtime), d.case, d.theirs, d.ours, d.why, link]
            )
        headers = ["runtime", "cases", "theirs", "anyreduce", "why", "test"]
        return [table(headers, rows)]


class ConformanceMatrix(SphinxDirective):
    """The matrix, summary and versions of the committed conformance report (JSON)."""

    REPORT = "docs/_data/conformance.json"

    def run(self) -> list[nodes.Node]:
        path = ROOT / self.REPORT
        self.env.note_dependency(str(path))
        report = json.loads(path.read_text(encoding="utf-8"))
        columns = report["columns"]
        rows: list[list[Cell]] = []
        for op, cells in report["matrix"].items():
            row: list[Cell] = [op]
            for column in columns:
                counts = cells.get(column)
                row.append(_verdicts(counts) if counts else "-")
            rows.append(row)
        summary = report["summary"]
        text = (
            f"{summary['passed']} passed, {summary['failed']} failed, "
            f"{summary['divergent']} divergent (documented), in {report['seconds']:.0f} s."
        )
        out: list[nodes.Node] = [table(["op", *columns], rows), nodes.paragraph("", text)]
        if report.get("not_tested"):
            items = nodes.bullet_list()
            for name, why in report["not_tested"].items():
                items += nodes.list_item("", nodes.paragraph("", f"not tested: {name}: {why}"))
            out.append(items)
        versions = [[name, literal(v)] for name, v in report["versions"].items()]
        out.append(nodes.paragraph("", "Versions the report was made with:"))
        out.append(table(["package", "version"], versions))
        return out


def _verdicts(counts: dict[str, int]) -> str:
    parts = [f"{counts['passed']} ok"]
    if counts.get("failed"):
        parts.append(f"{counts['failed']} FAILED")
    if counts.get("divergent"):
        parts.append(f"{counts['divergent']} div")
    return ", ".join(parts)


def _code_then_text(code: str, text: str) -> nodes.paragraph:
    para = nodes.paragraph()
    para += literal(code)
    para += nodes.Text(f" → {text}")
    return para


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("anyreduce-toctree", OptionalTocTree)
    app.add_directive("anyreduce-cli-help", CliHelp)
    app.add_directive("anyreduce-ops", OpsTable)
    app.add_directive("anyreduce-onnx-versions", OnnxVersions)
    app.add_directive("anyreduce-framework-divergences", FrameworkDivergences)
    app.add_directive("anyreduce-runtime-divergences", RuntimeDivergences)
    app.add_directive("anyreduce-conformance-matrix", ConformanceMatrix)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
