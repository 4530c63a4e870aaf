"""Running ONNX nodes and models: :func:`run_node` and :func:`backend_for`.

The executor knows the ten reductions and the element-wise operators found around them:
the function bodies of the reductions (Abs, Mul, Sqrt, Exp, Log, Cast, CastLike), enough
to run every ``test_reduce_*`` case of the ONNX backend suite including the ``_expanded``
ones, and the graphs PyTorch's TorchScript exporter writes around a reduction (Constant,
Identity, Add, Sub, Div, Pow, Neg, Reciprocal). It walks a graph's nodes in order; it is
not a general ONNX runtime. Every malformed call (a node, model, input, attribute or
device it cannot run) is refused with a TypeError or ValueError naming what is wrong.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import _backends
from .._lib._ops import OPS
from ._elementwise import CONSTANT, ELEMENTWISE, check_attributes, node_label
from ._libraries import Library, library, parse_device
from ._opsets import NEWEST_OPSET, op_version
from ._reductions import reduce

__all__ = ["SUPPORTED_OPS", "backend_for", "run_node"]

Array = Any
Node = Any  # onnx.NodeProto
Model = Any  # onnx.ModelProto

_DEFAULT_DOMAINS = ("", "ai.onnx")

_REDUCTIONS = {op.onnx_name: op.name for op in OPS.values()}

SUPPORTED_OPS: frozenset[str] = frozenset(_REDUCTIONS) | frozenset(ELEMENTWISE)
"""The ONNX operators :func:`run_node` and the backends execute."""


def _onnx() -> Any:
    """The ``onnx`` package, or an ImportError saying how to install it."""
    try:
        import onnx
    except ImportError as e:
        msg = 'anyreduce.onnx needs the onnx package for this: pip install "anyreduce[onnx]"'
        raise ImportError(msg) from e
    return onnx


def _reduction(node: Node, label: str, inputs: Sequence[Array | None], opset: int) -> list[Array]:
    name = _REDUCTIONS[node.op_type]
    version = op_version(node.op_type, opset)
    ints = _onnx().AttributeProto.INT
    if version.axes_input:
        allowed = {"keepdims": ints, "noop_with_empty_axes": ints}
        attributes = check_attributes(node, label, allowed)
        if len(inputs) > 2:
            msg = f"{label}: takes 1 or 2 inputs (data, axes), got {len(inputs)}"
            raise ValueError(msg)
        axes = inputs[1] if len(inputs) == 2 else None
    else:
        allowed = {"axes": _onnx().AttributeProto.INTS, "keepdims": ints}
        attributes = check_attributes(node, label, allowed)
        if len(inputs) != 1:
            msg = f"{label}: takes 1 input (axes is an attribute here), got {len(inputs)}"
            raise ValueError(msg)
        axes = attributes.get("axes")
    if not inputs or inputs[0] is None:
        msg = f"{label}: the first input (data) is required"
        raise ValueError(msg)
    result = reduce(
        name,
        inputs[0],
        axes,
        keepdims=attributes.get("keepdims", 1),
        noop_with_empty_axes=attributes.get("noop_with_empty_axes", 0),
        version=version,
        label=label,
    )
    return [result]


def _check_opset(opset: int | None) -> int:
    number = NEWEST_OPSET if opset is None else opset
    op_version("ReduceSum", number)  # validates: integer in the known range
    return number


def _check_node(node: object, where: str) -> None:
    """TypeError unless ``node`` is an ``onnx.NodeProto``; ValueError for an unknown op."""
    onnx = _onnx()
    if not isinstance(node, onnx.NodeProto):
        msg = f"{where}: node must be an onnx.NodeProto, got {type(node).__name__}"
        raise TypeError(msg)
    if node.domain not in _DEFAULT_DOMAINS or node.op_type not in SUPPORTED_OPS:
        domain = node.domain or "ai.onnx"
        named = f" (node {node.name!r})" if node.name else ""
        msg = (
            f"{where}: operator {domain}::{node.op_type}{named} is not supported; anyreduce "
            f"runs {', '.join(sorted(SUPPORTED_OPS))}"
        )
        raise ValueError(msg)


def _label(node: Node, opset: int) -> str:
    if node.op_type in _REDUCTIONS:
        return node_label(node, op_version(node.op_type, opset).label)
    return node_label(node, f"{node.op_type} (opset {opset})")


def run_node(
    node: Node, inputs: Sequence[Array | None], *, opset: int | None = None
) -> list[Array]:
    """Run one ONNX node on arrays of any namespace.

    Parameters
    ----------
    node : onnx.NodeProto
        A node of the default domain: any of the ten reductions (``ReduceSum``, ...), or
        Abs, Add, Cast, CastLike, Constant, Div, Exp, Identity, Log, Mul, Neg, Pow,
        Reciprocal, Sqrt, Sub (:data:`SUPPORTED_OPS`).
    inputs : sequence of arrays
        One entry per name in ``node.input``, in order: arrays of any array-API namespace,
        or None for an optional input left out (an empty name). For a reduction, ``axes``
        is the second input from the version where it is one (ReduceSum-13, the others
        -18), and the ``axes`` attribute before.
    opset : int, optional
        ONNX opset, 1 to :data:`NEWEST_OPSET` (default): the newest version of the
        operator not after it applies, with all its rules.

    Returns
    -------
    list of arrays
        The node's output, in the namespace and on the device of the data (a Constant,
        which has no input, gives a NumPy array).

    Raises
    ------
    ImportError
        The ``onnx`` package is not installed.
    TypeError
        ``node`` is not a NodeProto, an input is not an array, or an input dtype or an
        attribute's type is not one the operator takes.
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
    _check_node(node, "run_node")
    number = _check_opset(opset)
    label = _label(node, number)
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        kind = type(inputs).__name__
        msg = f"{label}: inputs must be a list of arrays, one per node input, not {kind}"
        raise TypeError(msg)
    names = list(node.input)
    if len(inputs) != len(names):
        declared = ", ".join(repr(n) for n in names) or "none"
        msg = (
            f"{label}: the node declares {len(names)} input(s) ({declared}) "
            f"but {len(inputs)} were given"
        )
        raise ValueError(msg)
    if len(node.output) != 1:
        msg = f"{label}: has one output; the node declares {len(node.output)}"
        raise ValueError(msg)
    # An input may be left out with an empty name (an absent optional axes).
    given = [None if not name else x for name, x in zip(names, inputs, strict=True)]
    for name, x in zip(names, given, strict=True):
        if x is not None:
            _backends.namespace(f"{label}: input {name!r}", x)
    while given and given[-1] is None:
        given.pop()
    if node.op_type in _REDUCTIONS:
        return _reduction(node, label, given, number)
    return [ELEMENTWISE[node.op_type](node, label, given)]


