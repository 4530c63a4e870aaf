"""NumPy: its workarounds and accelerators."""

from __future__ import annotations

from typing import Any

import array_api_compat

from .._lib._memo import library_key, memo
from ._base import ALL_DTYPES, ALL_OPS, Accelerator, Profile, run_kernel
from ._common import (
    MERGES,
    Shim,
    blocked_sum,
    every_axis_in_slabs,
    isdtype_with_bfloat16,
    log_sum_exp_in_place,
    named,
    numpy_carrier,
    numpy_logical,
    select_when_needed,
)

__all__ = ["PROFILE", "guarded", "numpy_quiet", "refuses"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]

_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
_GUARDED = frozenset({"reduce_sum", "reduce_mean", "reduce_l2", "reduce_prod", "reduce_log_sum"})


def recognises(xp: Namespace) -> bool:
    return named(xp, "numpy")


@memo(key=library_key)
def _shim(xp: Namespace) -> Namespace:
    # NumPy sums pairwise only along the contiguous trailing run of reduced axes and adds
    # the others term after term (numpy/numpy#9393): see blocked_sum.
    return Shim(xp, sum=blocked_sum(xp), isdtype=isdtype_with_bfloat16(xp))


def _lift(x: Array) -> Array:
    # bfloat16 in float32, big-endian data in native order: see numpy_carrier.
    carrier = numpy_carrier(x.dtype)
    return x if carrier is None else x.astype(carrier)


def refuses(x: Array) -> str | None:
    """Why ``x``, an ndarray or a subclass, is refused: a subclass whose meaning the
    reductions would drop (a mask, matrix semantics, units). None for plain data."""
    import numpy as np

    if type(x) is np.ndarray or isinstance(x, np.memmap):
        return None
    kind = type(x).__name__
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
    import numpy as np

    return np.errstate(all="ignore")


def _lower(xp: Namespace, result: Array, dtype: Any) -> Array:
    import numpy as np

    # NumPy reductions to rank 0 return NumPy scalars, not 0-D arrays.
    if isinstance(result, np.generic):
        result = np.asarray(result)
    return result if result.dtype == dtype else result.astype(dtype)


def _eager(x: Array) -> bool:
    import numpy as np

    return type(x) is np.ndarray


def guarded(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array:
    """The generic kernel, its careful form computed only where some slice needs it."""
    xp = array_api_compat.array_namespace(x)
    return run_kernel(profile, xp, op, x, axes, keepdims, select=select_when_needed)


def _float16_extreme(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array:
    import numpy as np

    ufunc: Any = np.maximum if op == "reduce_max" else np.minimum
    if not axes:
        return None
    result = ufunc.reduce(x, axis=axes, keepdims=keepdims, dtype=np.float64)
    return np.asarray(result).astype(x.dtype)


ACCELERATORS = (
    Accelerator(
        name="careful-when-needed",
        ops=_GUARDED,
        dtypes=_FLOATS,
        covers="any layout; the careful form only for data with a suspect slice",
        earned=(
            "float32 (4096, 8192) Sum over the last axis: the careful form computed always "
            "doubles the time of np.sum; here one isfinite test on the result"
        ),
        exact=True,
        run=guarded,
    ),
    Accelerator(
        name="float16-extremes-in-float64",
        ops=frozenset({"reduce_max", "reduce_min"}),
        dtypes=frozenset({"float16"}),
        covers="any layout",
        earned=(
            "NumPy's float16 maximum loop is not vectorised: float16 (4096, 8192) took "
            "185-200 ms, through float64 buffers 32-36 ms (numpy 2.4)"
        ),
        exact=True,
        run=_float16_extreme,
    ),
)


def _threaded(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    from . import _threads

    def slab(part: Array) -> Array:
        from . import reduce

        return reduce(op, part, axes, keepdims, array_api_compat.array_namespace(part))

    return _threads.split(x, axes, keepdims, slab, wide=op in _NO_TEMPORARY)


# Operators whose kernels make no temporary of the data's size.
_NO_TEMPORARY = frozenset(
    {"reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min", "reduce_log_sum"}
)


def _log_sum_exp(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    return log_sum_exp_in_place(x, axes, keepdims, profile)


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
    return every_axis_in_slabs(op, x, axes, keepdims, threaded=True)


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
)

_THREADS = Accelerator(
    name="threads",
    ops=ALL_OPS,
    dtypes=ALL_DTYPES,
    covers=(
        "ndarrays of at least 2**21 elements with a kept axis long enough for two slabs of "
        "about 2**20 elements, each at least 2 positions wide (1 along a C-ordered axis "
        "before every reduced axis): NumPy then runs the same loop as over the whole"
    ),
    earned=(
        "float32 (4096, 8192) over the last axis on 2 cores: Sum 10-11 -> 5.2-6.3 ms, "
        "LogSumExp 165 -> 93 ms (numpy 2.4)"
    ),
    exact=True,
    run=_threaded,
)

PROFILE = Profile(
    name="numpy",
    recognises=recognises,
    shim=_shim,
    lift=_lift,
    lower=_lower,
    logical=numpy_logical,
    refuses=refuses,
    quiet=numpy_quiet,
    eager=_eager,
    accelerators=(_THREADS, _EVERY_AXIS, _LOG_SUM_EXP_IN_PLACE, *ACCELERATORS),
)
