"""The public reductions: validate once, then run the array-API kernel.

Every function takes data of any array-API namespace and returns an array of the same
namespace, dtype and device.
"""

from __future__ import annotations

import contextlib
from typing import Any

from . import _backends
from ._backends import Profile
from ._lib import _dtypes
from ._lib._axes import AxesLike, check_flag, normalize
from ._lib._memo import dynamo_tracing, tracing
from ._lib._ops import OPS, Op, run

__all__ = [
    "reduce_l1",
    "reduce_l2",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "reduce_sum_square",
]

Array = Any


# (operator, array type, dtype) -> (operator, namespace, profile) for data already found
# valid: one lookup in place of the namespace and dtype checks, and of the dispatch's
# look-up of the profile. A table per module of array types, so that one library's dtypes
# are never compared with another's (array-api-strict warns when its dtypes meet
# NumPy's). A Dynamo trace reads none of it (``dynamo_tracing``). When traces still read
# it, torch 2.11 could not hash the NumPy dtypes that NumPy calls left in it
# (``Unsupported``, a graph break), nor add PyTorch's table inside a trace, which is why
# that one exists from the start.
_VALID: dict[str, dict[tuple[str, type, Any], tuple[Op, Any, Profile]]] = {"torch": {}}


def _reduce(
    name: str, data: Array, axes: AxesLike, keepdims: object, noop_with_empty_axes: object
) -> Array:
    if dynamo_tracing():  # no table read, so none guarded (see dynamo_tracing)
        op, xp, profile = _checked(name, data)
    else:
        try:
            op, xp, profile = _VALID[type(data).__module__][name, type(data), data.dtype]
        except (KeyError, AttributeError, TypeError):  # new, not an array, an unhashable dtype
            op, xp, profile = _checked(name, data)
        else:
            if profile.refuses(data) is not None:  # a sparse tensor after a dense one, ...
                _backends.admit(name, data, xp)
    keep = check_flag(name, "keepdims", keepdims)
    noop = check_flag(name, "noop_with_empty_axes", noop_with_empty_axes)
    normal = normalize(name, axes, data.ndim, noop)
    return run(op, data, normal, keep, xp=xp, profile=profile)


def _checked(name: str, data: Array) -> tuple[Op, Any, Profile]:
    """The operator, namespace and profile of a call on ``data``, every check made anew;
    stored in :data:`_VALID` outside a compiler's trace."""
    op = OPS[name]
    xp = _backends.namespace(name, data)
    _dtypes.check_dtype(name, xp, data.dtype, op.accepts_bool)
    profile = _backends.profile_for(xp)
    if not tracing():  # a compiler's trace leaves the table as it was (see tracing)
        with contextlib.suppress(TypeError):  # an unhashable dtype: looked up each time
            _VALID.setdefault(type(data).__module__, {})[name, type(data), data.dtype] = (
                op,
                xp,
                profile,
            )
    return op, xp, profile


