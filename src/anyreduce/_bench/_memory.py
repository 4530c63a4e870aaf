"""Peak extra memory of one call: bytes allocated at once beyond its input and output."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["peak_extra_bytes"]


def _nbytes(result: Any) -> int:
    if isinstance(result, (list, tuple)):
        return sum(_nbytes(r) for r in result)
    nbytes = getattr(result, "nbytes", None)
    if nbytes is None:  # torch before 2.1
        return int(result.numel() * result.element_size())
    return int(nbytes)


def _numpy_peak(fn: Callable[[], Any]) -> int:
    # NumPy reports its data buffers to tracemalloc.
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return max(0, peak - base - _nbytes(result))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2: the profiler's native layer logs each start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with Path(os.devnull).open("w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _torch_peak(fn: Callable[[], Any]) -> int:
    # torch's CPU allocator keeps no statistics; its profiler records every allocation (as
    # the self memory of the op that made it) and every free (as a "[memory]" event).
    # Accelerators that reduce a tensor's memory with NumPy allocate through NumPy, which
    # reports to tracemalloc: the two peaks are added, an upper bound of the whole.
    import tracemalloc

    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        pass  # a profiler's first start allocates tens of MB of Python objects
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        with (
            _quiet_stderr(),
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
        ):
            result = fn()
        _, numpy_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    changes = sorted(
        (e.time_range.start, e.self_cpu_memory_usage)
        for e in prof.events()
        if e.self_cpu_memory_usage
    )
    current = peak = 0
    for _, change in changes:
        current += change
        peak = max(peak, current)
    return max(0, peak + max(0, numpy_peak - base) - _nbytes(result))


def peak_extra_bytes(backend: str, fn: Callable[[], Any]) -> int | None:
    """Peak bytes ``fn`` holds beyond its input and output; None where not measurable."""
    if backend == "numpy":
        return _numpy_peak(fn)
    if backend == "torch":
        return _torch_peak(fn)
    return None
