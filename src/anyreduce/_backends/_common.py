"""Helpers shared by backend modules: namespace shims and the eager select."""

from __future__ import annotations

import array
import dataclasses
import functools
import math
import os
import types
from collections.abc import Callable
from typing import Any

from .._agnostic._kernels import Total, plain_total
from .._lib import _dtypes
from .._lib._axes import reduced_shape
from . import _threads
from ._base import Profile, namespace_for, run_kernel

__all__ = [
    "BLOCK",
    "MERGES",
    "BareShim",
    "CarefulLater",
    "FixedInfo",
    "Shim",
    "axis_block_sum",
    "blocked_sum",
    "every_axis_in_slabs",
    "in_pieces",
    "isdtype_with_bfloat16",
    "keep_freed_pieces",
    "least_and_finite",
    "log_sum_exp_in_place",
    "named",
    "numpy_carrier",
    "numpy_logical",
    "run_careful_later",
    "select_when_needed",
    "statistics_in_pieces",
]

Namespace = Any
Array = Any
Axes = tuple[int, ...]


class Shim:
    """A namespace that is ``base`` except for the functions given as keywords."""

    copies_names = True

    def __init__(self, base: Namespace, /, **overrides: Callable[..., Any]) -> None:
        self._base = base
        # The module name the caches key a namespace by (anyreduce._lib._memo), found
        # without a round through __getattr__.
        self.__name__ = getattr(base, "__name__", None)
        # The base's public names held here: a kernel's look-up is then a plain attribute
        # read, not a call of __getattr__ (~0.5 us, several times a call). Read from the
        # module's dictionary, so that no deprecated name is looked up (and warns).
        if self.copies_names and isinstance(base, types.ModuleType):
            public = {k: v for k, v in vars(base).items() if not k.startswith("_")}
            self.__dict__.update(public)
        for name, function in overrides.items():
            setattr(self, name, function)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def __repr__(self) -> str:
        return f"Shim({getattr(self._base, '__name__', self._base)!r})"


class FixedInfo:
    """``xp.__array_namespace_info__()`` of a library whose dtypes never change, as a
    function, with the answers of ``dtypes`` remembered.

    The kernels ask for the widest float (L2, Prod, LogSum, LogSumExp, every float16
    sum) on every call, and array-api-compat answers anew each time: 11.7 us a call on
    PyTorch (it makes tensors to find the dtypes), 3.2 on NumPy (array-api-compat 1.16).
    Not for JAX, whose float64 comes and goes with ``jax_enable_x64``.
    """

    def __init__(self, base: Namespace) -> None:
        self._info = base.__array_namespace_info__()
        self._dtypes: dict[tuple[Any, Any], dict[str, Any]] = {}

    def __call__(self) -> FixedInfo:
        return self

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        key = (device, kind)
        found = self._dtypes.get(key)
        if found is None:
            found = self._dtypes[key] = self._info.dtypes(device=device, kind=kind)
        return dict(found)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._info, name)


class BareShim(Shim):
    """A :class:`Shim` that leaves every name of ``base`` to ``__getattr__``: one made
    inside a compiler's trace, where copying the module's names cannot be traced."""

    copies_names = False


def named(xp: Namespace, *names: str) -> bool:
    """Whether namespace ``xp`` is one of the modules ``names``, or array-api-compat's
    wrapper of one (array-api-compat's own tests are cached with ``functools.lru_cache``,
    which ``torch.compile`` warns about when it traces them)."""
    name = getattr(xp, "__name__", None)
    return name in names or (
        isinstance(name, str)
        and name.startswith("array_api_compat.")
        and name[len("array_api_compat.") :] in names
    )


