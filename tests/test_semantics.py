"""The contract's semantics (spec.md sections 1-4) on every backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import BOTH_PATHS, INTEGER_DTYPES, assert_result, backend_of, make, to_numpy

EMPTY_VALUES = {
    "reduce_sum": 0.0,
    "reduce_sum_square": 0.0,
    "reduce_l1": 0.0,
    "reduce_l2": 0.0,
    "reduce_mean": math.nan,
    "reduce_prod": 1.0,
    "reduce_max": -math.inf,
    "reduce_min": math.inf,
    "reduce_log_sum": -math.inf,
    "reduce_log_sum_exp": -math.inf,
}
OPS = reference.OP_NAMES
# Every test on both paths where a backend has two: small inputs' own and the general one.
pytestmark = pytest.mark.parametrize("backend", BOTH_PATHS, ids=str, indirect=True)


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(anyreduce, op)(*args, **kwargs)


@pytest.mark.parametrize("op", OPS)
def test_empty_set_gives_identity(xp: Any, op: str) -> None:
    data = make(xp, np.zeros((2, 0, 4)), "float32")
    result = call(op, data, [1])
    assert_result(result, xp, "float32", (2, 1, 4), np.full((2, 1, 4), EMPTY_VALUES[op]), like=data)


@pytest.mark.parametrize("op", OPS)
def test_zero_length_axis_not_reduced_stays(xp: Any, op: str) -> None:
    data = make(xp, np.zeros((2, 0, 4)), "float32")
    result = call(op, data, [2])
    assert_result(result, xp, "float32", (2, 0, 1), np.zeros((2, 0, 1)), like=data)
    result = call(op, data, [2], keepdims=False)
    assert_result(result, xp, "float32", (2, 0), np.zeros((2, 0)), like=data)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_empty_set_integer_identity(xp: Any, op: str, dtype: str) -> None:
    data = make(xp, np.zeros((3, 0)), dtype)
    expected = reference.reduce(op, np.zeros((3, 0), dtype=dtype), [1], keepdims=False)
    assert_result(call(op, data, [1], keepdims=False), xp, dtype, (3,), expected, like=data)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("keepdims", [True, False])
def test_rank0_full_reduction_is_the_noop_value(xp: Any, op: str, keepdims: bool) -> None:
    data = make(xp, np.float32(4.0), "float32")
    result = call(op, data, keepdims=keepdims)
    expected = reference.reduce(op, np.asarray(np.float32(4.0)), None, keepdims=keepdims)
    assert_result(result, xp, "float32", (), expected, like=data)
    assert_result(call(op, data, []), xp, "float32", (), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_full_reduction_without_keepdims_is_a_0d_array(xp: Any, op: str) -> None:
    data = make(xp, np.arange(1, 7).reshape(2, 3), "float64" if op != "reduce_l1" else "float32")
    result = call(op, data, keepdims=False)
    assert result.shape == ()
    assert not isinstance(result, np.generic)


@pytest.mark.parametrize("op", OPS)
def test_noop_form_applies_the_elementwise_part(xp: Any, op: str) -> None:
    values = np.array([[-3.0, -0.5], [2.0, -4.0]], dtype=np.float32)
    data = make(xp, values, "float32")
    expected = reference.reduce(op, values, [], noop_with_empty_axes=True)
    for axes in (None, [], np.array([], dtype=np.int64)):
        result = call(op, data, axes, noop_with_empty_axes=True, keepdims=False)
        assert_result(result, xp, "float32", (2, 2), expected, like=data)
    if op in {"reduce_l1", "reduce_l2"}:
        np.testing.assert_array_equal(np.asarray(expected, dtype=np.float64), np.abs(values))


@pytest.mark.parametrize("op", OPS)
def test_empty_axes_without_noop_reduce_everything(xp: Any, op: str) -> None:
    values = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    data = make(xp, values, "float32")
    expected = reference.reduce(op, values, None)
    assert_result(call(op, data, []), xp, "float32", (1, 1), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_nan_propagates(xp: Any, op: str) -> None:
    values = np.array([[1.0, math.nan, 2.0], [1.0, 2.0, 3.0]], dtype=np.float32)
    data = make(xp, values, "float32")
    result = call(op, data, [1], keepdims=False)
    expected = reference.reduce(op, values, [1], keepdims=False)
    assert math.isnan(expected[0])
    assert_result(result, xp, "float32", (2,), expected, like=data)


def test_float16_l2_accumulates_in_float32(xp: Any, dtype_available: Any) -> None:
    dtype_available("float16")
    data = make(xp, [300, 400], "float16")
    assert_result(anyreduce.reduce_l2(data, keepdims=False), xp, "float16", (), 500.0, like=data)


def test_int32_sum_wraps(xp: Any) -> None:
    data = make(xp, [2**31 - 1, 1, 5], "int32")
    assert_result(anyreduce.reduce_sum(data), xp, "int32", (1,), [-(2**31) + 5], like=data)


@pytest.mark.parametrize(
    ("values", "mean"),
    [([-7, 2], -2), ([7, -2], 2), ([1, 2], 1), ([-1, -2], -1), ([-3, -3, -3], -3)],
)
def test_integer_mean_truncates_toward_zero(xp: Any, values: list[int], mean: int) -> None:
    data = make(xp, values, "int32")
    assert_result(anyreduce.reduce_mean(data, keepdims=False), xp, "int32", (), mean, like=data)


def test_int64_mean_is_exact_beyond_the_sum_range(xp: Any, dtype_available: Any) -> None:
    dtype_available("int64")
    values = [2**62 + 1, 2**62 + 2, 2**62 + 4, -(2**63)]
    data = make(xp, values, "int64")
    exact = sum(values)
    want = abs(exact) // len(values) * (1 if exact >= 0 else -1)
    assert_result(anyreduce.reduce_mean(data, keepdims=False), xp, "int64", (), want, like=data)


def test_uint64_mean_is_exact(xp: Any, dtype_available: Any) -> None:
    dtype_available("uint64")
    values = [2**64 - 1, 2**64 - 2, 2**64 - 6]
    data = make(xp, values, "uint64")
    want = sum(values) // 3
    assert_result(anyreduce.reduce_mean(data, keepdims=False), xp, "uint64", (), want, like=data)


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
@pytest.mark.parametrize("axes", [(1,), (0,), None], ids=["last", "first", "every"])
def test_wide_integer_means_of_large_data_are_exact(
    xp: Any, dtype_available: Any, dtype: str, axes: tuple[int, ...] | None
) -> None:
    """Large enough to be taken in pieces by an eager backend (the limbs' sums added
    piece by piece): still the exact mean, truncated toward zero, over the whole range."""
    dtype_available(dtype)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    values = rng.integers(int(info.min), int(info.max), (3, 2**16 + 5), dtype=dtype, endpoint=True)
    values[0, :9] = info.max
    values[1, :9] = info.min
    data = make(xp, values, dtype)
    normal = tuple(range(values.ndim)) if axes is None else axes
    count = math.prod(values.shape[a] for a in normal)
    sums = values.astype(object).sum(axis=normal)
    means = np.array(
        [abs(int(t)) // count * (1 if t >= 0 else -1) for t in np.ravel(sums)], dtype=dtype
    )
    got = anyreduce.reduce_mean(data, axes, keepdims=False)
    np.testing.assert_array_equal(to_numpy(got), means.reshape(np.shape(sums)))


@pytest.mark.parametrize(
    ("values", "any_", "all_"),
    [
        ([True, False, True], True, False),
        ([True, True], True, True),
        ([False, False], False, False),
    ],
)
def test_bool_max_min_are_any_all(xp: Any, values: list[bool], any_: bool, all_: bool) -> None:
    data = make(xp, values, "bool")
    assert_result(anyreduce.reduce_max(data, keepdims=False), xp, "bool", (), any_, like=data)
    assert_result(anyreduce.reduce_min(data, keepdims=False), xp, "bool", (), all_, like=data)


def test_bool_empty_set(xp: Any) -> None:
    data = make(xp, np.zeros((2, 0), dtype=bool), "bool")
    assert_result(anyreduce.reduce_max(data, [1], keepdims=False), xp, "bool", (2,), [0, 0])
    assert_result(anyreduce.reduce_min(data, [1], keepdims=False), xp, "bool", (2,), [1, 1])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1000.0, 1000.0], 1000.0 + math.log(2.0)),
        ([-1000.0, -1000.0], -1000.0 + math.log(2.0)),
        ([-math.inf, -math.inf], -math.inf),
        ([math.inf, 1.0], math.inf),
        ([math.inf, -math.inf], math.inf),
        ([math.inf, math.nan], math.nan),
    ],
)
def test_log_sum_exp_special_values(xp: Any, values: list[float], expected: float) -> None:
    data = make(xp, values, "float32")
    result = anyreduce.reduce_log_sum_exp(data, keepdims=False)
    assert_result(result, xp, "float32", (), expected, like=data)


@pytest.mark.parametrize(
    ("dtype", "values", "expected"),
    [
        ("float32", [1e20, 1e20], 1.4142135e20),
        ("float32", [1e-30, 1e-30], 1.4142135e-30),
        ("float64", [1e200, 1e200], 1.4142135623730951e200),
        ("float64", [1e-200, 1e-200], 1.4142135623730951e-200),
        ("float32", [3e38, 3e38], math.inf),
        ("bfloat16", [1e20, 1e20], 1.4142135e20),
        ("float16", [60000.0, 60000.0], math.inf),
    ],
)
def test_l2_has_no_spurious_overflow(
    xp: Any, dtype_available: Any, dtype: str, values: list[float], expected: float
) -> None:
    dtype_available(dtype)
    data = make(xp, values, dtype)
    exact = reference.reduce(
        "reduce_l2", np.asarray(values, dtype=np.float64), None, keepdims=False
    )
    result = anyreduce.reduce_l2(data, keepdims=False)
    assert_result(result, xp, dtype, (), exact, like=data)
    assert math.isinf(expected) == math.isinf(float(to_numpy(result)))


def test_float16_mean_does_not_overflow(xp: Any, dtype_available: Any) -> None:
    dtype_available("float16")
    data = make(xp, [60000.0, 60000.0], "float16")
    assert_result(anyreduce.reduce_mean(data, keepdims=False), xp, "float16", (), 60000.0)


@pytest.mark.parametrize("op", OPS)
def test_axes_forms_agree(xp: Any, op: str) -> None:
    values = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4) / 4
    data = make(xp, values, "float32")
    expected = reference.reduce(op, values, [0, 2])
    forms: list[Any] = [
        [0, 2],
        (2, 0),
        [-3, -1],
        np.array([0, 2]),
        np.array([2, -3], dtype=np.int32),
        make(xp, [0, 2], "int64" if "int64" not in getattr(xp, "__name__", "") else "int32"),
    ]
    for axes in forms:
        assert_result(call(op, data, axes), xp, "float32", (1, 3, 1), expected, like=data)
    single = reference.reduce(op, values, [1])
    for axes in (1, -2, np.int64(1), np.array(1), [1]):
        assert_result(call(op, data, axes), xp, "float32", (2, 1, 4), single, like=data)


@pytest.mark.parametrize("op", OPS)
def test_input_is_not_modified_and_output_does_not_alias(xp: Any, op: str) -> None:
    values = np.array([[1.5, -2.0], [3.0, 0.25]], dtype=np.float32)
    data = make(xp, values, "float32")
    for kwargs in ({"axes": [], "noop_with_empty_axes": True}, {"axes": [0]}, {}):
        result = call(op, data, **kwargs)
        np.testing.assert_array_equal(to_numpy(data), values)
        assert result is not data
    if hasattr(data, "__setitem__") and not _immutable(xp):
        result = call(op, data, [], noop_with_empty_axes=True)
        result[...] = 7
        np.testing.assert_array_equal(to_numpy(data), values)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("op", OPS)
def test_general_kernel_output_does_not_alias(
    xp: Any, dtype_available: Any, op: str, dtype: str
) -> None:
    # 8192 elements: past the small path, so the operators' own kernels answer, and the
    # no-op form (every element its own slice) goes through their result casts.
    dtype_available(dtype)
    values = np.arange(8192).reshape(64, 128) % 7 + 1
    data = make(xp, values, dtype)
    expected = to_numpy(data).copy()
    for kwargs in ({"axes": [], "noop_with_empty_axes": True}, {"axes": [1]}, {}):
        result = call(op, data, **kwargs)
        assert result is not data
        np.testing.assert_array_equal(to_numpy(data), expected)
        if hasattr(result, "__setitem__") and not _immutable(xp):
            result[...] = 0
            np.testing.assert_array_equal(to_numpy(data), expected)


def _immutable(xp: Any) -> bool:
    return backend_of(xp) in {"jax", "dask", "array_api_strict"}


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_integer_log_ops_saturate(xp: Any, dtype_available: Any, dtype: str) -> None:
    dtype_available(dtype)
    values = np.array([[3, 4], [0, 0]])
    data = make(xp, values, dtype)
    for op in ("reduce_log_sum", "reduce_log_sum_exp", "reduce_l2"):
        expected = reference.reduce(op, values.astype(dtype), [1], keepdims=False)
        assert_result(call(op, data, [1], keepdims=False), xp, dtype, (2,), expected, like=data)
