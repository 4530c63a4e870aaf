"""The ONNX backend node tests (``test_reduce_*``), as the installed ``onnx`` builds them,
run through ``anyreduce.onnx.backend_for`` on every installed array library."""

from __future__ import annotations

import pytest
from columns import TARGET_NAMES, target

from anyreduce._conformance._execute import PASSED, run_node_case

onnx = pytest.importorskip("onnx")

from anyreduce._conformance._cases import load_node_cases  # noqa: E402

CASES = {case.name: case for case in load_node_cases()}


def test_all_reduce_cases_are_loaded() -> None:
    assert len(CASES) == 132
    assert sum(case.expanded for case in CASES.values()) == 41


@pytest.mark.parametrize("library", TARGET_NAMES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(library: str, name: str) -> None:
    result = run_node_case(CASES[name], target(library))
    assert result.status == PASSED, result.detail
