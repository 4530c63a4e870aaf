"""Dask: its workarounds (no accelerators: its arrays are lazy)."""

from __future__ import annotations

import functools
from typing import Any

import array_api_compat

from .._lib._memo import library_key, memo
from ._base import Profile
from ._common import (
    Shim,
    in_pieces,
    isdtype_with_bfloat16,
    named,
    numpy_carrier,
    numpy_logical,
)

__all__ = ["PROFILE"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]


def recognises(xp: Namespace) -> bool:
    return named(xp, "dask.array")


def _chunk(block: Array) -> Array:
    """A chunk as NumPy or CuPy: a Dask array admitted for its NumPy meta may still hold
    another library's chunk (a torch tensor among NumPy ones), whose own sum and prod
    reject NumPy's dtypes; it is read as NumPy."""
    import numpy as np

    if isinstance(block, np.ndarray) or array_api_compat.is_cupy_array(block):
        return block
    return np.asarray(block)


def _tree_step(block: Array, axis: Any, keepdims: bool, *, high: bool, identity: Any) -> Array:
    import numpy as np

    bxp = array_api_compat.array_namespace(block)
    axes = tuple(axis)
    if any(block.shape[a] == 0 for a in axes):
        shape = tuple(
            1 if i in axes else n for i, n in enumerate(block.shape) if keepdims or i not in axes
        )
        return bxp.full(shape, identity, dtype=block.dtype, device=array_api_compat.device(block))
    with np.errstate(all="ignore"):
        reduce = bxp.max if high else bxp.min
        return reduce(block, axis=axes, keepdims=keepdims)


def _identity(xp: Namespace, dtype: Any, high: bool) -> Any:
    if xp.isdtype(dtype, "bool"):
        return not high
    if xp.isdtype(dtype, "real floating"):
        return -float("inf") if high else float("inf")
    info = xp.iinfo(dtype)
    return int(info.min if high else info.max)


