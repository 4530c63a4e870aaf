"""No spurious overflow or underflow in any operator, on every backend; gradients that stay
finite where the frameworks' own give NaN.

The contract (spec §3): a result must not overflow or underflow in an intermediate step
when the true result is representable. The careful forms live in the generic kernels
(``anyreduce._agnostic``), so they hold eagerly, with accelerators off, under ``jax.jit``
and ``torch.compile``, and in Dask graphs.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import anyreduce
from anyreduce._conformance._exact import compare, exact
from anyreduce._lib._ops import OPS as OPERATORS
from backends import BOTH_PATHS, make, np_dtype, to_numpy

OPS = [
    "reduce_sum",
    "reduce_sum_square",
    "reduce_l1",
    "reduce_l2",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
    "reduce_log_sum",
    "reduce_log_sum_exp",
]

# (op, dtype, data, the exact result): the cases where every runtime failed.
EXACT_CASES = [
    ("reduce_prod", "float32", [8.0] * 99 + [0.0], 0.0),
    ("reduce_prod", "float32", [-8.0] * 99 + [0.0], -0.0),
    ("reduce_prod", "float32", [1e-30, 1e-30, 1e30], 1e-30),
    ("reduce_prod", "float64", [1e300, 1e300, 1e-300, 1e-300, 7.0], 7.0),
    ("reduce_prod", "float32", [2.0] * 200 + [2.0**-149] * 2, 2.0**-98),
    ("reduce_prod", "float32", [2.0] * 200 + [2.0**-100] * 2, 1.0),
    ("reduce_prod", "float32", [3e38, 3e38], math.inf),
    ("reduce_prod", "float32", [3e38, -3e38, 3.0], -math.inf),
    ("reduce_prod", "float32", [1e-30, 1e-30], 0.0),
    ("reduce_prod", "float32", [1e30, math.inf, 0.0], math.nan),
    ("reduce_prod", "float16", [60000.0] * 3 + [2.0**-24] * 3, 60000.0**3 * 2.0**-72),
    ("reduce_mean", "float32", [3e38, 3e38], 3e38),
    ("reduce_mean", "float64", [1.7e308, 1.7e308], 1.7e308),
    ("reduce_sum", "float32", [3e38, 3e38, -3e38], 3e38),
    ("reduce_sum", "float64", [1.7e308, 1.7e308, -1.7e308], 1.7e308),
    ("reduce_sum", "float32", [3e38, 3e38], math.inf),
    ("reduce_log_sum", "float32", [3e38, 3e38], math.log(6e38)),
    ("reduce_l2", "float32", [1e20, 1e20], math.sqrt(2) * 1e20),
    ("reduce_l2", "float32", [1e-30, 1e-30], math.sqrt(2) * 1e-30),
    ("reduce_l2", "float64", [1e200, 1e200], math.sqrt(2) * 1e200),
    ("reduce_l2", "float64", [1e-200, 1e-200], math.sqrt(2) * 1e-200),
    # The largest float: its scale, a power of two, is 2**127 (2**1023), not the 2**128
    # (2**1024) that log2 of it rounds to.
    (
        "reduce_l2",
        "float32",
        [float(np.finfo(np.float32).max), 1.0],
        float(np.finfo(np.float32).max),
    ),
    (
        "reduce_l2",
        "float64",
        [1.7976931348623157e308, 0.5, 2.2250738585072014e-308],
        1.7976931348623157e308,
    ),
    ("reduce_l2", "float64", [1.7976931348623157e308] * 2, math.inf),
]


def _ids(case: tuple[Any, ...]) -> str:
    return f"{case[0]}-{case[1]}-{case[2][:3]}"


@pytest.mark.parametrize("backend", BOTH_PATHS, ids=str, indirect=True)
@pytest.mark.parametrize(("op", "dtype", "data", "want"), EXACT_CASES, ids=map(_ids, EXACT_CASES))
def test_no_intermediate_overflow_or_underflow(
    xp: Any, backend: Any, op: str, dtype: str, data: list[float], want: float
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    if backend.name == "jax32" and dtype == "float32" and min(map(abs, data)) < 2.0**-126:
        # XLA on the CPU reads subnormal inputs as zero (flush to zero): documented.
        pytest.skip("XLA on the CPU flushes subnormal inputs to zero")
    host = np.asarray(data, dtype=np_dtype(dtype))
    result = getattr(anyreduce, op)(make(xp, host, dtype), keepdims=False)
    with np.errstate(over="ignore"):
        rounded = np.asarray(want).astype(np_dtype(dtype)).astype(np.float64)
    got = float(to_numpy(result).astype(np.float64))
    assert result.dtype == make(xp, host, dtype).dtype
    if math.isnan(rounded):
        assert math.isnan(got)
        return
    assert math.copysign(1.0, got) == math.copysign(1.0, rounded), (got, rounded)
    assert got == pytest.approx(float(rounded), rel=2.0**-20 if dtype != "float16" else 2.0**-9)


# float16 and bfloat16 totals are rounded once, from the accumulator (spec §2): a float64
# total just above a tie of the narrow type, which rounding it to float32 first would make
# an exact tie, rounded to even. Each case: the data, then the result from a float64 and
# from a float32 accumulator (JAX without x64 has no float64).
ROUNDED_ONCE_CASES = [
    ("float16", [1.0, 2.0**-11, 2.0**-24], 1.0 + 2.0**-10, 1.0),
    ("bfloat16", [1.0, 2.0**-8, 2.0**-30], 1.0 + 2.0**-7, 1.0),
]


@pytest.mark.parametrize("backend", BOTH_PATHS, ids=str, indirect=True)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_l1"])
@pytest.mark.parametrize(
    ("dtype", "data", "wide", "narrow"), ROUNDED_ONCE_CASES, ids=["float16", "bfloat16"]
)
def test_half_totals_are_rounded_once(
    xp: Any, backend: Any, op: str, dtype: str, data: list[float], wide: float, narrow: float
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    host = np.asarray(data, dtype=np_dtype(dtype))
    want = wide if backend.has("float64") else narrow
    result = getattr(anyreduce, op)(make(xp, host, dtype), keepdims=False)
    got = to_numpy(result).reshape(())
    assert float(got) == want, (float(got), want)


# Partial products that are subnormal and not zero lose precision, and larger factors
# after them carry the loss into a normal result: the contract forbids it (spec §3), and
# no cheap test finds it yet (docs/semantics.md). XLA on the CPU flushes such a partial
# product to zero, which the kernel's test for a vanished product finds.
GRADUAL_UNDERFLOW_CASES = [
    ("float32", [1e-30, 1e-10, 1e30]),
    ("float64", [1e-300, 1e-20, 1e300]),
]


@pytest.mark.parametrize("backend", BOTH_PATHS, ids=str, indirect=True)
@pytest.mark.parametrize(("dtype", "data"), GRADUAL_UNDERFLOW_CASES, ids=str)
def test_products_whose_partial_products_are_subnormal(
    xp: Any, backend: Any, dtype: str, data: list[float], request: pytest.FixtureRequest
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    if not backend.name.startswith("jax"):
        reason = (
            "a subnormal partial product loses precision, and the careful product is "
            "taken only where the plain one is 0, inf or NaN (docs/semantics.md)"
        )
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    host = np.asarray(data, dtype=np_dtype(dtype))
    result = anyreduce.reduce_prod(make(xp, host, dtype), keepdims=False)
    want = exact("ReduceProd", host, (0,), False)
    got = to_numpy(result).reshape(())
    comparison = compare("ReduceProd", got, want)
    assert comparison.agrees, comparison.why


def test_subnormal_l2_is_zero_or_right_never_nan_without_x64() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    with jax.enable_x64(False):
        for value, dtype in ((1e-40, jnp.float32), (2.9e-39, jnp.bfloat16)):
            got = float(anyreduce.reduce_l2(jnp.asarray([value], dtype=dtype))[0])
            # XLA's CPU code flushes subnormal inputs to zero: 0 is the documented answer.
            assert got == 0.0 or got == pytest.approx(value, rel=2.0**-7), got


SUBNORMAL_PRODUCTS = [
    [1e-40, 2.0, 3.0],
    [-1e-40, -1.3, 0.5],
    [-1e-40, 1.3, 0.5],
    [1e-40, 1e30, 1e30],
    [1e-39, 1e20, 1e20, 1e-5],
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("row", SUBNORMAL_PRODUCTS, ids=str)
def test_products_of_subnormal_values_are_right_or_read_as_zero(
    xp: Any, backend: Any, dtype: str, row: list[float]
) -> None:
    """The product, or (XLA on the CPU, which reads subnormal inputs as zero) a zero of
    the product's sign; never NaN. bfloat16 in float32 (JAX without x64) gave NaN."""
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    host = np.asarray(row, dtype=np_dtype(dtype))
    got = float(to_numpy(anyreduce.reduce_prod(make(xp, host, dtype), keepdims=False)))
    want = math.prod(float(v) for v in host)
    read_as_zero = got == 0.0 and math.copysign(1, got) == math.copysign(1, want)
    assert got == pytest.approx(want, rel=2.0**-6) or (
        backend.name in {"jax", "jax32"} and read_as_zero
    ), got


