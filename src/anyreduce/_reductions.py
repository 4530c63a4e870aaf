"""The public reductions: validate once, then run the array-API kernel.

Every function takes data of any array-API namespace and returns an array of the same
namespace, dtype and device.
"""

from __future__ import annotations

from typing import Any

from ._lib import _backends, _dtypes
from ._lib._axes import AxesLike, check_flag, normalize_axes
from ._lib._ops import OPS, run

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


def _reduce(
    name: str, data: Array, axes: AxesLike, keepdims: object, noop_with_empty_axes: object
) -> Array:
    op = OPS[name]
    xp = _backends.namespace(name, data)
    _dtypes.check_dtype(name, xp, data.dtype, accepts_bool=op.accepts_bool)
    keep = check_flag(name, "keepdims", keepdims)
    noop = check_flag(name, "noop_with_empty_axes", noop_with_empty_axes)
    normal = normalize_axes(name, axes, data.ndim, noop_with_empty_axes=noop)
    return run(op, data, normal, keep, xp=xp)


_PARAMETERS = """
    Parameters
    ----------
    data : array
        Input of any array-API namespace (NumPy, PyTorch, JAX, Dask, array-api-strict, ...).
        Every real numeric dtype is accepted{bool_note}.
    axes : None, int, sequence of int, or integer array, optional
        Axes to reduce over, in ``[-r, r-1]`` for an input of rank ``r``; order does not
        matter. An integer array (0-D or 1-D) of any namespace is accepted. None or empty
        reduces over all axes, unless ``noop_with_empty_axes`` is true.
    keepdims : bool or {{0, 1}}, default True
        Keep reduced axes as axes of size 1.
    noop_with_empty_axes : bool or {{0, 1}}, default False
        With empty or no axes, reduce over nothing: only the element-wise part of the
        operator is applied ({noop}).

    Returns
    -------
    array
        Same namespace, dtype and device as ``data``; 0-D for a full reduction with
        ``keepdims=False``.

    Raises
    ------
    AxisError
        An axis is out of range, repeated, or given for a rank-0 input.
    TypeError
        ``data`` is not an array, its dtype is not supported, or ``axes`` are not integers.
    ValueError
        ``keepdims`` or ``noop_with_empty_axes`` is not a boolean or 0/1.
"""


def _doc(
    summary: str, *, noop: str, empty: str, notes: str, example: str, bool_note: str = ""
) -> str:
    body = _PARAMETERS.format(noop=noop, bool_note=bool_note)
    return (
        f"{summary}\n\n    Over an empty set the result is {empty}.\n{notes}{body}"
        f"\n    Examples\n    --------\n    >>> import numpy as np\n    >>> import anyreduce\n"
        f"    >>> x = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)\n{example}"
    )


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


_INTEGER_FLOAT_STEP = """
    Integers are computed in float64 (float32 where the namespace has no float64) and
    truncated toward zero; values beyond the dtype's range saturate at its limits.
"""

