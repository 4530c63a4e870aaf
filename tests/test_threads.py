"""NumPy reductions split over threads (``anyreduce._backends._threads``).

The values never depend on the number of threads; changing it while other threads reduce,
forking while they reduce, and a bad ``ANYREDUCE_NUM_THREADS`` all leave calls working.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import anyreduce
import backends
import reference
from anyreduce._backends import _threads

OPS = reference.OP_NAMES

# Large enough to be split (2**21 elements or more with a kept axis), including kept axes
# too short for one slab per thread and Fortran-ordered data ("F"), and small data that
# are never split.
_LARGE = [
    ((2**20, 3), (0,), "C"),
    ((2**19, 5), (0,), "C"),
    ((2, 2**20), (1,), "C"),
    ((2**11, 2**10), (0,), "C"),
    ((2**11, 2**10), (1,), "C"),
    ((2**11, 2**10), (1,), "F"),
    ((4, 2**9, 2**10), (0, 2), "C"),
    ((3, 2**20), (1,), "F"),
]
_SMALL = [((3, 5), (1,), "C"), ((7, 4, 6), (0, 2), "F")]


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = _threads._State.requested
    try:
        yield
    finally:
        anyreduce.set_num_threads(before)


@pytest.fixture
def two_threads(restore_threads: None) -> None:
    """Two threads, as memory is measured: each pool thread holds its own buffer, so a
    call's peak grows with the thread count (and with how many run at once)."""
    anyreduce.set_num_threads(2)


def _data(shape: tuple[int, ...], dtype: str, seed: int, order: str = "C") -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal(shape) * 3
    return values.astype(dtype, order=order)  # type: ignore[call-overload]


def _same_bits(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("shape", "axes", "order"), _LARGE + _SMALL, ids=str)
def test_values_do_not_depend_on_the_thread_count(
    restore_threads: None, shape: tuple[int, ...], axes: tuple[int, ...], order: str
) -> None:
    large = (shape, axes, order) in _LARGE
    dtypes = ("float32",) if large else ("float16", "float32", "float64", "int32")
    for dtype in dtypes:
        x = _data(shape, dtype, seed=len(shape), order=order)
        for op in OPS:
            f = getattr(anyreduce, op)
            anyreduce.set_num_threads(1)
            want = f(x, axes)
            for threads in range(2, 8):
                anyreduce.set_num_threads(threads)
                got = f(x, axes)
                assert _same_bits(got, want), f"{op} {dtype} {shape} {axes}: {threads} threads"


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_values_do_not_depend_on_the_data_size(restore_threads: None, dtype: str) -> None:
    """A slice's result is the same reduced alone (small data, one thread) or within data
    large enough to be split over threads."""
    anyreduce.set_num_threads(3)
    x = _data((2**11, 2**10), dtype, seed=4)
    for op in OPS:
        f = getattr(anyreduce, op)
        rows, columns = f(x, 1), f(x, 0)
        for start, width in ((0, 1), (7, 3), (2**11 - 64, 64)):
            part = f(x[start : start + width], 1)
            assert _same_bits(part, rows[start : start + width]), f"{op} rows {start}"
        for start, width in ((0, 2), (100, 5), (500, 16)):
            part = f(x[:, start : start + width], 0)
            assert _same_bits(part, columns[:, start : start + width]), f"{op} columns {start}"


@pytest.mark.accelerated
def test_large_data_are_split(restore_threads: None) -> None:
    """The data above are split: the check above compares threaded results (L1, which
    makes a temporary, in slabs of about SLAB_ELEMENTS whatever the layout)."""
    calls: list[int] = []
    original = _threads._executor

    def counting(workers: int) -> Any:
        calls.append(workers)
        return original(workers)

    anyreduce.set_num_threads(3)
    _threads._executor = counting  # type: ignore[assignment]
    try:
        for shape, axes, order in _LARGE:
            anyreduce.reduce_l1(_data(shape, "float32", 0, order), axes)
    finally:
        _threads._executor = original  # type: ignore[assignment]
    # All but (3, 2**20) over its last axis, Fortran-ordered: its only kept axis, of
    # length 3, makes no two slabs of two. ((2**20, 3) over the first axis, C-ordered, is
    # split into blocks of rows.) The calling thread works beside a pool of two threads.
    assert calls == [2] * (len(_LARGE) - 1)


