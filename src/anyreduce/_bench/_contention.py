"""A contended machine for ``anyreduce bench --contended``: one spinning process per core.

Thread pools that are tuned for an idle machine (a thread per core, busy-waiting between
calls) lose most when every core is taken: this is how the benchmark shows what a call
costs beside other work. The spinners start before the run and stop after it, on an error
and on KeyboardInterrupt too; each also stops by itself after ``limit_s`` seconds or when
the process that started it is gone, so none outlives a killed run for long.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["SPIN", "spinners"]

#: A spinner: busy until its deadline or until its parent is gone.
SPIN = """\
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
parent = int(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(100_000):
        pass
"""


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(p.poll() is None for p in processes):
        time.sleep(0.01)
    for p in processes:
        if p.poll() is None:
            p.kill()
        p.wait()


@contextlib.contextmanager
def spinners(count: int, limit_s: float) -> Iterator[dict[str, Any]]:
    """``count`` spinning processes for the length of the block (at most ``limit_s`` s).

    Yields the record the report keeps; on leaving, it says how many were still spinning
    (all of them, unless the run outlasted ``limit_s``) and for how long they ran.
    """
    if count < 1:
        msg = f"bench: the number of spinning processes must be at least 1, got {count}"
        raise ValueError(msg)
    record: dict[str, Any] = {"spinners": count, "limit_s": limit_s}
    processes: list[subprocess.Popen[bytes]] = []
    start = time.perf_counter()
    try:
        for _ in range(count):
            # One at a time: a failed start still stops the ones already spinning.
            processes.append(  # noqa: PERF401
                subprocess.Popen(
                    [sys.executable, "-c", SPIN, str(limit_s), str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield record
        record["spinning_at_end"] = sum(p.poll() is None for p in processes)
    finally:
        record["seconds"] = time.perf_counter() - start
        _stop(processes)
