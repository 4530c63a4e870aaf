"""array-api-strict: the standard's reference namespace, computed with NumPy."""

from __future__ import annotations

from typing import Any

from .._lib._memo import library_key, memo
from ._base import Accelerator, Profile
from ._common import Shim, blocked_sum, named
from ._numpy import _FLOATS, _GUARDED, guarded, numpy_quiet

__all__ = ["PROFILE"]

Namespace = Any


def recognises(xp: Namespace) -> bool:
    return named(xp, "array_api_strict")


@memo(key=library_key)
def _shim(xp: Namespace) -> Namespace:
    # It sums with NumPy's loops, so NumPy's order (numpy/numpy#9393): see blocked_sum.
    return Shim(xp, sum=blocked_sum(xp))


PROFILE = Profile(
    name="array_api_strict",
    recognises=recognises,
    shim=_shim,
    quiet=numpy_quiet,
    eager=lambda x: True,
    accelerators=(
        Accelerator(
            name="careful-when-needed",
            ops=_GUARDED,
            dtypes=_FLOATS,
            covers="any layout; the careful form only for data with a suspect slice",
            earned="as NumPy's: the careful form computed always doubles a float Sum",
            exact=True,
            run=guarded,
        ),
    ),
)
