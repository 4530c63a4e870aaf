"""Large NumPy reductions split over threads (``anyreduce._lib._threads``).

Splitting must not change what a reduction means: every operator, dtype, axis choice and
special value gives the contract's answer with any number of threads. Slabs are made small
here (``_SLAB_ELEMENTS``) so that the test data split as large data do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce._lib import _backends, _small, _threads
from backends import assert_result, make, np_dtype, to_numpy

OPS = reference.OP_NAMES


@pytest.fixture
def split_small(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Slabs of 64 elements, and three threads (uneven slabs on two cores too); the
    general kernels only (NumPy's small-input path takes data of up to 4096 elements)."""
    monkeypatch.setattr(_threads, "_SLAB_ELEMENTS", 64)
    monkeypatch.setattr(_threads, "_SHORTEST_RUN", 1)
    monkeypatch.setattr(_threads, "_SHORTEST_REDUCTION", 1)
    runs: list[str] = []
    run = _threads._run

    def spy(compute: Any, name: str, *args: Any) -> Any:
        runs.append(name)
        return run(compute, name, *args)

    monkeypatch.setattr(_threads, "_run", spy)
    previous = anyreduce.set_num_threads(3)
    try:
        with _small.general_only():
            yield runs
    finally:
        anyreduce.set_num_threads(previous)


# (shape, axes, keepdims): a kept axis to split (last, first, middle axes reduced), every axis
# reduced (slabs merged), and a kept axis too short for three slabs.
_CASES = [
    ((50, 40), [1], True),
    ((50, 40), [0], False),
    ((7, 5, 30), [0, 2], True),
    ((3, 4, 50), [1], False),
    ((60, 30), [0, 1], False),
    ((4, 9, 10), [0, 1, 2], True),
    ((2, 300), [1], True),
]


