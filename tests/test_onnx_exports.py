"""Graphs PyTorch exports around reductions run on every library, as onnxruntime and the
ONNX reference run them.

``torch.onnx.export(..., dynamo=False)`` (the TorchScript exporter) puts the axes of a
reduction at opset 18 in a Constant node, and writes norms, means and variances as chains
of Sub, Pow, Div, Sqrt, ... around the reductions. Each small module below is exported at
opsets 13 and 18 and run through ``anyreduce.onnx.backend_for`` on every library; the
ONNX reference evaluator (and onnxruntime, where installed) give the expected outputs.
The element-wise operators' own rules (integer Div truncating, Pow with integer and float
exponents, Cast by TensorProto code) are checked on graphs built with ``onnx.helper``.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import anyreduce.onnx
from backends import Backend

onnx = pytest.importorskip("onnx")
helper = onnx.helper
TensorProto = onnx.TensorProto

OPSETS = (13, 18)


def _modules() -> dict[str, Callable[[Any], Any]]:
    import torch

    return {
        "sum-keepdim": lambda x: x.sum(dim=1, keepdim=True),
        "vector-norm": lambda x: torch.linalg.vector_norm(x, dim=1),
        "vector-norm-1": lambda x: torch.linalg.vector_norm(x, ord=1, dim=-1),
        "logsumexp": lambda x: torch.logsumexp(x, dim=1),
        "mean-last": lambda x: x.mean(-1),
        "variance": lambda x: (x - x.mean()).pow(2).mean(),
        "amax": lambda x: x.amax(1),
        "amin": lambda x: x.amin(0),
        "prod": lambda x: x.prod(1),
        "normalize": lambda x: x / x.sum(1, keepdim=True),
        "root-sum-square": lambda x: (x * x).sum(0).sqrt(),
        "chain": lambda x: (-x).exp().abs().log().reciprocal().sum() + 1,
        "integer-halves": lambda x: (x.to(torch.int32) // 2).sum(1),
    }


MODULES = (
    "sum-keepdim",
    "vector-norm",
    "vector-norm-1",
    "logsumexp",
    "mean-last",
    "variance",
    "amax",
    "amin",
    "prod",
    "normalize",
    "root-sum-square",
    "chain",
    "integer-halves",
)

DATA = np.array(
    [[1.5, -2.25, 3.0, 0.5], [-4.0, 2.5, -0.75, 6.0], [7.25, -1.0, 2.0, -3.5]], dtype=np.float32
)


@functools.cache
def exported(name: str, opset: int) -> bytes:
    """The module's TorchScript export at ``opset``, serialized."""
    torch = pytest.importorskip("torch")
    import io

    function = _modules()[name]

    class Module(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return function(x)

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated in favour of the dynamo one; the
        # graphs it writes are the ones in use.
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                Module(), (torch.from_numpy(DATA),), buffer, dynamo=False, opset_version=opset
            )
        except Exception as e:  # noqa: BLE001 - an exporter missing from this torch build
            pytest.skip(f"torch.onnx.export(dynamo=False) is unavailable: {e}")
    return buffer.getvalue()


