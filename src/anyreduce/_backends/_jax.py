"""JAX: its workarounds and accelerators."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

from .._agnostic import where_suspect
from .._lib._memo import library_key, memo
from . import _threads
from ._base import ALL_DTYPES, ALL_OPS, EXTREMES, Accelerator, Profile, run_kernel
from ._common import LATER_SHARE, Shim, astype_rounding_once, named

__all__ = ["PROFILE"]

Namespace = Any
Array = Any
Axes = tuple[int, ...]


def recognises(xp: Namespace) -> bool:
    return named(xp, "jax.numpy", "jax.experimental.array_api")


def _eager(x: Array) -> bool:
    import jax

    return not isinstance(x, jax.core.Tracer)


def _nan_propagating(reduce: Any, xp: Namespace) -> Any:
    """``reduce`` (max or min) in which NaN propagates, as the standard requires.

    XLA's CPU code vectorises max and min with instructions that return the other operand
    when one is NaN: ``jnp.max`` of float32 (300, 70) holding one NaN is finite (jax 0.10;
    openxla/xla#21461). A NaN makes its slice's sum NaN, and XLA sums at the speed of
    memory, while ``any(isnan(x))`` is not vectorised (float32 (4096, 8192): 23 ms against
    5 ms for the sum): the slices are searched for NaN only when some sum is NaN (a NaN,
    or +inf with -inf, or partial sums overflowing both ways).
    """

    def extreme(x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        import jax

        result = reduce(x, axis=axis, keepdims=keepdims)
        if not xp.isdtype(x.dtype, "real floating"):
            return result

        def searched() -> Array:
            found = xp.any(xp.isnan(x), axis=axis, keepdims=keepdims)
            return xp.where(found, xp.full_like(result, math.nan), result)

        if _eager(x):
            return searched()  # see _select_by_cond
        maybe = xp.any(xp.isnan(xp.sum(x, axis=axis, keepdims=keepdims)))
        return jax.lax.cond(maybe, searched, lambda: result)

    return extreme


@memo()
def _abs_with_zero_subgradient() -> Any:
    # JAX differentiates abs as select(x >= 0, g, -g), so 1 at 0 (jax 0.10,
    # jax-ml/jax#37820): |x| gets the derivative sign(x), the subgradient 0 at 0 that
    # torch's abs has.
    import jax
    import jax.numpy as jnp

    @jax.custom_jvp
    def magnitude(v: Array) -> Array:
        return jnp.abs(v)

    @magnitude.defjvp
    def _derivative(primals: tuple[Array], tangents: tuple[Array]) -> tuple[Array, Array]:
        (v,), (t,) = primals, tangents
        return jnp.abs(v), jnp.sign(v) * t

    return magnitude


@memo(key=library_key)
def _shim(xp: Namespace) -> Namespace:
    import jax.numpy as jnp

    return Shim(
        xp,
        max=_nan_propagating(xp.max, xp),
        min=_nan_propagating(xp.min, xp),
        abs=_abs_with_zero_subgradient(),
        # XLA converts float64 to bfloat16 through float32, rounding twice (jax 0.10; its
        # float16 conversion rounds once): see rounded_once.
        astype=astype_rounding_once(xp, jnp.float64, (jnp.bfloat16,)),
    )


def _xla_peak(xp: Namespace, y: Array, axes: Axes) -> Array:
    """LogSumExp's shift by XLA's own max, not the shim's, which searches the slices for
    NaN (:func:`_nan_propagating`): a NaN in a slice makes its sum of ``exp(y - shift)``
    NaN whatever the shift (a finite one, or 0 where the maximum is infinite), so the
    result is the same, and the search's second pass over the data is saved, under a
    user's ``jit`` too."""
    import jax.numpy as jnp

    return jnp.max(y, axis=axes, keepdims=True)


def _select_by_cond(xp: Namespace, suspect: Array, careful: Any, plain: Array) -> Array:
    """The generic select, the careful form computed only when some slice needs it: under
    ``jax.jit`` a conditional, under ``jax.vmap`` (a batched predicate) both forms and a
    select, as ``xp.where`` would.

    On concrete arrays (the generic kernel run op by op, accelerators off) both forms and
    a select: a conditional outside a trace traces its branches, new closures on every
    call, each time again (float32 (6, 4), jax 0.10: L2 290 ms a call, not 3).
    """
    import jax

    if _eager(suspect):
        return where_suspect(xp, suspect, careful, plain)
    return jax.lax.cond(xp.any(suspect), lambda: xp.where(suspect, careful(), plain), lambda: plain)


class _Noting:
    """A select, traced, for data reduced over trailing axes or over the first axis: where
    at most a ``LATER_SHARE``-th of the slices are suspect, the plain values, and those
    slices noted to be computed again alone; where more, the careful form under
    ``lax.cond`` (:func:`_select_by_cond`)."""

    def __init__(self, slices: int) -> None:
        self.slices = slices
        self.few = slices // LATER_SHARE
        self.notes: list[Array] = []

    def __call__(self, xp: Namespace, suspect: Array, careful: Any, plain: Array) -> Array:
        import jax

        if math.prod(suspect.shape) != self.slices:
            return _select_by_cond(xp, suspect, careful, plain)
        count = xp.count_nonzero(suspect)
        self.notes.append(xp.reshape(suspect, (-1,)) & (count <= self.few))
        return jax.lax.cond(
            count > self.few, lambda: xp.where(suspect, careful(), plain), lambda: plain
        )


@memo(limit=1024)
def _noting(op: str, axes: Axes, keepdims: bool) -> Any:
    """The kernel compiled with :class:`_Noting`: the result, the slices noted and their
    count (none where the kernel has no select of the slices' shape)."""
    import jax
    import jax.numpy as jnp

    def kernel(x: Array) -> tuple[Array, Array, Array]:
        slices = math.prod(n for i, n in enumerate(x.shape) if i not in axes)
        noting = _Noting(slices)
        plain = run_kernel(PROFILE, jnp, op, x, axes, keepdims, select=noting)
        if not noting.notes:
            return plain, jnp.zeros((0,), dtype=bool), jnp.zeros((), dtype=jnp.int32)
        noted = functools.reduce(operator.or_, noting.notes)
        return plain, noted, jnp.count_nonzero(noted)

    return jax.jit(kernel)


@memo(limit=1024)
def _alone(op: str, first: bool, size: int) -> Any:
    """The kernel compiled for ``size`` noted slices of data (rows, or columns over the
    first axis) gathered, their values set into the plain result (of either shape: the
    slices in C order)."""
    import jax
    import jax.numpy as jnp

    def kernel(x: Array, noted: Array, plain: Array) -> Array:
        slices = int(noted.shape[0])
        idx = jnp.nonzero(noted, size=size, fill_value=jnp.argmax(noted))[0]
        if first:
            part, over = jnp.reshape(x, (x.shape[0], slices))[:, idx], (0,)
        else:
            part, over = jnp.reshape(x, (slices, -1))[idx], (1,)
        values = run_kernel(PROFILE, jnp, op, part, over, False, select=_select_by_cond)
        return jnp.reshape(jnp.reshape(plain, (-1,)).at[idx].set(values), plain.shape)

    return jax.jit(kernel)


def _later(op: str, x: Array, axes: Axes, keepdims: bool) -> Array:
    """The kernel with a few suspect slices computed again alone (:class:`_Noting`), on a
    CPU array reduced over trailing axes or over the first axis: the noted rows (or
    columns) gathered in counts of 1, 16, 256, ... (one NaN row costs one; XLA reads
    gathered columns down the rows, 512 columns of float32 (4096, 8192) in 14 ms), each
    count's kernel compiled when first needed. One read of the result on the host."""
    plain, noted, noted_count = _noting(op, axes, keepdims)(x)
    count = int(noted_count)
    if not count:
        return plain
    size = 16 ** math.ceil(math.log(count, 16) - 1e-9) if count > 1 else 1
    return _alone(op, axes == (0,), min(size, int(noted.shape[0])))(x, noted, plain)


@memo(limit=1024)
def _compiled(op: str, axes: Axes, keepdims: bool) -> Any:
    """The kernel compiled."""
    import jax
    import jax.numpy as jnp

    def kernel(x: Array) -> Array:
        return run_kernel(PROFILE, jnp, op, x, axes, keepdims, select=_select_by_cond)

    return jax.jit(kernel)


def _jit(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array:
    ndim = x.ndim
    trailing = axes == tuple(range(ndim - len(axes), ndim))
    slices = math.prod(n for i, n in enumerate(x.shape) if i not in axes)
    if (
        op in _LATER_OPS
        and x.size >= _LATER_ELEMENTS
        and (trailing or (axes == (0,) and ndim > 1))
        and slices >= LATER_SHARE
        and _on_one_cpu(x)
    ):
        return _later(op, x, axes, keepdims)
    return _compiled(op, axes, keepdims)(x)


# The operators whose kernels select careful forms per slice.
_LATER_OPS = frozenset({"reduce_sum", "reduce_mean", "reduce_log_sum", "reduce_l2", "reduce_prod"})

#: The fewest elements of the data whose suspect slices ``_later`` computes alone: its
#: second output and host read of the count cost 20-80 us a call, more than the careful
#: form of every slice of smaller data. Float32, Sum over the last / first axis, by turns:
#: (64, 64) 46-51 -> 65-72 us; (2048, 2048) clean 480-580 -> 550-650, one NaN 880-1155
#: -> 655-790; (2048, 4096) clean 786-806 / 1187-1228 -> 870-1109 / 1224-1228, one NaN
#: 1663-1705 / 2571-2608 -> 973 / 1390-1417.
_LATER_ELEMENTS = 2**23


def _on_one_cpu(x: Array) -> bool:
    devices = x.devices()
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


# XLA's CPU Max and Min drop NaN, and the test that puts it back is a second pass; NumPy's
# propagate it. (Sums over a leading axis were faster through NumPy too, float32 (4096,
# 8192) 17.0 -> 10.1 ms, but NumPy adds in another order: a sum that cancels to near zero
# then differs beyond the accuracy bound relative to its value.)


def _through_numpy(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """Max or Min: the NumPy profile's reduction of a CPU array's memory (``np.asarray`` of
    a JAX CPU array is a view, not a copy), the result put back on the array's device."""
    import array_api_compat
    import jax
    import numpy as np

    from . import reduce

    devices = x.devices()
    if len(devices) != 1 or x.size < 2 * _threads.SLAB_ELEMENTS:
        return None
    (device,) = devices
    if device.platform != "cpu":
        return None
    data = np.asarray(x)
    result = reduce(op, data, axes, keepdims, array_api_compat.array_namespace(data))
    return jax.device_put(np.asarray(result), device)


_THROUGH_NUMPY = Accelerator(
    name="through-numpy",
    ops=EXTREMES,
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "arrays on one CPU device of at least 2**21 elements, any axes; the NumPy profile "
        "(threads) on the array's memory. A slice whose largest (smallest) values are 0.0 "
        "and -0.0 may give the other zero"
    ),
    earned=(
        "float32 (4096, 8192), idle: Max over the first axis 37.8 -> 10.1 ms, over the "
        "last 10.8 -> 7.2, over every axis 10.2 -> 6.5 (jnp.sum 19.0, 4.6 and 5.0 ms)"
    ),
    exact=False,
    run=_through_numpy,
    min_elements=_threads.LARGE,
)


PROFILE = Profile(
    name="jax",
    recognises=recognises,
    shim=_shim,
    select=_select_by_cond,
    peak=_xla_peak,
    eager=_eager,
    accelerators=(
        _THROUGH_NUMPY,
        Accelerator(
            name="jit",
            ops=ALL_OPS,
            dtypes=ALL_DTYPES,
            covers=(
                "concrete arrays (not tracers); compiled once per operator, axes and shape. "
                "On one CPU device, data of 2**23 elements or more over trailing axes or the "
                "first axis: a few suspect rows or columns (a 16th at most) computed again "
                "alone, in counts of 1, 16, 256, ... (one host read of the count a call)"
            ),
            earned=(
                "float32 (4096, 8192) L2: 99 ms op by op, 9 ms compiled (XLA fuses the "
                "kernel into one pass); the careful form under lax.cond, only when needed. "
                "One NaN (L2: infinity) row or column, last / first axis, by turns: Sum "
                "8.8-9.3 / 38.0-38.4 -> 4.1-5.1 / 17.5-17.7 ms (clean 3.9-6.0 / 16.5-17.4), "
                "L2 23.0-23.4 / 124.6-128.0 -> 6.0-6.5 / 17.2-17.7; the first call of a "
                "shape compiles 40-80 ms longer (Sum 164-195 -> 208-237 ms)"
            ),
            exact=False,
            run=_jit,
        ),
    ),
)
