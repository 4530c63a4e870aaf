"""Small inputs' own path (``anyreduce._lib._small``): where it applies, and its guards.

Its values are checked against the oracle by the main tests, which run every case on both
paths (``backends.BOTH_PATHS`` and the ``kernel_path`` fixture).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce._lib import _backends, _small
from backends import assert_result

OPS = reference.OP_NAMES


def _refuse(*args: Any, **kwargs: Any) -> Any:
    msg = "the general kernel ran"
    raise AssertionError(msg)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_small_float32_calls_never_reach_the_general_kernel(
    monkeypatch: pytest.MonkeyPatch, module: str, op: str
) -> None:
    # The benchmark's case: float32 (3, 2, 2) over axis 1, keepdims and not.
    values = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
    if module == "torch":
        torch = pytest.importorskip("torch")
        data: Any = torch.from_numpy(values.copy())
    else:
        data = values.copy()
    monkeypatch.setattr(_backends, "compiled", _refuse)
    for keepdims in (True, False):
        result = getattr(anyreduce, op)(data, (1,), keepdims=keepdims)
        expected = reference.reduce(op, values, [1], keepdims=keepdims)
        shape = (3, 1, 2) if keepdims else (3, 2)
        assert_result(result, _namespace(module), "float32", shape, expected, like=data)
    full = getattr(anyreduce, op)(data, keepdims=False)
    assert type(full) is type(data)
    assert full.shape == ()


def _namespace(module: str) -> Any:
    if module == "torch":
        import array_api_compat.torch as xp

        return xp
    import array_api_compat.numpy as xp

    return xp


@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_the_limit_and_the_switch(module: str) -> None:
    lib = pytest.importorskip(module)
    at_limit = lib.ones(_small.LIMIT, dtype=lib.float32)
    beyond = lib.ones(_small.LIMIT + 1, dtype=lib.float32)
    assert _small.reduce("reduce_sum", at_limit, (0,), True) is not None
    assert _small.reduce("reduce_sum", beyond, (0,), True) is None
    assert _small.reduce("reduce_sum", at_limit, (), True) is None  # the no-op form
    assert _small.reduce("reduce_sum", lib.ones((0, 3)), (1,), True) is None  # empty
    with _small.general_only():
        assert _small.reduce("reduce_sum", at_limit, (0,), True) is None
    assert _small.reduce("reduce_sum", at_limit, (0,), True) is not None


@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_the_public_functions_keep_to_the_switch(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    # The public functions keep each (type, dtype)'s form and call it themselves.
    lib = pytest.importorskip(module)
    data = lib.ones((3, 4), dtype=lib.float32)
    monkeypatch.setattr(_backends, "compiled", _refuse)
    anyreduce.reduce_mean(data, [1])
    with _small.general_only(), pytest.raises(AssertionError, match="the general kernel ran"):
        anyreduce.reduce_mean(data, [1])
    big = lib.ones(_small.LIMIT + 1, dtype=lib.float32)
    with pytest.raises(AssertionError, match="the general kernel ran"):
        anyreduce.reduce_mean(big, [0])


def test_a_form_that_declines_falls_back_to_the_general_kernel() -> None:
    # float64 over a leading axis of 17: numpy would add the terms one after the other.
    x = np.ones((17, 3))
    assert _small.reduce("reduce_sum", x, (0,), True) is None
    assert np.array_equal(anyreduce.reduce_sum(x, [0]), np.full((1, 3), 17.0))


def test_other_array_types_take_the_general_path() -> None:
    assert _small.reduce("reduce_sum", np.ma.ones(3), (0,), True) is None
    assert _small.reduce("reduce_sum", np.ones(3, dtype=np.complex64), (0,), True) is None
    torch = pytest.importorskip("torch")
    parameter = torch.nn.Parameter(torch.ones(3))
    assert _small.reduce("reduce_sum", parameter, (0,), True) is None
    for dtype in (torch.uint16, torch.uint32, torch.uint64):  # carried in signed types
        assert _small.reduce("reduce_sum", torch.ones(3, dtype=dtype), (0,), True) is None


def test_numpy_float64_sums_only_where_numpy_sums_pairwise() -> None:
    # NumPy adds the terms of a reduced axis outside the trailing run one after the
    # other: up to 16 of them is what the general kernel's blocks do too.
    x = np.ones((17, 3, 4))
    assert _small.reduce("reduce_sum", x, (1, 2), True) is not None  # trailing run
    assert _small.reduce("reduce_sum", x[:16], (0, 2), True) is not None  # 16 in a row
    assert _small.reduce("reduce_sum", x, (0,), True) is None  # 17 in a row
    assert _small.reduce("reduce_sum", x, (0, 1), True) is None  # two such axes
    # float32 accumulates in float64: any axes.
    assert _small.reduce("reduce_sum", x.astype(np.float32), (0,), True) is not None


def test_numpy_float_steps_do_not_warn() -> None:
    # filterwarnings = error: log(0), inf - inf, overflow in the cast back, NaN maxima.
    x = np.array([[0.0, 0.0], [np.inf, -np.inf], [3e38, 3e38], [np.nan, 1.0]], np.float32)
    for op in OPS:
        getattr(anyreduce, op)(x, 1)
    assert np.geterr()["over"] == "warn"  # the error state is restored


@pytest.mark.parametrize("op", ["reduce_l2", "reduce_log_sum_exp"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_torch_through_numpy_only_for_plain_cpu_tensors(op: str, dtype: str) -> None:
    torch = pytest.importorskip("torch")
    values = np.array([[0.0, 0.0], [-np.inf, 1.0], [3.0, -4.0]], dtype=dtype)
    if op == "reduce_l2":
        values[1, 0] = 2.0
    expected = reference.reduce(op, values, [1], keepdims=False)
    f = getattr(anyreduce, op)
    plain = torch.from_numpy(values.copy())
    result = f(plain, [1], keepdims=False)
    np.testing.assert_allclose(result.numpy().astype(np.float64), expected, rtol=1e-3)
    assert result.data_ptr() != plain.data_ptr()
    # A tensor numpy cannot view (negative bit): torch's own operators.
    negated = torch._neg_view(torch.from_numpy(-values))
    with pytest.raises(RuntimeError):
        negated.numpy()
    torch.testing.assert_close(f(negated, [1], keepdims=False), result)
    # Autograd: torch's operators, with their gradient.
    leaf = torch.from_numpy(values.copy()).requires_grad_()
    out = f(leaf, [1], keepdims=False)
    assert out.grad_fn is not None
    out.sum().backward()
    assert leaf.grad is not None
    assert bool(torch.all(torch.isfinite(leaf.grad)))
    assert bool(torch.all(leaf.grad[0] == 0)) if op == "reduce_l2" else True


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:Converting a tensor to a Python")  # shapes, as everywhere
def test_torch_jit_trace_records_torch_operators() -> None:
    # Traced, the numpy route would be recorded as a constant.
    torch = pytest.importorskip("torch")
    example = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    traced = torch.jit.trace(lambda a: anyreduce.reduce_log_sum_exp(a, [1]), example)
    other = torch.tensor([[0.0, 0.0], [1000.0, 1000.0]])
    torch.testing.assert_close(traced(other), torch.logsumexp(other, 1, keepdim=True))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_mean_is_torch_means_values_and_gradient(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    values = torch.from_numpy(np.random.default_rng(6).standard_normal((7, 5, 3)).astype(dtype))
    for axes in [(1,), (0, 2), (0, 1, 2)]:
        for keepdims in (True, False):
            got = anyreduce.reduce_mean(values, list(axes), keepdims=keepdims)
            want = torch.mean(values, axes, keepdims)
            assert got.dtype == want.dtype
            assert torch.equal(got, want)
    leaf = values.clone().requires_grad_()
    anyreduce.reduce_mean(leaf, [1]).sum().backward()
    assert leaf.grad is not None
    assert torch.equal(leaf.grad, torch.full_like(values, 1 / 5))
    batched = torch.func.vmap(lambda v: anyreduce.reduce_mean(v, [0], keepdims=False))(values)
    assert torch.equal(batched, torch.mean(values, 1))


def test_torch_mean_first_called_in_inference_mode_still_differentiates() -> None:
    # The count cached by a call under torch.inference_mode serves later autograd calls.
    torch = pytest.importorskip("torch")
    shape = (3, 13)  # a shape no other test reduces: its count is made here
    with torch.inference_mode():
        inferred = anyreduce.reduce_mean(torch.ones(shape), [1])
    assert torch.equal(inferred, torch.ones(3, 1))
    leaf = torch.ones(shape, requires_grad=True)
    anyreduce.reduce_mean(leaf, [1]).sum().backward()
    assert leaf.grad is not None
    assert torch.equal(leaf.grad, torch.full(shape, 1 / 13))


def test_torch_mean_counts_are_kept_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cached counts start again once full, and every mean stays torch.mean's.
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_small, "_COUNTS", 2)
    rng = np.random.default_rng(7)
    for _ in range(2):
        for shape in [(2, 3), (4, 3), (5, 6), (2, 3, 4)]:
            values = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
            for axes in [(0,), (1,), tuple(range(len(shape)))]:
                got = anyreduce.reduce_mean(values, list(axes), keepdims=False)
                assert torch.equal(got, torch.mean(values, axes))
