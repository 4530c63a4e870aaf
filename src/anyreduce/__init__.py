"""anyreduce: the ONNX reductions, written once for every array-API backend.

The ten ONNX reduction operators with exact ONNX semantics, on NumPy, PyTorch, JAX, Dask
and array-api-strict arrays, returning arrays of the caller's own kind, dtype and device.

Every function has the signature ``f(data, axes=None, *, keepdims=True,
noop_with_empty_axes=False)`` of the newest ONNX version of its operator:
:func:`reduce_sum`, :func:`reduce_sum_square`, :func:`reduce_l1`, :func:`reduce_l2`,
:func:`reduce_mean`, :func:`reduce_prod`, :func:`reduce_max`, :func:`reduce_min`,
:func:`reduce_log_sum` and :func:`reduce_log_sum_exp`. An axis out of range raises
:class:`AxisError`.

Examples
--------
>>> import numpy as np
>>> import anyreduce
>>> anyreduce.reduce_l2(np.array([[3.0, 4.0], [5.0, 12.0]]), axes=1, keepdims=False)
array([ 5., 13.])
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from ._backends._threads import get_num_threads, set_num_threads
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
    __version__ = _version("anyreduce")
except _PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AxisError",
    "__version__",
    "get_num_threads",
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
    "set_num_threads",
]