@pytest.mark.accelerated
def test_operators_without_temporaries_split_a_following_axis_in_wide_runs(
    restore_threads: None,
) -> None:
    """A maximum over the first axis runs over columns in runs of at least WIDE_RUN:
    NumPy's loop over short runs costs more than the threads give. (Sums over the first
    axis of C-ordered data are split into blocks of rows instead.)"""
    widths: list[int] = []
    anyreduce.set_num_threads(2)
    x = _data((1024, 4 * _threads.WIDE_RUN), "float32", 0)
    original = _threads._in_jobs

    def recording(one: Any, bounds: Any, per_job: int, threaded: bool) -> Any:
        widths.extend(stop - start for start, stop in bounds)
        return original(one, bounds, per_job, threaded)

    _threads._in_jobs = recording  # type: ignore[assignment]
    try:
        got = anyreduce.reduce_max(x, 0)
        anyreduce.reduce_log_sum_exp(x, 0)
    finally:
        _threads._in_jobs = original  # type: ignore[assignment]
    max_widths, exp_widths = widths[:4], widths[4:]
    assert max_widths == [_threads.WIDE_RUN] * 4
    assert exp_widths
    assert max(exp_widths) < _threads.WIDE_RUN
    anyreduce.set_num_threads(1)
    assert _same_bits(got, anyreduce.reduce_max(x, 0))


def test_an_error_in_a_job_reaches_the_caller(restore_threads: None) -> None:
    """A job that fails on a pool thread or on the calling thread raises in the caller,
    no further job is started, and the next call works."""
    anyreduce.set_num_threads(2)
    bounds = [(i, i + 1) for i in range(64)]
    ran: list[int] = []

    def one(bound: tuple[int, int]) -> int:
        ran.append(bound[0])
        if bound[0] == 3:
            msg = "job 3"
            raise ZeroDivisionError(msg)
        time.sleep(0.001)
        return bound[0]

    with pytest.raises(ZeroDivisionError, match="job 3"):
        _threads.in_jobs(one, bounds, 1)
    assert len(ran) < len(bounds)
    assert _threads.in_jobs(lambda bound: bound[0], bounds, 5) == list(range(64))


def test_the_pool_stays_while_the_setting_does(restore_threads: None) -> None:
    """Calls with fewer jobs than threads use the same pool as calls with many."""
    anyreduce.set_num_threads(3)
    assert _threads.in_jobs(lambda bound: bound[0], [(0, 1), (1, 2)], 1) == [0, 1]
    pool = _threads._State.pool
    assert pool is not None
    assert _threads.in_jobs(lambda bound: bound[0], [(i, i + 1) for i in range(9)], 1) == [
        *range(9)
    ]
    assert _threads.in_jobs(lambda bound: bound[0], [(0, 1), (1, 2)], 1) == [0, 1]
    assert _threads._State.pool is pool


# Over the last axis Sum and L2 take ``last-axes-in-one-pass`` (jobs of rows; L2's with
# a buffer each), Max takes ``threads`` (a kernel a slab).
_RACED = ["reduce_sum", "reduce_l2", "reduce_max"]


@pytest.mark.parametrize("op", _RACED)
def test_setting_the_thread_count_while_threads_reduce(restore_threads: None, op: str) -> None:
    x = _data((2**11, 2**10), "float32", 1)
    reduce = getattr(anyreduce, op)
    anyreduce.set_num_threads(1)
    want = reduce(x, 1)
    errors: list[BaseException] = []
    wrong: list[int] = []
    stop = threading.Event()

    def reduce_repeatedly() -> None:
        try:
            while not stop.is_set():
                if not _same_bits(reduce(x, 1), want):
                    wrong.append(1)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)

    workers = [threading.Thread(target=reduce_repeatedly) for _ in range(8)]
    for w in workers:
        w.start()
    try:
        deadline = time.monotonic() + 2.0
        threads = 1
        while time.monotonic() < deadline:
            threads = threads % 4 + 1
            anyreduce.set_num_threads(threads)
            time.sleep(0.005)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
    assert not any(w.is_alive() for w in workers), "a reducing thread hung"
    assert not errors, errors[0]
    assert not wrong


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
# JAX, when an earlier test in this process imported it, warns from its own at-fork hook
# that its threads may deadlock a child: its warning about its threads, not this test's.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("reducing", [1, 3])
@pytest.mark.parametrize("op", _RACED)
def test_fork_while_threads_reduce(restore_threads: None, reducing: int, op: str) -> None:
    """A child forked while other threads reduce finishes its own (threaded) reduction."""
    x = _data((2**11, 2**10), "float32", 2)
    reduce = getattr(anyreduce, op)
    anyreduce.set_num_threads(2)
    want = reduce(x, 1)
    stop = threading.Event()

    def reduce_repeatedly() -> None:
        while not stop.is_set():
            reduce(x, 1)

    workers = [threading.Thread(target=reduce_repeatedly) for _ in range(reducing)]
    for w in workers:
        w.start()
    try:
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:  # the child: its own reduction, then out without pytest's teardown
            code = 1
            try:
                code = 0 if _same_bits(reduce(x, 1), want) else 2
            finally:
                os._exit(code)
        status = _wait(pid, timeout=30.0)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
    assert status is not None, "the forked child hung"
    assert os.waitstatus_to_exitcode(status) == 0


