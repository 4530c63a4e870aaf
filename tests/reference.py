"""An exact, slow oracle for the ten reductions, independent of anyreduce's code.

It works on NumPy arrays element by element with Python integers, ``math.fsum`` and
``math.hypot``, follows ``spec.md`` literally, and returns the exact value as a float64 or
Python-int NumPy array (the caller compares with a dtype-aware tolerance).

Float results are the exact value rounded once to float64: sums by ``math.fsum``, the
squares of float64 values split exactly in two (Veltkamp), means as exact fractions.
:func:`magnitude` gives, per output element, the size ``M`` of what the operator
accumulates, the scale of the error bound a float accumulation is held to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

__all__ = ["OP_NAMES", "magnitude", "reduce"]

OP_NAMES = (
    "reduce_sum",
    "reduce_sum_square",
    "reduce_l1",
    "reduce_l2",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
    "reduce_log_sum",
    "reduce_log_sum_exp",
)

Row = list[float] | list[int] | list[bool]


def _int_info(dtype: np.dtype) -> tuple[int, int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max), int(info.bits)


def _wrap(value: int, dtype: np.dtype) -> int:
    low, _, nbits = _int_info(dtype)
    return (value - low) % (1 << nbits) + low


def _saturate(value: float, dtype: np.dtype) -> int:
    low, high, _ = _int_info(dtype)
    if math.isnan(value) or value == -math.inf:
        return low
    if value == math.inf:
        return high
    return min(max(math.trunc(value), low), high)


def _fsum(values: Sequence[float]) -> float:
    values = list(values)
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    try:
        return math.fsum(values)
    except OverflowError:  # the exact sum is finite but beyond float64
        return math.copysign(math.inf, sum(values))


_SPLIT = 2.0**27 + 1.0  # Veltkamp: splits a float64 into two halves of 26 bits


def _squares(row: list[float]) -> list[float]:
    """Terms whose exact sum is the exact sum of the squares of ``row``."""
    terms: list[float] = []
    for v in row:
        p = v * v
        terms.append(p)
        if math.isfinite(p) and p != 0.0 and abs(v) < 2.0**995:
            c = _SPLIT * v
            hi = c - (c - v)
            lo = v - hi
            terms.append(((hi * hi - p) + 2.0 * hi * lo) + lo * lo)
    return terms


def _exact_mean(row: list[float]) -> float:
    if any(math.isinf(v) for v in row):
        return _fsum(row) / len(row)
    total = sum(Fraction(v) for v in row) / len(row)
    try:
        return float(total)
    except OverflowError:  # pragma: no cover - a mean of floats is below float64's max
        return math.copysign(math.inf, total)


def _lse(row: list[float]) -> float:
    if any(math.isnan(v) for v in row):
        return math.nan
    if not row:
        return -math.inf
    m = max(row)
    if math.isinf(m):
        return m
    return m + math.log(_fsum([math.exp(v - m) for v in row]))


def _log(value: float) -> float:
    if math.isnan(value) or value < 0:
        return math.nan
    return -math.inf if value == 0 else math.log(value)


def _float_row(op: str, row: list[float]) -> float:
    n = len(row)
    if any(math.isnan(v) for v in row):
        return math.nan
    if op == "reduce_sum":
        return _fsum(row)
    if op == "reduce_sum_square":
        return _fsum(_squares(row))
    if op == "reduce_l1":
        return _fsum([abs(v) for v in row])
    if op == "reduce_l2":
        return math.hypot(*row)
    if op == "reduce_mean":
        return _exact_mean(row) if n else math.nan
    if op == "reduce_prod":
        return math.prod(row)
    if op == "reduce_max":
        return max(row, default=-math.inf)
    if op == "reduce_min":
        return min(row, default=math.inf)
    if op == "reduce_log_sum":
        return _log(_fsum(row))
    return _lse(row)


def _int_row(op: str, row: list[int], dtype: np.dtype) -> int:
    low, high, _ = _int_info(dtype)
    n = len(row)
    if op == "reduce_sum":
        return _wrap(sum(row), dtype)
    if op == "reduce_sum_square":
        return _wrap(sum(v * v for v in row), dtype)
    if op == "reduce_l1":
        return _wrap(sum(abs(v) for v in row), dtype)
    if op == "reduce_l2":
        return _saturate(math.sqrt(float(sum(v * v for v in row))), dtype)
    if op == "reduce_mean":
        if not n:
            return 0
        total = sum(row)
        return abs(total) // n * (1 if total >= 0 else -1)
    if op == "reduce_prod":
        return _wrap(math.prod(row), dtype)
    if op == "reduce_max":
        return max(row, default=low)
    if op == "reduce_min":
        return min(row, default=high)
    if op == "reduce_log_sum":
        # The wrapped sum ReduceSum gives (ReduceLogSum-18 is ReduceSum, then Log).
        return _saturate(_log(float(_wrap(sum(row), dtype))), dtype)
    return _saturate(_lse([float(v) for v in row]), dtype)


def _bool_row(op: str, row: list[bool]) -> bool:
    if op == "reduce_max":
        return any(row)
    if op == "reduce_min":
        return all(row)
    raise TypeError(op)


def _magnitude_row(op: str, row: list[float]) -> float:
    """M of the issue's error bound: sum |x|, sum x**2, or sum exp(x - max)."""
    finite = [v for v in row if math.isfinite(v)]
    if op in {"reduce_sum", "reduce_mean", "reduce_l1", "reduce_log_sum"}:
        return _fsum([abs(v) for v in finite])
    if op in {"reduce_sum_square", "reduce_l2"}:
        return _fsum(_squares(finite))
    if op == "reduce_log_sum_exp":
        if not finite:
            return 0.0
        m = max(finite)
        return _fsum([math.exp(v - m) for v in finite])
    return 0.0