def reduce_sum(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_sum", data, axes, keepdims, noop_with_empty_axes)


def reduce_sum_square(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_sum_square", data, axes, keepdims, noop_with_empty_axes)


def reduce_l1(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_l1", data, axes, keepdims, noop_with_empty_axes)


def reduce_l2(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_l2", data, axes, keepdims, noop_with_empty_axes)


def reduce_mean(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_mean", data, axes, keepdims, noop_with_empty_axes)


def reduce_prod(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_prod", data, axes, keepdims, noop_with_empty_axes)


def reduce_max(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_max", data, axes, keepdims, noop_with_empty_axes)


def reduce_min(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_min", data, axes, keepdims, noop_with_empty_axes)


def reduce_log_sum(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_log_sum", data, axes, keepdims, noop_with_empty_axes)


def reduce_log_sum_exp(
    data: Array, axes: AxesLike = None, *, keepdims: bool = True, noop_with_empty_axes: bool = False
) -> Array:
    return _reduce("reduce_log_sum_exp", data, axes, keepdims, noop_with_empty_axes)


# The docstrings: one template, filled in per operator, so that the ten stay consistent.
_TEMPLATE = """{summary}

Computes {formula} over the set :math:`S` of reduced positions of each output element.
Over an empty set the result is {empty}.

Parameters
----------
data : array
    The input: an array of any array-API namespace (NumPy, PyTorch, JAX, Dask,
    array-api-strict, ...) with {dtypes}.
axes : None, int, sequence of int, or integer array, optional
    The axes to reduce, each in ``[-r, r-1]`` for an input of rank ``r``, in any order and
    without repeats; a 0-D or 1-D integer array of any namespace is accepted too. None or
    empty means every axis, unless `noop_with_empty_axes` is true.
keepdims : bool or {{0, 1}}, default True
    Keep each reduced axis as an axis of size 1; false removes it.
noop_with_empty_axes : bool or {{0, 1}}, default False
    With None or empty `axes`, reduce over no axis and return {noop}. It has no effect when
    axes are given.

Returns
-------
array
    The result, of the namespace, dtype and device of `data`. Its shape is that of `data`
    with each reduced axis set to 1 (`keepdims` true) or removed; a full reduction with
    ``keepdims=False`` is a 0-D array, never a scalar.

Raises
------
AxisError
    An axis is out of range, repeated, or given for a rank-0 input.
TypeError
    `data` is not an array or has a dtype this operator does not take, or `axes` are not
    integers.
ValueError
    `keepdims` or `noop_with_empty_axes` is not a boolean, 0 or 1.

See Also
--------
{see_also}

Notes
-----
{notes}

Examples
--------
>>> import numpy as np
>>> import anyreduce
>>> x = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
{examples}"""

_ANY_NUMERIC = "a real integer or floating dtype"
_NUMERIC_OR_BOOL = "a real integer, floating or bool dtype"
_WRAP = (
    "The result has the dtype of `data`. Integers are exact modulo ``2**bits`` (two's\n"
    "complement wrap-around, as NumPy and PyTorch); float16 and bfloat16 accumulate in\n"
    "float32 and are rounded once at the end."
)
_THROUGH_FLOAT = (
    "Integers are computed in float64 (float32 where the namespace has no float64) and the\n"
    "result is truncated toward zero; values beyond the dtype's range saturate at its limits."
)


def _document(
    func: Any,
    *,
    summary: str,
    formula: str,
    empty: str,
    noop: str,
    notes: str,
    see_also: str,
    examples: str,
    dtypes: str = _ANY_NUMERIC,
) -> None:
    func.__doc__ = _TEMPLATE.format(
        summary=summary,
        formula=formula,
        empty=empty,
        noop=noop,
        notes=notes,
        see_also=see_also,
        examples=examples.strip("\n"),
        dtypes=dtypes,
    )


_document(
    reduce_sum,
    summary="Sum of the elements over the given axes (ONNX ReduceSum).",
    formula=r":math:`\sum_{i \in S} x_i`",
    empty="0",
    noop="a copy of `data`",
    notes=_WRAP,
    see_also="reduce_mean : The sum divided by the number of elements.",
    examples="""
>>> anyreduce.reduce_sum(x, axes=1)
array([[[ 4.,  6.]],
<BLANKLINE>
       [[12., 14.]],
<BLANKLINE>
       [[20., 22.]]], dtype=float32)
>>> anyreduce.reduce_sum(x, axes=[0, 2], keepdims=False)
array([33., 45.], dtype=float32)
>>> anyreduce.reduce_sum(np.array([100, 100], dtype=np.int8))
array([-56], dtype=int8)
""",
)
_document(
    reduce_sum_square,
    summary="Sum of the squared elements over the given axes (ONNX ReduceSumSquare).",
    formula=r":math:`\sum_{i \in S} x_i^2`",
    empty="0",
    noop="the square of each element",
    notes=_WRAP,
    see_also="reduce_l2 : The square root of this sum.",
    examples="""
>>> anyreduce.reduce_sum_square(x, axes=2, keepdims=False)
array([[  5.,  25.],
       [ 61., 113.],
       [181., 265.]], dtype=float32)
>>> anyreduce.reduce_sum_square(np.array([-3.0, 4.0]), noop_with_empty_axes=True)
array([ 9., 16.])
""",
)
_document(
    reduce_l1,
    summary="L1 norm, the sum of absolute values, over the given axes (ONNX ReduceL1).",
    formula=r":math:`\sum_{i \in S} |x_i|`",
    empty="0",
    noop="the absolute value of each element",
    notes=_WRAP + "\nThe absolute value of an integer dtype's minimum wraps to itself.",
    see_also="reduce_l2 : The Euclidean norm.",
    examples="""
>>> anyreduce.reduce_l1(-x, axes=2, keepdims=False)
array([[ 3.,  7.],
       [11., 15.],
       [19., 23.]], dtype=float32)
>>> anyreduce.reduce_l1(np.array([-3.0, 4.0]), [], noop_with_empty_axes=True)
array([3., 4.])
""",
)
_document(
    reduce_l2,
    summary="L2 norm, the root of the sum of squares, over the given axes (ONNX ReduceL2).",
    formula=r":math:`\sqrt{\sum_{i \in S} x_i^2}`",
    empty="0",
    noop="the absolute value of each element",
    notes=(
        "No intermediate step overflows or underflows when the norm is representable: the\n"
        "squares are summed in a wider type, or each slice is scaled by its largest\n"
        "magnitude when there is none. float16 and bfloat16 accumulate in float32.\n"
        "Integers give the root of the exact sum of squares, computed in float64 and\n"
        "truncated toward zero."
    ),
    see_also="reduce_sum_square : The sum of squares, without the root.",
    examples="""
>>> anyreduce.reduce_l2(np.array([[3.0, 4.0], [5.0, 12.0]]), axes=1, keepdims=False)
array([ 5., 13.])
>>> anyreduce.reduce_l2(np.array([300, 400], dtype=np.float16))
array([500.], dtype=float16)
>>> anyreduce.reduce_l2(np.array([1e20, 1e20], dtype=np.float32))
array([1.4142136e+20], dtype=float32)
""",
)
_document(
    reduce_mean,
    summary="Arithmetic mean over the given axes (ONNX ReduceMean).",
    formula=r":math:`\frac{1}{|S|} \sum_{i \in S} x_i`",
    empty="NaN for floating dtypes and 0 for integers",
    noop="a copy of `data`",
    notes=(
        "The mean of integers is exact, truncated toward zero; it always fits the dtype.\n"
        "float16 and bfloat16 accumulate in float32 and are rounded once at the end."
    ),
    see_also="reduce_sum : The sum, without the division.",
    examples="""
>>> anyreduce.reduce_mean(x, axes=1, keepdims=False)
array([[ 2.,  3.],
       [ 6.,  7.],
       [10., 11.]], dtype=float32)
>>> anyreduce.reduce_mean(np.array([-7, 0], dtype=np.int8))
array([-3], dtype=int8)
""",
)
_document(
    reduce_prod,
    summary="Product of the elements over the given axes (ONNX ReduceProd).",
    formula=r":math:`\prod_{i \in S} x_i`",
    empty="1",
    noop="a copy of `data`",
    notes=_WRAP,
    see_also="reduce_sum : The sum of the elements.",
    examples="""
>>> anyreduce.reduce_prod(x, axes=2, keepdims=False)
array([[  2.,  12.],
       [ 30.,  56.],
       [ 90., 132.]], dtype=float32)
>>> anyreduce.reduce_prod(np.zeros((2, 0)), axes=1, keepdims=False)
array([1., 1.])
""",
)
_document(
    reduce_max,
    summary="Maximum over the given axes (ONNX ReduceMax); logical or for bool.",
    formula=r":math:`\max_{i \in S} x_i`",
    empty="-inf for floating dtypes, the dtype's minimum for integers and False for bool",
    noop="a copy of `data`",
    notes="NaN propagates: the maximum of a slice holding a NaN is NaN.",
    see_also="reduce_min : The minimum.",
    examples="""
>>> anyreduce.reduce_max(x, axes=1, keepdims=False)
array([[ 3.,  4.],
       [ 7.,  8.],
       [11., 12.]], dtype=float32)
>>> anyreduce.reduce_max(np.array([1.0, np.nan, 3.0]))
array([nan])
>>> anyreduce.reduce_max(np.array([[True, False], [False, False]]), axes=1, keepdims=False)
array([ True, False])
""",
    dtypes=_NUMERIC_OR_BOOL,
)
_document(
    reduce_min,
    summary="Minimum over the given axes (ONNX ReduceMin); logical and for bool.",
    formula=r":math:`\min_{i \in S} x_i`",
    empty="+inf for floating dtypes, the dtype's maximum for integers and True for bool",
    noop="a copy of `data`",
    notes="NaN propagates: the minimum of a slice holding a NaN is NaN.",
    see_also="reduce_max : The maximum.",
    examples="""
>>> anyreduce.reduce_min(x, axes=1, keepdims=False)
array([[ 1.,  2.],
       [ 5.,  6.],
       [ 9., 10.]], dtype=float32)
>>> anyreduce.reduce_min(np.zeros((0, 2), dtype=np.uint8), axes=0)
array([[255, 255]], dtype=uint8)
""",
    dtypes=_NUMERIC_OR_BOOL,
)
_document(
    reduce_log_sum,
    summary="Natural logarithm of the sum over the given axes (ONNX ReduceLogSum).",
    formula=r":math:`\log \sum_{i \in S} x_i`",
    empty="-inf (the dtype's minimum for integers)",
    noop="the logarithm of each element",
    notes=_THROUGH_FLOAT,
    see_also="reduce_log_sum_exp : The logarithm of the sum of exponentials.",
    examples="""
>>> anyreduce.reduce_log_sum(np.array([[1.0, 1.0], [2.0, 3.0]]), axes=1, keepdims=False)
array([0.69314718, 1.60943791])
>>> anyreduce.reduce_log_sum(np.array([0.5, 2.0]), [], noop_with_empty_axes=True)
array([-0.69314718,  0.69314718])
""",
)
_document(
    reduce_log_sum_exp,
    summary=("Logarithm of the sum of exponentials over the given axes (ONNX ReduceLogSumExp)."),
    formula=r":math:`\log \sum_{i \in S} e^{x_i}`",
    empty="-inf (the dtype's minimum for integers)",
    noop="a copy of `data`",
    notes=(
        "Computed with a max shift, :math:`m + \\log \\sum_{i \\in S} e^{x_i - m}` where\n"
        ":math:`m` is the slice's maximum, so that no exponential overflows: [1000, 1000]\n"
        "gives 1000 + log 2, a slice of -inf gives -inf and a slice holding +inf gives +inf.\n"
        + _THROUGH_FLOAT
    ),
    see_also="reduce_log_sum : The logarithm of the sum.",
    examples="""
>>> anyreduce.reduce_log_sum_exp(np.array([[0.0, 0.0], [-1.0, -1.0]]), axes=1)
array([[ 0.69314718],
       [-0.30685282]])
>>> big = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]])
>>> anyreduce.reduce_log_sum_exp(big, axes=1, keepdims=False)
array([1000.69314718,          -inf])
""",
)
