"""The ONNX profile: the ten reductions under the rules of any ONNX opset.

``anyreduce.onnx.reduce_sum(x, axes, opset=11)`` computes what ReduceSum-11 defines and
rejects what it does not admit (dtypes outside its type constraint, negative axes at
version 1, ``noop_with_empty_axes`` before it existed). :func:`run_node` runs an ONNX
``NodeProto`` on arrays of any namespace, and :func:`backend_for` gives an
``onnx.backend.base.Backend`` that runs models on one array library.

The ``onnx`` package is needed only by the functions that read or build protobufs:
``pip install "anyreduce[onnx]"``.

Examples
--------
>>> import numpy as np
>>> from anyreduce import onnx
>>> x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
>>> onnx.reduce_sum(x, [-1], keepdims=0, opset=13)
array([3., 7.], dtype=float32)
>>> onnx.op_version("ReduceMax", 19).label
'ReduceMax-18'
"""

from __future__ import annotations

from ._opsets import NEWEST_OPSET, OLDEST_OPSET, VERSIONS, OpVersion, op_version
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
from ._runtime import SUPPORTED_OPS, backend_for, run_node

__all__ = [
    "NEWEST_OPSET",
    "OLDEST_OPSET",
    "SUPPORTED_OPS",
    "VERSIONS",
    "OpVersion",
    "backend_for",
    "op_version",
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
    "run_node",
]
