"""The worked examples of the seed documents, for every operator on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import assert_result, make

SEED = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
AXES = ([2], [1], [-2], [-1], None, [])


def _shape(axes: list[int] | None, keepdims: bool) -> tuple[int, ...]:
    reduced = {a % 3 for a in axes} if axes else {0, 1, 2}
    if keepdims:
        return tuple(1 if i in reduced else n for i, n in enumerate(SEED.shape))
    return tuple(n for i, n in enumerate(SEED.shape) if i not in reduced)


@pytest.mark.parametrize("op", reference.OP_NAMES)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_seed_example(xp: Any, op: str, axes: list[int] | None, keepdims: int) -> None:
    data = make(xp, SEED, "float32")
    result = getattr(anyreduce, op)(data, axes, keepdims=keepdims)
    expected = reference.reduce(op, SEED, axes, keepdims=bool(keepdims))
    assert_result(result, xp, "float32", _shape(axes, bool(keepdims)), expected, like=data)


@pytest.mark.parametrize(
    ("op", "axes", "keepdims", "expected"),
    [
        # ReduceL1 page: axes [2], keepdims 0 and 1; default axes; axes [-1]
        ("reduce_l1", [2], 0, [[3, 7], [11, 15], [19, 23]]),
        ("reduce_l1", [2], 1, [[[3], [7]], [[11], [15]], [[19], [23]]]),
        ("reduce_l1", None, 1, [[[78]]]),
        ("reduce_l1", [-1], 1, [[[3], [7]], [[11], [15]], [[19], [23]]]),
        # ReduceL2 page
        (
            "reduce_l2",
            [2],
            0,
            [[2.23606798, 5.0], [7.81024968, 10.63014581], [13.45362405, 16.2788206]],
        ),
        ("reduce_l2", None, 1, [[[25.49509757]]]),
        # ReduceSum page: axes [1]
        ("reduce_sum", [1], 0, [[4, 6], [12, 14], [20, 22]]),
        ("reduce_sum", [1], 1, [[[4, 6]], [[12, 14]], [[20, 22]]]),
        ("reduce_sum", [-2], 1, [[[4, 6]], [[12, 14]], [[20, 22]]]),
        ("reduce_sum", None, 1, [[[78]]]),
    ],
)
def test_seed_printed_values(
    xp: Any, op: str, axes: list[int] | None, keepdims: int, expected: list[Any]
) -> None:
    data = make(xp, SEED, "float32")
    result = getattr(anyreduce, op)(data, axes, keepdims=keepdims)
    want = np.asarray(expected, dtype=np.float64)
    assert_result(result, xp, "float32", want.shape, want, like=data, rtol=1e-6)


def test_reduce_sum_empty_axes_noop_example(xp: Any) -> None:
    # ReduceSum page, _empty_axes_input_noop: the output is the input.
    data = make(xp, SEED, "float32")
    result = anyreduce.reduce_sum(data, [], keepdims=1, noop_with_empty_axes=1)
    assert_result(result, xp, "float32", (3, 2, 2), SEED, like=data)
