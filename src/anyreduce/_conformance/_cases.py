"""The cases of the conformance suite and the contract's answer to each.

Two kinds of case:

* :class:`SpecCase`: one reduction under one profile (ONNX at an opset, or OpenVINO) on
  NumPy data, with axes in the form that profile and version take (an ONNX attribute or
  input, an OpenVINO scalar or vector). Its expected result comes from the exact oracle
  (:mod:`._exact`) under the contract's rules, or is the error the contract demands. The
  seed documents' worked examples, the OpenVINO examples and the generated differential
  cases are all SpecCases.
* :class:`NodeCase`: one of the ONNX backend node tests, taken as the installed ``onnx``
  package builds it (model, inputs, expected outputs, tolerances).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._exact import Exact, dtype_name, exact

__all__ = [
    "ONNX_OPS",
    "OPENVINO_OPS",
    "NodeCase",
    "SpecCase",
    "load_node_cases",
    "onnx_model",
    "onnx_node",
    "openvino_seed_cases",
    "seed_cases",
]

# ONNX operator name -> anyreduce function name, in report order.
ONNX_OPS = {
    "ReduceSum": "reduce_sum",
    "ReduceSumSquare": "reduce_sum_square",
    "ReduceL1": "reduce_l1",
    "ReduceL2": "reduce_l2",
    "ReduceMean": "reduce_mean",
    "ReduceProd": "reduce_prod",
    "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min",
    "ReduceLogSum": "reduce_log_sum",
    "ReduceLogSumExp": "reduce_log_sum_exp",
}
# OpenVINO operation name -> anyreduce.openvino function name.
OPENVINO_OPS = {
    "ReduceL1": "reduce_l1",
    "ReduceL2": "reduce_l2",
    "ReduceSum": "reduce_sum",
    "ReduceMean": "reduce_mean",
    "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min",
    "ReduceProd": "reduce_prod",
    "ReduceLogicalAnd": "reduce_logical_and",
    "ReduceLogicalOr": "reduce_logical_or",
}
ROWS = (*ONNX_OPS, "ReduceLogicalAnd", "ReduceLogicalOr")


class ContractError(Exception):
    """The error the contract demands for a case: its kind and why."""

    def __init__(self, kind: type[Exception], reason: str) -> None:
        super().__init__(f"{kind.__name__}: {reason}")
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class SpecCase:
    """One reduction of NumPy ``data`` under one profile, with axes as that profile takes them."""

    profile: str  # "onnx" or "openvino"
    op: str  # ONNX / OpenVINO operation name, e.g. "ReduceL1"
    opset: int | None  # ONNX opset; None for OpenVINO
    data: np.ndarray
    axes: tuple[int, ...] | None  # None: no axes given
    # onnx: "absent", "attribute", "input" (1-D), "scalar" (a 0-D input);
    # openvino: "vector", "scalar"
    axes_form: str
    keepdims: int = 1
    noop: int | None = None  # noop_with_empty_axes; None: attribute not set
    axes_dtype: str = "int64"
    suite: str = "differential"
    name: str = ""

    @classmethod
    def onnx(
        cls,
        op: str,
        opset: int,
        data: np.ndarray,
        axes: tuple[int, ...] | None,
        axes_form: str,
        *,
        keepdims: int = 1,
        noop: int | None = None,
        suite: str = "differential",
        name: str = "",
    ) -> SpecCase:
        return cls("onnx", op, opset, data, axes, axes_form, keepdims, noop, "int64", suite, name)

    @classmethod
    def openvino(
        cls,
        op: str,
        data: np.ndarray,
        axes: tuple[int, ...],
        *,
        keep_dims: bool = False,
        axes_form: str = "vector",
        axes_dtype: str = "int64",
        suite: str = "differential",
        name: str = "",
    ) -> SpecCase:
        return cls(
            "openvino",
            op,
            None,
            data,
            axes,
            axes_form,
            int(keep_dims),
            None,
            axes_dtype,
            suite,
            name,
        )

    @property
    def dtype(self) -> str:
        return dtype_name(self.data.dtype)

    @property
    def function(self) -> str:
        """The anyreduce function name (in ``anyreduce.onnx`` or ``anyreduce.openvino``)."""
        return (ONNX_OPS if self.profile == "onnx" else OPENVINO_OPS)[self.op]

    def describe(self) -> str:
        """A one-line, reproducible description (without the data values)."""
        shape = "x".join(map(str, self.data.shape)) or "scalar"
        where = f"opset {self.opset}" if self.profile == "onnx" else "OpenVINO"
        axes = "absent" if self.axes is None else f"{list(self.axes)} ({self.axes_form})"
        flags = f"keepdims={self.keepdims}"
        if self.noop is not None:
            flags += f" noop_with_empty_axes={self.noop}"
        return f"{self.op} {where} {self.dtype}[{shape}] axes={axes} {flags}"

    def reduced_axes(self) -> tuple[int, ...]:
        """The axes reduced under the contract, normalised; raises :class:`ContractError`."""
        ndim = self.data.ndim
        given = list(self.axes or ())
        for axis in given:
            if not -ndim <= axis < ndim:
                reason = f"axis {axis} is out of range for rank {ndim}"
                raise ContractError(_axis_error(), reason)
        if self.profile == "onnx":
            version = _onnx_version(self.op, self.opset or 0)
            if not version.negative_axes and any(a < 0 for a in given):
                raise ContractError(_axis_error(), f"{version.label} takes no negative axes")
        normal = [a % ndim for a in given] if ndim else given
        if len(set(normal)) != len(normal):
            raise ContractError(_axis_error(), f"duplicate axes {given}")
        if self.profile == "openvino":
            return tuple(sorted(normal))
        if not normal:
            return () if self.noop else tuple(range(ndim))
        return tuple(sorted(normal))

    def expected(self) -> Exact:
        """The contract's result; raises :class:`ContractError` for an invalid case."""
        dtype = self.dtype
        if self.profile == "onnx":
            version = _onnx_version(self.op, self.opset or 0)
            if dtype not in version.dtypes:
                raise ContractError(TypeError, f"{version.label} takes no {dtype}")
        else:
            logical = self.op.startswith("ReduceLogical")
            if logical != (dtype == "bool"):
                raise ContractError(TypeError, f"OpenVINO {self.op} takes no {dtype}")
        return exact(self.op, self.data, self.reduced_axes(), bool(self.keepdims))

    def with_name(self, suite: str, name: str) -> SpecCase:
        return replace(self, suite=suite, name=name)