def _extreme(xp: Namespace, high: bool) -> Any:
    """Max or min chunk by chunk, then up a tree of the chunk results.

    Dask's own fail on zero-size chunks of a 2-D or larger array (dask 2026.8): the empty
    chunk's partial is an empty 1-D array that the combine step cannot concatenate with the
    others (dask/dask#9268).
    """

    def extreme(x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        import dask.array

        da: Any = dask.array  # untyped
        axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
        step = functools.partial(_tree_step, high=high, identity=_identity(xp, x.dtype, high))
        return da.reduction(
            x,
            step,
            step,
            combine=step,
            axis=axes,
            keepdims=keepdims,
            dtype=x.dtype,
            concatenate=True,
        )

    return extreme


def _chunk_sum(block: Array, axis: Any, keepdims: bool, *, dtype: Any) -> Array:
    from . import profile_for

    bxp = array_api_compat.array_namespace(block)
    profile = profile_for(bxp)
    with profile.quiet():
        return profile.shim(bxp).sum(block, axis=tuple(axis), keepdims=keepdims, dtype=dtype)


def _sum(xp: Namespace) -> Any:
    """Float sums chunk by chunk in the chunks' own library, up a tree of chunk sums.

    Dask's own sum takes NumPy's within each chunk, which adds every axis but the
    contiguous trailing run term after term (numpy/numpy#9393): each chunk is summed the
    way anyreduce sums NumPy data instead (blocked), and NumPy's warnings stay inside.
    """

    def sum_(x: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
        out = x.dtype if dtype is None else dtype
        if not xp.isdtype(out, "real floating"):
            return xp.sum(x, axis=axis, keepdims=keepdims, dtype=dtype)
        import dask.array

        da: Any = dask.array  # untyped
        axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
        step = functools.partial(_chunk_sum, dtype=out)
        return da.reduction(
            x,
            step,
            step,
            combine=step,
            axis=axes,
            keepdims=keepdims,
            dtype=out,
            concatenate=True,
        )

    return sum_


def _chunk_parts(
    block: Array, *, partial: Any, merge: Any, axes: Axes, empty: tuple[float, ...], dtype: Any
) -> Array:
    from . import profile_for

    bxp = array_api_compat.array_namespace(block)
    if any(block.shape[a] == 0 for a in axes):
        shape = tuple(1 if i in axes else n for i, n in enumerate(block.shape))
        device = array_api_compat.device(block)
        parts = tuple(bxp.full(shape, v, dtype=dtype, device=device) for v in empty)
    else:
        profile = profile_for(bxp)
        with profile.quiet():
            # In pieces: the statistics of a careful form make several temporaries of
            # the data's size, which for a whole chunk of 8 MB outgrew a 150 MB worker.
            parts = in_pieces(profile.shim(bxp), block, axes, partial, merge, empty, dtype)
    return bxp.stack(parts)


def _by_chunks(
    xp: Namespace,
    x: Array,
    axes: Axes,
    partial: Any,
    merge: Any,
    empty: tuple[float, ...],
    dtype: Any,
) -> tuple[Array, ...]:
    """``partial`` of each chunk in the chunk's own library, then ``merge`` of the chunks'
    results (one element per chunk along ``axes``): one pass over the data, chunk by
    chunk, where taking a statistic of the whole first (the shift of LogSumExp, the scale
    of L2) would hold every chunk until it is known."""
    import dask.array

    da: Any = dask.array  # untyped
    chunks = tuple((1,) * len(c) if i in axes else c for i, c in enumerate(x.chunks))
    stacked = da.map_blocks(
        functools.partial(
            _chunk_parts, partial=partial, merge=merge, axes=axes, empty=empty, dtype=dtype
        ),
        x,
        new_axis=0,
        chunks=((len(empty),), *chunks),
        dtype=dtype,
        meta=da.utils.meta_from_array(x, x.ndim + 1, dtype=dtype),
    )
    merged: tuple[Array, ...] = merge(xp, tuple(stacked[i, ...] for i in range(len(empty))), axes)
    return merged


def _chunk_prod(block: Array, axis: Any, keepdims: bool, *, dtype: Any) -> Array:
    import numpy as np

    bxp = array_api_compat.array_namespace(block)
    with np.errstate(all="ignore"):
        return bxp.prod(block, axis=tuple(axis), keepdims=keepdims, dtype=dtype)


def _prod(xp: Namespace) -> Any:
    """Products chunk by chunk, up a tree, with NumPy's overflow warnings kept inside."""

    def prod(x: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
        import dask.array

        da: Any = dask.array  # untyped
        out = x.dtype if dtype is None else dtype
        axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
        step = functools.partial(_chunk_prod, dtype=out)
        return da.reduction(
            x,
            step,
            step,
            combine=step,
            axis=axes,
            keepdims=keepdims,
            dtype=out,
            concatenate=True,
        )

    return prod


def _quietly(name: str, *args: Any) -> Any:
    import numpy as np

    with np.errstate(all="ignore"):
        return getattr(np, name)(*args)


def _elementwise(xp: Namespace, name: str) -> Any:
    """``xp.<name>`` computed chunk by chunk with NumPy's IEEE warnings kept inside.

    Dask computes later, outside anyreduce: NumPy's warnings about the values the contract
    asks for (log(0) = -inf, a square beyond the range = inf) would reach the caller then.
    """
    base = getattr(xp, name)

    def quiet(*args: Any) -> Any:
        import dask.array

        da: Any = dask.array  # untyped
        planned = base(*args)  # the dtype and shape of the result
        return da.map_blocks(
            functools.partial(_quietly, name), *args, dtype=planned.dtype, chunks=planned.chunks
        )

    return quiet


def _astype(xp: Namespace) -> Any:
    def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
        import dask.array
        import numpy as np

        da: Any = dask.array  # untyped
        if x.dtype == dtype:
            return xp.astype(x, dtype, copy=copy)

        def cast(block: Any) -> Any:
            with np.errstate(all="ignore"):
                return block.astype(dtype)

        return da.map_blocks(cast, x, dtype=dtype)

    return astype


@memo(key=library_key)
def _shim(xp: Namespace) -> Namespace:
    return Shim(
        xp,
        max=_extreme(xp, True),
        min=_extreme(xp, False),
        sum=_sum(xp),
        prod=_prod(xp),
        astype=_astype(xp),
        **{
            name: _elementwise(xp, name)
            for name in ("add", "subtract", "multiply", "divide", "pow", "log", "exp", "sqrt")
        },
        isdtype=isdtype_with_bfloat16(xp),
    )


def _lift(x: Array) -> Array:
    # Every chunk as NumPy (see _chunk); bfloat16 in float32, big-endian data in native
    # order (numpy_carrier).
    import numpy as np

    if type(x._meta) is np.ndarray:
        x = x.map_blocks(_chunk, dtype=x.dtype, meta=x._meta)
    carrier = numpy_carrier(x.dtype)
    return x if carrier is None else x.astype(carrier)


def _refuses(x: Array) -> str | None:
    """Dask arrays of NumPy chunks only: the chunk functions and Dask's own steps assume
    them (chunks of torch tensors fail inside torch or array-api-compat)."""
    import numpy as np

    from ._numpy import refuses

    meta = getattr(x, "_meta", None)
    if type(meta) is np.ndarray or array_api_compat.is_cupy_array(meta):
        return None
    if isinstance(meta, np.ndarray):
        reason = refuses(meta)
        return None if reason is None else f"the chunks of a Dask array: {reason}"
    kind = f"{type(meta).__module__}.{type(meta).__name__}"
    return (
        f"data is a Dask array of {kind} chunks; anyreduce reduces Dask arrays of NumPy "
        "chunks (convert them with data.map_blocks(np.asarray))"
    )


PROFILE = Profile(
    name="dask",
    recognises=recognises,
    shim=_shim,
    lift=_lift,
    logical=numpy_logical,
    refuses=_refuses,
    parts=_by_chunks,
)
