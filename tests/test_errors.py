"""Every error of the contract (spec.md section 5), with its message, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import backend_of, make

OPS = reference.OP_NAMES


def test_axis_error_is_value_and_index_error() -> None:
    assert issubclass(anyreduce.AxisError, ValueError)
    assert issubclass(anyreduce.AxisError, IndexError)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ([3], r"axis 3 is out of range for an input of rank 3 \(valid axes are -3 to 2\)"),
        ([-4], r"axis -4 is out of range for an input of rank 3"),
        ([0, 3], r"axis 3 is out of range"),
        ([1, 1], r"axis 1 is repeated in axes \[1, 1\] for an input of rank 3"),
        ([1, -2], r"axis -2 is repeated in axes \[1, -2\] for an input of rank 3"),
    ],
)
def test_bad_axes(xp: Any, op: str, axes: list[int], message: str) -> None:
    data = make(xp, np.ones((2, 3, 4)), "float32")
    with pytest.raises(anyreduce.AxisError, match=rf"^{op}: {message}"):
        getattr(anyreduce, op)(data, axes)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [0, [0], [-1]])
def test_axes_on_rank0_input(xp: Any, op: str, axes: Any) -> None:
    data = make(xp, np.float32(2.0), "float32")
    with pytest.raises(
        anyreduce.AxisError, match=rf"^{op}: axis -?\d+ is given for a rank-0 input"
    ):
        getattr(anyreduce, op)(data, axes)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ([1.0], r"axes must be integers, got 1\.0 of type float"),
        ("1", r"axes must be integers, got '1' of type str"),
        ([True], r"axes must be integers, got True"),
        (np.array([1.0]), r"axes must be integers, got an array of dtype float64"),
        (np.array([[0, 1]]), r"axes must be a 0-D or 1-D array, got shape \(1, 2\)"),
        ([None], r"axes must be integers, got None"),
    ],
)
def test_non_integer_axes(xp: Any, op: str, axes: Any, message: str) -> None:
    data = make(xp, np.ones((2, 3)), "float32")
    with pytest.raises(TypeError, match=rf"^{op}: {message}"):
        getattr(anyreduce, op)(data, axes)


_NO_VALUES = r"axes must have known values \(they set the result's shape\), got a .* without them"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(), (1,)], ids=["0-D", "1-D"])
def test_axes_traced_by_jax_are_refused_in_one_line(op: str, shape: tuple[int, ...]) -> None:
    """Axes given as an argument of ``jax.jit`` (or mapped by ``jax.vmap``) have no
    values; JAX's ConcretizationTypeError named neither the function nor the argument."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    data = jnp.ones((2, 3))
    axes = jnp.ones(shape, dtype=jnp.int32)
    f = getattr(anyreduce, op)
    with pytest.raises(TypeError, match=rf"^{op}: {_NO_VALUES}; pass Python ints"):
        jax.jit(f)(data, axes)
    with pytest.raises(TypeError, match=rf"^{op}: {_NO_VALUES}"):
        jax.vmap(lambda a: f(data, a))(jnp.zeros((2, *shape), dtype=jnp.int32))


@pytest.mark.parametrize("op", OPS)
def test_axes_on_the_meta_device_are_refused_in_one_line(op: str) -> None:
    torch = pytest.importorskip("torch")
    axes = torch.tensor([1], device="meta")
    with pytest.raises(TypeError, match=rf"^{op}: {_NO_VALUES}"):
        getattr(anyreduce, op)(torch.ones(2, 3), axes)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("data", [[1.0, 2.0], 3.0, None, "abc", (1, 2)], ids=repr)
def test_non_array_data(op: str, data: Any) -> None:
    with pytest.raises(
        TypeError, match=rf"^{op}: data must be an array .*got {type(data).__name__}"
    ):
        getattr(anyreduce, op)(data)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("data", [np.float32(2.0), np.int64(3), np.bool_(True)], ids=repr)
def test_numpy_scalar_data(op: str, data: Any) -> None:
    """A NumPy scalar is not an array (nor an ndarray subclass): the message says so and
    how to make one."""
    message = rf"^{op}: data must be an array, got the NumPy scalar type {type(data).__name__}; "
    with pytest.raises(TypeError, match=message + r"pass np.asarray\(data\) for a 0-D array"):
        getattr(anyreduce, op)(data)