def _wait(pid: int, timeout: float) -> int | None:
    """The child's wait status, or None (the child killed) if it runs past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


_BAD_SETTING = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import anyreduce
    from anyreduce._backends._threads import ThreadSettingWarning

    x = np.ones((2**11, 2**10), dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [anyreduce.get_num_threads() for _ in range(3)]
        results = [anyreduce.reduce_sum(x, 1, keepdims=False) for _ in range(3)]
    assert all(t >= 1 for t in threads), threads
    assert all(np.array_equal(r, np.full(2**11, 2**10, np.float32)) for r in results)
    kinds = [type(w.message).__name__ for w in caught]
    assert kinds == ["ThreadSettingWarning"], kinds
    assert "ANYREDUCE_NUM_THREADS" in str(caught[0].message)
    assert "'two'" in str(caught[0].message)
    print("ok")
    """
)


@pytest.mark.parametrize("value", ["two", "0", "-3"])
def test_a_bad_thread_setting_is_reported_once(value: str) -> None:
    env = {**os.environ, "ANYREDUCE_NUM_THREADS": value}
    script = _BAD_SETTING.replace("'two'", repr(value))
    command = [sys.executable, "-c", script]
    done = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _over(
    module: str, data: Any, nbytes: int, ops: Any, axes: int | None, allowed: float
) -> dict[str, float]:
    """The operators of ``ops`` whose call on ``data`` (of ``nbytes`` bytes) held more than
    ``allowed`` bytes beyond its input and output, with that share of the input. Each is
    measured on its second call: a process's first call imports and remembers what it
    needs once (float16 (4096, 8192) Sum over the first axis: 16% of the input on the
    first call of a fresh process, 6.6% on every later one)."""
    from anyreduce._bench._memory import peak_extra_bytes

    over = {}
    for op in ops:
        f = getattr(anyreduce, op)
        f(data, axes)
        extra = peak_extra_bytes(module, lambda f=f: f(data, axes))
        assert extra is not None
        if extra > allowed:
            over[op] = round(extra / nbytes, 3)
    return over


_EVERY_DTYPE = [
    "bool",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
]


def _every_dtype_data(module: str, dtype: str) -> tuple[Any, int]:
    """float32 (4096, 8192) values of about 3 in ``dtype`` (unsigned: their magnitudes;
    bool: their signs) in ``module``'s array, and its bytes."""
    values = np.clip(_data((4096, 8192), "float32", 5), -100, 100)
    if dtype == "bool":
        values = values > 0
    elif dtype.startswith("uint"):
        values = np.abs(values)
    if module == "numpy":
        x = values.astype(backends.np_dtype(dtype))
        return x, x.nbytes
    import torch

    data = torch.from_numpy(values).to(getattr(torch, dtype))
    return data, data.numel() * data.element_size()


