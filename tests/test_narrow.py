"""Reductions over short trailing axes, over leading axes of narrow rows, and over
leading axes of rows too wide to block by rows.

NumPy runs a reduction's inner loop once per row, so the first two are where its own
kernels are slowest and where faster forms of them are most tempting. The results must
hold the contract whatever computes them.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import assert_result, make

# (shape, axes): leading runs of rows 1 to 256 wide, whose counts leave a remainder after
# regrouping, and short trailing runs from 2 to 16 elements over more than one block.
_NARROW = [
    ((20011, 3), [0]),
    ((9001, 2, 2), [0, 1]),
    ((4099, 256), [0]),
    ((30000, 1), [0]),
    ((20011, 3), [1]),
    ((8200, 2, 8), [1, 2]),
    ((10000, 5), [1]),
]


#: The operators that sum something of the data.
_SUM_OPS = [
    "reduce_sum",
    "reduce_mean",
    "reduce_log_sum",
    "reduce_l1",
    "reduce_sum_square",
    "reduce_l2",
    "reduce_log_sum_exp",
]


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize(("shape", "axes"), _NARROW, ids=str)
def test_max_and_min_over_narrow_and_short_axes(
    xp: Any,
    dtype_available: Any,
    op: str,
    dtype: str,
    shape: tuple[int, ...],
    axes: list[int],
) -> None:
    dtype_available(dtype)
    rng = np.random.default_rng(53)
    values = rng.integers(-1000, 1000, shape).astype(np.float64)
    flat = values.reshape(-1)
    if dtype.startswith("float"):
        # Specials in the regrouped head, in the remainder and in the last block.
        flat[[7, -2]] = np.nan
        flat[[100, -50]] = np.inf
        flat[[1000, -900]] = -np.inf
    expected = reference.reduce(op, values, axes, keepdims=True)
    result = getattr(anyreduce, op)(make(xp, values, dtype), axes, keepdims=True)
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    assert_result(result, xp, dtype, kept, expected, rtol=0)


@pytest.mark.parametrize("op", _SUM_OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [((70001, 2), [1]), ((20011, 3), [1]), ((3000, 4, 4), [1, 2]), ((2000, 128), [1])],
    ids=str,
)
def test_sums_over_short_rows_hold_the_bound(
    xp: Any, dtype_available: Any, op: str, dtype: str, shape: tuple[int, ...], axes: list[int]
) -> None:
    # Constant data, the worst case for a dot's running sum; rows of up to 128 terms are
    # one dot each on NumPy.
    dtype_available(dtype)
    values = np.full(shape, -0.1, dtype=dtype)
    expected = reference.reduce(op, values.astype(np.float64), axes, keepdims=False)
    result = getattr(anyreduce, op)(make(xp, values, dtype), axes, keepdims=False)
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    eps = float(np.finfo(dtype).eps)
    # 8 * eps * M (the contract; M is the sum of magnitudes), plus the final step.
    assert_result(result, xp, dtype, kept, expected, rtol=10 * eps)


def test_short_row_sums_keep_special_values(xp: Any) -> None:
    values = np.full((20000, 3), 0.5, dtype=np.float32)
    values[5, 1] = np.inf
    values[6, :2] = [np.inf, -np.inf]
    values[7, 2] = np.nan
    expected = reference.reduce("reduce_sum", values.astype(np.float64), [1], keepdims=False)
    result = anyreduce.reduce_sum(make(xp, values, "float32"), [1], keepdims=False)
    assert_result(result, xp, "float32", (20000,), expected)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((20011, 3), [0]),
        ((20011, 3), [1]),
        ((3000, 5, 4), [2]),
        ((3000, 5, 4), [1, 2]),
        ((3000, 5, 4), [0, 2]),
        ((3000, 5, 4), [0]),
        ((40, 3000, 3), [1]),
    ],
    ids=str,
)
def test_log_sum_exp_of_narrow_and_short_rows(
    xp: Any, dtype_available: Any, shape: tuple[int, ...], axes: list[int]
) -> None:
    dtype_available("float64")
    # The shift is subtracted per short row column by column, or per narrow row over
    # regrouped rows, on NumPy (_backends._numpy_subtract_rows); values far apart and
    # masked entries check that each row gets its own shift.
    rng = np.random.default_rng(59)
    # Logits from 1 up: each result is at least 1, so its ulp bounds the shift's rounding.
    values = rng.uniform(1.0, 30.0, shape)
    values.reshape(-1)[::7] = -1e9
    values.reshape(-1)[5::11] += 500.0
    expected = reference.reduce("reduce_log_sum_exp", values, axes, keepdims=True)
    result = anyreduce.reduce_log_sum_exp(make(xp, values, "float64"), axes, keepdims=True)
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    assert_result(result, xp, "float64", kept, expected)


# Leading reduced axes of rows too wide for 16 to fit in a block (2**18 elements on NumPy,
# up to 2**20 on PyTorch): blocks are taken along the first kept axis instead
# (``_blocks._Panels``), with a remainder.
_WIDE = [
    ((20, 3, 8192), [0]),
    ((40, 2, 3, 4096), [0, 1]),
    ((30, 3, 2, 4096), [0, 2]),
    ((17, 20000), [0]),
]


@functools.cache
def _wide_case(op: str, shape: tuple[int, ...], dtype: str, axes: tuple[int, ...]) -> Any:
    """Constant data (a dot's worst case) and the exact result, once for every backend."""
    values = np.full(shape, -0.1, dtype=dtype)
    if op in ("reduce_log_sum", "reduce_l1", "reduce_l2"):
        values.reshape(-1)[::3] = 0.1
    return values, reference.reduce(op, values.astype(np.float64), list(axes), keepdims=True)


@pytest.mark.parametrize("op", _SUM_OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "axes"), _WIDE, ids=str)
def test_sums_over_wide_rows_hold_the_bound(
    xp: Any, dtype_available: Any, op: str, dtype: str, shape: tuple[int, ...], axes: list[int]
) -> None:
    dtype_available(dtype)
    values, expected = _wide_case(op, shape, dtype, tuple(axes))
    result = getattr(anyreduce, op)(make(xp, values, dtype), axes, keepdims=True)
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    eps = float(np.finfo(dtype).eps)
    assert_result(result, xp, dtype, kept, expected, rtol=10 * eps)


@pytest.mark.parametrize(("shape", "axes"), _WIDE[:2], ids=str)
def test_log_sum_exp_and_l1_of_wide_rows(
    xp: Any, dtype_available: Any, shape: tuple[int, ...], axes: list[int]
) -> None:
    dtype_available("float64")
    # Each column of a block has its own shift: masked entries, values far apart, and a
    # NaN and infinities in the second block.
    rng = np.random.default_rng(61)
    values = rng.uniform(1.0, 30.0, shape)
    flat = values.reshape(-1)
    flat[::7] = -1e9
    flat[5::11] += 500.0
    columns = values.reshape(-1, values[0].size)
    columns[3, -5], columns[4, -6], columns[5, -7] = np.nan, np.inf, -np.inf
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    for op in ("reduce_log_sum_exp", "reduce_l1"):
        expected = reference.reduce(op, values, axes, keepdims=True)
        result = getattr(anyreduce, op)(make(xp, values, "float64"), axes, keepdims=True)
        assert_result(result, xp, "float64", kept, expected)
