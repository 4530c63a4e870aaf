"""One-pass kernels: sums of squares through fused dot products, and L2 computed in the
data's own dtype with only the slices that over- or underflowed computed again."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce._lib import _backends
from anyreduce._lib._blocks import square_sum
from backends import assert_result, backend_of, make, np_dtype

# Rows of every kind the range check must tell apart: plain, overflowing squares,
# underflowing squares, all zero, one huge among small, inf, NaN, subnormal.
_ROWS = [
    [1.0, -2.0, 3.0, 0.5],
    [1e20, -1e20, 3e19, 0.0],
    [1e-30, 1e-30, -2e-30, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [1e19, 1e-30, 1.0, -2.0],
    [1.0, float("inf"), 2.0, 3.0],
    [1.0, float("nan"), 2.0, 3.0],
]
_ROWS64 = [[v * 1e180 if abs(v) >= 1e19 else v for v in row] for row in _ROWS] + [
    [1e-200, -1e-200, 0.0, 3e-200]
]


def _data(dtype: str) -> np.ndarray:
    rows = _ROWS64 if dtype == "float64" else _ROWS
    base = np.array(rows, dtype=dtype)
    # (rows, 3, 4): each row of values repeated along a middle axis.
    return np.repeat(base[:, None, :], 3, axis=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [[2], [1, 2], [0], [0, 2], None, []], ids=str)
def test_l2_in_the_data_dtype_recomputes_what_overflowed_or_underflowed(
    xp: Any, dtype_available: Any, dtype: str, axes: list[int] | None
) -> None:
    dtype_available(dtype)
    values = _data(dtype)
    data = make(xp, values, dtype)
    noop = axes == []
    result = anyreduce.reduce_l2(data, axes, keepdims=False, noop_with_empty_axes=noop)
    expected = reference.reduce(
        "reduce_l2", values, axes, keepdims=False, noop_with_empty_axes=noop
    )
    kept = tuple(
        n for i, n in enumerate(values.shape) if axes is not None and axes and i not in axes
    )
    shape = values.shape if axes == [] else kept
    assert_result(result, xp, dtype, shape, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_l2_of_subnormal_values(
    xp: Any, dtype_available: Any, dtype: str, request: pytest.FixtureRequest
) -> None:
    dtype_available(dtype)
    if backend_of(xp) in ("jax", "jax32"):
        reason = "XLA on the CPU reads subnormal inputs as zero: jnp.sum of [1e-40] is 0"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    tiny = float(np.finfo(dtype).smallest_subnormal)
    values = np.array([[3 * tiny, 0.0, -4 * tiny], [1.0, 2.0, 2.0]], dtype=dtype)
    result = anyreduce.reduce_l2(make(xp, values, dtype), [1], keepdims=False)
    assert_result(result, xp, dtype, (2,), [5 * tiny, 3.0])


def test_only_suspect_slices_are_recomputed(monkeypatch: pytest.MonkeyPatch) -> None:
    import array_api_compat.numpy as xp

    from anyreduce._lib import _ops

    seen: list[tuple[int, ...]] = []
    safe = _ops._l2_safe

    def spy(y: Any, axes: Any, keepdims: bool, **kw: Any) -> Any:
        seen.append(tuple(y.shape))
        return safe(y, axes, keepdims, **kw)

    monkeypatch.setattr(_ops, "_l2_safe", spy)
    values = np.random.default_rng(0).standard_normal((1000, 64)).astype(np.float32)
    values[[3, 500], 7] = 1e25  # two rows overflow in float32
    values[900] = 0.0  # one row is zero
    result = anyreduce.reduce_l2(values, [1], keepdims=False)
    assert seen == [(3, 64)]
    want = np.sqrt(np.sum(values.astype(np.float64) ** 2, axis=1)).astype(np.float32)
    np.testing.assert_allclose(result, want, rtol=2e-7)
    seen.clear()
    anyreduce.reduce_l2(np.ones((1000, 64), np.float32), [1])
    assert seen == []  # nothing suspect: one pass only
    assert xp is not None


def test_torch_eager_and_traced_paths_agree() -> None:
    torch = pytest.importorskip("torch")
    values = _data("float32")
    eager = anyreduce.reduce_l2(torch.from_numpy(values), [2], keepdims=False)
    leaf = torch.from_numpy(values).requires_grad_(True)
    tracked = anyreduce.reduce_l2(leaf, [2], keepdims=False)
    torch.testing.assert_close(eager, tracked.detach(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((3, 300), (1,)),
        ((3, 300), (0, 1)),
        ((5, 4, 130), (1, 2)),
        ((5, 4, 130), (2,)),
        ((5, 4, 130), (0, 2)),
        ((2, 3, 128), (0, 1, 2)),
        ((7, 133), (1,)),  # one dot block and a tail
        ((37, 40), (0,)),  # leading axes: groups of 16 rows and a tail
        ((20, 3, 35), (0, 1)),
        ((33, 2, 20), (0,)),
        ((9, 33), (0,)),  # fewer rows than one group
    ],
    ids=str,
)
@pytest.mark.parametrize("keepdims", [True, False])
def test_fused_square_sum_matches_the_oracle(
    shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
) -> None:
    import array_api_compat.numpy as xp

    values = np.random.default_rng(3).uniform(-2, 2, shape).astype(np.float32)
    got = square_sum(xp, values, axes, keepdims, xp.float32)
    assert got is not None
    expected = reference.reduce("reduce_sum_square", values, list(axes), keepdims=keepdims)
    assert got.dtype == np.float32
    assert got.shape == np.asarray(expected).shape
    np.testing.assert_allclose(got, np.asarray(expected, dtype=np.float64), rtol=4e-7)


def test_fused_square_sum_applies_only_to_views_of_reduced_trailing_axes() -> None:
    import array_api_compat.numpy as xp

    values = np.ones((130, 130), dtype=np.float32)
    assert square_sum(xp, values, (1,), False, xp.float32) is not None
    # Rows shorter than one dot: NumPy's vecdot loops once per row, so the squares are
    # written block by block and summed by one BLAS dot per row instead (map_sum).
    assert square_sum(xp, np.ones((6, 8), np.float32), (1,), False, xp.float32) is None
    # Leading axes of rows narrower than 32: einsum's groups loop once per row, so again.
    assert square_sum(xp, np.ones((40, 31), np.float32), (0,), False, xp.float32) is None
    swapped = np.ones((2, 3, 4), np.float32).transpose(1, 0, 2)
    assert square_sum(xp, swapped, (0, 1), False, xp.float32) is None  # rows would copy
    assert square_sum(xp, np.ones((2, 3, 4), np.float32), (1,), False, xp.float32) is None
    assert square_sum(xp, values.T, (0, 1), False, xp.float32) is None  # would copy
    assert square_sum(xp, values, (1,), False, xp.float64) is None  # needs a cast
    assert square_sum(xp, values.T, (1,), False, xp.float32) is not None  # rows are views
    assert _backends.fused_squares(xp) == "vecdot"
    torch_xp = pytest.importorskip("array_api_compat.torch")
    assert _backends.fused_squares(torch_xp) == "vector_norm"
    assert _backends.fused_squares(pytest.importorskip("jax.numpy")) is None


def test_fused_square_sum_keeps_its_accuracy_over_long_rows(xp: Any) -> None:
    # 10**5 values of 0.1: a dot product of them all is off by ~140 eps * M (OpenBLAS).
    if backend_of(xp) not in ("numpy", "torch", "jax", "jax32"):
        pytest.skip("the one-pass kernels are for numpy, torch and jax")
    values = np.full((2, 100_000), 0.1, dtype=np.float32)
    data = make(xp, values, "float32")
    total = float(reference.reduce("reduce_sum_square", values[:1], [1], keepdims=False)[0])
    got = np.asarray(anyreduce.reduce_sum_square(data, [1], keepdims=False), dtype=np.float64)
    assert np.all(np.abs(got - total) <= 8 * np.finfo(np.float32).eps * total)
    got_l2 = np.asarray(anyreduce.reduce_l2(data, [1], keepdims=False), dtype=np.float64)
    assert np.all(np.abs(got_l2**2 - total) <= 10 * np.finfo(np.float32).eps * total)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((3, 1000), [1]),
        ((3, 1000), None),
        ((4, 5, 300), [2]),
        ((4, 5, 300), [1, 2]),
        ((4, 5, 300), [0, 2]),
        ((4, 5, 6, 50), [0, 1]),
        ((4, 5, 6, 50), [0, 2, 3]),
        ((2, 512), [1]),  # rows of 256 exactly, no tail
        ((3, 300), [0]),  # last axis kept: the backend's own product
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_products_over_long_axes_match_the_oracle(
    xp: Any, dtype_available: Any, shape: tuple[int, ...], axes: list[int] | None, dtype: str
) -> None:
    # Long enough for NumPy's rows of 256 (and JAX's staged product over every axis).
    dtype_available(dtype)
    rng = np.random.default_rng(11)
    if dtype.startswith("int"):
        values = rng.integers(-3, 4, shape).astype(dtype)  # the product wraps
    else:
        values = (1 + rng.uniform(-0.01, 0.01, shape)).astype(dtype)
        values.flat[7] = -values.flat[7]
    for data in (make(xp, values, dtype), make(xp, values.T.copy(), dtype)):
        source = values if data.shape == values.shape else values.T
        kept = (
            axes
            if data.shape == values.shape or axes is None
            else [source.ndim - 1 - a for a in axes]
        )
        result = anyreduce.reduce_prod(data, kept, keepdims=True)
        expected = reference.reduce("reduce_prod", source, kept, keepdims=True)
        out_shape = tuple(1 if kept is None or i in kept else n for i, n in enumerate(source.shape))
        n = source.size if kept is None else math.prod(source.shape[a] for a in kept)
        rtol = n * float(np.finfo(dtype).eps) if dtype.startswith("float") else None
        assert_result(result, xp, dtype, out_shape, expected, rtol=rtol)


def test_torch_products_any_and_all_over_several_axes_take_one_axis_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # torch.prod takes one dim; array-api-compat moves a tuple of dims to the end and
    # flattens them, a copy: float32 (64, 32, 16384) took 74-196 ms, one axis after the
    # other 4.6-9 ms.
    torch = pytest.importorskip("torch")
    moved: list[Any] = []
    movedim = torch.movedim

    def spy(*args: Any, **kwargs: Any) -> Any:
        moved.append(args[1:])
        return movedim(*args, **kwargs)

    monkeypatch.setattr(torch, "movedim", spy)
    values = 1 + 0.01 * torch.randn(4, 5, 6, 50)
    for axes in ([0, 2, 3], [0, 1], [1, 3]):
        got = anyreduce.reduce_prod(values, axes, keepdims=False)
        want = values.double()
        for a in reversed(axes):
            want = want.prod(a)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4)
    flags = values > 1.01
    for axes in ([0, 2, 3], [1, 3]):
        axis = tuple(axes)
        got_any = anyreduce.reduce_max(flags, axes, keepdims=True)
        got_all = anyreduce.reduce_min(flags, axes, keepdims=True)
        np.testing.assert_array_equal(got_any.numpy(), flags.numpy().any(axis, keepdims=True))
        np.testing.assert_array_equal(got_all.numpy(), flags.numpy().all(axis, keepdims=True))
    assert moved == []


def test_jax_products_over_several_axes_differentiate_and_batch() -> None:
    # Merged axes and one axis at a time, behind optimisation barriers, on JAX.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.asarray(1 + 0.01 * np.random.default_rng(47).standard_normal((3, 4, 5, 6)), jnp.float32)
    for axes in ([0, 1], [1, 2], [0, 2], [1, 3]):
        axis = tuple(axes)
        got = jax.grad(lambda v, a=axes: jnp.sum(anyreduce.reduce_prod(v, a)))(x)
        want = jax.grad(lambda v, a=axis: jnp.sum(jnp.prod(v, axis=a)))(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    for axes in ([0, 1], [1, 2], [0, 2]):
        batched = jax.vmap(lambda v, a=axes: anyreduce.reduce_prod(v, a, keepdims=False))(x)
        each = [np.asarray(anyreduce.reduce_prod(x[i], axes, keepdims=False)) for i in range(3)]
        np.testing.assert_allclose(np.asarray(batched), np.stack(each), rtol=1e-6)


def test_products_keep_nan_inf_and_signed_zero() -> None:
    values = np.ones((2, 1024), dtype=np.float32)
    values[0, 5], values[0, 900] = np.inf, 0.0  # inf * 0: NaN
    values[1, 3], values[1, 1000] = -0.0, 2.0  # -0: the product is -0
    got = anyreduce.reduce_prod(values, [1], keepdims=False)
    assert np.isnan(got[0])
    assert got[1] == 0
    assert np.signbit(got[1])


@pytest.mark.parametrize("axes", [[1], [0], None], ids=str)
def test_l2_recomputes_suspect_slices_of_large_data(xp: Any, axes: list[int] | None) -> None:
    # More elements than JAX selects between both forms for: its lax.cond path.
    values = np.random.default_rng(5).standard_normal((260, 256)).astype(np.float32)
    values[3, 10] = 3e25  # overflows in float32
    values[7] = 0.0
    values[11] = 1e-30  # every square underflows
    result = anyreduce.reduce_l2(make(xp, values, "float32"), axes, keepdims=False)
    expected = reference.reduce("reduce_l2", values, axes, keepdims=False)
    shape = () if axes is None else tuple(n for i, n in enumerate(values.shape) if i not in axes)
    assert_result(result, xp, "float32", shape, expected)


def _masked_logits(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Logits of every range LogSumExp meets: normal, far below the maximum, -1e9, -inf."""
    rng = np.random.default_rng(17)
    values = rng.standard_normal(shape)
    values[rng.random(shape) < 0.4] = -1e9  # masked entries
    values[..., 1::7] = rng.uniform(-800.0, -60.0, values[..., 1::7].shape)  # exp underflows
    values[..., 3] = -np.inf
    values[0] = -np.inf  # a whole slice of -inf
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 40), (80, 4096)], ids=str)
@pytest.mark.parametrize("axes", [[1], [0], None], ids=str)
def test_log_sum_exp_of_masked_and_far_apart_values(
    xp: Any, dtype_available: Any, dtype: str, shape: tuple[int, ...], axes: list[int] | None
) -> None:
    # (80, 4096) is larger than one NumPy block: the scratch-buffer path.
    dtype_available(dtype)
    values = _masked_logits(shape, dtype)
    result = anyreduce.reduce_log_sum_exp(make(xp, values, dtype), axes, keepdims=False)
    expected = reference.reduce("reduce_log_sum_exp", values, axes, keepdims=False)
    out = () if axes is None else tuple(n for i, n in enumerate(shape) if i not in axes)
    # The contract bounds the shifted sum S within 8 eps S, so log S within 8 eps absolute:
    # relative to a result near 0 that is more than the default tolerance.
    atol = 8 * float(np.finfo(dtype).eps)
    assert_result(result, xp, dtype, out, expected, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
# One block (the functional form), and several (the scratch buffer); not the small-input
# path, which takes np.logaddexp.
@pytest.mark.parametrize("shape", [(64, 128), (80, 4096)], ids=str)
def test_numpy_exp2_is_never_asked_for_a_subnormal_or_zero(
    monkeypatch: pytest.MonkeyPatch, dtype: str, shape: tuple[int, ...]
) -> None:
    # NumPy's exp2 leaves its vectorised loop for such results and is 10-100x slower
    # (see _backends._exp2_is_fast); its exp is not. Every exponent it is given must
    # give a normal number.
    lowest: list[float] = []
    exp2 = np.exp2

    def spy(x: Any, *args: Any, **kwargs: Any) -> Any:
        lowest.append(float(np.min(x)) if np.size(x) else math.inf)
        return exp2(x, *args, **kwargs)

    monkeypatch.setattr(np, "exp2", spy)
    # exp2 is taken only where NumPy vectorises it (AVX-512); pretend it does here.
    monkeypatch.setattr(_backends, "_numpy_exp2_is_vectorised", lambda: True)
    floor = math.log2(float(np.finfo(dtype).smallest_normal))
    for values in (_masked_logits(shape, dtype), np.linspace(-3, 3, math.prod(shape))):
        data = values.astype(dtype).reshape(shape)
        for axes in ([1], [0], None):
            got = anyreduce.reduce_log_sum_exp(data, axes, keepdims=False)
            want = reference.reduce("reduce_log_sum_exp", data, axes, keepdims=False)
            eps = float(np.finfo(dtype).eps)
            np.testing.assert_allclose(got, want.astype(dtype), rtol=4 * eps, atol=8 * eps)
    assert all(low >= floor for low in lowest), (min(lowest), floor)
    assert lowest, "exp2 is still used where it is fast"


@pytest.mark.parametrize("shape", [(64, 128), (80, 4096)], ids=str)
def test_numpy_takes_exp_where_its_exp2_is_not_vectorised(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...]
) -> None:
    # Without AVX-512 NumPy's exp2 runs scalar code slower than its exp (2.5 against
    # 1.9 ns a float32 value): LogSumExp takes exp, and no pass over the differences.
    calls: list[str] = []
    exp2 = np.exp2

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append("exp2")
        return exp2(*args, **kwargs)

    monkeypatch.setattr(np, "exp2", spy)
    monkeypatch.setattr(_backends, "_numpy_exp2_is_vectorised", lambda: False)
    data = np.linspace(-3, 3, math.prod(shape)).astype(np.float32).reshape(shape)
    for axes in ([1], [0], None):
        got = anyreduce.reduce_log_sum_exp(data, axes, keepdims=False)
        want = reference.reduce("reduce_log_sum_exp", data, axes, keepdims=False)
        eps = float(np.finfo(np.float32).eps)
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=4 * eps, atol=8 * eps)
    assert "exp2" not in calls


