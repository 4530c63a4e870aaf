"""The other implementations anyreduce is compared with: the ONNX reference evaluator,
onnxruntime and the OpenVINO runtime, each used only when installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cases import SpecCase, onnx_model

__all__ = ["RUNTIMES", "Runtime", "discover_runtimes"]


@dataclass(frozen=True)
class Runtime:
    """One runtime: its column name, the profile it implements and how to run a case."""

    name: str
    profile: str  # "onnx" or "openvino"
    module: str  # the module whose presence makes it available
    execute: Callable[[SpecCase], np.ndarray]
    max_opset: Callable[[], int]

    def available(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def version(self) -> str:
        """The installed release of the runtime's distribution, "" if unknown."""
        try:
            return importlib.metadata.version(self.module)
        except importlib.metadata.PackageNotFoundError:
            return ""

    def supports(self, case: SpecCase) -> bool:
        """Whether the case is one this runtime can be given at all (profile, opset)."""
        if case.profile != self.profile:
            return False
        return case.opset is None or case.opset <= self.max_opset()


def _feeds(case: SpecCase) -> dict[str, np.ndarray]:
    feeds = {"data": case.data}
    if case.axes_form in ("input", "scalar"):
        shape = () if case.axes_form == "scalar" else (-1,)
        feeds["axes"] = np.asarray(case.axes, dtype=np.int64).reshape(shape)
    return feeds


def _run_reference(case: SpecCase) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        outputs: Any = ReferenceEvaluator(onnx_model(case)).run(None, _feeds(case))
        return np.asarray(outputs[0])


def _reference_max_opset() -> int:
    import onnx.defs

    return int(onnx.defs.onnx_opset_version())


@functools.cache
def _ort_options() -> Any:
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # kernel errors are results here, not logs
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return options


def _run_onnxruntime(case: SpecCase) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(
        onnx_model(case).SerializeToString(),
        sess_options=_ort_options(),
        providers=["CPUExecutionProvider"],
    )
    run_options = onnxruntime.RunOptions()
    run_options.log_severity_level = 4
    return np.asarray(session.run(None, _feeds(case), run_options)[0])


@functools.cache
def _onnxruntime_max_opset() -> int:
    """The newest ONNX opset the installed onnxruntime loads, found by trying."""
    import onnx.defs
    import onnxruntime

    for opset in range(int(onnx.defs.onnx_opset_version()), 12, -1):
        probe = SpecCase.onnx("ReduceSum", opset, np.zeros((1,), np.float32), None, "absent")
        try:
            onnxruntime.InferenceSession(
                onnx_model(probe).SerializeToString(),
                sess_options=_ort_options(),
                providers=["CPUExecutionProvider"],
            )
        except Exception:  # noqa: BLE001 - any failure to load means "not this opset"
            continue
        return opset
    return 12


# OpenVINO operator set modules holding each operation (ReduceL1/L2 are in opset 4).
_OPENVINO_FACTORIES = {
    "ReduceL1": ("openvino.opset4", "reduce_l1"),
    "ReduceL2": ("openvino.opset4", "reduce_l2"),
    "ReduceSum": ("openvino.opset1", "reduce_sum"),
    "ReduceMean": ("openvino.opset1", "reduce_mean"),
    "ReduceMax": ("openvino.opset1", "reduce_max"),
    "ReduceMin": ("openvino.opset1", "reduce_min"),
    "ReduceProd": ("openvino.opset1", "reduce_prod"),
    "ReduceLogicalAnd": ("openvino.opset1", "reduce_logical_and"),
    "ReduceLogicalOr": ("openvino.opset1", "reduce_logical_or"),
}


@functools.cache
def _openvino_core() -> Any:
    import openvino

    return openvino.Core()


def _run_openvino(case: SpecCase) -> np.ndarray:
    """Build the one-operation OpenVINO graph of ``case`` and run it on the CPU plugin."""
    import importlib

    import openvino

    module, function = _OPENVINO_FACTORIES[case.op]
    factory = getattr(importlib.import_module(module), function)
    element = (
        openvino.Type.boolean if case.data.dtype == np.bool_ else openvino.Type(case.data.dtype)
    )
    data = openvino.opset1.parameter(list(case.data.shape), element)
    axes_values = np.asarray(case.axes, dtype=case.axes_dtype)
    if case.axes_form == "scalar":
        axes_values = axes_values.reshape(())
    axes = openvino.op.Constant(axes_values)
    node = factory(data, axes, bool(case.keepdims))
    model = openvino.Model([node], [data])
    compiled = _openvino_core().compile_model(model, "CPU")
    return np.asarray(next(iter(compiled([case.data]).values())))


RUNTIMES = (
    Runtime("onnx.reference", "onnx", "onnx", _run_reference, _reference_max_opset),
    Runtime("onnxruntime", "onnx", "onnxruntime", _run_onnxruntime, _onnxruntime_max_opset),
    Runtime("openvino", "openvino", "openvino", _run_openvino, lambda: 0),
)


def discover_runtimes(
    wanted: tuple[str, ...] | None = None,
) -> tuple[list[Runtime], dict[str, str]]:
    """The installed runtimes (restricted to ``wanted``) and why the others are absent."""
    found, absent = [], {}
    for runtime in RUNTIMES:
        if wanted is not None and runtime.name not in wanted:
            continue
        if runtime.available() and (runtime.profile != "onnx" or _onnx_installed()):
            found.append(runtime)
        else:
            absent[runtime.name] = f"{runtime.module} is not installed"
    return found, absent


def _onnx_installed() -> bool:
    return importlib.util.find_spec("onnx") is not None
