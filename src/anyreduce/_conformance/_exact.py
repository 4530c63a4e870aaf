"""The exact oracle (the one of the test suite, the conformance suite and parity) and the
rule for "agrees with it".

The oracle works on NumPy data element by element with Python integers, ``math.fsum``,
``math.hypot`` and fractions, follows the contract (spec.md §1-4) literally and shares no
code with the kernels it checks. Float results are the exact value rounded once to float64:
sums by ``math.fsum``, the squares of float64 values split exactly in two (Veltkamp), means
as exact fractions, products with no intermediate overflow. :func:`exact` returns the exact
result (float64, or Python ints/bools) together with an error scale per element: the
magnitude a correctly implemented accumulation in the dtype's precision may be off by,
relative to the dtype's epsilon. :func:`reduce` and :func:`magnitude` are the same oracle
with anyreduce's signature, published as ``anyreduce.testing.exact`` and
``anyreduce.testing.magnitude``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "OP_NAMES",
    "Comparison",
    "Exact",
    "compare",
    "exact",
    "magnitude",
    "np_dtype",
    "onnx_name",
    "reduce",
    "spacing",
    "tolerance",
]

# anyreduce function name -> ONNX operator name, in report order.
_ONNX_NAMES = {
    "reduce_sum": "ReduceSum",
    "reduce_sum_square": "ReduceSumSquare",
    "reduce_l1": "ReduceL1",
    "reduce_l2": "ReduceL2",
    "reduce_mean": "ReduceMean",
    "reduce_prod": "ReduceProd",
    "reduce_max": "ReduceMax",
    "reduce_min": "ReduceMin",
    "reduce_log_sum": "ReduceLogSum",
    "reduce_log_sum_exp": "ReduceLogSumExp",
}
OP_NAMES = tuple(_ONNX_NAMES)
_OTHER_OPS = ("ReduceLogicalAnd", "ReduceLogicalOr")  # OpenVINO's bool reductions


def onnx_name(op: str) -> str:
    """The ONNX name of ``op``, given as anyreduce (``reduce_l2``) or ONNX (``ReduceL2``)
    names it; ``ValueError`` for any other name."""
    if op in _ONNX_NAMES.values() or op in _OTHER_OPS:
        return op
    if op in _ONNX_NAMES:
        return _ONNX_NAMES[op]
    msg = f"unknown reduction {op!r}; expected one of {', '.join(OP_NAMES)}"
    raise ValueError(msg)


def np_dtype(name: str) -> Any:
    """The NumPy dtype called ``name`` (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def dtype_name(dtype: Any) -> str:
    return str(np.dtype(dtype).name) if str(dtype) != "bfloat16" else "bfloat16"


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _int_limits(dtype: np.dtype) -> tuple[int, int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max), int(info.bits)


def _wrap(value: int, dtype: np.dtype) -> int:
    low, _, nbits = _int_limits(dtype)
    return (value - low) % (1 << nbits) + low


def _saturate(value: float, dtype: np.dtype) -> int:
    low, high, _ = _int_limits(dtype)
    if math.isnan(value) or value == -math.inf:
        return low
    if value == math.inf:
        return high
    return min(max(math.trunc(value), low), high)


#: Every float64 is an integer multiple of 2**-1074, its smallest subnormal number.
_UNITS = 2**1074


def _fsum(values: Sequence[float]) -> float:
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    try:
        return math.fsum(values)
    except OverflowError:
        infinite = [v for v in values if math.isinf(v)]
        if infinite:  # fsum raises where finite values also overflow its partial sums
            return infinite[0]
        # A partial sum left float64's range; the exact sum may be finite. Rounded once,
        # by the division of two integers.
        total = _units(values)
        try:
            return total / _UNITS
        except OverflowError:  # the exact sum is beyond float64
            return math.inf if total > 0 else -math.inf


def _units(values: Sequence[float]) -> int:
    """The exact sum of finite ``values`` in units of 2**-1074."""
    total = 0
    for v in values:
        numerator, denominator = v.as_integer_ratio()
        total += numerator * (_UNITS // denominator)
    return total


def _magnitude(row: Sequence[float]) -> float | Fraction:
    """``sum |x|`` of ``row``: exact where it is beyond float64 and the values are finite."""
    absolute = _fsum([abs(v) for v in row])
    if math.isinf(absolute) and all(math.isfinite(v) for v in row):
        return Fraction(_units([abs(v) for v in row]), _UNITS)
    return absolute


def _as_float(value: float | Fraction) -> float:
    """``value`` rounded to float64; inf beyond its range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


#: Where some error scale is beyond float64 (``sum |x|`` of float64 data near its
#: maximum), an :class:`Exact` holds every scale in units of 2**64.
_SCALE_EXPONENT = 64


def _log_units(units: int) -> float:
    """The natural logarithm of ``units * 2**-1074``, a sum beyond float64's range."""
    if units < 0:
        return math.nan
    bits = units.bit_length()
    return math.log(units / 2**bits) + (bits - 1074) * math.log(2.0)


_SPLIT = 2.0**27 + 1.0  # Veltkamp: splits a float64 into two halves of 26 bits


def _squares(row: Sequence[float]) -> list[float]:
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
    total = sum((Fraction(v) for v in row), Fraction(0)) / len(row)
    return float(total)  # a mean of floats is within float64's range


def _product(row: list[float]) -> float:
    """The product, with no partial product able to overflow or underflow.

    Mantissas (in [0.5, 1)) are multiplied and renormalised, exponents summed as integers:
    each mantissa product rounds to float64's 53 bits (n roundings, far below the data's
    tolerance for float32 and narrower data, about it for float64) and the final
    ``ldexp`` rounds once more to float64's range.
    """
    if any(math.isinf(v) for v in row):
        if 0.0 in row:
            return math.nan
        return math.copysign(math.inf, math.prod(math.copysign(1.0, v) for v in row))
    mantissa, exponent = 1.0, 0
    for value in row:
        m, e = math.frexp(value)
        mantissa, shift = math.frexp(mantissa * m)
        exponent += e + shift
    try:
        return math.ldexp(mantissa, exponent)
    except OverflowError:
        return math.copysign(math.inf, mantissa)


def _log(value: float) -> float:
    if math.isnan(value) or value < 0:
        return math.nan
    return -math.inf if value == 0 else math.log(value)


def _lse(row: list[float]) -> float:
    if any(math.isnan(v) for v in row):
        return math.nan
    if not row:
        return -math.inf
    top = max(row)
    if math.isinf(top):
        return top
    return top + math.log(math.fsum(math.exp(v - top) for v in row))


def _log_sum_row(row: list[float], absolute: float | Fraction) -> tuple[float, float | Fraction]:
    """The exact LogSum of ``row`` (no NaN) and the scale of its error; ``absolute`` is
    ``sum |x|``."""
    total = _fsum(row)
    if math.isinf(total) and not any(math.isinf(v) for v in row):
        # The sum is beyond float64's range; its logarithm is not.
        units = _units(row)
        value = _log_units(units)
        scale = _units([abs(v) for v in row]) / abs(units)
        return value, scale + (abs(value) if math.isfinite(value) else 0.0)
    value = _log(total)
    # d log(s) = ds / s: the sum's error, relative to the sum, is the log's absolute error
    # (finite for a negative sum too: see Exact.ill)
    if not total:
        return value, math.inf if absolute else 0.0
    if isinstance(absolute, Fraction):
        relative = absolute / Fraction(abs(total))
        return value, relative + Fraction(abs(value) if math.isfinite(value) else 0.0)
    return value, absolute / abs(total) + (abs(value) if math.isfinite(value) else 0.0)


def _float_row(op: str, row: list[float]) -> tuple[float, float | Fraction]:
    """The exact value of ``op`` over ``row`` and the scale of its rounding error (a
    fraction where it is beyond float64)."""
    n = len(row)
    if any(math.isnan(v) for v in row):
        return math.nan, 0.0
    if op == "ReduceSum":
        return _fsum(row), _magnitude(row)
    if op == "ReduceSumSquare":
        value = _fsum(_squares(row))
        return value, value
    if op == "ReduceL1":
        absolute = _magnitude(row)
        return _as_float(absolute), absolute
    if op == "ReduceL2":
        value = math.hypot(*row)
        return value, value
    if op == "ReduceMean":
        return (_exact_mean(row), _magnitude(row) / n) if n else (math.nan, 0.0)
    if op == "ReduceProd":
        value = _product(row)
        return value, abs(value)
    if op in ("ReduceMax", "ReduceLogicalOr"):
        return max(row, default=-math.inf), 0.0
    if op in ("ReduceMin", "ReduceLogicalAnd"):
        return min(row, default=math.inf), 0.0
    if op == "ReduceLogSum":
        return _log_sum_row(row, _magnitude(row))
    value = _lse(row)
    top = max(row, default=0.0)
    return value, abs(top) + math.log(max(n, 1)) + 1 + (abs(value) if math.isfinite(value) else 0)


def _int_row(op: str, row: list[int], dtype: np.dtype) -> int:
    low, high, _ = _int_limits(dtype)
    if op == "ReduceSum":
        return _wrap(sum(row), dtype)
    if op == "ReduceSumSquare":
        return _wrap(sum(v * v for v in row), dtype)
    if op == "ReduceL1":
        return _wrap(sum(abs(v) for v in row), dtype)
    if op == "ReduceL2":
        return _saturate(math.sqrt(float(sum(v * v for v in row))), dtype)
    if op == "ReduceMean":
        if not row:
            return 0
        total = sum(row)
        return abs(total) // len(row) * (1 if total >= 0 else -1)
    if op == "ReduceProd":
        return _wrap(math.prod(row), dtype)
    if op == "ReduceMax":
        return max(row, default=low)
    if op == "ReduceMin":
        return min(row, default=high)
    if op == "ReduceLogSum":
        # The wrapped sum ReduceSum gives (ReduceLogSum-18 is ReduceSum, then Log).
        return _saturate(_log(float(_wrap(sum(row), dtype))), dtype)
    return _saturate(_lse([float(v) for v in row]), dtype)


def _bool_row(op: str, row: list[bool]) -> bool:
    if op in ("ReduceMax", "ReduceLogicalOr"):
        return any(row)
    if op in ("ReduceMin", "ReduceLogicalAnd"):
        return all(row)
    msg = f"{op} takes no bool input"
    raise TypeError(msg)


@dataclass(frozen=True)
class Exact:
    """The exact result of one reduction: values, error scales, reduced count, dtype."""

    values: np.ndarray  # float64 for float data, object (Python ints/bools) otherwise
    scales: np.ndarray  # float64, per element; zero for integers and bool
    count: int  # number of elements reduced into each output element
    dtype: np.dtype  # the output dtype (= the input's)
    # Per element, whether the answer is not determined within the tolerance: a LogSum whose
    # sum may have either sign once rounded (|sum| <= the bound of its error), where a
    # correct accumulation may give any log, NaN or -inf. None: no such element.
    ill: np.ndarray | None = None
    # The scales are in units of 2**scale_exponent (64 where some scale is beyond float64).
    scale_exponent: int = 0

    def bounds(self) -> np.ndarray:
        """Per element, the error a correct accumulation may make (before rounding to the
        dtype): the tolerance times the error scale."""
        with np.errstate(over="ignore"):
            relative = tolerance(self.dtype, self.count) * self.scales
            return np.asarray(np.ldexp(relative, self.scale_exponent))

    def rounded(self) -> np.ndarray:
        """The exact values in the output dtype (the value an ideal implementation returns)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(self.values.astype(self.dtype))


def exact(op: str, data: np.ndarray, axes: Sequence[int], keepdims: bool) -> Exact:
    """Reduce ``data`` over normalised ``axes`` (sorted, non-negative; empty: reduce nothing)."""
    ndim = data.ndim
    reduced = tuple(sorted(axes))
    kept = [i for i in range(ndim) if i not in reduced]
    outer = tuple(data.shape[i] for i in kept)
    count = math.prod(data.shape[i] for i in reduced)
    rows = np.transpose(data, kept + list(reduced)).reshape((*outer, count))
    dtype = data.dtype
    floating = _is_float(dtype)
    values = np.empty(outer, dtype=np.float64 if floating else object)
    exact_scales: dict[tuple[int, ...], float | Fraction] = {}
    for index in np.ndindex(*outer):
        row = rows[index]
        if dtype.kind == "b":
            values[index] = _bool_row(op, [bool(v) for v in row])
        elif not floating:
            values[index] = _int_row(op, [int(v) for v in row], dtype)
        else:
            values[index], exact_scales[index] = _float_row(op, [float(v) for v in row])
    beyond = any(math.isinf(_as_float(s)) for s in exact_scales.values() if type(s) is Fraction)
    exponent = _SCALE_EXPONENT if beyond else 0
    scales = np.zeros(outer, dtype=np.float64)
    for index, scale in exact_scales.items():
        if type(scale) is Fraction:
            scales[index] = _as_float(scale / 2**exponent)
        else:
            scales[index] = math.ldexp(scale, -exponent)
    if keepdims:
        shape = tuple(1 if i in reduced else n for i, n in enumerate(data.shape))
        values, scales = values.reshape(shape), scales.reshape(shape)
    result = Exact(values, scales, count, dtype, None, exponent)
    if floating and op == "ReduceLogSum":
        return Exact(values, scales, count, dtype, np.asarray(result.bounds() >= 1.0), exponent)
    return result


def _checked(
    function: str,
    op: str,
    data: Any,
    axes: int | Sequence[int] | None,
    keepdims: object,
    noop_with_empty_axes: object,
) -> tuple[str, np.ndarray, tuple[int, ...]]:
    """The ONNX name of ``op``, ``data`` as a NumPy array of a dtype the oracle reduces
    (bool for Max and Min only) and the axes it stands for, the flags checked: a one-line
    ``TypeError`` or ``ValueError`` naming ``function`` otherwise."""
    from .._lib._axes import check_flag
    from ._data import as_numpy

    try:
        name = onnx_name(op)
    except ValueError as e:
        msg = f"{function}: {e}"
        raise ValueError(msg) from None
    try:
        # A NumPy scalar (a full reduction's value) as the 0-D array of its value.
        array = np.asarray(data) if isinstance(data, np.generic) else as_numpy(data)
    except TypeError as e:
        msg = f"{function}: {e}"
        raise TypeError(msg) from None
    if array.dtype.kind not in "biuf" and dtype_name(array.dtype) != "bfloat16":
        msg = (
            f"{function}: dtype {array.dtype} is not supported; the oracle takes integer, "
            "floating (bfloat16 included) and bool data"
        )
        raise TypeError(msg)
    if array.dtype.kind == "b" and name not in {"ReduceMax", "ReduceMin"}:
        msg = f"{function}: {name} takes no bool data; ReduceMax and ReduceMin do"
        raise TypeError(msg)
    check_flag(function, "keepdims", keepdims)
    noop = check_flag(function, "noop_with_empty_axes", noop_with_empty_axes)
    try:
        reduced = _normalised(array, axes, noop)
    except (TypeError, ValueError) as e:
        msg = f"{function}: {e}"
        raise type(e)(msg) from None
    return name, array, reduced


def _normalised(
    data: np.ndarray, axes: int | Sequence[int] | None, noop_with_empty_axes: bool
) -> tuple[int, ...]:
    """The sorted non-negative axes ``axes`` stands for under the contract (spec.md §2)."""
    ndim = data.ndim
    given: Any = [] if axes is None else [axes] if isinstance(axes, (int, np.integer)) else axes
    if isinstance(given, np.ndarray) and given.ndim <= 1:
        given = given.reshape(-1).tolist()
    if not isinstance(given, (list, tuple, range)) or any(
        isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) for a in given
    ):
        msg = f"axes must be an integer, a sequence of integers or None, got {axes!r}"
        raise TypeError(msg)
    listed = [int(a) for a in given]
    if not listed:
        return () if noop_with_empty_axes else tuple(range(ndim))
    if any(not -ndim <= a < ndim for a in listed) or len({a % ndim for a in listed}) < len(listed):
        msg = f"axes {listed} are not distinct axes of a rank-{ndim} array"
        raise ValueError(msg)
    return tuple(sorted(a % ndim for a in listed))


def reduce(
    op: str,
    data: np.ndarray,
    axes: int | Sequence[int] | None = None,
    *,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
) -> np.ndarray:
    """The exact result of ``op`` on NumPy ``data``, with anyreduce's signature.

    Parameters
    ----------
    op : str
        The reduction, as anyreduce names it (``"reduce_l2"``) or as ONNX does
        (``"ReduceL2"``); any other name is a ``ValueError``.
    data : numpy.ndarray
        The input, of any integer, floating (bfloat16 included) or bool dtype.
    axes : int, sequence of int or None, default None
        Axes to reduce over, as in the reductions; None (or empty) reduces over all.
    keepdims : bool, default True
        Keep the reduced axes with length 1.
    noop_with_empty_axes : bool, default False
        With empty ``axes``, reduce over no axis instead of all.

    Returns
    -------
    numpy.ndarray
        float64 (the exact value rounded once) for float data, an object array of Python
        ints (bools for bool data) otherwise; the caller compares it with a dtype-aware
        tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> from anyreduce.testing import exact
    >>> exact("reduce_sum", np.array([[1e16, 1.0, -1e16], [1.0, 2.0, 3.0]]), axes=1)
    array([[1.],
           [6.]])
    >>> exact("reduce_sum", np.array([[1, 2], [3, 4]], np.int32), axes=0, keepdims=False)
    array([4, 6], dtype=object)
    >>> exact("ReduceL2", np.array([300, 400], np.float16))
    array([500.])
    """
    name, data, reduced = _checked("exact", op, data, axes, keepdims, noop_with_empty_axes)
    return exact(name, data, reduced, bool(keepdims)).values


def _magnitude_row(op: str, row: list[float]) -> float:
    """sum |x|, sum x**2 or sum exp(x - max) over the finite values; 0 for the others."""
    finite = [v for v in row if math.isfinite(v)]
    if op in {"ReduceSum", "ReduceMean", "ReduceL1", "ReduceLogSum"}:
        return _fsum([abs(v) for v in finite])
    if op in {"ReduceSumSquare", "ReduceL2"}:
        return _fsum(_squares(finite))
    if op == "ReduceLogSumExp":
        if not finite:
            return 0.0
        top = max(finite)
        return _fsum([math.exp(v - top) for v in finite])
    return 0.0


def magnitude(
    op: str,
    data: np.ndarray,
    axes: int | Sequence[int] | None = None,
    *,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
) -> np.ndarray:
    """Per output element, the float64 size ``M`` of what ``op`` accumulates.

    The error bound of a float accumulation scales with it.

    Parameters
    ----------
    op : str
        The reduction, as anyreduce names it (``"reduce_l2"``) or as ONNX does
        (``"ReduceL2"``); any other name is a ``ValueError``.
    data : numpy.ndarray
        The input.
    axes : int, sequence of int or None, default None
        Axes to reduce over, as in the reductions; None (or empty) reduces over all.
    keepdims : bool, default True
        Keep the reduced axes with length 1.
    noop_with_empty_axes : bool, default False
        With empty ``axes``, reduce over no axis instead of all.

    Returns
    -------
    numpy.ndarray
        float64, of the shape of the result: ``sum |x|`` for Sum, Mean, L1 and LogSum;
        ``sum x**2`` for SumSquare and L2; ``sum exp(x - max)`` for LogSumExp; 0 for the
        others. Non-finite values are left out.

    Examples
    --------
    >>> import numpy as np
    >>> from anyreduce.testing import magnitude
    >>> magnitude("reduce_sum", np.array([[1.0, -2.0, np.inf], [3.0, 4.0, 5.0]]), axes=1)
    array([[ 3.],
           [12.]])
    >>> magnitude("reduce_l2", np.array([3.0, 4.0]), keepdims=False)
    array(25.)
    """
    name, data, reduced = _checked("magnitude", op, data, axes, keepdims, noop_with_empty_axes)
    kept = [i for i in range(data.ndim) if i not in reduced]
    outer = tuple(data.shape[i] for i in kept)
    count = math.prod(data.shape[i] for i in reduced)
    rows = np.transpose(data, kept + list(reduced)).reshape((math.prod(outer), count))
    # The rows as Python floats at once (float64 holds each value float(v) gives): NumPy
    # scalars converted one by one took a quarter of the time of the sums.
    floats = rows.astype(np.float64).tolist()
    out = np.array([_magnitude_row(name, row) for row in floats], dtype=np.float64)
    out = out.reshape(outer)
    if keepdims:
        out = out.reshape(tuple(1 if i in reduced else n for i, n in enumerate(data.shape)))
    return out


def spacing(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The distance from each (finite) value to the next representable one of ``dtype``."""
    finfo = _finfo(dtype)
    magnitude = np.abs(value.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    exponent = np.maximum(exponent, math.log2(finfo.smallest_normal))
    return np.asarray(np.exp2(exponent - finfo.nmant))


@dataclass(frozen=True)
class _Finfo:
    eps: float
    nmant: int
    smallest_normal: float
    smallest_subnormal: float
    max: float


def _finfo(dtype: np.dtype) -> _Finfo:
    if dtype.name == "bfloat16":
        return _Finfo(2.0**-7, 7, 2.0**-126, 2.0**-133, float.fromhex("0x1.fep127"))
    info = np.finfo(dtype)
    return _Finfo(
        float(info.eps),
        int(info.nmant),
        float(info.smallest_normal),
        float(info.smallest_subnormal),
        float(info.max),
    )


def tolerance(dtype: np.dtype, count: int) -> float:
    """Relative tolerance, against the error scale, for ``count`` values of ``dtype``.

    The worst-case bound of a summation in any order, ``(n + 1) eps`` (Higham, Accuracy and
    Stability of Numerical Algorithms, §4.2), at least ``4 eps``, with the epsilon of the
    type the contract accumulates in: float32 for float16 and bfloat16 (which then round
    once, the half ulp :func:`compare` adds). Zero for integers and bool: exact.
    """
    if not _is_float(dtype):
        return 0.0
    accumulate = np.dtype(np.float32) if _finfo(dtype).nmant < 23 else dtype
    return _finfo(accumulate).eps * max(count + 1, 4)


@dataclass(frozen=True)
class Comparison:
    """How a result compares with the exact one."""

    agrees: bool
    why: str  # empty when it agrees
    max_ulps: float  # largest error in units in the last place of the dtype
    max_relative: float  # largest error relative to the exact value


_THROUGH_FLOAT = ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


def compare(op: str, got: Any, want: Exact) -> Comparison:
    """Compare ``got`` (a NumPy array) with the exact result: dtype, shape, then values."""
    got = np.asarray(got)
    if got.dtype != want.dtype:
        return Comparison(False, f"dtype {got.dtype}, expected {want.dtype}", math.inf, math.inf)
    if got.shape != want.values.shape:
        shape = want.values.shape
        return Comparison(False, f"shape {got.shape}, expected {shape}", math.inf, math.inf)
    if not _is_float(want.dtype):
        expected = [int(v) for v in want.values.ravel()]
        actual = [int(v) for v in got.ravel()]
        # L2, LogSum and LogSumExp of integers go through a float64 step and truncate: a
        # last-bit difference in that step may move the result by one, or by float64's
        # spacing beyond 2**53.
        errors = [abs(a - e) for a, e in zip(actual, expected, strict=True)]
        worst = max(errors, default=0)
        bad = any(
            err > (max(1, math.ceil(abs(e) * 2.0**-50)) if op in _THROUGH_FLOAT else 0)
            for err, e in zip(errors, expected, strict=True)
        )
        relative = max(
            (
                err / abs(e) if e else float(err > 0)
                for err, e in zip(errors, expected, strict=True)
            ),
            default=0.0,
        )
        why = f"values differ by up to {worst}" if bad else ""
        return Comparison(not bad, why, float(worst), float(relative))
    return _compare_float(got.astype(np.float64), want)


def _compare_float(got: np.ndarray, want: Exact) -> Comparison:
    exact_values = want.values.astype(np.float64)
    rounded = want.rounded().astype(np.float64)
    ulp = spacing(rounded, want.dtype)
    finfo = _finfo(want.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(got - exact_values)
        both_nan = np.isnan(got) & np.isnan(exact_values)
        same_inf = np.isinf(rounded) & (got == rounded)
        allowed = (
            want.bounds()
            + 0.5 * ulp
            # Subnormal results may be flushed to zero (XLA on CPU, most GPUs): the array
            # API standard does not require gradual underflow.
            + finfo.smallest_normal
        )
        ill = np.zeros(got.shape, dtype=bool) if want.ill is None else want.ill
        ok = (
            both_nan
            | same_inf
            | ill
            | (np.isfinite(rounded) & np.isfinite(got) & (error <= allowed))
        )
        finite = np.isfinite(error) & np.isfinite(rounded) & ~ill
        exempt = both_nan | same_inf | ill
        ulps = np.where(finite, error / ulp, np.where(exempt, 0.0, math.inf))
        denominator = np.abs(exact_values)
        relative = np.where(
            finite,
            np.where(denominator > 0, error / np.where(denominator > 0, denominator, 1), error),
            np.where(exempt, 0.0, math.inf),
        )
    max_ulps = float(np.max(ulps, initial=0.0))
    max_relative = float(np.max(relative, initial=0.0))
    if bool(np.all(ok)):
        return Comparison(True, "", max_ulps, max_relative)
    bad = int(np.argmin(ok.ravel()))
    why = (
        f"{int(np.size(ok) - np.count_nonzero(ok))} of {np.size(ok)} values differ; "
        f"first at flat index {bad}: {got.ravel()[bad]!r}, expected {exact_values.ravel()[bad]!r}"
    )
    return Comparison(False, why, max_ulps, max_relative)
