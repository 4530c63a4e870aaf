"""The element-wise ONNX operators :func:`anyreduce.onnx.run_node` runs beside the reductions.

They are the ones found around reductions: the function bodies of ReduceL1, ReduceL2,
ReduceSumSquare, ReduceLogSum and ReduceLogSumExp (Abs, Mul, Sqrt, Exp, Log, Cast,
CastLike), and the graphs PyTorch's TorchScript exporter writes for norms, means and
variances (Constant, Identity, Add, Sub, Div, Pow, Neg, Reciprocal). Each follows the ONNX
definition (types of its newest version, multidirectional broadcasting, integer Div
truncating toward zero) and computes with array-API calls on the inputs' namespace and
device. Each operator is ``(node, label, inputs) -> array``; ``inputs`` are arrays with
trailing absent ones removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import array_api_compat
import numpy as np

from .. import _backends
from .._agnostic._kernels import float_to_int
from .._lib import _dtypes
from .._lib._ops import OPS, run

__all__ = ["CONSTANT", "ELEMENTWISE", "ONNX_DTYPES", "check_attributes", "node_label"]

Array = Any
Namespace = Any
Node = Any  # onnx.NodeProto

CONSTANT = "Constant"

# TensorProto.DataType values of the dtypes Cast can produce here.
ONNX_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}

SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
NUMERIC = SIGNED + UNSIGNED + FLOATS


def node_label(node: Node, base: str) -> str:
    """How messages name a node: ``"ReduceSum-13"``, plus its name where it has one."""
    return f"{base} node {node.name!r}" if node.name else base


def _attribute_types() -> Any:
    import onnx

    return onnx.AttributeProto


def check_attributes(node: Node, label: str, allowed: Mapping[str, int]) -> dict[str, Any]:
    """The node's attributes by name, if each is one of ``allowed`` (name -> AttributeProto
    type) with that type; ValueError for an unknown or repeated one, TypeError for a wrong
    type."""
    import onnx

    kinds = _attribute_types()
    values: dict[str, Any] = {}
    for attribute in node.attribute:
        name = attribute.name
        if name not in allowed:
            known = f"has {', '.join(allowed)}" if allowed else "has no attributes"
            msg = f"{label}: unexpected attribute {name!r}; {label} {known}"
            raise ValueError(msg)
        if name in values:
            msg = f"{label}: attribute {name!r} is given twice"
            raise ValueError(msg)
        if attribute.type != allowed[name]:
            want = kinds.AttributeType.Name(allowed[name])
            got = kinds.AttributeType.Name(attribute.type)
            msg = f"{label}: attribute {name!r} must be of type {want}, got {got}"
            raise TypeError(msg)
        values[name] = onnx.helper.get_attribute_value(attribute)
    return values


def _arity(label: str, inputs: Sequence[Array | None], count: int) -> list[Array]:
    if len(inputs) != count or any(x is None for x in inputs):
        msg = f"{label}: takes {count} input{'s' if count != 1 else ''}, got {len(inputs)}"
        raise ValueError(msg)
    return list(inputs)


def _namespace(label: str, *arrays: Array) -> Namespace:
    """The namespace the kernels are given (the library's workarounds: Dask's element-wise
    functions keep NumPy's warnings inside the chunks, where Dask computes them later)."""
    try:
        xp = array_api_compat.array_namespace(*arrays)
    except TypeError as e:
        kinds = ", ".join(type(a).__name__ for a in arrays)
        msg = f"{label}: inputs must be arrays of one library, got {kinds}"
        raise TypeError(msg) from e
    return _backends.profile_for(xp).shim(xp)


def _check_dtype(
    label: str, xp: Namespace, x: Array, allowed: Sequence[str], which: str = "input"
) -> str:
    name = _dtypes.dtype_name(xp, x.dtype)
    if name not in allowed:
        msg = (
            f"{label}: {which} dtype {name or x.dtype} is not supported; "
            f"it takes {', '.join(allowed)}"
        )
        raise TypeError(msg)
    return str(name)


def _broadcast(label: str, a: Array, b: Array) -> None:
    """ValueError unless the shapes broadcast (ONNX multidirectional broadcasting)."""
    for m, n in zip(reversed(tuple(a.shape)), reversed(tuple(b.shape)), strict=False):
        if isinstance(m, int) and isinstance(n, int) and m != n and 1 not in (m, n):
            msg = (
                f"{label}: input shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                "broadcast together"
            )
            raise ValueError(msg)


def _compute(label: str, xp: Namespace, compute: Callable[[], Array]) -> Array:
    """Run ``compute``; an error of the library becomes ours, naming the node."""
    with _backends.quiet(xp):
        try:
            return compute()
        except Exception as e:  # the library's own errors, re-raised as ours
            msg = f"{label}: the array library could not compute it: {type(e).__name__}: {e}"
            raise ValueError(msg) from e


# --- one input


def _unary(
    function: Callable[[Namespace, Array], Array], allowed: Sequence[str]
) -> Callable[[Node, str, Sequence[Array | None]], Array]:
    def evaluate(node: Node, label: str, inputs: Sequence[Array | None]) -> Array:
        check_attributes(node, label, {})
        (x,) = _arity(label, inputs, 1)
        xp = _namespace(label, x)
        _check_dtype(label, xp, x, allowed)
        return _compute(label, xp, lambda: function(xp, x))

    return evaluate


def _abs(xp: Namespace, x: Array) -> Array:
    # ReduceL1's no-op form is exactly |x|, with the core's integer handling (wrapping
    # abs of the minimum, unsigned types torch has no abs kernel for).
    return run(OPS["reduce_l1"], x, (), True, xp=xp)


def _identity(xp: Namespace, x: Array) -> Array:
    return xp.astype(x, x.dtype, copy=True)  # a new array: outputs never alias inputs


def _reciprocal(xp: Namespace, x: Array) -> Array:
    return xp.divide(xp.ones_like(x), x)


# --- two inputs


def _binary(
    function: Callable[[Namespace, Array, Array], Array], allowed: Sequence[str]
) -> Callable[[Node, str, Sequence[Array | None]], Array]:
    """An operator whose two inputs share one type T and broadcast (Add, Sub, Mul, Div)."""

    def evaluate(node: Node, label: str, inputs: Sequence[Array | None]) -> Array:
        check_attributes(node, label, {})
        a, b = _arity(label, inputs, 2)
        xp = _namespace(label, a, b)
        _check_dtype(label, xp, a, allowed, "first input")
        if a.dtype != b.dtype:
            shown = _dtypes.dtype_name(xp, b.dtype) or b.dtype
            msg = (
                f"{label}: inputs must have one dtype, got {_dtypes.dtype_name(xp, a.dtype)} "
                f"and {shown}"
            )
            raise TypeError(msg)
        _broadcast(label, a, b)
        return _compute(label, xp, lambda: function(xp, a, b))

    return evaluate


def _divide(xp: Namespace, a: Array, b: Array) -> Array:
    """ONNX's Div; an integer divided by zero is 0 and the minimum divided by -1 wraps to
    the minimum, on every library.

    ONNX leaves both undefined (C++'s), and the libraries disagree: NumPy gives 0 and
    warns, PyTorch raises, JAX gives -1 or -2. Neither is divided here.
    """
    if not _dtypes.is_integer(xp, a.dtype):
        return xp.divide(a, b)
    zero = b == 0
    signed = xp.isdtype(a.dtype, "signed integer")
    minus_one = (b == -1) if signed else zero
    safe = xp.where(zero | minus_one, xp.ones_like(b), b)
    # ONNX integer Div truncates toward zero (as C++ does); floor division rounds down,
    # so add one where the division is inexact and the signs differ.
    quotient = xp.floor_divide(a, safe)
    inexact = xp.remainder(a, safe) != 0
    signs_differ = xp.logical_xor(a < 0, safe < 0)
    quotient = quotient + xp.astype(xp.logical_and(inexact, signs_differ), quotient.dtype)
    if signed:
        quotient = xp.where(minus_one, xp.negative(a), quotient)
    return xp.where(zero, xp.zeros_like(quotient), quotient)


def _integer_power(xp: Namespace, x: Array, e: Array) -> Array:
    """``x ** e`` of integers (one dtype): a negative power is its real value truncated
    toward zero, 1 for 1, 1 or -1 for -1 (the exponent's parity) and 0 for any other base,
    0 included (as an integer divided by zero). NumPy and array-api-strict refuse a
    negative integer power; PyTorch and JAX give these values."""
    negative = e < 0
    plain = xp.pow(x, xp.where(negative, xp.zeros_like(e), e))
    odd = xp.remainder(e, xp.full_like(e, 2)) != 0
    one = xp.ones_like(plain)
    minus_one = xp.where(odd, -one, one)
    zero = xp.zeros_like(plain)
    reciprocal = xp.where(x == 1, one, xp.where(x == -1, minus_one, zero))
    return xp.where(negative, reciprocal, plain)


_POW_BASES = ("int32", "int64", *FLOATS)  # Pow-15's T; its exponent T1 is any numeric type


def _pow(node: Node, label: str, inputs: Sequence[Array | None]) -> Array:
    check_attributes(node, label, {})
    x, y = _arity(label, inputs, 2)
    xp = _namespace(label, x, y)
    _check_dtype(label, xp, x, _POW_BASES, "base")
    _check_dtype(label, xp, y, NUMERIC, "exponent")
    _broadcast(label, x, y)

    def power() -> Array:
        if _dtypes.is_integer(xp, x.dtype) and _dtypes.is_integer(xp, y.dtype):
            return _integer_power(xp, x, xp.astype(y, x.dtype))
        if y.dtype == x.dtype:
            return xp.pow(x, y)
        # Mixed types: in the widest float, then to the base's type (as the ONNX
        # reference's np.power(a, b).astype(a.dtype); integers truncate, see _to_type).
        wide = _dtypes.widest_float(xp)
        return _to_type(xp, xp.pow(xp.astype(x, wide), xp.astype(y, wide)), x.dtype)

    return _compute(label, xp, power)


# --- types


def _cast_to(label: str, xp: Namespace, code: int) -> Any:
    name = ONNX_DTYPES.get(code)
    dtype = None if name is None else _dtypes.dtype_named(xp, name)
    if dtype is None:
        codes = ", ".join(f"{c} ({n})" for c, n in ONNX_DTYPES.items())
        where = "here" if name is None else f"here: {getattr(xp, '__name__', xp)} has no {name}"
        msg = (
            f"{label}: cannot cast to ONNX type {code} ({name or _onnx_type_name(code)}) {where}; "
            f"'to' takes {codes} where the array library has the type"
        )
        raise TypeError(msg)
    return dtype


def _onnx_type_name(code: int) -> str:
    """ONNX's name of a type anyreduce does not cast to (``string``, ``float8e4m3fn``), or
    ``unknown``."""
    import onnx

    try:
        return str(onnx.TensorProto.DataType.Name(code)).lower()
    except ValueError:
        return "unknown"


def _to_type(xp: Namespace, x: Array, dtype: Any) -> Array:
    """``x`` as ``dtype``; floats into integers truncated toward zero, saturated at the
    type's limits beyond them, NaN the type's minimum, as the kernels' integer results
    (``float_to_int``). ONNX leaves those undefined, and the libraries disagree: JAX
    saturates, NumPy and PyTorch on x86 give the minimum or wrap (float32 300 as uint8 is
    44 there, 255 on JAX)."""
    source = _dtypes.dtype_name(xp, x.dtype)
    if source not in FLOATS or _dtypes.dtype_name(xp, dtype) not in SIGNED + UNSIGNED:
        return xp.astype(x, dtype)
    if source not in ("float32", "float64"):
        x = xp.astype(x, xp.float32)  # float16 and bfloat16 exactly
    return float_to_int(xp, x, dtype, dtype)


def _cast(node: Node, label: str, inputs: Sequence[Array | None]) -> Array:
    kinds = _attribute_types()
    allowed = {"to": kinds.INT, "saturate": kinds.INT, "round_mode": kinds.STRING}
    attributes = check_attributes(node, label, allowed)
    (x,) = _arity(label, inputs, 1)
    xp = _namespace(label, x)
    if "to" not in attributes:
        msg = f"{label}: attribute 'to' is required"
        raise ValueError(msg)
    _check_dtype(label, xp, x, (*NUMERIC, "bool"))
    dtype = _cast_to(label, xp, attributes["to"])
    return _compute(label, xp, lambda: _to_type(xp, x, dtype))


def _cast_like(node: Node, label: str, inputs: Sequence[Array | None]) -> Array:
    kinds = _attribute_types()
    check_attributes(node, label, {"saturate": kinds.INT, "round_mode": kinds.STRING})
    x, like = _arity(label, inputs, 2)
    xp = _namespace(label, x, like)
    _check_dtype(label, xp, x, (*NUMERIC, "bool"))
    _check_dtype(label, xp, like, (*NUMERIC, "bool"), "second input (target type)")
    return _compute(label, xp, lambda: _to_type(xp, x, like.dtype))


# --- no input


def _constant(node: Node, label: str, inputs: Sequence[Array | None]) -> np.ndarray:
    import onnx

    kinds = _attribute_types()
    allowed = {
        "value": kinds.TENSOR,
        "value_float": kinds.FLOAT,
        "value_floats": kinds.FLOATS,
        "value_int": kinds.INT,
        "value_ints": kinds.INTS,
        "value_string": kinds.STRING,
        "value_strings": kinds.STRINGS,
        "sparse_value": kinds.SPARSE_TENSOR,
    }
    attributes = check_attributes(node, label, allowed)
    _arity(label, inputs, 0)
    if len(attributes) != 1:
        msg = f"{label}: takes exactly one of the attributes {', '.join(allowed)}, got " + (
            ", ".join(attributes) or "none"
        )
        raise ValueError(msg)
    ((name, value),) = attributes.items()
    if name in ("value_string", "value_strings", "sparse_value"):
        msg = f"{label}: attribute {name!r} is not supported; anyreduce runs numeric tensors"
        raise TypeError(msg)
    if name == "value":
        array = onnx.numpy_helper.to_array(value)
        if array.dtype.kind not in "biuf" and array.dtype.name != "bfloat16":
            msg = f"{label}: a {array.dtype} tensor is not supported; it takes numeric tensors"
            raise TypeError(msg)
        return np.array(array, copy=True)
    dtype = np.float32 if name.startswith("value_float") else np.int64
    return np.asarray(value, dtype=dtype)


ELEMENTWISE: dict[str, Callable[[Node, str, Sequence[Array | None]], Array]] = {
    "Abs": _unary(_abs, NUMERIC),
    "Add": _binary(lambda xp, a, b: xp.add(a, b), NUMERIC),
    "Cast": _cast,
    "CastLike": _cast_like,
    CONSTANT: _constant,
    "Div": _binary(_divide, NUMERIC),
    "Exp": _unary(lambda xp, x: xp.exp(x), FLOATS),
    "Identity": _unary(_identity, (*NUMERIC, "bool")),
    "Log": _unary(lambda xp, x: xp.log(x), FLOATS),
    "Mul": _binary(lambda xp, a, b: xp.multiply(a, b), NUMERIC),
    "Neg": _unary(lambda xp, x: xp.negative(x), SIGNED + FLOATS),
    "Pow": _pow,
    "Reciprocal": _unary(_reciprocal, FLOATS),
    "Sqrt": _unary(lambda xp, x: xp.sqrt(x), FLOATS),
    "Sub": _binary(lambda xp, a, b: xp.subtract(a, b), NUMERIC),
}
"""The element-wise operators by ONNX name."""
