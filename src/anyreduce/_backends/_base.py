"""What a backend module declares: its profile (workarounds) and its accelerators."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import array_api_compat

from .._agnostic import KERNELS, Context
from .._agnostic._kernels import (
    Parts,
    Peak,
    Select,
    Total,
    largest,
    plain_total,
    where_suspect,
    whole,
)
from .._lib import _dtypes

__all__ = [
    "ALL_DTYPES",
    "ALL_OPS",
    "EXTREMES",
    "Accelerator",
    "Profile",
    "accelerators_enabled",
    "generic",
    "namespace_for",
    "no_accelerators",
    "run_kernel",
]

Namespace = Any
Array = Any
Axes = tuple[int, ...]

#: Every operator, and every dtype name the contract has (spec §3), for accelerators that
#: cover them all.
ALL_OPS = frozenset(KERNELS)
#: Max and Min: no sum, no temporary, exact in any order.
EXTREMES = frozenset({"reduce_max", "reduce_min"})
ALL_DTYPES = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
    | {"float16", "bfloat16", "float32", "float64"}
)


def _identity(x: Array) -> Array:
    return x


def _admits_all(x: Array) -> str | None:
    return None


def _lower_as_is(xp: Namespace, result: Array, dtype: Any) -> Array:
    return result if result.dtype == dtype else xp.astype(result, dtype)


@dataclass(frozen=True)
class Profile:
    """How one array library runs the generic kernels.

    Attributes
    ----------
    name : str
        The library's name in the backend registry (``numpy``, ``torch``, ...).
    recognises : callable
        ``recognises(xp)``: whether namespace ``xp`` is this library's.
    namespace_of : callable
        ``namespace_of(data)``: the namespace of ``data`` if this library's arrays include
        it, else None (a library that gives none is found through array-api-compat).
    shim : callable
        ``shim(xp)``: the namespace the kernels are given: ``xp`` itself, or ``xp`` with the
        library's workarounds (each names its upstream issue in the module that defines it).
    lift, lower : callable
        ``lift(x)``: the data in the dtype it is computed in (a wider carrier where the
        library lacks kernels for its dtype); ``lower(xp, result, dtype)`` undoes it.
    quiet : callable
        A context in which the library's IEEE warnings are silenced (the contract asks for
        the values they warn about: log(0) = -inf, inf - inf = NaN).
    select : callable
        How the generic kernels pick the careful form for suspect slices on this library
        (``anyreduce._agnostic.where_suspect``: both forms computed, no host read; a
        compiler's conditional where one exists).
    parts : callable
        How statistics of data that come in parts are taken and merged (Dask's chunks);
        ``anyreduce._agnostic.whole`` for data in one piece.
    peak : callable
        ``peak(xp, y, axes)``: each slice's largest value for LogSumExp's shift, where a
        NaN may be missed (``anyreduce._agnostic._kernels.largest``: the shim's ``max``).
    eager : callable
        ``eager(x)``: whether ``x`` holds concrete values that may be read on the host now
        (not traced, compiled or lazy; on a GPU, where a read synchronises with the device,
        as the library's profile decides). Accelerators run only on such data.
    accelerators : tuple of Accelerator
        The library's registered accelerators, tried in order.
    """

    name: str
    recognises: Callable[[Namespace], bool]
    namespace_of: Callable[[object], Namespace | None] = lambda data: None
    shim: Callable[[Namespace], Namespace] = _identity
    lift: Callable[[Array], Array] = _identity
    lower: Callable[[Namespace, Array, Any], Array] = _lower_as_is
    logical: Callable[[Any], Any] = _identity
    refuses: Callable[[Array], str | None] = _admits_all
    quiet: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    parts: Parts = whole
    peak: Peak = largest
    select: Select = where_suspect
    eager: Callable[[Array], bool] = lambda x: False
    accelerators: tuple[Accelerator, ...] = ()


@dataclass(frozen=True)
class Accelerator:
    """A faster way to compute some reductions on one library, proven equal to the generic
    kernel by ``tests/test_accelerators.py`` over its declared domain.

    Attributes
    ----------
    name : str
        Unique within its library.
    ops : frozenset of str
        The operators it covers (``reduce_sum``, ...).
    dtypes : frozenset of str
        The dtype names it covers (``float32``, ``int8``, ``bool``, ...).
    covers : str
        In words: the layouts and sizes it covers beyond ops and dtypes ("any", "C-ordered
        float16 data", ...). Every accelerator runs on eager data only (``Profile.eager``).
    earned : str
        One line: the measurement that earns it its place.
    exact : bool
        True if it gives the generic kernel's values bit for bit; False if it is only held
        to the contract's accuracy bound.
    run : callable
        ``run(op, x, axes, keepdims, profile)``: the result in the caller's dtype, or None
        where it declines (a layout it does not cover).
    min_elements : int
        The fewest elements of the data it covers: the dispatch does not call it for
        fewer (``run`` would decline them), so a small call does not pay for it.
    """

    name: str
    ops: frozenset[str]
    dtypes: frozenset[str]
    covers: str
    earned: str
    exact: bool
    run: Callable[[str, Array, Axes, bool, Profile], Array | None] = field(repr=False)
    min_elements: int = 0

    def covers_call(self, op: str, dtype_name: str | None) -> bool:
        """Whether the declared operators and dtypes include this call."""
        return op in self.ops and dtype_name in self.dtypes


# The namespace of an array depends on its type only: array-api-compat's lookup costs
# ~1.5 us a call, a tenth of a small call's overhead.
NAMESPACES: dict[type, Namespace] = {}


def namespace_for(x: Array) -> Namespace:
    """The array-API namespace of array ``x`` (checked by the caller)."""
    xp = NAMESPACES.get(type(x))
    if xp is None:
        xp = NAMESPACES[type(x)] = array_api_compat.array_namespace(x)
    return xp


# --- the switch ----------------------------------------------------------------------------


class _Switch(threading.local):
    # A class default: a thread that never set the switch reads it without the failed
    # look-up of getattr(local, name, default) (1.2 us against 0.14, on every call).
    off = False


_switch = _Switch()


def _enabled_by_environment() -> bool:
    value = os.environ.get("ANYREDUCE_ACCELERATORS", "1").strip().lower()
    return value not in {"0", "false", "no", "off"}


_ENVIRONMENT = _enabled_by_environment()


def accelerators_enabled() -> bool:
    """Whether accelerators may run in this thread (``ANYREDUCE_ACCELERATORS=0`` and
    :func:`no_accelerators` turn them off)."""
    return _ENVIRONMENT and not _switch.off


@contextlib.contextmanager
def no_accelerators() -> Iterator[None]:
    """Within the block, this thread computes with the generic kernels alone."""
    before = _switch.off
    _switch.off = True
    try:
        yield
    finally:
        _switch.off = before


# --- running a kernel ----------------------------------------------------------------------


def run_kernel(
    profile: Profile,
    xp: Namespace,
    op: str,
    x: Array,
    axes: Axes,
    keepdims: bool,
    select: Select = where_suspect,
    total: Total = plain_total,
) -> Array:
    """The generic kernel of ``op`` on non-empty ``x`` (of namespace ``xp``), run the way
    ``profile``'s library needs, with ``select`` choosing careful slices and ``total``
    taking plain totals (an accelerator's, equal to :func:`plain_total`)."""
    dtype = x.dtype
    with profile.quiet():
        carried = profile.lift(x)
        shim = profile.shim(xp)
        ctx = Context(shim, profile.logical(dtype), select, profile.parts, total, profile.peak)
        result = KERNELS[op](carried, axes, keepdims, ctx)
        return profile.lower(xp, result, dtype)


def generic(
    profile: Profile, xp: Namespace, op: str, x: Array, axes: Axes, keepdims: bool
) -> Array:
    """:func:`run_kernel` with the library's select: what runs under tracers and compilers."""
    return run_kernel(profile, xp, op, x, axes, keepdims, profile.select)


def dtype_name(xp: Namespace, dtype: Any) -> str | None:
    return _dtypes.dtype_name(xp, dtype)