def _axis_error() -> type[Exception]:
    from .._lib._errors import AxisError

    return AxisError


def _onnx_version(op: str, opset: int) -> Any:
    from ..onnx import op_version

    return op_version(op, opset)


def onnx_versions(op: str) -> tuple[int, ...]:
    """Every since_version of an ONNX reduction, oldest first."""
    from ..onnx import VERSIONS

    return tuple(v.since for v in VERSIONS[op])


def _tensor_type(dtype: np.dtype) -> int:
    import onnx.helper

    return int(onnx.helper.np_dtype_to_tensor_dtype(dtype))


def onnx_node(case: SpecCase) -> Any:
    """The ``onnx.NodeProto`` of an ONNX SpecCase (axes as attribute or input)."""
    import onnx
    import onnx.helper

    attributes: dict[str, Any] = {"keepdims": case.keepdims}
    if case.noop is not None:
        attributes["noop_with_empty_axes"] = case.noop
    inputs = ["data"]
    if case.axes_form in ("input", "scalar"):
        inputs.append("axes")
    node = onnx.helper.make_node(case.op, inputs, ["reduced"], **attributes)
    if case.axes_form == "attribute":
        # make_node cannot infer the type of an empty list: build the INTS attribute.
        axes = onnx.helper.make_attribute(
            "axes", list(case.axes or ()), attr_type=onnx.AttributeProto.INTS
        )
        node.attribute.append(axes)
    return node


def onnx_model(case: SpecCase) -> Any:
    """A one-node ``onnx.ModelProto`` running ``case`` at its opset."""
    import onnx
    import onnx.helper

    element = _tensor_type(case.data.dtype)
    inputs = [onnx.helper.make_tensor_value_info("data", element, list(case.data.shape))]
    if case.axes_form in ("input", "scalar"):
        shape = [] if case.axes_form == "scalar" else [len(case.axes or ())]
        inputs.append(onnx.helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, shape))
    output = onnx.helper.make_tensor_value_info("reduced", element, None)
    graph = onnx.helper.make_graph([onnx_node(case)], "conformance", inputs, [output])
    opset = onnx.helper.make_opsetid("", case.opset or 1)
    return onnx.helper.make_model(graph, opset_imports=[opset], ir_version=10)


# --- the seed documents' worked examples ------------------------------------------------

SEED_SHAPE = (3, 2, 2)
# (example name, axes, keepdims, noop): every example of the ReduceL1, ReduceL2 and
# ReduceSum pages; None axes is "default axes" (attribute absent, or an empty input).
SEED_EXAMPLES = (
    ("do_not_keepdims_axis2", (2,), 0, None),  # ReduceL1, ReduceL2 pages
    ("keepdims_axis2", (2,), 1, None),
    ("do_not_keepdims_axis1", (1,), 0, None),  # ReduceSum page
    ("keepdims_axis1", (1,), 1, None),
    ("default_axes_keepdims", None, 1, None),
    ("negative_axes_keepdims_-1", (-1,), 1, None),  # ReduceL1, ReduceL2 pages
    ("negative_axes_keepdims_-2", (-2,), 1, None),  # ReduceSum page
    ("empty_axes_input_noop", (), 1, 1),  # ReduceSum page, from the version with the input
)