def rounded_once(xp: Namespace, r: Array, dtype: Any) -> Array:
    """Float64 ``r`` in float16 or bfloat16 ``dtype``, rounded once to nearest (even).

    PyTorch converts float64 to both through float32, and JAX to bfloat16 (torch 2.13, jax
    0.10; ml_dtypes before 0.7 too): two roundings, which err where the first makes an
    exact tie of the second (1 + 2**-8 + 2**-30 -> 1 + 2**-8 -> 1.0 in bfloat16, where
    1 + 2**-7 is nearest). Here ``r`` is rounded to float32 toward the neighbour whose last
    bit is odd (round to odd), then to ``dtype``: float32 has at least 13 bits more than
    either, so the second rounding gives the nearest ``dtype`` value to ``r``. An odd float32
    is never a ``dtype`` value nor a tie of two, so an inexact ``r`` never lands on either.
    """
    f = xp.astype(r, xp.float32)  # nearest
    back = xp.astype(f, r.dtype)
    inf = xp.full_like(f, math.inf)
    size = xp.abs(f)
    step = xp.nextafter(size, inf) - size  # the last bit's value (NaN at infinity)
    even = xp.remainder(size / step, 2.0) == 0
    other = xp.nextafter(f, xp.where(r > back, inf, -inf))  # the neighbour on r's side
    return xp.astype(xp.where(even & (r != back), other, f), dtype)


def may_round_twice(values: list[float]) -> bool:
    """Whether converting any of ``values`` (float64) to float16 or bfloat16 through
    float32 may round twice (see :func:`rounded_once`): its float32 rounding is inexact and
    ends in 12 zero bits, as every tie of either type does. For a few values, checked in
    Python in place of :func:`rounded_once`'s steps on a tensor (torch 2.13, a result of 6
    values: 2.3 us with its ``tolist`` against 26)."""
    singles = array.array("f", values)  # each rounded to nearest, as float32
    bits = memoryview(singles).cast("B").cast("I")
    return any(v != s and b & 0xFFF == 0 for v, s, b in zip(values, singles, bits, strict=True))


def astype_rounding_once(xp: Namespace, wide: Any, narrow: tuple[Any, ...]) -> Callable[..., Array]:
    """``xp.astype`` taking ``wide`` (float64) data to a dtype of ``narrow`` (float16,
    bfloat16) by :func:`rounded_once`: the shim's for a library whose own conversion rounds
    twice, which the kernels' float64 totals of float16 and bfloat16 data go through."""
    base = xp.astype

    def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
        if x.dtype == wide and dtype in narrow and device is None:
            return rounded_once(xp, x, dtype)
        return base(x, dtype, copy=copy, device=device)

    return astype


def least_and_finite(values: list[Any], *, magnitude: bool = False) -> tuple[Any, bool]:
    """The smallest of ``values``, a few Python numbers (with ``magnitude``, of their
    absolute values; any value where one is NaN), and whether every one is finite (their
    sum is: a sum that overflows says no). For the small-data accelerators' tests of a
    result, cheaper in Python than a reduction of it and a host read."""
    least = min(map(abs, values)) if magnitude else min(values)
    return least, math.isfinite(sum(values))


def numpy_logical(dtype: Any) -> Any:
    """The dtype the kernels treat NumPy-typed data of ``dtype`` as: its native byte order.

    NumPy's ufuncs refuse a non-native ``dtype=`` ("The dtype and signature arguments to
    ufuncs only select the general DType", numpy 2.4): big-endian data (FITS, many binary
    formats) are computed in native order and their results brought back to ``dtype``.
    """
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def numpy_carrier(dtype: Any) -> Any:
    """The dtype NumPy-typed data of ``dtype`` are computed in, or None where it is ``dtype``.

    ml_dtypes' bfloat16 goes to float32 (exact): NumPy's ``finfo`` and ``isdtype`` do not
    know it and ml_dtypes has few of its loops. Non-native byte order goes to native order.
    """
    if _dtypes.is_extension_bfloat16(dtype):
        import numpy as np

        return np.dtype(np.float32)
    logical = numpy_logical(dtype)
    return None if logical is dtype else logical


def isdtype_with_bfloat16(base: Namespace) -> Callable[..., bool]:
    """``base.isdtype`` that classifies ml_dtypes' bfloat16 (NumPy raises TypeError on it)."""

    def isdtype(dtype: Any, kind: Any) -> bool:
        return _dtypes.isdtype(base, dtype, kind)

    return isdtype


