"""Data generated chunk by chunk, the same on a Dask cluster and in NumPy.

Each chunk's values depend only on a seed and the chunk's position, so a test can build a
lazy Dask array far larger than memory and recompute any chunk with NumPy alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

Location = tuple[tuple[int, int], ...]


def chunk_values(seed: int, location: Location, dtype: str = "float64") -> np.ndarray:
    """The values of the chunk at ``location`` (``(start, stop)`` per axis): 1 +- 2**-11."""
    rng = np.random.default_rng([seed, *(start for start, _ in location)])
    shape = tuple(stop - start for start, stop in location)
    return (1.0 + (rng.random(shape) - 0.5) * 2.0**-10).astype(dtype)


def _chunk(seed: int, dtype: str, block_info: Any = None) -> np.ndarray:
    location = tuple(tuple(bounds) for bounds in block_info[None]["array-location"])
    return chunk_values(seed, location, dtype)


def lazy_array(shape: tuple[int, ...], chunks: Any, seed: int, dtype: str = "float64") -> Any:
    """A Dask array of ``shape`` whose chunks are generated only when computed."""
    import dask.array as da

    normal = da.core.normalize_chunks(chunks, shape, dtype=np.dtype(dtype))
    return da.map_blocks(
        _chunk, seed, dtype, chunks=normal, dtype=dtype, meta=np.empty((0,) * len(shape), dtype)
    )


def locations(chunks: tuple[tuple[int, ...], ...]) -> Iterator[Location]:
    """The ``(start, stop)`` bounds of every chunk of a Dask array's ``chunks``."""
    bounds = [list(itertools.pairwise(itertools.accumulate(c, initial=0))) for c in chunks]
    for location in itertools.product(*bounds):
        yield tuple(location)