def _model_opset(model: Model, where: str = "anyreduce.onnx") -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    if not versions:
        msg = f"{where}: the model imports no opset of the default ONNX domain"
        raise ValueError(msg)
    return _check_opset(versions[0])


def _check_model(model: object, where: str) -> None:
    onnx = _onnx()
    if not isinstance(model, onnx.ModelProto):
        msg = f"{where}: model must be an onnx.ModelProto, got {type(model).__name__}"
        raise TypeError(msg)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        msg = f"{where}: the model is not valid ONNX: {first}"
        raise ValueError(msg) from e
    _model_opset(model, where)
    for node in model.graph.node:
        _check_node(node, where)
    for value in model.graph.input:
        if value.type.WhichOneof("value") not in (None, "tensor_type"):
            kind = value.type.WhichOneof("value")
            msg = f"{where}: graph input {value.name!r} is a {kind}; anyreduce runs tensors only"
            raise ValueError(msg)


def _check_device(lib: Library, device: object, where: str) -> str:
    """``device`` if ``lib`` can run there, else a TypeError or ValueError saying why."""
    try:
        parse_device(device)
    except (TypeError, ValueError) as e:
        msg = f"{where}: {e}"
        raise type(e)(msg) from None
    assert isinstance(device, str)
    if not lib.supports(device):
        msg = (
            f"{where}: device {device!r} is not available to {lib.name} here "
            f"(supports_device({device!r}) is False)"
        )
        raise ValueError(msg)
    return device