# Integer LogSumExp is its maximum plus log(sum exp(x - max)), truncated toward zero and
# saturated. The maximum keeps every bit: a float32 step (JAX without 64-bit types) lost
# the last 7 or 8 of int32 and uint32 (off by up to 128).
INTEGER_LOG_SUM_EXP_CASES = [
    ("int32", [2**30 + 5, 2**30 + 3, -(2**31)], 2**30 + 5),
    ("int32", [2**31 - 1, 2**31 - 1], 2**31 - 1),
    ("int32", [2**31 - 2] * 8, 2**31 - 1),  # + log 8 = 2.08: saturated
    ("int32", [-(2**31), -(2**31) + 1], -(2**31) + 2),  # -2147483646.69 toward zero
    ("int32", [-5, -5, -5], -3),  # -5 + log 3 = -3.90
    ("int32", [7] * 11, 9),  # 7 + log 11 = 9.40
    ("int32", [1_999_999_937, -1_999_999_937, 1_999_999_930], 1_999_999_937),
    ("int32", [5], 5),
    ("uint32", [2**32 - 1, 0], 2**32 - 1),
    ("uint32", [4_000_000_000, 3_999_999_999, 3_999_999_997], 4_000_000_000),
    ("uint32", [3_000_000_001, 3_000_000_001, 3_000_000_001], 3_000_000_002),
    ("int16", [32767, 32767], 32767),
    ("int8", [-128, -128, -128, -128], -126),  # -128 + log 4 = -126.6
]


