"""Sums of an element-wise function of the data, evaluated block by block.

``sum(f(x))`` written plainly makes a temporary as large as ``x``: on eager backends that
is a second pass over memory and, for 128 MB of data, 128 MB more held at once. Here the
data are split into blocks of leading rows (views), ``f`` runs on one block at a time and
the block sums are added, so temporaries stay cache-sized. How large a block may be is
the backend layer's call (``_backends.block_elements``); backends that fuse the
element-wise step into the reduction get the plain expression.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import _backends
from ._axes import merged_runs, reduced_shape
from ._kernels import rsum, trailing_rows

__all__ = ["BlockTotals", "map_merge", "map_sum", "square_sum"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]
#: Takes an array broadcastable against the data (keepdims shape) to its part for a block.
Part = Callable[[Array], Array]
_FAN_IN = 16
#: Blocks merged at a time by :func:`map_merge`: a merge holds several temporaries the
#: size of its joined statistics (a row each, over axis 0), so fewer than for sums.
_MERGE_FAN_IN = 8
#: Terms per dot product of :func:`square_sum`: short enough that the dot's own running
#: sums stay accurate, long enough that each call does real work.
_DOT_BLOCK = 128
#: Rows narrower than this are not squared in groups by :func:`_leading_square_sum`.
_NARROW_GROUPS = 32


def _whole(companion: Array) -> Array:
    return companion


def _rows(start: int, stop: int) -> Part:
    def part(companion: Array) -> Array:
        return companion if companion.shape[0] == 1 else companion[start:stop, ...]

    return part


#: Per-block statistics (keepdims), given the block, the axes and a scratch view or None.
Partial = Callable[[Array, Axes, "Array | None"], tuple[Array, ...]]
#: Statistics of several blocks, joined along axis 0, merged into one set (keepdims).
Merge = Callable[[tuple[Array, ...], Axes], tuple[Array, ...]]


def _layout(xp: Namespace, x: Array, scratch: bool) -> tuple[int, int, bool, int | None]:
    """Rows of ``x`` along axis 0, rows per block, whether blocks write a scratch buffer,
    and the most elements a block may hold (None where the backend does not block)."""
    block = _backends.block_elements(xp)
    rows = x.shape[0] if x.ndim else 1
    per_block = max(1, block // max(1, math.prod(x.shape[1:]))) if block else rows
    limit = _backends.scratch_elements(xp, x) if scratch else None
    scratch_rows = _backends.rows_in(x, limit)
    if scratch_rows is not None:
        return rows, scratch_rows, True, limit
    return rows, per_block, False, block


#: Fewest rows per block along axis 0, when it is reduced, below which blocks are taken
#: along a kept axis instead (:class:`_Panels`).
_PANEL_ROWS = 16
#: Shortest contiguous run, in elements, of the rows of such a block.
_PANEL_RUN = 256


class _Panels:
    """Blocks of ``x`` taken along its first kept axis, for reductions whose axis 0 is
    reduced and whose rows are too wide for several to fit in a block.

    Blocks of one or two wide rows each give per-block results as large as the whole
    result, which are then merged: for float32 (64, 32, 16384) over axis 0, L1 took
    57 ms on NumPy against 7.4 ms for the sum and 26 ms for ``np.abs(x).sum(0)``, and
    LogSumExp 256 ms against 68 ms for the max-shifted expression (its merges take exp of
    every per-block result). Here adjacent reduced and kept axes are merged (a view) and
    each block is every reduced row of a run of columns: each block reduces completely
    and the blocks' results are joined.
    """

    def __init__(self, xp: Namespace, view: Array, over: Axes, axis: int, width: int) -> None:
        self.view, self.over, self.axis, self.width = view, over, axis, width
        self._lead = (slice(None),) * axis
        self._kept = tuple(1 if i in over else n for i, n in enumerate(view.shape))
        self._xp = xp

    @classmethod
    def plan(
        cls, xp: Namespace, x: Array, axes: Axes, per_block: int, budget: int | None
    ) -> _Panels | None:
        """The panels for ``x`` over ``axes``, or None where row blocks serve."""
        if budget is None or per_block >= _PANEL_ROWS or 0 not in axes or len(axes) == x.ndim:
            return None
        dims, over = merged_runs(tuple(x.shape), axes)
        if not over or over[0] != 0 or len(over) == len(dims):
            return None
        axis = next(i for i in range(len(dims)) if i not in over)
        width = min(budget // (math.prod(dims) // dims[axis]), dims[axis])
        if width < 1 or width * math.prod(dims[axis + 1 :]) < _PANEL_RUN:
            return None
        try:
            view = xp.reshape(x, dims, copy=False)
        except (ValueError, AttributeError, TypeError):
            return None  # no view without a copy
        return cls(xp, view, over, axis, width)

    def blocks(self) -> list[tuple[int, int, Array]]:
        n = self.view.shape[self.axis]
        spans = [(start, min(start + self.width, n)) for start in range(0, n, self.width)]
        return [(start, stop, self.view[self._index(start, stop)]) for start, stop in spans]

    def _index(self, start: int, stop: int) -> tuple[Any, ...]:
        return (*self._lead, slice(start, stop), ...)  # the standard asks for every axis

    def part(self, start: int, stop: int) -> Part:
        xp, kept, index = self._xp, self._kept, self._index(start, stop)

        def part(companion: Array) -> Array:
            if math.prod(companion.shape) == 1:
                return xp.reshape(companion, (1,) * len(kept))
            return xp.reshape(companion, kept)[index]

        return part

    def scratch(self, dtype: Any, device: Any) -> Array:
        size = math.prod(self.view.shape) // self.view.shape[self.axis] * self.width
        return self._xp.empty((size,), dtype=dtype, device=device)

    def scratch_view(self, scratch: Array, block: Array) -> Array:
        return self._xp.reshape(scratch[: math.prod(block.shape)], tuple(block.shape))

    def join(self, parts: list[Array], shape: tuple[int, ...]) -> Array:
        joined = self._xp.concat(parts, axis=self.axis) if len(parts) > 1 else parts[0]
        return self._xp.reshape(joined, shape)


def map_merge(
    xp: Namespace, x: Array, axes: Axes, dtype: Any, partial: Partial, merge: Merge
) -> tuple[Array, ...]:
    """Statistics of ``x`` over ``axes`` (kept), computed block by block and merged.

    ``partial(block, axes, scratch)`` gives a block's statistics, a per-slice shift and
    sum say, from the block alone, so each block is read from memory once and everything
    else runs in cache; ``scratch`` is a reused buffer of the block's shape in ``dtype``
    where the backend asks for one (see ``_backends.scratch_rows``), else None. Blocks follow
    axis 0: when it is reduced, ``merge`` combines the statistics of up to eight blocks
    at a time; when it is kept, they are joined. Where axis 0 is reduced and its rows are
    wide, blocks follow a kept axis of a merged view instead (:class:`_Panels`), and
    ``partial`` is given that view's blocks and axes, not ``axes``.
    """
    rows, per_block, scratch, budget = _layout(xp, x, True)
    if not axes or per_block >= rows:
        return partial(x, axes, None)
    panels = _Panels.plan(xp, x, axes, per_block, budget)
    if panels is not None:
        kept = reduced_shape(tuple(x.shape), axes, True)
        buffer = panels.scratch(dtype, x.device) if scratch else None
        stats = [
            partial(
                block, panels.over, None if buffer is None else panels.scratch_view(buffer, block)
            )
            for _, _, block in panels.blocks()
        ]
        return tuple(panels.join(list(parts), kept) for parts in zip(*stats, strict=True))
    buffer = None
    if scratch:
        buffer = xp.empty((per_block, *x.shape[1:]), dtype=dtype, device=x.device)
    results: list[tuple[Array, ...]] = []
    for start in range(0, rows, per_block):
        # The standard leaves slices past the end unspecified (array-api-strict rejects them).
        block = x[start : min(start + per_block, rows), ...]
        out = None if buffer is None else buffer[: block.shape[0], ...]
        results.append(partial(block, axes, out))
        if 0 in axes and len(results) == _MERGE_FAN_IN:
            results = [merge(_joined(xp, results), axes)]
    if len(results) == 1:
        return results[0]
    joined = _joined(xp, results)
    return merge(joined, axes) if 0 in axes else joined


def _joined(xp: Namespace, results: list[tuple[Array, ...]]) -> tuple[Array, ...]:
    return tuple(xp.concat(list(parts), axis=0) for parts in zip(*results, strict=True))


def map_sum(
    xp: Namespace,
    x: Array,
    axes: Axes,
    keepdims: bool,
    dtype: Any,
    f: Callable[[Array, Part], Array],
    *,
    inplace: tuple[str, Array | None] | None = None,
) -> Array:
    """``rsum(f(x, part))`` over ``axes``, accumulated in ``dtype``, with cache-sized temporaries.

    ``f`` is element-wise; ``part`` gives it the rows of a keepdims-shaped companion array
    (a per-slice shift, say) that match the block it is given. Blocks follow axis 0: when
    it is reduced, the block sums are summed again by :func:`rsum` (its accuracy holds);
    when it is kept, they are joined. An axis-0 row larger than a block is not split.
    ``inplace`` names the same step for the backend layer's in-place form, ``(kind,
    companion)`` (see ``_backends.write_elementwise``), used where the backend asks for it.
    """
    rows, per_block, in_place, budget = _layout(xp, x, inplace is not None and bool(axes))
    if not axes or per_block >= rows:
        return rsum(xp, f(x, _whole), axes, keepdims, dtype)
    panels = _Panels.plan(xp, x, axes, per_block, budget)
    if panels is not None:
        return _panel_sum(xp, x, axes, keepdims, dtype, f, inplace if in_place else None, panels)
    scratch = None
    totals = BlockTotals(xp, axes, dtype)
    if in_place:
        scratch = xp.empty((per_block, *x.shape[1:]), dtype=dtype, device=x.device)
    parts: list[Array] = []
    for start in range(0, rows, per_block):
        stop = min(start + per_block, rows)  # no slice past the end: see map_merge
        block = x[start:stop, ...]
        out = None if scratch is None else scratch[: block.shape[0], ...]
        parts.append(
            _block_sum(xp, block, _rows(start, stop), axes, dtype, f, inplace, out, totals)
        )
        if 0 in axes and len(parts) == _FAN_IN:
            # Fold the block sums sixteen at a time: a tree, as accurate as rsum's own
            # blocks, that holds at most sixteen partial results at once.
            parts = [rsum(xp, xp.concat(parts, axis=0), (0,), True, dtype)]
    total = xp.concat(parts, axis=0) if len(parts) > 1 else parts[0]
    if 0 in axes and len(parts) > 1:
        total = rsum(xp, total, (0,), True, dtype)
    return total if keepdims else xp.reshape(total, reduced_shape(tuple(x.shape), axes, False))


def _panel_sum(
    xp: Namespace,
    x: Array,
    axes: Axes,
    keepdims: bool,
    dtype: Any,
    f: Callable[[Array, Part], Array],
    inplace: tuple[str, Array | None] | None,
    panels: _Panels,
) -> Array:
    """:func:`map_sum` block by block along a kept axis (see :class:`_Panels`)."""
    totals = BlockTotals(xp, panels.over, dtype)
    scratch = None if inplace is None else panels.scratch(dtype, x.device)
    parts: list[Array] = []
    for start, stop, block in panels.blocks():
        out = None if scratch is None else panels.scratch_view(scratch, block)
        part = panels.part(start, stop)
        parts.append(_block_sum(xp, block, part, panels.over, dtype, f, inplace, out, totals))
    return panels.join(parts, reduced_shape(tuple(x.shape), axes, keepdims))


def _block_sum(
    xp: Namespace,
    block: Array,
    part: Part,
    over: Axes,
    dtype: Any,
    f: Callable[[Array, Part], Array],
    inplace: tuple[str, Array | None] | None,
    out: Array | None,
    totals: BlockTotals,
) -> Array:
    """One block's sum over ``over`` (kept): the in-place step written into ``out`` and
    summed by ``totals`` where there is a buffer, else ``f`` summed by :func:`rsum`."""
    if out is None or inplace is None:
        return rsum(xp, f(block, part), over, True, dtype)
    kind, companion = inplace
    values = _backends.write_elementwise(
        kind, block, out, None if companion is None else part(companion)
    )
    return totals(values)


def square_sum(xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array | None:
    """Sum of squares of float ``x`` in one fused pass; None where that does not apply.

    Each row of :func:`_dot_rows` gets its sum of squares from a standard function the
    backend runs as one vectorised pass (``_backends.fused_squares``: ``vecdot(r, r)``,
    or ``vector_norm(r) ** 2``). Applies where the backend has such a function and ``x``
    is already in ``dtype``.
    """
    kind = _backends.fused_squares(xp)
    if kind is None or x.dtype != dtype:
        return None
    if axes and axes[-1] != x.ndim - 1 and axes == tuple(range(len(axes))):
        if kind == "vecdot" and math.prod(x.shape[len(axes) :]) < _NARROW_GROUPS:
            # Narrow rows: einsum's groups loop once per row (float32 (2**20, 3) over axis
            # 0: 5.8 ms), where blocked squares summed by the leading dots took 1.2 ms
            # (rows of 16: 1.8 against 1.4 ms; of 64: 1.3 against 1.5 ms).
            return None
        return _leading_square_sum(xp, x, axes, keepdims, dtype)
    if kind == "vecdot" and _trailing_length(x.shape, axes) < _DOT_BLOCK:
        # Rows shorter than one dot: NumPy's vecdot loops once per row (float32 (2**21, 2)
        # over axis 1: 11.7-20 ms), where squares written block by block and summed by one
        # BLAS dot per row (BlockTotals) took 2.5-3.2 ms.
        return None

    def squares(rows: Array) -> Array:
        if kind == "vecdot":
            return xp.vecdot(rows, rows, axis=-1)
        norms = xp.linalg.vector_norm(rows, axis=-1)
        return norms * norms

    return _dot_rows(xp, x, axes, keepdims, dtype, squares)


def _leading_square_sum(
    xp: Namespace, x: Array, axes: Axes, keepdims: bool, dtype: Any
) -> Array | None:
    """Sum of squares over a leading run of axes, in groups of ``_FAN_IN`` rows.

    Each group's squares are summed by the backend's fused kernel
    (``_backends.grouped_square_sums``), the group sums by :func:`rsum`. None where the
    backend has no such kernel or the rows cannot be viewed without a copy.
    """
    if not _backends.grouped_square_sums_exist(xp):
        return None
    count = math.prod(x.shape[: len(axes)])
    width = math.prod(x.shape[len(axes) :])
    head = count - count % _FAN_IN
    try:
        rows = xp.reshape(x, (count, width), copy=False)
        groups = xp.reshape(rows[:head, ...], (head // _FAN_IN, _FAN_IN, width), copy=False)
    except ValueError:
        return None
    total = rsum(xp, _backends.grouped_square_sums(groups), (0,), True, dtype)
    if head < count:
        total = total + _backends.grouped_square_sums(rows[None, head:, ...])
    return xp.reshape(total, reduced_shape(tuple(x.shape), axes, keepdims))


def _trailing_length(shape: tuple[int, ...], axes: Axes) -> int:
    """Elements in the trailing run of reduced ``axes`` (0 where the last axis is kept)."""
    length, axis = 1, len(shape) - 1
    if axis not in axes:
        return 0
    while axis in axes:
        length *= shape[axis]
        axis -= 1
    return length


class BlockTotals:
    """Sums (keepdims) over ``axes`` of blocks of element-wise values already in ``dtype``.

    Where the backend's dot products are fused kernels (``_backends.fused_squares`` is
    ``"vecdot"``: NumPy) the rows of :func:`_dot_rows` are summed as products with a
    vector of ones: L1 of float32 (4096, 8192) over the last axis, |x| written block by
    block, took 8.9-9.5 ms summed so against 14.8 ms with ``np.add.reduce`` (5.9 ms for
    the plain sum; numpy 2.4, OpenBLAS 0.3.31). Over leading axes the block's rows are
    summed by ``_backends.leading_sum`` (dots of 16 rows): 34 against 39 us per (32, 8192)
    float32 block. One instance serves every block of a
    call, so the views' shapes are worked out once per block shape, not once per block:
    the per-block Python work is most of what the blocked loop costs over its arithmetic.
    """

    def __init__(self, xp: Namespace, axes: Axes, dtype: Any) -> None:
        self._xp = xp
        self._axes = axes
        self._dtype = dtype
        self._dots = _backends.fused_squares(xp) == "vecdot"
        self._ones: Array | None = None
        self._plans: dict[tuple[int, ...], Callable[[Array], Array] | None] = {}

    def __call__(self, values: Array) -> Array:
        shape = tuple(values.shape)
        plan = self._plans.get(shape, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plans[shape] = self._plan(shape, values)
        if plan is None:
            return rsum(self._xp, values, self._axes, True, self._dtype)
        return plan(values)

    def _plan(self, shape: tuple[int, ...], values: Array) -> Callable[[Array], Array] | None:
        xp, axes, dtype = self._xp, self._axes, self._dtype
        if not self._dots or values.dtype != dtype:
            return None
        view = trailing_rows(xp, values, axes, _DOT_BLOCK)
        if view is None:
            leading = _backends.leading_sum_kernel(xp, values, axes, dtype)
            if leading is None:
                return None
            leading_kept = reduced_shape(shape, axes, True)
            return lambda block: xp.reshape(leading(block), leading_kept)
        inner, blocks, tail = view
        if self._ones is None:
            self._ones = xp.ones(_DOT_BLOCK, dtype=dtype)
        ones = self._ones
        rows_shape = tuple(blocks.shape)
        tail_ones = None if tail is None else ones[: tail.shape[-1]]
        head = rows_shape[-2] * _DOT_BLOCK
        flat = (*shape[:inner], math.prod(shape[inner:]))
        rest = tuple(a for a in axes if a < inner)
        kept = reduced_shape(shape, axes, True)

        # One matrix of rows (a view: ``values`` is whole, in C order) rather than a stack:
        # NumPy calls the BLAS once, not once per matrix (2.7 against 3.1 ms per 32M float32
        # values in (32, 8192) blocks; OpenBLAS 0.3.31).
        matrix = (math.prod(rows_shape[:-1]), _DOT_BLOCK)

        def total(values: Array) -> Array:
            if tail_ones is None:
                products = xp.matmul(xp.reshape(values, matrix), ones)
                t = xp.sum(xp.reshape(products, rows_shape[:-1]), axis=-1, dtype=dtype)
            elif head == 0:
                # Rows shorter than one dot: NumPy's matmul of the empty head loops once
                # per row (L1 of float32 (2**21, 2) over axis 1: 6.5-10.5 against 2.5-3.3 ms).
                t = xp.matmul(xp.reshape(values, flat), tail_ones)
            else:
                rows = xp.reshape(values, flat)
                t = xp.sum(xp.matmul(xp.reshape(rows[..., :head], rows_shape), ones), axis=-1)
                t = t + xp.matmul(rows[..., head:], tail_ones)
            if rest:
                t = rsum(xp, t, rest, True, dtype)
            return xp.reshape(t, kept)

        return total


_UNPLANNED: Any = object()


def _dot_rows(
    xp: Namespace,
    x: Array,
    axes: Axes,
    keepdims: bool,
    dtype: Any,
    row_total: Callable[[Array], Array],
) -> Array | None:
    """Sum over ``axes`` of a function of ``x``, where ``row_total`` sums it along a row.

    The contiguous trailing run of reduced axes is viewed as rows of ``_DOT_BLOCK`` terms
    (:func:`trailing_rows`) and the row results are summed by the backend's own sum, which
    is pairwise along a contiguous last axis on every backend (see rsum), so the error
    grows with log(n) levels. None where :func:`trailing_rows` gives no view.
    """
    view = trailing_rows(xp, x, axes, _DOT_BLOCK)
    if view is None:
        return None
    inner, blocks, tail = view
    if tail is not None and blocks.shape[-2] == 0:
        total = row_total(tail)  # rows shorter than one block: no empty blocks to add
    else:
        total = xp.sum(row_total(blocks), axis=-1, dtype=dtype)
        if tail is not None:
            total = total + row_total(tail)
    rest = tuple(a for a in axes if a < inner)
    if rest:
        total = rsum(xp, total, rest, True, dtype)
    return xp.reshape(total, reduced_shape(tuple(x.shape), axes, keepdims))