def select_when_needed(
    xp: Namespace, suspect: Array, careful: Callable[[], Array], plain: Array
) -> Array:
    """The generic select for eager data: ``careful()`` is computed only when some slice
    is suspect, with the same values as computing it always (``where_suspect``)."""
    if not bool(xp.any(suspect)):
        return plain
    return xp.where(suspect, careful(), plain)


#: The most suspect slices, as a share of all, that :class:`CarefulLater` leaves to be
#: computed again alone: they are copied out of the data, so a 16th holds at most 6.3% of
#: the input. NumPy float32 (4096, 8192) Sum over the last axis with one NaN took 19-23 ms
#: where the careful form was taken over all the data, 7 ms clean.
LATER_SHARE = 16


class CarefulLater:
    """An eager select for data reduced over trailing axes or over the first axis alone.

    Where some slices are suspect, at most a ``LATER_SHARE``-th of them, it keeps the plain
    values and notes those slices (and, from then on, those of every later select of the
    kernel); :meth:`finish` computes them again alone, so data with a few NaN, infinite or
    all-zero rows or columns pay the careful form for those only. Where more are suspect,
    or the data are in another layout, it is :func:`select_when_needed`.

    ``flags`` is None while no slice was suspect, False once the careful forms are taken
    at once, else the noted slices (one flag each, in C order).
    """

    __slots__ = ("axes", "flags", "shape")

    def __init__(self, x: Array, axes: Axes) -> None:
        self.axes = axes
        self.shape = tuple(x.shape)
        self.flags: Any = None

    def __call__(
        self, xp: Namespace, suspect: Array, careful: Callable[[], Array], plain: Array
    ) -> Array:
        # Clean data (the common case) cost one test, as select_when_needed's.
        if self.flags is False or not bool(xp.any(suspect)):
            return select_when_needed(xp, suspect, careful, plain)
        flags = xp.reshape(suspect, (-1,))
        if self.flags is None:
            if not self._later(xp, flags):
                self.flags = False
                return xp.where(suspect, careful(), plain)
            self.flags = flags
            return plain
        self.flags = self.flags | flags
        return plain

    def _later(self, xp: Namespace, flags: Array) -> bool:
        """Whether the slices flagged, some, are left for later: a ``LATER_SHARE``-th of
        them at most, of data reduced over trailing axes or over the first axis alone."""
        shape, axes = self.shape, self.axes
        trailing = axes == tuple(range(len(shape) - len(axes), len(shape)))
        if not (trailing or (axes == (0,) and len(shape) > 1)):
            return False
        slices = math.prod(n for i, n in enumerate(shape) if i not in axes)
        count = int(xp.count_nonzero(flags))
        return bool(flags.shape[0] == slices and count * LATER_SHARE <= slices)

    def finish(
        self, op: str, x: Array, result: Array, profile: Profile, total: Total = plain_total
    ) -> Array:
        """``result`` with the noted slices replaced by the generic kernel's values for
        them, computed on a C-ordered copy of those slices alone (taken with ``total``),
        which keeps each slice's order of additions in NumPy: the rows of a sum over
        trailing axes, the columns of a sum over the first axis (NumPy adds a single
        column's blocks of 16 rows pairwise, many columns' row after row: a lone column is
        taken twice). The slices are indexed in place: data that are a view (a slab of
        columns) are not copied whole, as ``take`` and ``reshape`` would copy them."""
        if self.flags is None or self.flags is False:
            return result
        xp = namespace_for(x)
        picked = xp.nonzero(self.flags)[0]
        count = int(picked.shape[0])
        if self.axes == (0,) and x.ndim > 1:
            taken = picked if count > 1 else xp.concat([picked, picked])
            columns = (slice(None), *_unravelled(taken, tuple(x.shape[1:])))
            part = x[columns]
            over: Axes = (0,)
        else:
            kept = x.ndim - len(self.axes)
            part = x[_unravelled(picked, tuple(x.shape[:kept]))]
            over = tuple(range(1, 1 + len(self.axes)))
        # A C-ordered copy, where the indexing gave another order (NumPy's [:, columns]).
        part = xp.reshape(xp.reshape(part, (-1,)), tuple(part.shape))
        values = run_kernel(
            profile, xp, op, part, over, False, select=select_when_needed, total=total
        )
        out = xp.reshape(xp.asarray(result, copy=True), (-1,))
        out[picked] = values[:count]
        return xp.reshape(out, tuple(result.shape))


