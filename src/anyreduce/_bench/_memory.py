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
    # torch's CPU allocator keeps no statistics; its profiler records every allocation and
    # every free as a "[memory]" event with its time. Its FunctionEvents attribute these
    # to the op they happen in as a net "self memory", which loses their order: the free
    # of a temporary an op's child allocated makes the op's own change negative, and that
    # op starts before the child (torch 2.13, sum(int32, dtype=int64): -256 MiB at the
    # sum's start, +256 MiB at the copy's; the peak read 0). The raw events keep the
    # order. Accelerators that reduce a tensor's memory with NumPy allocate through NumPy,
    # which reports to tracemalloc: the two peaks are added, an upper bound of the whole.
    import tracemalloc

    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        pass  # a profiler's first start allocates tens of MB of Python objects
    # tracemalloc watches the call alone, within the profiler's start and stop.
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base, _ = tracemalloc.get_traced_memory()
            result = fn()
            _, numpy_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    changes = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]"
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
