"""Differentiation, compilation and lazy evaluation: every op inside the transformations.

* JAX: ``jax.jit`` (axes, keepdims and the flag static), ``jax.vmap``, ``jax.grad`` and
  ``jax.test_util.check_grads``;
* PyTorch: autograd and ``gradcheck``, ``torch.compile(fullgraph=True)`` (no graph
  breaks), ``torch.func.vmap``, and the ``meta`` device (shapes only: proves that no value
  is read on the host);
* Dask: the graph is built without computing anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from backends import FLOAT_DTYPES, INTEGER_DTYPES, np_dtype

OPS = reference.OP_NAMES
FLOAT_OPS = OPS
DTYPES = (*FLOAT_DTYPES, *INTEGER_DTYPES)


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(anyreduce, op)(*args, **kwargs)


def dtypes_of(op: str) -> tuple[str, ...]:
    return (*DTYPES, "bool") if op in {"reduce_max", "reduce_min"} else DTYPES


def sample(dtype: str, shape: tuple[int, ...] = (3, 4, 5)) -> np.ndarray:
    """Small positive values, distinct within every slice, exact in every dtype."""
    if dtype == "bool":
        return (np.arange(np.prod(shape)).reshape(shape) % 3 == 0).astype(bool)
    values = (np.arange(np.prod(shape)).reshape(shape) * 7 % 11 + 1).astype(np.float64)
    return values.astype(np_dtype(dtype))


def generic(shape: tuple[int, ...] = (3, 4, 5)) -> np.ndarray:
    """float64 inputs away from kinks and ties: positive, distinct, moderate."""
    rng = np.random.default_rng(3)
    return rng.permutation(np.linspace(0.5, 2.0, int(np.prod(shape)))).reshape(shape)


# ---------------------------------------------------------------------------------------
# JAX


@pytest.fixture
def jax64() -> Iterator[Any]:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


@pytest.mark.parametrize("op", OPS)
def test_jax_jit_and_vmap(request: pytest.FixtureRequest, jax64: Any, op: str) -> None:
    """Every dtype in one program (one compilation per op and axes form)."""
    if op == "reduce_mean" and jax64.default_backend() == "gpu":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="XLA's GPU reduction adds in another order inside a jit of several "
                "calls than in a call of its own: float64 Mean differs in the last bit",
            )
        )
    jnp = jax64.numpy
    f = getattr(anyreduce, op)
    xs = [jnp.asarray(sample(dtype)) for dtype in dtypes_of(op)]

    def over_all(arrays: list[Any], axes: Any, keepdims: bool, noop: bool) -> list[Any]:
        return [f(a, axes, keepdims=keepdims, noop_with_empty_axes=noop) for a in arrays]

    jitted = jax64.jit(over_all, static_argnums=(1, 2, 3))
    for axes, keepdims, noop in (((0, 2), False, False), ((), True, True)):
        for x, got in zip(xs, jitted(xs, axes, keepdims, noop), strict=True):
            want = f(x, axes, keepdims=keepdims, noop_with_empty_axes=noop)
            assert got.dtype == want.dtype == x.dtype
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    batched = jax64.vmap(lambda arrays: over_all(arrays, (1,), False, False))(xs)
    for x, got in zip(xs, batched, strict=True):
        assert got.dtype == x.dtype
        assert got.shape == (3, 4)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(f(x, (2,), keepdims=False)))


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_jax_gradients_check(jax64: Any, op: str) -> None:
    from jax.test_util import check_grads

    jnp = jax64.numpy
    x = jnp.asarray(generic())
    f = getattr(anyreduce, op)
    check_grads(lambda a: f(a, (0, 2)), (x,), order=1, modes=("fwd", "rev"))
    grad = jax64.jit(jax64.grad(lambda a: jnp.sum(f(a, (1,)))))(x)
    assert grad.shape == x.shape
    assert bool(jnp.all(jnp.isfinite(grad)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["reduce_l1", "reduce_l2"])
def test_jax_norm_gradient_at_zero_is_zero(jax64: Any, op: str, dtype: str) -> None:
    jnp = jax64.numpy
    x = jnp.asarray(np.array([[0.0, 0.0], [3.0, -4.0]], dtype=dtype))
    grad = jax64.grad(lambda a: jnp.sum(call(op, a, [1])))(x)
    want = [[0.0, 0.0], [1.0, -1.0]] if op == "reduce_l1" else [[0.0, 0.0], [0.6, -0.8]]
    np.testing.assert_allclose(np.asarray(grad), want, rtol=1e-6)


def test_jax_log_sum_exp_gradient_is_softmax(jax64: Any) -> None:
    jnp = jax64.numpy
    x = jnp.asarray([-jnp.inf, 0.0, 1.0, -jnp.inf])
    grad = jax64.grad(lambda a: jnp.sum(anyreduce.reduce_log_sum_exp(a)))(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(jax64.nn.softmax(x)), rtol=1e-12)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_jax_max_min_ties_follow_jax(jax64: Any, op: str) -> None:
    jnp = jax64.numpy
    x = jnp.asarray([[2.0, 5.0, 5.0], [1.0, 1.0, 0.5]])
    native = jnp.max if op == "reduce_max" else jnp.min
    ours = jax64.grad(lambda a: jnp.sum(call(op, a, [1])))(x)
    theirs = jax64.grad(lambda a: jnp.sum(native(a, axis=1)))(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


# Rows whose plain form leaves the range, beside an ordinary row, and the derivative of the
# row's result with respect to each value (exact, from the values in float64): the careful
# forms must be differentiated as the operator is, and the branch not taken must add
# nothing (not NaN). Values are fractions of the dtype's largest and smallest normal
# numbers.


def _careful_rows(op: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.finfo(np_dtype(dtype))
    top, low = float(info.max), float(info.smallest_normal)
    ordinary = [0.5, 1.5, 2.0, 0.25]
    if op == "reduce_l2":
        rows = [
            ordinary,
            [0.75 * top, 0.5 * top, -0.25 * top, 1.0],
            [3e6 * low, -2e6 * low, low, 0.0],
        ]
    elif op == "reduce_log_sum":
        rows = [ordinary, [0.6 * top, 0.6 * top, 1.0, 3.0], [1e6 * low, 2e6 * low, 3e6 * low, low]]
    else:  # Sum, Mean: partial sums overflow, the sum does not
        rows = [ordinary, [0.75 * top, 0.75 * top, -0.75 * top, 1.0]]
    x = np.array(rows, dtype=np_dtype(dtype))
    wide = x.astype(np.float64)
    if op == "reduce_l2":
        want = [[v / math.hypot(*row) for v in row] for row in wide.tolist()]
    elif op == "reduce_log_sum":
        want = [[float(1 / sum(map(Fraction, row)))] * len(row) for row in wide.tolist()]
    else:
        want = np.full_like(wide, 1.0 if op == "reduce_sum" else 1 / wide.shape[1])
    return x, np.array(want, dtype=np.float64)


_CAREFUL_OPS = ("reduce_sum", "reduce_mean", "reduce_l2", "reduce_log_sum")


def _assert_gradient(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    # A derivative below the smallest normal number may be flushed to zero (XLA on the CPU).
    info = np.finfo(np_dtype(dtype))
    np.testing.assert_allclose(
        got.astype(np.float64), want, rtol=8 * float(info.eps), atol=float(info.smallest_normal)
    )


@pytest.mark.parametrize("x64", [False, True], ids=["x64-off", "x64-on"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", _CAREFUL_OPS)
def test_jax_gradients_of_slices_in_the_careful_form(op: str, dtype: str, x64: bool) -> None:
    """The L2 of float32 [0.75, 0.5, -0.25] * max had the gradient 2.05, 0.53, -0.27
    (not 0.80, 0.53, -0.27) without x64: the scale's derivative did not cancel; forward
    mode gave 0, the tangents divided by the scale being subnormal. The LogSum of a tiny
    row was NaN: the unused careful branch's logarithm of 0."""
    jax = pytest.importorskip("jax")
    if dtype == "float64" and not x64:
        pytest.skip("float64 needs x64")
    x, want = _careful_rows(op, dtype)
    with jax.enable_x64(x64):
        jnp = jax.numpy
        grad = jax.grad(lambda a: jnp.sum(call(op, a, [1])))(jnp.asarray(x))
        assert grad.dtype == x.dtype
        _assert_gradient(np.asarray(grad), want, dtype)
        # Forward mode: the row of the Jacobian that belongs to each slice.
        jacobian = jax.jacfwd(lambda a: call(op, a, [1], keepdims=False))(jnp.asarray(x))
        rows = np.arange(x.shape[0])
        _assert_gradient(np.asarray(jacobian)[rows, rows], want, dtype)


