"""Running ONNX nodes and models: :func:`run_node` and :func:`backend_for`.

The executor knows the ten reductions and the element-wise operators their function
bodies use (Abs, Mul, Sqrt, Exp, Log, Cast, CastLike), enough to run every
``test_reduce_*`` case of the ONNX backend suite, including the ``_expanded`` ones. It
walks a graph's nodes in order; it is not a general ONNX runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import array_api_compat

from .. import _backends
from .._lib import _dtypes
from .._lib._ops import OPS, run
from ._libraries import Library, library
from ._opsets import NEWEST_OPSET, op_version
from ._reductions import reduce

__all__ = ["SUPPORTED_OPS", "backend_for", "run_node"]

Array = Any
Namespace = Any
Node = Any  # onnx.NodeProto
Model = Any  # onnx.ModelProto

_DEFAULT_DOMAINS = ("", "ai.onnx")

# TensorProto.DataType values of the dtypes Cast can produce here.
_ONNX_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}

_REDUCTIONS = {op.onnx_name: op.name for op in OPS.values()}


def _onnx() -> Any:
    """The ``onnx`` package, or an ImportError saying how to install it."""
    try:
        import onnx
    except ImportError as e:
        msg = 'anyreduce.onnx needs the onnx package for this: pip install "anyreduce[onnx]"'
        raise ImportError(msg) from e
    return onnx


def _attributes(node: Node) -> dict[str, Any]:
    get = _onnx().helper.get_attribute_value
    return {a.name: get(a) for a in node.attribute}


def _unexpected(label: str, attributes: Mapping[str, Any], allowed: Sequence[str]) -> None:
    extra = sorted(set(attributes) - set(allowed))
    if extra:
        known = f"has {', '.join(allowed)}" if allowed else "has no attributes"
        msg = f"{label}: unexpected attribute {extra[0]!r}; {label} {known}"
        raise ValueError(msg)


def _reduction(node: Node, inputs: Sequence[Array | None], opset: int) -> Array:
    name = _REDUCTIONS[node.op_type]
    version = op_version(node.op_type, opset)
    label = version.label
    attributes = _attributes(node)
    if version.axes_input:
        _unexpected(label, attributes, ("keepdims", "noop_with_empty_axes"))
        if len(inputs) > 2:
            msg = f"{label}: takes 1 or 2 inputs (data, axes), got {len(inputs)}"
            raise ValueError(msg)
        axes = inputs[1] if len(inputs) == 2 else None
    else:
        _unexpected(label, attributes, ("axes", "keepdims"))
        if len(inputs) != 1:
            msg = f"{label}: takes 1 input (axes is an attribute here), got {len(inputs)}"
            raise ValueError(msg)
        axes = attributes.get("axes")
    return reduce(
        name,
        _data(label, inputs),
        axes,
        keepdims=attributes.get("keepdims", 1),
        noop_with_empty_axes=attributes.get("noop_with_empty_axes", 0),
        version=version,
    )


def _data(label: str, inputs: Sequence[Array | None]) -> Array:
    if not inputs or inputs[0] is None:
        msg = f"{label}: the first input (data) is required"
        raise ValueError(msg)
    return inputs[0]


def _arity(label: str, inputs: Sequence[Array | None], count: int) -> list[Array]:
    if len(inputs) != count or any(x is None for x in inputs):
        msg = f"{label}: takes {count} input{'s' if count > 1 else ''}, got {len(inputs)}"
        raise ValueError(msg)
    for x in inputs:
        _backends.namespace(label, x)
    return list(inputs)


def _abs(x: Array, xp: Namespace) -> Array:
    # ReduceL1's no-op form is exactly |x|, with the core's integer handling (wrapping
    # abs of the minimum, unsigned types torch has no abs kernel for).
    return run(OPS["reduce_l1"], x, (), True, xp=xp)


def _unary(
    function: Callable[[Namespace, Array], Array], *, floats_only: bool = True
) -> Callable[..., Array]:
    def evaluate(label: str, inputs: Sequence[Array | None], attributes: Mapping[str, Any]) -> Any:
        _unexpected(label, attributes, ())
        (x,) = _arity(label, inputs, 1)
        xp = array_api_compat.array_namespace(x)
        if floats_only and not _dtypes.is_float(xp, x.dtype):
            shown = _dtypes.dtype_name(xp, x.dtype) or x.dtype
            msg = f"{label}: input dtype {shown} is not supported; it takes floating dtypes"
            raise TypeError(msg)
        with _backends.quiet(xp):
            return function(xp, x)

    return evaluate


def _mul(label: str, inputs: Sequence[Array | None], attributes: Mapping[str, Any]) -> Array:
    _unexpected(label, attributes, ())
    a, b = _arity(label, inputs, 2)
    if a.dtype != b.dtype:
        msg = f"{label}: inputs must have one dtype, got {a.dtype} and {b.dtype}"
        raise TypeError(msg)
    xp = array_api_compat.array_namespace(a, b)
    with _backends.quiet(xp):
        return xp.multiply(a, b)


def _cast(label: str, inputs: Sequence[Array | None], attributes: Mapping[str, Any]) -> Array:
    _unexpected(label, attributes, ("to", "saturate", "round_mode"))
    (x,) = _arity(label, inputs, 1)
    xp = array_api_compat.array_namespace(x)
    if "to" not in attributes:
        msg = f"{label}: attribute 'to' is required"
        raise ValueError(msg)
    name = _ONNX_DTYPES.get(attributes["to"])
    dtype = None if name is None else _dtypes.dtype_named(xp, name)
    if dtype is None:
        msg = f"{label}: cannot cast to ONNX type {attributes['to']} ({name or 'unknown'}) here"
        raise TypeError(msg)
    with _backends.quiet(xp):
        return xp.astype(x, dtype)


def _cast_like(label: str, inputs: Sequence[Array | None], attributes: Mapping[str, Any]) -> Any:
    _unexpected(label, attributes, ("saturate", "round_mode"))
    x, like = _arity(label, inputs, 2)
    xp = array_api_compat.array_namespace(x)
    with _backends.quiet(xp):
        return xp.astype(x, like.dtype)


_ELEMENTWISE: dict[str, Callable[..., Array]] = {
    "Abs": _unary(lambda xp, x: _abs(x, xp), floats_only=False),
    "Sqrt": _unary(lambda xp, x: xp.sqrt(x)),
    "Exp": _unary(lambda xp, x: xp.exp(x)),
    "Log": _unary(lambda xp, x: xp.log(x)),
    "Mul": _mul,
    "Cast": _cast,
    "CastLike": _cast_like,
}

SUPPORTED_OPS: frozenset[str] = frozenset(_REDUCTIONS) | frozenset(_ELEMENTWISE)
"""The ONNX operators :func:`run_node` and the backends execute."""


def _check_opset(opset: int | None) -> int:
    number = NEWEST_OPSET if opset is None else opset
    op_version("ReduceSum", number)  # validates: integer in the known range
    return number


def _evaluate(node: Node, inputs: Sequence[Array | None], opset: int) -> list[Array]:
    op = node.op_type
    if node.domain not in _DEFAULT_DOMAINS or op not in SUPPORTED_OPS:
        domain = node.domain or "ai.onnx"
        msg = (
            f"run_node: operator {domain}::{op} is not supported; anyreduce runs "
            f"{', '.join(sorted(SUPPORTED_OPS))}"
        )
        raise ValueError(msg)
    if op in _REDUCTIONS:
        return [_reduction(node, inputs, opset)]
    label = f"{op} (opset {opset})"
    return [_ELEMENTWISE[op](label, inputs, _attributes(node))]


def run_node(
    node: Node, inputs: Sequence[Array | None], *, opset: int | None = None
) -> list[Array]:
    """Run one ONNX node on arrays of any namespace.

    Parameters
    ----------
    node : onnx.NodeProto
        A node of the default domain: any of the ten reductions (``ReduceSum``, ...),
        or Abs, Mul, Sqrt, Exp, Log, Cast, CastLike.
    inputs : sequence of arrays
        The node's inputs in order; arrays of any array-API namespace. For a reduction,
        ``axes`` is the second input from the version where it is one (ReduceSum-13,
        the others -18), and the ``axes`` attribute before.
    opset : int, optional
        ONNX opset, 1 to :data:`NEWEST_OPSET` (default): the newest version of the
        operator not after it applies, with all its rules.

    Returns
    -------
    list of arrays
        The node's outputs, in the namespace and on the device of the data.

    Raises
    ------
    ImportError
        The ``onnx`` package is not installed.
    ValueError
        The operator is not supported, the opset is unknown, or the node's attributes or
        inputs do not match the operator's version.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper
    >>> from anyreduce.onnx import run_node
    >>> node = helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)
    >>> run_node(node, [np.array([[1.0, 2.0], [3.0, 4.0]])], opset=11)
    [array([3., 7.])]
    >>> node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    >>> run_node(node, [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0])])
    [array([4., 6.])]
    """
    _onnx()
    number = _check_opset(opset)
    inputs = list(inputs)
    names = list(node.input)
    # An input may be left out with an empty name (an absent optional axes).
    if len(inputs) == len(names):
        inputs = [None if not name else x for name, x in zip(names, inputs, strict=True)]
    while inputs and inputs[-1] is None:
        inputs.pop()
    return _evaluate(node, inputs, number)


def _model_opset(model: Model) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        msg = "anyreduce.onnx: the model imports no opset of the default ONNX domain"
        raise ValueError(msg)
    return _check_opset(versions[0])


def _run_graph(graph: Any, values: dict[str, Array], opset: int) -> list[Array]:
    """Run ``graph``'s nodes in order; ``values`` holds its inputs and initializers."""
    for node in graph.node:
        inputs = [values[name] if name else None for name in node.input]
        values.update(zip(node.output, run_node(node, inputs, opset=opset), strict=False))
    return [values[output.name] for output in graph.output]


