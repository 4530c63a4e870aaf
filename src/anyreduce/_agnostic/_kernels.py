"""The ten ONNX reductions as compositions of standard array-API calls.

Every kernel takes ``(x, axes, keepdims, ctx)``: ``axes`` is a sorted tuple of
non-negative axes (empty: reduce over nothing, the no-op form), ``x`` is non-empty data
held in the dtype its backend computes it in (``ctx.dtype`` is the caller's dtype; the two
differ only where a backend lacks kernels for a dtype, see ``anyreduce._backends``), and
the result has the caller's dtype.

One dtype policy (:func:`anyreduce._lib._dtypes.compute_float`): float16 and bfloat16
accumulate in the widest float the namespace has, float32 and float64 in themselves;
integers wrap in their own type. Where a float result can overflow or underflow in an
intermediate step although the true result is representable (a sum whose partial sums
overflow, a product, a sum of squares), the kernel computes the plain result and a careful
one for the slices a cheap test on the plain result marks as suspect; ``ctx.select``
chooses. The generic choice computes both; an eager backend may compute the careful form
only when some slice needs it (see ``anyreduce._backends``), with the same values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .._lib import _dtypes
from .._lib._memo import library_key, memo

__all__ = [
    "KERNELS",
    "Context",
    "Kernel",
    "ScaledSquare",
    "l2_floor",
    "largest",
    "magnitude",
    "plain_total",
    "scaled_down",
    "square",
    "where_suspect",
    "whole",
    "wide_square",
]

Namespace = Any
Array = Any
Axes = tuple[int, ...]
Select = Callable[[Namespace, Array, Callable[[], Array], Array], Array]
Partial = Callable[[Namespace, Array, Axes], tuple[Array, ...]]
Merge = Callable[[Namespace, tuple[Array, ...], Axes], tuple[Array, ...]]
Parts = Callable[
    [Namespace, Array, Axes, Partial, Merge, tuple[float, ...], Any], tuple[Array, ...]
]
Term = Callable[[Namespace, Array], Array]
Total = Callable[[Namespace, Term | None, Array, Axes, bool, Any], Array]
Peak = Callable[[Namespace, Array, Axes], Array]


def where_suspect(
    xp: Namespace, suspect: Array, careful: Callable[[], Array], plain: Array
) -> Array:
    """``careful()`` where ``suspect`` holds, else ``plain``: both computed, no host read."""
    return xp.where(suspect, careful(), plain)


def whole(
    xp: Namespace,
    x: Array,
    axes: Axes,
    partial: Partial,
    merge: Merge,
    empty: tuple[float, ...],
    dtype: Any,
) -> tuple[Array, ...]:
    """``partial(xp, x, axes)``: statistics of the data taken as one part.

    A library whose arrays come in parts (Dask's chunks) takes ``partial`` of each part,
    each statistic of ``dtype`` and ``empty`` over a part with no elements, and combines
    them with ``merge``: one pass over the data, part by part.
    """
    return partial(xp, x, axes)


def largest(xp: Namespace, y: Array, axes: Axes) -> Array:
    """Each slice's largest value (keepdims), where a NaN in the slice may be missed: the
    shift of LogSumExp, whose sum of ``exp(y - shift)`` is NaN in such a slice whatever
    the shift. The standard ``max``; a library whose ``max`` must search for NaN apart
    may give its plain one as ``Context.peak``."""
    return xp.max(y, axis=axes, keepdims=True)


def square(xp: Namespace, y: Array) -> Array:
    """The term of a sum of squares."""
    return xp.multiply(y, y)


def magnitude(xp: Namespace, y: Array) -> Array:
    """The term of an L1 norm."""
    return xp.abs(y)


def scaled_down(xp: Namespace, y: Array) -> Array:
    """The term of a careful sum: ``y * 2**-64``, whose sum cannot overflow."""
    return y * 2.0**-_SCALE


def l2_floor(info: Any) -> float:
    """The total of squares below which L2's plain total is suspect, for a float type's
    ``finfo`` (the array API's, NumPy's or PyTorch's): each square flushed to zero is off
    by at most the smallest normal number, which below this floor could exceed
    ``eps**2 * total`` per term. 2**-80 for float32 and 2**-918 for float64, exact in
    either."""
    return float(info.smallest_normal) / float(info.eps) ** 2


def wide_square(xp: Namespace, y: Array) -> Array:
    """The term of a careful sum of squares: the square in the widest float, where the
    squares of float32 values are finite and normal."""
    w = xp.astype(y, _dtypes.widest_float(xp))
    return xp.multiply(w, w)


def plain_total(
    xp: Namespace, term: Term | None, y: Array, axes: Axes, keepdims: bool, dtype: Any
) -> Array:
    """The sum over ``axes``, accumulated in ``dtype``, of ``term(xp, y)`` (of ``y`` itself
    for None): the plain total of Sum, Mean, LogSum, SumSquare, L1 and L2 (of integers:
    SumSquare and L1, wrapped in their type), and the careful one of Sum, Mean, LogSum
    (:func:`scaled_down`) and L2 (:func:`wide_square`; without a wider float, the squares
    of each slice scaled by a power of two, :class:`ScaledSquare`).

    An eager backend may compute the same values another way (one pass over the data, the
    term taken block by block), given as ``Context.total``."""
    return rsum(xp, y if term is None else term(xp, y), axes, keepdims, dtype)


class Context(NamedTuple):
    """What a kernel needs besides its data: the namespace, the caller's dtype, how
    suspect slices are recomputed (:func:`where_suspect` unless an eager backend says),
    how statistics of data in parts are merged, how a total of terms is taken
    (:func:`plain_total`), and how the largest values for a shift are found
    (:func:`largest`).

    A named tuple: one is made on every call, in 0.4 of a frozen dataclass's time."""

    xp: Namespace
    dtype: Any
    select: Select = where_suspect
    parts: Parts = whole
    total: Total = plain_total
    peak: Peak = largest


Kernel = Callable[[Array, Axes, bool, Context], Array]

# Scaling by a power of two is exact: a sum of terms scaled by 2**-64 cannot overflow
# (it would need 2**64 terms), and the terms it flushes to zero are below 2**-62 in
# float32, negligible beside a sum that overflowed.
#
# The exponent is an int and the factors are made where they are used: under
# ``torch.compile(dynamic=True)`` a module's float constants become symbolic inputs
# (torch 2.13), which ``torch.cond`` refuses among its branches' inputs; ints stay constants.
_SCALE = 64

#: The scaled L2's values lie near 2**_MARGIN or 2**-_MARGIN (:func:`_scaled_squares`).
_MARGIN = 32


# --- primitives --------------------------------------------------------------------------


def _keep(xp: Namespace, r: Array, axes: Axes, keepdims: bool) -> Array:
    """A keepdims=True partial result ``r`` in the output's shape."""
    return r if keepdims or not axes else xp.squeeze(r, axis=axes)


def _cast(xp: Namespace, r: Array, dtype: Any) -> Array:
    """A fresh result in ``dtype`` (not copied again when it is already)."""
    return r if r.dtype == dtype else xp.astype(r, dtype)


def non_finite(xp: Namespace, t: Array) -> Array:
    """Where float ``t`` is infinite or NaN: ``t - t`` is NaN there and 0 elsewhere.

    The same as ``~xp.isfinite(t)`` in two element-wise steps: PyTorch's ``isfinite`` is
    four kernels and its inverse a fifth (torch 2.13, a small tensor: 12 us against 3.6),
    and the eager select asks this of every guarded result. ``xp.subtract``, not ``-``:
    inf - inf warns in NumPy, and a library that computes later (Dask) quiets it in its
    namespace.
    """
    return xp.isnan(xp.subtract(t, t))


def _copy(xp: Namespace, x: Array) -> Array:
    """A copy of ``x``: the no-op form of an operator without an element-wise part. (As
    ``astype``: ``asarray(copy=True)`` of a PyTorch tensor that requires grad warns that
    the copy requires grad too, torch 2.13.)"""
    return xp.astype(x, x.dtype, copy=True)


def rsum(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Sum accumulated in ``dtype`` (integers wrap modulo 2**bits); no axes: a copy."""
    if not axes:
        return xp.astype(x, dtype, copy=True)
    return xp.sum(x, axis=axes, keepdims=keepdims, dtype=dtype)


def rprod(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array:
    """Product accumulated in ``dtype`` (integers wrap modulo 2**bits); no axes: a copy."""
    if not axes:
        return xp.astype(x, dtype, copy=True)
    return xp.prod(x, axis=axes, keepdims=keepdims, dtype=dtype)


def _carried_uint64(xp: Namespace, carrier: Any, dtype: Any) -> bool:
    """Whether unsigned ``dtype`` is held as the signed ``carrier`` of the same bits."""
    return (
        carrier != dtype
        and bool(xp.isdtype(dtype, "unsigned integer"))
        and bool(xp.isdtype(carrier, "signed integer"))
        and xp.iinfo(dtype).bits == xp.iinfo(carrier).bits
    )


def _flip_sign_bit(xp: Namespace, x: Array) -> Array:
    # Maps the unsigned order of uint64 bit patterns held in int64 onto the signed order.
    return xp.bitwise_xor(x, xp.full_like(x, -(2**63)))


def _extreme(x: Array, axes: Axes, keepdims: bool, ctx: Context, high: bool) -> Array:
    """Maximum (``high``; ``any`` for bool) or minimum (``all``); NaN propagates."""
    xp = ctx.xp
    if not axes:
        return _copy(xp, x)
    if _dtypes.is_bool(xp, x.dtype):
        return (xp.any if high else xp.all)(x, axis=axes, keepdims=keepdims)
    reduce = xp.max if high else xp.min
    if _carried_uint64(xp, x.dtype, ctx.dtype):
        return _flip_sign_bit(xp, reduce(_flip_sign_bit(xp, x), axis=axes, keepdims=keepdims))
    return reduce(x, axis=axes, keepdims=keepdims)


def to_float(xp: Namespace, x: Array, dtype: Any, fdtype: Any) -> Array:
    """Integers of logical dtype ``dtype`` as exact-as-possible floats of ``fdtype``."""
    y = xp.astype(x, fdtype)
    if _carried_uint64(xp, x.dtype, dtype):
        y = xp.where(x < 0, y + 2.0**64, y)
    return y


def float_to_int(xp: Namespace, r: Array, dtype: Any, out_dtype: Any) -> Array:
    """Truncate floats toward zero into integers of logical dtype ``dtype``.

    Values beyond the dtype's range saturate at its limits (a float-to-int cast out of
    range is undefined behaviour in C, and backends disagree); NaN and -inf give the dtype
    minimum, the value the reference's cast gives on x86.
    """
    info = xp.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    r = xp.trunc(r)
    too_high = r >= float(high + 1)
    too_low = (r < float(low)) | xp.isnan(r)
    safe = xp.where(too_high | too_low, xp.zeros_like(r), r)
    if _carried_uint64(xp, out_dtype, dtype):
        safe = xp.where(safe >= 2.0**63, safe - 2.0**64, safe)
        high = -1  # the int64 holding the bits of 2**64 - 1
    out = xp.astype(safe, out_dtype)
    out = xp.where(too_high, xp.full_like(out, high), out)
    return xp.where(too_low, xp.full_like(out, low), out)


def _wrapped(xp: Namespace, total: Array, dtype: Any) -> Array:
    """An integer result held in a wider carrier, wrapped modulo 2**bits of ``dtype``."""
    if total.dtype == dtype or not _dtypes.is_unsigned(xp, dtype):
        return total
    width = _dtypes.bits(xp, dtype)
    if width >= xp.iinfo(total.dtype).bits:
        return total
    return xp.bitwise_and(total, (1 << width) - 1)


def _count(shape: tuple[int, ...], axes: Axes) -> Any:
    # A list: torch.compile (fullgraph) cannot pass a generator to math.prod.
    return math.prod([shape[a] for a in axes])


@memo(key=library_key)  # finfo costs ~2 us a call
def _may_overflow(xp: Namespace, dtype: Any, acc: Any) -> bool:
    """Whether a sum of ``dtype`` values accumulated in ``acc`` can overflow on the way."""
    return float(xp.finfo(acc).max) < float(xp.finfo(dtype).max) * 2.0**_SCALE


def _linear_total(
    x: Array, axes: Axes, keepdims: bool, ctx: Context, finish: Callable[[Array, Array], Array]
) -> Array:
    """``finish(sum(x), x)`` for float ``x``, accumulated by the dtype policy, ``finish``
    linear in the sum.

    Partial sums can overflow where the total does not ([3e38, 3e38, -3e38] in float32):
    slices whose total is not finite are summed again with every term scaled by 2**-64.
    ``finish`` is given the data, not lengths taken from it outside: a tracer that traces
    the careful form as a function of its own (``torch.cond`` under strict
    ``torch.export``, torch 2.13) cannot divide by a symbolic length taken outside it
    (UncapturedHigherOrderOpError), and can by one taken inside.
    """
    xp = ctx.xp
    acc = _dtypes.compute_float(xp, ctx.dtype)
    total = finish(ctx.total(xp, None, x, axes, keepdims, acc), x)
    if not axes or not _may_overflow(xp, x.dtype, acc):
        return total

    def careful() -> Array:
        scaled = ctx.total(xp, scaled_down, x, axes, keepdims, acc)
        return xp.multiply(finish(scaled, x), 2.0**_SCALE)

    return ctx.select(xp, non_finite(xp, total), careful, total)


# --- the operators -----------------------------------------------------------------------


def _sum(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        return rsum(xp, x, axes, keepdims, x.dtype)
    return _cast(xp, _linear_total(x, axes, keepdims, ctx, lambda t, _: t), ctx.dtype)


def _mean(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        return _int_mean(x, axes, keepdims, ctx, _count(tuple(x.shape), axes))

    def mean(total: Array, data: Array) -> Array:
        return total / _count(tuple(data.shape), axes)

    return _cast(xp, _linear_total(x, axes, keepdims, ctx, mean), ctx.dtype)


def _sum_square(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):  # the squares wrap, as does their sum
        return ctx.total(xp, square, x, axes, keepdims, x.dtype)
    acc = _dtypes.compute_float(xp, ctx.dtype)
    y = xp.astype(x, acc, copy=False)
    # Every term is positive: a partial sum never exceeds the total, so only a total
    # beyond the dtype's range overflows.
    return _cast(xp, ctx.total(xp, square, y, axes, keepdims, acc), ctx.dtype)


def _l1(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        # |min| wraps to min, as in two's complement; unsigned data are their own |x|.
        term = None if _dtypes.is_unsigned(xp, ctx.dtype) else magnitude
        return ctx.total(xp, term, x, axes, keepdims, x.dtype)
    acc = _dtypes.compute_float(xp, ctx.dtype)
    return _cast(xp, ctx.total(xp, magnitude, x, axes, keepdims, acc), ctx.dtype)


def _root(xp: Namespace, total: Array) -> Array:
    """The square root of a sum of squares, whose derivatives at 0 are 0 (finite).

    sqrt'(0) is inf, and inf * 0 = NaN in the chain rule: a zero total is rooted as 1 and
    masked, so the value and every derivative of the masked branch are 0.
    """
    zero = total == 0
    return xp.where(zero, xp.zeros_like(total), xp.sqrt(xp.where(zero, xp.ones_like(total), total)))


@memo(key=library_key)
def _squares_fit(xp: Namespace, dtype: Any, wide: Any) -> bool:
    """Whether squares of ``dtype`` values, and sums of them, stay finite and normal in ``wide``."""
    narrow, broad = xp.finfo(dtype), xp.finfo(wide)
    return 2 * math.log2(float(narrow.max)) + 32 < math.log2(float(broad.max)) and (
        2 * math.log2(float(narrow.smallest_normal)) - 53 > math.log2(float(broad.smallest_normal))
    )


class ScaledSquare:
    """The term of L2's scaled sum of squares: ``(y / s) ** 2``, with ``s = low * high``
    per slice (keepdims) applied as two divisions (:func:`_scaled_squares`)."""

    __slots__ = ("high", "low")

    def __init__(self, low: Array, high: Array) -> None:
        self.low, self.high = low, high

    def __call__(self, xp: Namespace, y: Array) -> Array:
        z = (y / self.low) / self.high
        return z * z


def _scaled_squares(
    xp: Namespace, y: Array, axes: Axes, total: Total = plain_total
) -> tuple[Array, Array]:
    """Per slice (keepdims): a scale s, a power of two, and the sum of (y / s) ** 2
    (taken by ``total``, the kernel's ``Context.total``).

    s is 2**32 below the slice's largest magnitude m where m >= 1, and 2**32 above it
    where m < 1. The squares of scaled values up to 2**33 add up without overflow (up to
    2**62 of them); a square that underflows is of a value below 2**-31 times the largest
    (float32), whose weight in the sum, 2**-62 at most, is far below its rounding. And
    the derivatives on the way (dy / s forward, s * z / L2 backward) stay normal where
    the data's are, so that XLA, which flushes subnormal numbers to zero, keeps them.

    An all-zero, infinite or NaN slice takes m = 1, and a slice whose maximum is
    subnormal the smallest normal number (XLA on the CPU reads subnormal numbers as zero
    in some steps and not in others).

    A power of two scales exactly, and it is a step function of the data: its derivative
    is 0, so the result's derivative is that of the L2 and does not rest on two large
    terms cancelling (XLA flushed one of them to zero: the float32 L2 of
    [0.75, 0.5, -0.25] * max had the gradient 2.05, 0.53, -0.27). The scale is applied as
    two divisions by halves of its exponent: XLA rewrites x / s into x * (1 / s), and 1 / s
    is subnormal, so flushed to zero, for s above 2**126 in float32.
    """
    # The largest magnitude, max |y|, without a temporary |y| of the data's size.
    m = xp.maximum(xp.max(y, axis=axes, keepdims=True), -xp.min(y, axis=axes, keepdims=True))
    info = xp.finfo(y.dtype)
    # An all-zero slice keeps m = 1: its derivatives are masked in the root.
    unscaled = (m == 0) | ~xp.isfinite(m)
    smallest = xp.full_like(m, float(info.smallest_normal))
    floored = xp.where(unscaled, xp.ones_like(m), xp.maximum(m, smallest))
    # log2 of the largest numbers rounds up to the first power of two beyond the range.
    top = float(math.frexp(float(info.max))[1] - 1)
    exponent = xp.minimum(xp.floor(xp.log2(floored)), xp.full_like(m, top))
    exponent = xp.where(exponent >= 0, exponent - _MARGIN, exponent + _MARGIN)
    half = xp.floor(exponent / 2)
    low, high = 2.0**half, 2.0 ** (exponent - half)
    return low * high, total(xp, ScaledSquare(low, high), y, axes, True, y.dtype)


def _merge_scaled(xp: Namespace, parts: tuple[Array, ...], axes: Axes) -> tuple[Array, ...]:
    """Parts' results of :func:`_scaled_squares` brought to the largest scale and summed.

    A part with nothing to add (all zeros, or no elements) keeps scale 1, which must not
    set the scale of the others: their squares would underflow against it.
    """
    scales, totals = parts
    dead = totals == 0
    top = xp.max(xp.where(dead, xp.zeros_like(scales), scales), axis=axes, keepdims=True)
    scale = xp.where(top == 0, xp.ones_like(top), top)
    ratio = xp.where(dead, xp.zeros_like(scales), scales / scale)
    return scale, _sum_finite_scaled(xp, totals, ratio * ratio, axes)


def _sum_finite_scaled(xp: Namespace, totals: Array, factors: Array, axes: Axes) -> Array:
    # An infinite part total stays infinite even where its factor underflows to 0.
    scaled = xp.where(xp.isinf(totals), totals, xp.multiply(totals, factors))
    return rsum(xp, scaled, axes, True, totals.dtype)


def _scaled_root(ctx: Context, y: Array, axes: Axes) -> Array:
    """L2 (keepdims) of each slice divided by its scale, then scaled back (exactly: the
    scale is a power of two, applied in two halves)."""
    xp = ctx.xp
    partial = functools.partial(_scaled_squares, total=ctx.total)
    scale, total = ctx.parts(xp, y, axes, partial, _merge_scaled, (1.0, 0.0), y.dtype)
    exponent = xp.round(xp.log2(scale))
    half = xp.floor(exponent / 2)
    return xp.multiply(_root(xp, total) * 2.0**half, 2.0 ** (exponent - half))


def _l2(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        wide = _dtypes.widest_float(xp)
        y = to_float(xp, x, ctx.dtype, wide)
        root = xp.sqrt(rsum(xp, y * y, axes, keepdims, wide))
        return float_to_int(xp, root, ctx.dtype, x.dtype)
    acc = _dtypes.compute_float(xp, ctx.dtype)
    if not axes:
        return _cast(xp, xp.abs(x), ctx.dtype)
    y = xp.astype(x, acc, copy=False)
    if x.dtype != acc and _squares_fit(xp, x.dtype, acc):
        return _cast(xp, _root(xp, ctx.total(xp, square, y, axes, keepdims, acc)), ctx.dtype)
    total = ctx.total(xp, square, y, axes, True, acc)
    suspect = (total == math.inf) | (total < l2_floor(xp.finfo(acc)))
    wide = _dtypes.widest_float(xp)
    if wide != acc and _squares_fit(xp, x.dtype, wide):

        def careful() -> Array:  # float32 squares are finite and normal in float64
            return xp.astype(_root(xp, ctx.total(xp, wide_square, x, axes, True, wide)), acc)

    else:

        def careful() -> Array:
            return _scaled_root(ctx, y, axes)

    # A slice of zeros (a padded or masked row) is exact as it is. Its total is 0, as is
    # one whose squares all underflow: where some total is 0, the slices' largest and
    # smallest values, taken without a temporary, tell the two apart before the careful
    # form is paid for. (Two selects in a row: torch.cond may not nest here.)
    vanished = total == 0

    def nonzero() -> Array:
        top = xp.max(y, axis=axes, keepdims=True)
        return (top != 0) | (xp.min(y, axis=axes, keepdims=True) != 0)

    # Where no total is 0, ``vanished`` is all false and stands for the test's result.
    suspect = xp.where(vanished, ctx.select(xp, vanished, nonzero, vanished), suspect)
    root = ctx.select(xp, suspect, careful, _root(xp, total))
    return _cast(xp, _keep(xp, root, axes, keepdims), ctx.dtype)


def _prod(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        return rprod(xp, x, axes, keepdims, x.dtype)
    acc = _dtypes.compute_float(xp, ctx.dtype)
    plain = rprod(xp, x, axes, keepdims, acc)
    if not axes:
        return _cast(xp, plain, ctx.dtype)
    # A partial product can overflow or underflow where the product does not, and then
    # meet a zero or an infinity: only finite, non-zero products are taken as they are,
    # and products of 0 from slices that hold a zero (data such as ReLU outputs): their
    # sign is the parity of the sign bits, as IEEE multiplication gives it, and a zero
    # met by an infinity gives NaN, not 0. Where some product is 0, the slices' zeros
    # are counted before the careful form is paid for.
    vanished = plain == 0

    def holds_no_zero() -> Array:
        wide = _dtypes.widest_float(xp)
        (count,) = ctx.parts(xp, x, axes, _zero_count, _add_parts, (0.0,), wide)
        return _keep(xp, count, axes, keepdims) == 0

    # Where no product is 0, ``vanished`` is all false and stands for the test's result.
    suspect = non_finite(xp, plain) | ctx.select(xp, vanished, holds_no_zero, vanished)
    careful = _careful_product(ctx, x, axes, keepdims, _dtypes.widest_float(xp), acc)
    return _cast(xp, ctx.select(xp, suspect, careful, plain), ctx.dtype)


def _careful_product(
    ctx: Context, x: Array, axes: Axes, keepdims: bool, wide: Any, acc: Any
) -> Callable[[], Array]:
    """The product of float ``x`` with exponents tracked apart from the significands.

    Each |x| is split as ``m * 2**e`` with ``e`` an integer and ``m`` near [1, 2): the
    ``e`` add up exactly, the ``log2(m)`` (each at most 1) add up with an error of about
    ``n * eps``, as a product's roundings do, and the result is ``2**(L + E)`` scaled in
    two exact steps, so nothing overflows or underflows before the final rounding (to
    ``acc``, the dtype of the plain product).
    """
    xp = ctx.xp
    split = x.dtype == wide
    # Asked here, not in the branch: a remembered answer first asked inside torch.cond
    # would be a side effect there, which Dynamo refuses.
    flushed = not split and _subnormal_when_widened(xp, x.dtype, wide)
    terms = functools.partial(_product_terms, split=split, flushed=flushed)

    def careful() -> Array:
        zero = (0.0,) * 6
        logs, exponents, zeros, infinities, nans, negatives = ctx.parts(
            xp, x, axes, terms, _add_parts, zero, wide
        )
        whole = xp.round(logs)
        k = whole + exponents
        half = xp.floor(k / 2)
        magnitude = xp.multiply((2.0 ** (logs - whole)) * (2.0**half), 2.0 ** (k - half))
        magnitude = xp.where(infinities > 0, xp.full_like(magnitude, math.inf), magnitude)
        magnitude = xp.where(zeros > 0, xp.zeros_like(magnitude), magnitude)
        undefined = (nans > 0) | ((zeros > 0) & (infinities > 0))
        magnitude = xp.where(undefined, xp.full_like(magnitude, math.nan), magnitude)
        odd = xp.remainder(negatives, 2.0) == 1
        result = xp.where(odd, -magnitude, magnitude)
        return xp.astype(_keep(xp, result, axes, keepdims), acc)

    return careful


def _product_terms(
    xp: Namespace, x: Array, axes: Axes, *, split: bool, flushed: bool = False
) -> tuple[Array, ...]:
    """Per slice (keepdims): the sums of log2(m) and of e over the regular |y| = m * 2**e,
    ``y`` the data ``x`` in ``xp``'s widest float, and the counts of zeros, infinities,
    NaNs and negative signs. Each statistic adds up over parts of the data, which are
    widened one at a time (and may be another library's arrays than the kernel's).

    Without ``split`` the whole log2|y| is summed (e = 0): for data widened into the
    widest float (float32 into float64) the sum's rounding, about
    ``n * 150 * eps(float64)``, is far below the data's own ``eps``, and two of three
    passes are saved.

    With ``flushed`` (data whose subnormal numbers stay subnormal when widened), a value
    whose logarithm is -inf is counted as a zero (see below).
    """
    y = xp.astype(x, _dtypes.widest_float(xp))
    a = xp.abs(y)
    # Zeros, infinities and NaNs are counted apart and taken as 1 (e = 0, log2(m) = 0).
    a1 = xp.where(xp.isfinite(a) & (a != 0), a, xp.ones_like(a))
    logs = xp.log2(a1)
    if split:
        e = xp.floor(logs)
        # Two divisions by halves of 2**e: XLA rewrites a / b into a * (1 / b), and 1 / 2**e
        # is subnormal, so flushed to zero on the CPU, for e above 126 in float32.
        half = xp.floor(e / 2)
        logs = xp.log2((a1 / (2.0**half)) / (2.0 ** (e - half)))
    zeros = a == 0
    if flushed:
        # bfloat16 widened into float32 (JAX without x64): XLA on the CPU reads a
        # subnormal value as nonzero in one step and as zero in log2, whose -inf made the
        # product NaN. It is counted as the zero the contract lets it be read as.
        lost = logs == -math.inf
        logs = xp.where(lost, xp.zeros_like(logs), logs)
        zeros = zeros | lost
    log_total = rsum(xp, logs, axes, True, y.dtype)
    exponents = rsum(xp, e, axes, True, y.dtype) if split else xp.zeros_like(log_total)

    def count(mask: Array) -> Array:
        return xp.astype(xp.count_nonzero(mask, axis=axes, keepdims=True), y.dtype)

    return (
        log_total,
        exponents,
        count(zeros),
        count(xp.isinf(a)),
        count(xp.isnan(a)),
        count(xp.signbit(y)),
    )


@memo(key=library_key)
def _subnormal_when_widened(xp: Namespace, dtype: Any, wide: Any) -> bool:
    """Whether ``dtype``'s subnormal numbers are still subnormal in float ``wide``
    (bfloat16 in float32; float16 and float32 in float64 are normal)."""
    return _dtypes.smallest_normal(xp, dtype) <= _dtypes.smallest_normal(xp, wide)


def _zero_count(xp: Namespace, x: Array, axes: Axes) -> tuple[Array]:
    """Per slice (keepdims): how many of its values are zeros, in ``xp``'s widest float."""
    count = xp.count_nonzero(x == 0, axis=axes, keepdims=True)
    return (xp.astype(count, _dtypes.widest_float(xp)),)


def _add_parts(xp: Namespace, parts: tuple[Array, ...], axes: Axes) -> tuple[Array, ...]:
    return tuple(rsum(xp, p, axes, True, p.dtype) for p in parts)


def _max(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    return _extreme(x, axes, keepdims, ctx, high=True)


def _min(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    return _extreme(x, axes, keepdims, ctx, high=False)


def _log(xp: Namespace, total: Array) -> Array:
    """log of a sum whose zeros give -inf with a zero (not NaN) derivative."""
    zero = total == 0
    logs = xp.log(xp.where(zero, xp.ones_like(total), total))
    return xp.where(zero, xp.full_like(total, -math.inf), logs)


def _log_sum(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    if _dtypes.is_integer(xp, ctx.dtype):
        # The exact sum (wrapped, as ReduceSum defines it), then its logarithm.
        wide = _dtypes.widest_float(xp)
        total = _wrapped(xp, rsum(xp, x, axes, keepdims, x.dtype), ctx.dtype)
        total = to_float(xp, total, ctx.dtype, wide)
        return float_to_int(xp, xp.log(total), ctx.dtype, x.dtype)
    acc = _dtypes.compute_float(xp, ctx.dtype)
    total = ctx.total(xp, None, x, axes, keepdims, acc)
    if not axes:
        return _cast(xp, xp.log(total), ctx.dtype)
    logs = xp.log(total)
    if _may_overflow(xp, x.dtype, acc):
        # A sum that overflowed on the way: the logarithm of the scaled sum, shifted back.
        def careful() -> Array:
            scaled = ctx.total(xp, scaled_down, x, axes, keepdims, acc)
            # Taken only where the plain sum overflowed, so where |scaled| is far above
            # the smallest normal number. Below it (the slices it is not taken for) the
            # logarithm is of that number: its derivative 1 / scaled would be inf, and
            # the chain rule's 0 * inf NaN, in the branch that is not taken.
            smallest = float(xp.finfo(acc).smallest_normal)
            low = xp.abs(scaled) < smallest
            scaled = xp.where(low, xp.full_like(scaled, smallest), scaled)
            return xp.log(scaled) + _SCALE * math.log(2.0)

        logs = ctx.select(xp, non_finite(xp, total), careful, logs)
    return _cast(xp, logs, ctx.dtype)


def _log_sum_exp(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    xp = ctx.xp
    integer = _dtypes.is_integer(xp, ctx.dtype)
    wide = _dtypes.widest_float(xp) if integer else _dtypes.compute_float(xp, ctx.dtype)
    if integer and axes and x.dtype == ctx.dtype and _beyond_float32(xp, ctx.dtype, wide):
        return _int_log_sum_exp(x, axes, keepdims, ctx)
    y = to_float(xp, x, ctx.dtype, wide) if integer else xp.astype(x, wide, copy=False)
    if not axes:
        r = _copy(xp, y)
    else:
        shifted = functools.partial(_shifted_exps, peak=ctx.peak)
        shift, total = ctx.parts(xp, y, axes, shifted, _merge_shifted, (0.0, 0.0), wide)
        r = _keep(xp, _log(xp, total) + shift, axes, keepdims)
    return float_to_int(xp, r, ctx.dtype, x.dtype) if integer else _cast(xp, r, ctx.dtype)


@memo(key=library_key)
def _beyond_float32(xp: Namespace, dtype: Any, wide: Any) -> bool:
    """Whether integer ``dtype`` has 32 bits and the widest float ``wide`` too, which cannot
    hold all its values: int32 and uint32 where it is float32 (JAX without x64). 64-bit
    integers exist only beside float64, whose step the contract names."""
    return _dtypes.bits(xp, dtype) == 32 and _dtypes.bits(xp, wide) == 32


def _int_log_sum_exp(x: Array, axes: Axes, keepdims: bool, ctx: Context) -> Array:
    """LogSumExp of int32 or uint32 data where the widest float is float32, with every bit
    of the maximum: a float32 step loses its last 7 or 8 (off by up to 128).

    The maximum m is taken in the integer type, and log(sum exp(x - m)) = k + f in float32
    (k whole, 0 <= f < 1; log1p where m occurs once, so that a small f keeps its value).
    The result is what the contract's float64 step gives: m + k, one more where m + k is
    negative and f more than half of float64's spacing there (truncation toward zero),
    and the type's maximum beyond it.
    """
    xp = ctx.xp
    wide = _dtypes.widest_float(xp)
    m = xp.max(x, axis=axes, keepdims=True)
    # Exact where it fits the type; a signed gap beyond it wraps below zero. exp(-128) is
    # 0 in float32: the maximum's own terms (counted apart) and farther ones add nothing.
    gap = m - x
    at_top = gap == 0
    near = (gap > 0) & (gap <= 128)
    terms = xp.exp(-xp.astype(xp.where(near, gap, xp.full_like(gap, 128)), wide))
    rest = rsum(xp, terms, axes, True, wide)
    count = rsum(xp, xp.astype(at_top, wide), axes, True, wide)
    delta = xp.where(count == 1, xp.log1p(rest), xp.log(count + rest))
    whole = xp.floor(delta)
    k = xp.astype(whole, x.dtype)
    high = xp.iinfo(ctx.dtype).max
    over = m > xp.full_like(k, high) - k  # a Python int beyond int32 is no JAX operand
    v = m + xp.where(over, xp.zeros_like(k), k)
    r = xp.where(over, xp.full_like(v, high), v)
    if _dtypes.is_unsigned(xp, ctx.dtype):
        return _keep(xp, r, axes, keepdims)
    # Where v < 0, float64 rounds v + f to v unless f exceeds half its spacing just above
    # v, 2**(e - 53) with 2**e <= |v| - 1 < 2**(e + 1): so where |v| - 1 < 2**(g + 1), g
    # the exponent of f plus 53, compared in integers (|v| - 1 is exact in the type).
    f = delta - whole
    g = xp.floor(xp.log2(xp.where(f > 0, f, xp.ones_like(f)))) + 54
    limit = xp.bitwise_left_shift(xp.ones_like(v), xp.astype(xp.clip(g, 0, 30), v.dtype))
    bump = (v < 0) & (f > 0) & ((g > 30) | (-(v + 1) < limit))
    return _keep(xp, xp.where(bump, v + 1, r), axes, keepdims)


def _shifted_exps(
    xp: Namespace, y: Array, axes: Axes, *, peak: Peak = largest
) -> tuple[Array, Array]:
    """Per slice (keepdims): a shift m and the sum of exp(y - m), m the slice's maximum
    (``peak``'s: a NaN it misses makes the sum NaN all the same).

    The shift keeps exp from overflowing; a slice whose maximum is +-inf or NaN is not
    shifted, which gives +inf, -inf and NaN by IEEE rules.
    """
    m = peak(xp, y, axes)
    shift = xp.where(non_finite(xp, m), xp.zeros_like(m), m)
    return shift, rsum(xp, xp.exp(y - shift), axes, True, y.dtype)


def _merge_shifted(xp: Namespace, parts: tuple[Array, ...], axes: Axes) -> tuple[Array, ...]:
    """Parts' results of :func:`_shifted_exps` brought to the largest shift and summed.

    A part with nothing to add (every value -inf, or no elements) has shift 0, which must
    not set the shift of the others: their terms would underflow against it.
    """
    shifts, totals = parts
    dead = totals == 0
    live = xp.where(dead, xp.full_like(shifts, -math.inf), shifts)
    top = xp.max(live, axis=axes, keepdims=True)
    shift = xp.where(non_finite(xp, top), xp.zeros_like(top), top)
    factors = xp.exp(xp.where(dead, xp.zeros_like(shifts), shifts - shift))
    return shift, _sum_finite_scaled(xp, totals, factors, axes)


def _trunc_div(xp: Namespace, q: Array, rem_nonzero: Array) -> Array:
    # floor(t / n) -> trunc(t / n): add one where the quotient is negative and inexact.
    return xp.where((q < 0) & rem_nonzero, q + 1, q)


def _int_mean(x: Array, axes: Axes, keepdims: bool, ctx: Context, n: Any) -> Array:
    """The exact mean of integers, truncated toward zero, in ``x.dtype``.

    Small types sum exactly in the widest integer. Wide types are split into limbs whose
    sums cannot overflow; the mean is then found by long division limb by limb, so the
    result is exact whatever the sum's size (the mean always fits the type).
    """
    xp = ctx.xp
    if not axes:
        return _copy(xp, x)
    acc = _dtypes.widest_int(xp)
    wide_bits = _dtypes.bits(xp, acc)
    width = _dtypes.bits(xp, ctx.dtype)
    signed = not _dtypes.is_unsigned(xp, ctx.dtype)
    if wide_bits - width >= 24:  # n * 2**width stays below 2**(wide_bits - 1)
        total = rsum(xp, x, axes, keepdims, acc)
        floor = total // n
        result = _trunc_div(xp, floor, total - floor * n != 0) if signed else floor
        return xp.astype(result, x.dtype)
    limb = 16 if wide_bits == 64 else 8
    limbs = functools.partial(_limb_sums, limb=limb, count=width // limb, signed=signed)
    sums = ctx.parts(xp, x, axes, limbs, _add_parts, (0,) * (width // limb), acc)
    carry: Array | int = 0
    quotient: Array | int = 0
    for total in sums:
        value = carry * (1 << limb) + total
        digit = value // n
        carry = value - digit * n
        quotient = quotient * (1 << limb) + digit
    result = _trunc_div(xp, quotient, carry != 0) if signed else quotient
    return xp.astype(_keep(xp, result, axes, keepdims), x.dtype)


def _limb_sums(
    xp: Namespace, x: Array, axes: Axes, *, limb: int, count: int, signed: bool
) -> tuple[Array, ...]:
    """Per slice (keepdims), most significant first: the sums of the ``count`` limbs of
    ``limb`` bits of integer ``x`` (the top one signed for a signed type), in ``xp``'s
    widest integer. Each adds up exactly over parts of the data."""
    acc = _dtypes.widest_int(xp)
    wide = xp.astype(x, acc)  # keeps the bits of uint64/uint32 held in int64/int32
    sums = []
    for j in reversed(range(count)):
        part = xp.bitwise_right_shift(wide, j * limb) if j else wide
        if not (j == count - 1 and signed):
            part = xp.bitwise_and(part, (1 << limb) - 1)
        sums.append(rsum(xp, part, axes, True, acc))
    return tuple(sums)


KERNELS: dict[str, Kernel] = {
    "reduce_sum": _sum,
    "reduce_sum_square": _sum_square,
    "reduce_l1": _l1,
    "reduce_l2": _l2,
    "reduce_mean": _mean,
    "reduce_prod": _prod,
    "reduce_max": _max,
    "reduce_min": _min,
    "reduce_log_sum": _log_sum,
    "reduce_log_sum_exp": _log_sum_exp,
}
