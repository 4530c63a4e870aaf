"""The backend workarounds in ``anyreduce._backends``: each gap they cover, on its backend."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import anyreduce
import reference
from backends import assert_result, make

OPS = reference.OP_NAMES


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("op", OPS)
def test_torch_unsigned_types_without_kernels(op: str, dtype: str) -> None:
    # torch 2.13 has no sum/prod/abs/max/min kernels for these: anyreduce computes in a
    # signed carrier type and hands back the caller's dtype.
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as xp

    high = np.iinfo(dtype).max
    values = np.array([[high, 3, 0], [high - 5, 1, 2]], dtype=dtype)
    if op in {"reduce_l2", "reduce_log_sum", "reduce_log_sum_exp"}:
        values = np.array([[7, 3, 0], [1000, 1, 2]], dtype=dtype)
    with pytest.raises(RuntimeError, match="not implemented"):
        torch.amax(torch.from_numpy(values), dim=1)
    data = make(xp, values, dtype)
    result = getattr(anyreduce, op)(data, [1], keepdims=False)
    assert_result(result, xp, dtype, (2,), reference.reduce(op, values, [1], keepdims=False))


@pytest.mark.parametrize("op", OPS)
def test_torch_empty_dim_tuple_reduces_nothing(op: str) -> None:
    # Raw torch.sum(x, dim=()) reduces every axis; the no-op form must reduce none.
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as xp

    assert torch.sum(torch.ones(2, 3), dim=()).shape == ()
    values = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], dtype=np.float32)
    result = getattr(anyreduce, op)(make(xp, values, "float32"), [], noop_with_empty_axes=True)
    expected = reference.reduce(op, values, [], noop_with_empty_axes=True)
    assert_result(result, xp, "float32", (2, 3), expected)


@pytest.mark.parametrize("op", OPS)
def test_numpy_rank0_results_are_arrays_not_scalars(op: str) -> None:
    # NumPy reductions to rank 0 return NumPy scalars; anyreduce returns 0-D arrays.
    assert isinstance(np.sum(np.ones(3)), np.generic)
    result = getattr(anyreduce, op)(np.arange(1.0, 4.0), keepdims=False)
    assert type(result) is np.ndarray
    assert result.shape == ()


@pytest.mark.parametrize("module", ["numpy", "array_api_strict"])
def test_numpy_ieee_warnings_are_silenced(module: str) -> None:
    # log(0) = -inf and inf - inf = nan are the contract's answers, not warnings.
    xp = pytest.importorskip(module)
    data = xp.asarray([[0.0, 0.0], [-np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anyreduce.reduce_log_sum(data, [1])
        anyreduce.reduce_log_sum_exp(data, [1])
        anyreduce.reduce_mean(xp.asarray([np.inf, -np.inf]))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_large_data_with_special_values_raise_no_warnings(module: str, dtype: str) -> None:
    # Large enough for the accelerators, whose pool threads start with NumPy's default
    # error state: overflowing exponentials and squares stay silent there too.
    pytest.importorskip(module)
    xp = importlib.import_module(f"array_api_compat.{module}")
    values = np.random.default_rng(5).standard_normal((2048, 1024))
    values[::7] *= float(np.finfo(dtype).max)
    values[3, :5], values[4, :3], values[5] = np.inf, np.nan, 0.0
    with np.errstate(over="ignore"):
        data = make(xp, values.astype(dtype), dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for op in OPS:
            for axes in ([1], [0], None):
                getattr(anyreduce, op)(data, axes)


@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("dtype", ["int16", "float32", "float64"])
def test_torch_product_over_every_axis(keepdims: bool, dtype: str) -> None:
    # torch.prod over a tuple of all dims copies its input; anyreduce takes the product of
    # the flattened array instead, with the same result and shape.
    pytest.importorskip("torch")
    import array_api_compat.torch as xp

    values = np.random.default_rng(3).uniform(0.5, 1.5, (3, 4, 5)).astype(dtype)
    if dtype == "int16":
        values = np.arange(-30, 30, dtype=dtype).reshape(3, 4, 5)
    result = anyreduce.reduce_prod(make(xp, values, dtype), keepdims=keepdims)
    expected = reference.reduce("reduce_prod", values, None, keepdims=keepdims)
    assert_result(result, xp, dtype, (1, 1, 1) if keepdims else (), expected)