def test_numpy_exp2_is_vectorised_reads_the_cpu_features() -> None:
    from numpy._core._multiarray_umath import __cpu_features__

    assert _backends._numpy_exp2_is_vectorised() == bool(__cpu_features__["AVX512_SKX"])


_WIDENED_OPS = ["reduce_sum", "reduce_mean", "reduce_log_sum", "reduce_prod", "reduce_log_sum_exp"]
_WIDENED_CASES = [(op, "float16") for op in _WIDENED_OPS] + [
    ("reduce_sum", "bfloat16"),
    ("reduce_log_sum_exp", "bfloat16"),
]
_WIDENED_EXPECTED: dict[tuple[str, str, str], np.ndarray] = {}


def _half_values(op: str) -> np.ndarray:
    # 1,049,544 elements: more than 2**20, where PyTorch widens block by block.
    rng = np.random.default_rng(23)
    shape = (129, 9, 904)
    if op == "reduce_prod":
        return 1 + rng.uniform(-1e-3, 1e-3, shape)
    values = rng.uniform(0.0, 4.0, shape)
    values[:, 0, :7] = [60000.0, 0.001, -60000.0, 1e-4, 3.0, -1e-4, 2.5]  # cancellation
    return values


@pytest.mark.parametrize(("op", "dtype"), _WIDENED_CASES)
@pytest.mark.parametrize("axes", [[2], [0], None], ids=str)
def test_half_precision_over_large_data_accumulates_in_float64(
    xp: Any, dtype_available: Any, op: str, dtype: str, axes: list[int] | None
) -> None:
    # No float64 copy of the whole input, and the same correctly rounded results as for
    # small data.
    dtype_available(dtype)
    values = _half_values(op)
    data = make(xp, values, dtype)
    key = (op, dtype, str(axes))
    if key not in _WIDENED_EXPECTED:
        exact = values.astype(np_dtype(dtype)).astype(np.float64)
        _WIDENED_EXPECTED[key] = reference.reduce(op, exact, axes, keepdims=False)
    result = getattr(anyreduce, op)(data, axes, keepdims=False)
    out = () if axes is None else tuple(n for i, n in enumerate(values.shape) if i not in axes)
    assert_result(result, xp, dtype, out, _WIDENED_EXPECTED[key])


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_half_reductions_hold_no_float64_copy_of_the_input(backend: str) -> None:
    from anyreduce._bench._memory import peak_extra_bytes

    host = np.random.default_rng(3).uniform(0, 1, (2048, 4096)).astype(np.float16)
    x = pytest.importorskip("torch").from_numpy(host) if backend == "torch" else host
    for op in _WIDENED_OPS:
        for axes in ([1], [0], None):
            call = functools.partial(getattr(anyreduce, op), x, axes)
            call()  # lazy imports and caches of a first call are not the data's temporaries
            extra = peak_extra_bytes(backend, call)
            # A float64 copy of the input would be 4x its size; blocks and partial sums
            # (NumPy's blocked sum over axis 0 keeps a float64 row per 16) hold at most an
            # eighth of that.
            assert extra is not None
            assert extra <= x.nbytes // 2, (op, axes, extra, x.nbytes)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("axes", [[1], [0], [0, 1], None], ids=str)
