"""The ten ONNX reductions, written once against the array API standard.

Each operator kernel takes ``(x, axes, keepdims, *, xp, dtype)``: ``axes`` is a sorted tuple
of non-negative axes (empty: reduce over nothing, the no-op form), ``dtype`` is the
caller's dtype and ``x`` the data in the dtype it is computed in (see ``_backends.lift``).
The registry ``OPS`` holds each operator with its empty-set value; :func:`run` is the one
entry point every public layer goes through.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from array_api_compat import device as device_of

from . import _backends, _dtypes, _numpy_loops, _small, _threads
from ._axes import reduced_shape
from ._blocks import BlockTotals, Part, map_merge, map_sum, square_sum
from ._kernels import (
    data_sum,
    float_to_int,
    int_abs,
    int_mean,
    rmax,
    rmin,
    rprod,
    rsum,
    to_float,
)

__all__ = ["OPS", "Op", "run"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]
Kernel = Callable[..., Array]


def _keep(xp: Namespace, m: Array, shape: tuple[int, ...], axes: Axes, keepdims: bool) -> Array:
    """A keepdims=True partial result ``m`` in the output's shape."""
    return m if keepdims else xp.reshape(m, reduced_shape(shape, axes, False))


def _cast(xp: Namespace, r: Array, dtype: Any) -> Array:
    """A result the kernel computed (a fresh array, never the caller's data) in ``dtype``.

    Not copied when it is in ``dtype`` already (the standard's ``astype`` copies by
    default): one allocation and copy less per call, 0.4-0.6% of PyTorch's 4 ms sum of
    float32 (4096, 8192) over the last axis (torch 2.13, 2 threads).
    """
    return xp.astype(r, dtype, copy=False)


