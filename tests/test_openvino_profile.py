"""The OpenVINO profile: every rule and error of ``anyreduce.openvino``, per backend."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import anyreduce
import anyreduce.openvino
import reference
from backends import ALL_DTYPES, INTEGER_DTYPES, Backend, assert_result, make, np_dtype

# OpenVINO operator -> the reference operator computing it (on bool for the logical ones).
OPS = {
    "reduce_l1": "reduce_l1",
    "reduce_l2": "reduce_l2",
    "reduce_sum": "reduce_sum",
    "reduce_mean": "reduce_mean",
    "reduce_max": "reduce_max",
    "reduce_min": "reduce_min",
    "reduce_prod": "reduce_prod",
    "reduce_logical_and": "reduce_min",
    "reduce_logical_or": "reduce_max",
}
LOGICAL = {"reduce_logical_and", "reduce_logical_or"}
LABELS = {
    "reduce_l1": "ReduceL1-4",
    "reduce_l2": "ReduceL2-4",
    "reduce_sum": "ReduceSum-1",
    "reduce_mean": "ReduceMean-1",
    "reduce_max": "ReduceMax-1",
    "reduce_min": "ReduceMin-1",
    "reduce_prod": "ReduceProd-1",
    "reduce_logical_and": "ReduceLogicalAnd-1",
    "reduce_logical_or": "ReduceLogicalOr-1",
}
VALUES = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, 0.0]])
BOOLS = np.array([[True, False, True], [True, True, True]])

# The seed document's examples: data [6, 12, 10, 24].
SEED_SHAPE = (6, 12, 10, 24)
SEED_CASES = [
    ([2, 3], True, (6, 12, 1, 1)),
    ([2, 3], False, (6, 12)),
    ([1], False, (6, 10, 24)),
    ([-2], False, (6, 12, 24)),
]


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(anyreduce.openvino, op)(*args, **kwargs)


def sample(op: str) -> tuple[np.ndarray, str]:
    return (BOOLS, "bool") if op in LOGICAL else (VALUES.astype(np.float32), "float32")


def test_the_operator_table() -> None:
    assert set(anyreduce.openvino.__all__) - {"OPERATORS", "Operator"} == set(OPS)
    for name, operator in anyreduce.openvino.OPERATORS.items():
        assert operator.label == LABELS[name]
        assert operator.kernel == OPS[name]
        assert operator.logical == (name in LOGICAL)


@functools.cache
def seed_data(op: str) -> np.ndarray:
    values = np.arange(np.prod(SEED_SHAPE)).reshape(SEED_SHAPE) % 7
    return (values > 2) if op in LOGICAL else (values - 3).astype(np.float32)


@functools.cache
def seed_expected(op: str, axes: tuple[int, ...], keep_dims: bool) -> np.ndarray:
    return reference.reduce(OPS[op], seed_data(op), list(axes), keepdims=keep_dims)


@pytest.mark.parametrize("op", OPS)
def test_seed_examples(xp: Any, op: str) -> None:
    host = seed_data(op)
    dtype = "bool" if op in LOGICAL else "float32"
    data = make(xp, host, dtype)
    for axes, keep_dims, shape in SEED_CASES:
        result = call(op, data, axes, keep_dims=keep_dims)
        expected = seed_expected(op, tuple(axes), keep_dims)
        assert_result(result, xp, dtype, shape, expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_keep_dims_defaults_to_false(xp: Any, op: str) -> None:
    host, dtype = sample(op)
    data = make(xp, host, dtype)
    expected = reference.reduce(OPS[op], host, [1], keepdims=False)
    assert_result(call(op, data, [1]), xp, dtype, (2,), expected, like=data)
    expected = reference.reduce(OPS[op], host, [0, 1], keepdims=False)
    assert_result(call(op, data, [0, 1]), xp, dtype, (), expected, like=data)
    expected = reference.reduce(OPS[op], host, [0], keepdims=True)
    assert_result(call(op, data, 0, keep_dims=1), xp, dtype, (1, 3), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_empty_axes_reduce_nothing(xp: Any, op: str) -> None:
    host, dtype = sample(op)
    data = make(xp, host, dtype)
    expected = reference.reduce(OPS[op], host, [], noop_with_empty_axes=True)
    if op in {"reduce_l1", "reduce_l2"}:
        np.testing.assert_array_equal(expected.astype(np.float64), np.abs(host))
    for axes in ([], np.array([], dtype=np.int64), make(xp, np.zeros(0), "int32")):
        for keep_dims in (False, True):
            result = call(op, data, axes, keep_dims=keep_dims)
            assert_result(result, xp, dtype, (2, 3), expected, like=data)


@pytest.mark.parametrize("axes_dtype", INTEGER_DTYPES)
def test_axes_of_any_integer_type(xp: Any, backend: Backend, axes_dtype: str) -> None:
    if not backend.has(axes_dtype):
        pytest.skip(f"{backend} has no {axes_dtype}")
    data = make(xp, VALUES, "float32")
    expected = reference.reduce("reduce_sum", VALUES.astype(np.float32), [1], keepdims=False)
    for axes in (make(xp, [1], axes_dtype), make(xp, 1, axes_dtype), np.array([1], axes_dtype)):
        result = anyreduce.openvino.reduce_sum(data, axes)
        assert_result(result, xp, "float32", (2,), expected, like=data)
    if "uint" not in axes_dtype:
        result = anyreduce.openvino.reduce_sum(data, make(xp, [-1], axes_dtype))
        assert_result(result, xp, "float32", (2,), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_empty_set(xp: Any, op: str) -> None:
    host = np.zeros((2, 0), dtype=bool if op in LOGICAL else np.float32)
    dtype = "bool" if op in LOGICAL else "float32"
    data = make(xp, host, dtype)
    expected = reference.reduce(OPS[op], host, [1], keepdims=False)
    assert_result(call(op, data, [1]), xp, dtype, (2,), expected, like=data)
    if op == "reduce_logical_and":
        assert bool(expected.all())
    if op == "reduce_logical_or":
        assert not bool(expected.any())


@pytest.mark.parametrize("op", sorted(set(OPS) - LOGICAL))
def test_numeric_operators_take_every_integer_and_float_dtype(
    xp: Any, backend: Backend, op: str
) -> None:
    for dtype in ALL_DTYPES:
        if not backend.has(dtype):
            continue
        if dtype == "bool":
            data = make(xp, BOOLS, "bool")
            match = (
                f"^{LABELS[op]}: input dtype bool is not supported; "
                f"{LABELS[op]} takes integer and real floating dtypes$"
            )
            with pytest.raises(TypeError, match=match):
                call(op, data, [0])
            continue
        # Values on a few dtypes; acceptance on zero-size data for the rest.
        values = np.abs(VALUES) if dtype in {"uint8", "int32", "float16"} else np.zeros((2, 0))
        data = make(xp, values, dtype)
        host = values.astype(np_dtype(dtype))
        expected = reference.reduce(OPS[op], host, [0], keepdims=False)
        assert_result(call(op, data, [0]), xp, dtype, (values.shape[1],), expected, like=data)


@pytest.mark.parametrize("op", sorted(LOGICAL))
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_logical_operators_take_bool_only(xp: Any, op: str, dtype: str) -> None:
    data = make(xp, VALUES != 0, dtype)
    match = f"^{LABELS[op]}: input dtype {dtype} is not supported; {LABELS[op]} takes bool$"
    with pytest.raises(TypeError, match=match):
        call(op, data, [0])


@pytest.mark.parametrize("op", OPS)
def test_axes_are_required(xp: Any, op: str) -> None:
    host, dtype = sample(op)
    with pytest.raises(TypeError, match=rf"^{LABELS[op]}: axes is a required input"):
        call(op, make(xp, host, dtype), None)


@pytest.mark.parametrize(
    ("axes", "error", "match"),
    [
        ([2], anyreduce.AxisError, "axis 2 is out of range for an input of rank 2"),
        ([-3], anyreduce.AxisError, "axis -3 is out of range for an input of rank 2"),
        ([1, -1], anyreduce.AxisError, r"axis -1 is repeated in axes \[1, -1\]"),
        ([[0]], TypeError, "axes must be integers"),
        (np.zeros((1, 1), dtype=np.int64), TypeError, r"axes must be a 0-D or 1-D array"),
        (np.array([1.0]), TypeError, "axes must be integers, got an array of dtype float64"),
        ([0.0], TypeError, "axes must be integers"),
        (True, TypeError, "axes must be integers"),
    ],
)
def test_axes_errors(xp: Any, axes: Any, error: type[Exception], match: str) -> None:
    data = make(xp, VALUES, "float32")
    with pytest.raises(error, match=f"^ReduceL1-4: {match}"):
        anyreduce.openvino.reduce_l1(data, axes)


def test_rank_0_input(xp: Any) -> None:
    data = make(xp, np.float32(-2.5), "float32")
    assert_result(anyreduce.openvino.reduce_l1(data, []), xp, "float32", (), 2.5, like=data)
    with pytest.raises(anyreduce.AxisError, match=r"^ReduceL1-4: axis 0 is given for a rank-0"):
        anyreduce.openvino.reduce_l1(data, [0])


@pytest.mark.parametrize("value", [2, "false", None])
def test_keep_dims_is_a_flag(xp: Any, value: object) -> None:
    data = make(xp, VALUES, "float32")
    with pytest.raises(ValueError, match=r"^ReduceMean-1: keep_dims must be True, False, 1 or 0"):
        anyreduce.openvino.reduce_mean(data, [0], keep_dims=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [[1.0, 2.0], 3.0])
def test_data_must_be_an_array(data: object) -> None:
    with pytest.raises(TypeError, match=r"^ReduceProd-1: data must be an array"):
        anyreduce.openvino.reduce_prod(data, [0])