def test_half_maxima_and_minima_of_large_data(
    xp: Any, dtype_available: Any, op: str, axes: list[int] | None
) -> None:
    # NumPy takes them in float64 (its float16 loop is not vectorised); exact either way,
    # NaN propagating, infinities kept.
    dtype_available("float16")
    values = np.random.default_rng(29).uniform(-100.0, 100.0, (300, 70))
    values[3, :] = np.inf
    values[5, 7] = -np.inf
    values[11, 13] = np.nan
    values[:, 17] = 65504.0  # float16's largest
    data = make(xp, values, "float16")
    exact = values.astype(np.float16).astype(np.float64)
    expected = reference.reduce(op, exact, axes, keepdims=True)
    result = getattr(anyreduce, op)(data, axes, keepdims=True)
    shape = tuple(1 if axes is None or i in axes else n for i, n in enumerate(values.shape))
    assert_result(result, xp, "float16", shape, expected)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [[1], [0], [0, 1], [1, 2], [0, 2], None], ids=str)
def test_max_and_min_propagate_nan_in_large_data(
    xp: Any, dtype_available: Any, op: str, dtype: str, axes: list[int] | None
) -> None:
    # XLA on the CPU drops NaN in its vectorised max and min reductions (jnp.max of
    # float32 (300, 70) holding one NaN is finite; openxla/xla#21461); the contract says
    # NaN propagates.
    dtype_available(dtype)
    rng = np.random.default_rng(31)
    values = rng.uniform(-100.0, 100.0, (40, 30, 64))
    values[3, 4, 5] = np.nan
    values[7, :, 9] = np.nan
    values[9, 2, :] = np.inf
    values[12, 0, 0] = -np.inf
    data = make(xp, values, dtype)
    expected = reference.reduce(op, values.astype(dtype).astype(np.float64), axes, keepdims=True)
    result = getattr(anyreduce, op)(data, axes, keepdims=True)
    shape = tuple(1 if axes is None or i in axes else n for i, n in enumerate(values.shape))
    assert_result(result, xp, dtype, shape, expected)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((6, 5, 40, 8), [0, 1]),
        ((6, 5, 40, 8), [1, 2, 3]),
        ((6, 5, 40, 8), [0, 1, 3]),
        ((6, 5, 40, 8), [0, 2]),
        ((6, 5, 40, 8), None),
        ((6, 1, 40, 8), [0, 1, 2]),
        ((6, 1, 40, 8), [1]),
        ((3, 7, 11), None),
        ((3, 7, 11), [1, 2]),
        ((2, 4096), [1]),
        ((8192,), [0]),
        ((1, 1), None),
    ],
    ids=str,
)
def test_max_and_min_over_merged_axes(
    xp: Any, op: str, shape: tuple[int, ...], axes: list[int] | None
) -> None:
    # JAX merges adjacent reduced axes and splits long reduced runs into rows of eight
    # (XLA's CPU code: float32 (64, 32, 16384) over axes 0 and 1 took 113 ms, over every
    # axis 117 ms); NaN and the infinities must come through wherever they sit.
    rng = np.random.default_rng(41)
    values = rng.uniform(-100.0, 100.0, shape)
    flat = values.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = np.nan
    flat[rng.integers(0, flat.size, 2)] = np.inf
    flat[rng.integers(0, flat.size, 2)] = -np.inf
    for data_values in (values, np.where(np.isnan(values), 0.5, values)):
        data = make(xp, data_values, "float32")
        exact = data_values.astype(np.float32).astype(np.float64)
        expected = reference.reduce(op, exact, axes, keepdims=True)
        result = getattr(anyreduce, op)(data, axes, keepdims=True)
        kept = tuple(1 if axes is None or i in axes else n for i, n in enumerate(shape))
        assert_result(result, xp, "float32", kept, expected)
        dropped = getattr(anyreduce, op)(data, axes, keepdims=False)
        reduced = range(len(shape)) if axes is None else axes
        assert tuple(dropped.shape) == tuple(n for i, n in enumerate(shape) if i not in reduced)


