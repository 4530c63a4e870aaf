"""The operator registry and :func:`run`, the one entry point every public layer goes
through: empty sets, then the backend dispatch (``anyreduce._backends.reduce``) over the
generic kernels (``anyreduce._agnostic``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from array_api_compat import device as device_of

from .. import _backends
from . import _dtypes
from ._axes import reduced_shape

__all__ = ["OPS", "Op", "run"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]


@dataclass(frozen=True)
class Op:
    """One reduction operator: its names, whether it takes bool, its value over an empty set."""

    name: str
    onnx_name: str
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
        Op("reduce_sum", "ReduceSum", False, _zero),
        Op("reduce_sum_square", "ReduceSumSquare", False, _zero),
        Op("reduce_l1", "ReduceL1", False, _zero),
        Op("reduce_l2", "ReduceL2", False, _zero),
        Op("reduce_mean", "ReduceMean", False, _nan_or_zero),
        Op("reduce_prod", "ReduceProd", False, lambda xp, dtype: 1),
        Op("reduce_max", "ReduceMax", True, _lowest),
        Op("reduce_min", "ReduceMin", True, _highest),
        # log(0) = -inf; integers (older ONNX opsets) saturate it at the dtype minimum.
        Op("reduce_log_sum", "ReduceLogSum", False, _lowest),
        Op("reduce_log_sum_exp", "ReduceLogSumExp", False, _lowest),
    )
}


def _unknown(n: Any) -> bool:
    return n is None or (isinstance(n, float) and math.isnan(n))


def run(
    op: Op,
    x: Array,
    axes: Axes,
    keepdims: bool,
    *,
    xp: Namespace,
    label: str | None = None,
    profile: _backends.Profile | None = None,
) -> Array:
    """Reduce validated data ``x`` over normalised ``axes``; the caller's array kind out.
    Errors start with ``label`` (default: the operator's name, ``"reduce_sum"``).
    ``profile``: ``xp``'s library's, where the caller has it (one look-up less)."""
    shape = x.shape
    # The test for a float (NaN) length runs in C: a generator costs 1 us a call.
    if None in shape or float in map(type, shape):
        # Dask after boolean indexing: a reduced axis of unknown length leaves the mean's
        # count unknown. Unknown lengths of the other axes pass to the result, as in Dask.
        unknown = [a for a in axes if _unknown(shape[a])]
        if unknown:
            msg = (
                f"{label or op.name}: axis {unknown[0]} of data has unknown length and is "
                f"reduced (shape {tuple(x.shape)}); for a Dask array call "
                "data.compute_chunk_sizes() first"
            )
            raise ValueError(msg)
    if 0 in x.shape:
        return _over_empty(op, x, axes, keepdims, xp)
    return _backends.reduce(op.name, x, axes, keepdims, xp, profile)


def _over_empty(op: Op, x: Array, axes: Axes, keepdims: bool, xp: Namespace) -> Array:
    """The identity of ``op`` (an empty reduced set) or an empty result, in the output's shape.

    A float result is the identity plus zero times the sum of ``x``: the same values, and
    a result that differentiates (to zeros) like ``torch.sum`` of an empty batch does.
    """
    dtype = x.dtype
    shape = reduced_shape(tuple(x.shape), axes, keepdims)
    # Broadcast, not xp.full: Dask's automatic chunking of a shape with zero-length
    # axes divides by zero (dask 2026.8, full((0, 0, 1000), 1.0); dask/dask#12537).
    value = xp.asarray(op.empty_value(xp, dtype), dtype=dtype, device=device_of(x))
    result = xp.asarray(xp.broadcast_to(value, shape), copy=True)
    if axes and _dtypes.is_float(xp, dtype):
        result = result + xp.sum(x, axis=axes, keepdims=keepdims) * 0
    # The library's own form of a result (NumPy's arithmetic on rank 0 gives a scalar).
    return _backends.profile_for(xp).lower(xp, result, dtype)
