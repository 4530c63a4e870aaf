"""The backend registry: one module per array library for its workarounds and accelerators.

Each module (``_numpy``, ``_torch``, ``_jax``, ``_dask``, ``_strict``) declares a
:class:`Profile`: how the generic kernels (``anyreduce._agnostic``) run on that library
(a namespace shim holding its workarounds, each citing the upstream issue; dtype carriers;
which data are eager) and its :class:`Accelerator` entries. :func:`reduce` is the one
dispatch: an accelerator runs only on eager data, within its declared domain, while
accelerators are on; everything else, and everything traced, compiled or lazy, runs the
generic kernel. Nothing else in the package branches on the backend.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat

from .._lib import _dtypes
from .._lib._memo import dynamo_tracing, library_key, memo, tracing
from . import _dask, _jax, _numpy, _strict, _torch
from ._base import (
    NAMESPACES,
    Accelerator,
    Profile,
    accelerators_enabled,
    generic,
    no_accelerators,
    run_kernel,
)
from ._common import keep_freed_pieces

__all__ = [
    "PROFILES",
    "Accelerator",
    "Profile",
    "accelerators",
    "accelerators_enabled",
    "admit",
    "namespace",
    "no_accelerators",
    "profile_for",
    "quiet",
    "reduce",
    "run_kernel",
]

Namespace = Any
Array = Any
Axes = tuple[int, ...]

PROFILES: tuple[Profile, ...] = (
    _numpy.PROFILE,
    _torch.PROFILE,
    _jax.PROFILE,
    _dask.PROFILE,
    _strict.PROFILE,
)

# A namespace of another library: the generic kernels as they are, no accelerator.
_OTHER = Profile(name="other", recognises=lambda xp: True)


@memo(key=library_key)
def profile_for(xp: Namespace) -> Profile:
    """The profile of the library behind namespace ``xp``."""
    for profile in PROFILES:
        if profile.recognises(xp):
            return profile
    return _OTHER


def accelerators() -> tuple[tuple[Profile, Accelerator], ...]:
    """Every registered accelerator with its library's profile."""
    return tuple((p, a) for p in PROFILES for a in p.accelerators)


def lookup(data: object) -> Namespace | None:
    """The array-API namespace of ``data`` (remembered per type), or None where none is
    found: not an array, or one array-api-compat does not support."""
    xp = None if dynamo_tracing() else NAMESPACES.get(type(data))
    if xp is not None:
        return xp
    for profile in PROFILES:
        xp = profile.namespace_of(data)
        if xp is not None:
            break
    else:
        if not array_api_compat.is_array_api_obj(data):
            return None
        try:
            xp = array_api_compat.array_namespace(data)
        except TypeError:
            return None
    if not tracing():  # a compiler's trace leaves the table as it was (see tracing)
        NAMESPACES[type(data)] = xp
    return xp


def namespace(op: str, data: object) -> Namespace:
    """The array-API namespace of ``data``, or a TypeError naming ``op`` (also for an array
    its library's profile refuses: a masked array, a sparse tensor, ...)."""
    xp = lookup(data)
    if xp is None:
        kind = type(data).__name__
        if array_api_compat.is_array_api_obj(data):
            msg = f"{op}: data of type {kind} is not an array anyreduce supports"
        else:
            msg = f"{op}: data must be an array (numpy, torch, jax, dask, array-api-strict, ...), "
            msg += f"got {kind}"
        raise TypeError(msg)
    admit(op, data, xp)
    return xp


def admit(op: str, data: Array, xp: Namespace) -> None:
    """A TypeError naming ``op`` if ``xp``'s profile refuses ``data`` (see Profile.refuses)."""
    reason = profile_for(xp).refuses(data)
    if reason is not None:
        msg = f"{op}: {reason}"
        raise TypeError(msg)


def quiet(xp: Namespace) -> Any:
    """A context in which ``xp``'s library does not warn about IEEE special values."""
    return profile_for(xp).quiet()


def reduce(
    op: str, x: Array, axes: Axes, keepdims: bool, xp: Namespace, profile: Profile | None = None
) -> Array:
    """Operator ``op`` on non-empty ``x``: an accelerator where one covers the call, else
    the generic kernel. ``profile``: ``xp``'s library's, where the caller has it."""
    if profile is None:
        profile = profile_for(xp)
    if profile.accelerators and accelerators_enabled() and profile.eager(x):
        # Once a process (35 ns a call after): glibc keeps freed temporaries of up to 4
        # MiB for the next call rather than faulting them in again, as it does once any
        # array of that size has been freed (int8 (256, 512) L2 on NumPy 850-930 -> 105
        # us; see keep_freed_pieces).
        keep_freed_pieces()
        size = -1
        for accelerator in _covering(profile, op, xp, x.dtype):
            if accelerator.min_elements:
                if size < 0:
                    size = math.prod(x.shape)
                if size < accelerator.min_elements:
                    continue
            result = accelerator.run(op, x, axes, keepdims, profile)
            if result is not None:
                # In the library's own form, as the kernel's: NumPy joins and stacks data
                # in the other byte order into native order, which the caller's is not.
                return profile.lower(xp, result, x.dtype)
    return generic(profile, xp, op, x, axes, keepdims)


#: Per library, (operator, dtype) -> (the library's accelerators, those whose declared
#: operators and dtypes include the operator on the dtype): one look-up a call. Plain
#: dictionaries, not a memo: only eager data reach them, which no trace reads, and the
#: look-up written out costs 0.2 us less a call.
_COVERING: dict[str, dict[tuple[str, Any], tuple[tuple[Accelerator, ...], ...]]] = {}


def _covering(profile: Profile, op: str, xp: Namespace, dtype: Any) -> tuple[Accelerator, ...]:
    """The accelerators of ``profile`` whose declared operators and dtypes include ``op`` on
    ``dtype``."""
    table = _COVERING.get(profile.name)
    if table is None:
        table = _COVERING[profile.name] = {}
    found = table.get((op, dtype))
    if found is None or found[0] is not profile.accelerators:  # new, or replaced since
        found = table[op, dtype] = (profile.accelerators, _covers(profile, op, xp, dtype))
    return found[1]


def _covers(profile: Profile, op: str, xp: Namespace, dtype: Any) -> tuple[Accelerator, ...]:
    name = _dtypes.dtype_name(xp, dtype)
    return tuple(a for a in profile.accelerators if a.covers_call(op, name))