def test_jax_max_and_min_over_merged_axes_under_vmap_and_grad() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    values = np.random.default_rng(43).uniform(-1.0, 1.0, (3, 6, 5, 40))
    values[1, 2, 3, 4] = np.nan
    x = jnp.asarray(values, dtype=jnp.float32)
    for ours, native in ((anyreduce.reduce_max, jnp.max), (anyreduce.reduce_min, jnp.min)):
        for axes in ([0, 1], [1, 2], None):
            got = jax.vmap(lambda v, f=ours, a=axes: f(v, a, keepdims=False))(x)
            want = [ours(x[i], axes, keepdims=False) for i in range(3)]
            np.testing.assert_array_equal(np.asarray(got), np.stack([np.asarray(w) for w in want]))
        clean = jnp.nan_to_num(x[0])
        for axes in ([0, 1], [1, 2], None):
            axis = None if axes is None else tuple(axes)
            got = jax.grad(lambda v, f=ours, a=axes: jnp.sum(f(v, a)))(clean)
            want = jax.grad(lambda v, f=native, a=axis: jnp.sum(f(v, axis=a, keepdims=True)))(clean)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("op", ["reduce_max", "reduce_prod"])
def test_jax_reduces_merged_axes_of_a_view_behind_a_barrier(op: str) -> None:
    # Left to itself XLA folds the reshape back into a reduction over several axes, which
    # its CPU code runs slowly (see _backends._nan_propagating, prod_staged_by_axis).
    jax = pytest.importorskip("jax")
    x = jax.numpy.zeros((6, 5, 40, 8), jax.numpy.float32)
    text = str(jax.make_jaxpr(lambda v: getattr(anyreduce, op)(v, [0, 1]))(x))
    assert "f32[30,320] = optimization_barrier" in text


