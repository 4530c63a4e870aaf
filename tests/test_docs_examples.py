"""Every example in the docstrings and in the documentation pages runs and prints what it says.

Docstrings: every module of the package, found by walking it. Pages: the ``>>>`` code blocks of
every Markdown page under ``docs/``; the blocks of one page share one namespace, like a
session, and everything outside them is blanked so that failures report the page's own line
numbers.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import re
from pathlib import Path

import pytest

import anyreduce

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
DOCS = Path(__file__).resolve().parents[1] / "docs"

MODULES = sorted(
    ["anyreduce"]
    + [
        info.name
        for info in pkgutil.walk_packages(anyreduce.__path__, "anyreduce.")
        if not info.name.endswith("__main__")
    ]
)
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def page_examples(text: str) -> str:
    """``text`` with every line blanked except those of fenced blocks that hold ``>>>``."""
    lines = text.splitlines()
    keep = [False] * len(lines)
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = range(i + 1, j)
        if any(lines[k].lstrip().startswith(">>>") for k in body):
            for k in body:
                keep[k] = True
        i = j + 1
    return "\n".join(line if kept else "" for line, kept in zip(lines, keep, strict=True)) + "\n"


PAGES = sorted(
    path.relative_to(DOCS).as_posix()
    for path in DOCS.rglob("*.md")
    if not {"_build", "generated"} & set(path.relative_to(DOCS).parts)
    and ">>>" in page_examples(path.read_text(encoding="utf-8"))
)


def _report(runner: doctest.DocTestRunner, tests: list[doctest.DocTest]) -> str:
    out = io.StringIO()
    for test in tests:
        runner.run(test, out=out.write)
    return out.getvalue()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = _report(runner, tests)
    assert runner.failures == 0, report


@pytest.mark.parametrize("page", PAGES)
def test_page_examples(page: str) -> None:
    path = DOCS / page
    text = page_examples(path.read_text(encoding="utf-8"))
    test = doctest.DocTestParser().get_doctest(text, {}, page, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = _report(runner, [test])
    assert runner.failures == 0, report


def test_page_examples_keep_only_doctest_blocks() -> None:
    text = "prose >>> not code\n```console\n$ echo\n```\n```python\n>>> 1 + 1\n2\n```\ntail\n"
    assert page_examples(text).splitlines() == ["", "", "", "", "", ">>> 1 + 1", "2", "", ""]
