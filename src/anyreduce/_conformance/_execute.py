"""Running one case on one target or runtime, and judging the result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._cases import ContractError, NodeCase, SpecCase
from ._exact import Exact, compare
from ._runtimes import Runtime
from ._targets import Target

__all__ = [
    "DIVERGENT",
    "FAILED",
    "PASSED",
    "Result",
    "run_node_case",
    "run_on_runtime",
    "run_on_target",
]

PASSED, FAILED, DIVERGENT = "passed", "failed", "divergent"


@dataclass
class Result:
    """The outcome of one case on one column (a target or a runtime)."""

    suite: str
    case: str  # the case's name or description
    op: str
    column: str
    status: str
    detail: str = ""
    divergence: str = ""  # id of the documented divergence, when status is divergent
    inputs: dict[str, Any] = field(default_factory=dict)
    expected: Any = None
    actual: Any = None

    def as_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case": self.case,
            "op": self.op,
            "column": self.column,
            "status": self.status,
            "detail": self.detail,
            "divergence": self.divergence,
            "inputs": self.inputs,
            "expected": self.expected,
            "actual": self.actual,
        }


def jsonable(value: Any, limit: int = 64) -> Any:
    """A JSON-friendly summary of an array (dtype, shape and at most ``limit`` values)."""
    if isinstance(value, ContractError):
        return f"raises {value.kind.__name__} ({value.reason})"
    if isinstance(value, BaseException):
        first = str(value).strip().splitlines()[0][:300] if str(value).strip() else ""
        return f"raised {type(value).__name__}: {first}"
    if isinstance(value, Exact):
        value = value.values
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        flat = array.ravel()[:limit]
        if array.dtype == object or array.dtype.kind in "biu":
            values: list[Any] = [int(v) if not isinstance(v, bool) else v for v in flat.tolist()]
        else:
            values = [_float(v) for v in flat.astype(np.float64).tolist()]
        dtype = "bfloat16" if str(array.dtype) == "bfloat16" else str(array.dtype)
        out: dict[str, Any] = {"dtype": dtype, "shape": list(array.shape), "values": values}
        if array.size > limit:
            out["truncated"] = int(array.size)
        return out
    return value


def _float(v: float) -> float | str:
    return v if math.isfinite(v) else repr(v)


def _spec_inputs(case: SpecCase) -> dict[str, Any]:
    inputs: dict[str, Any] = {"case": case.describe(), "data": jsonable(case.data)}
    if case.axes is not None:
        inputs["axes"] = list(case.axes)
    return inputs


def _contract(case: SpecCase) -> Exact | ContractError:
    try:
        return case.expected()
    except ContractError as error:
        return error


def _axes_on(target: Target, case: SpecCase) -> Any:
    """The axes in the form the case gives them, as the target's own integer array."""
    if case.axes is None:
        return None
    values = np.asarray(case.axes, dtype=case.axes_dtype)
    if case.axes_form == "scalar":
        values = values.reshape(())
    return target.from_numpy(values)


def _call(target: Target, case: SpecCase, data: Any) -> Any:
    if case.profile == "openvino":
        from .. import openvino

        return getattr(openvino, case.function)(
            data, _axes_on(target, case), keep_dims=bool(case.keepdims)
        )
    from .. import onnx

    if _have_onnx() and hasattr(onnx, "run_node"):
        inputs = [data]
        if case.axes_form in ("input", "scalar"):
            inputs.append(_axes_on(target, case))
        return onnx.run_node(_node(case), inputs, opset=case.opset)[0]
    axes = None if case.axes is None else list(case.axes)
    noop = {} if case.noop is None else {"noop_with_empty_axes": case.noop}
    return getattr(onnx, case.function)(
        data, axes, keepdims=case.keepdims, opset=case.opset, **noop
    )


def _node(case: SpecCase) -> Any:
    from ._cases import onnx_node

    return onnx_node(case)


def _have_onnx() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnx") is not None