def test_jax_max_and_min_keep_their_gradients() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.asarray(np.random.default_rng(37).uniform(-1.0, 1.0, (40, 300)), dtype=jnp.float32)
    for ours, native in ((anyreduce.reduce_max, jnp.max), (anyreduce.reduce_min, jnp.min)):
        for axes in ([1], [0], None):
            axis = None if axes is None else tuple(axes)
            got = jax.grad(lambda v, f=ours, a=axes: jnp.sum(f(v, a)))(x)
            want = jax.grad(lambda v, f=native, a=axis: jnp.sum(f(v, axis=a, keepdims=True)))(x)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_log_sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((4096, 8), [0]),
        ((2011, 3, 5), [0]),
        ((37, 61, 9), [0, 1]),
        ((17, 2), [0]),
        ((4100, 300), [0]),  # PyTorch's dots: 2**20 elements or more, rows of 256 or more
        ((41, 100, 2, 150), [0, 1]),
    ],
    ids=str,
)
def test_sums_over_leading_axes_hold_the_bound_and_keep_special_values(
    xp: Any,
    dtype_available: Any,
    op: str,
    dtype: str,
    shape: tuple[int, ...],
    axes: list[int],
) -> None:
    # NumPy, JAX on the CPU and PyTorch (large data) sum leading axes as products with a
    # vector of ones, 16 rows at a time (_backends.leading_sum); constant data is the
    # worst case for such short sequential sums, and inf and NaN must come through as in
    # the plain sum.
    dtype_available(dtype)
    values = np.full(shape, 0.1, dtype=dtype)
    flat = values.reshape(math.prod(shape[: len(axes)]), -1)
    flat[5, 0] = np.inf
    flat[:, 1] = 0.0
    flat[7, 1] = np.nan
    if flat.shape[1] > 2:
        flat[3, 2] = -np.inf
    expected = reference.reduce(op, values.astype(np.float64), axes, keepdims=False)
    result = getattr(anyreduce, op)(make(xp, values, dtype), axes, keepdims=False)
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    # 8 * eps * M (the accuracy contract; M is the sum itself here), plus the final
    # division or log.
    eps = float(np.finfo(dtype).eps)
    assert_result(result, xp, dtype, kept, expected, rtol=10 * eps)


