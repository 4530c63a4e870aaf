"""Blocked loops for large NumPy arrays with a few NumPy calls a block: L1 and LogSumExp.

The general blocked loop (``_blocks.map_sum`` with ``_blocks.BlockTotals``) makes about
40 Python calls a block around its arithmetic (views, plans, wrappers). On one thread
that is 10-15% of L1's time; on two, where :mod:`._threads` runs a loop on each, about a
third. Float32 (4096, 8192), general loop then this one (medians of 40 interleaved
rounds, numpy 2.4.6, OpenBLAS 0.3.31, 2 cores): over every axis 13.1 -> 9.0 ms, over
the last axis 11.8 -> 8.6 ms, over axis 0 15.2 -> 10.7 ms (with the row slabs of
``_threads._ROW_SLABS``); ``np.sum`` took 8-10 ms.

The arithmetic is the general loop's. For L1: |x| written into a reused buffer of
``_backends.block_elements`` elements, then summed by BLAS dot products with a vector of
ones (``_DOT`` terms a dot along a row, ``_ROWS`` rows a dot down a column, nested) and
NumPy's pairwise sums, so the error bound is the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _backends
from ._axes import reduced_shape

__all__ = ["abs_sum", "shifted_exp_rows"]

Array = Any
Axes = tuple[int, ...]
#: Merges LogSumExp's (shifts, sums) over axis 0, keeping it.
Merge = Callable[[Array, Array], tuple[Array, Array]]

#: Terms of a dot product along a row: ``_blocks._DOT_BLOCK``.
_DOT = 128
#: Rows of a dot product down columns: ``_backends._LEADING_ROWS``.
_ROWS = 16
#: Blocks' LogSumExp statistics held before they are merged: ``_blocks._MERGE_FAN_IN``.
_MERGE_FAN_IN = 8
#: Row length of the matrix view that sums over every axis takes: 64 dots a row.
_FLAT_ROW = 64 * _DOT


def abs_sum(x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array | None:
    """Sum of |x| over ``axes`` in ``dtype``, for a NumPy float32 or float64 ``ndarray``
    of more than one block in that dtype, over a leading or trailing run of axes (or all);
    None elsewhere, where the general loop applies."""
    block = _block(x, axes)
    if block is None or x.dtype != dtype:
        return None
    layout = _layout(x, axes)
    if layout == _EVERY:
        total = _every(x, block)
    elif layout == _TRAILING:
        total = _trailing(_matrix(x, x.ndim - len(axes)), block)
    elif layout == _LEADING:
        total = _leading(_matrix(x, len(axes)), block)
    else:
        return None
    return None if total is None else total.reshape(reduced_shape(x.shape, axes, keepdims))


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_EVERY, _TRAILING, _LEADING = "every", "trailing", "leading"


def _block(x: Array, axes: Axes) -> int | None:
    """Elements of the reused buffer for ``x`` (``_backends.block_elements``), or None
    where the loops here do not apply: not a float32 or float64 ``ndarray``, no axes, or
    data of at most one block (the general path takes it whole)."""
    if type(x) is not np.ndarray or x.dtype not in _FLOATS or not axes:
        return None
    block = _backends.block_elements(np)
    return None if block is None or x.size <= block else block


def _layout(x: Array, axes: Axes) -> str | None:
    """Whether ``axes`` are every axis of ``x``, a trailing run or a leading run; None for
    any other set."""
    ndim, count = x.ndim, len(axes)
    if count == ndim:
        return _EVERY
    if axes == tuple(range(ndim - count, ndim)):
        return _TRAILING
    if axes == tuple(range(count)):
        return _LEADING
    return None


def _matrix(x: Array, split: int) -> Array | None:
    """``x`` as a matrix of rows ``x.shape[:split]`` by columns, a view; None if that takes
    a copy."""
    shape = (math.prod(x.shape[:split]), math.prod(x.shape[split:]))
    try:
        return np.reshape(x, shape, copy=False)
    except ValueError:
        return None


def _flat_rows(x: Array) -> tuple[Array, Array] | None:
    """Every element of ``x`` as rows of ``_FLAT_ROW`` and the fewer left over, views;
    None if that takes a copy."""
    try:
        flat = np.reshape(x, (-1,), copy=False)
    except ValueError:
        return None
    head = flat.size - flat.size % _FLAT_ROW
    return flat[:head].reshape(-1, _FLAT_ROW), flat[head:]


def _trailing_rows_per_block(width: int, block: int) -> int | None:
    """Rows a block holds where each row is summed as dots of ``_DOT`` terms; None where
    rows are not a whole number of dots or one row exceeds a block."""
    return None if width % _DOT or width > block else block // width


def _leading_rows_per_block(width: int, block: int) -> int | None:
    """Rows a block holds, a multiple of ``_ROWS``, where columns are summed by dots of
    ``_ROWS`` rows; None where ``_ROWS`` rows exceed a block or rows are narrow (the
    general loop regroups those)."""
    per_block = (block // width) // _ROWS * _ROWS
    return None if per_block == 0 or width < 2 * _DOT else per_block


class _RowDots:
    """A reused buffer of ``rows`` by ``width`` and the sums of its first rows, each row
    as dots of ``_DOT`` terms with a vector of ones, the dots added pairwise."""

    def __init__(self, rows: int, width: int, dtype: Any) -> None:
        self.dots = width // _DOT
        self.buffer = np.empty((rows, width), dtype=dtype)
        self._pieces = self.buffer.reshape(rows * self.dots, _DOT)
        self._products = np.empty(rows * self.dots, dtype=dtype)
        self._ones = np.ones(_DOT, dtype=dtype)

    def sum_rows(self, count: int, out: Array) -> None:
        """The sums of the buffer's first ``count`` rows, written into ``out``."""
        n = count * self.dots
        np.matmul(self._pieces[:n], self._ones, out=self._products[:n])
        np.add.reduce(self._products[:n].reshape(count, self.dots), 1, out=out)