@pytest.mark.slow
@pytest.mark.parametrize("module", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", _EVERY_DTYPE)
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_every_operator_and_dtype_stays_within_a_tenth_of_the_input(
    two_threads: None, module: str, dtype: str, axes: int | None
) -> None:
    """Every operator on every dtype, (4096, 8192) on two threads, holds at most a tenth of
    the input's bytes at once: data an operator widens (float16 and bfloat16 in float64;
    integer L2 and LogSumExp in float64) and data held in a carrier (bfloat16 in float32,
    PyTorch's unsigned types in wider signed ones) a slab or a piece at a time, the exact
    mean of 64-bit integers (its limbs) and the careful product (each float split into
    significand and exponent; the products of these data leave the range, so it runs) in
    pieces."""
    pytest.importorskip(module)
    data, nbytes = _every_dtype_data(module, dtype)
    ops = [op for op in OPS if dtype != "bool" or op in {"reduce_max", "reduce_min"}]
    over = _over(module, data, nbytes, ops, axes, 0.1 * nbytes)
    assert not over, over


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_data_in_the_other_byte_order_stay_within_a_tenth_of_the_input(
    two_threads: None, dtype: str, axes: int | None
) -> None:
    """NumPy data in the other byte order, which the kernel brings into native order
    first, are brought a slab or a piece at a time (4096, 8192), on two threads."""
    data, nbytes = _every_dtype_data("numpy", dtype)
    data = data.astype(data.dtype.newbyteorder("S"))
    over = _over("numpy", data, nbytes, OPS, axes, 0.1 * nbytes)
    assert not over, over


@pytest.mark.parametrize("module", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int32"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_widened_data_below_the_threads_size_hold_a_slab(
    two_threads: None, module: str, dtype: str, axes: int | None
) -> None:
    """Data of 2**20 elements, too few for the threads, that an operator widens into
    float64 (integer L2 and LogSumExp, float16 and bfloat16 L2, LogSumExp and SumSquare)
    hold one slab's float64 temporary of 1 MiB at a time, not the data's shape in float64
    (int8 L2: 16x the input, LogSumExp 24x; float16 L2 8x; PyTorch's bfloat16 LogSumExp
    12x). Over the first axis the kernel's blocked sum of a slab holds a sixteenth of it
    besides (its first level: 64 KiB)."""
    pytest.importorskip(module)
    values = np.clip(_data((1024, 1024), "float32", 8), -100, 100)
    data: Any = values.astype(backends.np_dtype(dtype))
    nbytes = data.nbytes
    if module == "torch":
        import torch

        data = torch.from_numpy(values).to(getattr(torch, dtype))
    ops = ["reduce_l2", "reduce_log_sum_exp"] + (
        ["reduce_sum_square"] if dtype in {"float16", "bfloat16"} else []
    )
    slab = 2**20
    allowed = slab + slab // 16 + 0.1 * nbytes
    over = _over(module, data, nbytes, ops, axes, allowed)
    assert not over, over


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_float_terms_below_the_threads_size_hold_a_tile(
    two_threads: None, dtype: str, axes: int | None
) -> None:
    """L1, SumSquare, L2 and LogSumExp of float data of 2**20 elements, too few for the
    threads, hold a tile of their terms (|x|, x**2, exp(x - shift)) at a time, not the
    terms of the whole data (100% of the input); so does the careful form of a Sum whose
    total overflows (its terms scaled by 2**-64), bit for bit the generic kernel."""
    values = _data((1024, 1024), dtype, 9)
    ops = ["reduce_l1", "reduce_sum_square", "reduce_l2", "reduce_log_sum_exp"]
    allowed = 2**20 + 0.1 * values.nbytes
    over = _over("numpy", values, values.nbytes, ops, axes, allowed)
    huge = values.copy()
    huge[3] = np.finfo(dtype).max / 4 * np.sign(huge[3])
    got = anyreduce.reduce_sum(huge, axes)
    with anyreduce._backends.no_accelerators():
        want = anyreduce.reduce_sum(huge, axes)
    assert _same_bits(np.asarray(got), np.asarray(want))
    over |= _over("numpy", huge, huge.nbytes, ["reduce_sum"], axes, allowed)
    assert not over, over


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_log_sum_exp_of_data_the_threads_split_holds_a_tile_a_thread(
    two_threads: None, dtype: str, axes: int | None
) -> None:
    """LogSumExp of float data large enough for the threads, (2048, 2048) on two threads,
    holds a tile of exp(x - shift) a thread (2**18 elements: an eighth of the data in
    all), as over (4096, 8192); not a copy of a slab of the threads' split a thread
    (2**20 elements: over the first axis, half of the data), and bit for bit the generic
    kernel."""
    values = _data((2048, 2048), dtype, 4)
    values[5, 7] = np.inf
    values[9] = -np.inf
    values[11, 3] = np.nan
    allowed = 2 * 2**18 * values.itemsize + 0.02 * values.nbytes
    over = _over("numpy", values, values.nbytes, ["reduce_log_sum_exp"], axes, allowed)
    assert not over, over
    _assert_the_kernels_bits(values, ["reduce_log_sum_exp"], axes)


_TOTALS = [
    "reduce_sum",
    "reduce_mean",
    "reduce_l1",
    "reduce_l2",
    "reduce_sum_square",
    "reduce_log_sum",
    "reduce_log_sum_exp",
]


def _assert_the_kernels_bits(values: np.ndarray, ops: list[str], axes: int | None) -> None:
    for op in ops:
        got = getattr(anyreduce, op)(values, axes)
        with anyreduce._backends.no_accelerators():
            want = getattr(anyreduce, op)(values, axes)
        assert _same_bits(np.asarray(got), np.asarray(want)), op


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("nans", ["np.nan", "-np.nan"])
@pytest.mark.accelerated
def test_totals_of_data_with_missing_values_hold_a_tile(
    two_threads: None, dtype: str, nans: str
) -> None:
    """Data holding NaN where values are missing (one bit pattern), reduced over every
    axis: the pieces' sums meet the one NaN in any order, so the totals stay a tile at a
    time (a NaN total took the kernel's terms of the whole data: 100% of the input, 200%
    for LogSumExp), bit for bit the generic kernel."""
    values = _data((2048, 2048), dtype, 6)
    flat = values.reshape(-1)
    missing = np.random.default_rng(6).choice(flat.size, size=300, replace=False)
    flat[missing] = np.nan if nans == "np.nan" else -np.nan
    over = _over("numpy", values, values.nbytes, _TOTALS, None, 0.1 * values.nbytes)
    assert not over, over
    _assert_the_kernels_bits(values, _TOTALS, None)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize(
    "specials",
    [[np.nan, -np.nan], [np.inf, -np.inf], [np.inf, -np.inf, np.nan], [np.inf, np.nan]],
    ids=str,
)
def test_totals_with_nans_an_order_could_tell_apart_are_the_kernels(
    two_threads: None, dtype: str, specials: list[float]
) -> None:
    """Where NaNs of two bit patterns can meet (a NaN and a -NaN; a NaN and inf - inf,
    which is -NaN on x86), which one a total keeps depends on the order of the additions:
    those totals are the generic kernel's own, sign bit included."""
    values = _data((2048, 2048), dtype, 7)
    flat = values.reshape(-1)
    places = np.linspace(100, flat.size - 100, len(specials)).astype(int)
    flat[places] = specials
    _assert_the_kernels_bits(values, _TOTALS, None)


@pytest.mark.parametrize("special", [math.nan, math.inf, -math.inf], ids=str)
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_torch_sums_of_data_holding_a_nan_or_an_infinity_hold_a_slab(
    two_threads: None, special: float, axes: int | None
) -> None:
    """PyTorch's Sum, Mean and LogSum of float32 CPU data holding one NaN or infinity:
    its slice's total is not finite, so the kernel sums again with every term scaled by
    2**-64; the scaled terms are a slab at a time (they were a copy of the data: 100% of
    the input, and 8-10x the time), and the values are the generic kernel's."""
    torch = pytest.importorskip("torch")
    values = _data((2048, 4096), "float32", 8)
    values.reshape(-1)[12345] = special
    data = torch.from_numpy(values)
    ops = ["reduce_sum", "reduce_mean", "reduce_log_sum"]
    over = _over("torch", data, values.nbytes, ops, axes, 0.1 * values.nbytes)
    assert not over, over
    for op in ops:
        got = getattr(anyreduce, op)(data, axes)
        with anyreduce._backends.no_accelerators():
            want = getattr(anyreduce, op)(data, axes)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=op)