def test_jax_leading_sums_are_dot_products_that_differentiate_and_batch() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    if jax.default_backend() != "cpu" or jax.device_count() > 1:
        pytest.skip("leading sums through dot products are for XLA's CPU code on one device")
    x = jnp.asarray(np.random.default_rng(41).uniform(-1.0, 1.0, (300, 40)), dtype=jnp.float32)
    text = jax.jit(lambda v: anyreduce.reduce_sum(v, [0])).lower(x).as_text()
    assert "dot_general" in text
    for op in (anyreduce.reduce_sum, anyreduce.reduce_mean):
        got = jax.grad(lambda v, f=op: jnp.sum(f(v, [0]) ** 2))(x)
        want = jax.grad(lambda v, f=op: jnp.sum(f(v, [1]) ** 2))(x.T).T
        # 2 * the column sums, 300 terms of |x| <= 1 each: within 8 * eps * 300 of each other.
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2e-4)
    stacked = jnp.stack([x, 2 * x, -x])
    batched = jax.vmap(lambda v: anyreduce.reduce_sum(v, [0], keepdims=False))(stacked)
    one_by_one = [anyreduce.reduce_sum(v, [0], keepdims=False) for v in stacked]
    np.testing.assert_allclose(np.asarray(batched), np.stack(one_by_one), rtol=0, atol=1e-4)


