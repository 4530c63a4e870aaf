"""The worked examples of the seed documents at every opset version of every operator
(axes as attribute or input, as the version takes them), and the OpenVINO examples for
every OpenVINO operation: on every installed array library and runtime."""

from __future__ import annotations

import pytest
from columns import ONNX_RUNTIMES, OPENVINO_RUNTIMES, TARGET_NAMES, report, runtime, target

from anyreduce._conformance._cases import (
    ONNX_OPS,
    OPENVINO_OPS,
    openvino_seed_cases,
    seed_cases,
)
from anyreduce._conformance._execute import FAILED, run_on_runtime, run_on_target


def test_every_documented_version_is_covered() -> None:
    versions = {(c.op, c.opset) for c in seed_cases()}
    for op, opsets in {
        "ReduceL1": (1, 11, 13, 18),
        "ReduceL2": (1, 11, 13),
        "ReduceSum": (1, 11, 13),
    }.items():
        assert {(op, v) for v in opsets} <= versions
    forms = {(c.op, c.opset): c.axes_form for c in seed_cases() if c.axes is not None}
    assert forms[("ReduceSum", 11)] == "attribute"
    assert forms[("ReduceSum", 13)] == "input"
    assert forms[("ReduceL1", 13)] == "attribute"
    assert forms[("ReduceL1", 18)] == "input"


@pytest.mark.parametrize("op", ONNX_OPS)
@pytest.mark.parametrize("library", TARGET_NAMES)
def test_seed_examples_on_backend(library: str, op: str) -> None:
    chosen = target(library)
    results = [r for c in seed_cases() if c.op == op if (r := run_on_target(c, chosen))]
    assert results
    assert not any(r.status == FAILED for r in results), report(results)


@pytest.mark.parametrize("op", ONNX_OPS)
@pytest.mark.parametrize("name", ONNX_RUNTIMES)
def test_seed_examples_on_runtime(name: str, op: str) -> None:
    chosen = runtime(name)
    results = [r for c in seed_cases() if c.op == op if (r := run_on_runtime(c, chosen))]
    assert results
    assert not any(r.status == FAILED for r in results), report(results)


def test_openvino_examples_shapes() -> None:
    cases = list(openvino_seed_cases())
    assert len(cases) == 9 * 3 * 2
    shapes = {(c.axes, c.keepdims): c.expected().values.shape for c in cases if c.op == "ReduceL1"}
    assert shapes[((2, 3), 1)] == (6, 12, 1, 1)
    assert shapes[((2, 3), 0)] == (6, 12)
    assert shapes[((1,), 0)] == (6, 10, 24)
    assert shapes[((-2,), 0)] == (6, 12, 24)


@pytest.mark.parametrize("op", OPENVINO_OPS)
@pytest.mark.parametrize("library", TARGET_NAMES)
def test_openvino_examples_on_backend(library: str, op: str) -> None:
    chosen = target(library)
    cases = [c for c in openvino_seed_cases() if c.op == op]
    results = [r for c in cases if (r := run_on_target(c, chosen))]
    assert results
    assert not any(r.status == FAILED for r in results), report(results)


@pytest.mark.parametrize("op", OPENVINO_OPS)
@pytest.mark.parametrize("name", OPENVINO_RUNTIMES)
def test_openvino_examples_on_runtime(name: str, op: str) -> None:
    chosen = runtime(name)
    cases = [c for c in openvino_seed_cases() if c.op == op]
    results = [r for c in cases if (r := run_on_runtime(c, chosen))]
    assert results
    assert not any(r.status == FAILED for r in results), report(results)
