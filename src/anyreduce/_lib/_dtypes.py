"""The dtype policy: which dtypes an operator takes and which dtype it accumulates in."""

from __future__ import annotations

from typing import Any

__all__ = [
    "bits",
    "check_dtype",
    "compute_float",
    "is_bool",
    "is_float",
    "is_integer",
    "is_unsigned",
    "widest_float",
    "widest_int",
]

Namespace = Any
DType = Any


def is_bool(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "bool"))


def is_float(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "real floating"))


def is_integer(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "integral"))


def is_unsigned(xp: Namespace, dtype: DType) -> bool:
    return bool(xp.isdtype(dtype, "unsigned integer"))


def bits(xp: Namespace, dtype: DType) -> int:
    """Width of ``dtype`` in bits."""
    info = xp.finfo(dtype) if is_float(xp, dtype) else xp.iinfo(dtype)
    return int(info.bits)


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

    float16 and bfloat16 accumulate in float32 and round once at the end; integers that
    go through a float step (L2, LogSum, LogSumExp) use the widest float available.
    """
    if is_float(xp, dtype):
        return xp.float32 if bits(xp, dtype) < 32 else dtype
    return widest_float(xp)


def check_dtype(op: str, xp: Namespace, dtype: DType, *, accepts_bool: bool) -> None:
    """Raise TypeError unless ``op`` takes ``dtype`` (any real numeric; bool if allowed)."""
    if is_bool(xp, dtype):
        if accepts_bool:
            return
    elif xp.isdtype(dtype, ("integral", "real floating")):
        return
    allowed = "integer and real floating dtypes"
    if accepts_bool:
        allowed += " and bool"
    msg = f"{op}: input dtype {dtype} is not supported; {op} takes {allowed}"
    raise TypeError(msg)