def _expected(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ONNX reference evaluator's outputs (checked against onnxruntime's, if present)."""
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        reference = [np.asarray(y) for y in ReferenceEvaluator(model).run(None, feeds)]
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime

        session = onnxruntime.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        for ours, theirs in zip(reference, session.run(None, feeds), strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    return reference


def _library(backend: Backend) -> str:
    if backend.name == "jax32":
        pytest.skip("backend_for('jax') always enables 64-bit types: the jax row covers it")
    return backend.name


def _check(got: tuple[Any, ...], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for y, w in zip(got, want, strict=True):
        assert isinstance(y, np.ndarray)
        assert y.dtype == w.dtype, (y.dtype, w.dtype)
        assert y.shape == w.shape, (y.shape, w.shape)
        if w.dtype.kind in "biu":
            assert y.tolist() == w.tolist()
        else:
            np.testing.assert_allclose(y, w, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", MODULES)
def test_torch_export_runs(xp: Any, backend: Backend, name: str, opset: int) -> None:
    model = onnx.load_from_string(exported(name, opset))
    ops = {node.op_type for node in model.graph.node}
    assert ops <= anyreduce.onnx.SUPPORTED_OPS, ops
    if opset == 18 and name in ("sum-keepdim", "vector-norm", "amax"):
        assert "Constant" in ops  # the axes, as the issue describes
    (input_name,) = [i.name for i in model.graph.input]
    data = DATA.copy()
    want = _expected(model, {input_name: data})
    got = anyreduce.onnx.backend_for(_library(backend)).run_model(model, [data])
    _check(got, want)
    assert np.array_equal(data, DATA)


def test_torch_export_with_an_op_outside_the_list_is_refused_by_name() -> None:
    torch = pytest.importorskip("torch")

    class Std(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x.std(1)

    import io

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Std(), (torch.from_numpy(DATA),), buffer, dynamo=False, opset_version=18)
    model = onnx.load_from_string(buffer.getvalue())
    backend = anyreduce.onnx.backend_for("numpy")
    with pytest.raises(ValueError, match=r"^prepare: operator ai.onnx::Shape .*is not supported"):
        backend.run_model(model, [DATA])
    assert not backend.is_compatible(model)


# --- the element-wise operators' rules, on graphs built by hand


def _graph_model(
    nodes: list[Any], inputs: dict[str, np.ndarray], output: str, opset: int, dtype: Any
) -> Any:
    infos = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for name, a in inputs.items()
    ]
    # Every graph here gives a rank-2 result of the first input's type or of ``dtype``.
    out = helper.make_tensor_value_info(
        output, helper.np_dtype_to_tensor_dtype(dtype), [None, None]
    )
    graph = helper.make_graph(nodes, "elementwise", infos, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _constant(name: str, values: Any, dtype: Any) -> Any:
    tensor = onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), name)
    return helper.make_node("Constant", [], [name], value=tensor)


INTS = np.array([[7, -7, 9], [-9, 0, 5]], dtype=np.int32)
FLOATS = np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 4.0]], dtype=np.float32)

GRAPHS: dict[str, tuple[list[Any], dict[str, np.ndarray]]] = {
    # ONNX integer Div truncates toward zero: -7 / 2 is -3 (floor division gives -4).
    "div-int-truncates": (
        [_constant("two", [2, -2, 4], np.int32), helper.make_node("Div", ["x", "two"], ["y"])],
        {"x": INTS},
    ),
    "div-float": (
        [_constant("c", 4.0, np.float32), helper.make_node("Div", ["x", "c"], ["y"])],
        {"x": FLOATS},
    ),
    "pow-float-int-exponent": (
        [_constant("e", [2, 3, -1], np.int64), helper.make_node("Pow", ["x", "e"], ["y"])],
        {"x": FLOATS},
    ),
    "pow-float-float-exponent": (
        [_constant("e", 2.0, np.float64), helper.make_node("Pow", ["x", "e"], ["y"])],
        {"x": FLOATS},
    ),
    "pow-int-int-exponent": (
        [_constant("e", 3, np.int64), helper.make_node("Pow", ["x", "e"], ["y"])],
        {"x": INTS},
    ),
    "pow-int-float-exponent": (
        [_constant("e", 0.5, np.float32), helper.make_node("Pow", ["x", "e"], ["y"])],
        {"x": np.abs(INTS)},
    ),
    "cast-codes": (
        [
            helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
            helper.make_node("Cast", ["i"], ["d"], to=TensorProto.DOUBLE),
            helper.make_node("Cast", ["d"], ["y"], to=TensorProto.INT16),
        ],
        {"x": FLOATS},
    ),
    "castlike-identity-neg-sub-add": (
        [
            helper.make_node("Identity", ["x"], ["same"]),
            helper.make_node("Neg", ["same"], ["negative"]),
            helper.make_node("CastLike", ["i", "x"], ["as_float"]),
            helper.make_node("Sub", ["negative", "as_float"], ["difference"]),
            helper.make_node("Add", ["difference", "x"], ["y"]),
        ],
        {"x": FLOATS, "i": INTS},
    ),
    "reductions-around-elementwise": (
        [
            _constant("axes", [1], np.int64),
            helper.make_node("Reciprocal", ["x"], ["r"]),
            helper.make_node("ReduceSumSquare", ["r", "axes"], ["s"], keepdims=1),
            helper.make_node("ReduceLogSumExp", ["x", "axes"], ["l"], keepdims=1),
            helper.make_node("Mul", ["s", "l"], ["y"]),
        ],
        {"x": FLOATS},
    ),
}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", list(GRAPHS))
def test_elementwise_graph(xp: Any, backend: Backend, name: str, opset: int) -> None:
    nodes, inputs = GRAPHS[name]
    if opset < 18 and any(n.op_type.startswith("Reduce") and len(n.input) > 1 for n in nodes):
        pytest.skip("axes is an input of these reductions from opset 18")
    if opset < 15 and any(n.op_type == "CastLike" for n in nodes):
        pytest.skip("CastLike exists from opset 15")
    out = np.dtype(np.int16) if name == "cast-codes" else next(iter(inputs.values())).dtype
    model = _graph_model(nodes, inputs, "y", opset, out)
    onnx.checker.check_model(model)
    before = {k: v.copy() for k, v in inputs.items()}
    want = _expected(model, dict(inputs))
    got = anyreduce.onnx.backend_for(_library(backend)).run_model(model, dict(inputs))
    _check(got, want)
    assert all(np.array_equal(inputs[k], before[k]) for k in inputs)


def test_integer_div_truncates_toward_zero() -> None:
    node = helper.make_node("Div", ["a", "b"], ["y"])
    a = np.array([7, -7, 7, -7, 0], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3], dtype=np.int64)
    (y,) = anyreduce.onnx.run_node(node, [a, b])
    assert y.tolist() == [3, -3, -3, 3, 0]


_SPECIALS = [0.0, -1.0, 1e30, float("nan")]
DASK_SPECIAL_CASES = [
    ("Log", [(_SPECIALS, "float32")], {}),
    ("Sqrt", [(_SPECIALS, "float32")], {}),
    ("Exp", [([1000.0, -1000.0], "float32")], {}),
    ("Reciprocal", [(_SPECIALS, "float32")], {}),
    ("Div", [(_SPECIALS, "float32"), ([0.0] * 4, "float32")], {}),
    ("Mul", [(_SPECIALS, "float32"), (_SPECIALS, "float32")], {}),
    ("Pow", [(_SPECIALS, "float32"), ([-1.0, 0.5, 2.0, 1.0], "float32")], {}),
    ("Add", [([3e38, 1.0], "float32"), ([3e38, 1.0], "float32")], {}),
    ("Sub", [([3e38, 1.0], "float32"), ([-3e38, 1.0], "float32")], {}),
    ("Cast", [([1e300, 1.0], "float64")], {"to": TensorProto.FLOAT}),
]


@pytest.mark.parametrize(
    ("op", "inputs", "attributes"), DASK_SPECIAL_CASES, ids=[c[0] for c in DASK_SPECIAL_CASES]
)
def test_dask_elementwise_graphs_compute_without_warnings(
    op: str, inputs: list[tuple[Any, str]], attributes: dict[str, Any]
) -> None:
    """Dask computes a graph later, outside anyreduce: NumPy's warnings about IEEE special
    values (log(0), an overflow) reached the caller then (warnings are errors here)."""
    da = pytest.importorskip("dask.array")
    arrays = [np.asarray(values, dtype=kind) for values, kind in inputs]
    names = [f"in{i}" for i in range(len(arrays))]
    node = helper.make_node(op, names, ["y"], **attributes)
    (lazy,) = anyreduce.onnx.run_node(node, [da.from_array(a, chunks=2) for a in arrays])
    got = lazy.compute(scheduler="threads")
    (want,) = anyreduce.onnx.run_node(node, arrays)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["int64", "float64", "uint64"])
def test_cast_to_a_type_the_library_lacks_is_refused(xp: Any, backend: Any, target: str) -> None:
    """JAX without x64 names int64 and float64 but makes int32 and float32 of them, with
    a warning: a Cast to them changed the values' type silently. It is refused there."""
    from backends import make

    code = {"int64": TensorProto.INT64, "float64": TensorProto.DOUBLE}.get(target)
    code = TensorProto.UINT64 if code is None else code
    node = helper.make_node("Cast", ["x"], ["y"], to=code)
    data = make(xp, [1.0, 2.0], "float32")
    if backend.has(target):
        (y,) = anyreduce.onnx.run_node(node, [data])
        assert str(y.dtype).endswith(target)
        return
    with pytest.raises(TypeError, match=rf"cannot cast to ONNX type {code} \({target}\) here: "):
        anyreduce.onnx.run_node(node, [data])


