"""Reduction primitives over a tuple of axes, and the exact integer arithmetic.

Every operator is a composition of these. An empty ``axes`` tuple means "reduce over
nothing" (the ONNX no-op form): the primitives then return a fresh array.
Empty reduction sets never reach this module (see ``_ops.run``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from array_api_compat import device as device_of

from . import _backends, _dtypes
from ._axes import merged_runs, reduced_shape

__all__ = [
    "data_sum",
    "float_to_int",
    "int_abs",
    "int_mean",
    "rmax",
    "rmin",
    "rprod",
    "rsum",
    "to_float",
]

Namespace = Any
Array = Any
Axes = tuple[int, ...]


# Block length of the blocked float sum: each level adds at most this many terms in a row.
_BLOCK = 16


def rsum(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Sum accumulated in ``dtype`` (integers wrap modulo 2**bits).

    Float sums keep their rounding error within a few ``eps * sum(|x|)`` whatever the
    length: backends that add a long axis one term after the other (see
    ``_backends.sums_pairwise``) sum it in blocks instead.
    """
    if not axes:
        return xp.astype(x, dtype, copy=True)
    widened = _widened_in_blocks(xp, x, axes, keepdims, dtype, xp.sum, xp.sum)
    if widened is not None:
        return widened
    if _dtypes.is_float(xp, dtype) and _backends.chunked(xp):
        # Each chunk is summed by itself (blocked where its backend needs it), then the
        # chunk sums up the backend's tree: a reshape for blocks would rechunk the data.
        kernel = functools.partial(_plain_sum, dtype=dtype)
        return _backends.tree_reduce(xp, x, axes, keepdims, kernel, 0, dtype)
    if _dtypes.is_float(xp, dtype):
        # A short trailing run: one dot per row (NumPy's and PyTorch's sums loop per row).
        short = _backends.short_row_sum(xp, x, axes, keepdims, dtype)
        if short is not None:
            return short
    if not _dtypes.is_float(xp, dtype) or _backends.sums_pairwise(xp):
        return xp.sum(x, axis=axes, keepdims=keepdims, dtype=dtype)
    # NumPy sums the trailing run of reduced axes (contiguous in C order) pairwise, and any
    # other axis sequentially, so those are summed in blocks, one axis after the other;
    # a leading run of a C-ordered array by BLAS dots of as many terms (faster).
    leading = _backends.leading_sum(xp, x, axes, keepdims, dtype)
    if leading is not None:
        return leading
    inner: list[int] = []
    for a in reversed(range(x.ndim)):
        if a not in axes:
            break
        inner.append(a)
    total = xp.sum(x, axis=tuple(inner), keepdims=True, dtype=dtype) if inner else x
    for a in axes:
        if a not in inner:
            total = _block_sum(xp, total, a, dtype)
    return total if keepdims else xp.reshape(total, _dropped(x.shape, axes))