@pytest.mark.parametrize("op", OPS)
def test_jax_generic_kernel_compiles_once_op_by_op(jax64: Any, op: str) -> None:
    """The generic kernel on concrete arrays (accelerators off) runs op by op: a second
    call on data of the same shape and dtype compiles nothing. A conditional taken outside
    a trace compiled its branches again on every call (60-290 ms a call)."""
    import logging

    from anyreduce._backends import no_accelerators

    compiled: list[str] = []

    class Compiles(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Compiling"):
                compiled.append(record.getMessage())

    jnp = jax64.numpy
    x = jnp.asarray(generic().astype(np.float32))
    handler = Compiles()
    logger = logging.getLogger("jax")
    with no_accelerators():
        first = call(op, x, (0, 2))
        logger.addHandler(handler)
        try:
            with jax64.log_compiles():
                second = call(op, x, (0, 2))
        finally:
            logger.removeHandler(handler)
    assert compiled == []
    np.testing.assert_array_equal(np.asarray(second), np.asarray(first))


# ---------------------------------------------------------------------------------------
# PyTorch


@pytest.fixture
def torch(kernel_path: str) -> Any:
    """PyTorch, each test once with small inputs' own path and once with the general kernels."""
    return pytest.importorskip("torch")


def tensor(torch: Any, values: np.ndarray, dtype: str, **kwargs: Any) -> Any:
    if dtype == "bfloat16":
        return torch.tensor(values.astype(np.float32), **kwargs).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(values)).to(**kwargs)


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_torch_gradcheck(torch: Any, op: str) -> None:
    x = torch.tensor(generic(), dtype=torch.float64, requires_grad=True)
    f = getattr(anyreduce, op)
    assert torch.autograd.gradcheck(lambda a: f(a, (0, 2)), (x,))
    assert torch.autograd.gradcheck(lambda a: f(a, (1,), keepdims=False), (x,))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op", ["reduce_l1", "reduce_l2"])