def _data(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.3
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 90, shape).astype(np.float64)
    values = rng.uniform(-3.0, 3.0, shape)
    flat = values.reshape(-1)
    # Specials in the first and the last slab.
    flat[3] = np.nan
    flat[-5] = np.inf
    flat[-70] = -np.inf
    return values


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "bool"])
@pytest.mark.parametrize(("shape", "axes", "keepdims"), _CASES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_split_reductions_give_the_contract_answer(
    xp: Any,
    split_small: list[str],
    dtype_available: Any,
    op: str,
    shape: tuple[int, ...],
    axes: list[int],
    dtype: str,
    keepdims: bool,
) -> None:
    dtype_available(dtype)
    if dtype == "bool" and op not in ("reduce_max", "reduce_min"):
        pytest.skip("bool is for max and min only")
    if dtype == "int32" and op in ("reduce_log_sum", "reduce_log_sum_exp"):
        pytest.skip("LogSum and LogSumExp take floats only")
    values = _data(shape, dtype, seed=len(shape) * 100 + sum(axes))
    if dtype == "int32":
        values = values.astype(np.int32)  # the oracle wraps as int32 does
    if op == "reduce_log_sum" and dtype.startswith("float"):
        values = np.abs(values)
    if op == "reduce_prod" and dtype.startswith("float"):
        values = np.where(np.isfinite(values), 1.0 + values / 32, values)
    if dtype.startswith("float"):
        values = values.astype(np_dtype(dtype)).astype(np.float64)  # the data as given
    expected = reference.reduce(op, values, axes, keepdims=keepdims)
    result = getattr(anyreduce, op)(make(xp, values, dtype), axes, keepdims=keepdims)
    out_shape = tuple(
        (1 if i in axes else n) for i, n in enumerate(shape) if keepdims or i not in axes
    )
    if type(result) is np.ndarray and op not in _threads._DOT_SUMS:
        merged = len(axes) == len(shape)
        assert split_small or (merged and dtype not in ("float32", "float64")), "not split"
    if dtype not in ("float32", "float64"):
        assert_result(result, xp, dtype, out_shape, expected)
        return
    # 8 eps M before the final step (the contract), plus its rounding.
    eps = float(np.finfo(dtype).eps)
    if op == "reduce_prod":  # one rounding per factor, in the dtype
        count = int(np.prod([shape[a] for a in axes]))
        assert_result(result, xp, dtype, out_shape, expected, rtol=(count + 1) * eps)
        return
    bound = 8 * eps * reference.magnitude(op, values, axes, keepdims=keepdims)
    assert_result(result, xp, dtype, out_shape, expected, rtol=4 * eps, atol=float(np.max(bound)))


@pytest.mark.usefixtures("split_small")
def test_merged_slabs_keep_special_values(xp: Any) -> None:
    """Every axis reduced: each slab's result is merged, so a slab's NaN, its infinities
    and a slab whose own sum is negative must reach the merged result as the whole does."""
    n = 60 * 30
    shape = (60, 30)
    signs = np.where(np.arange(n) < n // 2, -1.0, 3.0).reshape(shape)
    cases: list[tuple[str, np.ndarray, float]] = [
        # log of the total, not of each slab's sum (the first slab's is negative)
        ("reduce_log_sum", signs, float(np.log(np.sum(signs)))),
        ("reduce_log_sum_exp", np.full(shape, -np.inf), -np.inf),
        ("reduce_log_sum_exp", np.where(np.arange(n) == n - 1, np.inf, 0.0).reshape(shape), np.inf),
        ("reduce_max", np.where(np.arange(n) == n - 2, np.nan, 1.0).reshape(shape), np.nan),
        ("reduce_min", np.where(np.arange(n) == 1, np.nan, 1.0).reshape(shape), np.nan),
        ("reduce_mean", signs, float(np.mean(signs))),
        ("reduce_l2", np.full(shape, 1e20), float(np.sqrt(n) * 1e20)),
        ("reduce_sum", np.where(np.arange(n) == 0, -np.inf, 1.0).reshape(shape), -np.inf),
    ]
    for op, values, want in cases:
        result = getattr(anyreduce, op)(make(xp, values, "float32"), None, keepdims=False)
        assert_result(result, xp, "float32", (), np.float64(want), rtol=2.0**-21)


def _recording() -> tuple[list[tuple[str, tuple[int, ...], str]], Any]:
    calls: list[tuple[str, tuple[int, ...], str]] = []
    lock = threading.Lock()

    def compute(name: str, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
        with lock:
            calls.append((name, tuple(x.shape), threading.current_thread().name))
        return np.sum(x, axis=axes, keepdims=keepdims)

    return calls, compute


def test_numpy_splits_large_data_along_a_kept_axis() -> None:
    previous = anyreduce.set_num_threads(2)
    try:
        calls, compute = _recording()
        x = np.ones((1024, 2048), dtype=np.float32)  # 2**21 elements: two slabs
        result = _threads.reduce("reduce_sum", x, (1,), False, compute)
        assert result is not None
        assert result.shape == (1024,)
        assert sorted(shape for _, shape, _ in calls) == [(512, 2048), (512, 2048)]
        assert any(thread.startswith("anyreduce") for _, _, thread in calls)
        calls.clear()
        result = _threads.reduce("reduce_max", x, (0,), True, compute)
        assert result is not None
        assert result.shape == (1, 2048)
        assert sorted(shape for _, shape, _ in calls) == [(1024, 1024), (1024, 1024)]
        # Sums of C-ordered float data over leading axes are BLAS dots, threaded by BLAS.
        for axes in [(0,), (0, 1)]:
            assert _threads.reduce("reduce_sum", x, axes, True, compute) is None
            assert _threads.reduce("reduce_mean", x, axes, True, compute) is None
            assert _threads.reduce("reduce_log_sum", x, axes, True, compute) is None
    finally:
        anyreduce.set_num_threads(previous)


def test_numpy_norms_over_axis_0_split_whole_rows() -> None:
    """L1, SumSquare and L2 reduce C-ordered rows in slabs of whole rows, then merge them:
    their block loops read contiguous rows faster than the strided rows of half the
    columns."""
    previous = anyreduce.set_num_threads(2)
    try:
        calls, compute = _recording()
        x = np.ones((1024, 2048), dtype=np.float32)
        result = _threads.reduce("reduce_l1", x, (0,), False, compute)
        assert result is not None
        assert result.shape == (2048,)
        assert [(name, shape) for name, shape, _ in calls] == [
            ("reduce_l1", (512, 2048)),
            ("reduce_l1", (512, 2048)),
            ("reduce_sum", (2, 2048)),
        ]
        calls.clear()
        assert _threads.reduce("reduce_l2", x, (0,), False, compute) is not None
        assert [name for name, _, _ in calls] == ["reduce_l2"] * 3
        calls.clear()
        # Strided data, and axes that are not a leading run, keep the split along a kept
        # axis.
        assert _threads.reduce("reduce_l1", np.asfortranarray(x), (0,), True, compute) is not None
        assert sorted(shape for _, shape, _ in calls) == [(1024, 1024), (1024, 1024)]
        calls.clear()
        cube = np.ones((256, 4, 2048), dtype=np.float32)
        assert _threads.reduce("reduce_l1", cube, (0, 2), True, compute) is not None
        assert sorted(shape for _, shape, _ in calls) == [(256, 2, 2048), (256, 2, 2048)]
    finally:
        anyreduce.set_num_threads(previous)


def test_numpy_merges_slabs_when_every_axis_is_reduced() -> None:
    previous = anyreduce.set_num_threads(2)
    try:
        calls, compute = _recording()
        x = np.ones((2048, 1024), dtype=np.float64).T  # not in C order: no BLAS dots
        result = _threads.reduce("reduce_mean", x, (0, 1), False, compute)
        assert result is not None
        assert result.shape == ()
        assert float(result) == 1.0
        names = [name for name, _, _ in calls]
        # Two slabs' sums, one merging sum; the mean's division comes once, at the end.
        assert names == ["reduce_sum"] * 3
        # Integers and half precision are not merged: their rounding or wrapping would
        # differ from one pass.
        for dtype in (np.int32, np.float16):
            assert _threads.reduce("reduce_sum", x.astype(dtype), (0, 1), False, compute) is None
    finally:
        anyreduce.set_num_threads(previous)


def test_numpy_narrow_rows_split_along_the_reduced_axis_or_not_at_all() -> None:
    """Columns of narrow rows would lose NumPy's regrouped forms, and short reductions
    give results as large as the data: neither is split along a kept axis."""
    previous = anyreduce.set_num_threads(2)
    try:
        calls, compute = _recording()
        points = np.ones((2**20, 3), dtype=np.float32)
        result = _threads.reduce("reduce_max", points, (0,), True, compute)
        assert result is not None
        assert result.shape == (1, 3)
        # Two slabs of whole rows, each reduced over axis 0, then their maxima merged.
        assert sorted(shape for _, shape, _ in calls) == [(2, 3), (2**19, 3), (2**19, 3)]
        calls.clear()
        assert _threads.reduce("reduce_max", points, (1,), True, compute) is None
        assert calls == []
    finally:
        anyreduce.set_num_threads(previous)


def test_numpy_keeps_small_data_and_one_thread_on_the_caller() -> None:
    calls, compute = _recording()
    previous = anyreduce.set_num_threads(2)
    try:
        small = np.ones((1024, 1023), dtype=np.float32)  # under two slabs
        assert _threads.reduce("reduce_sum", small, (1,), False, compute) is None
        anyreduce.set_num_threads(1)
        large = np.ones((2048, 2048), dtype=np.float32)
        assert _threads.reduce("reduce_sum", large, (1,), False, compute) is None
        assert calls == []
    finally:
        anyreduce.set_num_threads(previous)


def test_only_plain_numpy_arrays_are_split(xp: Any) -> None:
    x = make(xp, np.ones((4, 4)), "float32")
    assert _backends.splits_over_threads(xp, x) == (type(x) is np.ndarray)

    class Sub(np.ndarray):
        pass

    assert not _backends.splits_over_threads(np, np.ones(4).view(Sub))


def test_a_slab_error_reaches_the_caller() -> None:
    def compute(name: str, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
        if threading.current_thread().name.startswith("anyreduce"):
            msg = "slab failed"
            raise RuntimeError(msg)
        return np.sum(x, axis=axes, keepdims=keepdims)

    previous = anyreduce.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="slab failed"):
            _threads.reduce("reduce_sum", np.ones((2048, 1024)), (1,), False, compute)
    finally:
        anyreduce.set_num_threads(previous)


@pytest.mark.usefixtures("split_small")
def test_reductions_from_many_threads_at_once() -> None:
    """Callers on several threads share the pool; a reduction started on a pool thread
    runs there unsplit, so none waits on the pool it is part of."""
    rng = np.random.default_rng(5)
    data = [rng.standard_normal((40, 60)).astype(np.float32) for _ in range(8)]
    anyreduce.set_num_threads(1)
    expected = [to_numpy(anyreduce.reduce_log_sum_exp(d, 1)) for d in data]
    anyreduce.set_num_threads(3)
    with ThreadPoolExecutor(4) as callers:
        got = list(callers.map(lambda d: anyreduce.reduce_log_sum_exp(d, 1), data * 4))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, expected[i % 8], rtol=2.0**-21)
    on_pool = _threads._executor(2).submit(anyreduce.reduce_sum, data[0], 1).result()
    exact = np.sum(data[0].astype(np.float64), axis=1, keepdims=True)
    bound = 8 * 2.0**-23 * np.sum(np.abs(data[0]).astype(np.float64), axis=1, keepdims=True)
    assert np.all(np.abs(on_pool - exact) <= bound)


def test_set_num_threads_checks_and_returns_the_old_value(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = anyreduce.set_num_threads(2)
    try:
        assert anyreduce.set_num_threads(5) == 2
        assert anyreduce.get_num_threads() == 5
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(ValueError, match="positive integer"):
                anyreduce.set_num_threads(bad)  # type: ignore[arg-type]
        assert anyreduce.get_num_threads() == 5
        monkeypatch.setenv("ANYREDUCE_NUM_THREADS", "7")
        anyreduce.set_num_threads(None)
        assert anyreduce.get_num_threads() == 7
        monkeypatch.setenv("ANYREDUCE_NUM_THREADS", "many")
        with pytest.raises(ValueError, match="ANYREDUCE_NUM_THREADS"):
            anyreduce.set_num_threads(None)
        monkeypatch.delenv("ANYREDUCE_NUM_THREADS")
        anyreduce.set_num_threads(None)
        assert anyreduce.get_num_threads() >= 1
    finally:
        anyreduce.set_num_threads(previous)


_FORK_SCRIPT = """
import multiprocessing, numpy as np, anyreduce
from anyreduce._lib import _small, _threads
_threads._SLAB_ELEMENTS = 64
anyreduce.set_num_threads(2)  # one slab handed to the pool: none would take it
x = np.ones((40, 60), dtype=np.float32)
with _small.general_only():
    anyreduce.reduce_l2(x, None)  # the parent's pool exists now
    assert _threads._pool is not None

    def child(queue):
        queue.put(float(np.asarray(anyreduce.reduce_l2(x, None, keepdims=False))))

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    process.join(20)
    assert process.exitcode == 0, "the child did not finish"
    print(queue.get(timeout=5))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_makes_its_own_pool() -> None:
    """The parent's pool threads do not exist in a child made by fork: work handed to them
    would wait forever. The child must make its own pool. (In a fresh interpreter: this
    one has imported libraries that warn about forking a threaded process.)"""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _FORK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(float(np.sqrt(2400.0)))