@pytest.mark.parametrize(("dtype", "data", "want"), INTEGER_LOG_SUM_EXP_CASES, ids=str)
def test_integer_log_sum_exp_keeps_every_bit(
    xp: Any, backend: Any, dtype: str, data: list[int], want: int
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    result = anyreduce.reduce_log_sum_exp(make(xp, np.asarray(data, dtype), dtype), keepdims=False)
    assert int(to_numpy(result)) == want


INTEGER_L2_CASES = [
    ("int32", [2**30, 2**30, 5], 1518500249),
    ("uint32", [3_000_000_001, 1, 7], 3_000_000_001),
    ("int32", [46341, 46341], 65536),  # sqrt(2) * 46341 = 65536.08
]


@pytest.mark.parametrize(("dtype", "data", "want"), INTEGER_L2_CASES, ids=str)
def test_integer_l2_is_the_root_of_the_exact_sum_of_squares(
    request: pytest.FixtureRequest, xp: Any, backend: Any, dtype: str, data: list[int], want: int
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    if backend.name == "jax32" and want > 2**24:
        reason = (
            "JAX without 64-bit types has no float64 and no integer beyond 32 bits: the "
            "sum of squares is taken in float32 (docs/accuracy.md)"
        )
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    result = anyreduce.reduce_l2(make(xp, np.asarray(data, dtype), dtype), keepdims=False)
    assert int(to_numpy(result)) == want


# --- the same generated data on every backend ----------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_MAGNITUDES = [0.0, 1.0, 3.0, 1e-3, 1e3, 1e20, 1e-20, 3e38, 1e-38, 1e-45, 1e150, 1e300, 1e-300]
_SPECIALS = [math.inf, -math.inf, math.nan, 0.0, -0.0]


@st.composite
def _cases(draw: Any) -> tuple[str, str, np.ndarray, tuple[int, ...]]:
    op = draw(st.sampled_from(OPS))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    rows = draw(st.integers(1, 3))
    cols = draw(st.integers(1, 40))
    scale = st.sampled_from(_MAGNITUDES)
    value = st.one_of(
        st.builds(lambda m, s: s * m, scale, st.sampled_from([-1.0, 1.0])),
        st.sampled_from(_SPECIALS),
        st.integers(-9, 9).map(float),
        st.floats(-1e6, 1e6),
    )
    flat = draw(st.lists(value, min_size=rows * cols, max_size=rows * cols))
    with np.errstate(over="ignore", under="ignore"):
        data = np.asarray(flat, dtype=np.float64).reshape(rows, cols).astype(dtype)
    axes = draw(st.sampled_from([(1,), (0,), (0, 1)]))
    return op, dtype, data, axes


def _classes(values: np.ndarray) -> np.ndarray:
    """Each element as finite (0), +inf (1), -inf (2) or NaN (3)."""
    v = values.astype(np.float64)
    return np.select([np.isnan(v), v == math.inf, v == -math.inf], [3, 1, 2], 0)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_cases())
def test_every_backend_meets_the_exact_oracle_and_classifies_alike(
    case: tuple[str, str, np.ndarray, tuple[int, ...]],
) -> None:
    op, dtype, data, axes = case
    onnx_name = OPERATORS[op].onnx_name
    want = exact(onnx_name, data, axes, True)
    tiny = math.sqrt(float(np.finfo(data.dtype).smallest_normal)) * 2.0**26
    classes: dict[str, np.ndarray] = {}
    for backend in BOTH_PATHS:
        if not backend.has(dtype):
            continue
        try:
            with backend.active() as xp:
                got = to_numpy(getattr(anyreduce, op)(make(xp, data, dtype), list(axes)))
        except pytest.skip.Exception:
            continue
        if backend.name.startswith("jax") and np.any((data != 0) & (np.abs(data) < tiny)):
            # XLA on the CPU flushes subnormal inputs and intermediate results (a square,
            # a product) to zero (documented in docs/accuracy.md): data whose squares
            # could be subnormal are judged on the other backends.
            continue
        verdict = compare(onnx_name, got, want)
        assert verdict.agrees, f"{backend}: {op} {dtype} over {axes} of {data!r}: {verdict.why}"
        classes[str(backend)] = _classes(got)
    first = next(iter(classes.values()))
    for name, seen in classes.items():
        np.testing.assert_array_equal(seen, first, err_msg=name)


# --- gradients ----------------------------------------------------------------------------


def test_log_sum_exp_gradient_over_an_all_minus_inf_slice_is_zero() -> None:
    torch = pytest.importorskip("torch")
    x = torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]], requires_grad=True)
    anyreduce.reduce_log_sum_exp(x, 1, keepdims=False)[1].backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    x.grad = None
    anyreduce.reduce_log_sum_exp(x, 1, keepdims=False).sum().backward()
    expected = torch.tensor([[1 / (1 + math.e), math.e / (1 + math.e)], [0.0, 0.0]])
    torch.testing.assert_close(x.grad, expected)