reduce_sum.__doc__ = _doc(
    "Sum of the elements over the given axes (ONNX ReduceSum).",
    noop="the input itself",
    empty="0",
    notes="\n    Integers wrap modulo 2**bits; float16 and bfloat16 accumulate in float32.\n",
    example=(
        "    >>> anyreduce.reduce_sum(x, axes=[1], keepdims=False)\n"
        "    array([[ 4.,  6.],\n           [12., 14.],\n           [20., 22.]], dtype=float32)\n"
    ),
)
reduce_sum_square.__doc__ = _doc(
    "Sum of the squared elements over the given axes (ONNX ReduceSumSquare).",
    noop="the squares",
    empty="0",
    notes="\n    Integers wrap modulo 2**bits; float16 and bfloat16 accumulate in float32.\n",
    example=(
        "    >>> anyreduce.reduce_sum_square(x, axes=[2], keepdims=False)\n"
        "    array([[  5.,  25.],\n           [ 61., 113.],\n"
        "           [181., 265.]], dtype=float32)\n"
    ),
)
reduce_l1.__doc__ = _doc(
    "L1 norm, the sum of absolute values, over the given axes (ONNX ReduceL1).",
    noop="the absolute values",
    empty="0",
    notes="\n    Integers wrap modulo 2**bits; float16 and bfloat16 accumulate in float32.\n",
    example=(
        "    >>> anyreduce.reduce_l1(-x, axes=[2], keepdims=False)\n"
        "    array([[ 3.,  7.],\n           [11., 15.],\n           [19., 23.]], dtype=float32)\n"
    ),
)
reduce_l2.__doc__ = _doc(
    "L2 norm, the root of the sum of squares, over the given axes (ONNX ReduceL2).",
    noop="the absolute values",
    empty="0",
    notes=(
        "\n    Squares never overflow or underflow when the norm is representable: they are\n"
        "    summed in a wider type or scaled per slice." + _INTEGER_FLOAT_STEP
    ),
    example=(
        "    >>> anyreduce.reduce_l2(np.array([300, 400], dtype=np.float16))\n"
        "    array([500.], dtype=float16)\n"
    ),
)
reduce_mean.__doc__ = _doc(
    "Arithmetic mean over the given axes (ONNX ReduceMean).",
    noop="the input itself",
    empty="NaN for floats and 0 for integers",
    notes="\n    The mean of integers is exact, truncated toward zero.\n",
    example=(
        "    >>> anyreduce.reduce_mean(x, axes=[1], keepdims=False)\n"
        "    array([[ 2.,  3.],\n           [ 6.,  7.],\n           [10., 11.]], dtype=float32)\n"
    ),
)
reduce_prod.__doc__ = _doc(
    "Product of the elements over the given axes (ONNX ReduceProd).",
    noop="the input itself",
    empty="1",
    notes="\n    Integers wrap modulo 2**bits; float16 and bfloat16 accumulate in float32.\n",
    example=(
        "    >>> anyreduce.reduce_prod(x, axes=[2], keepdims=False)\n"
        "    array([[  2.,  12.],\n           [ 30.,  56.],\n"
        "           [ 90., 132.]], dtype=float32)\n"
    ),
)
reduce_max.__doc__ = _doc(
    "Maximum over the given axes (ONNX ReduceMax); ``any`` for bool.",
    noop="the input itself",
    empty="-inf for floats, the dtype minimum for integers and False for bool",
    notes="\n    NaN propagates: a slice containing NaN has maximum NaN.\n",
    example=(
        "    >>> anyreduce.reduce_max(x, axes=[1], keepdims=False)\n"
        "    array([[ 3.,  4.],\n           [ 7.,  8.],\n           [11., 12.]], dtype=float32)\n"
    ),
    bool_note=", and bool",
)
reduce_min.__doc__ = _doc(
    "Minimum over the given axes (ONNX ReduceMin); ``all`` for bool.",
    noop="the input itself",
    empty="+inf for floats, the dtype maximum for integers and True for bool",
    notes="\n    NaN propagates: a slice containing NaN has minimum NaN.\n",
    example=(
        "    >>> anyreduce.reduce_min(x, axes=[1], keepdims=False)\n"
        "    array([[ 1.,  2.],\n           [ 5.,  6.],\n           [ 9., 10.]], dtype=float32)\n"
    ),
    bool_note=", and bool",
)
reduce_log_sum.__doc__ = _doc(
    "Natural logarithm of the sum over the given axes (ONNX ReduceLogSum).",
    noop="the logarithm of each element",
    empty="-inf (the dtype minimum for integers)",
    notes=_INTEGER_FLOAT_STEP,
    example=(
        "    >>> anyreduce.reduce_log_sum(x, axes=[2], keepdims=False).round(4)\n"
        "    array([[1.0986, 1.9459],\n           [2.3979, 2.7081],\n"
        "           [2.9444, 3.091 ]], dtype=float32)\n"
    ),
)
reduce_log_sum_exp.__doc__ = _doc(
    "Logarithm of the sum of exponentials over the given axes (ONNX ReduceLogSumExp).",
    noop="the input itself",
    empty="-inf (the dtype minimum for integers)",
    notes=(
        "\n    Computed with a max shift: [1000, 1000] gives 1000 + log 2, a slice of -inf gives\n"
        "    -inf and a slice holding +inf gives +inf." + _INTEGER_FLOAT_STEP
    ),
    example=(
        "    >>> anyreduce.reduce_log_sum_exp(np.array([1000.0, 1000.0]), keepdims=False)\n"
        "    array(1000.69314718)\n"
    ),
)