class _Prepared:
    """A model ready to run on one library and device (an ``onnx`` BackendRep)."""

    def __init__(self, model: Model, lib: Library, device: str) -> None:
        self.graph = model.graph
        self.opset = _model_opset(model)
        self.library = lib
        self.device = device
        to_array = _onnx().numpy_helper.to_array
        self.initializers = {t.name: to_array(t) for t in self.graph.initializer}
        self.input_names = [i.name for i in self.graph.input if i.name not in self.initializers]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on NumPy inputs (a list in graph order, or a dict by name); NumPy out."""
        named = (
            dict(inputs)
            if isinstance(inputs, Mapping)
            else dict(zip(self.input_names, inputs, strict=True))
        )
        lib = self.library
        with lib.context():
            values = {
                name: lib.from_numpy(value, self.device)
                for name, value in {**self.initializers, **named}.items()
            }
            outputs = _run_graph(self.graph, values, self.opset)
            return tuple(lib.to_numpy(y) for y in outputs)


_BACKENDS: dict[str, type] = {}


def backend_for(name: str) -> type:
    """An ONNX backend (``onnx.backend.base.Backend`` subclass) running on one library.

    Models take NumPy inputs and give NumPy outputs, as the ONNX backend API says; in
    between, every operator runs on the library's arrays and device. The model's default
    opset import decides each operator's version.

    Parameters
    ----------
    name : {"numpy", "torch", "jax", "array_api_strict", "dask"}
        The array library. JAX runs with 64-bit types enabled.

    Returns
    -------
    type
        The backend class, with ``prepare(model, device="CPU")``, ``run_model``,
        ``run_node``, ``is_compatible`` and ``supports_device`` ("CPU", and "CUDA" for
        torch and JAX when a GPU is present).

    Raises
    ------
    ImportError
        ``onnx`` or the library is not installed.
    ValueError
        ``name`` is not one of the libraries above.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> from anyreduce.onnx import backend_for
    >>> node = helper.make_node("ReduceL2", ["x"], ["y"], keepdims=0)
    >>> graph = helper.make_graph(
    ...     [node], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    ... )
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    >>> backend_for("numpy").run_model(model, [np.array([3.0, 4.0], dtype=np.float32)])
    (array(5., dtype=float32),)
    """
    onnx = _onnx()
    lib = library(name)
    if name in _BACKENDS:
        return _BACKENDS[name]
    base: Any = importlib.import_module("onnx.backend.base")

    class _Rep(_Prepared, base.BackendRep):  # type: ignore[misc]
        pass

    class _Backend(base.Backend):  # type: ignore[misc]
        @classmethod
        def is_compatible(cls, model: Model, device: str = "CPU", **kwargs: Any) -> bool:
            try:
                _model_opset(model)
            except ValueError:
                return False
            return all(
                n.domain in _DEFAULT_DOMAINS and n.op_type in SUPPORTED_OPS
                for n in model.graph.node
            )

        @classmethod
        def prepare(cls, model: Model, device: str = "CPU", **kwargs: Any) -> _Prepared:
            onnx.checker.check_model(model)
            return _Rep(model, lib, device)

        @classmethod
        def run_node(
            cls,
            node: Node,
            inputs: Any,
            device: str = "CPU",
            outputs_info: Any = None,
            **kwargs: Any,
        ) -> tuple[Any, ...]:
            opset = kwargs.get("opset_version")
            with lib.context():
                native = [None if x is None else lib.from_numpy(x, device) for x in inputs]
                outputs = run_node(node, native, opset=opset)
                return tuple(lib.to_numpy(y) for y in outputs)

        @classmethod
        def supports_device(cls, device: str) -> bool:
            return lib.supports(device)

    _Backend.__name__ = _Backend.__qualname__ = f"AnyreduceBackend_{name}"
    _Backend.__doc__ = f"ONNX backend running the reductions on {name} arrays."
    _Backend.__module__ = __name__
    _BACKENDS[name] = _Backend
    return _Backend
