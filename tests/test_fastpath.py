"""The backend layer's speed paths: JAX compiles once per signature, NumPy blocks temporaries."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import anyreduce
from anyreduce._lib import _backends
from anyreduce._lib._blocks import map_sum


def _peak_extra(fn, out_bytes: int) -> int:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base - out_bytes


@pytest.mark.parametrize(
    "op", ["reduce_l1", "reduce_sum_square", "reduce_l2", "reduce_log_sum_exp"]
)
@pytest.mark.parametrize("axes", [[1], [0], None], ids=str)
def test_numpy_elementwise_steps_hold_no_full_temporary(
    op: str, axes: list[int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks of 2**14 elements against 2**21 of data: the benchmark's proportions, smaller.
    monkeypatch.setattr(_backends, "block_elements", lambda xp: 2**14)
    x = np.random.default_rng(0).standard_normal((2048, 1024)).astype(np.float32)  # 8 MiB
    fn = getattr(anyreduce, op)
    expected = fn(x[:, :], axes)  # warm-up, and the result's size
    extra = _peak_extra(lambda: fn(x, axes), expected.nbytes)
    assert extra <= x.nbytes // 10, f"{op} over {axes}: {extra} bytes beyond input and output"


@pytest.mark.parametrize("axes", [(1,), (0,), (0, 1), (1, 2), (0, 2)], ids=str)
def test_numpy_blocks_match_the_whole_array(
    axes: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    import array_api_compat.numpy as xp

    assert _backends.block_elements(xp) == 2**18
    monkeypatch.setattr(_backends, "block_elements", lambda xp: 2**12)

    x = np.random.default_rng(1).standard_normal((300, 7, 200)).astype(np.float32)
    shift = np.max(x, axis=axes, keepdims=True)

    def shifted_exp(block: np.ndarray, part) -> np.ndarray:  # type: ignore[no-untyped-def]
        return np.exp(block - part(shift))

    assert x.size > 2 * 2**12  # several blocks, some rows left over at the end
    for keepdims in (True, False):
        got = map_sum(xp, x, axes, keepdims, xp.float64, shifted_exp)
        terms = np.exp(x - shift).astype(np.float64)
        want = np.sum(terms, axis=axes, keepdims=keepdims)
        assert got.dtype == np.float64
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_torch_and_jax_are_not_blocked() -> None:
    torch_xp = pytest.importorskip("array_api_compat.torch")
    jnp = pytest.importorskip("jax.numpy")
    assert _backends.block_elements(torch_xp) is None
    assert _backends.block_elements(jnp) is None


def test_jax_eager_calls_compile_once_per_signature() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(24.0, dtype=jnp.float32).reshape(2, 3, 4)
    first = anyreduce.reduce_l2(x, [1, 2], keepdims=False)
    before = _backends._jitted.cache_info()
    for _ in range(3):
        again = anyreduce.reduce_l2(x, [1, 2], keepdims=False)
    after = _backends._jitted.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 3
    assert type(again) is type(first)
    assert again.dtype == jnp.float32
    assert again.shape == (2,)
    np.testing.assert_allclose(np.asarray(again), np.asarray(first))
    # The same jitted function, inlined under an outer jax.jit and grad.
    inner = jax.jit(lambda y: anyreduce.reduce_sum_square(y, [0], keepdims=False))(x)
    np.testing.assert_allclose(np.asarray(inner), np.sum(np.asarray(x) ** 2, axis=0))
    grad = jax.grad(lambda y: anyreduce.reduce_sum(y, keepdims=False))(x)
    np.testing.assert_allclose(np.asarray(grad), np.ones((2, 3, 4)))


def test_jax_cache_follows_x64_mode() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    values = np.array([1e20, 1e20, 3.0])
    with jax.enable_x64(True):
        wide = anyreduce.reduce_l2(jnp.asarray(values, dtype=jnp.float64))
        assert wide.dtype == jnp.float64
    with jax.enable_x64(False):
        narrow = anyreduce.reduce_l2(jnp.asarray(values, dtype=jnp.float32))
        assert narrow.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(wide), [np.sqrt(2) * 1e20], rtol=1e-15)
    np.testing.assert_allclose(np.asarray(narrow), [np.sqrt(2) * 1e20], rtol=1e-6)


@pytest.mark.parametrize(
    "op", ["reduce_sum_square", "reduce_l1", "reduce_l2", "reduce_log_sum_exp"]
)
@pytest.mark.parametrize("axes", [[0], [1], [0, 2], None])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_torch_scratch_blocks_agree_with_the_oracle(
    monkeypatch: pytest.MonkeyPatch, op: str, axes: list[int] | None, dtype: str
) -> None:
    # Blocks of 2 rows of 12 elements: the in-place path over many blocks, with a last
    # block shorter than the rest and, for LogSumExp, a per-slice shift.
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as xp

    import reference
    from backends import assert_result

    monkeypatch.setattr(_backends, "_SCRATCH_ELEMENTS", 24)
    values = np.random.default_rng(7).uniform(-3, 3, (7, 3, 4)).astype(dtype)
    data = torch.from_numpy(values)
    assert _backends.scratch_rows(xp, data) == 2
    result = getattr(anyreduce, op)(data, axes, keepdims=False)
    expected = reference.reduce(op, values, axes, keepdims=False)
    shape = () if axes is None else tuple(n for i, n in enumerate(values.shape) if i not in axes)
    magnitude = float(np.abs(values.astype(np.float64)).sum())
    assert_result(result, xp, dtype, shape, expected, atol=2.0**-40 * magnitude)


def test_torch_scratch_only_for_plain_eager_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as xp

    monkeypatch.setattr(_backends, "_SCRATCH_ELEMENTS", 4)
    plain = torch.ones(3, 4)
    assert _backends.scratch_rows(xp, plain) is not None
    assert _backends.scratch_rows(xp, torch.ones(1, 4)) is None  # one block: no scratch
    assert _backends.scratch_rows(xp, torch.ones(3, 4, requires_grad=True)) is None
    with torch.no_grad():
        assert _backends.scratch_rows(xp, torch.ones(3, 4, requires_grad=True)) is not None
    assert _backends.scratch_rows(xp, torch.ones(3, 4, device="meta")) is None
    seen: list[object] = []

    def probe(t: object) -> object:
        seen.append(_backends.scratch_rows(xp, t))
        return t

    torch.func.vmap(probe)(torch.ones(2, 3, 4))
    assert seen == [None]
    # NumPy: plain ndarrays larger than one block only, not subclasses (masked arrays).
    monkeypatch.setattr(_backends, "block_elements", lambda xp: 4)
    assert _backends.scratch_rows(np, np.ones((3, 4))) == 1
    assert _backends.scratch_rows(np, np.ma.ones((3, 4))) is None
    assert _backends.scratch_rows(np, np.ones((1, 4))) is None


# The lean NumPy loop for L1 (``_numpy_loops``): blocks of 2**13 elements, so that each
# layout runs several blocks, a partial last block and nested column dots.
_LEAN_CASES = {
    "trailing": ((300, 7, 256), (1, 2)),  # rows of 1792 = 14 dots, 4 rows a block
    "leading": ((1000, 512), (0,)),  # 16 rows a block, 8 left over, 63 block sums
    "every": ((10007, 9), (0, 1)),  # 10 rows of 8192 and 8143 values left over
}


@pytest.mark.parametrize("case", list(_LEAN_CASES))
@pytest.mark.parametrize("kind", ["constant", "signed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_l1_lean_loop_holds_the_bound(
    case: str, kind: str, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anyreduce._lib import _numpy_loops

    monkeypatch.setattr(_backends, "block_elements", lambda xp: 2**13)
    taken: list[bool] = []
    lean = _numpy_loops.abs_sum

    def spy(*args):  # type: ignore[no-untyped-def]
        result = lean(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(_numpy_loops, "abs_sum", spy)
    shape, axes = _LEAN_CASES[case]
    rng = np.random.default_rng(3)
    # 0.1 everywhere is the worst case for terms added one after the other.
    host = np.full(shape, 0.1) if kind == "constant" else rng.standard_normal(shape) * 100
    x = host.astype(dtype)
    got = anyreduce.reduce_l1(x, list(axes), keepdims=False)  # below the threads' slabs
    assert taken == [True]
    exact = _exact_abs_sums(x, axes)
    eps = float(np.finfo(dtype).eps)
    assert got.dtype == x.dtype
    assert got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= 8 * eps * exact)


def _exact_abs_sums(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    kept = [a for a in range(x.ndim) if a not in axes]
    slices = np.abs(np.transpose(x, (*kept, *axes))).astype(np.float64)
    slices = slices.reshape(-1, math.prod(x.shape[a] for a in axes))
    sums = [math.fsum(row) for row in slices.tolist()]
    return np.array(sums).reshape([x.shape[a] for a in kept])


def test_numpy_l1_lean_loop_declines_other_layouts(monkeypatch: pytest.MonkeyPatch) -> None:
    from anyreduce._lib._numpy_loops import abs_sum

    monkeypatch.setattr(_backends, "block_elements", lambda xp: 2**13)
    x = np.random.default_rng(4).standard_normal((64, 20, 256)).astype(np.float32)
    assert abs_sum(x, (1, 2), False, x.dtype) is not None
    assert abs_sum(x, (1,), False, x.dtype) is None  # a middle axis
    assert abs_sum(np.asfortranarray(x), (1, 2), False, x.dtype) is None  # no matrix view
    assert abs_sum(x, (1, 2), False, np.dtype(np.float64)) is None  # widened: general loop
    assert abs_sum(x.astype(np.float16), (1, 2), False, np.dtype(np.float16)) is None
    assert abs_sum(x[:, :, :100], (2,), False, x.dtype) is None  # rows not whole dots
    assert abs_sum(x, (0,), False, x.dtype) is None  # 16 rows of 5120 exceed a block
    assert abs_sum(x[:4, :4], (0, 1, 2), False, x.dtype) is None  # one block: plain sum
    # Every result the general loop gives, whichever path is taken.
    for axes in [(0,), (1,), (2,), (1, 2), (0, 1), (0, 1, 2)]:
        got = anyreduce.reduce_l1(x, list(axes), keepdims=True)
        exact = np.sum(np.abs(x.astype(np.float64)), axis=axes, keepdims=True)
        assert np.allclose(got, exact, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((300, 7, 256), (1, 2)),
        ((64, 8192), (1,)),
        ((10007, 9), (0, 1)),
        ((40, 2048), (0, 1)),
        ((1000, 512), (0,)),  # leading: 16 rows a block, 8 left over
        ((50, 20, 2, 256), (0, 1)),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_log_sum_exp_lean_loop_gives_the_general_values(
    shape: tuple[int, ...], axes: tuple[int, ...], dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Special slices included (all -inf, one +inf, one NaN, large values); over trailing
    axes bit for bit, over leading ones within a few ulps (the blocks merge in one step)."""
    from anyreduce._lib import _numpy_loops

    monkeypatch.setattr(_backends, "block_elements", lambda xp: 2**13)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 30).astype(dtype)
    every = len(axes) == len(shape)
    leading = not every and axes[0] == 0
    # One slice a row (views of x): over leading axes the columns, over every axis runs
    # of 1000 values.
    count = math.prod(shape[a] for a in axes)
    if every:
        rows = x.reshape(-1)[:80_000].reshape(80, 1000)
    else:
        rows = x.reshape(count, -1).T if leading else x.reshape(-1, count)
    rows[0] = -np.inf
    rows[7] += 1000.0
    if not every:  # over every axis either would be the whole result
        rows[3, 5] = np.inf
        rows[5, 1] = np.nan
    lean = _numpy_loops.shifted_exp_rows
    taken: list[bool] = []

    def spy(*args):  # type: ignore[no-untyped-def]
        result = lean(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(_numpy_loops, "shifted_exp_rows", spy)
    got = anyreduce.reduce_log_sum_exp(x, list(axes))
    assert taken == [True]
    monkeypatch.setattr(_numpy_loops, "shifted_exp_rows", lambda *args: None)
    general = anyreduce.reduce_log_sum_exp(x, list(axes))
    assert got.dtype == general.dtype
    if leading:
        np.testing.assert_allclose(got, general, rtol=4 * np.finfo(dtype).eps, atol=0)
    else:
        np.testing.assert_array_equal(got, general)
    if every:
        assert np.isfinite(got).all()
    else:
        rows = got.reshape(-1)
        assert rows[0] == -np.inf
        assert rows[3] == np.inf
        assert np.isnan(rows[5])
        assert np.isfinite(rows[7])