def data_sum(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """:func:`rsum` of an operator's data itself, not of an expression of it.

    Here PyTorch and JAX, whose own sums :func:`rsum` takes as they are, may sum leading
    axes as dot products (``_backends.leading_sum``, which NumPy's ``rsum`` asks itself);
    on JAX that route would write an element-wise step out in full, so sums of
    expressions go to :func:`rsum`, where XLA keeps the step fused into its reduction.
    """
    if axes and _backends.sums_pairwise(xp):
        leading = _backends.leading_sum(xp, x, axes, keepdims, dtype)
        if leading is not None:
            return leading
    return rsum(xp, x, axes, keepdims, dtype)


def _widened_in_blocks(
    xp: Namespace,
    x: Array,
    axes: Axes,
    keepdims: bool,
    dtype: Any,
    reduce: Callable[..., Array],
    combine: Callable[..., Array],
) -> Array | None:
    """``reduce`` of ``x`` into the wider ``dtype``, block by block along axis 0, where the
    backend would otherwise widen the whole input at once (``_backends.widening_rows``).

    Each block is copied into one reused buffer of ``dtype`` and reduced there (keepdims);
    the block results are joined along axis 0 when it is kept, else combined by
    ``combine`` over axis 0. A fresh widened block per step is above glibc's mmap
    threshold, and page-faulted anew on every block in some allocator states (float16
    (4096, 8192) summed in 98 ms against 22 ms). None where the backend widens on the fly.
    """
    rows = _backends.widening_rows(xp, x, dtype)
    if rows is None:
        return None
    buffer = xp.empty((rows, *x.shape[1:]), dtype=dtype, device=device_of(x))
    parts = []
    for start in range(0, x.shape[0], rows):
        block = x[start : min(start + rows, x.shape[0]), ...]
        wide = buffer[: block.shape[0], ...]
        wide[...] = block
        parts.append(reduce(wide, axis=axes, keepdims=True))
    total = xp.concat(parts, axis=0)
    if 0 in axes:
        total = combine(total, axis=0, keepdims=True)
    return total if keepdims else xp.reshape(total, _dropped(x.shape, axes))


def _kept_prod(xp: Namespace) -> Callable[..., Array]:
    """``xp.prod`` (keepdims) that takes a product over every axis as one over the
    flattened block (a view), as :func:`rprod` does: PyTorch multiplies one axis at a
    time otherwise (float16 (4096, 8192) in float64 blocks: 69 against 23 ms)."""

    def prod(v: Array, *, axis: Axes, keepdims: bool) -> Array:
        if len(axis) == v.ndim > 1:
            return xp.reshape(xp.prod(xp.reshape(v, (-1,)), axis=0), (1,) * v.ndim)
        return xp.prod(v, axis=axis, keepdims=keepdims)

    return prod


def _plain_sum(xp: Namespace, x: Array, axes: Axes, keepdims: bool, *, dtype: Any) -> Array:
    return rsum(xp, x, axes, keepdims, dtype)


def _dropped(shape: tuple[int, ...], axes: Axes) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _block_sum(xp: Namespace, x: Array, axis: int, dtype: Any) -> Array:
    """Sum over ``axis`` (kept, as length 1) in nested blocks of ``_BLOCK`` terms.

    The axis is split into (blocks, _BLOCK), a view: summing the short axis, then the
    block sums the same way, makes the error grow with log(n) levels, not with n.
    """
    n = x.shape[axis]
    if n <= _BLOCK:
        return xp.sum(x, axis=axis, keepdims=True, dtype=dtype)
    blocks, rest = divmod(n, _BLOCK)
    before = (slice(None),) * axis
    head_index = (*before, slice(0, blocks * _BLOCK), ...)
    head = x[head_index] if rest else x
    head = xp.reshape(head, (*x.shape[:axis], blocks, _BLOCK, *x.shape[axis + 1 :]))
    total = _block_sum(xp, xp.sum(head, axis=axis + 1, dtype=dtype), axis, dtype)
    if rest:
        tail_index = (*before, slice(blocks * _BLOCK, n), ...)
        tail = x[tail_index]
        total = total + xp.sum(tail, axis=axis, keepdims=True, dtype=dtype)
    return total


def rprod(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Product accumulated in ``dtype`` (integers wrap modulo 2**bits)."""
    if not axes:
        return xp.astype(x, dtype, copy=True)
    widened = _widened_in_blocks(xp, x, axes, keepdims, dtype, _kept_prod(xp), xp.prod)
    if widened is not None:
        return widened
    if len(axes) == x.ndim > 1 and _backends.prod_all_axes_copies(xp):
        total = xp.prod(xp.reshape(x, (-1,)), axis=0, dtype=dtype)
        return xp.reshape(total, (1,) * x.ndim) if keepdims else total
    if len(axes) == x.ndim > 1 and _backends.prod_all_axes_staged(xp):
        first = _backends.staged(xp, xp.prod(x, axis=0, dtype=dtype))
        total = xp.prod(first, axis=tuple(range(first.ndim)), dtype=dtype)
        return xp.reshape(total, (1,) * x.ndim) if keepdims else total
    width = _backends.prod_split(xp)
    split = _split_prod(xp, x, axes, dtype, width) if width else None
    if split is not None:
        return split if keepdims else xp.reshape(split, _dropped(x.shape, axes))
    if len(axes) > 1 and _backends.one_axis_at_a_time(xp):
        return _axis_by_axis(xp, functools.partial(xp.prod, dtype=dtype), x, axes, keepdims)
    if len(axes) > 1 and _backends.prod_staged_by_axis(xp):
        dims, over = merged_runs(tuple(x.shape), axes)
        view = x if dims == tuple(x.shape) else _backends.staged(xp, xp.reshape(x, dims))

        def staged_prod(v: Array, axis: int, keepdims: bool) -> Array:
            return _backends.staged(xp, xp.prod(v, axis=axis, keepdims=keepdims, dtype=dtype))

        total = _axis_by_axis(xp, staged_prod, xp.astype(view, dtype, copy=False), over, True)
        return xp.reshape(total, reduced_shape(tuple(x.shape), axes, keepdims))
    return xp.prod(x, axis=axes, keepdims=keepdims, dtype=dtype)


def _axis_by_axis(
    xp: Namespace, reduce: Callable[..., Array], x: Array, axes: Axes, keepdims: bool
) -> Array:
    """``reduce`` over ``axes``, one axis at a time, the last first (see
    ``_backends.one_axis_at_a_time``)."""
    total = x
    for a in reversed(axes):
        total = reduce(total, axis=a, keepdims=True)
    return total if keepdims else xp.reshape(total, _dropped(x.shape, axes))


def trailing_rows(
    xp: Namespace, x: Array, axes: Axes, width: int
) -> tuple[int, Array, Array | None] | None:
    """The contiguous trailing run of reduced ``axes`` of ``x``, viewed as rows of ``width``.

    Returns ``(inner, blocks, tail)`` with ``inner`` the first axis of the run, ``blocks``
    of shape ``(*x.shape[:inner], n // width, width)`` and ``tail`` the last ``n % width``
    terms (None if there are none); views, not copies. None where the last axis is kept or
    the run cannot be viewed without a copy.
    """
    if not axes or axes[-1] != x.ndim - 1:
        return None
    inner = x.ndim
    while inner > 0 and inner - 1 in axes:
        inner -= 1
    outer = tuple(x.shape[:inner])
    length = math.prod(x.shape[inner:])
    head = length - length % width
    try:
        rows = xp.reshape(x, (*outer, length), copy=False)
        blocks = xp.reshape(rows[..., :head], (*outer, head // width, width), copy=False)
    except ValueError:
        return None
    return inner, blocks, rows[..., head:] if head < length else None


def _split_prod(xp: Namespace, x: Array, axes: Axes, dtype: Any, width: int) -> Array | None:
    """Product (keepdims) with the trailing run of reduced axes viewed as rows of ``width``.

    The rows are multiplied together first, ``width`` products side by side (vectorised),
    then the ``width`` results: a product's rounding does not depend on the order much,
    each factor adds one rounding either way. None where the run cannot be so viewed.
    """
    view = trailing_rows(xp, x, axes, width)
    if view is None:
        return None
    inner, blocks, tail = view
    if blocks.shape[-2] < 2:
        return None
    total = xp.prod(xp.prod(blocks, axis=-2, dtype=dtype), axis=-1, dtype=dtype)
    if tail is not None:
        total = total * xp.prod(tail, axis=-1, dtype=dtype)
    rest = tuple(a for a in axes if a < inner)
    if rest:
        total = xp.prod(total, axis=rest, keepdims=True, dtype=dtype)
    return xp.reshape(total, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))


def _flip_sign_bit(xp: Namespace, x: Array) -> Array:
    # Maps the unsigned order of uint64 bit patterns held in int64 onto the signed order.
    return xp.bitwise_xor(x, xp.asarray(-(2**63), dtype=x.dtype, device=device_of(x)))


def _extreme(xp: Namespace, x: Array, high: bool) -> bool | float:
    """The identity of min (``high``) or max over ``x``'s dtype: the value no element passes."""
    if _dtypes.is_bool(xp, x.dtype):
        return high
    if _dtypes.is_float(xp, x.dtype):
        return math.inf if high else -math.inf
    info = xp.iinfo(x.dtype)
    return int(info.max if high else info.min)


def rmax(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Maximum (``any`` for bool); NaN propagates. ``dtype`` is the logical dtype of ``x``."""
    if not axes:
        return xp.asarray(x, copy=True)
    if _backends.chunked(xp):  # Dask's own fails on zero-size chunks (see tree_reduce)
        kernel = functools.partial(rmax, dtype=dtype)
        return _backends.tree_reduce(xp, x, axes, keepdims, kernel, _extreme(xp, x, False), x.dtype)
    if _dtypes.is_bool(xp, x.dtype):
        if len(axes) > 1 and _backends.one_axis_at_a_time(xp):
            return _axis_by_axis(xp, xp.any, x, axes, keepdims)
        return xp.any(x, axis=axes, keepdims=keepdims)
    if _backends.wraps_uint64(xp, x.dtype, dtype):
        return _flip_sign_bit(xp, xp.max(_flip_sign_bit(xp, x), axis=axes, keepdims=keepdims))
    special = _backends.extreme(xp, x, axes, keepdims, high=True)
    if special is not None:
        return special
    return xp.max(x, axis=axes, keepdims=keepdims)


def rmin(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Minimum (``all`` for bool); NaN propagates. ``dtype`` is the logical dtype of ``x``."""
    if not axes:
        return xp.asarray(x, copy=True)
    if _backends.chunked(xp):  # Dask's own fails on zero-size chunks (see tree_reduce)
        kernel = functools.partial(rmin, dtype=dtype)
        return _backends.tree_reduce(xp, x, axes, keepdims, kernel, _extreme(xp, x, True), x.dtype)
    if _dtypes.is_bool(xp, x.dtype):
        if len(axes) > 1 and _backends.one_axis_at_a_time(xp):
            return _axis_by_axis(xp, xp.all, x, axes, keepdims)
        return xp.all(x, axis=axes, keepdims=keepdims)
    if _backends.wraps_uint64(xp, x.dtype, dtype):
        return _flip_sign_bit(xp, xp.min(_flip_sign_bit(xp, x), axis=axes, keepdims=keepdims))
    special = _backends.extreme(xp, x, axes, keepdims, high=False)
    if special is not None:
        return special
    return xp.min(x, axis=axes, keepdims=keepdims)


def int_abs(xp: Namespace, x: Array, dtype: Any) -> Array:
    """|x| of integers of logical dtype ``dtype`` (|min| wraps to min, as in two's complement)."""
    if _dtypes.is_unsigned(xp, dtype):
        return x
    return xp.abs(x)


def to_float(xp: Namespace, x: Array, dtype: Any, fdtype: Any) -> Array:
    """Integers of logical dtype ``dtype`` as exact-as-possible floats of ``fdtype``."""
    y = xp.astype(x, fdtype)
    if _backends.wraps_uint64(xp, x.dtype, dtype):
        y = xp.where(x < 0, y + 2.0**64, y)
    return y


def float_to_int(xp: Namespace, r: Array, dtype: Any, out_dtype: Any) -> Array:
    """Truncate floats toward zero into integers of logical dtype ``dtype``.

    Values beyond the dtype's range saturate at its limits (a float-to-int cast out of
    range is undefined behaviour in C, and backends disagree); NaN and -inf give the
    dtype minimum, the value the reference's cast gives on x86.
    """
    info = xp.iinfo(dtype)
    low, high = info.min, info.max
    device = device_of(r)
    r = xp.trunc(r)
    too_high = r >= float(high + 1)
    too_low = (r < float(low)) | xp.isnan(r)
    safe = xp.where(too_high | too_low, xp.zeros_like(r), r)
    if _backends.wraps_uint64(xp, out_dtype, dtype):
        safe = xp.where(safe >= 2.0**63, safe - 2.0**64, safe)
        high = -1  # the int64 holding the bits of 2**64 - 1
    out = xp.astype(safe, out_dtype)
    out = xp.where(too_high, xp.asarray(high, dtype=out_dtype, device=device), out)
    return xp.where(too_low, xp.asarray(low, dtype=out_dtype, device=device), out)


def _trunc_div(xp: Namespace, q: Array, rem_nonzero: Array) -> Array:
    # floor(t / n) -> trunc(t / n): add one where the quotient is negative and inexact.
    one = xp.ones_like(q)
    return xp.where((q < 0) & rem_nonzero, q + one, q)


def int_mean(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any, n: int) -> Array:
    """The exact mean of integers, truncated toward zero, in ``x.dtype``.

    Small types sum exactly in the widest integer. Wide types are split into limbs whose
    sums cannot overflow; the mean is then found by long division limb by limb, so the
    result is exact whatever the sum's size (the mean always fits the type).
    """
    acc = _dtypes.widest_int(xp)
    wide_bits = _dtypes.bits(xp, acc)
    width = _dtypes.bits(xp, dtype)
    signed = not _dtypes.is_unsigned(xp, dtype)
    if wide_bits - width >= 24:  # n * 2**width stays below 2**(wide_bits - 1)
        total = rsum(xp, xp.astype(x, acc), axes, keepdims, acc)
        floor = total // n
        result = _trunc_div(xp, floor, total - floor * n != 0) if signed else floor
        return xp.astype(result, x.dtype)
    limb = 16 if wide_bits == 64 else 8
    mask = (1 << limb) - 1
    wide = xp.astype(x, acc)  # keeps the bits of uint64/uint32 held in int64/int32
    carry: Array | int = 0
    quotient: Array | int = 0
    for j in reversed(range(width // limb)):
        part = xp.bitwise_right_shift(wide, j * limb) if j else wide
        top = j == width // limb - 1
        if not (top and signed):
            part = xp.bitwise_and(part, mask)
        value = carry * (1 << limb) + rsum(xp, part, axes, keepdims, acc)
        digit = value // n
        carry = value - digit * n
        quotient = quotient * (1 << limb) + digit
    result = _trunc_div(xp, quotient, carry != 0) if signed else quotient
    return xp.astype(result, x.dtype)