@pytest.mark.parametrize("op", [op for op in OPS if op not in {"reduce_max", "reduce_min"}])
def test_bool_is_only_for_max_and_min(xp: Any, op: str) -> None:
    data = make(xp, [True, False], "bool")
    message = rf"^{op}: input dtype .*bool.* is not supported; {op} takes integer and real floating"
    with pytest.raises(TypeError, match=message):
        getattr(anyreduce, op)(data)


@pytest.mark.parametrize("op", OPS)
def test_complex_is_not_supported(xp: Any, op: str) -> None:
    if backend_of(xp) == "jax":
        import jax.numpy as jnp

        data = jnp.asarray([1 + 2j])
    elif backend_of(xp) == "torch":
        import torch

        data = torch.tensor([1 + 2j])
    elif backend_of(xp) == "numpy":
        data = np.asarray([1 + 2j])
    else:
        data = xp.asarray([1 + 2j])
    with pytest.raises(TypeError, match=rf"^{op}: input dtype .*complex.* is not supported"):
        getattr(anyreduce, op)(data)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("flag", ["keepdims", "noop_with_empty_axes"])
@pytest.mark.parametrize("value", [2, -1, "yes", None, 0.5])
def test_bad_flags(xp: Any, op: str, flag: str, value: Any) -> None:
    data = make(xp, np.ones((2, 3)), "float32")
    with pytest.raises(ValueError, match=rf"^{op}: {flag} must be True, False, 1 or 0, got "):
        getattr(anyreduce, op)(data, [0], **{flag: value})


@pytest.mark.parametrize("flag", ["keepdims", "noop_with_empty_axes"])
def test_flags_without_values_are_refused_in_one_line(flag: str) -> None:
    """A flag on PyTorch's meta device raised torch's RuntimeError; one traced by
    ``jax.jit`` gets the same message."""
    torch = pytest.importorskip("torch")
    data = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=rf"^reduce_sum: {flag} must be True, False, 1 or 0"):
        anyreduce.reduce_sum(data, [0], **{flag: torch.tensor(True, device="meta")})
    jax = pytest.importorskip("jax")
    with pytest.raises(ValueError, match=rf"^reduce_sum: {flag} must be True, False, 1 or 0"):
        jax.jit(lambda v: anyreduce.reduce_sum(data, [0], **{flag: v}))(True)


@pytest.mark.parametrize("flag_value", [True, False, 0, 1, np.bool_(True), np.int64(0)])
def test_good_flags(xp: Any, flag_value: Any) -> None:
    data = make(xp, np.ones((2, 3)), "float32")
    anyreduce.reduce_sum(data, [0], keepdims=flag_value, noop_with_empty_axes=flag_value)


@pytest.mark.parametrize("value", [True, False, 1, 0])
def test_flags_given_as_arrays_take_one_rule_on_every_backend(xp: Any, value: Any) -> None:
    """A 0-D bool or integer array is its value (NumPy's, JAX's and array-api-strict's
    0-D bools were refused, PyTorch's taken); an array of one element and rank 1 is
    refused (PyTorch's was taken as its element)."""
    data = make(xp, np.ones((2, 3)), "float32")
    dtype = "bool" if isinstance(value, bool) else "int32"
    flag = make(xp, np.asarray(value), dtype)
    assert anyreduce.reduce_sum(data, [0], keepdims=flag).ndim == (2 if value else 1)
    with pytest.raises(ValueError, match=r"^reduce_sum: keepdims must be True, False, 1 or 0"):
        anyreduce.reduce_sum(data, [0], keepdims=make(xp, np.asarray([value]), dtype))


@pytest.mark.parametrize("op", OPS)
def test_dtype_outside_the_namespace(op: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.ones(3, dtype=ml_dtypes.float8_e4m3fn)
    with pytest.raises(
        TypeError, match=rf"^{op}: input dtype float8_e4m3fn is not supported; {op} takes integer"
    ):
        getattr(anyreduce, op)(data)