def run_careful_later(
    profile: Profile,
    op: str,
    x: Array,
    axes: Axes,
    keepdims: bool,
    total: Total = plain_total,
) -> Array:
    """:func:`run_kernel` on eager ``x`` with :class:`CarefulLater` choosing careful slices
    (a few suspect slices computed again alone) and ``total`` taking the totals."""
    later = CarefulLater(x, axes)
    xp = namespace_for(x)
    result = run_kernel(profile, xp, op, x, axes, keepdims, select=later, total=total)
    return later.finish(op, x, result, profile, total)


def _unravelled(flat: Array, shape: tuple[int, ...]) -> tuple[Array, ...]:
    """The indices along each axis of ``shape`` of the C-ordered positions ``flat``."""
    indices = []
    for i, n in enumerate(shape):
        inner = math.prod(shape[i + 1 :])
        indices.append((flat // inner) % n)
    return tuple(indices)


#: Block length of the blocked float sum: each level adds at most this many terms in a row.
BLOCK = 16


def axis_block_sum(xp: Namespace, x: Array, axis: int, dtype: Any) -> Array:
    """Sum over ``axis`` (kept, as length 1) in nested blocks of ``BLOCK`` terms.

    The axis is split into (blocks, BLOCK), a view: summing the short axis, then the
    block sums the same way, makes the error grow with log(n) levels, not with n.
    """
    n = x.shape[axis]
    if n <= BLOCK:
        return xp.sum(x, axis=axis, keepdims=True, dtype=dtype)
    blocks, rest = divmod(n, BLOCK)
    before = (slice(None),) * axis
    head_part = (*before, slice(0, blocks * BLOCK), Ellipsis)
    head = x[head_part] if rest else x
    head = xp.reshape(head, (*x.shape[:axis], blocks, BLOCK, *x.shape[axis + 1 :]))
    total = axis_block_sum(xp, xp.sum(head, axis=axis + 1, dtype=dtype), axis, dtype)
    if rest:
        tail_part = (*before, slice(blocks * BLOCK, n), Ellipsis)
        tail = x[tail_part]
        total = total + xp.sum(tail, axis=axis, keepdims=True, dtype=dtype)
    return total


def blocked_sum(base: Namespace) -> Callable[..., Array]:
    """``base.sum`` whose float sums stay within ``log(n) * eps * sum|x|`` on every axis,
    for libraries that sum pairwise only along the contiguous trailing run of reduced axes
    and add the other axes one term after another (NumPy's loops; array-api-strict
    computes with them). 10**5 float32 values of 0.1 summed over axis 0 are off by about
    1200 eps * sum|x| with NumPy 2.4's own sum, 1 eps * sum|x| blocked.
    """

    def sum_(x: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
        out = x.dtype if dtype is None else dtype
        if not _dtypes.is_float(base, out):
            return base.sum(x, axis=axis, keepdims=keepdims, dtype=dtype)
        if axis is None:
            axes: Axes = tuple(range(x.ndim))
        elif isinstance(axis, int):
            axes = (axis % x.ndim,)
        else:
            axes = tuple(sorted(a % x.ndim for a in axis))
        inner = []
        for a in reversed(range(x.ndim)):
            if a not in axes:
                break
            inner.append(a)
        total = base.sum(x, axis=tuple(inner), keepdims=True, dtype=out) if inner else x
        for a in axes:
            if a not in inner:
                total = axis_block_sum(base, total, a, out)
        if total.dtype != out:
            total = base.astype(total, out)
        return (
            total if keepdims else base.reshape(total, reduced_shape(tuple(x.shape), axes, False))
        )

    return sum_


# Operators that compose with themselves (or, for positive terms, with a sum) exactly in
# real arithmetic: the operator of the whole is the merge of the slabs' results.
MERGES = {
    "reduce_l1": "reduce_sum",
    "reduce_sum_square": "reduce_sum",
    "reduce_l2": "reduce_l2",
    "reduce_log_sum_exp": "reduce_log_sum_exp",
}


# Integer L1 and SumSquare wrap modulo 2**bits: the wrapped sum of wrapped partials is the
# wrapped total, bit for bit.
_MERGE_INTEGERS = frozenset({"reduce_l1", "reduce_sum_square"})


def every_axis_in_slabs(
    op: str,
    x: Array,
    axes: Axes,
    keepdims: bool,
    *,
    threaded: bool,
    elements: int = _threads.SLAB_ELEMENTS,
) -> Array | None:
    """Operator ``op`` (a key of :data:`MERGES`) of eager ``x`` over every axis, as the
    merge of its results on slabs of ``elements`` elements of the flattened data
    (``_threads.flat_slabs``): an
    element-wise step's temporaries are a slab's size, not the data's. Within the
    accuracy bound, not bit for bit (integer L1 and SumSquare: bit for bit). None where the
    data are not split, and for integer L2 and LogSumExp."""
    if len(axes) != x.ndim:
        return None
    xp = namespace_for(x)
    if op not in _MERGE_INTEGERS and _dtypes.is_integer(xp, x.dtype):
        return None  # an L2 or LogSumExp of integers is truncated: its slabs' do not merge
    from . import reduce

    def slab(part: Array) -> Array:
        return reduce(op, part, (0,), False, xp)

    parts = _threads.flat_slabs(x, slab, threaded=threaded, elements=elements)
    if parts is None:
        return None
    merged = reduce(MERGES[op], xp.stack(parts), (0,), False, xp)
    return xp.reshape(merged, (1,) * x.ndim) if keepdims else merged


def log_sum_exp_in_place(
    x: Array,
    axes: Axes,
    keepdims: bool,
    profile: Any,
    sum_exps: Callable[[Array, Array], Array] | None = None,
) -> Array | None:
    """The generic LogSumExp of eager float32 or float64 ``x`` (a library whose ``exp``
    takes ``out=``), with exp(x - shift) written over x - shift: one temporary of the
    data's size instead of two, and the same values bit for bit (the same calls of the
    library's shim in the same order, see ``anyreduce._agnostic._kernels._shifted_exps``).
    ``sum_exps(y, shift)``, where given, takes the sum of exp(y - shift) (keepdims)
    another way, with the same values. None for other dtypes and for no axes."""
    from .._agnostic._kernels import _keep, _log

    xp = namespace_for(x)
    if not axes or _dtypes.dtype_name(xp, x.dtype) not in ("float32", "float64"):
        return None
    dtype = x.dtype
    with profile.quiet():
        y = profile.lift(x)
        sx = profile.shim(xp)
        m = sx.max(y, axis=axes, keepdims=True)
        shift = sx.where(sx.isfinite(m), m, sx.zeros_like(m))
        if sum_exps is None:
            terms = y - shift
            sx.exp(terms, out=terms)
            total = sx.sum(terms, axis=axes, keepdims=True, dtype=y.dtype)
            del terms
        else:
            total = sum_exps(y, shift)
        result = _keep(sx, _log(sx, total) + shift, axes, keepdims)
        return profile.lower(xp, result, dtype)


#: Elements of a piece of :func:`in_pieces` of data of 4 bytes or more an element (half
#: as many of float16). The careful product's statistics hold about six float64
#: temporaries at once, 3 MiB a piece; an int64 mean's limbs three int64 ones.
PIECE = 2**16

#: Bytes of the block :func:`keep_freed_pieces` allocates and frees: glibc's heaps then
#: keep up to twice as much free memory, more than a piece's temporaries (3 MiB).
_KEPT_BYTES = 2**22


@functools.cache
def keep_freed_pieces() -> None:
    """Have glibc's malloc keep a piece's freed temporaries for the next piece.

    glibc hands the free memory at the top of a heap back to the system once it exceeds
    its trim threshold, which starts at 128 KiB and is raised to twice the size of the
    largest block it has mapped and then freed (up to 32 MiB; ``mallopt(3)``,
    ``M_MMAP_THRESHOLD``). A piece's temporaries, freed together, would then be given back
    and faulted in again page by page for every piece: float32 (4096, 8192) Prod on two
    threads, 190,000-205,000 page faults and 790-1130 ms a call. One untouched block of 4
    MiB, allocated and freed once a process, raises the threshold as any program that
    frees an array of that size does: no page faults, 300-460 ms. It costs no memory of
    its own (never touched), and changes nothing under another allocator or where the
    thresholds were set by hand, which stops the raising: Dask's ``distributed`` starts
    its workers with ``MALLOC_TRIM_THRESHOLD_=65536``, and there every piece still faults
    its temporaries in (the same Prod: 338,000 page faults, 1130-2240 ms).

    The dispatch calls it at a process's first eager call (``anyreduce._backends.reduce``):
    a generic kernel's two temporaries of 1 MiB were faulted in anew each call as well,
    int8 (256, 512) L2 on NumPy 830-930 us against 105."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not glibc
        return
    if not glibc:  # pragma: no cover - not glibc
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        malloc, free = libc.malloc, libc.free
    except (ImportError, OSError, AttributeError):  # pragma: no cover - no ctypes, no symbols
        return
    malloc.restype, malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    free.restype, free.argtypes = None, (ctypes.c_void_p,)
    free(malloc(_KEPT_BYTES))


def in_pieces(
    xp: Namespace,
    x: Array,
    axes: Axes,
    partial: Callable[..., tuple[Array, ...]],
    merge: Callable[..., tuple[Array, ...]],
    empty: tuple[float, ...],
    dtype: Any,
    *,
    itemsize: int | None = None,
) -> tuple[Array, ...]:
    """``partial`` of non-empty ``x`` taken over pieces of at most :data:`PIECE` elements,
    for ``anyreduce._agnostic.Context.parts``: ``x`` is cut along its first axis longer
    than one (a piece still too large along the next, and so on); the pieces' statistics
    are merged two at a time where that axis is reduced and joined where it is kept. The
    temporaries of the statistics are then a piece's size, not the data's. Pieces are
    sized by ``itemsize``, the bytes of an element of the data before they were lifted
    into a carrier (``x``'s own by default)."""
    size = math.prod(x.shape)
    itemsize = int(x.dtype.itemsize) if itemsize is None else itemsize
    elements = PIECE * min(itemsize, 4) // 4
    if size <= elements:
        return partial(xp, x, axes)
    keep_freed_pieces()
    axis = next(i for i, n in enumerate(x.shape) if n > 1)
    length = x.shape[axis]
    step = max(1, elements // (size // length))

    def piece(start: int) -> tuple[Array, ...]:
        index = tuple(
            slice(start, start + step) if i == axis else slice(None) for i in range(x.ndim)
        )
        return in_pieces(xp, x[index], axes, partial, merge, empty, dtype, itemsize=itemsize)

    starts = range(0, length, step)
    if axis not in axes:
        pieces = [piece(start) for start in starts]
        return tuple(xp.concat(list(column), axis=axis) for column in zip(*pieces, strict=True))
    merged = piece(0)
    for start in starts[1:]:
        pair = zip(merged, piece(start), strict=True)
        merged = merge(xp, tuple(xp.concat([m, p], axis=axis) for m, p in pair), (axis,))
    return merged


def statistics_in_pieces(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """The generic kernel, the statistics it takes as parts (the careful product's, an
    int64 mean's limb sums) taken by :func:`in_pieces`, and the careful form only where
    some slice needs it. None for data of fewer than two pieces."""
    if math.prod(x.shape) < 2 * PIECE:
        return None
    # Pieces of data held in a carrier (bfloat16 in float32) sized by the data's own
    # elements: bfloat16 (4096, 8192) Prod over the first axis, two threads, held 9.9-10.1%
    # of the input with pieces sized by the carrier's.
    parts = functools.partial(in_pieces, itemsize=int(x.dtype.itemsize))
    return run_careful_later(dataclasses.replace(profile, parts=parts), op, x, axes, keepdims)
