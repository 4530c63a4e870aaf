"""The ten reductions under the rules of one ONNX opset.

Each function picks the operator version the opset uses (:mod:`._opsets`), enforces that
version's rules (type constraint, axes range, which attributes exist) and runs the shared
kernel. Nothing here computes: the values are the core's.
"""

from __future__ import annotations

from typing import Any

from .. import _backends
from .._lib import _dtypes
from .._lib._axes import AxesLike, check_flag, normalize_axes
from .._lib._ops import OPS, run
from ._opsets import NEWEST_OPSET, VERSIONS, OpVersion, op_version

__all__ = [
    "reduce",
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
Namespace = Any


def check_dtype(version: OpVersion, xp: Namespace, dtype: Any, label: str | None = None) -> None:
    """Raise TypeError unless ``version``'s type constraint admits ``dtype``."""
    name = _dtypes.dtype_name(xp, dtype)
    if name not in version.dtypes:
        shown = name or str(dtype)
        msg = (
            f"{label or version.label}: input dtype {shown} is not supported; "
            f"{version.label} takes {', '.join(version.dtypes)}"
        )
        raise TypeError(msg)


def reduce(
    name: str,
    data: Array,
    axes: AxesLike,
    *,
    keepdims: object,
    noop_with_empty_axes: object,
    version: OpVersion,
    label: str | None = None,
) -> Array:
    """Run reduction ``name`` (``"reduce_sum"``, ...) under the rules of ``version``;
    messages start with ``label`` (default: the version, ``"ReduceSum-13"``)."""
    label = label or version.label
    xp = _backends.namespace(label, data)
    check_dtype(version, xp, data.dtype, label)
    keep = check_flag(label, "keepdims", keepdims)
    noop = check_flag(label, "noop_with_empty_axes", noop_with_empty_axes)
    if noop and not version.noop_with_empty_axes:
        msg = (
            f"{label}: noop_with_empty_axes does not exist before {version.op}-"
            f"{_first_noop(version.op)}; got noop_with_empty_axes={noop_with_empty_axes!r}"
        )
        raise ValueError(msg)
    normal = normalize_axes(
        label,
        axes,
        data.ndim,
        noop_with_empty_axes=noop,
        allow_negative=version.negative_axes,
    )
    return run(OPS[name], data, normal, keep, xp=xp, label=label)


def _first_noop(op: str) -> int:
    return next(v.since for v in VERSIONS[op] if v.noop_with_empty_axes)


def _reduce(
    name: str,
    data: Array,
    axes: AxesLike,
    keepdims: object,
    noop_with_empty_axes: object,
    opset: int,
) -> Array:
    version = op_version(OPS[name].onnx_name, opset)
    return reduce(
        name,
        data,
        axes,
        keepdims=keepdims,
        noop_with_empty_axes=noop_with_empty_axes,
        version=version,
    )


def reduce_sum(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_sum", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_sum_square(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_sum_square", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_l1(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_l1", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_l2(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_l2", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_mean(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_mean", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_prod(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_prod", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_max(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_max", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_min(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_min", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_log_sum(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_log_sum", data, axes, keepdims, noop_with_empty_axes, opset)


def reduce_log_sum_exp(
    data: Array,
    axes: AxesLike = None,
    *,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
    opset: int = NEWEST_OPSET,
) -> Array:
    return _reduce("reduce_log_sum_exp", data, axes, keepdims, noop_with_empty_axes, opset)


_TEMPLATE = """{summary}

    The same values as :func:`anyreduce.{name}`; this layer adds the rules of the ONNX
    version that ``opset`` selects ({versions}). {notes}

    Parameters
    ----------
    data : array
        Input of any array-API namespace, of a dtype the selected version admits.
    axes : None, int, sequence of int, or integer array, optional
        Axes to reduce over: ``[-r, r-1]`` from opset 11, ``[0, r-1]`` at version 1. In
        ONNX the axes are an attribute before {op}-{axes_input} and an input from it;
        here they are passed the same way at every opset. None or empty reduces over all
        axes, unless ``noop_with_empty_axes`` is true.
    keepdims : {{0, 1}} or bool, default 1
        Keep reduced axes as axes of size 1.
    noop_with_empty_axes : {{0, 1}} or bool, default 0
        With empty or no axes, reduce over nothing ({noop}). Exists from {op}-{axes_input}.
    opset : int, default {newest}
        ONNX opset (1 to {newest}); the newest version of {op} not after it applies.

    Returns
    -------
    array
        Same namespace, dtype and device as ``data``.

    Raises
    ------
    AxisError
        An axis is out of range for the version, repeated, or given for a rank-0 input.
    TypeError
        ``data`` is not an array or its dtype is outside the version's type constraint.
    ValueError
        ``opset`` is unknown, a flag is not 0/1, or ``noop_with_empty_axes`` is true at a
        version that does not have it.

    Examples
    --------
    >>> import numpy as np
    >>> from anyreduce import onnx
{example}"""


def _document(function: Any, summary: str, noop: str, notes: str, example: str) -> None:
    op = OPS[function.__name__].onnx_name
    history = VERSIONS[op]
    function.__doc__ = _TEMPLATE.format(
        summary=summary,
        name=function.__name__,
        versions=", ".join(v.label for v in history),
        notes=notes,
        op=op,
        axes_input=next(v.since for v in history if v.axes_input),
        noop=noop,
        newest=NEWEST_OPSET,
        example=example,
    )


_document(
    reduce_sum,
    "Sum over the given axes (ONNX ReduceSum).",
    "returns the input",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[1, 2], [3, 4]], dtype=np.int64)\n"
    "    >>> onnx.reduce_sum(x, [1], keepdims=0, opset=11)\n"
    "    array([3, 7])\n",
)
_document(
    reduce_sum_square,
    "Sum of squares over the given axes (ONNX ReduceSumSquare).",
    "returns the squares",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)\n"
    "    >>> onnx.reduce_sum_square(x, [1], keepdims=0, opset=18)\n"
    "    array([ 5., 25.], dtype=float32)\n",
)
_document(
    reduce_l1,
    "L1 norm over the given axes (ONNX ReduceL1).",
    "returns the absolute values",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[1.0, -2.0], [-3.0, 4.0]], dtype=np.float32)\n"
    "    >>> onnx.reduce_l1(x, [], noop_with_empty_axes=1, opset=18)\n"
    "    array([[1., 2.],\n           [3., 4.]], dtype=float32)\n",
)
_document(
    reduce_l2,
    "L2 norm over the given axes (ONNX ReduceL2).",
    "returns the absolute values",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[3.0, 4.0]], dtype=np.float16)\n"
    "    >>> onnx.reduce_l2(x, [1], keepdims=0, opset=13)\n"
    "    array([5.], dtype=float16)\n",
)
_document(
    reduce_mean,
    "Mean over the given axes (ONNX ReduceMean).",
    "returns the input",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])\n"
    "    >>> onnx.reduce_mean(x, keepdims=0, opset=1)\n"
    "    array(2.5)\n",
)
_document(
    reduce_prod,
    "Product over the given axes (ONNX ReduceProd).",
    "returns the input",
    "bfloat16 from version 13.",
    "    >>> x = np.array([[1, 2], [3, 4]], dtype=np.int32)\n"
    "    >>> onnx.reduce_prod(x, [-1], opset=13)\n"
    "    array([[ 2],\n           [12]], dtype=int32)\n",
)
_document(
    reduce_max,
    "Maximum over the given axes (ONNX ReduceMax).",
    "returns the input",
    "int8 and uint8 from version 12, bfloat16 from 13, bool (``any``) from 20.",
    "    >>> x = np.array([[True, False], [False, False]])\n"
    "    >>> onnx.reduce_max(x, [1], keepdims=0, opset=20)\n"
    "    array([ True, False])\n",
)
_document(
    reduce_min,
    "Minimum over the given axes (ONNX ReduceMin).",
    "returns the input",
    "int8 and uint8 from version 12, bfloat16 from 13, bool (``all``) from 20.",
    "    >>> x = np.array([[5, -2], [7, 3]], dtype=np.int8)\n"
    "    >>> onnx.reduce_min(x, [0], keepdims=0, opset=12)\n"
    "    array([ 5, -2], dtype=int8)\n",
)
_document(
    reduce_log_sum,
    "Logarithm of the sum over the given axes (ONNX ReduceLogSum).",
    "returns the logarithms",
    "bfloat16 from version 13; floating types only from 28.",
    "    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])\n"
    "    >>> onnx.reduce_log_sum(x, [1], keepdims=0).round(4)\n"
    "    array([1.0986, 1.9459])\n",
)
_document(
    reduce_log_sum_exp,
    "Logarithm of the sum of exponentials over the given axes (ONNX ReduceLogSumExp).",
    "returns the input",
    "bfloat16 from version 13; floating types only from 28.",
    "    >>> x = np.array([[1000.0, 1000.0]])\n"
    "    >>> onnx.reduce_log_sum_exp(x, [1], keepdims=0).round(4)\n"
    "    array([1000.6931])\n",
)