def _sum(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        return rsum(xp, x, axes, keepdims, x.dtype)
    return _cast(xp, data_sum(xp, x, axes, keepdims, _dtypes.compute_float(xp, dtype)), dtype)


def _sum_square(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        return map_sum(xp, x, axes, keepdims, x.dtype, lambda b, _: b * b)
    acc = _dtypes.compute_float(xp, dtype)
    return _cast(xp, _square_total(xp, x, axes, keepdims, acc), dtype)


def _square_total(xp: Namespace, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    """The sum of squares of float ``x`` computed in ``acc``: fused dots or blocked squares."""
    fused = square_sum(xp, x, axes, keepdims, acc)
    if fused is not None:
        return fused
    return map_sum(xp, x, axes, keepdims, acc, _squares(xp, acc), inplace=("square", None))


def _squares(xp: Namespace, acc: Any) -> Callable[[Array, Part], Array]:
    """Element-wise x**2 computed in ``acc``, for :func:`map_sum`."""

    def square(block: Array, part: Part) -> Array:
        y = xp.astype(block, acc, copy=False)
        return y * y

    return square


def _l1(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        return map_sum(xp, x, axes, keepdims, x.dtype, lambda b, _: int_abs(xp, b, dtype))
    acc = _dtypes.compute_float(xp, dtype)
    lean = _numpy_loops.abs_sum(x, axes, keepdims, acc)
    if lean is not None:
        return _cast(xp, lean, dtype)
    magnitude = _backends.abs_with_zero_subgradient(xp)
    total = map_sum(xp, x, axes, keepdims, acc, lambda b, _: magnitude(b), inplace=("abs", None))
    return _cast(xp, total, dtype)


def _root(xp: Namespace, total: Array) -> Array:
    """The square root of a sum of squares, whose derivative at 0 is 0 (the subgradient).

    sqrt'(0) is inf, and inf * 0 = NaN in the chain rule: a zero total is rooted as 1 and
    masked, so both the value and the gradient are 0. Where nothing can be differentiated
    the plain root gives the same values.
    """
    if not _backends.differentiable(xp, total):
        return _backends.on_result(xp, "sqrt", total)
    zero = total == 0
    return xp.where(zero, xp.zeros_like(total), xp.sqrt(xp.where(zero, xp.ones_like(total), total)))


def _squares_fit(xp: Namespace, dtype: Any, wide: Any) -> bool:
    """Whether squares of ``dtype`` values, and sums of them, stay finite and normal in ``wide``."""
    narrow, broad = xp.finfo(dtype), xp.finfo(wide)
    return 2 * math.log2(float(narrow.max)) + 32 < math.log2(float(broad.max)) and (
        2 * math.log2(float(narrow.smallest_normal)) - 53 > math.log2(float(broad.smallest_normal))
    )


def _l2_float(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    acc = _dtypes.compute_float(xp, dtype)
    if x.dtype != acc or not _backends.patches_slices(xp):
        return _l2_safe(x, axes, keepdims, xp=xp, dtype=dtype)
    # One pass in the data's own dtype; only slices whose sum of squares overflowed, or
    # is so small that squares lost to underflow could matter, are computed again.
    total = _square_total(xp, x, axes, True, acc)
    info = xp.finfo(acc)
    # Each underflowed square is off by at most the smallest normal number: below this
    # floor their error could exceed a quarter of eps * total.
    floor = 4 * _count(x.shape, axes) * float(info.smallest_normal) / float(info.eps)
    if _backends.host_values(xp, total):
        # Two reductions decide whether any slice is suspect, without the masks: over
        # 10**6 float32 (row) results the masks' fresh temporaries cost more than the sums
        # of squares (PyTorch: L2 of (2**20, 3) over axis 1 took 8.5 ms, vector_norm 4.7).
        low, high = float(xp.min(total)), float(xp.max(total))
        # NaN propagates through min and max and would hide the other slices: masks then.
        if floor <= low and high < math.inf:
            return _keep(xp, _root(xp, total), x.shape, axes, keepdims)
    suspect = (total == math.inf) | (total < floor)

    def safe(y: Array, over: Axes) -> Array:
        return xp.astype(_l2_safe(y, over, True, xp=xp, dtype=dtype), acc)

    root = _backends.patch_slices(xp, x, axes, _root(xp, total), suspect, safe)
    return _keep(xp, root, x.shape, axes, keepdims)


def _l2_safe(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    """L2 of float ``x`` that neither overflows nor underflows in intermediate steps."""
    for wide in (_dtypes.compute_float(xp, dtype), _dtypes.widest_float(xp)):
        if _squares_fit(xp, dtype, wide):
            squares = _squares(xp, wide)
            total = map_sum(xp, x, axes, keepdims, wide, squares, inplace=("square", None))
            return _root(xp, total)
    # No wider type: scale each slice by its largest magnitude (see _scaled_squares).
    y = xp.astype(x, _dtypes.compute_float(xp, dtype), copy=False)
    scale, total = _backends.chunkwise(xp, y, axes, _scaled_squares, _merge_scaled, (1, 0), y.dtype)
    root_scale = _keep(xp, xp.sqrt(scale), x.shape, axes, keepdims)
    return (_root(xp, _keep(xp, total, x.shape, axes, keepdims)) * root_scale) * root_scale


def _scaled_squares(xp: Namespace, y: Array, axes: Axes) -> tuple[Array, Array]:
    """Per slice (keepdims): its largest magnitude m and the sum of (y / m) ** 2.

    Scaled squares can neither overflow nor underflow; an all-zero, infinite or NaN slice
    keeps scale 1. The scale is applied as two divisions by its root: XLA rewrites x / m
    into x * (1 / m), and 1 / m is subnormal, so flushed to zero, for m above 2**126 in
    float32.
    """
    m = rmax(xp, xp.abs(y), axes, True, y.dtype)
    scale = xp.where((m == 0) | ~xp.isfinite(m), xp.ones_like(m), m)
    root_scale = xp.sqrt(scale)
    z = (y / root_scale) / root_scale
    return scale, rsum(xp, z * z, axes, True, y.dtype)


def _merge_scaled(xp: Namespace, parts: tuple[Array, ...], axes: Axes) -> tuple[Array, Array]:
    """Per-chunk results of :func:`_scaled_squares` brought to the largest scale and summed."""
    scales, totals = parts
    scale = rmax(xp, scales, axes, True, scales.dtype)
    ratio = scales / scale
    return scale, _sum_finite_scaled(xp, totals, ratio * ratio, axes)


def _sum_finite_scaled(xp: Namespace, totals: Array, factors: Array, axes: Axes) -> Array:
    # An infinite chunk total stays infinite even where its factor underflows to 0.
    scaled = xp.where(xp.isinf(totals), totals, totals * factors)
    return rsum(xp, scaled, axes, True, totals.dtype)


def _l2(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        wide = _dtypes.widest_float(xp)
        y = to_float(xp, x, dtype, wide)
        return float_to_int(xp, xp.sqrt(rsum(xp, y * y, axes, keepdims, wide)), dtype, x.dtype)
    return _cast(xp, _l2_float(x, axes, keepdims, xp=xp, dtype=dtype), dtype)


def _count(shape: tuple[int, ...], axes: Axes) -> int:
    # A list: torch.compile (fullgraph) cannot pass a generator to math.prod.
    return math.prod([shape[a] for a in axes])


def _mean(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    n = _count(x.shape, axes)
    if _dtypes.is_integer(xp, dtype):
        return int_mean(xp, x, axes, keepdims, dtype, n)
    total = data_sum(xp, x, axes, keepdims, _dtypes.compute_float(xp, dtype))
    return _cast(xp, _backends.on_result(xp, "divide", total, n), dtype)


def _prod(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        return rprod(xp, x, axes, keepdims, x.dtype)
    return _cast(xp, rprod(xp, x, axes, keepdims, _dtypes.compute_float(xp, dtype)), dtype)


def _max(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    return rmax(xp, x, axes, keepdims, dtype)


def _min(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    return rmin(xp, x, axes, keepdims, dtype)


def _as_float(xp: Namespace, x: Array, dtype: Any) -> Array:
    """Data as the float dtype the log-domain operators compute in."""
    fdtype = _dtypes.compute_float(xp, dtype)
    if _dtypes.is_integer(xp, dtype):
        return to_float(xp, x, dtype, fdtype)
    return xp.astype(x, fdtype, copy=False)


def _from_float(xp: Namespace, r: Array, x: Array, dtype: Any) -> Array:
    if _dtypes.is_integer(xp, dtype):
        return float_to_int(xp, r, dtype, x.dtype)
    return _cast(xp, r, dtype)


def _log_sum(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    if _dtypes.is_float(xp, dtype):
        # rsum widens as it sums: no copy of the data in the wider type.
        total = data_sum(xp, x, axes, keepdims, _dtypes.compute_float(xp, dtype))
        return _cast(xp, _backends.on_result(xp, "log", total), dtype)
    y = _as_float(xp, x, dtype)
    return _from_float(xp, xp.log(rsum(xp, y, axes, keepdims, y.dtype)), x, dtype)


def _log_sum_exp(x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, dtype: Any) -> Array:
    # Float data are widened block by block (no copy of the data in the wider type).
    y = x if _dtypes.is_float(xp, dtype) else _as_float(xp, x, dtype)
    wide = _dtypes.compute_float(xp, dtype)
    partial = functools.partial(_shifted_exps, wide=wide)
    shift, total = _backends.chunkwise(xp, y, axes, partial, _merge_shifted, (0, 0), wide)
    result = xp.log(_keep(xp, total, x.shape, axes, keepdims))
    return _from_float(xp, result + _keep(xp, shift, x.shape, axes, keepdims), x, dtype)


def _shifted_exps(xp: Namespace, y: Array, axes: Axes, *, wide: Any) -> tuple[Array, Array]:
    """Per slice (keepdims): a shift m and the sum of exp(y - m), m a maximum of the slice,
    both in ``wide``.

    Each block takes its own maximum (so the data are read once) and the blocks' sums are
    brought to the largest shift when merged. The shift keeps exp from overflowing; a
    slice whose maximum is +-inf or NaN is not shifted, which gives +inf, -inf and NaN by
    IEEE rules. Blocks of a narrower ``y`` are widened one at a time.
    """

    def merge_rows(shifts: Array, sums: Array) -> tuple[Array, Array]:
        return _merge_shifted(xp, (shifts, sums), (0,))

    rows = _numpy_loops.shifted_exp_rows(y, axes, merge_rows) if y.dtype == wide else None
    if rows is not None:
        shifts, sums, to_merge = rows
        if to_merge:
            shifts, sums = merge_rows(shifts, sums)
        kept = reduced_shape(tuple(y.shape), axes, True)
        return xp.reshape(shifts, kept), xp.reshape(sums, kept)
    # One per set of axes a block is reduced over (blocks along a kept axis see the
    # merged axes of a view; see _blocks.map_merge).
    totals: dict[Axes, BlockTotals] = {}

    def block_sums(block: Array, over: Axes, scratch: Array | None) -> tuple[Array, Array]:
        if scratch is not None and block.dtype != scratch.dtype:
            # Widened into the cached buffer first: NumPy's float16 maximum is 20x slower
            # than float64's (190 against 10 ms for 32M values).
            scratch[...] = block
            block = scratch
        elif block.dtype != wide:
            block = xp.astype(block, wide)
        # The backend's own maximum: a NaN it drops still reaches the sum through exp.
        m = _backends.plain_max(xp, block, over)
        shift = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
        if scratch is None:
            values = _backends.exp_of_difference(xp, block, shift)
        else:
            values = _backends.write_elementwise("exp_shift", block, scratch, shift)
            if over not in totals:
                totals[over] = BlockTotals(xp, over, wide)
            return shift, totals[over](values)
        return shift, rsum(xp, values, over, True, wide)

    def merge(parts: tuple[Array, ...], over: Axes) -> tuple[Array, ...]:
        return _merge_shifted(xp, parts, over)

    shift, total = map_merge(xp, y, axes, wide, block_sums, merge)
    return shift, total


def _merge_shifted(xp: Namespace, parts: tuple[Array, ...], axes: Axes) -> tuple[Array, Array]:
    """Per-chunk results of :func:`_shifted_exps` brought to the largest shift and summed."""
    shifts, totals = parts
    shift = rmax(xp, shifts, axes, True, shifts.dtype)
    return shift, _sum_finite_scaled(xp, totals, xp.exp(shifts - shift), axes)


@dataclass(frozen=True)
class Op:
    """One reduction operator: its names, its kernel and its value over an empty set."""

    name: str
    onnx_name: str
    kernel: Kernel
    accepts_bool: bool
    empty: Callable[[Namespace, Any], bool | int | float]

    def empty_value(self, xp: Namespace, dtype: Any) -> bool | int | float:
        """The operator's value over an empty set of elements of ``dtype``."""
        return self.empty(xp, dtype)


def _zero(xp: Namespace, dtype: Any) -> int:
    return 0


def _lowest(xp: Namespace, dtype: Any) -> bool | int | float:
    if _dtypes.is_bool(xp, dtype):
        return False
    return -math.inf if _dtypes.is_float(xp, dtype) else int(xp.iinfo(dtype).min)


def _highest(xp: Namespace, dtype: Any) -> bool | int | float:
    if _dtypes.is_bool(xp, dtype):
        return True
    return math.inf if _dtypes.is_float(xp, dtype) else int(xp.iinfo(dtype).max)


def _nan_or_zero(xp: Namespace, dtype: Any) -> float | int:
    return math.nan if _dtypes.is_float(xp, dtype) else 0


OPS: dict[str, Op] = {
    op.name: op
    for op in (
        Op("reduce_sum", "ReduceSum", _sum, False, _zero),
        Op("reduce_sum_square", "ReduceSumSquare", _sum_square, False, _zero),
        Op("reduce_l1", "ReduceL1", _l1, False, _zero),
        Op("reduce_l2", "ReduceL2", _l2, False, _zero),
        Op("reduce_mean", "ReduceMean", _mean, False, _nan_or_zero),
        Op("reduce_prod", "ReduceProd", _prod, False, lambda xp, dtype: 1),
        Op("reduce_max", "ReduceMax", _max, True, _lowest),
        Op("reduce_min", "ReduceMin", _min, True, _highest),
        # log(0) = -inf; integers (older ONNX opsets) saturate it at the dtype minimum.
        Op("reduce_log_sum", "ReduceLogSum", _log_sum, False, _lowest),
        Op("reduce_log_sum_exp", "ReduceLogSumExp", _log_sum_exp, False, _lowest),
    )
}


def run(
    op: Op, x: Array, axes: Axes, keepdims: bool, *, xp: Namespace, small: bool = True
) -> Array:
    """Reduce validated data ``x`` over normalised ``axes``; the caller's array kind out.

    ``small=False``: the caller has tried the small path (:func:`_small.form_for`) already.
    """
    if small:
        result = _small.reduce(op.name, x, axes, keepdims)
        if result is not None:
            return result
    dtype = x.dtype
    if any(n is None or (isinstance(n, float) and math.isnan(n)) for n in x.shape):
        # Dask after boolean indexing: the mean's count and the output's shape are unknown.
        msg = (
            f"{op.name}: data has axes of unknown length (shape {tuple(x.shape)}); "
            "for a Dask array call data.compute_chunk_sizes() first"
        )
        raise ValueError(msg)
    if 0 in x.shape:
        # Either the reduced set is empty (the identity) or the result has no elements.
        shape = reduced_shape(tuple(x.shape), axes, keepdims)
        # Broadcast, not xp.full: Dask's automatic chunking of a shape with zero-length
        # axes divides by zero (dask 2026.8, full((0, 0, 1000), 1.0); dask/dask#12537).
        value = xp.asarray(op.empty_value(xp, dtype), dtype=dtype, device=device_of(x))
        return xp.asarray(xp.broadcast_to(value, shape), copy=True)
    if axes and _backends.splits_over_threads(xp, x):
        threaded = _threads.reduce(op.name, x, axes, keepdims, functools.partial(_by_name, xp))
        if threaded is not None:
            return threaded
    result = _backends.compiled(xp, _compute, op, axes, keepdims, xp)(x)
    return _backends.as_array(xp, result)


def _by_name(xp: Namespace, name: str, x: Array, axes: Axes, keepdims: bool) -> Array:
    """The operator ``name`` on non-empty ``x``, an array (for :mod:`._threads`)."""
    return _backends.as_array(xp, _compute(OPS[name], axes, keepdims, xp, x))


def _compute(op: Op, axes: Axes, keepdims: bool, xp: Namespace, x: Array) -> Array:
    """The kernel of ``op`` on non-empty ``x``, in the caller's dtype."""
    dtype = x.dtype
    with _backends.computing(xp):
        carried = _backends.lift(xp, x)
        result = op.kernel(carried, axes, keepdims, xp=xp, dtype=dtype)
        return _backends.lower(xp, result, dtype)