def _every(x: Array, block: int) -> Array | None:
    """Sum over every element: rows of ``_FLAT_ROW`` summed as :func:`_trailing` does,
    the row sums and the remainder by NumPy's pairwise sum."""
    flat = _flat_rows(x)
    rows = None if flat is None else _trailing(flat[0], block)
    if flat is None or rows is None:
        return None
    total = np.add.reduce(rows)
    if flat[1].size:
        total = total + np.add.reduce(np.absolute(flat[1]))
    return np.asarray(total)


def _trailing(matrix: Array | None, block: int) -> Array | None:
    """Row sums of |matrix| (see :class:`_RowDots`); None as
    :func:`_trailing_rows_per_block`."""
    if matrix is None:
        return None
    rows, width = matrix.shape
    per_block = _trailing_rows_per_block(width, block)
    if per_block is None:
        return None
    dots = _RowDots(per_block, width, matrix.dtype)
    buffer, absolute = dots.buffer, np.absolute
    out = np.empty(rows, dtype=matrix.dtype)
    for start in range(0, rows, per_block):
        stop = min(start + per_block, rows)
        absolute(matrix[start:stop], out=buffer[: stop - start])
        dots.sum_rows(stop - start, out[start:stop])
    return out


def _leading(matrix: Array | None, block: int) -> Array | None:
    """Column sums of |matrix|: blocks of rows as nested dots of ``_ROWS`` rows, the block
    sums folded ``_ROWS`` at a time (as the general loop does: a row of sums held per
    block, not one per block of the data). None as :func:`_leading_rows_per_block`."""
    if matrix is None:
        return None
    rows, width = matrix.shape
    per_block = _leading_rows_per_block(width, block)
    if per_block is None:
        return None
    buffer = np.empty((per_block, width), dtype=matrix.dtype)
    ones = np.ones(_ROWS, dtype=matrix.dtype)
    sums = np.empty((_ROWS, width), dtype=matrix.dtype)
    held = 0
    for start in range(0, rows, per_block):
        stop = min(start + per_block, rows)
        values = np.absolute(matrix[start:stop], out=buffer[: stop - start])
        sums[held] = _columns(values, ones)
        held += 1
        if held == _ROWS:
            sums[0] = np.add.reduce(sums, 0)
            held = 1
    return _columns(sums[:held], ones)


def _columns(values: Array, ones: Array) -> Array:
    """Column sums of C-ordered ``values``: dots of ``_ROWS`` rows, nested; a remainder of
    fewer than ``_ROWS`` rows is added to the first partial sum."""
    width = values.shape[1]
    while values.shape[0] > _ROWS:
        groups = values.shape[0] // _ROWS
        head = groups * _ROWS
        sums = np.matmul(ones, values[:head].reshape(_ROWS, groups * width))
        sums = sums.reshape(groups, width)
        if head < values.shape[0]:
            sums[0] += np.add.reduce(values[head:], 0)
        values = sums
    return np.add.reduce(values, 0)


