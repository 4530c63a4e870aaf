"""The dtype policy: which dtypes an operator takes and which dtype it accumulates in."""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "bits",
    "check_dtype",
    "compute_float",
    "dtype_name",
    "dtype_named",
    "is_bool",
    "is_float",
    "is_integer",
    "is_unsigned",
    "widest_float",
    "widest_int",
]

Namespace = Any
DType = Any


@functools.cache  # pure in (namespace, dtype); saves ~1 us a call on small inputs
def is_bool(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "bool"))


@functools.cache
def is_float(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "real floating"))


@functools.cache
def is_integer(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "integral"))


@functools.cache
def is_unsigned(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "unsigned integer"))


@functools.cache
def bits(xp: Namespace, dtype: DType) -> int:
    """Width of ``dtype`` in bits."""
    info = xp.finfo(dtype) if is_float(xp, dtype) else xp.iinfo(dtype)
    return int(info.bits)


@functools.cache  # pure in (namespace, dtype); the dispatch asks on every call
def dtype_name(xp: Namespace, dtype: DType) -> str | None:
    """The array-API name of ``dtype`` ("float32", "bfloat16", "uint8", "bool", ...).

    None when the namespace cannot classify ``dtype`` (NumPy raises TypeError on
    ml_dtypes' bfloat16 in ``isdtype``) or it is not a real numeric or bool dtype.
    Profiles that check dtypes against named lists (ONNX type constraints) use this.
    """
    try:
        if is_bool(xp, dtype):
            return "bool"
        if is_integer(xp, dtype):
            return f"{'u' if is_unsigned(xp, dtype) else ''}int{bits(xp, dtype)}"
        if not is_float(xp, dtype):
            return None
    except TypeError:
        return None
    width = bits(xp, dtype)
    # The two 16-bit floats differ in precision: bfloat16 has 8 significand bits.
    if width == 16 and float(xp.finfo(dtype).eps) > 2.0**-10:
        return "bfloat16"
    return f"float{width}"


def dtype_named(xp: Namespace, name: str) -> DType | None:
    """The namespace's dtype called ``name`` (inverse of :func:`dtype_name`), or None."""
    found = getattr(xp, name, None)
    if found is not None:
        return found
    info = xp.__array_namespace_info__().dtypes()
    if name in info:
        return info[name]
    # Dask's namespace names no float16 although its arrays (NumPy-typed) hold it.
    import numpy as np

    if name != "bfloat16" and isinstance(info.get("float32"), np.dtype):
        return np.dtype(name)
    return None


def widest_float(xp: Namespace) -> DType:
    """float64, or float32 where the namespace has no float64 (JAX without x64)."""
    available = xp.__array_namespace_info__().dtypes(kind="real floating")
    return available.get("float64", available["float32"])


def widest_int(xp: Namespace) -> DType:
    """int64, or int32 where the namespace has no int64 (JAX without x64)."""
    available = xp.__array_namespace_info__().dtypes(kind="signed integer")
    return available.get("int64", available["int32"])


def compute_float(xp: Namespace, dtype: DType) -> DType:
    """The float dtype an operator accumulates ``dtype`` in.

    float16 and bfloat16 accumulate in the widest float available (float64, float32 in
    JAX without x64) and round once at the end: in float64 their sums are exact or nearly
    so, which makes the rounded result correct even under cancellation. Integers that go
    through a float step (L2, LogSum, LogSumExp) use the widest float too.
    """
    if is_float(xp, dtype) and bits(xp, dtype) >= 32:
        return dtype
    return widest_float(xp)


@functools.cache  # positional arguments: keywords make the cache's key ~0.1 us slower
def check_dtype(op: str, xp: Namespace, dtype: DType, accepts_bool: bool) -> None:
    """Raise TypeError unless ``op`` takes ``dtype``: any real numeric, bool if ``accepts_bool``."""
    allowed = "integer and real floating dtypes"
    try:
        boolean = is_bool(xp, dtype)
        numeric = bool(xp.isdtype(dtype, ("integral", "real floating")))
    except TypeError as e:  # a dtype the namespace does not know (NumPy + ml_dtypes bfloat16)
        msg = (
            f"{op}: input dtype {dtype} is not a dtype of the array's namespace; "
            f"{op} takes {allowed}"
        )
        raise TypeError(msg) from e
    if (boolean and accepts_bool) or (numeric and not boolean):
        return
    if accepts_bool:
        allowed += " and bool"
    msg = f"{op}: input dtype {dtype} is not supported; {op} takes {allowed}"
    raise TypeError(msg)