def run_on_target(case: SpecCase, target: Target) -> Result | None:
    """Run ``case`` through anyreduce on ``target``; None when the target lacks the dtype."""
    if not target.has(case.dtype):
        return None
    want = _contract(case)
    result = Result(case.suite, case.name or case.describe(), case.op, target.name, PASSED)
    result.inputs = _spec_inputs(case)
    result.expected = jsonable(want)
    with target.active():
        data = target.from_numpy(case.data)
        try:
            got = _call(target, case, data)
        except Exception as error:  # noqa: BLE001 - every error is judged, none escapes
            result.actual = jsonable(error)
            if isinstance(want, ContractError) and isinstance(error, want.kind):
                return result
            result.status = FAILED
            result.detail = f"raised {type(error).__name__}: {error}"
            return result
        if isinstance(want, ContractError):
            result.status = FAILED
            result.detail = f"returned a result where the contract says {want}"
            result.actual = jsonable(target.to_numpy(got))
            return result
        problem = _check_kind(target, got, data)
        host = target.to_numpy(got) if problem is None or "namespace" not in problem else None
    if host is not None:
        result.actual = jsonable(host)
    if problem is not None:
        result.status, result.detail = FAILED, problem
        return result
    verdict = compare(case.op, host, want)
    if not verdict.agrees:
        result.status, result.detail = FAILED, verdict.why
    return result


def _check_kind(target: Target, got: Any, data: Any) -> str | None:
    """Namespace and device of a result, before its values."""
    import array_api_compat

    if not target.is_native(got):
        return f"namespace: returned {type(got).__module__}.{type(got).__name__}"
    if array_api_compat.device(got) != array_api_compat.device(data):
        return f"device {array_api_compat.device(got)}, expected {array_api_compat.device(data)}"
    return None


def run_on_runtime(case: SpecCase, runtime: Runtime) -> Result | None:
    """Run ``case`` on another runtime and judge it against the contract.

    A disagreement is ``divergent`` when a documented divergence of that runtime covers it
    (:mod:`._divergences`), ``failed`` otherwise.
    """
    from ._divergences import classify

    if not runtime.supports(case):
        return None
    want = _contract(case)
    result = Result(case.suite, case.name or case.describe(), case.op, runtime.name, PASSED)
    result.inputs = _spec_inputs(case)
    result.expected = jsonable(want)
    got: np.ndarray | BaseException
    try:
        got = runtime.execute(case)
    except Exception as error:  # noqa: BLE001 - a runtime's refusal is an outcome too
        got = error
    result.actual = jsonable(got)
    if isinstance(got, BaseException):
        if isinstance(want, ContractError):
            return result  # both refuse; runtimes' exception types are their own
        problem = f"raised {type(got).__name__}: {str(got).splitlines()[0] if str(got) else ''}"
    elif isinstance(want, ContractError):
        problem = f"returned a result where the contract says {want}"
    else:
        verdict = compare(case.op, got, want)
        if verdict.agrees:
            return result
        problem = verdict.why
    divergence = classify(runtime.name, case, got, want)
    if divergence is not None:
        result.status, result.divergence = DIVERGENT, divergence
        result.detail = f"{divergence}: {problem}"
    else:
        result.status, result.detail = FAILED, problem
    return result


def run_node_case(case: NodeCase, target: Target) -> Result:
    """Run one ONNX backend node test through ``anyreduce.onnx.backend_for`` on ``target``."""
    from onnx.backend.test.runner import Runner

    from .. import onnx

    result = Result(case.suite, case.name, case.op, target.name, PASSED)
    result.inputs = {
        "case": case.describe(),
        **{f"input {i}": jsonable(a) for i, a in enumerate(case.inputs)},
    }
    result.expected = [jsonable(o) for o in case.outputs]
    with target.active():
        try:
            backend: Any = onnx.backend_for(target.library)
            prepared = backend.prepare(case.model, target.device)
            outputs = [np.asarray(o) for o in prepared.run(list(case.inputs))]
        except Exception as error:  # noqa: BLE001 - every error is judged, none escapes
            result.status, result.detail = FAILED, f"raised {type(error).__name__}: {error}"
            result.actual = jsonable(error)
            return result
    result.actual = [jsonable(o) for o in outputs]
    try:
        Runner.assert_similar_outputs(list(case.outputs), outputs, rtol=case.rtol, atol=case.atol)
    except AssertionError as error:
        result.status, result.detail = FAILED, str(error).strip().splitlines()[0][:300]
    return result
