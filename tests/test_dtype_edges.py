"""Dtypes and array kinds at the edges: NumPy's bfloat16, non-native byte order, dtypes
too narrow or too wide, and arrays whose meaning a reduction would drop (issues 22, 25)."""

from __future__ import annotations

import importlib
import math
import warnings
from typing import Any

import numpy as np
import pytest

import anyreduce
import anyreduce.onnx
import anyreduce.openvino
import reference
from anyreduce._lib._libraries import installed
from backends import BFLOAT16, backend_of, make, to_numpy

OPS = reference.OP_NAMES
REFUSED = r"is not supported; {op} takes integer and real floating dtypes of 8 to 64 bits"


# --- NumPy bfloat16: the bits of PyTorch's bfloat16 ------------------------------------------


def _bits(a: Any) -> np.ndarray:
    return np.ascontiguousarray(to_numpy(a)).view(np.uint16)


def _bfloat16_sample(op: str, seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).uniform(-4, 4, (6, 37))
    if op == "reduce_log_sum":
        values = np.abs(values) + 0.5
    return values.astype(BFLOAT16)


@pytest.mark.parametrize("axes", [None, [0], [1], [-1, 0]], ids=repr)
@pytest.mark.parametrize("op", OPS)
def test_numpy_bfloat16_has_the_bits_of_torch(kernel_path: str, op: str, axes: Any) -> None:
    torch = pytest.importorskip("torch")
    da = importlib.import_module("dask.array") if installed("dask") else None

    for seed in range(3):
        host = _bfloat16_sample(op, seed)
        before = host.copy()
        tensor = torch.from_numpy(host.view(np.int16).copy()).view(torch.bfloat16)
        want = getattr(anyreduce, op)(tensor, axes)
        chunked = () if da is None else (da.from_array(host, chunks=(3, 10)),)
        for data in (host, *chunked):
            got = getattr(anyreduce, op)(data, axes)
            assert got.dtype == np.dtype(BFLOAT16)
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_array_equal(_bits(got), _bits(want))
        np.testing.assert_array_equal(host.view(np.uint16), before.view(np.uint16))


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean"])
def test_numpy_bfloat16_rounds_once_like_torch(kernel_path: str, op: str) -> None:
    torch = pytest.importorskip("torch")
    # 1 + 2**-8 + 2**-30: a tie in bfloat16 once rounded to float32 first.
    host = np.array([1.0, 2.0**-8, 2.0**-30], dtype=BFLOAT16)
    tensor = torch.from_numpy(host.view(np.int16).copy()).view(torch.bfloat16)
    got = getattr(anyreduce, op)(host)
    want = getattr(anyreduce, op)(tensor)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_numpy_bfloat16_in_the_onnx_backend() -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=1)
    graph = helper.make_graph(
        [node],
        "l2",
        [
            helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 3]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.array([[3, 4, 0], [5, 12, 0]], dtype=BFLOAT16)
    tensor = numpy_helper.from_array(x, "x")
    assert tensor.data_type == onnx.TensorProto.BFLOAT16
    (y,) = anyreduce.onnx.backend_for("numpy").run_model(model, [x, np.array([1])])
    assert y.dtype == np.dtype(BFLOAT16)
    np.testing.assert_array_equal(y.astype(np.float32), [[5.0], [13.0]])
    direct = anyreduce.onnx.reduce_l2(x, [1], opset=18)
    np.testing.assert_array_equal(_bits(direct), _bits(y))


def test_numpy_bfloat16_under_the_onnx_type_constraints() -> None:
    x = np.ones((2, 3), dtype=BFLOAT16)
    assert anyreduce.onnx.reduce_sum(x, [1], opset=13).dtype == np.dtype(BFLOAT16)
    with pytest.raises(TypeError, match=r"^ReduceSum-11: input dtype bfloat16 is not supported"):
        anyreduce.onnx.reduce_sum(x, [1], opset=11)
    assert anyreduce.openvino.reduce_l1(x, [1]).dtype == np.dtype(BFLOAT16)


# --- dtypes refused everywhere: float8, extended precision, float0, int4 ---------------------


def _unsupported(xp: Any, kind: str) -> Any:
    """An array of backend ``xp`` with a dtype anyreduce refuses, or a skip."""
    backend = backend_of(xp)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([[1.0, 2.0], [3.0, 0.5]])
    if kind == "float128":
        if backend not in {"numpy", "dask"} or np.finfo(np.longdouble).bits <= 64:
            pytest.skip(f"{backend} has no float wider than 64 bits")
        host = values.astype(np.longdouble)
        return host if backend == "numpy" else make(xp, host, "float64").astype(np.longdouble)
    if kind == "int4":
        if backend == "torch":
            pytest.skip("torch has no int4 tensor with arithmetic")
        if backend == "array_api_strict":
            pytest.skip("array_api_strict has no int4")
        host = values.astype(ml_dtypes.int4)
    else:
        if backend == "torch":
            import torch

            return torch.tensor(values).to(getattr(torch, kind))
        if backend == "array_api_strict":
            pytest.skip(f"array_api_strict has no {kind}")
        host = values.astype(getattr(ml_dtypes, kind))
    if backend == "jax":
        return xp.asarray(host)
    if backend == "dask":
        import dask.array as da

        return da.from_array(host, chunks=1)
    return host


@pytest.mark.parametrize("kind", ["float8_e4m3fn", "float8_e5m2", "float128", "int4"])
@pytest.mark.parametrize("op", OPS)
def test_narrow_and_wide_dtypes_are_refused(xp: Any, op: str, kind: str) -> None:
    data = _unsupported(xp, kind)
    with pytest.raises(TypeError, match=rf"^{op}: input dtype \S+ {REFUSED.format(op=op)}"):
        getattr(anyreduce, op)(data)


@pytest.mark.parametrize("kind", ["float8_e4m3fn", "float128"])
def test_narrow_and_wide_dtypes_in_the_profiles(xp: Any, kind: str) -> None:
    data = _unsupported(xp, kind)
    with pytest.raises(TypeError, match=r"^ReduceMax-20: input dtype \S+ is not supported"):
        anyreduce.onnx.reduce_max(data, [0])
    with pytest.raises(TypeError, match=r"^ReduceMax-1: input dtype \S+ is not supported"):
        anyreduce.openvino.reduce_max(data, [0])


@pytest.mark.parametrize("op", OPS)
def test_jax_float0_is_refused(op: str) -> None:
    jax = pytest.importorskip("jax")
    data = np.zeros((2, 3), dtype=jax.dtypes.float0)
    with pytest.raises(TypeError, match=rf"^{op}: input dtype .* is not supported; {op} takes"):
        getattr(anyreduce, op)(data)


# --- arrays whose meaning a reduction would drop ---------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_masked_arrays_are_refused(op: str) -> None:
    data = np.ma.masked_array([[1.0, 100.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]])
    message = rf"^{op}: data is a MaskedArray, whose mask .*data\.filled\(.*data\.compressed\(\)"
    for axes in (None, [1]):
        with pytest.raises(TypeError, match=message):
            getattr(anyreduce, op)(data, axes)
    with pytest.raises(TypeError, match=r"^ReduceSum-13: data is a MaskedArray"):
        anyreduce.onnx.reduce_sum(data, [1], opset=13)
    with pytest.raises(TypeError, match=r"^ReduceSum-1: data is a MaskedArray"):
        anyreduce.openvino.reduce_sum(data, [1])


def test_a_plain_array_after_a_masked_one_still_runs() -> None:
    with pytest.raises(TypeError):
        anyreduce.reduce_mean(np.ma.masked_array([1.0, 2.0], mask=[0, 1]))
    np.testing.assert_array_equal(anyreduce.reduce_mean(np.array([1.0, 2.0])), [1.5])


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_is_refused() -> None:
    data = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    message = r"^reduce_sum: data of type matrix, a NumPy array subclass, .*np\.asarray\(data\)"
    with pytest.raises(TypeError, match=message):
        anyreduce.reduce_sum(data, [1])


def test_other_subclasses_are_refused() -> None:
    class Tagged(np.ndarray):
        """A subclass with a meaning of its own (units, say)."""

    data = np.ones((2, 3)).view(Tagged)
    with pytest.raises(TypeError, match=r"^reduce_sum: data of type Tagged, .*np\.asarray\(data\)"):
        anyreduce.reduce_sum(data, [1])


def test_memmap_is_plain_data(tmp_path: Any) -> None:
    data = np.memmap(tmp_path / "x.bin", dtype=np.float32, mode="w+", shape=(2, 3))
    data[:] = np.arange(6).reshape(2, 3)
    result = anyreduce.reduce_sum(data, [1], keepdims=False)
    np.testing.assert_array_equal(np.asarray(result), [3.0, 12.0])


def test_dask_arrays_of_masked_chunks_are_refused() -> None:
    da = pytest.importorskip("dask.array")
    data = da.from_array(np.ma.masked_array(np.arange(4.0), mask=[0, 1, 0, 0]), chunks=2)
    with pytest.raises(TypeError, match=r"^reduce_sum: the chunks of a Dask array: .*filled"):
        anyreduce.reduce_sum(data)


def test_dask_arrays_of_torch_chunks_are_refused() -> None:
    da = pytest.importorskip("dask.array")
    torch = pytest.importorskip("torch")
    host = da.from_array(np.arange(12.0).reshape(3, 4), chunks=2)
    for data in (
        host.map_blocks(torch.from_numpy, meta=torch.empty((0, 0), dtype=torch.float64)),
        host.map_blocks(torch.from_numpy),
    ):
        for op in OPS:
            with pytest.raises(
                TypeError, match=rf"^{op}: data is a Dask array of torch\.Tensor chunks"
            ):
                getattr(anyreduce, op)(data, [1])


@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("op", OPS)
def test_dask_arrays_of_numpy_and_torch_chunks(op: str, dtype: str) -> None:
    da = pytest.importorskip("dask.array")
    torch = pytest.importorskip("torch")
    host = np.arange(12).reshape(3, 4).astype(dtype)

    def mixed(block: np.ndarray, block_info: Any = None) -> Any:
        # The second row of chunks as torch tensors; the meta stays NumPy.
        return torch.from_numpy(block) if block_info[0]["chunk-location"][0] == 1 else block

    data = da.from_array(host, chunks=2).map_blocks(mixed, meta=np.empty((0, 0), dtype=dtype))
    for axes in ([1], [0], None):
        result = to_numpy(getattr(anyreduce, op)(data, axes))
        want = getattr(anyreduce, op)(host, axes)
        assert result.dtype == want.dtype
        np.testing.assert_array_equal(result, want)


def test_dask_arrays_of_unknown_chunk_sizes() -> None:
    """After boolean indexing (``x[mask]``) the rows' number is unknown: a reduction over
    the other axes gives a result with as many rows, unknown too, as Dask's own ``sum``
    does (these were refused); one over the rows is refused, naming the axis."""
    da = pytest.importorskip("dask.array")
    host = da.from_array(np.arange(24.0).reshape(6, 4), chunks=(2, 3))
    mask = da.from_array(np.array([True, False, False, True, True, True]), chunks=2)
    data, known = host[mask], host[mask].compute_chunk_sizes()
    assert math.isnan(data.shape[0])
    for op in OPS:
        for keepdims in (True, False):
            result = getattr(anyreduce, op)(data, [1], keepdims=keepdims)
            assert math.isnan(result.shape[0])
            want = getattr(anyreduce, op)(known, [1], keepdims=keepdims).compute()
            np.testing.assert_array_equal(result.compute(), want)
        for axes in ([0], None):
            message = (
                rf"^{op}: axis 0 of data has unknown length and is reduced \(shape \(nan, 4\)\)"
            )
            with pytest.raises(ValueError, match=message):
                getattr(anyreduce, op)(data, axes)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")
@pytest.mark.parametrize("op", OPS)
def test_sparse_and_nested_tensors_are_refused(op: str) -> None:
    torch = pytest.importorskip("torch")
    dense = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    with pytest.raises(TypeError, match=rf"^{op}: data is a tensor of layout .*to_dense\(\)"):
        getattr(anyreduce, op)(dense.to_sparse(), [1])
    with pytest.raises(TypeError, match=rf"^{op}: data is a tensor of layout .*to_dense\(\)"):
        getattr(anyreduce, op)(dense.to_sparse_csr(), [1])
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    with pytest.raises(TypeError, match=rf"^{op}: data is a nested tensor"):
        getattr(anyreduce, op)(nested, [1])
    # The dense tensor still runs after its sparse and nested kin.
    assert getattr(anyreduce, op)(dense, [1]).layout == torch.strided


@pytest.mark.filterwarnings("ignore:The PyTorch API of MaskedTensors:UserWarning")
@pytest.mark.parametrize("op", OPS)
def test_masked_tensors_are_refused(op: str) -> None:
    # Its mask would be ignored, or half kept by torch's masked reductions: refused as
    # NumPy's masked arrays are, before any of torch's errors or warnings.
    torch = pytest.importorskip("torch")
    data = torch.tensor([[1.0, 5.0], [3.0, 2.0]])
    masked = torch.masked.masked_tensor(data, torch.tensor([[True, False], [True, True]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=rf"^{op}: data is a MaskedTensor, whose mask .*"):
            getattr(anyreduce, op)(masked, [1])


# --- non-native byte order -------------------------------------------------------------------

SWAPPED = ("float16", "float32", "float64", "int16", "uint16", "int32", "uint64")


def _swapped(name: str, shape: tuple[int, ...] = (4, 6)) -> np.ndarray:
    rng = np.random.default_rng(len(name))
    values = rng.uniform(1, 4, shape) if name.startswith("float") else rng.integers(1, 9, shape)
    native = np.asarray(values).astype(name)
    data = native.astype(native.dtype.newbyteorder("S"))
    assert not data.dtype.isnative
    return data


def _check_swapped(result: Any, data: np.ndarray, want: np.ndarray) -> None:
    assert type(result) is np.ndarray
    assert result.dtype == data.dtype, (result.dtype, data.dtype)
    assert result.shape == want.shape
    np.testing.assert_array_equal(result, want)


@pytest.mark.parametrize("name", SWAPPED)
@pytest.mark.parametrize("op", OPS)
def test_non_native_byte_order(kernel_path: str, op: str, name: str) -> None:
    data = _swapped(name)
    before = data.copy()
    native = data.astype(data.dtype.newbyteorder("="))
    function = getattr(anyreduce, op)
    for axes, keepdims in (([1], True), (None, False), ([], True), ([0, 1], True)):
        want = function(native, axes, keepdims=keepdims)
        _check_swapped(function(data, axes, keepdims=keepdims), data, want)
    want = function(native, [], noop_with_empty_axes=True)
    _check_swapped(function(data, [], noop_with_empty_axes=True), data, want)
    empty = data[:0]
    want = function(empty.astype(native.dtype), [0])
    _check_swapped(function(empty, [0]), empty, want)
    np.testing.assert_array_equal(data, before)
    assert data.dtype == before.dtype


@pytest.mark.parametrize("name", ["float32", "float64", "int32", "int64", "uint16"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
def test_non_native_byte_order_of_large_data(axes: int | None, name: str) -> None:
    """Data large enough for the threads (2**21 elements), in the other byte order: every
    operator gives the dtype of the data (the threads' slabs were joined in native order
    once) and, bit for bit, the values of the same data in native order. Float
    SumSquare, L2 and LogSumExp over every axis are merged from slabs, each brought into
    native order alone (native data take them in one pass): held to the bound."""
    data = _swapped(name, (2048, 1024))
    native = data.astype(data.dtype.newbyteorder("="))
    merged = {"reduce_sum_square", "reduce_l2", "reduce_log_sum_exp"}
    for op in OPS:
        function = getattr(anyreduce, op)
        result, want = function(data, axes), function(native, axes)
        if axes is None and name.startswith("float") and op in merged:
            assert result.dtype == data.dtype
            eps = float(np.finfo(native.dtype).eps)
            np.testing.assert_allclose(result.astype(native.dtype), want, rtol=8 * eps)
            continue
        _check_swapped(result, data, want)


@pytest.mark.parametrize("op", OPS)
def test_non_native_byte_order_in_the_profiles(op: str) -> None:
    data = _swapped("float32")
    native = data.astype(data.dtype.newbyteorder("="))
    via_onnx = getattr(anyreduce.onnx, op)(data, [1], opset=18)
    _check_swapped(via_onnx, data, getattr(anyreduce.onnx, op)(native, [1], opset=18))
    if op in anyreduce.openvino.__all__:
        via_openvino = getattr(anyreduce.openvino, op)(data, [1])
        _check_swapped(via_openvino, data, getattr(anyreduce.openvino, op)(native, [1]))


@pytest.mark.parametrize("name", ["float32", "float16", "int32"])
@pytest.mark.parametrize("op", OPS)
def test_non_native_byte_order_in_dask(op: str, name: str) -> None:
    da = pytest.importorskip("dask.array")
    host = _swapped(name)
    data = da.from_array(host, chunks=(2, 4))
    native = da.from_array(host.astype(host.dtype.newbyteorder("=")), chunks=(2, 4))
    for axes in ([1], None):
        result = getattr(anyreduce, op)(data, axes)
        assert result.dtype == host.dtype
        computed = to_numpy(result)
        want = to_numpy(getattr(anyreduce, op)(native, axes))
        assert computed.dtype == host.dtype
        assert computed.shape == want.shape
        np.testing.assert_array_equal(computed, want)
