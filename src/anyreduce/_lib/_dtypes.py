"""The dtype policy: which dtypes an operator takes and which dtype it accumulates in."""

from __future__ import annotations

import warnings
from typing import Any

from ._memo import library_key, memo

__all__ = [
    "ALLOWED",
    "NUMERIC_NAMES",
    "bits",
    "check_dtype",
    "compute_float",
    "dtype_name",
    "dtype_named",
    "is_bool",
    "is_extension_bfloat16",
    "is_float",
    "is_integer",
    "is_unsigned",
    "isdtype",
    "widest_float",
    "widest_int",
]

Namespace = Any
DType = Any


# The narrowest and widest dtypes the operators take: 8-bit floats have no accumulation
# guarantee worth the name and few kernels (torch has no max for float8_e4m3fn); extended
# precision (np.longdouble) differs between platforms and has no ONNX type.
_INT_BITS = (8, 64)
_FLOAT_BITS = (16, 64)
NUMERIC_NAMES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)
ALLOWED = (
    "integer and real floating dtypes of 8 to 64 bits "
    "(int8-int64, uint8-uint64, float16, bfloat16, float32, float64)"
)


def is_extension_bfloat16(dtype: DType) -> bool:
    """Whether ``dtype`` is ml_dtypes' bfloat16 as a NumPy dtype (what JAX hands back
    through ``np.asarray`` and onnx's ``numpy_helper`` gives): NumPy's ``isdtype`` raises
    TypeError on it, so the predicates below classify it themselves."""
    return getattr(dtype, "kind", None) == "V" and getattr(dtype, "name", None) == "bfloat16"


def isdtype(xp: Namespace, dtype: DType, kind: str | tuple[str, ...]) -> bool:
    """``xp.isdtype``, which also classifies ml_dtypes' bfloat16 (NumPy raises TypeError
    on it, Dask's namespace calls it nothing)."""
    if is_extension_bfloat16(dtype):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return "real floating" in kinds or "numeric" in kinds
    return bool(xp.isdtype(dtype, kind))


@memo(key=library_key)  # saves ~1 us a call on small inputs
def is_bool(xp: Namespace, dtype: DType) -> bool:
    return isdtype(xp, dtype, "bool")


@memo(key=library_key)
def is_float(xp: Namespace, dtype: DType) -> bool:
    return isdtype(xp, dtype, "real floating")


@memo(key=library_key)
def is_integer(xp: Namespace, dtype: DType) -> bool:
    return isdtype(xp, dtype, "integral")


@memo(key=library_key)
def is_unsigned(xp: Namespace, dtype: DType) -> bool:
    return isdtype(xp, dtype, "unsigned integer")


@memo(key=library_key)
def bits(xp: Namespace, dtype: DType) -> int:
    """Width of ``dtype`` in bits."""
    if is_extension_bfloat16(dtype):
        return 16
    info = xp.finfo(dtype) if is_float(xp, dtype) else xp.iinfo(dtype)
    return int(info.bits)


def smallest_normal(xp: Namespace, dtype: DType) -> float:
    """The smallest positive normal number of float ``dtype`` (ml_dtypes' bfloat16, which
    the namespace's ``finfo`` may not know, shares float32's: 2**-126)."""
    if is_extension_bfloat16(dtype):
        return 2.0**-126
    return float(xp.finfo(dtype).smallest_normal)


@memo(key=library_key)  # the dispatch asks on every call
def dtype_name(xp: Namespace, dtype: DType) -> str | None:
    """The array-API name of ``dtype`` ("float32", "bfloat16", "uint8", "bool", ...).

    None when the namespace cannot classify ``dtype`` (NumPy raises TypeError on
    ml_dtypes' float8 types in ``isdtype``) or it is not a real numeric or bool dtype.
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
    if is_extension_bfloat16(dtype):
        return "bfloat16"
    # The two 16-bit floats differ in precision: bfloat16 has 8 significand bits.
    if width == 16 and float(xp.finfo(dtype).eps) > 2.0**-10:
        return "bfloat16"
    return f"float{width}"


def _makes(xp: Namespace, dtype: DType) -> bool:
    """Whether ``xp`` makes arrays of ``dtype``: JAX without x64 names int64 and float64
    but makes int32 and float32 arrays of them (and warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(xp.zeros(0, dtype=dtype).dtype == dtype)


def dtype_named(xp: Namespace, name: str) -> DType | None:
    """The namespace's dtype called ``name`` (inverse of :func:`dtype_name`), or None."""
    found = getattr(xp, name, None)
    if found is not None:
        return found if _makes(xp, found) else None
    info = xp.__array_namespace_info__().dtypes()
    if name in info:
        return info[name]
    # Dask's namespace names no float16 although its arrays (NumPy-typed) hold it.
    import numpy as np

    if isinstance(info.get("float32"), np.dtype):
        if name != "bfloat16":
            return np.dtype(name)
        # NumPy and Dask hold bfloat16 as ml_dtypes' type, where it is installed.
        try:
            import ml_dtypes
        except ImportError:
            return None
        return np.dtype(ml_dtypes.bfloat16)
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
    return dtype if _accumulates_in_itself(xp, dtype) else widest_float(xp)


@memo(key=library_key)
def _accumulates_in_itself(xp: Namespace, dtype: DType) -> bool:
    return is_float(xp, dtype) and bits(xp, dtype) >= 32


@memo(key=lambda op, xp, dtype, accepts_bool: library_key(xp, op, dtype, accepts_bool))
def check_dtype(op: str, xp: Namespace, dtype: DType, accepts_bool: bool) -> None:
    """Raise TypeError unless ``op`` takes ``dtype``: a real numeric dtype of 8 to 64 bits
    (floats of 16 to 64), bool if ``accepts_bool``."""
    try:
        boolean = is_bool(xp, dtype)
        integer = not boolean and is_integer(xp, dtype)
        floating = is_float(xp, dtype)
        low, high = _INT_BITS if integer else _FLOAT_BITS
        numeric = (integer or floating) and low <= bits(xp, dtype) <= high
    except (TypeError, ValueError):  # a dtype the namespace cannot classify (ml_dtypes' float8)
        boolean = numeric = False
    if (boolean and accepts_bool) or numeric:
        return
    allowed = ALLOWED + (" and bool" if accepts_bool else "")
    msg = f"{op}: input dtype {dtype} is not supported; {op} takes {allowed}"
    raise TypeError(msg)
