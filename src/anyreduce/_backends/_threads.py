"""Large NumPy reductions on every core the process may use.

NumPy runs each reduction on one core (numpy 2.4); PyTorch, XLA and onnxruntime use all of
them. NumPy data are split along a kept axis into slabs of about ``SLAB_ELEMENTS``
elements, reduced on pool threads (the GIL is released inside NumPy's loops). The slabs
depend on the data's shape alone, and each result element is computed by the same loop
over the same values as without slabs, so the values are bit for bit the same whatever
the number of threads; an operator's temporaries (|x|, x**2, exp(x - m)) are a slab's
size. Data reduced over every axis are not split: merging slabs would change the order of
the additions.

No BLAS call is made, so a ``fork`` while another thread reduces does not inherit a held
BLAS lock; a child process makes its own pool (``os.register_at_fork``). Changing the
number of threads replaces the pool without shutting the old one down under the calls
still using it.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = [
    "flat_pieces",
    "flat_slabs",
    "get_num_threads",
    "in_a_job",
    "in_jobs",
    "set_num_threads",
    "split",
]

Array = Any
Axes = tuple[int, ...]

#: Elements per slab (4 MiB of float32): a hand-off to a pool thread costs 20-50 us, about
#: 1% of a float32 sum of this size, and a temporary of this size stays in the L2/L3 cache.
SLAB_ELEMENTS = 2**20

#: The fewest elements of data that are split: two slabs.
LARGE = 2 * SLAB_ELEMENTS

#: Positions of a kept axis that follows a reduced axis (columns, for a sum over the first
#: axis) a slab holds at least, for operators with no element-wise temporary: NumPy runs
#: the reduced axis as an outer loop over runs of this length, and short runs cost more
#: than the threads give (float32 (4096, 8192) max over axis 0, one thread: runs of 256
#: 34 ms, of 2048 15 ms, the whole 10 ms).
WIDE_RUN = 2048


class _State:
    """The pool and the setting, shared by every thread of the process."""

    lock = threading.Lock()
    pool: ThreadPoolExecutor | None = None
    pool_size = 0
    requested: int | None = None


_worker = threading.local()


def _forget_pool() -> None:
    # In a child made by fork the parent's pool threads do not exist.
    _State.pool, _State.pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


class ThreadSettingWarning(RuntimeWarning):
    """``ANYREDUCE_NUM_THREADS`` holds a value that is not a positive integer."""


_reported: set[str] = set()


def _from_environment() -> int | None:
    value = os.environ.get("ANYREDUCE_NUM_THREADS", "").strip()
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads >= 1:
        return threads
    if value not in _reported:  # said once per value, never an error in every call
        _reported.add(value)
        msg = (
            f"ANYREDUCE_NUM_THREADS must be a positive integer, got {value!r}; "
            "using the number of cores this process may run on"
        )
        warnings.warn(msg, ThreadSettingWarning, stacklevel=4)
    return None


def get_num_threads() -> int:
    """The number of threads large NumPy reductions are split over.

    Set by :func:`set_num_threads`, else by the environment variable
    ``ANYREDUCE_NUM_THREADS``, else the number of cores this process may run on. The
    values of every result are the same for any number of threads.

    Returns
    -------
    int
        The number of threads, 1 or more.

    Examples
    --------
    >>> import anyreduce
    >>> anyreduce.get_num_threads() >= 1
    True
    """
    if _State.requested is not None:
        return _State.requested
    return _from_environment() or _available_cores()


def set_num_threads(threads: int | None) -> int:
    """Set how many threads large NumPy reductions use; return the previous setting.

    Parameters
    ----------
    threads : int or None
        A positive number of threads (1: no threads), or None to go back to the default
        (``ANYREDUCE_NUM_THREADS``, else the number of cores).

    Returns
    -------
    int
        The number of threads before the call.

    Raises
    ------
    ValueError
        `threads` is not a positive integer or None.

    Examples
    --------
    >>> import anyreduce
    >>> before = anyreduce.set_num_threads(1)
    >>> _ = anyreduce.set_num_threads(before)
    """
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        msg = f"set_num_threads: threads must be a positive integer or None, got {threads!r}"
        raise ValueError(msg)
    before = get_num_threads()
    _State.requested = threads
    return before


def _executor(workers: int) -> ThreadPoolExecutor:
    with _State.lock:
        if _State.pool is None or _State.pool_size != workers:
            # The old pool is not shut down: calls holding it finish on it, and its
            # threads end once it is no longer referenced.
            _State.pool = ThreadPoolExecutor(workers, thread_name_prefix="anyreduce")
            _State.pool_size = workers
        return _State.pool


def _split_axis(x: Array, axes: Axes) -> tuple[int, int] | None:
    """The outermost kept axis long enough for two slabs, and the fewest positions of it
    a slab may hold; or None.

    A slab one position wide has lost the split axis, and NumPy may then run a different
    loop over the rest: (2**20, 3) float32 summed over axis 0 in slabs of one column is
    summed pairwise down each column, not row after row as the whole is, and differs in
    the last bits (numpy 2.4). Only a C-ordered axis outside every reduced axis can be cut
    into single positions: each is then a block laid out exactly as within the whole.
    """
    for a in range(x.ndim):
        if a in axes:
            continue
        width = 1 if _c_ordered(x) and a < min(axes) else 2
        if x.shape[a] >= 2 * width:
            return a, width
    return None


def split(
    x: Array,
    axes: Axes,
    keepdims: bool,
    reduce: Callable[[Array], Array],
    *,
    concat: Callable[..., Array] | None = None,
    threaded: bool = True,
    elements: int = SLAB_ELEMENTS,
    run: int = 1,
    smallest: int = LARGE,
) -> Array | None:
    """``reduce`` of NumPy ``x`` computed slab by slab along a kept axis, on pool threads.

    ``reduce(slab)`` reduces one slab over ``axes`` with ``keepdims``; ``concat(results,
    axis=...)`` joins the slabs' results (NumPy's by default); ``threaded=False`` takes the
    slabs in turn on the calling thread (a library that threads its own kernels). The slabs
    hold about ``elements`` elements each whatever the number of threads, so an operator's
    temporaries are a slab's size, not the data's; a pool thread takes consecutive slabs
    of about ``SLAB_ELEMENTS`` elements in all at a time (a hand-off costs 20-50 us). A
    split axis that follows a reduced axis is cut into runs of at least ``run`` positions
    (``WIDE_RUN`` for an operator without temporaries). None where the data are not
    split: fewer than ``smallest`` elements (two slabs of ``SLAB_ELEMENTS`` unless an
    operator whose temporaries are many times its data's size says), no kept axis long
    enough for two slabs of at least ``smallest / 2`` elements, or already on a pool
    thread.
    """
    if getattr(_worker, "active", False) or not axes or _size(x) < smallest:
        return None
    found = _split_axis(x, axes)
    if found is None:
        return None
    axis, width = found
    length = x.shape[axis]
    per_position = _size(x) // length
    step = max(width, elements // per_position)
    if axis > min(axes):
        step = max(step, run)
    if 2 * max(step, smallest // 2 // per_position) > length:
        return None
    bounds = [(start, min(start + step, length)) for start in range(0, length, step)]
    if bounds[-1][1] - bounds[-1][0] < width:  # the last slab too keeps ``width`` positions
        bounds[-2:] = [(bounds[-2][0], length)]
    index = (slice(None),) * axis

    def one(bound: tuple[int, int]) -> Array:
        part = (*index, slice(*bound))
        return reduce(x[part])

    results = _in_jobs(one, bounds, max(1, SLAB_ELEMENTS // (step * per_position)), threaded)
    # The split axis keeps its place unless it follows reduced axes that are dropped.
    out_axis = axis if keepdims else axis - sum(1 for a in axes if a < axis)
    if concat is None:
        import numpy as np

        # In the results' own dtype: NumPy's promotion brings data in the other byte
        # order into native order.
        return np.concatenate(results, axis=out_axis, dtype=results[0].dtype)
    return concat(results, axis=out_axis)


def _size(x: Array) -> int:
    return math.prod(x.shape)


def _c_ordered(x: Array) -> bool:
    flags = getattr(x, "flags", None)
    if flags is not None:
        return bool(flags.c_contiguous)
    return bool(x.is_contiguous())  # torch


def flat_slabs(
    x: Array,
    reduce: Callable[[Array], Array],
    *,
    threaded: bool = True,
    elements: int = SLAB_ELEMENTS,
) -> list[Array] | None:
    """``reduce`` of each slab of the flattened C-ordered ``x`` (``elements`` elements
    each, whatever the number of threads), on pool threads as :func:`split` runs them;
    ``threaded=False`` takes them in turn on the calling thread (a library that threads its
    own kernels).

    None where ``x`` is smaller than two slabs of ``SLAB_ELEMENTS``, not C-ordered, or
    this is a pool thread.
    """
    if getattr(_worker, "active", False) or _size(x) < 2 * SLAB_ELEMENTS or not _c_ordered(x):
        return None
    count = _size(x)
    step = elements
    bounds = [(start, min(start + step, count)) for start in range(0, count, step)]
    return flat_pieces(x, bounds, reduce, threaded=threaded)


def flat_pieces(
    x: Array,
    bounds: list[tuple[int, int]],
    reduce: Callable[[Array], Array],
    *,
    threaded: bool = True,
) -> list[Array]:
    """``reduce`` of the pieces ``[start, stop)`` of the flattened C-ordered ``x``, in
    order, on pool threads (consecutive pieces of about ``SLAB_ELEMENTS`` elements in all
    at a time), or in turn on the calling thread (``threaded=False``, one thread set, or a
    pool thread)."""
    flat = x.reshape(-1)

    def one(bound: tuple[int, int]) -> Array:
        return reduce(flat[bound[0] : bound[1]])

    longest = max(stop - start for start, stop in bounds)
    threaded = threaded and not getattr(_worker, "active", False)
    return _in_jobs(one, bounds, max(1, SLAB_ELEMENTS // longest), threaded)


def in_a_job() -> bool:
    """Whether this thread is running a job of :func:`split`, :func:`flat_slabs`,
    :func:`flat_pieces` or :func:`in_jobs` (a slab or a piece of some larger call)."""
    return bool(getattr(_worker, "active", False))


def in_jobs(
    one: Callable[[tuple[int, int]], Array], bounds: list[tuple[int, int]], per_job: int
) -> list[Array]:
    """``one`` of every bound, in order, on pool threads ``per_job`` consecutive bounds at
    a time (in turn on the calling thread where one thread is set or this is a pool
    thread)."""
    return _in_jobs(one, bounds, per_job, not getattr(_worker, "active", False))


def _in_jobs(
    one: Callable[[tuple[int, int]], Array],
    bounds: list[tuple[int, int]],
    per_job: int,
    threaded: bool,
) -> list[Array]:
    """``one`` of every bound, in order; ``per_job`` consecutive bounds at a time, taken
    by the calling thread and ``threads - 1`` pool threads alike, each claiming the next
    job when it finishes one (in turn on the calling thread where ``threaded`` is false or
    one thread is set).

    The caller works too: on cores busy with other processes, a pool thread may wait
    milliseconds to be scheduled, and the caller, already running, then takes its jobs.
    """
    starts = range(0, len(bounds), per_job)
    results: list[list[Array]] = [[] for _ in starts]
    wanted = get_num_threads() if threaded else 1
    threads = min(wanted, len(starts))
    claimed = 0
    failed = False
    lock = threading.Lock()

    def claim() -> int | None:
        nonlocal claimed
        with lock:
            if failed or claimed == len(starts):
                return None
            claimed += 1
            return claimed - 1

    def work() -> None:
        nonlocal failed
        before = getattr(_worker, "active", False)
        _worker.active = True
        try:
            while (index := claim()) is not None:
                start = starts[index]
                results[index] = [one(bound) for bound in bounds[start : start + per_job]]
        except BaseException:
            failed = True  # the others claim no more jobs
            raise
        finally:
            _worker.active = before

    if threads < 2:
        work()
    else:
        pool = _executor(wanted - 1)  # its size depends on the setting alone
        helpers = [pool.submit(work) for _ in range(threads - 1)]
        try:
            work()
        finally:
            for helper in helpers:
                # One still queued behind other calls' jobs has nothing left to claim.
                if not helper.cancel():
                    helper.result()  # waits; re-raises a pool thread's error
    return [result for results_ in results for result in results_]