def _spy_on_matmul(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shapes of the second operand of every ``np.matmul`` call from here on."""
    calls: list[tuple[int, ...]] = []
    matmul = np.matmul

    def spy(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(tuple(np.shape(b)))
        return matmul(a, b, *args, **kwargs)

    monkeypatch.setattr(np, "matmul", spy)
    return calls


def test_numpy_leading_sums_are_blas_dots_and_views_still_sum_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy_on_matmul(monkeypatch)
    host = np.random.default_rng(43).uniform(-1.0, 1.0, (1000, 24)).astype(np.float32)
    exact = host.astype(np.float64).sum(axis=0)
    magnitude = np.abs(host).astype(np.float64).sum(axis=0)
    bound = 8 * np.finfo(np.float32).eps * magnitude
    for op, scale in (("reduce_sum", 1), ("reduce_mean", 1000)):
        calls.clear()
        result = getattr(anyreduce, op)(host, [0], keepdims=False) * scale
        assert np.all(np.abs(result - exact) <= bound + 2 * np.spacing(np.abs(exact)))
        # 1000 rows: 16 slabs of 62 (the 8 left over summed apart), then 16 of 3, then 3.
        assert calls == [(16, 62 * 24), (16, 3 * 24)]
    wide = np.ascontiguousarray(np.concatenate([host, host], axis=1))
    for view in (host.T.T.copy(order="F"), wide[:, ::2], host[::-1]):
        calls.clear()
        result = anyreduce.reduce_sum(view, [0], keepdims=False)
        want = np.asarray(view, dtype=np.float64).sum(axis=0)
        assert np.all(np.abs(result - want) <= bound + 2 * np.spacing(np.abs(want)))
        assert calls == []  # not one matrix without a copy: the blocked sum


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_log_sum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(131_075,), (517, 300), (70, 3, 1001)], ids=str)
def test_sums_over_every_axis_of_large_data_hold_the_bound_and_keep_special_values(
    xp: Any, dtype_available: Any, op: str, dtype: str, shape: tuple[int, ...]
) -> None:
    # NumPy sums every axis of 2**17 elements or more as rows of 1024 added by dots of 16
    # rows (_backends._numpy_flat_sum_kernel); the sizes leave a tail of the last row.
    dtype_available(dtype)
    eps = float(np.finfo(dtype).eps)
    values = np.full(shape, 0.1, dtype=dtype)
    expected = reference.reduce(op, values.astype(np.float64), None, keepdims=False)
    result = getattr(anyreduce, op)(make(xp, values, dtype), None, keepdims=False)
    # 8 * eps * M (the contract; M is the sum itself here), plus the final division or log.
    assert_result(result, xp, dtype, (), expected, rtol=10 * eps)
    flat = values.reshape(-1)
    for specials, want in (([np.inf], np.inf), ([np.inf, -np.inf], np.nan), ([np.nan], np.nan)):
        marked = flat.copy()
        marked[[5, -3][: len(specials)]] = specials
        result = anyreduce.reduce_sum(make(xp, marked.reshape(shape), dtype), None, keepdims=False)
        assert_result(result, xp, dtype, (), np.asarray(want), rtol=0)


def test_numpy_sums_over_every_axis_are_blas_dots_only_for_large_whole_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy_on_matmul(monkeypatch)
    host = np.random.default_rng(47).uniform(-1.0, 1.0, (400, 700)).astype(np.float32)
    exact = host.astype(np.float64).sum()
    bound = 8 * np.finfo(np.float32).eps * np.abs(host).astype(np.float64).sum()
    for op, scale in (("reduce_sum", 1), ("reduce_mean", host.size)):
        calls.clear()
        result = getattr(anyreduce, op)(host, keepdims=False) * scale
        assert abs(float(result) - exact) <= bound
        # 280,000 elements: 273 rows of 1024 (the last 448 summed apart), in 16 slabs of
        # 17 (the last row summed apart), then the 17 slab sums.
        assert calls == [(16, 17 * 1024), (16, 1024)]
    calls.clear()
    anyreduce.reduce_sum(host[:100], keepdims=False)  # 70,000 elements: NumPy's own sum
    for view in (np.asfortranarray(host), host[:, ::2], host[::-1]):
        result = anyreduce.reduce_sum(view, keepdims=False)
        want = np.asarray(view, dtype=np.float64).sum()
        assert abs(float(result) - want) <= bound
    assert calls == []  # not one C-ordered block of memory: NumPy's own (pairwise) sum


@pytest.mark.parametrize(
    "op", ["reduce_l1", "reduce_sum_square", "reduce_l2", "reduce_log_sum_exp"]
)
@pytest.mark.parametrize("axes", [[0], [0, 1]], ids=str)
def test_blocked_sums_over_leading_axes_hold_the_bound(xp: Any, op: str, axes: list[int]) -> None:
    # 560,000 elements: blocked on NumPy and PyTorch, each block's leading rows summed by
    # dots of 16 terms on NumPy (_blocks.BlockTotals); constant data is the worst case.
    values = np.full((2000, 7, 40), -0.1, dtype=np.float32)
    expected = reference.reduce(op, values.astype(np.float64), axes, keepdims=False)
    result = getattr(anyreduce, op)(make(xp, values, "float32"), axes, keepdims=False)
    kept = tuple(n for i, n in enumerate(values.shape) if i not in axes)
    eps = float(np.finfo(np.float32).eps)
    # 8 * eps * M (the contract; M is the value summed here), plus the final root or log.
    assert_result(result, xp, "float32", kept, expected, rtol=10 * eps)


def test_torch_leading_sums_are_dots_only_for_large_wide_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from anyreduce._lib import _backends

    calls: list[tuple[int, ...]] = []
    dots = _backends._column_dots

    def spy(m: Any, rows: Any, dot: Any) -> Any:
        calls.append(tuple(rows.shape))
        return dots(m, rows, dot)

    monkeypatch.setattr(_backends, "_column_dots", spy)
    wide = torch.full((4100, 300), 0.1, dtype=torch.float32)
    for op in (anyreduce.reduce_sum, anyreduce.reduce_mean, anyreduce.reduce_log_sum):
        calls.clear()
        op(wide, [0])
        assert calls[0] == (4100, 300)
    calls.clear()
    anyreduce.reduce_sum(torch.full((20000, 64), 0.1), [0])  # narrow: torch's own sum
    anyreduce.reduce_sum(torch.full((300, 300), 0.1), [0])  # small: torch's own sum
    anyreduce.reduce_sum(wide.T.contiguous().T, [0])  # not contiguous
    anyreduce.reduce_sum(wide.clone().requires_grad_(True), [0])  # autograd: the plain sum
    assert calls == []


def test_l2_reads_its_sums_on_the_host_only_where_they_are_concrete() -> None:
    import array_api_compat.numpy as nxp

    assert _backends.host_values(nxp, np.ones(3))
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as txp

    assert _backends.host_values(txp, torch.ones(3))
    assert not _backends.host_values(txp, torch.ones(3, requires_grad=True))
    jnp = pytest.importorskip("jax.numpy")
    assert not _backends.host_values(jnp, jnp.ones(3))
