"""Large NumPy reductions on every core the process may use.

NumPy runs each ufunc loop and each reduction on one core (numpy 2.4); PyTorch, XLA and
onnxruntime run theirs on all of them. On a 2-core machine (AMD EPYC, AVX2, numpy 2.4.6)
float32 (4096, 8192) over the last axis took, with the data split in two along a kept axis
and each half reduced on its own thread: Sum 10-11 -> 5.2-6.3 ms (onnxruntime 4.3-5.5 ms),
Max 7.4-8.8 -> 5.0-5.5 ms (onnxruntime 4.9-5.4 ms); LogSumExp, whose exp is
compute-bound (1.9 ns a float32 value here), 165 -> 93 ms. The GIL is released inside
every NumPy loop, so plain Python threads over views suffice.

Only NumPy's own ``ndarray`` is split: PyTorch and XLA thread their kernels already, Dask
schedules chunks on its own threads, and array-api-strict exists for checking. Data are
split along a kept axis (each result element is then computed exactly as without threads),
or, when every axis is reduced or no kept axis leaves long contiguous runs, into slabs
whose partial results are merged by the
operator that composes with itself (a sum of sums, a maximum of maxima, an L2 norm of L2
norms, a LogSumExp of LogSumExps); the mean and LogSum merge sums and finish once.

The number of threads is :func:`get_num_threads`: the environment variable
``ANYREDUCE_NUM_THREADS`` where set, else the number of cores the process may run on. One
slab is at least ``_SLAB_ELEMENTS`` elements, so small data never pay the hand-off.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from . import _backends

__all__ = ["get_num_threads", "reduce", "set_num_threads"]

Array = Any
Axes = tuple[int, ...]
#: Computes one reduction: (operator name, data, axes, keepdims) -> result.
Compute = Callable[[str, Array, Axes, bool], Array]

#: Fewest elements per slab (4 MiB of float32): a hand-off to a pool thread costs 20-50 us,
#: 1% of a float32 sum of this size.
_SLAB_ELEMENTS = 2**20

#: Fewest elements reduced into each result: over shorter runs NumPy's loops are
#: per-row work that anyreduce regroups already, and the slabs' results are as large as
#: the data (float32 (2**20, 3) over axis 1: 33% of the input held twice, no faster).
_SHORTEST_REDUCTION = 64
#: Shortest contiguous run of a slab along a kept axis: columns of narrow rows lose NumPy's
#: regrouped forms (float32 (2**20, 3) Max over axis 0 in slabs of columns: 36 ms against
#: 0.9 ms whole); such data are split along the reduced axis and merged instead.
_SHORTEST_RUN = 1024

#: For data reduced over every axis: the operator computed on each slab, the operator that
#: merges the slabs' results, and what is applied to the merged result (if anything).
_MERGES: dict[str, tuple[str, str, str | None]] = {
    "reduce_sum": ("reduce_sum", "reduce_sum", None),
    "reduce_sum_square": ("reduce_sum_square", "reduce_sum", None),
    "reduce_l1": ("reduce_l1", "reduce_sum", None),
    "reduce_l2": ("reduce_l2", "reduce_l2", None),
    "reduce_mean": ("reduce_sum", "reduce_sum", "mean"),
    "reduce_prod": ("reduce_prod", "reduce_prod", None),
    "reduce_max": ("reduce_max", "reduce_max", None),
    "reduce_min": ("reduce_min", "reduce_min", None),
    "reduce_log_sum": ("reduce_sum", "reduce_sum", "log"),
    "reduce_log_sum_exp": ("reduce_log_sum_exp", "reduce_log_sum_exp", None),
}

#: Operators whose float data are summed over leading axes (or every axis) as BLAS
#: matrix-vector products (``_backends.leading_sum``), which OpenBLAS threads itself: split
#: over threads as well, float32 (4096, 8192) Sum over axis 0 took 1.15x and over every
#: axis 1.2x as long (paired medians, numpy 2.4, OpenBLAS 0.3.31, 2 cores).
_DOT_SUMS = frozenset({"reduce_sum", "reduce_mean", "reduce_log_sum"})

#: Operators whose C-ordered data reduced over leading axes are split into slabs of whole
#: rows (merged after), not of columns, whose rows are strided. Float32 (4096, 8192) over
#: axis 0, columns then rows (medians of 50 interleaved rounds; numpy 2.4.6, 2 cores): L1 11.5
#: -> 10.2 ms (the loop of ``_numpy_loops``), SumSquare 7.7 -> 6.7 ms, L2 7.9 -> 7.3 ms
#: (grouped squares, ``_backends.grouped_square_sums``).
_ROW_SLABS = frozenset({"reduce_l1", "reduce_sum_square", "reduce_l2"})

_lock = threading.Lock()
_threads: int | None = None
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
# Set in the pool's threads: a reduction started there never waits on the pool itself.
_local = threading.local()


def _forget_pool() -> None:
    """In a child made by ``fork``: the parent's pool threads do not exist there, and
    work handed to them would never run; the child makes its own pool when it needs one."""
    global _lock, _pool, _pool_size  # noqa: PLW0603 - one pool per process
    _lock = threading.Lock()
    _pool = None
    _pool_size = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _from_environment() -> int:
    value = os.environ.get("ANYREDUCE_NUM_THREADS", "").strip()
    if not value:
        return _available_cores()
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        msg = f"ANYREDUCE_NUM_THREADS must be a positive integer, got {value!r}"
        raise ValueError(msg)
    return threads


def get_num_threads() -> int:
    """The number of threads a large NumPy reduction may run on.

    It is the value last given to :func:`set_num_threads`, else the environment variable
    ``ANYREDUCE_NUM_THREADS``, else the number of cores this process may run on. Data of
    other array libraries are not affected: their own kernels decide.

    Returns
    -------
    int
        The number of threads, at least 1.

    Examples
    --------
    >>> import anyreduce
    >>> anyreduce.get_num_threads() >= 1
    True
    """
    global _threads  # noqa: PLW0603 - one process-wide setting
    with _lock:
        if _threads is None:
            _threads = _from_environment()
        return _threads


def set_num_threads(threads: int | None) -> int:
    """Set the number of threads a large NumPy reduction may run on; return the old value.

    Parameters
    ----------
    threads : int or None
        A positive number of threads; 1 keeps every reduction on the calling thread. None
        goes back to the default (``ANYREDUCE_NUM_THREADS``, else the number of cores).

    Returns
    -------
    int
        The number of threads in force before the call.

    Raises
    ------
    ValueError
        `threads` is not a positive integer or None.

    Examples
    --------
    >>> import anyreduce
    >>> previous = anyreduce.set_num_threads(1)
    >>> anyreduce.get_num_threads()
    1
    >>> _ = anyreduce.set_num_threads(previous)
    """
    global _threads  # noqa: PLW0603 - one process-wide setting
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        msg = f"set_num_threads: threads must be a positive integer or None, got {threads!r}"
        raise ValueError(msg)
    previous = get_num_threads()
    new = _from_environment() if threads is None else threads
    with _lock:
        _threads = new
    return previous


def _mark_worker() -> None:
    _local.worker = True


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``workers`` threads (grown, never shrunk)."""
    global _pool, _pool_size  # noqa: PLW0603 - one pool per process
    with _lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="anyreduce", initializer=_mark_worker
            )
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _bounds(length: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges of nearly equal length covering ``range(length)``."""
    edges = [length * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(edges))


def _slab(x: Array, axis: int, start: int, stop: int) -> Array:
    index = (slice(None),) * axis + (slice(start, stop),)
    return x[index]


def _runs_stay_long(shape: tuple[int, ...], axis: int, parts: int) -> bool:
    """Whether slabs along ``axis`` keep contiguous runs of ``_SHORTEST_RUN`` elements."""
    return max(1, shape[axis] // parts) * math.prod(shape[axis + 1 :]) >= _SHORTEST_RUN


def _split_axis(shape: tuple[int, ...], candidates: list[int], parts: int) -> int | None:
    """The outermost of ``candidates`` long enough for ``parts`` slabs, else the longest."""
    for axis in candidates:
        if shape[axis] >= parts:
            return axis
    longest = max(candidates, key=lambda a: shape[a], default=None)
    return longest if longest is not None and shape[longest] >= 2 else None


def reduce(name: str, x: Array, axes: Axes, keepdims: bool, compute: Compute) -> Array | None:
    """``compute(name, x, axes, keepdims)`` split over threads, or None where it is not.

    ``x`` is a NumPy ``ndarray`` with no zero-length axis and ``axes`` non-empty and
    normalised.
    """
    slabs = x.size // _SLAB_ELEMENTS  # most calls stop here, before the lock and the rest
    if slabs < 2 or getattr(_local, "worker", False):
        return None
    import numpy as np

    parts = min(get_num_threads(), slabs)
    if parts < 2:
        return None
    if name in _DOT_SUMS and _backends.leading_sum_kernel(np, x, axes, x.dtype) is not None:
        return None
    if math.prod([x.shape[a] for a in axes]) < _SHORTEST_REDUCTION:
        return None
    if name in _ROW_SLABS and axes == tuple(range(len(axes))) and x.flags.c_contiguous:
        merged = _reduce_everything(name, x, axes, keepdims, compute, parts)
        if merged is not None:
            return merged
    kept = [a for a in range(x.ndim) if a not in axes and _runs_stay_long(x.shape, a, parts)]
    axis = _split_axis(x.shape, kept, parts)
    if axis is not None:
        parts = min(parts, x.shape[axis])
        results = _run(compute, name, x, axis, parts, axes, keepdims)
        out_axis = axis if keepdims else axis - sum(1 for a in axes if a < axis)
        return np.concatenate(results, axis=out_axis)
    return _reduce_everything(name, x, axes, keepdims, compute, parts)


def _reduce_everything(
    name: str, x: Array, axes: Axes, keepdims: bool, compute: Compute, parts: int
) -> Array | None:
    """Slabs along a reduced axis, each reduced over ``axes``, merged over the slabs (every
    axis reduced, or no kept axis splits into long runs)."""
    import numpy as np

    # Only float32 and float64 results merge within the accuracy contract: half precision
    # would round each slab's result once more, integers must wrap or truncate exactly.
    if name not in _MERGES or x.dtype not in (np.float32, np.float64):
        return None
    reduced = [a for a in axes if _runs_stay_long(x.shape, a, parts)]
    axis = _split_axis(x.shape, reduced, parts)
    if axis is None:
        return None
    parts = min(parts, x.shape[axis])
    partial, merge, finish = _MERGES[name]
    results = _run(compute, partial, x, axis, parts, axes, True)
    # A fresh array (of the concatenated partials), so finishing in place aliases nothing.
    merged = np.asarray(compute(merge, np.concatenate(results, axis=axis), axes, keepdims))
    with _backends.computing(np):  # the contract's IEEE values (log(0) = -inf), unwarned
        if finish == "mean":
            count = math.prod([x.shape[a] for a in axes])
            np.divide(merged, count, out=merged)
        elif finish == "log":
            np.log(merged, out=merged)
    return merged


def _run(
    compute: Compute,
    name: str,
    x: Array,
    axis: int,
    parts: int,
    axes: Axes,
    keepdims: bool,
) -> list[Array]:
    """``compute`` on each of ``parts`` slabs of ``x`` along ``axis``, the last on this thread."""
    slabs = [_slab(x, axis, start, stop) for start, stop in _bounds(x.shape[axis], parts)]
    pool = _executor(parts - 1)
    futures: list[Future[Array]] = [
        pool.submit(compute, name, slab, axes, keepdims) for slab in slabs[:-1]
    ]
    try:
        last = compute(name, slabs[-1], axes, keepdims)
    finally:
        results = [f.result() for f in futures]
    return [*results, last]
