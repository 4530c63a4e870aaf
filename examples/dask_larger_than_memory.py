"""Reduce an array larger than a Dask cluster's memory with every anyreduce operator.

A local cluster of worker processes, each with a memory limit, reduces a lazily generated
float64 array several times larger than all of their memory together: every reduction
streams over the chunks (each chunk is generated, reduced and dropped), so no worker ever
holds more than a few chunks. Dask's own progress bar shows the computation.

    python examples/dask_larger_than_memory.py                  # 1 GB on 2 x 250 MB
    python examples/dask_larger_than_memory.py --gigabytes 8 --workers 4

Needs ``pip install "anyreduce[dask]"`` (dask.array and dask.distributed).
"""

from __future__ import annotations

import argparse
import logging
import time

import dask
import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster, progress

import anyreduce

OPERATORS = (
    "reduce_sum",
    "reduce_sum_square",
    "reduce_l1",
    "reduce_l2",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
    "reduce_log_sum",
    "reduce_log_sum_exp",
)


def generate_chunk(seed: int, block_info: dict | None = None) -> np.ndarray:
    """One chunk of the data: values near 1, from a generator seeded by the chunk's place."""
    location = block_info[None]["array-location"]
    rng = np.random.default_rng([seed, *(start for start, _ in location)])
    shape = tuple(stop - start for start, stop in location)
    return 1.0 + (rng.random(shape) - 0.5) * 2.0**-10


def lazy_data(gigabytes: float, chunk_megabytes: float, seed: int = 0) -> da.Array:
    """A float64 array of ``gigabytes``, 8 columns, generated chunk by chunk when computed."""
    columns = 8
    rows = int(gigabytes * 1e9) // (8 * columns)
    chunk_rows = max(1, int(chunk_megabytes * 1e6) // (8 * columns))
    chunks = da.core.normalize_chunks((chunk_rows, columns), (rows, columns))
    return da.map_blocks(generate_chunk, seed, chunks=chunks, dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0, help="size of the data")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--memory", default="250MB", help="memory limit of each worker")
    parser.add_argument("--chunk-megabytes", type=float, default=8.0, help="size of a chunk")
    args = parser.parse_args()

    data = lazy_data(args.gigabytes, args.chunk_megabytes)
    total = dask.utils.format_bytes(dask.utils.parse_bytes(args.memory) * args.workers)
    # Building the reductions computes nothing: each is a graph that reduces chunk by chunk.
    results = {name: getattr(anyreduce, name)(data, keepdims=False) for name in OPERATORS}

    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            memory_limit=args.memory,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        print(
            f"data: {dask.utils.format_bytes(data.nbytes)} in {data.npartitions} chunks of "
            f"{dask.utils.format_bytes(data.nbytes // data.npartitions)}; "
            f"cluster: {args.workers} workers of {args.memory} ({total} in all)"
        )
        started = time.perf_counter()
        futures = client.compute(list(results.values()))
        progress(futures)  # dask's own progress bar
        values = client.gather(futures)
        print(f"\nreduced in {time.perf_counter() - started:.1f} s")

    for name, value in zip(results, values, strict=True):
        print(f"  {name:<20} {float(value):.17g}")


if __name__ == "__main__":
    main()