def test_log_sum_exp_gradient_over_an_all_minus_inf_slice_is_zero_in_jax() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = jnp.asarray([[0.0, 1.0], [-jnp.inf, -jnp.inf]])
    for transform in (lambda f: f, jax.jit):
        grad = transform(jax.grad(lambda v: anyreduce.reduce_log_sum_exp(v, 1).sum()))(x)
        assert np.all(np.isfinite(np.asarray(grad)))
        np.testing.assert_array_equal(np.asarray(grad)[1], [0.0, 0.0])


def test_l2_second_derivative_at_zero_is_one_finite_answer_in_every_mode() -> None:
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def norm(v: Any) -> Any:
        return anyreduce.reduce_l2(v, keepdims=False)

    x = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(norm(x), x, create_graph=True)
    second = torch.stack([torch.autograd.grad(g[i], x, retain_graph=True)[0] for i in range(3)])
    with warnings.catch_warnings():
        # torch.func's forward mode loads decompositions through torch.jit (deprecated).
        warnings.simplefilter("ignore", DeprecationWarning)
        hessian = torch.func.hessian(norm)(torch.zeros(3, dtype=torch.float64))
    with jax.enable_x64(True):
        jax_hessian = np.asarray(jax.jacrev(jax.jacrev(norm))(jnp.zeros(3, dtype=jnp.float64)))
    for h in (second.detach().numpy(), hessian.numpy(), jax_hessian):
        assert np.all(np.isfinite(h)), h
    np.testing.assert_array_equal(second.detach().numpy(), hessian.numpy())
    np.testing.assert_array_equal(hessian.numpy(), jax_hessian)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("shape", "axes"), [((0, 3), None), ((2, 0), [1]), ((0,), [0])])
