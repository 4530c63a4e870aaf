"""NumPy: its workarounds and accelerators."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import array_api_compat
import numpy as np

from .._agnostic._kernels import (
    _SCALE,
    ScaledSquare,
    Term,
    Total,
    l2_floor,
    magnitude,
    plain_total,
    scaled_down,
    square,
    wide_square,
)
from .._lib._dtypes import is_extension_bfloat16
from .._lib._memo import library_key, memo
from . import _threads
from ._base import (
    ALL_DTYPES,
    ALL_OPS,
    EXTREMES,
    Accelerator,
    Profile,
    namespace_for,
    run_kernel,
)
from ._common import (
    BLOCK,
    MERGES,
    PIECE,
    FixedInfo,
    Shim,
    axis_block_sum,
    blocked_sum,
    every_axis_in_slabs,
    in_pieces,
    isdtype_with_bfloat16,
    keep_freed_pieces,
    least_and_finite,
    log_sum_exp_in_place,
    named,
    numpy_carrier,
    numpy_logical,
    run_careful_later,
    select_when_needed,
    statistics_in_pieces,
)

__all__ = ["PROFILE", "ProductSlices", "guarded", "numpy_quiet", "refuses"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]

_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
_GUARDED = frozenset({"reduce_sum", "reduce_mean", "reduce_l2", "reduce_prod", "reduce_log_sum"})


def recognises(xp: Namespace) -> bool:
    return named(xp, "numpy")


def namespace_of(data: object) -> Namespace | None:
    """array-api-compat's NumPy namespace for an ndarray of any subclass or a NumPy scalar,
    so that :func:`refuses` says why one is refused (array-api-compat does not take
    ``np.matrix`` for an array at all)."""
    if not isinstance(data, (np.ndarray, np.generic)):
        return None
    from array_api_compat import numpy as xp

    return xp


def _ufunc_reduction(ufunc: Any, *, as_bool: bool = False) -> Callable[..., Array]:
    """``np.sum``, ``np.max``, ``np.any``, ... as the ufunc reduction they call, without
    their Python wrappers: the same loop, and 3-4 us less a call (numpy 2.4; a small
    call's overhead is 17-73 us)."""
    if as_bool:

        def logical(x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
            return ufunc.reduce(x, axis=axis, dtype=np.bool_, keepdims=keepdims)

        return logical

    def reduction(
        x: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None
    ) -> Array:
        return ufunc.reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)

    return reduction


def _extreme_reduction(ufunc: Any) -> Callable[..., Array]:
    """Max or Min as the ufunc reduction; float16 through float64 buffers: NumPy's float16
    maximum and minimum loops are not vectorised (float16 (4096, 8192): 185-200 ms, through
    float64 buffers 32-36 ms; numpy 2.4). The same values, on every path: the extreme is
    exact in either type. Every path, accelerated or not, takes float16 this one way, so
    which of two tied zeros (0.0, -0.0) or NaNs comes out never depends on the path."""
    half = np.dtype(np.float16)

    def reduction(x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        if x.dtype == half:
            wide = ufunc.reduce(x, axis=axis, keepdims=keepdims, dtype=np.float64)
            return wide.astype(half)
        return ufunc.reduce(x, axis=axis, keepdims=keepdims)

    return reduction


def _creations(xp: Namespace) -> dict[str, Callable[..., Array]]:
    """``astype``, ``zeros_like``, ``ones_like`` and ``full_like`` as NumPy's own where no
    device is named (array-api-compat's check of the device and, for the ``*_like``, its
    look-up of the namespace cost 1-3 us a call; the kernels make two to four such calls
    in L2 and LogSumExp); with a device, array-api-compat's (array-api-compat 1.16)."""

    def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
        if device is not None:
            return xp.astype(x, dtype, copy=copy, device=device)
        return x.astype(dtype, copy=copy)

    def zeros_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        if device is not None:
            return xp.zeros_like(x, dtype=dtype, device=device)
        return np.zeros_like(x, dtype=dtype)

    def ones_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        if device is not None:
            return xp.ones_like(x, dtype=dtype, device=device)
        return np.ones_like(x, dtype=dtype)

    def full_like(x: Array, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Array:
        if device is not None:
            return xp.full_like(x, fill_value, dtype=dtype, device=device)
        return np.full_like(x, fill_value, dtype=dtype)

    return {
        "astype": astype,
        "zeros_like": zeros_like,
        "ones_like": ones_like,
        "full_like": full_like,
        "__array_namespace_info__": FixedInfo(xp),
    }


def _direct_functions() -> dict[str, Callable[..., Array]]:
    return {
        "sum": _ufunc_reduction(np.add),
        "prod": _ufunc_reduction(np.multiply),
        "max": _extreme_reduction(np.maximum),
        "min": _extreme_reduction(np.minimum),
        "any": _ufunc_reduction(np.logical_or, as_bool=True),
        "all": _ufunc_reduction(np.logical_and, as_bool=True),
    }


@memo(key=library_key)
def _direct(xp: Namespace) -> Namespace:
    """``xp`` with the ufunc reductions in place of NumPy's wrappers: NumPy's own sums."""
    return Shim(xp, **_direct_functions())


@memo(key=library_key)
def _shim(xp: Namespace) -> Namespace:
    # NumPy sums pairwise only along the contiguous trailing run of reduced axes and adds
    # the others term after term (numpy/numpy#9393): see blocked_sum.
    blocked = blocked_sum(_direct(xp))
    functions = {**_direct_functions(), **_creations(xp), "sum": blocked}
    return Shim(xp, **functions, isdtype=isdtype_with_bfloat16(xp))


def _lift(x: Array) -> Array:
    # bfloat16 in float32, big-endian data in native order: see numpy_carrier.
    carrier = numpy_carrier(x.dtype)
    return x if carrier is None else x.astype(carrier)


def refuses(x: Array) -> str | None:
    """Why ``x``, an ndarray or a subclass, is refused: a subclass whose meaning the
    reductions would drop (a mask, matrix semantics, units), or a NumPy scalar. None for
    plain data."""
    if type(x) is np.ndarray or isinstance(x, np.memmap):
        return None
    kind = type(x).__name__
    if isinstance(x, np.generic):
        return (
            f"data must be an array, got the NumPy scalar type {kind}; pass np.asarray(data) "
            "for a 0-D array of its value"
        )
    if isinstance(x, np.ma.MaskedArray):
        return (
            f"data is a {kind}, whose mask anyreduce would ignore; pass data.filled(value) "
            "to give the masked positions a value, or data.compressed() for the unmasked "
            "values alone"
        )
    return (
        f"data of type {kind}, a NumPy array subclass, would lose its meaning; "
        "pass np.asarray(data) to reduce its values as a plain array"
    )


def numpy_quiet() -> Any:
    """NumPy's IEEE warnings off: the contract asks for the values they warn about."""
    return np.errstate(all="ignore")


def _lower(xp: Namespace, result: Array, dtype: Any) -> Array:
    # NumPy reductions to rank 0 return NumPy scalars, not 0-D arrays.
    if isinstance(result, np.generic):
        result = np.asarray(result)
    return result if result.dtype == dtype else result.astype(dtype)


def _eager(x: Array) -> bool:
    return type(x) is np.ndarray


#: The fewest elements of C-ordered data whose few suspect slices ``guarded`` computes
#: again alone (``CarefulLater``), by operator: that costs 30-60 us a call, more than the
#: careful form of every slice of smaller data. Float32, one NaN (one infinity for L2) in
#: a row or a column, over the last and first axis, careful form everywhere -> those
#: slices alone, by turns: Sum (256, 362) 76-78 -> 90-111 us, (362, 362) 113-127 ->
#: 100-146, (362, 512) 172-192 -> 110-149; LogSum alike; L2 (256, 256) 371-392 ->
#: 137-165, (362, 512) 1171-1197 -> 235-293; Prod (256, 256) 1054-1090 -> 186-205.
LATER_ELEMENTS = {
    "reduce_sum": 2**17,
    "reduce_mean": 2**17,
    "reduce_log_sum": 2**17,
    "reduce_l2": 2**16,
    "reduce_prod": 2**16,
}


def guarded(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array:
    """The generic kernel, its careful form computed only where some slice needs it."""
    return run_kernel(profile, namespace_for(x), op, x, axes, keepdims, select=select_when_needed)


def _guarded_later(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array:
    """:func:`guarded`; on C-ordered data of ``LATER_ELEMENTS[op]`` or more, a few suspect
    slices computed again alone (NumPy sums each row, or each column over the first axis,
    in the same order whatever the others: see ``CarefulLater.finish``)."""
    if x.size >= LATER_ELEMENTS[op] and x.flags.c_contiguous:
        return run_careful_later(profile, op, x, axes, keepdims)
    return guarded(op, x, axes, keepdims, profile)


# --- small data, in a few steps ------------------------------------------------------------

#: The most elements ``small-in-few-steps`` takes (64 KiB of float32): data whose
#: reduction costs a few microseconds, less than the generic kernel's steps around it.
SMALL_ELEMENTS = 2**14
#: The most elements of float16 it takes: below ``widened-in-slabs``' smallest (2**18),
#: where nothing else covers its L2, SumSquare and LogSumExp over trailing axes.
SMALL_HALF_ELEMENTS = 2**18 - 1


def _one_sum(x: Array, axes: Axes) -> bool:
    """Whether the NumPy profile's sum (``blocked_sum``) adds ``axes`` of ``x`` (sorted, as
    normalised) in one ufunc reduction: a trailing run of axes, or one axis of at most
    ``BLOCK`` elements."""
    return axes[0] == x.ndim - len(axes) or (len(axes) == 1 and x.shape[axes[0]] <= BLOCK)


#: The numpy module, typed loosely: its stubs give ufunc reductions no ``keepdims`` of
#: type bool.
_NUMPY: Any = np


#: Results of at most this many values are tested in Python: ``tolist`` and the built-in
#: ``sum`` of 6 values take 0.3-0.45 us, NumPy's reduction 1.0-1.5 us; of 64, both 1 us.
FEW_VALUES = 32


def _finite(r: Array) -> bool:
    """Whether every value of ``r`` is finite (their sum is: a sum that overflows says no,
    which only sends the call to the generic kernel)."""
    if r.size <= FEW_VALUES:
        return math.isfinite(sum(r.ravel().tolist()))
    return math.isfinite(_NUMPY.add.reduce(r, axis=None))


def _least_and_finite(r: Array, *, magnitude: bool = False) -> tuple[Any, bool]:
    """The smallest value of ``r`` (with ``magnitude``, of its absolute values; any value
    where one is NaN), and whether every value is finite (as :func:`_finite`)."""
    if r.size <= FEW_VALUES:
        return least_and_finite(r.ravel().tolist(), magnitude=magnitude)
    np = _NUMPY
    least = np.minimum.reduce(np.abs(r) if magnitude else r, axis=None)
    return least, math.isfinite(np.add.reduce(r, axis=None))


def _plain(total: Array, x: Array) -> bool:
    """Whether the generic kernel takes sum ``total`` of ``x`` as it is: where it is
    finite, or always where it was widened (float16 in float64, whose sums cannot
    overflow: the kernel has no careful form for them)."""
    return total.dtype.type is not x.dtype.type or _finite(total)


def _small_sum(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    total = np.add.reduce(x, axis=axes, dtype=acc, keepdims=keepdims)
    return total if _plain(total, x) else None


def _small_mean(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    total = np.add.reduce(x, axis=axes, dtype=acc, keepdims=keepdims)
    mean = total / math.prod([x.shape[a] for a in axes])
    return mean if _plain(mean, x) else None


def _squares(np: Any, x: Array, acc: Any) -> Array:
    """The squares of ``x`` in ``acc``: a widened copy squared in place. One float64
    temporary in place of two: half the memory, and float16 (256, 512) L2 173 -> 164-165
    us a call (before the dispatch kept freed temporaries, two of 1 MiB were faulted in
    anew each call: about 1,000 us)."""
    y = x.astype(acc, copy=False)
    return np.multiply(y, y, out=y) if y is not x else np.multiply(y, y)


def _small_sum_square(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    np = _NUMPY
    return np.add.reduce(_squares(np, x, acc), axis=axes, dtype=acc, keepdims=keepdims)


def _small_l1(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    np = _NUMPY
    return np.add.reduce(np.abs(x), axis=axes, dtype=acc, keepdims=keepdims)


@memo()
def _l2_floor(dtype: Any) -> Any:
    """The generic L2's floor (:func:`l2_floor`) in ``dtype``, as NumPy compares a float32
    array with a Python float."""
    return dtype.type(l2_floor(_NUMPY.finfo(dtype)))


def _small_l2(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    total = np.add.reduce(_squares(np, x, acc), axis=axes, dtype=acc, keepdims=keepdims)
    # Neither infinite nor below the floor (nor 0): the generic kernel's plain root.
    least, finite = _least_and_finite(total)
    if least >= _l2_floor(total.dtype) and finite:
        return np.sqrt(total)
    return None


def _small_prod(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    product = np.multiply.reduce(x, axis=axes, dtype=acc, keepdims=keepdims)
    # Finite and not 0: the generic kernel's plain product.
    least, finite = _least_and_finite(product, magnitude=True)
    if least > 0 and finite:
        return product
    return None


# Float16 through float64 buffers, as the profile's own max and min take it (which of two
# tied zeros comes out depends on the loop).
def _small_max(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    np = _NUMPY
    return np.maximum.reduce(x, axis=axes, keepdims=keepdims, dtype=acc)


def _small_min(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    np = _NUMPY
    return np.minimum.reduce(x, axis=axes, keepdims=keepdims, dtype=acc)


def _small_log_sum(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    total = np.add.reduce(x, axis=axes, dtype=acc, keepdims=keepdims)
    return np.log(total) if _plain(total, x) else None


def _small_log_sum_exp(x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    np = _NUMPY
    y = x.astype(acc, copy=False)
    shift = np.maximum.reduce(y, axis=axes, keepdims=True)
    if not _finite(shift):
        return None
    # The largest term is exp(0) = 1: the total is at least 1, never 0. One temporary:
    # a widened copy is shifted in place (see _squares).
    terms = np.subtract(y, shift, out=y) if y is not x else y - shift
    total = np.add.reduce(np.exp(terms, out=terms), axis=axes, dtype=acc, keepdims=True)
    result = np.log(total) + shift
    return result if keepdims else np.squeeze(result, axis=axes)


_SMALL_KERNELS: dict[str, Callable[[Array, Axes, bool, Any], Array | None]] = {
    "reduce_sum": _small_sum,
    "reduce_mean": _small_mean,
    "reduce_sum_square": _small_sum_square,
    "reduce_l1": _small_l1,
    "reduce_l2": _small_l2,
    "reduce_prod": _small_prod,
    "reduce_max": _small_max,
    "reduce_min": _small_min,
    "reduce_log_sum": _small_log_sum,
    "reduce_log_sum_exp": _small_log_sum_exp,
}


def _quietly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with NumPy's IEEE warnings off. NumPy 2 keeps its error state in a context
    variable, which ``np.errstate`` as a decorator sets and resets within each call: 0.45
    us a call, against 0.88 for a ``with`` block (an object made and entered each time).
    NumPy 1's decorator keeps the state it replaced on its one object, which two threads
    would overwrite: there, a ``with`` block each call."""
    if int(np.__version__.split(".")[0]) >= 2:
        return np.errstate(all="ignore")(fn)

    @functools.wraps(fn)
    def quiet(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args)

    return quiet


@_quietly
def _small(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """The generic kernel's steps on clean results, and nothing around them: a result the
    kernel would take the careful form of (an infinity, NaN, a product or an L2 total of 0
    or near it) declines, and the generic kernel takes the call. NumPy's IEEE warnings
    are off (:func:`_quietly`)."""
    dtype = x.dtype
    half = dtype.type is np.float16
    if x.size > (SMALL_HALF_ELEMENTS if half else SMALL_ELEMENTS):
        return None
    if not axes or not dtype.isnative or not _one_sum(x, axes):
        return None
    if not half:
        return _SMALL_KERNELS[op](x, axes, keepdims, dtype)
    # float16 adds up in float64 (compute_float), and the kernel casts back.
    result = _SMALL_KERNELS[op](x, axes, keepdims, np.dtype(np.float64))
    return result if result is None else result.astype(dtype)


_SMALL = Accelerator(
    name="small-in-few-steps",
    ops=ALL_OPS,
    dtypes=frozenset({"float16", "float32", "float64"}),
    covers=(
        "data of native byte order and at most 2**14 elements (float16: fewer than 2**18), "
        "reduced over a trailing run of axes or over one axis of at most 16 elements; "
        "float16 added up (and its Max and Min taken) in float64, as the kernel does, its "
        "widened copy squared or shifted in place; results the generic kernel takes as "
        "they are (finite; L2 totals above its floor, products not 0)"
    ),
    earned=(
        "float32 (3, 2, 2) over axis 1, a call, by turns: Sum 10.1-10.3 -> 5.4-5.5 us, "
        "L2 19.3-19.4 -> 7.0, LogSumExp 19.8-19.9 -> 8.9-9.0 (np.sum 1.8); (64, 256) over "
        "the last axis: L2 26.1-26.2 -> 14.0-14.1, LogSumExp 48.4-49.0 -> 36.8-37.1; "
        "float16, by turns with it left out: (3, 2, 2) Sum 11.8-13.5 -> 8.8-8.9 us, L2 "
        "18.6-20.5 -> 12.4, LogSumExp 24.1-25.9 -> 13.8-13.9; (64, 256) L2 42.2-42.3 -> "
        "33.0-33.2, LogSumExp 73.4-74.3 -> 58.9-59.3; results of at most 32 values "
        "tested in Python (FEW_VALUES), by turns: float32 (3, 2, 2) Sum 6.9-7.0 -> 6.3-6.4 "
        "us, L2 8.9 -> 7.9, Prod 8.2 -> 6.7-6.8 (64 values: 0.1-0.5 us slower); float16 "
        "below 2**18 with one temporary, separate processes by turns with the code before: "
        "(256, 512) L2 917-958 -> 173-179 us, LogSumExp 1364-1447 -> 344-345; with the "
        "dispatch's keep_freed_pieces, by turns with the 2**14 limit: (256, 512) L2 191 "
        "-> 163, LogSumExp 371 -> 337"
    ),
    exact=True,
    run=_small,
)


ACCELERATORS = (
    Accelerator(
        name="careful-when-needed",
        ops=_GUARDED,
        dtypes=_FLOATS,
        covers=(
            "any layout; the careful form only for data with a suspect slice; on C-ordered "
            "data of 2**16 (L2, Prod) or 2**17 elements or more with a few suspect rows or "
            "columns (a 16th at most), for those alone (CarefulLater)"
        ),
        earned=(
            "float32 (4096, 8192) Sum over the last axis: the careful form computed always "
            "doubles the time of np.sum; here one isfinite test on the result. Float32 "
            "(512, 512) L2 with an infinite row: 1646 -> 329 us (clean 226)"
        ),
        exact=True,
        run=_guarded_later,
    ),
)


# --- sums over the first axis, one pass over the data --------------------------------------

#: Elements of a tile, at most: the term of whole blocks of 16 rows (or of a run of their
#: columns) is written into a buffer of this size, 1 MiB of float32, and summed there. On
#: float32 (4096, 8192), two threads, SumSquare over the first axis took 48.8, 19.5, 14.5,
#: 12.7 and 12.0 ms with tiles of 2**14, 2**16, 2**17, 2**18 and 2**20 elements.
_TILE = 2**18

#: The fewest elements the one-pass totals take: on float32 (1024, 1024) they hold
#: 13-19% of the input where the terms' temporary held 100%, in 0.9-1.2x the time; on
#: fewer elements they cost more than that (float32 (512, 512) L2: 1.2-1.6x the time,
#: for half the temporary). Sum, Mean and LogSum, whose plain totals make no temporary,
#: take them from ``_threads.LARGE`` elements (Sum over (1024, 1024): 1.3x the time).
ONE_PASS_ELEMENTS = _threads.SLAB_ELEMENTS

#: The fewest elements of a tile: 512 KiB of float32. On float32 (1024, 2048) tiles of
#: 2**15 elements (a 64th of the data) took 2.0-3.3 ms for L2 over every axis and
#: 1.6-2.3 ms over the first; tiles of 2**17, 0.9-1.5 and 0.8-1.4 ms (same run).
_SMALLEST_TILE = 2**17


def _tile(y: Array, share: int) -> int:
    """Elements of a tile of ``y``: a ``share`` of the data, at least ``_SMALLEST_TILE``
    and at most ``_TILE``."""
    return min(_TILE, max(_SMALLEST_TILE, int(y.size) // share))


class _ShiftedExp:
    """LogSumExp's term, ``exp(y - shift)`` with ``shift`` per slice (keepdims), as the
    generic kernel takes it (``anyreduce._agnostic._kernels._shifted_exps``)."""

    def __init__(self, shift: Array) -> None:
        self.shift = shift

    def __call__(self, xp: Namespace, y: Array) -> Array:
        return xp.exp(y - self.shift)


def _in_place_term(term: Term) -> Callable[[Array, Array, tuple[Array, ...]], Array]:
    """``term`` (one of ``_ONE_PASS_TERMS``, a :class:`_ShiftedExp` or L2's
    ``ScaledSquare``) as the NumPy ufuncs it calls, writing into ``out`` (of the dtype the
    term's values are summed in): the same loops, the same values. The third argument is
    the part's share of the term's values per slice (:func:`_per_slice`)."""
    if isinstance(term, _ShiftedExp):

        def shifted(part: Array, out: Array, at: tuple[Array, ...]) -> Array:
            np.subtract(part, at[0], out=out)
            return np.exp(out, out=out)

        return shifted
    if isinstance(term, ScaledSquare):

        def scaled(part: Array, out: Array, at: tuple[Array, ...]) -> Array:
            np.divide(part, at[0], out=out)
            np.divide(out, at[1], out=out)
            return np.multiply(out, out, out=out)

        return scaled
    if term is square:
        return lambda part, out, _: np.multiply(part, part, out=out)
    if term is magnitude:
        return lambda part, out, _: np.absolute(part, out=out)
    if term is scaled_down:
        return lambda part, out, _: np.multiply(part, 2.0**-_SCALE, out=out)
    # wide_square: float32 values squared in float64, as astype then multiply gives them
    return lambda part, out, _: np.multiply(part, part, out=out, dtype=np.float64)


def _per_slice(term: Term | None, shape: tuple[int, ...]) -> tuple[Array, ...]:
    """The values per slice a term holds (the shift of a :class:`_ShiftedExp`, the halves
    of a ``ScaledSquare``'s scale) in ``shape``, that of the sums of the data as the
    one-pass totals view it; none for other terms."""
    if isinstance(term, _ShiftedExp):
        return (term.shift.reshape(shape),)
    if isinstance(term, ScaledSquare):
        return (term.low.reshape(shape), term.high.reshape(shape))
    return ()


def _integer_terms(op: str, x: Array) -> bool:
    """Whether the one-pass totals take integer ``x`` for ``op``: the terms of SumSquare
    and signed L1 (the others' kernels take no total, unsigned L1 no term) of 32- and
    64-bit integers of at least 2**21 elements. (4096, 8192) over the first axis, same run:
    int32 18-27 -> 11-12 ms, int64 33-39 -> 20-22; over the last axis 6% of the input in
    temporaries -> 2%. Below, tiles cost more than they keep: int32 (1024, 1024)
    0.21-0.35 -> 0.29-0.57 ms, int8 (2048, 2048) 0.65-0.83 -> 0.71-1.42 ms."""
    signed = x.dtype.kind == "i"
    return (
        (op == "reduce_sum_square" or (op == "reduce_l1" and signed))
        and x.dtype.itemsize >= 4
        and x.size >= _threads.LARGE
    )


# The float32 and float64 data the one-pass totals take, and the integers of
# :func:`_integer_terms`.
_ONE_PASS_DTYPES = frozenset({"float32", "float64", "int32", "uint32", "int64", "uint64"})

# The terms the one-pass totals write into a buffer; the careful forms' (``scaled_down``,
# ``wide_square``, and float64 L2's ``ScaledSquare``) so that a slice that needs one makes
# no temporary of the data's size. Float64 (4096, 8192) L2 holding an infinity or a value
# whose square overflows, by turns: 200% of the input in the scaled squares -> 1.7%,
# 304-353 -> 99-128 ms (24-29 ms without it).
_ONE_PASS_TERMS = (None, square, magnitude, scaled_down, wide_square)


def _plain_data(y: Array, dtype: Any) -> bool:
    """Whether ``y`` is C-ordered float32, float64 or integer ndarray data in native byte
    order, summed in its own dtype (integers: wrapped in it, so in any order)."""
    kind = y.dtype.kind
    return (
        type(y) is np.ndarray
        and y.dtype == dtype
        and (kind in "iu" or (kind == "f" and y.dtype.itemsize >= 4))
        and y.dtype.isnative
        and y.flags.c_contiguous
    )


def _first_axis(y: Array, axes: Axes, dtype: Any) -> bool:
    """Whether ``y`` is :func:`_plain_data` of at least 32 rows summed over its first
    axis only."""
    return axes == (0,) and y.ndim >= 2 and y.shape[0] >= 2 * BLOCK and _plain_data(y, dtype)


def _every_axis_in_one(y: Array, axes: Axes, dtype: Any) -> bool:
    """Whether ``y`` is float :func:`_plain_data` summed over every axis. NumPy sums
    integers in one loop, not pairwise: ``every-axis-in-slabs`` took int32 (2048, 2048) L1
    in 1.36-1.42 ms, the pairwise pieces in 1.41-1.93."""
    return len(axes) == y.ndim and y.dtype.kind == "f" and _plain_data(y, dtype)


#: The shortest row (run of reduced elements) :func:`_last_axes` takes. The kernel runs
#: once, and its element-wise steps on the result (L2's root, the range tests) make
#: temporaries of the result's size: float32 (1048576, 3) L2 over the last axis held
#: 117% of the input so, 72% in ``threads``' slabs.
_LAST_AXES_ROW = 64


def _last_axes(y: Array, axes: Axes, dtype: Any) -> bool:
    """Whether ``y`` is :func:`_plain_data` summed over a trailing run of its axes
    that leaves at least one axis, in rows of at least ``_LAST_AXES_ROW`` elements."""
    k = y.ndim - len(axes)
    return (
        k > 0
        and axes == tuple(range(k, y.ndim))
        and math.prod(y.shape[k:]) >= _LAST_AXES_ROW
        and _plain_data(y, dtype)
    )


def _last_axes_total(
    xp: Namespace, term: Term | None, y: Array, axes: Axes, keepdims: bool, dtype: Any
) -> Array:
    """The sum of ``term`` over the trailing ``axes`` of ``y``: NumPy sums each row
    (the run of those axes) pairwise by itself, so rows are summed a tile at a time, the
    term of a tile's rows written into a buffer that stays in the cache, on pool threads
    (jobs of consecutive rows, fixed by the shape alone)."""
    reduced = len(axes)
    kept = y.shape[: y.ndim - reduced]
    rows = math.prod(kept)
    width = y.size // rows
    flat = y.reshape(rows, width)
    out = np.empty(rows, dtype)
    apply = None if term is None else _in_place_term(term)
    per_slice = _per_slice(term, (rows, 1))
    # Rows a tile holds (one row, where it is longer); without a term there is no buffer
    # to keep in the cache, and a tile is a job's slab. A buffer takes the bytes of a tile
    # of the data, also where its terms are wider (float32 squares in float64).
    tile = _threads.SLAB_ELEMENTS if apply is None else _tile(y, 16) * y.itemsize // dtype.itemsize
    group = max(1, tile // width)

    def job(bound: tuple[int, int]) -> None:
        start, stop = bound
        buffer = np.empty(0 if apply is None else min(group, stop - start) * width, dtype)
        with numpy_quiet():  # a pool thread has NumPy's default error state
            for first in range(start, stop, group):
                last = min(first + group, stop)
                part = flat[first:last]
                if apply is not None:
                    at = tuple(values[first:last] for values in per_slice)
                    part = apply(part, buffer[: part.size].reshape(part.shape), at)
                np.add.reduce(part, axis=1, dtype=dtype, out=out[first:last])

    per_job = group * max(1, _threads.SLAB_ELEMENTS // (group * width))
    bounds = [(r, min(r + per_job, rows)) for r in range(0, rows, per_job)]
    _threads.in_jobs(job, bounds, 1)
    return out.reshape(kept + (1,) * reduced if keepdims else kept)


def _every_axis_total(
    xp: Namespace,
    term: Term | None,
    y: Array,
    axes: Axes,
    keepdims: bool,
    dtype: Any,
    noted: dict[str, Any] | None = None,
) -> Array:
    """The sum of ``term`` over every axis of ``y``: NumPy sums C-ordered data over every
    axis pairwise, as one run; the pieces of that pairwise sum of at most a tile's
    elements are summed alone on pool threads, each term written into a fresh tile, and
    their sums added as NumPy adds its halves.

    With ``noted`` (one call's notes), the plain total notes its pieces' sums, and the
    careful total of the same data (the terms scaled by 2**-64) is taken from the pieces
    whose plain sums are not finite where those decide it (:func:`_decided_by`)."""
    apply = None if term is None else _in_place_term(term)
    per_slice = _per_slice(term, ())

    def terms(piece: Array) -> Array:
        return piece if apply is None else apply(piece, np.empty(piece.shape, dtype), per_slice)

    tile = _tile(y, 64)
    shape = (1,) * y.ndim if keepdims else ()
    if term is scaled_down and noted is not None and noted.get("data") is y:
        decided = _decided_by(y, noted["sums"], terms, tile)
        if decided is not None:
            return np.asarray(decided, dtype=dtype).reshape(shape)
    sums: list[Any] = []
    total = _pairwise_sum(y, terms, tile, sums)
    if total is None:  # a NaN another order might give with another sign: the kernel's own
        return plain_total(xp, term, y, axes, keepdims, dtype)
    if term is None and noted is not None:
        noted.update(data=y, sums=sums)
    return np.asarray(total, dtype=dtype).reshape(shape)


def _decided_by(
    y: Array, plain: list[Any], terms: Callable[[Array], Array], elements: int
) -> Any | None:
    """The sum over every axis of ``terms(y)``, terms that cannot overflow (the data scaled
    by 2**-64), where the pieces whose ``plain`` sums are not finite decide it: the only
    pieces that can hold a NaN or an infinity. Their terms' sums, taken as the whole sum
    takes them, are the sum's if one is NaN, or two are infinities of both signs (the
    NaN, where every NaN the additions can meet has one bit pattern: :func:`_one_nan`), or
    some are infinities of one sign: the other pieces' sums are finite, and an addition
    keeps the NaN or the infinity. None otherwise (every piece is summed). Float32
    (4096, 8192) Sum over every axis holding a NaN: 20-21 ms for both passes, 8 clean."""
    leaves = _leaves(_pairwise_tree(0, y.size, max(elements, 128)))
    picked = [bound for bound, s in zip(leaves, plain, strict=True) if not np.isfinite(s)]
    if not picked:
        return None

    def piece_sum(piece: Array) -> Any:
        with numpy_quiet():  # a pool thread has NumPy's default error state
            return np.add.reduce(terms(piece))

    sums = np.asarray(_threads.flat_pieces(y, picked, piece_sum))
    nan, high, low = np.isnan(sums), sums == np.inf, sums == -np.inf
    if nan.any() or (high.any() and low.any()):
        if not _one_nan(sums):
            return None
        with numpy_quiet():
            return sums[nan][0] if nan.any() else sums.dtype.type(np.inf) + sums.dtype.type(-np.inf)
    if high.any() or low.any():
        return sums[high | low][0]
    return None


def _first_axis_total(
    xp: Namespace, term: Term | None, y: Array, axes: Axes, keepdims: bool, dtype: Any
) -> Array:
    """The sum of ``term`` over the first axis of the data :func:`_first_axis` accepts.

    The blocked sum (``axis_block_sum``) first adds the terms of each 16 rows, row after
    row; that level is taken tile by tile, each tile's terms written into a small buffer
    that stays in the cache, on pool threads (jobs of consecutive whole blocks of rows,
    fixed by the shape alone). The other levels, a sixteenth of the data, and the rows
    after the last whole block are summed as the blocked sum sums them.
    """
    rows = y.shape[0]
    width = y.size // rows
    flat = y.reshape(rows, width)
    blocks = rows // BLOCK
    # A tile's runs of columns are of equal length. A buffer takes the bytes of a tile of
    # the data, also where its terms are wider (float32 squares in float64): float32
    # (2048, 4096) L2 with a row whose squares overflow held 12.5% + 3.5% a thread.
    tile = _tile(y, 64) * y.itemsize // dtype.itemsize
    runs = -(-width // (tile // BLOCK))
    columns = -(-width // runs)
    group = max(1, tile // (BLOCK * columns))  # blocks of rows a tile holds
    level = np.empty((blocks, width), dtype)
    apply = None if term is None else _in_place_term(term)
    per_slice = _per_slice(term, (1, width))

    def job(bound: tuple[int, int]) -> None:
        start, stop = bound
        buffer = None if apply is None else np.empty(group * BLOCK * columns, dtype)
        with numpy_quiet():  # a pool thread has NumPy's default error state
            tiles(start, stop, buffer)

    def tiles(start: int, stop: int, buffer: Array) -> None:
        for first in range(start, stop, group):
            last = min(first + group, stop)
            for left in range(0, width, columns):
                right = min(left + columns, width)
                part = flat[first * BLOCK : last * BLOCK, left:right]
                if apply is not None:
                    at = tuple(values[:, left:right] for values in per_slice)
                    part = apply(part, buffer[: part.size].reshape(part.shape), at)
                np.add.reduce(
                    part.reshape(last - first, BLOCK, right - left),
                    axis=1,
                    dtype=dtype,
                    out=level[first:last, left:right],
                )

    per_job = max(1, _threads.SLAB_ELEMENTS // (BLOCK * width))
    bounds = [(b, min(b + per_job, blocks)) for b in range(0, blocks, per_job)]
    _threads.in_jobs(job, bounds, 1)
    base = _direct(xp)
    total = axis_block_sum(base, level, 0, dtype)
    if rows % BLOCK:
        tail = flat[blocks * BLOCK :]
        tail = tail if apply is None else apply(tail, np.empty(tail.shape, dtype), per_slice)
        total = total + base.sum(tail, axis=0, keepdims=True, dtype=dtype)
    return total.reshape((1,) * keepdims + tuple(y.shape[1:]))


def _in_one_pass(
    layout: Callable[[Array, Axes, Any], bool], one_pass: Total
) -> Callable[..., Array | None]:
    """An accelerator's ``run``: the generic kernel for data in ``layout``, its plain
    totals taken by ``one_pass`` (:func:`plain_total` bit for bit, in one pass over the
    data) and the careful form only where some slice needs it."""

    def total_noting(noted: dict[str, Any]) -> Total:
        def total(
            xp: Namespace, term: Term | None, y: Array, axes: Axes, keepdims: bool, dtype: Any
        ) -> Array:
            if term is wide_square:  # float32 data's squares, summed in float64
                ours = y.dtype == np.float32 and dtype == np.float64 and layout(y, axes, y.dtype)
            else:
                ours = (term in _ONE_PASS_TERMS or isinstance(term, ScaledSquare)) and layout(
                    y, axes, dtype
                )
                ours = ours and (term is not None or y.size >= _threads.LARGE)
            if not ours:
                return plain_total(xp, term, y, axes, keepdims, dtype)
            if one_pass is _every_axis_total:
                return _every_axis_total(xp, term, y, axes, keepdims, dtype, noted)
            return one_pass(xp, term, y, axes, keepdims, dtype)

        return total

    def run(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
        if math.prod(x.shape) < ONE_PASS_ELEMENTS or not layout(x, axes, x.dtype):
            return None
        if x.dtype.kind in "iu" and not _integer_terms(op, x):
            return None
        # The notes of this call alone.
        return run_careful_later(profile, op, x, axes, keepdims, total_noting({}))

    return run


_FIRST_AXIS = Accelerator(
    name="first-axis-in-one-pass",
    ops=frozenset(
        {"reduce_sum", "reduce_mean", "reduce_log_sum"}
        | {"reduce_sum_square", "reduce_l1", "reduce_l2"}
    ),
    dtypes=_ONE_PASS_DTYPES,
    covers=(
        "C-ordered ndarrays in native byte order of at least 2**20 elements (the plain "
        "totals of Sum, Mean and LogSum: 2**21) and 32 rows, reduced over the first axis "
        "alone: the blocked sum's first level taken tile by tile, the term (x**2, |x|) in "
        "a buffer of a 64th of the data, 2**17 to 2**18 elements, on pool threads; "
        "32- and 64-bit integers: SumSquare and signed L1, from 2**21 elements"
    ),
    earned=(
        "float32 (4096, 8192) over the first axis, same run: SumSquare 31.0 -> 11.9 ms, "
        "L1 23.4 -> 10.2, L2 32.5 -> 11.1 (np.einsum 13.7); beside two spinning "
        "processes SumSquare 56-64 -> 20-21 ms, Sum 15-17 -> 12-16. Float32 (1024, 1024) "
        "L2: 107% of the input in temporaries -> 19%"
    ),
    exact=True,
    run=_in_one_pass(_first_axis, _first_axis_total),
    min_elements=ONE_PASS_ELEMENTS,
)

_EVERY_AXIS_IN_ONE_PASS = Accelerator(
    name="every-axis-in-one-pass",
    ops=_FIRST_AXIS.ops,
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "C-ordered ndarrays in native byte order of at least 2**20 elements (the plain "
        "totals of Sum, Mean and LogSum: 2**21) reduced over every axis: the pieces of "
        "NumPy's pairwise sum of a 64th of the data, 2**17 to 2**18 elements, each term "
        "(x**2, |x|) in a tile of its own, summed on pool threads and added as NumPy adds "
        "its halves; a careful total that the pieces whose plain sums are not finite decide "
        "(a NaN, infinities) taken from those alone"
    ),
    earned=(
        "float32 (4096, 8192), every axis, same run: Sum, Mean and LogSum 12.5 -> 8.1 ms "
        "(NumPy's own sum runs on one thread); SumSquare, L1 and L2 as fast as "
        "every-axis-in-slabs (13.0-14.4 ms) and bit for bit the generic kernel, where "
        "that one is held to the accuracy bound. Float32 (1024, 1024) L2: 100% of the "
        "input in temporaries -> 13%. Holding one NaN, Sum and Mean 21.7-22.2 -> 8.4-8.7 ms"
    ),
    exact=True,
    run=_in_one_pass(_every_axis_in_one, _every_axis_total),
    min_elements=ONE_PASS_ELEMENTS,
)


_LAST_AXES_IN_ONE_PASS = Accelerator(
    name="last-axes-in-one-pass",
    ops=_FIRST_AXIS.ops,
    dtypes=_ONE_PASS_DTYPES,
    covers=(
        "C-ordered ndarrays in native byte order of at least 2**20 elements (the plain "
        "totals of Sum, Mean and LogSum: 2**21) reduced over a trailing run of axes that "
        "leaves one, in rows of 64 elements or more: rows a tile at a time, each tile's "
        "term (x**2, |x|) in a buffer of a 16th of the data, 2**17 to 2**18 elements, "
        "summed on pool threads; the kernel itself runs once, where ``threads`` runs it "
        "for each slab; 32- and 64-bit integers: SumSquare and signed L1, from 2**21 "
        "elements"
    ),
    earned=(
        "float32 (4096, 8192) over the last axis, medians of 25 in one run: idle SumSquare "
        "22.9 -> 15.3 ms, L2 19.2 -> 16.6 (np.einsum 17.0), Sum, Mean and LogSum "
        "10.9-11.2 -> 9.4-9.6; beside two spinning processes SumSquare 40.5 -> 30.9, L2 "
        "42.9 -> 28.8 (np.einsum 30.6), Sum 18.0 -> 15.2; PyTorch's through NumPy alike. "
        "Each slab's temporary was 4 MiB. Float32 (1024, 1024) L2: 100% of the input in "
        "temporaries -> 13%"
    ),
    exact=True,
    run=_in_one_pass(_last_axes, _last_axes_total),
    min_elements=ONE_PASS_ELEMENTS,
)

# The layouts of the one-pass totals, with the total of each.
_ONE_PASS_LAYOUTS = (
    (_first_axis, _first_axis_total),
    (_every_axis_in_one, _every_axis_total),
    (_last_axes, _last_axes_total),
)


def _threaded(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    def slab(part: Array) -> Array:
        from . import reduce

        return reduce(op, part, axes, keepdims, array_api_compat.array_namespace(part))

    run = 1
    if numpy_carrier(x.dtype) is not None:
        # Each slab is lifted into its carrier (a copy), and an operator's temporaries
        # are the lifted slab's size: |x| (L1) the same again, the careful product's
        # statistics more. Runs of columns of CARRIED_RUN: see there.
        elements = _carried_elements(op)
        run = CARRIED_RUN
    else:
        if op in _NO_TEMPORARY:
            # float16 sums over a leading axis hold (rows / 16) x run partial sums in
            # float64 (blocked_sum): half the run keeps them within the float32 slab's bytes.
            small = x.dtype.kind == "f" and x.itemsize < 4
            run = _threads.WIDE_RUN // 2 if small else _threads.WIDE_RUN
        elements = _extreme_slab(math.prod(x.shape)) if op in EXTREMES else _threads.SLAB_ELEMENTS
    return _threads.split(x, axes, keepdims, slab, run=run, elements=elements)


#: Elements of a slab of data held in a carrier (ml_dtypes' bfloat16 in float32, data in
#: the other byte order in native order), which the kernel lifts slab by slab: 2 MiB of
#: float32, a fraction of that for operators with temporaries (``_CARRIED_SHARE``).
#: bfloat16 (4096, 8192) on two threads, Sum over the last axis: slabs of 2**20
#: elements held 12.7% of the input and took 13-14 ms; of 2**19, 6.5% and 17-20 ms; of
#: 2**17, 1.9% and 52-54 ms. Prod over the last axis held 10.0% with slabs of 2**18,
#: 8.5% with slabs of 2**17.
CARRIED_ELEMENTS = 2**19
_CARRIED_SHARE = {"reduce_l1": 2, "reduce_prod": 4}

#: Positions of a kept axis that follows a reduced axis (columns, over the first axis)
#: a slab of carried data holds at least. NumPy's loops take the last few columns of a
#: run apart from the others, and a NaN met there may come out with the other sign:
#: bfloat16 (131079, 17) with NaN and infinities, Sum over the first axis in slabs of 4
#: columns, one NaN of 17 came out with the other sign.
CARRIED_RUN = 64


def _carried_elements(op: str) -> int:
    """Elements of a slab of carried data for ``op``: see ``CARRIED_ELEMENTS``."""
    return CARRIED_ELEMENTS // _CARRIED_SHARE.get(op, 1)


def _extreme_slab(size: int) -> int:
    """Elements of a Max or Min slab of data of ``size`` elements: about eight slabs of
    2**20 to 2**22 elements. Max and Min hold nothing but their result, so slabs of up to
    four times the size pay the kernel's own cost less often: float32 (4096, 8192) over
    the last axis, medians of 23 in one run: 9.3 -> 8.1 ms idle, 22.0 -> 16.5 beside two
    spinning processes (np.maximum.reduce on one thread 12.5, 24.1)."""
    return min(4 * _threads.SLAB_ELEMENTS, max(_threads.SLAB_ELEMENTS, size // 8))


# Operators whose kernels make no temporary of the data's size.
_NO_TEMPORARY = frozenset(
    {"reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min", "reduce_log_sum"}
)

# The operators whose kernels widen float16 and bfloat16, and integers (but SumSquare,
# which wraps in the integer type), into a float64 temporary of the data's shape.
_WIDENED = frozenset({"reduce_sum_square", "reduce_l2", "reduce_log_sum_exp"})
_WIDENED_DTYPES = frozenset(
    {
        "float16",
        "bfloat16",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
    }
)


#: The fewest elements of a slab (or piece) of data widened into float64: one temporary
#: of 1 MiB. Data of two such slabs or more are split; the slabs go to pool threads in
#: jobs of about 2**20 elements of data (one job: the calling thread). int8 (1024, 1024)
#: over the last axis, L2: 1600% of the input in temporaries and 5.0 ms whole, 100% and
#: 1.2 ms in slabs.
WIDENED_ELEMENTS = 2**17


def _widened_elements(x: Array) -> int:
    """Elements of a slab of ``x`` widened into float64: an eighth of the data, at least
    ``WIDENED_ELEMENTS``, at most as many as make the temporary take the bytes of
    ``SLAB_ELEMENTS`` elements of the data (as float32 data's temporaries do). Smaller
    slabs cost more than they keep on large data: int32 (4096, 8192) L2 over the first
    axis in slabs of 2**17 elements (32 columns) took 100-114 ms against 52-53 in slabs
    of 2**19 (same run)."""
    widest = max(WIDENED_ELEMENTS, _threads.SLAB_ELEMENTS * int(x.dtype.itemsize) // 8)
    return min(widest, max(WIDENED_ELEMENTS, int(math.prod(x.shape)) // 8))


def _widens(op: str, x: Array) -> bool:
    """Whether ``x`` (C-ordered or not, in either byte order: the widening reads either)
    is data that ``op`` widens."""
    integer = x.dtype.kind in "iu"
    # ml_dtypes' bfloat16 (kind "V") converts to float64 exactly, as float16 does.
    small_float = (x.dtype.kind == "f" and x.dtype.itemsize < 4) or is_extension_bfloat16(x.dtype)
    return op in _WIDENED and (small_float or (integer and op != "reduce_sum_square"))


def _widened_statistic(op: str, y: Array, axes: Axes, sx: Namespace, integer: bool) -> Array:
    """The generic kernel's float64 result (keepdims) of ``op`` on ``y``, the data widened
    into float64 (a fresh array, overwritten): the same calls on the same values, the
    element-wise steps in place."""
    from .._agnostic._kernels import _log, _root

    if op == "reduce_log_sum_exp":
        m = np.max(y, axis=axes, keepdims=True)
        shift = sx.where(sx.isfinite(m), m, sx.zeros_like(m))
        np.subtract(y, shift, out=y)
        np.exp(y, out=y)
        return _log(sx, sx.sum(y, axis=axes, keepdims=True, dtype=y.dtype)) + shift
    np.multiply(y, y, out=y)
    total = sx.sum(y, axis=axes, keepdims=True, dtype=y.dtype)
    if op == "reduce_sum_square":
        return total
    return sx.sqrt(total) if integer else _root(sx, total)


def _narrowed(sx: Namespace, result: Array, x: Array, axes: Axes, keepdims: bool) -> Array:
    """A float64 result (keepdims) in ``x``'s dtype and the output's shape, as the kernel
    brings it: integers truncated (saturating), floats rounded."""
    from .._agnostic._kernels import float_to_int
    from .._lib._axes import reduced_shape

    if not keepdims:
        result = result.reshape(reduced_shape(tuple(x.shape), axes, False))
    if x.dtype.kind in "iu":
        return float_to_int(sx, result, x.dtype, x.dtype)
    return result.astype(x.dtype)


def _widened_in_slabs(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """Operators that widen their data into float64, slab by slab along a kept axis on
    pool threads, with one float64 temporary a slab."""
    if not _widens(op, x) or len(axes) == x.ndim:
        return None
    sx = _shim(array_api_compat.array_namespace(x))
    integer = x.dtype.kind in "iu"

    def slab(part: Array) -> Array:
        with numpy_quiet():  # a pool thread has NumPy's default error state
            return _widened_statistic(op, part.astype(np.float64), axes, sx, integer)

    with np.errstate(all="ignore"):
        result = _threads.split(
            x, axes, True, slab, elements=_widened_elements(x), smallest=2 * WIDENED_ELEMENTS
        )
        return None if result is None else _narrowed(sx, result, x, axes, keepdims)


_WIDENED_IN_SLABS = Accelerator(
    name="widened-in-slabs",
    ops=_WIDENED,
    dtypes=_WIDENED_DTYPES,
    covers=(
        "ndarrays in either byte order of at least 2**18 elements with a kept axis long "
        "enough for two slabs: float16 and bfloat16 SumSquare, L2 and LogSumExp, integer L2 and "
        "LogSumExp; slabs of an eighth of the data, each one float64 temporary of 1 MiB "
        "to the bytes of 2**20 elements of the data, on pool threads in jobs of 2**20 "
        "elements"
    ),
    earned=(
        "(4096, 8192) over the last axis: int8 L2 held 1.0x the input in float64 "
        "temporaries and LogSumExp 1.5x, float16 L2 0.5x and LogSumExp 0.75x; each now "
        "under 0.1x. (1024, 1024): int8 L2 16x the input, LogSumExp 24x, float16 L2 8x"
    ),
    exact=True,
    run=_widened_in_slabs,
    min_elements=2 * WIDENED_ELEMENTS,
)


def _log_sum_exp(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    return log_sum_exp_in_place(x, axes, keepdims, profile)


#: The fewest elements LogSumExp takes in one pass. Its exp costs more than a tile's few
#: calls: float32 (512, 512), same run, 0.69-0.97 ms -> 0.70-0.90 ms over the last, first
#: and every axis, 104-107% of the input in temporaries -> 50-60% (tiles of 2**17).
SHIFTED_ELEMENTS = 2**18


def _log_sum_exp_in_one_pass(
    layouts: tuple[tuple[Callable[[Array, Axes, Any], bool], Total], ...],
) -> Callable[..., Array | None]:
    """An accelerator's ``run``: the generic LogSumExp of data in one of ``layouts`` (of
    the one-pass totals), the kernel's steps (:func:`log_sum_exp_in_place`) with its sum
    of exp(x - shift) taken a tile at a time, each tile's terms written into a buffer."""

    def run(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
        if math.prod(x.shape) < SHIFTED_ELEMENTS:
            return None
        one_pass = next((total for ours, total in layouts if ours(x, axes, x.dtype)), None)
        if one_pass is None:
            return None
        xp = namespace_for(x)

        def sum_exps(y: Array, shift: Array) -> Array:
            return one_pass(xp, _ShiftedExp(shift), y, axes, True, y.dtype)

        return log_sum_exp_in_place(x, axes, keepdims, profile, sum_exps)

    return run


_LOG_SUM_EXP_IN_ONE_PASS = Accelerator(
    name="log-sum-exp-in-one-pass",
    ops=frozenset({"reduce_log_sum_exp"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "C-ordered ndarrays in native byte order of at least 2**18 elements, over the "
        "layouts of the one-pass totals (the first axis, every axis, a trailing run of "
        "axes): the sum of exp(x - shift) a tile at a time, each tile's terms in a buffer"
    ),
    earned=(
        "float32 (1024, 2047), same run: first axis 12.7-13.0 -> 4.5-4.6 ms, 107% of the "
        "input in temporaries -> 20%; last axis 7.8-8.2 -> 4.6-5.0 ms, 100% -> 13%. "
        "(4096, 8192) over every axis 53-59 -> 50-55 ms, bit for bit the generic kernel "
        "(every-axis-in-slabs merges LogSumExps), 6% -> 1.6%; within each slab of "
        "``threads`` over the last axis 6% -> 1%"
    ),
    exact=True,
    run=_log_sum_exp_in_one_pass(_ONE_PASS_LAYOUTS),
    min_elements=SHIFTED_ELEMENTS,
)

# Over the first axis the one-pass LogSumExp runs on the whole data, ahead of ``threads``,
# whose slabs of columns it otherwise runs in: each slab, not C-ordered, took a copy of
# exp(x - shift) of its size.
_LOG_SUM_EXP_FIRST_AXIS = dataclasses.replace(
    _LOG_SUM_EXP_IN_ONE_PASS,
    name="log-sum-exp-over-the-first-axis",
    covers=(
        "C-ordered ndarrays in native byte order of at least 2**18 elements and 32 rows, "
        "over the first axis alone: the one-pass LogSumExp on the whole data (its tiles on "
        "pool threads), not within the slabs of columns of ``threads``"
    ),
    earned=(
        "(4096, 8192) over the first axis, two threads, by turns with ``threads`` ahead: "
        "float32 60-62 -> 36-37 ms idle, 118-121 -> 69-72 beside two spinning processes; "
        "float64 86-89 -> 69-72 idle, 194-197 -> 103-140. float32 (2048, 2048): 53% of the "
        "input -> 13% (a tile a thread, where ``threads`` copied a slab a thread)"
    ),
    run=_log_sum_exp_in_one_pass(((_first_axis, _first_axis_total),)),
)


_LOG_SUM_EXP_IN_PLACE = Accelerator(
    name="log-sum-exp-in-place",
    ops=frozenset({"reduce_log_sum_exp"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "any layout; the generic kernel's steps with exp in place, also for each slab of "
        "the threads and every-axis accelerators"
    ),
    earned=(
        "float32 (4096, 8192) on two threads: 6.0-7.0x -> 3.7-5.5x the sum, peak extra "
        "memory 12.5% -> 6.3% of the input (two 4 MB temporaries a slab -> one)"
    ),
    exact=True,
    run=_log_sum_exp,
)


def _every_axis(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    carried = numpy_carrier(x.dtype) is not None  # each slab lifted: see CARRIED_ELEMENTS
    elements = _carried_elements(op) if carried else _threads.SLAB_ELEMENTS
    return every_axis_in_slabs(op, x, axes, keepdims, threaded=True, elements=elements)


Tree = Any  # (start, stop) of a piece, or a pair of trees


def _pairwise_tree(start: int, stop: int, limit: int) -> Tree:
    """How NumPy's pairwise sum of a contiguous run splits ``[start, stop)`` (each half
    summed apart, the first a multiple of 8 long; numpy/_core/src/umath/loops_utils.h.src),
    down to pieces of at most ``limit`` elements, which NumPy's sum of the piece alone
    adds in the same way."""
    count = stop - start
    if count <= limit:
        return (start, stop)
    half = count // 2
    half -= half % 8
    return (_pairwise_tree(start, start + half, limit), _pairwise_tree(start + half, stop, limit))


def _leaves(tree: Tree) -> list[tuple[int, int]]:
    if isinstance(tree[0], int):
        return [tree]
    return _leaves(tree[0]) + _leaves(tree[1])


def _add_as_tree(tree: Tree, sums: Iterator[Any]) -> Any:
    if isinstance(tree[0], int):
        return next(sums)
    return _add_as_tree(tree[0], sums) + _add_as_tree(tree[1], sums)


def _pairwise_sum(
    x: Array, terms: Callable[[Array], Array], elements: int, found: list[Any] | None = None
) -> Any | None:
    """NumPy's sum of ``terms(x)`` over every axis of C-ordered ``x`` bit for bit, with
    ``terms`` (an element-wise step in place: a float64 piece in, the same piece out) taken
    piece by piece on pool threads: the pieces of :func:`_pairwise_tree` summed alone and
    their sums added as NumPy adds its halves (and put in ``found``, where given). None
    where the sum is a NaN that NumPy's own additions might give with another sign or
    payload (see :func:`_one_nan`)."""
    tree = _pairwise_tree(0, x.size, max(elements, 128))

    def piece_sum(piece: Array) -> Any:
        with numpy_quiet():  # a pool thread has NumPy's default error state
            return np.add.reduce(terms(piece))

    sums = _threads.flat_pieces(x, _leaves(tree), piece_sum)
    if found is not None:
        found[:] = sums
    total = _add_as_tree(tree, iter(sums))
    if np.isnan(total) and not _one_nan(np.asarray(sums)):
        return None
    return total


def _one_nan(sums: Array) -> bool:
    """Whether adding the pieces' ``sums`` in any order gives one NaN, bit for bit.

    Which of two NaNs an addition keeps follows the order the compiler gave its operands,
    in NumPy's loop and in the pieces' additions alike, but a NaN added to a number is
    that NaN in either order. So the NaN is the same whatever the order where the NaNs
    the additions can meet have one bit pattern: the pieces' NaN sums (the data's NaNs,
    such as ``np.nan`` wherever a value is missing) and, where the sums hold infinities of
    both signs, the NaN the CPU makes of inf - inf."""
    with numpy_quiet():
        made = sums.dtype.type(np.inf) + sums.dtype.type(-np.inf)
        nans = sums[np.isnan(sums)]
        if np.any(sums == np.inf) and np.any(sums == -np.inf):
            nans = np.append(nans, made)
    return len({value.tobytes() for value in nans}) == 1


def _in_pieces(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """Operators that widen their data into float64, over every axis of C-ordered data:
    the element-wise step and the sum taken piece by piece on pool threads (the pieces of
    NumPy's own pairwise sum), with one float64 temporary a piece; the same values."""
    from .._agnostic._kernels import _log, _root

    if (
        not _widens(op, x)
        or len(axes) != x.ndim
        or x.size < 2 * WIDENED_ELEMENTS
        or not x.flags.c_contiguous
    ):
        return None
    sx = _shim(array_api_compat.array_namespace(x))
    wide = np.dtype(np.float64)
    keep = (1,) * x.ndim
    elements = _widened_elements(x)
    with np.errstate(all="ignore"):
        if op == "reduce_log_sum_exp":
            # The largest value, as the kernel's max of the widened data (widening keeps
            # the order; NaN propagates), taken over slabs: NumPy's float16 max loop is
            # not vectorised.
            def largest(piece: Array) -> Array:
                return np.maximum.reduce(piece, dtype=wide)

            bounds = [(i, min(i + elements, x.size)) for i in range(0, x.size, elements)]
            m = np.maximum.reduce(_threads.flat_pieces(x, bounds, largest)).reshape(keep)
            shift = sx.where(sx.isfinite(m), m, sx.zeros_like(m))
            offset = shift.reshape(())

            def terms(piece: Array) -> Array:
                y = piece.astype(wide)
                np.subtract(y, offset, out=y)
                return np.exp(y, out=y)

            found = _pairwise_sum(x, terms, elements)
            if found is None:  # a NaN another order might give with another sign
                return None
            total = np.asarray(found).reshape(keep)
            result = _log(sx, total) + shift
        else:

            def squares(piece: Array) -> Array:
                y = piece.astype(wide)
                return np.multiply(y, y, out=y)

            found = _pairwise_sum(x, squares, elements)
            if found is None:
                return None
            total = np.asarray(found).reshape(keep)
            if op == "reduce_sum_square":
                result = total
            elif x.dtype.kind in "iu":
                result = sx.sqrt(total)
            else:
                result = _root(sx, total)
        return _narrowed(sx, result, x, axes, keepdims)


_IN_PIECES = Accelerator(
    name="every-axis-in-pieces",
    ops=_WIDENED,
    dtypes=_WIDENED_DTYPES,
    covers=(
        "C-ordered ndarrays in either byte order of at least 2**18 elements reduced over "
        "every axis (integers: L2 and LogSumExp); the float64 step and sum in pieces that "
        "follow NumPy's pairwise sum, as long as the slabs over a kept axis, on pool "
        "threads in jobs of 2**20 elements"
    ),
    earned=(
        "(4096, 8192) over every axis: int8 L2 16x and LogSumExp 24x the input in extra "
        "memory, float16 L2 0.5x and LogSumExp 0.75x, each now under 0.1x; (1024, 1024) "
        "as over the last axis"
    ),
    exact=True,
    run=_in_pieces,
    min_elements=2 * WIDENED_ELEMENTS,
)


_EVERY_AXIS = Accelerator(
    name="every-axis-in-slabs",
    ops=frozenset(MERGES),
    dtypes=ALL_DTYPES - {"bool"},
    covers=(
        "C-ordered ndarrays of at least 2**21 elements reduced over every axis: slabs of "
        "2**20 elements of the flattened data on pool threads, merged by the operator that "
        "composes (a sum of L1 or SumSquare partials, an L2 of L2s, a LogSumExp of "
        "LogSumExps; integers: L1 and SumSquare only); within the accuracy bound, not bit "
        "for bit"
    ),
    earned=(
        "float32 (4096, 8192), every axis: the element-wise step's temporaries were the "
        "data's size (LogSumExp 2x, 817 ms; L1 1x, 132 ms against 41 ms for the sum); "
        "int8 and int32 L1 and SumSquare: 100% extra memory"
    ),
    exact=False,
    run=_every_axis,
    min_elements=_threads.LARGE,
)


def _every_axis_extreme(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """Max or Min over every axis of C-ordered data: the extreme of the pieces' extremes,
    the pieces on pool threads (NumPy's own reduction over every axis runs on one). The
    extreme of any grouping is the same value. Which of 0.0 and -0.0, or of two NaNs,
    comes out is NumPy's loop's choice, so a zero result is taken only where every zero
    of the data has one sign, and a NaN result only where every NaN has the bits of the
    NaN NumPy's vector loops return for any NaN (np.nan's); others go to the kernel."""
    if len(axes) != x.ndim or x.size < _threads.LARGE or not x.flags.c_contiguous:
        return None
    reduce = np.maximum.reduce if op == "reduce_max" else np.minimum.reduce
    carrier = numpy_carrier(x.dtype)
    # Pieces as the threads accelerator's slabs. Data held in a carrier (bfloat16, the
    # other byte order): each piece lifted, as the kernel lifts the data (ml_dtypes' own
    # max loop took 30x NumPy's float32 one on 2**19 elements).
    elements = _extreme_slab(x.size) if carrier is None else CARRIED_ELEMENTS

    def piece_extreme(piece: Array) -> tuple[Array, frozenset[str]]:
        values = piece if carrier is None else piece.astype(carrier)
        extreme = reduce(values)
        return extreme, _special_kinds(values, extreme)

    pieces = _threads.flat_slabs(x, piece_extreme, elements=elements)
    if pieces is None:  # a pool thread
        return None
    extremes = [extreme for extreme, _ in pieces]
    result = reduce(np.asarray(extremes, dtype=carrier or x.dtype))
    if result.dtype.kind == "f" and (result == 0 or np.isnan(result)):
        # The pieces whose extreme is that zero, or a NaN, hold every zero or NaN there is.
        nan = bool(np.isnan(result))
        met = frozenset[str]().union(
            *(kinds for extreme, kinds in pieces if (np.isnan(extreme) if nan else extreme == 0))
        )
        if len(met) != 1 or met == {"another NaN"}:
            return None
    return np.asarray(result, dtype=x.dtype).reshape((1,) * x.ndim if keepdims else ())


#: Elements of the part of a piece whose NaNs' bits :func:`_special_kinds` reads at once
#: (a mask of 256 KiB). float32 (4096, 8192) holding np.nan, Max: 21-22.5 ms in parts of
#: 2**16, 14.4 in parts of 2**18 (the kernel, np.max on one thread: 14.0-14.3).
_NAN_CHUNK = 2**18


def _special_kinds(values: Array, extreme: Array) -> frozenset[str]:
    """Which zeros ("0.0", "-0.0") a float piece whose extreme is a zero holds, or which
    NaNs ("np.nan", "another NaN") one whose extreme is a NaN holds; nothing for others."""
    if values.dtype.kind != "f" or not (extreme == 0 or np.isnan(extreme)):
        return frozenset()
    flat = values.reshape(-1)
    bits = flat.view(np.dtype(f"u{flat.itemsize}"))
    if extreme == 0:
        # Every element is on the zero's side (<= 0 for a Max, >= 0 for a Min): 0.0 is the
        # only one whose bits are 0 as an unsigned integer, -0.0 the only one whose bits
        # are the smallest signed integer. Two reductions of views, no temporary.
        signed = flat.view(np.dtype(f"i{flat.itemsize}"))
        zeros = {"0.0": bits.min() == 0, "-0.0": signed.min() == np.iinfo(signed.dtype).min}
        return frozenset(kind for kind, held in zeros.items() if held)
    quiet = np.asarray(np.nan, flat.dtype).view(bits.dtype)
    for start in range(0, flat.size, _NAN_CHUNK):
        part = slice(start, start + _NAN_CHUNK)
        if np.any(bits[part][np.isnan(flat[part])] != quiet):
            return frozenset({"another NaN"})
    return frozenset({"np.nan"})


_EVERY_AXIS_EXTREME = Accelerator(
    name="every-axis-extremes-in-pieces",
    ops=EXTREMES,
    dtypes=frozenset({"bfloat16", "float32", "float64"} | {d for d in ALL_DTYPES if d[0] in "iu"}),
    covers=(
        "C-ordered ndarrays in either byte order of at least 2**21 elements reduced over "
        "every axis: about eight pieces of the flattened data on pool threads; a zero or NaN "
        "result (whose sign or payload NumPy's loop picks) only where every zero has one "
        "sign, or every NaN np.nan's bits (which NumPy's vector loops return for any NaN); "
        "others are declined to the kernel"
    ),
    earned=(
        "float32 (4096, 8192) Max, medians of three rounds in one run: idle 12.9-13.7 -> "
        "8.1-8.2 ms (np.max 11.7-12.7), JAX's through NumPy 9.9-12.2 -> 6.9-8.4 (jnp.max "
        "7.5-8.0); beside two spinning processes 11.8-23.4 -> 11.2-11.7, JAX's 16.0-19.1 -> "
        "11.5-13.0 (jnp.max 10.8-16.0). A declined zero result: 11.1 -> 18.1-18.6. "
        "bfloat16 (pieces of 2**19 lifted alone): 200% of the input -> 6%, 26-30 -> 5-7 ms. "
        "Zero and NaN results of one sign or pattern, (4096, 8192), by turns: bfloat16 "
        "Min of ReLU outputs 49-51 -> 16-17 ms and Max holding np.nan 49-50 -> 21 ms, "
        "200% of the input -> 6.3-7.1%; float32 Min of ReLU outputs 14.0-14.6 -> "
        "11.7-13.2 ms, Max holding np.nan 14.0-14.3 -> 14.4"
    ),
    exact=True,
    run=_every_axis_extreme,
    min_elements=_threads.LARGE,
)


def _carried_total(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """Sum, Mean and LogSum of bfloat16 data over every axis: the float64 total of
    pieces, each lifted into float32 and summed in float64 on pool threads, then the
    pieces' totals added in float64 (the kernel lifts the whole data first). The float64
    sums are added in another order: within the bound, not bit for bit."""
    if (
        len(axes) != x.ndim
        or not is_extension_bfloat16(x.dtype)
        or x.size < _threads.LARGE
        or not x.flags.c_contiguous
    ):
        return None
    wide = np.dtype(np.float64)
    carrier = numpy_carrier(x.dtype)

    def piece_total(piece: Array) -> Array:
        with numpy_quiet():  # a pool thread has NumPy's default error state
            return np.add.reduce(piece.astype(carrier), dtype=wide)

    totals = _threads.flat_slabs(x, piece_total, elements=CARRIED_ELEMENTS)
    if totals is None:  # a pool thread
        return None
    with numpy_quiet():
        total = np.add.reduce(np.asarray(totals))
        if op == "reduce_mean":
            total = total / x.size
        elif op == "reduce_log_sum":
            total = np.log(total)
    return np.asarray(total, dtype=wide).astype(x.dtype).reshape((1,) * x.ndim if keepdims else ())


def _swapped_total(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """Sum, Mean, LogSum and L1 of float32 or float64 data in the other byte order over
    every axis (whose kernels take no copy of the data before their totals): the kernel
    on the data as they are, its totals those of :func:`_pairwise_sum` with each piece
    brought into native order, so bit for bit the kernel on the data lifted whole."""
    if (
        len(axes) != x.ndim
        or x.dtype.isnative
        or x.dtype.kind != "f"
        or x.dtype.itemsize < 4
        or x.size < _threads.LARGE
        or not x.flags.c_contiguous
    ):
        return None
    native = x.dtype.newbyteorder("=")

    def total(
        xp: Namespace, term: Term | None, y: Array, axes_: Axes, keep: bool, dtype: Any
    ) -> Array:
        def terms(piece: Array) -> Array:
            lifted = piece.astype(native)
            return lifted if term is None else term(xp, lifted)

        found = _pairwise_sum(y, terms, CARRIED_ELEMENTS)
        if found is None:  # a NaN another order might give with another sign: the kernel's
            return plain_total(xp, term, y.astype(native), axes_, keep, dtype)
        return xp.reshape(xp.asarray(found, dtype=dtype), (1,) * y.ndim if keep else ())

    as_is = dataclasses.replace(profile, lift=lambda data: data)
    xp = namespace_for(x)
    return run_kernel(as_is, xp, op, x, axes, keepdims, select=select_when_needed, total=total)


_SWAPPED_TOTAL = Accelerator(
    name="swapped-totals-in-pieces",
    ops=frozenset({"reduce_sum", "reduce_mean", "reduce_log_sum", "reduce_l1"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "C-ordered ndarrays in the other byte order of at least 2**21 elements reduced "
        "over every axis: the kernel's totals taken on the pieces of NumPy's pairwise "
        "sum, each brought into native order alone, on pool threads; bit for bit"
    ),
    earned=(
        "float32 (4096, 8192) in the other byte order over every axis: the data brought "
        "into native order whole held 100% of the input"
    ),
    exact=True,
    run=_swapped_total,
    min_elements=_threads.LARGE,
)


def _swapped_integer_total(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """Sum, Mean, Prod and LogSum of integers in the other byte order over every axis:
    the kernel on the data as they are, its sums and products over every axis taken
    piece by piece on pool threads and its parts (the 64-bit mean's limbs) in pieces,
    each piece brought into native order alone (NumPy's reductions take no dtype in the
    other byte order). Integer sums and products wrap modulo 2**bits and the limbs' sums
    are exact, so any grouping gives the kernel's bits."""
    if (
        len(axes) != x.ndim
        or x.dtype.isnative
        or x.dtype.kind not in "iu"
        or x.size < _threads.LARGE
        or not x.flags.c_contiguous
    ):
        return None
    native = x.dtype.newbyteorder("=")
    shim = profile.shim

    def by_pieces(reduce: Any, base: Callable[..., Array]) -> Callable[..., Array]:
        def call(
            y: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None
        ) -> Array:
            every = (
                axis is None or len(tuple(axis) if isinstance(axis, tuple) else (axis,)) == y.ndim
            )
            if y.dtype.isnative or not every or dtype is None:
                return base(y, axis=axis, keepdims=keepdims, dtype=dtype)
            wide = np.dtype(dtype).newbyteorder("=")
            parts = _threads.flat_slabs(
                y, lambda piece: reduce(piece.astype(native), dtype=wide), elements=CARRIED_ELEMENTS
            )
            if parts is None:  # a pool thread
                return base(y.astype(native), axis=axis, keepdims=keepdims, dtype=wide)
            total = np.asarray(reduce(np.asarray(parts, dtype=wide), dtype=wide))
            return total.reshape((1,) * y.ndim if keepdims else ())

        return call

    def pieced(xp: Namespace) -> Namespace:
        base = shim(xp)
        return Shim(
            base,
            sum=by_pieces(np.add.reduce, base.sum),
            prod=by_pieces(np.multiply.reduce, base.prod),
        )

    as_is = dataclasses.replace(
        profile, lift=lambda data: data, shim=pieced, parts=_lifted_parts(native)
    )
    return run_kernel(as_is, namespace_for(x), op, x, axes, keepdims, select=select_when_needed)


_SWAPPED_INTEGER_TOTAL = Accelerator(
    name="swapped-integer-totals-in-pieces",
    ops=frozenset({"reduce_sum", "reduce_mean", "reduce_prod", "reduce_log_sum"}),
    dtypes=frozenset({"int16", "int32", "int64", "uint16", "uint32", "uint64"}),
    covers=(
        "C-ordered ndarrays in the other byte order of at least 2**21 elements reduced "
        "over every axis: the kernel's sums and products taken on pieces of 2**19 "
        "elements on pool threads, its parts on pieces of 2**16, each piece brought into "
        "native order alone; bit for bit"
    ),
    earned=(
        "int32 (4096, 8192) in the other byte order over every axis: the data brought "
        "into native order whole held 100% of the input, now 3%; Sum 39 -> 11 ms, "
        "Mean 48 -> 15 ms; int64 Mean 102% -> 3.2%, 542 -> 195 ms"
    ),
    exact=True,
    run=_swapped_integer_total,
    min_elements=_threads.LARGE,
)


_CARRIED_TOTAL = Accelerator(
    name="bfloat16-totals-in-pieces",
    ops=frozenset({"reduce_sum", "reduce_mean", "reduce_log_sum"}),
    dtypes=frozenset({"bfloat16"}),
    covers=(
        "C-ordered ndarrays of ml_dtypes' bfloat16 of at least 2**21 elements reduced "
        "over every axis: pieces of 2**19 elements lifted into float32 and summed in "
        "float64 on pool threads; within the accuracy bound, not bit for bit"
    ),
    earned=(
        "bfloat16 (4096, 8192) over every axis: the data lifted whole into float32 held "
        "200% of the input, now 6.5%; Sum 35-44 -> 12-16 ms"
    ),
    exact=False,
    run=_carried_total,
    min_elements=_threads.LARGE,
)

_THREADS = Accelerator(
    name="threads",
    ops=ALL_OPS,
    dtypes=ALL_DTYPES,
    covers=(
        "ndarrays of at least 2**21 elements with a kept axis long enough for two slabs of "
        "about 2**20 elements, each at least 2 positions wide (1 along a C-ordered axis "
        "before every reduced axis): NumPy then runs the same loop as over the whole. "
        "Max and Min: about eight slabs of 2**20 to 2**22 elements. Data held in a carrier "
        "(bfloat16, the other byte order): slabs of 2**19 elements (L1 2**18, Prod 2**17) "
        "of at least 64 columns, each lifted alone"
    ),
    earned=(
        "float32 (4096, 8192) over the last axis on 2 cores: Sum 10-11 -> 5.2-6.3 ms, "
        "LogSumExp 165 -> 93 ms (numpy 2.4); Max 12.5 -> 8.1 ms idle, 24.1 -> 16.5 beside "
        "two spinning processes. bfloat16 (4096, 8192), slabs lifted alone: first-axis "
        "Sum 113% of the input -> 7%, Prod 926% -> 9%, Max 100% -> 3%"
    ),
    exact=True,
    run=_threaded,
    min_elements=_threads.LARGE,
)


def _lifted_parts(carrier: Any) -> Callable[..., tuple[Array, ...]]:
    """The kernel's parts (:func:`in_pieces`) of data held in ``carrier``: each piece
    lifted into it alone, where the kernel would lift the whole data first."""

    def parts(
        xp: Namespace,
        y: Array,
        axes: Axes,
        partial: Callable[..., tuple[Array, ...]],
        merge: Callable[..., tuple[Array, ...]],
        empty: tuple[float, ...],
        dtype: Any,
    ) -> tuple[Array, ...]:
        def lifted(xp_: Namespace, piece: Array, axes_: Axes) -> tuple[Array, ...]:
            return partial(xp_, piece.astype(carrier), axes_)

        return in_pieces(xp, y, axes, lifted, merge, empty, dtype)

    return parts


def _product_in_pieces(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """:func:`statistics_in_pieces` of the product. Data held in a carrier (bfloat16, the
    other byte order) reduced over every axis are not lifted whole: NumPy multiplies in
    order, so its product of the data as they are, cast a buffer at a time, has the bits
    of the lifted data's, and the statistics lift each piece. bfloat16 (4096, 8192):
    200% of the input -> 1.7%, 750-780 -> 1240-1260 ms (pieces of 2**15 elements, and
    ml_dtypes' casts)."""
    carrier = numpy_carrier(x.dtype)
    if carrier is None or len(axes) != x.ndim:  # over kept axes: `threads` lifts slabs
        return statistics_in_pieces(op, x, axes, keepdims, profile)
    if math.prod(x.shape) < 2 * PIECE:
        return None
    as_is = dataclasses.replace(profile, lift=lambda data: data, parts=_lifted_parts(carrier))
    xp = namespace_for(x)
    return run_kernel(as_is, xp, op, x, axes, keepdims, select=select_when_needed)


# --- the careful product by exponents ------------------------------------------------------

#: Significands multiplied in a row before the product is split again: 256 of them, each
#: at least 0.5 in magnitude, multiply to at least 2**-256, far above float64's smallest
#: normal number.
_RUN = 256


def _significand_product(m: Array) -> tuple[Array, Array]:
    """Per row of ``m`` (rows of significands, 0.5 <= |m| < 1, or 0, inf or NaN):
    the product ``p * 2**k``, as ``p`` (0.5 <= |p| < 1, or 0, inf or NaN) and ``k``
    (int64). Runs of ``_RUN`` significands are multiplied in float64 and split again
    (``np.frexp``), run after run, until one is left."""
    np = _NUMPY
    rows = m.shape[0]
    k = np.zeros(rows, dtype=np.int64)
    while m.shape[1] > 1:
        whole, rest = divmod(m.shape[1], _RUN)
        runs = []
        if whole:
            head = m[:, : whole * _RUN].reshape(rows, whole, _RUN)
            runs.append(np.multiply.reduce(head, axis=2, dtype=np.float64))
        if rest:
            tail = m[:, whole * _RUN :]
            runs.append(np.multiply.reduce(tail, axis=1, dtype=np.float64, keepdims=True))
        m, e = np.frexp(runs[0] if len(runs) == 1 else np.concatenate(runs, axis=1))
        k += np.add.reduce(e, axis=1, dtype=np.int64)
    return m[:, 0], k


def _products_by_exponents(rows: Array, acc: Any) -> Array:
    """The product of each row of float32 or float64 ``rows`` (a 2-D array), rounded once
    to ``acc``: each value split into its significand and exponent (``np.frexp``, exact,
    in the data's own type), the exponents added as integers and the significands
    multiplied in float64 in runs that cannot overflow or underflow, the result scaled
    (``np.ldexp``) and rounded. Zeros, infinities and NaNs meet as IEEE multiplication
    has them meet, with the signs' parity."""
    np = _NUMPY
    m, e = np.frexp(np.ascontiguousarray(rows))
    p, k = _significand_product(m)
    k += np.add.reduce(e, axis=1, dtype=np.int64)
    # Beyond +-2**12 the float64 result is 0 or inf already: the clip keeps ldexp's int.
    return np.ldexp(p, np.clip(k, -(2**12), 2**12)).astype(acc)


def _column_products_by_exponents(block: Array, acc: Any) -> Array:
    """:func:`_products_by_exponents` of each column of 2-D ``block``, reading it a few
    rows at a time, as NumPy's own product over the first axis reads its data: the
    significands of up to ``_RUN`` rows multiplied column by column into a running
    product, which is split again after each."""
    np = _NUMPY
    length, width = block.shape
    step = max(1, min(_RUN, PIECE // width))
    product = np.ones(width, dtype=np.float64)
    k = np.zeros(width, dtype=np.int64)
    for start in range(0, length, step):
        m, e = np.frexp(block[start : start + step])
        k += np.add.reduce(e, axis=0, dtype=np.int64)
        product, e = np.frexp(product * np.multiply.reduce(m, axis=0, dtype=np.float64))
        k += e
    return np.ldexp(product, np.clip(k, -(2**12), 2**12)).astype(acc)


class ProductSlices:
    """The slices of NumPy data ``x`` that a product over ``axes`` reduces, as rows: over
    trailing axes of C-ordered data, its rows; over the first axis of 2-D (or C-ordered)
    data, its columns. ``layout`` is None for data in another layout, or with slices of
    more than ``PIECE`` elements."""

    def __init__(self, x: Array, axes: Axes) -> None:
        kept = x.ndim - len(axes)
        self.by_columns = False
        self.data: Array = None  # 2-D: the slices as its rows, or as its columns
        self.length = 0
        if axes == tuple(range(kept, x.ndim)) and x.flags.c_contiguous:
            self.data = x.reshape(math.prod(x.shape[:kept]), -1)
            self.length = int(self.data.shape[1])
        elif axes == (0,) and (x.ndim == 2 or (x.ndim > 2 and x.flags.c_contiguous)):
            self.data = x.reshape(x.shape[0], -1)  # a view (of a 2-D slab of columns too)
            self.by_columns = True
            self.length = int(self.data.shape[0])
        self.covered = 0 < self.length <= PIECE

    def picked(self, picked: Array) -> Array:
        """The slices ``picked`` (sorted positions), as the rows of a 2-D array."""
        if not self.by_columns:
            return self.data[picked]
        first, last = int(picked[0]), int(picked[-1])
        if last - first + 1 == picked.shape[0]:  # a run of columns: a view
            return self.data[:, first : last + 1].T
        return self.data[:, picked].T  # copied row by row

    def careful(self, flat: Array, dtype: Any) -> None:
        """Where the plain products ``flat`` (one a slice, writable) are 0, infinite or
        NaN, :func:`_products_by_exponents` of those slices, in place, on pool threads."""
        np = _NUMPY
        suspect = np.flatnonzero(~(np.isfinite(flat) & (flat != 0)))
        if not suspect.size:
            return
        keep_freed_pieces()  # each piece's temporaries reused, not faulted in again
        columns, length = self.data, self.length
        if self.by_columns and suspect.size * 16 > flat.size:
            # Many columns: every column's careful product, read row by row, a run of
            # columns a job (columns gathered one by one are read a cache line a row).
            width = max(1, _threads.SLAB_ELEMENTS // length)
            runs = [(s, min(s + width, flat.size)) for s in range(0, flat.size, width)]

            def run(bound: tuple[int, int]) -> Array:
                with numpy_quiet():  # a pool thread has NumPy's default error state
                    block = columns[:, bound[0] : bound[1]]
                    return _column_products_by_exponents(block, dtype)

            flat[suspect] = np.concatenate(_threads.in_jobs(run, runs, 1))[suspect]
            return
        step = max(1, PIECE // length)
        bounds = [(s, min(s + step, suspect.size)) for s in range(0, suspect.size, step)]

        def one(bound: tuple[int, int]) -> Array:
            with numpy_quiet():
                return _products_by_exponents(self.picked(suspect[bound[0] : bound[1]]), dtype)

        per_job = max(1, _threads.SLAB_ELEMENTS // (step * length))
        flat[suspect] = np.concatenate(_threads.in_jobs(one, bounds, per_job))


def _product_by_exponents(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """The generic kernel's product: the plain product (slab by slab on pool threads, as
    ``threads`` takes it) where it is finite and not 0 (as the kernel keeps it; a 0 from a
    slice that holds a zero is the same 0 either way), elsewhere
    :func:`_products_by_exponents` of those slices alone (:class:`ProductSlices`). Not
    within a slab of another accelerator (``threads`` is bit for bit the kernel, and this
    is not)."""
    if x.size < 2 * PIECE or not x.dtype.isnative or _threads.in_a_job():
        return None
    slices = ProductSlices(x, axes)
    if not slices.covered:
        return None
    np = _NUMPY

    def plain_of(part: Array) -> Array:
        with numpy_quiet():  # a pool thread has NumPy's default error state
            return np.multiply.reduce(part, axis=axes, dtype=x.dtype, keepdims=True)

    plain = _threads.split(x, axes, True, plain_of, run=_threads.WIDE_RUN)
    if plain is None:
        plain = plain_of(x)
    plain = np.ascontiguousarray(plain)
    with np.errstate(all="ignore"):
        slices.careful(plain.reshape(-1), x.dtype)
    return plain if keepdims else np.squeeze(plain, axis=axes)


_PRODUCT_BY_EXPONENTS = Accelerator(
    name="careful-product-by-exponents",
    ops=frozenset({"reduce_prod"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "data of native byte order and at least 2**17 elements, C-ordered over trailing "
        "axes, 2-D (a view of columns included) or C-ordered over the first axis, slices "
        "of at most 2**16 elements: where the plain product is 0, infinite or NaN, those "
        "slices' product with exponents added as integers and "
        "significands multiplied in runs of 256 (np.frexp, np.ldexp), pieces of 2**16 "
        "elements on pool threads; the plain product in the slabs of ``threads``, ahead "
        "of which it runs (not within another accelerator's slab); held to the bound "
        "(the kernel adds logarithms)"
    ),
    earned=(
        "float32 (4096, 8192) of standard normals, every product underflowing, separate "
        "processes: last axis 212-219 -> 92-93 ms, first 263-267 -> 47-48 (np.prod 37 "
        "and 11; careful-product-in-pieces' logarithm a value in float64 was most of it)"
    ),
    exact=False,
    run=_product_by_exponents,
    min_elements=2 * PIECE,
)


# The product (the count of zeros where some product is 0; the careful product, each |x|
# split into significand and exponent) and the exact mean of 64-bit integers (sums of
# 16-bit limbs) take their statistics through the kernel's parts: in pieces, their
# temporaries are a piece's size. The same (4096, 4096) over the
# last axis (under ``threads``, slab by slab): float32 Prod 103% -> 6.8%, float16
# 207% -> 7.1%, int64 Mean 38% -> 2.4%. The careful product of float16 over the first
# axis takes pieces of four rows: 229 -> 387 ms.
CAREFUL_PRODUCT_IN_PIECES = Accelerator(
    name="careful-product-in-pieces",
    ops=frozenset({"reduce_prod"}),
    dtypes=frozenset({"float16", "bfloat16", "float32", "float64"}),
    covers=(
        "data of at least 2**17 elements, any layout: the statistics the kernel takes "
        "as parts (where some product is 0, the count of zeros; the careful product's "
        "log2 of the significands, exponents and counts) in pieces of 2**16 elements "
        "(2**15 of 2-byte data), merged two at a time; the careful form only where some "
        "slice needs it (over trailing axes or the first axis, a few suspect slices, a 16th "
        "at most, computed again alone: ``CarefulLater``). Data held in a carrier over "
        "every axis: not lifted whole, each piece lifted alone"
    ),
    earned=(
        "float32 (4096, 4096) of values 1-99, every product overflowing, over the first "
        "axis and every axis: peak extra memory 825% -> 7.4% and 3.3% of the input, "
        "392-468 -> 258-288 ms and 366-389 -> 250-289 ms (two threads); (4096, 8192) "
        "near 1 with one NaN, first axis: 189 -> 9.5 ms"
    ),
    exact=False,
    run=_product_in_pieces,
    min_elements=2 * PIECE,
)

INTEGER_MEAN_IN_PIECES = Accelerator(
    name="integer-mean-in-pieces",
    ops=frozenset({"reduce_mean"}),
    dtypes=frozenset({"int64", "uint64"}),
    covers=(
        "data of at least 2**17 elements, any layout: the sums of the 16-bit limbs in "
        "pieces of 2**16 elements, added exactly"
    ),
    earned=(
        "int64 (4096, 4096) over the first axis and every axis: peak extra memory 300% "
        "-> 2.6% and 1.2% of the input, 199-211 -> 100-113 ms and 215-220 -> 71-74 ms "
        "(two threads)"
    ),
    exact=True,
    run=statistics_in_pieces,
    min_elements=2 * PIECE,
)

PROFILE = Profile(
    name="numpy",
    recognises=recognises,
    namespace_of=namespace_of,
    shim=_shim,
    lift=_lift,
    lower=_lower,
    logical=numpy_logical,
    refuses=refuses,
    quiet=numpy_quiet,
    eager=_eager,
    accelerators=(
        _SMALL,
        _WIDENED_IN_SLABS,
        _FIRST_AXIS,
        _EVERY_AXIS_IN_ONE_PASS,
        _LAST_AXES_IN_ONE_PASS,
        _LOG_SUM_EXP_FIRST_AXIS,
        _PRODUCT_BY_EXPONENTS,
        _THREADS,
        _EVERY_AXIS_EXTREME,
        _CARRIED_TOTAL,
        _SWAPPED_TOTAL,
        _SWAPPED_INTEGER_TOTAL,
        _IN_PIECES,
        _LOG_SUM_EXP_IN_ONE_PASS,
        _EVERY_AXIS,
        _LOG_SUM_EXP_IN_PLACE,
        CAREFUL_PRODUCT_IN_PIECES,
        INTEGER_MEAN_IN_PIECES,
        *ACCELERATORS,
    ),
)