def test_constant_run_alone_is_a_numpy_array() -> None:
    (y,) = anyreduce.onnx.run_node(helper.make_node("Constant", [], ["c"], value_ints=[1, 2]), [])
    assert isinstance(y, np.ndarray)
    assert y.dtype == np.int64
    assert y.tolist() == [1, 2]


# --- the element-wise operators on each library's own arrays (run_node, no conversion)

ELEMENTWISE_CASES = [
    # (op, inputs as (values, dtype), attributes, expected values, expected dtype)
    ("Div", [([7, -7, 9], "int32"), ([2, 2, -4], "int32")], {}, [3, -3, -2], "int32"),
    ("Div", [([1.0, -3.0], "float32"), ([4.0, 2.0], "float32")], {}, [0.25, -1.5], "float32"),
    ("Pow", [([1.5, -2.0], "float32"), ([2, 3], "int32")], {}, [2.25, -8.0], "float32"),
    ("Pow", [([4, 9], "int32"), ([0.5, 0.5], "float32")], {}, [2, 3], "int32"),
    ("Pow", [([2, -3], "int32"), ([3, 2], "int32")], {}, [8, 9], "int32"),
    # ONNX leaves these undefined and the libraries disagree (NumPy 0 or an error, PyTorch
    # an error, JAX -1, -2 or 0): an integer divided by zero is 0; the minimum divided by
    # -1 wraps to the minimum; an integer to a negative power is its real value truncated
    # toward zero (1 for 1, -1 or 1 for -1, 0 for any other base, 0 included).
    (
        "Div",
        [([7, -7, 0, 5, -(2**31), 6], "int32"), ([0, 0, 0, -1, -1, -4], "int32")],
        {},
        [0, 0, 0, -5, -(2**31), -1],
        "int32",
    ),
    ("Div", [([7, 0, 9], "uint8"), ([0, 0, 2], "uint8")], {}, [0, 0, 4], "uint8"),
    ("Div", [([-(2**63), 9], "int64"), ([-1, 0], "int64")], {}, [-(2**63), 0], "int64"),
    (
        "Pow",
        [([2, 1, -1, -1, 0, 3, -2], "int32"), ([-1, -3, -3, -2, -1, 0, -1], "int32")],
        {},
        [0, 1, -1, 1, 0, 1, 0],
        "int32",
    ),
    ("Pow", [([1, -1, 5], "int64"), ([-7, -7, -2], "int32")], {}, [1, -1, 0], "int64"),
    # Floats into integers beyond their range, and NaN: ONNX leaves them undefined and the
    # libraries disagreed (JAX saturates; NumPy and PyTorch on x86 give the minimum or
    # wrap): saturated at the type's limits, NaN the minimum, as the kernels' integer results.
    (
        "Cast",
        [([math.nan, math.inf, -math.inf, 1e20, -1e20, 300.0, -1.5, 2.7], "float32")],
        {"to": TensorProto.INT32},
        [-(2**31), 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 300, -1, 2],
        "int32",
    ),
    (
        "Cast",
        [([math.nan, math.inf, -math.inf, 1e20, -1e20, 300.0, -1.5, 2.7], "float32")],
        {"to": TensorProto.UINT8},
        [0, 255, 0, 255, 0, 255, 0, 2],
        "uint8",
    ),
    (
        "Cast",
        [([math.nan, math.inf, 300.0, -300.0, -1.5], "float16")],
        {"to": TensorProto.INT8},
        [-128, 127, 127, -128, -1],
        "int8",
    ),
    (
        "CastLike",
        [([math.nan, 1e10, -7.9], "float64"), ([0], "int32")],
        {},
        [-(2**31), 2**31 - 1, -7],
        "int32",
    ),
    (
        "Pow",
        [([0, 2, 3], "int32"), ([-1.0, 40.0, 2.0], "float32")],
        {},
        [2**31 - 1, 2**31 - 1, 9],
        "int32",
    ),
    ("Neg", [([1, -2, 0], "int32")], {}, [-1, 2, 0], "int32"),
    ("Reciprocal", [([4.0, -0.5], "float32")], {}, [0.25, -2.0], "float32"),
    (
        "Sub",
        [([[1.0], [2.0]], "float32"), ([1.0, 3.0], "float32")],
        {},
        [[0.0, -2.0], [1.0, -1.0]],
        "float32",
    ),
    ("Add", [([1, 2], "uint8"), ([255, 1], "uint8")], {}, [0, 3], "uint8"),
    ("Identity", [([True, False], "bool")], {}, [True, False], "bool"),
    ("Cast", [([1.7, -1.7], "float32")], {"to": TensorProto.INT32}, [1, -1], "int32"),
    ("CastLike", [([3, -2], "int32"), ([0.0], "float32")], {}, [3.0, -2.0], "float32"),
]


@pytest.mark.parametrize(
    ("op", "inputs", "attributes", "expected", "dtype"),
    ELEMENTWISE_CASES,
    ids=[f"{case[0]}-{case[1][0][1]}" for case in ELEMENTWISE_CASES],
)
def test_elementwise_on_each_library(
    xp: Any,
    backend: Any,
    op: str,
    inputs: list[tuple[Any, str]],
    attributes: dict[str, Any],
    expected: Any,
    dtype: str,
) -> None:
    from backends import assert_result, make

    for _, kind in inputs:
        if not backend.has(kind):
            pytest.skip(f"{backend} has no {kind}")
    arrays = [make(xp, values, kind) for values, kind in inputs]
    names = [f"in{i}" for i in range(len(arrays))]
    node = helper.make_node(op, names, ["y"], **attributes)
    (result,) = anyreduce.onnx.run_node(node, arrays)
    shape = np.broadcast_shapes(*(np.shape(values) for values, _ in inputs[:2]))
    if op == "CastLike":
        shape = np.shape(inputs[0][0])
    assert_result(result, xp, dtype, shape, expected, like=arrays[0])