_ONE_PATTERN = {
    "relu": "zeros of one sign (Min of ReLU outputs)",
    "-0.0": "zeros of the other sign",
    "np.nan": "NaN where values are missing",
}
_TWO_PATTERNS = {
    "0.0 and -0.0": "zeros of both signs",
    "-np.nan": "a NaN NumPy's loops do not make themselves",
    "np.nan and -np.nan": "NaNs of two bit patterns",
}


def _extreme_data(dtype: str, case: str) -> Any:
    values = _data((2048, 2048), "float32", 14)
    flat = values.reshape(-1)
    places = np.random.default_rng(14).choice(flat.size, size=300, replace=False)
    if case in {"relu", "-0.0", "0.0 and -0.0"}:
        values = np.abs(values)
        flat = values.reshape(-1)
        flat[places] = 0.0 if case == "relu" else -0.0
        if case == "0.0 and -0.0":
            flat[places[::2]] = 0.0
    else:
        flat[places] = -np.nan if case == "-np.nan" else np.nan
        if case == "np.nan and -np.nan":
            flat[places[::2]] = -np.nan
    return values.astype(backends.np_dtype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", ">f4"])
@pytest.mark.parametrize("case", [*_ONE_PATTERN, *_TWO_PATTERNS])
@pytest.mark.accelerated
def test_extremes_over_every_axis_of_zeros_and_nans(
    two_threads: None, dtype: str, case: str
) -> None:
    """Max and Min over every axis of data whose extreme is a zero or a NaN. Which zero
    or NaN NumPy's loop returns among several of different bits depends on the loop (its
    vector loop returns np.nan's bits for any NaN), so the pieces' extremes give it only
    where every zero has one sign, or every NaN np.nan's bits: those results stay in the
    pieces (they went back to the kernel: bfloat16 held 200% of the input, lifted whole),
    and every result is the generic kernel's bit for bit."""
    data = _extreme_data(dtype, case)
    ops = ["reduce_max", "reduce_min"]
    if case in _ONE_PATTERN:
        # A piece of bfloat16 or of the other byte order is lifted into native float32
        # (2**19 elements) on each of the two threads, beside a mask of the NaNs of 2**18.
        allowed = 2 * (2**19 * 4 + 2**18) + 0.02 * data.nbytes
        over = _over("numpy", data, data.nbytes, ops, None, allowed)
        assert not over, over
    _assert_the_kernels_bits(data, ops, None)


@pytest.mark.parametrize("special", ["inf", "huge", "tiny row"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_float64_l2_of_data_beyond_the_squares_range_holds_a_tile(
    two_threads: None, special: str, axes: int | None
) -> None:
    """Float64 L2 of data whose squares overflow (an infinity, a value near the maximum)
    or underflow (a row of tiny values): float64 has no wider type, so the kernel sums the
    squares of each slice divided by a power-of-two scale. Those scaled squares are a tile
    at a time, as the plain squares are, and the largest magnitude taken without |x|
    (they were the data's size, several times over: 200% of the input and 12x the time);
    the values are the generic kernel's bit for bit."""
    values = _data((2048, 2048), "float64", 13)
    if special == "inf":
        values[100, 200] = np.inf
    elif special == "huge":
        values[100, 200] = np.finfo(np.float64).max / 2
    else:
        values[100] *= 1e-300
        values[:, 100] *= 1e-300
    # A tile of the largest size on each of the two threads, as the plain squares hold.
    allowed = 2 * 2**18 * values.itemsize + 0.02 * values.nbytes
    over = _over("numpy", values, values.nbytes, ["reduce_l2"], axes, allowed)
    assert not over, over
    _assert_the_kernels_bits(values, ["reduce_l2"], axes)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64"])
@pytest.mark.parametrize("axes", [1, 0], ids=["last", "first"])
@pytest.mark.accelerated
def test_integer_terms_of_large_data_hold_a_tile(two_threads: None, dtype: str, axes: int) -> None:
    """SumSquare and L1 of 32- and 64-bit integers of 2**21 elements hold a tile of their
    terms (x**2 and |x|, wrapped in the type) at a time, and their sums, which wrap, equal
    the generic kernel's bit for bit."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    values = rng.integers(info.min, info.max, (2048, 1024), dtype=dtype, endpoint=True)
    values[0, :3] = [info.min, info.max, 0]
    ops = ["reduce_l1", "reduce_sum_square"]
    for op in ops:
        f = getattr(anyreduce, op)
        got = f(values, axes)
        with anyreduce._backends.no_accelerators():
            want = f(values, axes)
        assert _same_bits(np.asarray(got), np.asarray(want)), op
    over = _over("numpy", values, values.nbytes, ops, axes, 0.2 * values.nbytes)
    assert not over, over


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_torch_log_sum_exp_below_the_threads_size_holds_one_temporary(
    two_threads: None, dtype: str, axes: int | None
) -> None:
    """PyTorch's LogSumExp of 2**20 elements (too few to go through NumPy) writes exp(x -
    shift) over x - shift: one temporary of the data's size, not two, and the same values
    bit for bit."""
    torch = pytest.importorskip("torch")
    data = torch.from_numpy(_data((1024, 1024), dtype, 12))
    got = anyreduce.reduce_log_sum_exp(data, axes)
    with anyreduce._backends.no_accelerators():
        want = anyreduce.reduce_log_sum_exp(data, axes)
    assert torch.equal(got, want)
    nbytes = data.numel() * data.element_size()
    over = _over("torch", data, nbytes, ["reduce_log_sum_exp"], axes, 1.1 * nbytes)
    assert not over, over


@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.parametrize(
    ("module", "op", "row"),
    [
        ("numpy", "reduce_sum", 1e37),
        ("numpy", "reduce_mean", 1e37),
        ("numpy", "reduce_log_sum", 1e37),
        ("numpy", "reduce_l2", 1e25),
        ("numpy", "reduce_l2", 1e-25),
        ("torch", "reduce_l2", 1e-25),
    ],
    ids=str,
)
@pytest.mark.accelerated
def test_careful_forms_of_large_float32_data_hold_no_copy_of_it(
    two_threads: None, module: str, op: str, row: float, axes: int | None
) -> None:
    """float32 data with a row whose sum overflows (|x| about 1e37) or whose squares leave
    the range (1e25, 1e-25): the careful form (the terms scaled by 2**-64; the squares in
    float64) is taken in the same pass as the plain totals, not on a copy of the data (it
    held 100% of the input, 400% for L2). Over the first axis the blocked sum's first
    level, a sixteenth of the rows, is float64 for L2: an eighth of the input, and each
    of the two threads a buffer of a 64th."""
    pytest.importorskip(module)
    from anyreduce._bench._memory import peak_extra_bytes

    values = np.random.default_rng(5).standard_normal((2048, 4096)).astype(np.float32)
    values[7] = np.float32(row) * np.sign(values[7]) if op != "reduce_log_sum" else row
    if op == "reduce_log_sum":
        values = np.abs(values)
    data = values
    if module == "torch":
        import torch

        data = torch.from_numpy(values)
    f = getattr(anyreduce, op)
    got = np.asarray(f(data, axes))
    with anyreduce._backends.no_accelerators():
        want = np.asarray(f(data, axes))
    if module == "numpy":  # the one-pass accelerators: bit for bit
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6)
    extra = peak_extra_bytes(module, lambda: f(data, axes))
    assert extra is not None
    allowed = 0.2 if (op == "reduce_l2" and axes == 0) else 0.1
    assert extra <= allowed * values.nbytes, extra / values.nbytes


@pytest.mark.parametrize("module", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.accelerated
def test_l2_of_data_with_a_row_of_zeros_takes_no_careful_form(
    two_threads: None, module: str, dtype: str
) -> None:
    """A row of zeros (padding, a mask) has a sum of squares of 0, as has a row whose
    squares underflow: told apart, its L2 of 0 needs no careful form over the data, whose
    temporaries were 2-4x the input."""
    pytest.importorskip(module)
    from anyreduce._bench._memory import peak_extra_bytes

    values = np.random.default_rng(4).standard_normal((2048, 4096)).astype(dtype)
    values[5] = 0.0
    data = values
    if module == "torch":
        import torch

        data = torch.from_numpy(values)
    want = np.sqrt(np.einsum("ij,ij->i", values.astype(np.float64), values.astype(np.float64)))
    got = anyreduce.reduce_l2(data, 1, keepdims=False)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert float(got[5]) == 0.0
    extra = peak_extra_bytes(module, lambda: anyreduce.reduce_l2(data, 1))
    assert extra is not None
    assert extra <= 0.1 * values.nbytes, extra / values.nbytes


@pytest.mark.parametrize("module", ["numpy", "torch"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_product_of_data_with_zeros_takes_no_careful_form(
    module: str, axes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A product of 0 from a slice that holds a zero (ReLU outputs) is exact as it is,
    its sign the parity of the sign bits: the careful product, 4-20x the time of the
    plain one, is not computed for it (large data, accelerators included)."""
    pytest.importorskip(module)
    from anyreduce._agnostic import _kernels

    values = np.maximum(np.random.default_rng(6).standard_normal((1024, 2048)), 0)
    values[::3] *= -1  # -0.0 where a zero is negated
    data = values.astype(np.float32)
    if module == "torch":
        import torch

        data = torch.from_numpy(data)
    want = np.prod(values, axis=axes)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the careful product was computed")

    monkeypatch.setattr(_kernels, "_product_terms", refuse)
    got = np.asarray(anyreduce.reduce_prod(data, axes, keepdims=False))
    np.testing.assert_array_equal(got, want.astype(np.float32))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.slow
@pytest.mark.parametrize("axes", [0, None], ids=["first", "every"])
@pytest.mark.accelerated
def test_torch_careful_product_and_wide_mean_stay_within_a_tenth(
    two_threads: None, axes: int | None
) -> None:
    """PyTorch CPU tensors: the careful product of float32 data whose products overflow,
    and the exact mean of int64 data, hold at most a tenth of the input's bytes at once
    (their statistics taken in pieces)."""
    torch = pytest.importorskip("torch")
    from anyreduce._bench._memory import peak_extra_bytes

    x = torch.from_numpy(np.random.default_rng(3).integers(1, 100, (2048, 4096)))
    for data, op in [(x.to(torch.float32), "reduce_prod"), (x, "reduce_mean")]:
        f = getattr(anyreduce, op)
        extra = peak_extra_bytes("torch", lambda f=f, data=data: f(data, axes))
        assert extra is not None
        share = extra / (data.numel() * data.element_size())
        assert share <= 0.1, (op, share)


_PIECES_FAULTS = textwrap.dedent(
    """
    import json
    import resource

    import {module} as xp

    import anyreduce

    # Made without a freed temporary: freeing a large block would raise glibc's thresholds.
    products = xp.full((1024, 2048), 3.0, dtype=xp.float32)  # every product overflows
    integers = xp.full((1024, 2048), 3, dtype=xp.int64)
    faults = {{}}
    for name, f, data, axes in [
        ("prod last", anyreduce.reduce_prod, products, 1),
        ("prod first", anyreduce.reduce_prod, products, 0),
        ("prod every", anyreduce.reduce_prod, products, None),
        ("mean first", anyreduce.reduce_mean, integers, 0),
    ]:
        f(data, axes)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        f(data, axes)
        faults[name] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps(faults))
    """
)


@pytest.mark.parametrize("module", ["numpy", "torch"])
@pytest.mark.accelerated
def test_pieces_reuse_their_freed_temporaries(module: str) -> None:
    """Statistics taken in pieces (the careful product, an int64 mean's limbs) free a
    piece's temporaries, about 3 MiB, before the next piece takes as much. glibc gave that
    memory back to the system each time and the next piece faulted it in again, page by
    page: 9,800-17,000 page faults a call on 2**21 elements, half the time of the careful
    product. Counted in a fresh process, where nothing has raised glibc's thresholds yet,
    with glibc's defaults: thresholds set by hand stop it raising them (Dask's
    ``distributed`` sets ``MALLOC_TRIM_THRESHOLD_`` in the environment of the process that
    starts a cluster)."""
    pytest.importorskip(module)
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        glibc = None
    if not glibc:
        pytest.skip("glibc's malloc only")
    script = _PIECES_FAULTS.format(module=module)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    faults = json.loads(done.stdout)
    assert all(count < 1000 for count in faults.values()), faults


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("axes", [1, 0, None], ids=["last", "first", "every"])
@pytest.mark.accelerated
def test_torch_unsigned_tensors_are_not_lifted_whole(
    two_threads: None, dtype: str, axes: int | None
) -> None:
    """PyTorch has few kernels for uint16, uint32 and uint64: the generic kernel lifts the
    tensor into a wider signed type (uint16 Sum 200% of the input, L2 1000%, uint64 Max
    300%). Large CPU tensors of them hold at most a tenth of the input's bytes at once,
    on two threads, as NumPy's arrays of the same data do."""
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(9).integers(0, 1000, (4096, 8192)).astype(dtype)
    data = torch.from_numpy(values)
    over = _over("torch", data, values.nbytes, OPS, axes, 0.1 * values.nbytes)
    assert not over, over