_NUMERIC_KINDS = frozenset("biufc")


def _numpy_input(value: object, what: str) -> np.ndarray:
    """``value`` as a NumPy array of a numeric or bool dtype; TypeError for anything else."""
    if not isinstance(value, (np.ndarray, np.generic)):
        msg = f"{what} must be a NumPy array, got {type(value).__name__}"
        raise TypeError(msg)
    array = np.asarray(value)
    if array.dtype.kind not in _NUMERIC_KINDS and array.dtype.name != "bfloat16":
        msg = f"{what} has dtype {array.dtype}; anyreduce takes bool, integer and floating arrays"
        raise TypeError(msg)
    return array


def _to_library(lib: Library, device: str, value: object, what: str) -> Array:
    """A NumPy input on ``lib``'s ``device`` (a copy; the caller's array is untouched)."""
    return lib.from_numpy(_numpy_input(value, what), device)


def _declared(value_info: Any) -> tuple[Any, list[int | None] | None]:
    """The NumPy dtype and shape (None for a free dimension) a graph input declares."""
    onnx = _onnx()
    tensor = value_info.type.tensor_type
    dtype = None
    if tensor.elem_type:
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        except (KeyError, TypeError, ValueError):
            dtype = None
    shape = None
    if tensor.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    return dtype, shape