def test_torch_norm_gradient_at_zero_is_zero(torch: Any, op: str, dtype: str) -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, -4.0]], dtype=getattr(torch, dtype), requires_grad=True)
    call(op, x, [1]).sum().backward()
    reference_norm = torch.tensor([[0.0, 0.0], [3.0, -4.0]], dtype=x.dtype, requires_grad=True)
    torch.linalg.vector_norm(
        reference_norm, ord=1 if op == "reduce_l1" else 2, dim=1
    ).sum().backward()
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(
        x.grad.float().numpy(), reference_norm.grad.float().numpy(), rtol=2**-7, atol=0
    )
    assert torch.all(x.grad[0] == 0)


def test_torch_log_sum_exp_gradient_is_softmax(torch: Any) -> None:
    inf = float("inf")
    x = torch.tensor([-inf, 0.0, 1.0, -inf], dtype=torch.float64, requires_grad=True)
    anyreduce.reduce_log_sum_exp(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.softmax(x.detach(), 0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", _CAREFUL_OPS)
def test_torch_gradients_of_slices_in_the_careful_form(torch: Any, op: str, dtype: str) -> None:
    x, want = _careful_rows(op, dtype)
    t = torch.from_numpy(x).requires_grad_()
    call(op, t, [1]).sum().backward()
    assert t.grad.dtype == t.dtype
    _assert_gradient(t.grad.numpy(), want, dtype)


# The gradient of each operator's no-op form (noop_with_empty_axes) at [[1, -2], [3, 4]]:
# the derivative of its element-wise part (|x|, x**2, log x; the others x itself).
_NO_OP_GRADIENTS = {
    "reduce_l1": [[1.0, -1.0], [1.0, 1.0]],
    "reduce_l2": [[1.0, -1.0], [1.0, 1.0]],
    "reduce_sum_square": [[2.0, -4.0], [6.0, 8.0]],
    "reduce_log_sum": [[1.0, -0.5], [1 / 3, 0.25]],
}

_NO_OP_SCRIPT = """
import sys, warnings
warnings.simplefilter("error")
import torch, anyreduce
x = torch.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
if sys.argv[1] == "Identity":
    import onnx.helper, anyreduce.onnx
    (y,) = anyreduce.onnx.run_node(onnx.helper.make_node("Identity", ["x"], ["y"]), [x])
else:
    y = getattr(anyreduce, sys.argv[1])(x, [], noop_with_empty_axes=True)
y.sum().backward()
print(x.grad.tolist())
"""


def test_torch_no_op_form_of_a_tensor_that_requires_grad() -> None:
    """The no-op form (and ONNX's Identity) copies a tensor that requires grad within the
    graph, and warns nothing: torch 2.13's ``torch.asarray`` warns of such a copy once per
    process, so each operator runs first in a process of its own (which inherits
    ANYREDUCE_ACCELERATORS: CI's job without accelerators runs the generic kernel alone)."""
    import json
    import subprocess
    import sys

    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    runs = {
        op: subprocess.Popen(
            [sys.executable, "-c", _NO_OP_SCRIPT, op],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for op in (*OPS, "Identity")
    }
    for op, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, (op, err[-2000:])
        assert not err, (op, err[-2000:])
        want = _NO_OP_GRADIENTS.get(op, [[1.0, 1.0], [1.0, 1.0]])
        np.testing.assert_allclose(json.loads(out), want, rtol=1e-6, err_msg=op)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_torch_max_min_ties_follow_torch(torch: Any, op: str) -> None:
    values = [[2.0, 5.0, 5.0], [1.0, 1.0, 0.5]]
    x = torch.tensor(values, requires_grad=True)
    call(op, x, [1]).sum().backward()
    y = torch.tensor(values, requires_grad=True)
    (torch.amax if op == "reduce_max" else torch.amin)(y, dim=1).sum().backward()
    torch.testing.assert_close(x.grad, y.grad)


# torch 2.11's own import of Inductor (torch._dynamo.reset) warns; 2.13's does not.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("op", OPS)
def test_torch_compile_fullgraph(torch: Any, op: str) -> None:
    """Every dtype in one graph: one trace per op, and no graph break on any dtype."""
    f = getattr(anyreduce, op)
    torch._dynamo.reset()
    xs = [tensor(torch, sample(dtype), dtype) for dtype in dtypes_of(op)]
    compiled = torch.compile(
        lambda arrays: [f(a, (0, 2), keepdims=False) for a in arrays],
        fullgraph=True,
        backend="eager",
    )
    results = compiled(xs)
    for x, got in zip(xs, results, strict=True):
        want = f(x, (0, 2), keepdims=False)
        assert got.dtype == want.dtype == x.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_the_dispatch_keeps_each_array_module_apart(torch: Any) -> None:
    """Dynamo reads the whole table of valid inputs when it traces a PyTorch call: the
    table it reads holds PyTorch's dtypes only (torch 2.11 cannot hash NumPy's)."""
    from anyreduce import _reductions

    anyreduce.reduce_sum(np.ones(3, np.uint64))
    anyreduce.reduce_sum(torch.ones(3))
    assert all(isinstance(key[2], torch.dtype) for key in _reductions._VALID["torch"])


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_torch_compile_inductor(torch: Any) -> None:
    """One op through the default backend: the captured graph also compiles."""
    torch._dynamo.reset()
    x = torch.tensor(generic(), dtype=torch.float32)
    compiled = torch.compile(lambda a: anyreduce.reduce_l2(a, (1,)), fullgraph=True)
    got = compiled(x)
    torch.testing.assert_close(got, anyreduce.reduce_l2(x, (1,)))


@pytest.mark.parametrize("op", OPS)
def test_torch_func_vmap(torch: Any, op: str) -> None:
    f = getattr(anyreduce, op)
    for dtype in dtypes_of(op):
        x = tensor(torch, sample(dtype), dtype)
        batched = torch.func.vmap(lambda a, f=f: f(a, (1,), keepdims=False))(x)
        want = f(x, (2,), keepdims=False)
        assert batched.dtype == want.dtype == x.dtype
        assert tuple(batched.shape) == (3, 4)
        torch.testing.assert_close(batched, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("op", OPS)
def test_torch_meta_device(torch: Any, op: str) -> None:
    """Shapes only: any read of a value on the host would raise."""
    for dtype in dtypes_of(op):
        x = torch.empty((3, 4, 5), dtype=getattr(torch, dtype), device="meta")
        for axes, keepdims, shape in (([1], True, (3, 1, 5)), (None, False, ())):
            result = call(op, x, axes, keepdims=keepdims)
            assert result.device.type == "meta"
            assert result.dtype == x.dtype
            assert tuple(result.shape) == shape
        result = call(op, x, [], noop_with_empty_axes=True)
        assert tuple(result.shape) == (3, 4, 5)
        assert result.device.type == "meta"


# ---------------------------------------------------------------------------------------
# Dask


def _refuse(*args: Any, **kwargs: Any) -> Any:
    msg = "computed while building the graph"
    raise AssertionError(msg)


@pytest.mark.parametrize("op", OPS)
def test_dask_builds_the_graph_without_computing(op: str) -> None:
    dask = pytest.importorskip("dask")
    import array_api_compat.dask.array as xp

    f = getattr(anyreduce, op)
    for dtype in dtypes_of(op):
        if dtype == "bfloat16":
            continue  # Dask arrays hold NumPy dtypes
        host = sample(dtype, (6, 4, 5))
        x = xp.asarray(dask.array.from_array(host, chunks=(2, 3, 5)))
        with dask.config.set(scheduler=_refuse):
            results = [
                f(x, [0, 2], keepdims=False),
                f(x, None),
                f(x, [], noop_with_empty_axes=True),
            ]
        for result, shape in zip(results, [(4,), (1, 1, 1), (6, 4, 5)], strict=True):
            assert tuple(result.shape) == shape
            assert result.dtype == host.dtype
        with np.errstate(all="ignore"):  # integers wrap: NumPy's warnings are the caller's
            got = np.asarray(results[0].compute(scheduler="sync"))
        want = f(host, [0, 2], keepdims=False)
        if dtype in FLOAT_DTYPES:  # chunks change the order of the float arithmetic
            np.testing.assert_allclose(got, want, rtol=32 * float(np.finfo(dtype).eps))
        else:
            np.testing.assert_array_equal(got, want)