def shifted_exp_rows(y: Array, axes: Axes, merge: Merge) -> tuple[Array, Array, bool] | None:
    """LogSumExp's statistics of a NumPy float32 or float64 ``y`` over a trailing or
    leading run of axes (or all), from a matrix view: ``(shifts, sums, to_merge)``, each
    shift a maximum (0 where that is not finite) and each sum that of exp(values - shift).
    Over trailing axes there is one pair per row, as columns, and ``to_merge`` is false.
    Over every axis they are per row too, over leading axes per block of rows, and
    ``to_merge`` is true: the pairs are to be merged over axis 0 by ``merge``, with
    which the loop over leading axes folds its blocks' pairs as it goes. None where the
    general loop applies.

    The general loop's steps (``_ops._shifted_exps``) with fewer calls a block; over
    trailing axes the same values bit for bit. Float32 (4096, 8192) on two threads took
    45.7 against 50.4 ms over the last axis, 43.5 against 53.6 ms over every axis and
    53.8 against 59.2 ms over axis 0 (medians of 15-41 interleaved rounds; numpy 2.4.6,
    2 cores, where exp alone takes 61 ms on one).
    """
    block = _block(y, axes)
    if block is None:
        return None
    layout = _layout(y, axes)
    if layout == _EVERY:
        flat = _flat_rows(y)
        rows = None if flat is None else _shifted_exp_trailing(flat[0], block)
        if flat is None or rows is None:
            return None
        shifts, sums = rows
        if flat[1].size:
            tail = _shifted_exp_tail(flat[1])
            shifts = np.concatenate([shifts, tail[0]])
            sums = np.concatenate([sums, tail[1]])
        return shifts, sums, True
    if layout == _TRAILING:
        rows = _shifted_exp_trailing(_matrix(y, y.ndim - len(axes)), block)
        return None if rows is None else (*rows, False)
    if layout == _LEADING:
        blocks = _shifted_exp_leading(_matrix(y, len(axes)), block, merge)
        return None if blocks is None else (*blocks, True)
    return None


def _shifted_exp_trailing(matrix: Array | None, block: int) -> tuple[Array, Array] | None:
    """Per row, as columns: the maximum (0 where not finite) and the sum of exp(row -
    maximum), summed as :func:`_trailing` sums |x|. None as there."""
    if matrix is None:
        return None
    rows, width = matrix.shape
    per_block = _trailing_rows_per_block(width, block)
    if per_block is None:
        return None
    dtype = matrix.dtype
    dots = _RowDots(per_block, width, dtype)
    shifts = np.empty((rows, 1), dtype=dtype)
    sums = np.empty((rows, 1), dtype=dtype)
    maximum, isfinite = np.maximum.reduce, np.isfinite
    write = _backends.write_elementwise
    with _backends.computing(np):  # exp(-inf) = 0 and NaN by IEEE rules, unwarned
        for start in range(0, rows, per_block):
            stop = min(start + per_block, rows)
            values = matrix[start:stop]
            shift = maximum(values, axis=1, out=shifts[start:stop], keepdims=True)
            shift[~isfinite(shift)] = 0  # -inf, +inf and NaN rows unshifted
            write("exp_shift", values, dots.buffer[: stop - start], shift)
            dots.sum_rows(stop - start, sums[start:stop, 0])
    return shifts, sums


def _shifted_exp_leading(
    matrix: Array | None, block: int, merge: Merge
) -> tuple[Array, Array] | None:
    """The column maxima (0 where not finite) and the column sums of exp(rows - maxima),
    by blocks of rows, merged ``_MERGE_FAN_IN`` blocks at a time by ``merge``, as rows.
    None as :func:`_leading_rows_per_block`."""
    if matrix is None:
        return None
    rows, width = matrix.shape
    per_block = _leading_rows_per_block(width, block)
    if per_block is None:
        return None
    dtype = matrix.dtype
    buffer = np.empty((per_block, width), dtype=dtype)
    ones = np.ones(_ROWS, dtype=dtype)
    shifts = np.empty((_MERGE_FAN_IN, width), dtype=dtype)
    sums = np.empty((_MERGE_FAN_IN, width), dtype=dtype)
    maximum, isfinite = np.maximum.reduce, np.isfinite
    write = _backends.write_elementwise
    held = 0
    with _backends.computing(np):
        for start in range(0, rows, per_block):
            stop = min(start + per_block, rows)
            values = matrix[start:stop]
            shift = maximum(values, axis=0, out=shifts[held])
            shift[~isfinite(shift)] = 0
            exps = write("exp_shift", values, buffer[: stop - start], shift[None, :])
            sums[held] = _columns(exps, ones)
            held += 1
            if held == _MERGE_FAN_IN:
                shifts[:1], sums[:1] = merge(shifts, sums)
                held = 1
    return shifts[:held], sums[:held]


def _shifted_exp_tail(values: Array) -> tuple[Array, Array]:
    """The shift and sum of exp of the fewer than ``_FLAT_ROW`` values left over."""
    with _backends.computing(np):
        shift = np.max(values)
        shift = shift if np.isfinite(shift) else values.dtype.type(0)
        total = np.add.reduce(np.exp(values - shift))
    return np.full((1, 1), shift, dtype=values.dtype), np.full((1, 1), total, dtype=values.dtype)
