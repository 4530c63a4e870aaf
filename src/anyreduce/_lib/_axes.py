"""Axes and flag normalisation: the one place that turns user arguments into axes."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import array_api_compat
import numpy as np

from ._errors import AxisError
from ._memo import memo

__all__ = [
    "AxesLike",
    "check_flag",
    "merged_runs",
    "normalize",
    "normalize_axes",
    "reduced_shape",
]

AxesLike = int | Sequence[int] | Any | None
"""None, a Python int, a sequence of ints, or a 0-D/1-D integer array of any namespace."""


def check_flag(op: str, name: str, value: object) -> bool:
    """Return a boolean flag given as ``True``/``False`` or ONNX-style ``1``/``0``."""
    if value is True or value is False:  # the common case first: ~0.1 us a flag
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    index: object = None
    # An array is its value where it is 0-D, of bool or integer dtype, whatever its
    # library (PyTorch alone gives 0-D bools and one-element tensors ``__index__``).
    ndim = getattr(value, "ndim", 0) if _is_array(value) else None
    try:
        if ndim is None:
            index = operator.index(value)  # type: ignore[arg-type]
        elif ndim == 0:
            xa = array_api_compat.array_namespace(value)
            if xa.isdtype(value.dtype, "bool"):  # type: ignore[attr-defined]
                index = int(bool(value))
            elif xa.isdtype(value.dtype, "integral"):  # type: ignore[attr-defined]
                index = int(value)  # type: ignore[call-overload]
    except (TypeError, RuntimeError):  # a traced or meta-device array, without a value
        index = None
    if index in (0, 1):
        return bool(index)
    msg = f"{op}: {name} must be True, False, 1 or 0, got {value!r}"
    raise ValueError(msg)


def _is_array(value: object) -> bool:
    # Arrays (and NumPy scalars) have ``ndim``; Python ints, lists and the symbolic ints of
    # torch.compile(dynamic=True) do not. Asking a symbolic int for an array attribute is
    # a graph break (torch 2.13), and array-api-compat's test is cached with lru_cache,
    # which torch.compile warns about: both are asked of arrays only.
    return hasattr(type(value), "ndim") and bool(array_api_compat.is_array_api_obj(value))


def _axis_values(op: str, axes: object) -> list[int]:
    """Return ``axes`` as a list of Python ints, whatever form it came in."""
    if axes is None:
        return []
    if _is_array(axes):
        return _array_axis_values(op, axes)
    if isinstance(axes, Sequence) and not isinstance(axes, str | bytes):
        return [_one_axis(op, a) for a in axes]
    return [_one_axis(op, axes)]


def _array_axis_values(op: str, axes: Any) -> list[int]:
    xa = array_api_compat.array_namespace(axes)
    if not xa.isdtype(axes.dtype, "integral"):
        msg = f"{op}: axes must be integers, got an array of dtype {axes.dtype}"
        raise TypeError(msg)
    if axes.ndim == 0:
        return [_known_int(op, axes)]
    if axes.ndim == 1:
        # Axes decide the output shape, so they must be known on the host; this reads
        # metadata supplied by the caller, never the data being reduced.
        return [_known_int(op, axes[i]) for i in range(axes.shape[0])]
    msg = f"{op}: axes must be a 0-D or 1-D array, got shape {tuple(axes.shape)}"
    raise TypeError(msg)


def _known_int(op: str, value: Any) -> int:
    """An axis held in an array, as a Python int: a traced array (an argument of
    ``jax.jit``) or one without values (PyTorch's meta device) has none to give, and its
    library's own error would not say which argument it was."""
    try:
        return int(value)
    except (TypeError, RuntimeError):  # JAX's ConcretizationTypeError; PyTorch's meta
        kind = f"{type(value).__module__}.{type(value).__name__}"
        msg = (
            f"{op}: axes must have known values (they set the result's shape), got a "
            f"{kind} without them; pass Python ints (static arguments under jax.jit)"
        )
        raise TypeError(msg) from None


def _one_axis(op: str, axis: object) -> int:
    if isinstance(axis, bool | np.bool_):
        msg = f"{op}: axes must be integers, got {axis!r}"
        raise TypeError(msg)
    if _is_array(axis):
        array: Any = axis
        values = _array_axis_values(op, array)
        if len(values) == 1 and array.ndim == 0:
            return values[0]
        shape = tuple(array.shape)
        msg = f"{op}: each axis must be a single integer, got an array of shape {shape}"
        raise TypeError(msg)
    try:
        return operator.index(axis)  # type: ignore[arg-type]
    except TypeError:
        msg = f"{op}: axes must be integers, got {axis!r} of type {type(axis).__name__}"
        raise TypeError(msg) from None


def normalize(op: str, axes: AxesLike, ndim: int, noop_with_empty_axes: bool) -> tuple[int, ...]:
    """:func:`normalize_axes` with its defaults, for the public reductions' every call.

    Positional, and a tuple of ints (the common form) straight to the cache: ~0.2 us less
    than the general entry, a tenth of a small call's overhead.
    """
    if type(axes) is tuple:
        for a in axes:
            if type(a) is not int:
                break
        else:
            return _normalized(op, axes, ndim, noop_with_empty_axes, True, True)
    return normalize_axes(op, axes, ndim, noop_with_empty_axes=noop_with_empty_axes)


def normalize_axes(
    op: str,
    axes: AxesLike,
    ndim: int,
    *,
    noop_with_empty_axes: bool,
    allow_negative: bool = True,
    empty_means_all: bool = True,
) -> tuple[int, ...]:
    """Return the sorted, non-negative axes to reduce over.

    An empty tuple means "reduce over nothing": the caller applies only the element-wise
    part of the operator.
    """
    # The common forms (None, an int, a tuple or list of ints) are remembered: normalising
    # costs ~3 us a call, as much as numpy's whole sum of a small array. Plain loops and
    # type() tests, not all() over a generator: ~0.3 us less on a small call.
    kind = type(axes)
    if kind is tuple or kind is list:
        seq: Sequence[Any] = axes  # type: ignore[assignment]
        for a in seq:
            if type(a) is not int:
                break
        else:
            key = seq if kind is tuple else tuple(seq)
            return _normalized(op, key, ndim, noop_with_empty_axes, allow_negative, empty_means_all)
    elif axes is None or kind is int:
        return _normalized(op, axes, ndim, noop_with_empty_axes, allow_negative, empty_means_all)
    return _normalize(op, axes, ndim, noop_with_empty_axes, allow_negative, empty_means_all)


def _normalize(
    op: str,
    axes: AxesLike,
    ndim: int,
    noop_with_empty_axes: bool,
    allow_negative: bool,
    empty_means_all: bool,
) -> tuple[int, ...]:
    values = _axis_values(op, axes)
    if not values:
        if noop_with_empty_axes or not empty_means_all:
            return ()
        return tuple(range(ndim))
    seen: set[int] = set()
    for value in values:
        low = 0 if not allow_negative else -ndim
        if ndim == 0:
            msg = f"{op}: axis {value} is given for a rank-0 input, which has no axes"
            raise AxisError(msg)
        if not low <= value < ndim:
            valid = f"{low} to {ndim - 1}"
            msg = (
                f"{op}: axis {value} is out of range for an input of rank {ndim} "
                f"(valid axes are {valid})"
            )
            raise AxisError(msg)
        normal = value % ndim
        if normal in seen:
            msg = f"{op}: axis {value} is repeated in axes {values} for an input of rank {ndim}"
            raise AxisError(msg)
        seen.add(normal)
    return tuple(sorted(seen))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    """Return the shape of ``shape`` reduced over ``axes``."""
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


# Errors are raised, never cached; results are a few bytes per distinct call signature.
_normalized = memo(limit=4096)(_normalize)


def merged_runs(
    shape: tuple[int, ...], axes: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``shape`` with axes of length 1 dropped and adjacent axes that are all reduced (in
    ``axes``) or all kept merged, and the positions of the reduced ones in it."""
    dims: list[int] = []
    reduced: list[bool] = []
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if reduced and reduced[-1] == (i in axes):
            dims[-1] *= n
        else:
            dims.append(n)
            reduced.append(i in axes)
    return tuple(dims), tuple(i for i, r in enumerate(reduced) if r)
