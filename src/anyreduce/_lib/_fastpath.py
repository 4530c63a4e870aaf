"""Backend layer, speed: where a backend reaches native speed only through its own machinery.

Each entry names the measurement that calls for it (``anyreduce bench``, 2-core x86 CPU)
and has a test on its backend (``tests/test_fastpath.py``). The algorithms themselves stay
in the agnostic layer; this module only decides how they are dispatched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import array_api_compat

__all__ = ["block_elements", "compiled"]

Namespace = Any
Array = Any


@functools.lru_cache(maxsize=1024)
def _jitted(fn: Callable[..., Array], static: tuple[Any, ...]) -> Callable[[Array], Array]:
    import jax

    return jax.jit(functools.partial(fn, *static))


def compiled(xp: Namespace, fn: Callable[..., Array], *static: Any) -> Callable[[Array], Array]:
    """``x -> fn(*static, x)``, compiled once per ``static`` and input signature under JAX.

    Eager JAX runs each array-API call as its own dispatch and keeps every intermediate:
    L2 of float32 (4096, 8192) took 99 ms eager against 9 ms under ``jax.jit``, and the
    small (3, 2, 2) input paid about 40 us per call in dispatches. ``jax.jit`` fuses the
    kernel into one pass and caches the executable per shape, dtype and x64 mode; called
    under a transformation (jit, grad, vmap) it is simply inlined.
    """
    if array_api_compat.is_jax_namespace(xp):
        return _jitted(fn, static)
    return functools.partial(fn, *static)


def block_elements(xp: Namespace) -> int | None:
    """Largest temporary (in elements) an element-wise step may make, None for no blocking.

    NumPy and PyTorch evaluate ``sum(abs(x))`` as two passes with a full-size temporary:
    L1 of float32 (4096, 8192) over the last axis took 40 ms against 11 ms for the plain
    sum on NumPy, and held 128 MB extra. Blocks of 2**18 elements (1 MiB in float32) stay
    in cache and cost about 1.2x the plain sum. XLA (under :func:`compiled`) fuses the
    element-wise step into the reduction, and Dask computes chunk by chunk already.

    PyTorch is not blocked: its CPU allocator hands each freed block back to the system,
    so every block's temporary page-faults anew (7,800 minor faults a call for 1 MiB
    blocks, 32,769 for one full temporary; torch 2.13) and blocked L1 took 1.3 s against
    0.4 s unblocked and 32 ms for the plain sum on a loaded 2-core machine.
    """
    if (
        array_api_compat.is_jax_namespace(xp)
        or array_api_compat.is_dask_namespace(xp)
        or array_api_compat.is_torch_namespace(xp)
    ):
        return None
    return 2**18