def seed_data() -> dict[str, np.ndarray]:
    """The two data sets of every seed example: 1..12, and uniform(-10, 10) with seed 0."""
    example = np.arange(1, 13, dtype=np.float32).reshape(SEED_SHAPE)
    random = np.random.RandomState(0).uniform(-10, 10, SEED_SHAPE).astype(np.float32)
    return {"example": example, "random": random}


def seed_cases() -> Iterator[SpecCase]:
    """Every seed example, for all ten operators at every version of each."""
    for op in ONNX_OPS:
        for opset in onnx_versions(op):
            version = _onnx_version(op, opset)
            for example, axes, keepdims, noop in SEED_EXAMPLES:
                if noop is not None and not version.noop_with_empty_axes:
                    continue
                given: tuple[int, ...] | None
                if version.axes_input:
                    form, given = "input", axes if axes is not None else ()
                else:
                    form, given = ("absent", None) if axes is None else ("attribute", axes)
                for kind, data in seed_data().items():
                    name = f"{op}-{opset}/{example}_{kind}"
                    yield SpecCase.onnx(
                        op,
                        opset,
                        data,
                        given,
                        form,
                        keepdims=keepdims,
                        noop=noop,
                        suite="seed",
                        name=name,
                    )


OPENVINO_SEED_SHAPE = (6, 12, 10, 24)
OPENVINO_SEED_AXES = ((2, 3), (1,), (-2,))


def openvino_seed_cases() -> Iterator[SpecCase]:
    """The OpenVINO ReduceL1-4 examples, for every OpenVINO reduction, keep_dims both ways."""
    rng = np.random.default_rng(0)
    numbers = rng.uniform(-10, 10, OPENVINO_SEED_SHAPE).astype(np.float32)
    truths = rng.integers(0, 8, OPENVINO_SEED_SHAPE) > 0  # mostly True: "and" is not all False
    for op in OPENVINO_OPS:
        data = truths if op.startswith("ReduceLogical") else numbers
        for axes in OPENVINO_SEED_AXES:
            for keep in (True, False):
                name = f"{op}/axes{list(axes)}_keep_dims_{str(keep).lower()}"
                yield SpecCase.openvino(
                    op, data, axes, keep_dims=keep, suite="openvino-seed", name=name
                )


# --- the ONNX backend node tests ----------------------------------------------------------

# Name prefixes of the node tests, longest first so that log_sum_exp wins over log_sum.
_NODE_PREFIXES = sorted(
    ((f"test_reduce_{name.removeprefix('reduce_')}", op) for op, name in ONNX_OPS.items()),
    key=lambda item: -len(item[0]),
)


@dataclass(frozen=True)
class NodeCase:
    """One ``test_reduce_*`` case of the ONNX backend test suite."""

    name: str
    op: str
    model: Any
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    rtol: float
    atol: float
    suite: str = field(default="onnx-node")

    @property
    def expanded(self) -> bool:
        return "_expanded" in self.name

    def describe(self) -> str:
        opset = self.model.opset_import[0].version
        nodes = ", ".join(n.op_type for n in self.model.graph.node)
        return f"{self.name} (opset {opset}: {nodes})"


def _node_op(name: str) -> str:
    for prefix, op in _NODE_PREFIXES:
        if name.startswith(prefix):
            return op
    msg = f"{name} is not a reduction node test"
    raise ValueError(msg)


def load_node_cases() -> list[NodeCase]:
    """The ``test_reduce_*`` node tests, built in memory by the installed ``onnx``.

    Only the reduction modules of ``onnx.backend.test.case.node`` are imported (each builds
    its cases on import); the full ``load_model_tests(kind="node")`` builds every operator's
    cases and takes far longer, so it is the fallback if that layout ever changes.
    """
    import warnings

    import onnx.backend.test.case.node as node_cases
    from onnx.numpy_helper import to_array

    state = np.random.get_state()  # noqa: NPY002 - the case builders reseed NumPy's global generator
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for module in pkgutil.iter_modules(node_cases.__path__):
                if module.name.startswith("reduce"):
                    importlib.import_module(f"{node_cases.__name__}.{module.name}")
            built = list(getattr(node_cases, "_NodeTestCases", []))
            if not any(c.name.startswith("test_reduce_") for c in built):
                from onnx.backend.test.loader import load_model_tests

                built = load_model_tests(kind="node")
    finally:
        np.random.set_state(state)  # noqa: NPY002

    def host(value: Any) -> np.ndarray:
        return value if isinstance(value, np.ndarray) else np.asarray(to_array(value))

    cases = []
    seen = set()
    for case in built:
        if not case.name.startswith("test_reduce_") or case.name in seen:
            continue
        seen.add(case.name)
        for inputs, outputs in case.data_sets:
            cases.append(
                NodeCase(
                    case.name,
                    _node_op(case.name),
                    case.model,
                    tuple(host(i) for i in inputs),
                    tuple(host(o) for o in outputs),
                    float(case.rtol),
                    float(case.atol),
                )
            )
    return sorted(cases, key=lambda c: c.name)