def test_an_empty_batch_still_differentiates(op: str, shape: tuple[int, ...], axes: Any) -> None:
    torch = pytest.importorskip("torch")
    x = torch.zeros(shape, requires_grad=True)
    result = getattr(anyreduce, op)(x, axes)
    assert result.grad_fn is not None, "no grad_fn: backward() on an empty batch fails"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sums of NaN identities (the mean) are as intended
        result.sum().backward()
    assert x.grad is not None
    assert x.grad.shape == x.shape


# --- Dask: no warning when the graph is computed --------------------------------------------

_DASK_CASES = [
    ("reduce_prod", "float32", [8.0] * 99 + [0.0]),
    ("reduce_prod", "float64", [1e300, 1e300, 1e-300, 1e-300, 7.0]),
    ("reduce_l2", "float32", [3e38, 3e38]),
    ("reduce_l2", "float64", [1e200, 1e200]),
    ("reduce_sum_square", "float32", [3e38, 3e38]),
    ("reduce_log_sum", "float64", [0.0, 0.0]),
    ("reduce_log_sum_exp", "float64", [-math.inf, -math.inf]),
    ("reduce_mean", "float64", [math.inf, -math.inf]),
    ("reduce_sum", "float32", [3e38, 3e38, -3e38]),
]


@pytest.mark.parametrize(("op", "dtype", "data"), _DASK_CASES, ids=map(_ids, _DASK_CASES))
def test_dask_graphs_compute_without_warnings(op: str, dtype: str, data: list[float]) -> None:
    da = pytest.importorskip("dask.array")
    host = np.asarray(data, dtype=dtype)
    lazy = getattr(anyreduce, op)(da.from_array(host, chunks=2), keepdims=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = lazy.compute(scheduler="threads")
    with np.errstate(all="ignore"):
        want = getattr(anyreduce, op)(host, keepdims=False)
    np.testing.assert_array_equal(np.asarray(got), want)
