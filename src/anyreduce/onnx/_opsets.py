"""The ONNX opset history of the ten reductions: the one table every ONNX rule comes from.

Each operator has a tuple of :class:`OpVersion` records, oldest first. A record says what
its version changed: whether ``axes`` is an input (else an attribute), whether the
``noop_with_empty_axes`` attribute exists, whether negative axes are allowed, which input
dtypes the type constraint ``T`` admits, and whether the schema is defined as a function
of other operators. Checked against ``onnx.defs`` by ``tests/test_onnx_profile.py``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["DTYPE_ORDER", "NEWEST_OPSET", "OLDEST_OPSET", "VERSIONS", "OpVersion", "op_version"]

OLDEST_OPSET = 1
"""The first ONNX opset (of the default ``ai.onnx`` domain)."""

NEWEST_OPSET = 28
"""The newest ONNX opset whose reductions this table knows."""


@dataclass(frozen=True)
class OpVersion:
    """One version of one ONNX reduction, as its schema defines it.

    Attributes
    ----------
    op : str
        ONNX operator name, e.g. ``"ReduceSum"``.
    since : int
        The opset that introduced this version (its ``since_version``).
    axes_input : bool
        ``axes`` is the optional second input; otherwise it is the ``axes`` attribute.
    noop_with_empty_axes : bool
        The ``noop_with_empty_axes`` attribute exists (else empty axes always mean all).
    negative_axes : bool
        Axes in ``[-r, -1]`` are accepted (from opset 11); version 1 takes ``[0, r-1]`` only.
    dtypes : tuple of str
        Input dtypes the type constraint admits, by array-API name, in the order of
        :data:`DTYPE_ORDER`.
    function : bool
        The schema defines the operator as a function of other operators.
    """

    op: str
    since: int
    axes_input: bool
    noop_with_empty_axes: bool
    negative_axes: bool
    dtypes: tuple[str, ...]
    function: bool

    @property
    def label(self) -> str:
        """``"ReduceSum-13"``: the name error messages use."""
        return f"{self.op}-{self.since}"


DTYPE_ORDER = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bfloat16",
    "float16",
    "float32",
    "float64",
)
"""Every dtype name an ONNX reduction may admit, in the order tables list them."""

_NUMERIC = ("float16", "float32", "float64", "int32", "int64", "uint32", "uint64")
_FLOATS = ("bfloat16", "float16", "float32", "float64")

# since_version of every schema, per operator.
_HISTORY: dict[str, tuple[int, ...]] = {
    "ReduceSum": (1, 11, 13),
    "ReduceSumSquare": (1, 11, 13, 18),
    "ReduceL1": (1, 11, 13, 18),
    "ReduceL2": (1, 11, 13, 18),
    "ReduceMean": (1, 11, 13, 18),
    "ReduceProd": (1, 11, 13, 18),
    "ReduceMax": (1, 11, 12, 13, 18, 20),
    "ReduceMin": (1, 11, 12, 13, 18, 20),
    "ReduceLogSum": (1, 11, 13, 18, 28),
    "ReduceLogSumExp": (1, 11, 13, 18, 28),
}

# The version from which axes is an input; noop_with_empty_axes arrived with it.
_AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in _HISTORY}
_NEGATIVE_AXES_SINCE = 11
_BFLOAT16_SINCE = 13
_SMALL_INTS_SINCE = {"ReduceMax": 12, "ReduceMin": 12}  # int8, uint8
_BOOL_SINCE = {"ReduceMax": 20, "ReduceMin": 20}
_FLOAT_ONLY_SINCE = {"ReduceLogSum": 28, "ReduceLogSumExp": 28}
# Defined as a function body (ReduceL1-18 = Abs then ReduceSum, ...).
_FUNCTION_SINCE = {
    "ReduceL1": 18,
    "ReduceL2": 18,
    "ReduceSumSquare": 18,
    "ReduceLogSum": 18,
    "ReduceLogSumExp": 18,
}

_NEVER = 1 << 30


def _dtypes(op: str, since: int) -> tuple[str, ...]:
    if since >= _FLOAT_ONLY_SINCE.get(op, _NEVER):
        return _ordered(_FLOATS)
    dtypes = set(_NUMERIC)
    if since >= _BFLOAT16_SINCE:
        dtypes.add("bfloat16")
    if since >= _SMALL_INTS_SINCE.get(op, _NEVER):
        dtypes |= {"int8", "uint8"}
    if since >= _BOOL_SINCE.get(op, _NEVER):
        dtypes.add("bool")
    return _ordered(dtypes)


def _ordered(dtypes: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(dtypes, key=DTYPE_ORDER.index))


def _version(op: str, since: int) -> OpVersion:
    axes_input = since >= _AXES_INPUT_SINCE[op]
    return OpVersion(
        op=op,
        since=since,
        axes_input=axes_input,
        noop_with_empty_axes=axes_input,
        negative_axes=since >= _NEGATIVE_AXES_SINCE,
        dtypes=_dtypes(op, since),
        function=since >= _FUNCTION_SINCE.get(op, _NEVER),
    )


VERSIONS: Mapping[str, tuple[OpVersion, ...]] = MappingProxyType(
    {op: tuple(_version(op, since) for since in history) for op, history in _HISTORY.items()}
)
"""Every version of every reduction, by ONNX operator name, oldest first."""


def op_version(op: str, opset: int = NEWEST_OPSET) -> OpVersion:
    """The version of ``op`` that opset ``opset`` uses: the newest one not after it.

    Parameters
    ----------
    op : str
        ONNX operator name (``"ReduceSum"``).
    opset : int, default NEWEST_OPSET
        An opset of the default ONNX domain, from 1 to :data:`NEWEST_OPSET`.

    Returns
    -------
    OpVersion

    Raises
    ------
    TypeError
        ``op`` is not a string, or ``opset`` is not an integer.
    ValueError
        ``op`` is not one of the ten reductions, or ``opset`` is below 1 or newer than
        :data:`NEWEST_OPSET`.

    Examples
    --------
    >>> from anyreduce.onnx import op_version
    >>> op_version("ReduceSum", 12).label
    'ReduceSum-11'
    >>> op_version("ReduceSum", 12).axes_input
    False
    """
    name: object = op  # callers without a type checker pass anything
    if not isinstance(name, str):
        msg = f"op must be the name of an ONNX reduction (a str), got {type(name).__name__}"
        raise TypeError(msg)
    if op not in VERSIONS:
        msg = f"{op!r} is not an ONNX reduction; expected one of {', '.join(VERSIONS)}"
        raise ValueError(msg)
    if isinstance(opset, bool):
        msg = f"{op}: opset must be an integer, got {opset!r}"
        raise TypeError(msg)
    try:
        number = operator.index(opset)
    except TypeError:
        msg = f"{op}: opset must be an integer, got {opset!r} of type {type(opset).__name__}"
        raise TypeError(msg) from None
    if not OLDEST_OPSET <= number <= NEWEST_OPSET:
        msg = (
            f"{op}: opset {number} is unknown; anyreduce knows opsets "
            f"{OLDEST_OPSET} to {NEWEST_OPSET}"
        )
        raise ValueError(msg)
    return [v for v in VERSIONS[op] if v.since <= number][-1]
