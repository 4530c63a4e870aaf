"""The OpenVINO profile: ReduceL1-4, ReduceL2-4, ReduceSum-1, ReduceMean-1, ReduceMax-1,
ReduceMin-1, ReduceProd-1, ReduceLogicalAnd-1 and ReduceLogicalOr-1.

``axes`` is required, ``keep_dims`` defaults to false, and empty ``axes`` reduces over
nothing. No OpenVINO installation is needed.

Examples
--------
>>> import numpy as np
>>> from anyreduce import openvino
>>> x = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
>>> openvino.reduce_l1(x, [2, 1], keep_dims=True).shape
(3, 1, 1)
"""

from __future__ import annotations

from ._reductions import (
    OPERATORS,
    Operator,
    reduce_l1,
    reduce_l2,
    reduce_logical_and,
    reduce_logical_or,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)

__all__ = [
    "OPERATORS",
    "Operator",
    "reduce_l1",
    "reduce_l2",
    "reduce_logical_and",
    "reduce_logical_or",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
]
