"""The inputs parity runs on: a caller's own array, or data drawn from a named distribution.

The distributions are chosen to find where implementations disagree: ``wide`` spreads
magnitudes over the dtype's whole range, ``specials`` mixes in zeros, infinities, NaN,
subnormals and the extremes, ``cancelling`` puts large terms that cancel exactly into each
reduced slice, so that the exact result is small and an accumulation that loses the small
terms shows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._exact import np_dtype

__all__ = ["DISTRIBUTIONS", "DTYPES", "MAX_ELEMENTS", "as_numpy", "generate"]

DTYPES = (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64",
)  # fmt: skip
DISTRIBUTIONS = ("normal", "uniform", "wide", "specials", "cancelling", "integers")
# The exact oracle works element by element in Python: beyond this it would run for minutes.
MAX_ELEMENTS = 10_000_000


def as_numpy(data: Any) -> np.ndarray:
    """The values of an array of any supported library as NumPy on the host (exact copy).

    ``TypeError`` for anything that is not an array, or an array the reductions refuse.
    """

    from .._backends import lookup, profile_for
    from .._lib._libraries import LIBRARIES, library_of

    xp = lookup(data)
    if xp is not None:
        # What the reductions refuse (a masked array or tensor, a sparse tensor, ...).
        reason = profile_for(xp).refuses(data)
        if reason is not None:
            raise TypeError(reason)
    if isinstance(data, np.ndarray):
        return np.array(data, copy=True)
    if xp is not None:
        name = library_of(xp)
        if name != "numpy" and name in LIBRARIES:  # NumPy: arrays only, no scalars
            try:
                return np.array(LIBRARIES[name].to_numpy(data), copy=True)
            except Exception:  # noqa: BLE001 - the library's own error, many lines long
                msg = (
                    f"data must have values to read on the host, got a {type(data).__name__} "
                    "without them (traced by jax.jit or jax.vmap, or a tensor on PyTorch's "
                    "meta device)"
                )
                raise TypeError(msg) from None
    msg = f"data must be an array (NumPy, PyTorch, JAX, Dask, array-api-strict), not {data!r}"
    raise TypeError(msg)


def generate(
    shape: tuple[int, ...], dtype: str, distribution: str, seed: int, reduced: tuple[int, ...]
) -> np.ndarray:
    """Data of ``shape`` and ``dtype`` drawn from ``distribution``.

    ``reduced`` (sorted axes) says which positions are reduced together: ``cancelling`` puts
    its cancelling pairs into each reduced slice.
    """
    rng = np.random.default_rng(seed)
    kept = [i for i in range(len(shape)) if i not in reduced]
    outer = tuple(shape[i] for i in kept)
    count = math.prod(shape[i] for i in reduced)
    size = math.prod(outer) * count
    if dtype == "bool":
        flat = rng.random(size) < 0.5
    elif dtype.startswith(("int", "uint")):
        flat = _integers(rng, size, count, np.dtype(dtype), distribution)
    else:
        flat = _floats(rng, size, count, dtype, distribution)
    # Drawn as (kept..., reduced...) slices, then moved back to the caller's axis order.
    rows = flat.reshape((*outer, *(shape[i] for i in reduced)))
    order = kept + list(reduced)
    return np.ascontiguousarray(np.transpose(rows, np.argsort(order)))


def _finfo(dtype: str) -> tuple[float, float, float, int]:
    """smallest subnormal, smallest normal, max and mantissa bits of a float dtype."""
    if dtype == "bfloat16":
        return 2.0**-133, 2.0**-126, float.fromhex("0x1.fep127"), 7
    info = np.finfo(np.dtype(dtype))
    return (
        float(info.smallest_subnormal),
        float(info.smallest_normal),
        float(info.max),
        int(info.nmant),
    )


def _floats(
    rng: np.random.Generator, size: int, count: int, dtype: str, distribution: str
) -> np.ndarray:
    tiny, normal, big, nmant = _finfo(dtype)
    if distribution == "uniform":
        values = rng.uniform(-1.0, 1.0, size)
    elif distribution == "wide":
        exponents = rng.uniform(math.log2(normal), math.log2(big), size)
        values = np.where(rng.random(size) < 0.5, -1.0, 1.0) * np.minimum(np.exp2(exponents), big)
    elif distribution == "specials":
        specials = np.array(
            [0.0, -0.0, math.inf, -math.inf, math.nan, tiny, -tiny, normal, big, -big, 1.0, -1.0]
        )
        values = np.where(
            rng.random(size) < 0.3,
            specials[rng.integers(0, len(specials), size)],
            rng.standard_normal(size),
        )
    elif distribution == "cancelling":
        values = _cancelling(rng, size, count, 2.0 ** (nmant + 1), rng.standard_normal(size))
    elif distribution == "integers":
        values = rng.integers(-100, 100, size, endpoint=True).astype(np.float64)
    else:
        values = rng.standard_normal(size)
    with np.errstate(over="ignore"):
        return np.asarray(values.astype(np_dtype(dtype)))


def _cancelling(
    rng: np.random.Generator, size: int, count: int, scale: float, small: np.ndarray
) -> np.ndarray:
    """Half of each slice in pairs ``x, -x`` of magnitude ~``scale``, the rest ``small``."""
    values = np.array(small, dtype=np.float64)
    if count < 2:
        return values
    rows = values.reshape(-1, count)
    half = count // 2 // 2 * 2  # an even number of positions per slice
    for row in rows:
        where = rng.permutation(count)[:half]
        large = scale * rng.uniform(1.0, 2.0, half // 2) * rng.choice([-1.0, 1.0], half // 2)
        row[where] = np.concatenate([large, -large])
    return values


def _integers(
    rng: np.random.Generator, size: int, count: int, dtype: np.dtype, distribution: str
) -> np.ndarray:
    info = np.iinfo(dtype)
    low, high, bits = int(info.min), int(info.max), int(info.bits)
    signed = low < 0
    if distribution == "uniform":
        return np.asarray(rng.integers(low, high, size, dtype=dtype, endpoint=True))
    if distribution == "wide":
        magnitudes = np.floor(np.exp2(rng.uniform(0, bits - 2, size)))
        signs = np.where(rng.random(size) < 0.5, -1, 1) if signed else 1
        return np.asarray((magnitudes * signs).astype(np.int64).astype(dtype))
    if distribution == "specials":
        specials = [0, 1, high, high - 1] + ([-1, low, low + 1] if signed else [])
        chosen = np.array(specials, dtype=dtype)[rng.integers(0, len(specials), size)]
        base = _integers(rng, size, count, dtype, "integers")
        return np.asarray(np.where(rng.random(size) < 0.3, chosen, base))
    if distribution == "cancelling":
        # Pairs that cancel modulo 2**bits: x and -x (signed), x and 2**bits - x (unsigned).
        base = _integers(rng, size, count, dtype, "integers").astype(object)
        if count >= 2:
            rows = base.reshape(-1, count)
            half = count // 2 // 2 * 2
            for row in rows:
                where = rng.permutation(count)[:half]
                draws = rng.integers(high // 2, high, half // 2, dtype=dtype, endpoint=True)
                large = [int(v) for v in draws]
                row[where] = large + [(-v if signed else (1 << bits) - v) for v in large]
        return np.array(base.tolist(), dtype=dtype)
    if distribution == "normal":
        values = np.rint(rng.standard_normal(size) * 10)
        values = np.abs(values) if not signed else values
        return np.asarray(np.clip(values, low, high).astype(dtype))
    low, high = max(low, -100), min(high, 100)
    return np.asarray(rng.integers(low, high, size, endpoint=True).astype(dtype))
