"""anyreduce: the ONNX reductions, written once for every array-API backend.

The ten ONNX reduction operators with exact ONNX semantics, on NumPy, PyTorch, JAX, Dask
and array-api-strict arrays, returning arrays of the caller's own kind and device.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._lib._errors import AxisError
from ._reductions import (
    reduce_l1,
    reduce_l2,
    reduce_log_sum,
    reduce_log_sum_exp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    reduce_sum_square,
)

try:
    __version__ = version("anyreduce")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AxisError",
    "__version__",
    "reduce_l1",
    "reduce_l2",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "reduce_sum_square",
]