def _rows(
    data: np.ndarray, axes: Sequence[int] | None, noop_with_empty_axes: bool
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """``data`` as (kept shape..., reduced count), the kept shape and the reduced axes."""
    ndim = data.ndim
    if not axes:
        axes = () if noop_with_empty_axes else tuple(range(ndim))
    axes = tuple(sorted(a % ndim for a in axes))
    kept = [i for i in range(ndim) if i not in axes]
    moved = np.transpose(data, kept + list(axes))
    outer = tuple(data.shape[i] for i in kept)
    count = math.prod(data.shape[i] for i in axes)
    return moved.reshape((*outer, count)), outer, axes


def _per_row(
    data: np.ndarray,
    axes: Sequence[int] | None,
    keepdims: bool,
    noop_with_empty_axes: bool,
    row_value: Callable[[np.ndarray], object],
    dtype: object,
) -> np.ndarray:
    rows, outer, reduced = _rows(data, axes, noop_with_empty_axes)
    out = np.empty(outer, dtype=dtype)  # type: ignore[call-overload]
    for index in np.ndindex(*outer):
        out[index] = row_value(rows[index])
    if keepdims:
        out = out.reshape(tuple(1 if i in reduced else n for i, n in enumerate(data.shape)))
    return out


def magnitude(
    op: str,
    data: np.ndarray,
    axes: Sequence[int] | None,
    *,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
) -> np.ndarray:
    """Per output element, the float64 sum of the magnitudes ``op`` accumulates.

    ``sum |x|`` for Sum, Mean, L1 and LogSum; ``sum x**2`` for SumSquare and L2;
    ``sum exp(x - max)`` for LogSumExp; 0 for the others. Non-finite values are left out.
    """
    return _per_row(
        data,
        axes,
        keepdims,
        noop_with_empty_axes,
        lambda row: _magnitude_row(op, [float(v) for v in row]),
        np.float64,
    )


def reduce(
    op: str,
    data: np.ndarray,
    axes: Sequence[int] | None,
    *,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
) -> np.ndarray:
    """The exact result of ``op``; float64 for floats, object (Python ints/bools) otherwise."""
    kind = data.dtype.kind

    def row_value(row: np.ndarray) -> object:
        if kind == "b":
            return _bool_row(op, [bool(v) for v in row])
        if kind in "iu":
            return _int_row(op, [int(v) for v in row], data.dtype)
        # float16, bfloat16 (ml_dtypes), float32, float64
        return _float_row(op, [float(v) for v in row])

    dtype = object if kind in "biu" else np.float64
    return _per_row(data, axes, keepdims, noop_with_empty_axes, row_value, dtype)
