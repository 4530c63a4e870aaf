"""Reductions over short trailing axes, over leading axes of narrow rows, and over
leading axes of rows too wide to block by rows.

NumPy runs a reduction's inner loop once per row, so the first two are where its own
kernels are slowest; anyreduce regroups them (``_backends._numpy_narrow_extreme``,
``_backends.short_row_sum``, ``_blocks.BlockTotals``). Wide rows are blocked along a kept
axis (``_blocks._Panels``). The results must not change.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce._lib import _backends
from backends import assert_result, make, to_numpy

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


def test_numpy_narrow_forms_apply_only_to_c_ordered_narrow_or_short_rows() -> None:
    tall = np.zeros((20000, 3), dtype=np.float32)
    narrow = _backends._numpy_narrow_extreme
    assert narrow(np.maximum, tall, (0,)) is not None
    assert narrow(np.maximum, tall, (1,)) is not None
    assert narrow(np.maximum, np.zeros((20000, 512), np.float32), (0,)) is None  # wide rows
    assert narrow(np.maximum, np.zeros((20000, 17), np.float32), (1,)) is None  # long rows
    assert narrow(np.maximum, np.asfortranarray(tall), (0,)) is None
    assert narrow(np.maximum, tall.astype(np.float16), (0,)) is None  # float16: its own path
    assert narrow(np.maximum, tall, (0, 1)) is None  # every axis: np.max is fast there
    short = _backends.short_row_sum
    assert short(np, tall, (1,), False, np.float32).shape == (20000,)
    assert short(np, tall, (1,), False, np.float64) is None  # another accumulation dtype
    assert short(np, tall[:, :2], (1,), False, np.float32) is None  # a strided view
    assert short(np, np.zeros((100, 129), np.float32), (1,), False, np.float32) is None
    assert short(np, tall, (0,), False, np.float32) is None  # a leading axis


def test_torch_regroups_only_eager_narrow_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    calls: list[tuple[int, ...]] = []
    regrouped = _backends._regrouped

    def spy(m: Any, x: Any, lead: int, reduce: Any, combine: Any) -> Any:
        calls.append(tuple(x.shape))
        return regrouped(m, x, lead, reduce, combine)

    monkeypatch.setattr(_backends, "_regrouped", spy)
    tall = torch.arange(60000.0).reshape(20000, 3)
    assert anyreduce.reduce_max(tall, [0], keepdims=False).tolist() == [59997.0, 59998.0, 59999.0]
    assert anyreduce.reduce_min(tall, [0], keepdims=False).tolist() == [0.0, 1.0, 2.0]
    assert calls == [(20000, 3), (20000, 3)]
    calls.clear()
    # LogSumExp's shift: the same regrouped maximum, and the same result as PyTorch's.
    got = anyreduce.reduce_log_sum_exp(tall / 1000, [0], keepdims=False)
    torch.testing.assert_close(got, torch.logsumexp(tall / 1000, 0), rtol=1e-6, atol=0)
    assert calls
    calls.clear()
    anyreduce.reduce_max(torch.zeros(20000, 32), [0])  # torch's own is fast from 32 on
    anyreduce.reduce_max(tall.T.contiguous().T, [0])  # not contiguous
    anyreduce.reduce_max(tall.clone().requires_grad_(True), [0])  # autograd: torch.amax
    assert calls == []


def test_torch_short_row_sums_are_products_only_for_eager_short_rows() -> None:
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as txp

    short = _backends.short_row_sum
    tall = torch.full((20000, 3), 0.5)
    assert short(txp, tall, (1,), False, torch.float32).tolist()[:2] == [1.5, 1.5]
    assert short(txp, torch.zeros(20000, 17), (1,), False, torch.float32) is None  # its own
    assert short(txp, tall.T.contiguous().T, (1,), False, torch.float32) is None
    assert short(txp, tall.clone().requires_grad_(True), (1,), False, torch.float32) is None
    assert short(txp, tall.double(), (1,), False, torch.float32) is None


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


def test_results_are_finished_in_place_only_where_nothing_else_can_see_them() -> None:
    import array_api_compat.numpy as nxp

    fresh = np.full(4, 8.0, dtype=np.float32)
    assert _backends.on_result(nxp, "divide", fresh, 2) is fresh
    np.testing.assert_array_equal(fresh, 4.0)
    frozen = np.full(4, 8.0)
    frozen.flags.writeable = False
    assert _backends.on_result(nxp, "sqrt", frozen) is not frozen
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as txp

    tracked = torch.full((4,), 8.0, requires_grad=True) * 1
    out = _backends.on_result(txp, "log", tracked)
    assert out is not tracked  # autograd keeps its graph
    assert out.requires_grad
    plain = torch.full((4,), 8.0)
    assert _backends.on_result(txp, "sqrt", plain) is plain


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


def test_panels_apply_only_to_views_of_wide_leading_rows() -> None:
    from anyreduce._lib._blocks import _Panels

    x = np.zeros((20, 3, 8192), np.float32)
    panels = _Panels.plan(np, x, (0,), 10, 2**18)
    assert panels is not None
    assert panels.view.shape == (20, 3 * 8192)
    assert [(a, b) for a, b, _ in panels.blocks()] == [(0, 13107), (13107, 24576)]
    assert _Panels.plan(np, x, (0,), 16, 2**18) is None  # enough rows per block
    assert _Panels.plan(np, x, (1,), 10, 2**18) is None  # axis 0 kept: row blocks join
    assert _Panels.plan(np, x, (0, 1, 2), 10, 2**18) is None  # every axis
    assert _Panels.plan(np, x, (0,), 10, None) is None  # the backend does not block
    assert _Panels.plan(np, x.transpose(0, 2, 1), (0,), 10, 2**18) is None  # no view
    assert _Panels.plan(np, np.zeros((20, 3, 8), np.float32), (0,), 10, 2**18) is None


def test_wide_row_blocks_give_each_block_its_part_of_a_companion(
    xp: Any, dtype_available: Any
) -> None:
    # map_sum's element-wise step may read a keepdims-shaped companion (a shift, say);
    # blocks along a kept axis of a merged view get the matching columns of it.
    from anyreduce._lib._blocks import map_sum

    dtype_available("float64")
    shape = (20, 3, 8192)  # NumPy: 10 rows a block, so blocks along the kept axis
    values = np.random.default_rng(67).uniform(-1.0, 1.0, shape)
    shift = np.random.default_rng(71).uniform(-1.0, 1.0, (1, *shape[1:]))
    data, companion = make(xp, values, "float64"), make(xp, shift, "float64")
    ns = anyreduce._lib._backends.namespace("test", data)
    got = map_sum(ns, data, (0,), True, data.dtype, lambda b, part: b - part(companion))
    expected = (values - shift).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12, atol=1e-12)
