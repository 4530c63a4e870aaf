"""The OpenVINO reductions: ReduceL1-4, ReduceL2-4 and the opset-1 reductions.

They differ from ONNX in their rules, not their values: ``axes`` is a required input,
empty ``axes`` means "reduce over nothing" (the element-wise part still applies),
``keep_dims`` defaults to false, and the two logical reductions take bool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _backends
from .._lib import _dtypes
from .._lib._axes import AxesLike, check_flag, normalize_axes
from .._lib._ops import OPS, run

__all__ = [
    "OPERATORS",
    "Operator",
    "reduce_l1",
    "reduce_l2",
    "reduce_logical_and",
    "reduce_logical_or",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
]

Array = Any


@dataclass(frozen=True)
class Operator:
    """One OpenVINO reduction: its name and version, and the core operator computing it.

    Attributes
    ----------
    op : str
        OpenVINO operator name, e.g. ``"ReduceL1"``.
    version : int
        The operator's version in the OpenVINO opset (``ReduceL1-4``).
    kernel : str
        Name of the core reduction computing it (``"reduce_l1"``); the logical
        reductions are ``reduce_min`` (AND) and ``reduce_max`` (OR) on bool.
    logical : bool
        Takes bool only; the others take every integer and real floating dtype.
    """

    op: str
    version: int
    kernel: str
    logical: bool

    @property
    def label(self) -> str:
        """``"ReduceL1-4"``: the name error messages use."""
        return f"{self.op}-{self.version}"


OPERATORS: dict[str, Operator] = {
    "reduce_l1": Operator("ReduceL1", 4, "reduce_l1", False),
    "reduce_l2": Operator("ReduceL2", 4, "reduce_l2", False),
    "reduce_sum": Operator("ReduceSum", 1, "reduce_sum", False),
    "reduce_mean": Operator("ReduceMean", 1, "reduce_mean", False),
    "reduce_max": Operator("ReduceMax", 1, "reduce_max", False),
    "reduce_min": Operator("ReduceMin", 1, "reduce_min", False),
    "reduce_prod": Operator("ReduceProd", 1, "reduce_prod", False),
    # On bool, max is "any" and min is "all", with the same empty-set values.
    "reduce_logical_and": Operator("ReduceLogicalAnd", 1, "reduce_min", True),
    "reduce_logical_or": Operator("ReduceLogicalOr", 1, "reduce_max", True),
}


def _reduce(name: str, data: Array, axes: AxesLike, keep_dims: object) -> Array:
    operator = OPERATORS[name]
    label = operator.label
    xp = _backends.namespace(label, data)
    dtype = _dtypes.dtype_name(xp, data.dtype)
    if operator.logical:
        admitted, allowed = dtype == "bool", "bool"
    else:
        admitted, allowed = dtype in _dtypes.NUMERIC_NAMES, "integer and real floating dtypes"
    if not admitted:
        msg = (
            f"{label}: input dtype {dtype or data.dtype} is not supported; {label} takes {allowed}"
        )
        raise TypeError(msg)
    keep = check_flag(label, "keep_dims", keep_dims)
    if axes is None:
        msg = f"{label}: axes is a required input (a scalar or 1-D integer array); got None"
        raise TypeError(msg)
    normal = normalize_axes(
        label,
        axes,
        data.ndim,
        noop_with_empty_axes=True,
        allow_negative=True,
        empty_means_all=False,
    )
    return run(OPS[operator.kernel], data, normal, keep, xp=xp, label=label)


def reduce_l1(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_l1", data, axes, keep_dims)


def reduce_l2(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_l2", data, axes, keep_dims)


def reduce_sum(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_sum", data, axes, keep_dims)


def reduce_mean(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_mean", data, axes, keep_dims)


def reduce_max(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_max", data, axes, keep_dims)


def reduce_min(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_min", data, axes, keep_dims)


def reduce_prod(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_prod", data, axes, keep_dims)


def reduce_logical_and(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_logical_and", data, axes, keep_dims)


def reduce_logical_or(data: Array, axes: AxesLike, *, keep_dims: bool = False) -> Array:
    return _reduce("reduce_logical_or", data, axes, keep_dims)


_TEMPLATE = """{summary}

    OpenVINO {label}: the values of :func:`anyreduce.{kernel}`{bool_note} under OpenVINO's
    rules. With empty ``axes`` nothing is reduced{noop}.

    Parameters
    ----------
    data : array
        Input of any array-API namespace; {dtypes}.
    axes : int, sequence of int, or integer array
        Required. A scalar or 1-D list of unique axes in ``[-r, r-1]``, of any integer type.
        Empty reduces over nothing.
    keep_dims : bool or {{0, 1}}, default False
        Keep reduced axes as axes of size 1.

    Returns
    -------
    array
        Same namespace, dtype and device as ``data``.

    Raises
    ------
    AxisError
        An axis is out of range, repeated, or given for a rank-0 input.
    TypeError
        ``data`` is not an array or has an unsupported dtype; ``axes`` is missing or not
        integers.
    ValueError
        ``keep_dims`` is not a boolean or 0/1.

    Examples
    --------
    >>> import numpy as np
    >>> from anyreduce import openvino
{example}"""

_NUMERIC = "every integer and real floating dtype"
_DOCS = {
    "reduce_l1": (
        "Sum of absolute values over ``axes``.",
        ": the absolute values are returned",
        "    >>> x = np.array([[1.0, -2.0], [-3.0, 4.0]], dtype=np.float32)\n"
        "    >>> openvino.reduce_l1(x, [1])\n"
        "    array([3., 7.], dtype=float32)\n"
        "    >>> openvino.reduce_l1(x, [])\n"
        "    array([[1., 2.],\n           [3., 4.]], dtype=float32)\n",
    ),
    "reduce_l2": (
        "Root of the sum of squares over ``axes``.",
        ": the absolute values are returned",
        "    >>> x = np.array([[3.0, -4.0]], dtype=np.float32)\n"
        "    >>> openvino.reduce_l2(x, -1, keep_dims=True)\n"
        "    array([[5.]], dtype=float32)\n",
    ),
    "reduce_sum": (
        "Sum over ``axes``.",
        " and the input is returned",
        "    >>> x = np.array([[1, 2], [3, 4]], dtype=np.int64)\n"
        "    >>> openvino.reduce_sum(x, np.array([0], dtype=np.int32))\n"
        "    array([4, 6])\n",
    ),
    "reduce_mean": (
        "Mean over ``axes``.",
        " and the input is returned",
        "    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])\n"
        "    >>> openvino.reduce_mean(x, [0, 1])\n"
        "    array(2.5)\n",
    ),
    "reduce_max": (
        "Maximum over ``axes``.",
        " and the input is returned",
        "    >>> x = np.array([[1, 5], [3, 4]], dtype=np.uint8)\n"
        "    >>> openvino.reduce_max(x, 1)\n"
        "    array([5, 4], dtype=uint8)\n",
    ),
    "reduce_min": (
        "Minimum over ``axes``.",
        " and the input is returned",
        "    >>> x = np.array([[1, 5], [3, 4]], dtype=np.int16)\n"
        "    >>> openvino.reduce_min(x, 0)\n"
        "    array([1, 4], dtype=int16)\n",
    ),
    "reduce_prod": (
        "Product over ``axes``.",
        " and the input is returned",
        "    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])\n"
        "    >>> openvino.reduce_prod(x, [1])\n"
        "    array([ 2., 12.])\n",
    ),
    "reduce_logical_and": (
        "Logical AND (all) over ``axes``; True over an empty set.",
        " and the input is returned",
        "    >>> x = np.array([[True, False], [True, True]])\n"
        "    >>> openvino.reduce_logical_and(x, [1])\n"
        "    array([False,  True])\n",
    ),
    "reduce_logical_or": (
        "Logical OR (any) over ``axes``; False over an empty set.",
        " and the input is returned",
        "    >>> x = np.array([[True, False], [False, False]])\n"
        "    >>> openvino.reduce_logical_or(x, [1])\n"
        "    array([ True, False])\n",
    ),
}

for _name, (_summary, _noop, _example) in _DOCS.items():
    _operator = OPERATORS[_name]
    globals()[_name].__doc__ = _TEMPLATE.format(
        summary=_summary,
        label=_operator.label,
        kernel=_operator.kernel,
        bool_note=" on bool" if _operator.logical else "",
        noop=_noop,
        dtypes="bool" if _operator.logical else _NUMERIC,
        example=_example,
    )
