"""Every operator on every dtype the contract allows, on every backend that has the dtype."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import ALL_DTYPES, BOTH_PATHS, FLOAT_DTYPES, TOLERANCE, assert_result, make, np_dtype

OPS = reference.OP_NAMES
# Every test on both paths where a backend has two: small inputs' own and the general one.
pytestmark = pytest.mark.parametrize("backend", BOTH_PATHS, ids=str, indirect=True)
# Ops whose integer results go through a float step: keep their data where float64 is exact.
FLOAT_STEP_OPS = {"reduce_l2", "reduce_log_sum", "reduce_log_sum_exp"}


def sample(op: str, dtype: str, shape: tuple[int, ...] = (3, 5)) -> np.ndarray:
    """Data that exercises ``op`` on ``dtype``: the full integer range, wrap included."""
    rng = np.random.default_rng(zlib.crc32(f"{op}:{dtype}".encode()))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in FLOAT_DTYPES:
        values = rng.uniform(-4, 4, shape)
        if op == "reduce_log_sum":
            values = np.abs(values) + 0.5
        return values.astype(np_dtype(dtype))
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if op in FLOAT_STEP_OPS:
        low, high = max(low, -1000), min(high, 1000)
    values = rng.integers(low, high, shape, endpoint=True, dtype=dtype)
    values.flat[0] = info.max  # extremes: wrap and |min| corner cases
    values.flat[-1] = info.min if op not in FLOAT_STEP_OPS else values.flat[-1]
    return values


def _atol(op: str, dtype: str, values: np.ndarray, axes: list[int] | None) -> float:
    """Sums of mixed signs cancel: their error is bounded relative to sum |x|, not to the sum.

    LogSumExp is max + log(sum(exp(x - max))): near zero the two terms cancel, so its error
    is bounded relative to the largest magnitude in the slice.
    """
    if dtype not in FLOAT_DTYPES:
        return 0.0
    if op == "reduce_log_sum_exp":
        return float(TOLERANCE[dtype] * np.abs(values.astype(np.float64)).max())
    if op not in {"reduce_sum", "reduce_mean"}:
        return 0.0
    magnitude = reference.reduce("reduce_l1", values, axes, keepdims=False).max()
    count = values.size if axes is None else values.shape[axes[0]]
    return float(TOLERANCE[dtype] * magnitude / (count if op == "reduce_mean" else 1))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_every_op_on_every_dtype(xp: Any, dtype_available: Any, op: str, dtype: str) -> None:
    dtype_available(dtype)
    values = sample(op, dtype)
    data = make(xp, values, dtype)
    if dtype == "bool" and op not in {"reduce_max", "reduce_min"}:
        with pytest.raises(TypeError, match=rf"{op}: input dtype .*bool"):
            getattr(anyreduce, op)(data)
        return
    for axes, keepdims, shape in (([1], False, (3,)), (None, True, (1, 1)), ([0], True, (1, 5))):
        result = getattr(anyreduce, op)(data, axes, keepdims=keepdims)
        expected = reference.reduce(op, values, axes, keepdims=keepdims)
        assert_result(
            result, xp, dtype, shape, expected, like=data, atol=_atol(op, dtype, values, axes)
        )
    noop = getattr(anyreduce, op)(data, [], noop_with_empty_axes=True)
    expected = reference.reduce(op, values, [], noop_with_empty_axes=True)
    assert_result(noop, xp, dtype, (3, 5), expected, like=data)
