"""Differential checks: generated cases (operator, opset, dtype, shape incl. zero-size and
rank 0, axes form, flags) on anyreduce over every installed library, and on the ONNX
reference evaluator, onnxruntime and the OpenVINO runtime, each against the exact contract.

A runtime's disagreement is accepted only when a documented divergence covers it
(``anyreduce._conformance._divergences``); anything else fails, with the case."""

from __future__ import annotations

import pytest
from columns import EXAMPLES, ONNX_RUNTIMES, OPENVINO_RUNTIMES, TARGET_NAMES, runtime, target

from anyreduce._conformance._execute import FAILED, run_on_runtime, run_on_target

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from anyreduce._conformance._generate import hypothesis_strategies  # noqa: E402

STRATEGIES = hypothesis_strategies()
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(result: object) -> None:
    if result is not None and result.status == FAILED:  # type: ignore[attr-defined]
        detail = result.detail  # type: ignore[attr-defined]
        pytest.fail(f"{result.case}: {detail}\ninputs: {result.inputs}", pytrace=False)  # type: ignore[attr-defined]


@pytest.mark.parametrize("library", TARGET_NAMES)
def test_onnx_profile_on_backend(library: str) -> None:
    chosen = target(library)

    @SETTINGS
    @given(STRATEGIES["onnx"]())
    def check(case: object) -> None:
        _check(run_on_target(case, chosen))  # type: ignore[arg-type]

    check()


@pytest.mark.parametrize("library", TARGET_NAMES)
def test_openvino_profile_on_backend(library: str) -> None:
    chosen = target(library)

    @SETTINGS
    @given(STRATEGIES["openvino"]())
    def check(case: object) -> None:
        _check(run_on_target(case, chosen))  # type: ignore[arg-type]

    check()


@pytest.mark.parametrize("name", ONNX_RUNTIMES)
def test_onnx_runtime_against_contract(name: str) -> None:
    chosen = runtime(name)

    @SETTINGS
    @given(STRATEGIES["onnx"](max_opset=chosen.max_opset()))
    def check(case: object) -> None:
        _check(run_on_runtime(case, chosen))  # type: ignore[arg-type]

    check()


@pytest.mark.parametrize("name", OPENVINO_RUNTIMES)
def test_openvino_runtime_against_contract(name: str) -> None:
    chosen = runtime(name)

    @SETTINGS
    @given(STRATEGIES["openvino"]())
    def check(case: object) -> None:
        _check(run_on_runtime(case, chosen))  # type: ignore[arg-type]

    check()