class _Prepared:
    """A model ready to run on one library and device (an ``onnx`` BackendRep)."""

    def __init__(self, model: Model, lib: Library, device: str) -> None:
        self.graph = model.graph
        self.opset = _model_opset(model)
        self.library = lib
        self.device = device
        to_array = _onnx().numpy_helper.to_array
        self.initializers = {
            t.name: _numpy_input(to_array(t), f"prepare: initializer {t.name!r}")
            for t in self.graph.initializer
        }
        self.declared = {i.name: i for i in self.graph.input}
        self.input_names = [i.name for i in self.graph.input if i.name not in self.initializers]

    def _named(self, inputs: object) -> dict[str, Any]:
        expected = self.input_names
        listed = ", ".join(repr(n) for n in expected) or "none"
        if isinstance(inputs, Mapping):
            unknown = [k for k in inputs if k not in self.declared]
            if unknown:
                msg = f"run: {unknown[0]!r} is not an input of the model; its inputs are {listed}"
                raise ValueError(msg)
            missing = [n for n in expected if n not in inputs]
            if missing:
                msg = f"run: input {missing[0]!r} is missing; the model's inputs are {listed}"
                raise ValueError(msg)
            return dict(inputs)
        if isinstance(inputs, (str, bytes, np.ndarray)) or not isinstance(inputs, Sequence):
            msg = (
                "run: inputs must be a list of NumPy arrays in the order of the model's "
                f"inputs ({listed}) or a dict by name, got {type(inputs).__name__}"
            )
            raise TypeError(msg)
        if len(inputs) != len(expected):
            msg = f"run: the model takes {len(expected)} input(s) ({listed}), got {len(inputs)}"
            raise ValueError(msg)
        return dict(zip(expected, inputs, strict=True))

    def _check_input(self, name: str, array: np.ndarray) -> None:
        dtype, shape = _declared(self.declared[name])
        if dtype is not None and array.dtype != dtype:
            msg = f"run: input {name!r} has dtype {array.dtype}; the model declares {dtype}"
            raise TypeError(msg)
        if shape is not None and (
            len(shape) != array.ndim
            or any(d is not None and d != n for d, n in zip(shape, array.shape, strict=True))
        ):
            declared = tuple("?" if d is None else d for d in shape)
            msg = (
                f"run: input {name!r} has shape {array.shape}; the model declares "
                f"{declared} ('?': any size)"
            )
            raise ValueError(msg)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on NumPy inputs (a list in graph order, or a dict by name); NumPy out."""
        named = self._named(inputs)
        lib = self.library
        for name, value in named.items():
            self._check_input(name, _numpy_input(value, f"run: input {name!r}"))
        with lib.mode():
            values = {
                name: lib.from_numpy(value, self.device)
                for name, value in self.initializers.items()
            }
            values.update(
                {
                    name: _to_library(lib, self.device, value, f"run: input {name!r}")
                    for name, value in named.items()
                }
            )
            outputs = self._run_graph(values)
            return tuple(lib.to_numpy(y) for y in outputs)

    def _run_graph(self, values: dict[str, Array]) -> list[Array]:
        """Run the graph's nodes in order; ``values`` holds its inputs and initializers."""
        for node in self.graph.node:
            missing = [name for name in node.input if name and name not in values]
            if missing:
                label = _label(node, self.opset)
                msg = (
                    f"{label}: input {missing[0]!r} is not a graph input, an initializer or "
                    "the output of an earlier node"
                )
                raise ValueError(msg)
            inputs = [values[name] if name else None for name in node.input]
            (output,) = run_node(node, inputs, opset=self.opset)
            if node.op_type == CONSTANT:  # made on the host: move it to the library
                output = self.library.from_numpy(output, self.device)
            values[node.output[0]] = output
        missing = [o.name for o in self.graph.output if o.name not in values]
        if missing:
            msg = f"run: graph output {missing[0]!r} is computed by no node"
            raise ValueError(msg)
        return [values[output.name] for output in self.graph.output]


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
        ``run_node``, ``is_compatible`` and ``supports_device``. Devices are ONNX device
        strings: "CPU" everywhere, "CUDA" (or "CUDA:N") for torch and JAX where that GPU
        is present; ``prepare``, ``run_model`` and ``run_node`` refuse every device
        ``supports_device`` says False to.

    Raises
    ------
    ImportError
        ``onnx`` or the library is not installed.
    TypeError, ValueError
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
    _onnx()
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
                _check_model(model, "is_compatible")
            except (TypeError, ValueError):
                return False
            return cls.supports_device(device)

        @classmethod
        def prepare(cls, model: Model, device: str = "CPU", **kwargs: Any) -> _Prepared:
            _check_model(model, "prepare")
            return _Rep(model, lib, _check_device(lib, device, "prepare"))

        @classmethod
        def run_node(
            cls,
            node: Node,
            inputs: Any,
            device: str = "CPU",
            outputs_info: Any = None,
            **kwargs: Any,
        ) -> tuple[Any, ...]:
            _check_node(node, "run_node")
            device = _check_device(lib, device, "run_node")
            opset = kwargs.get("opset_version")
            number = _check_opset(opset)
            label = _label(node, number)
            if isinstance(inputs, (str, bytes, np.ndarray)) or not isinstance(inputs, Sequence):
                msg = f"{label}: inputs must be a list of NumPy arrays, got {type(inputs).__name__}"
                raise TypeError(msg)
            with lib.mode():
                native = [
                    None if x is None else _to_library(lib, device, x, f"{label}: input {i}")
                    for i, x in enumerate(inputs)
                ]
                outputs = run_node(node, native, opset=number)
                if node.op_type == CONSTANT:
                    return tuple(np.asarray(y) for y in outputs)
                return tuple(lib.to_numpy(y) for y in outputs)

        @classmethod
        def supports_device(cls, device: str) -> bool:
            try:
                return lib.supports(device)
            except (TypeError, ValueError):
                return False

    _Backend.__name__ = _Backend.__qualname__ = f"AnyreduceBackend_{name}"
    _Backend.__doc__ = f"ONNX backend running the reductions on {name} arrays."
    _Backend.__module__ = __name__
    _BACKENDS[name] = _Backend
    return _Backend
