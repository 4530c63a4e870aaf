"""Every registered accelerator against the generic kernel, over its declared domain.

An accelerator (``anyreduce._backends``) must give the generic kernel's values bit for bit
where it declares ``exact``, and within the contract's bound otherwise; outside the
operators and dtypes it declares, the dispatch must never call it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tracemalloc
import warnings
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce import _backends
from anyreduce._backends import Accelerator, Profile, no_accelerators
from backends import BACKENDS, TOLERANCE, Backend, accumulator, make, np_dtype, to_numpy

_REGISTERED = _backends.accelerators()

Case = tuple[tuple[int, ...], tuple[int, ...] | None]

# NumPy's layouts (and PyTorch's, through NumPy). Sums over the first axis in blocks of
# rows: a last block of 7 rows and 17 columns; two uneven runs of columns; three
# dimensions. Sums over a trailing run of two axes, in tiles of rows: rows of an odd width.
_NUMPY_LAYOUTS: list[Case] = [
    ((2**17 + 7, 17), (0,)),
    ((48, 2**16 + 3), (0,)),
    ((2**9 + 3, 64, 70), (0,)),
    ((33, 2**8, 2**8 + 3), (1, 2)),
]

# PyTorch's blocked L2: runs of a slice that end in a part-block (5 and 15 elements).
_TORCH_LAYOUTS: list[Case] = [
    ((2**10 + 3, 2**11 + 5), (1,)),
    ((2**10 + 3, 2**11 + 5), None),
]

# Data widened into float64 in slabs below the threads' size (2**18 to 2**21 elements):
# over the last axis, the first (slabs of columns, the last one short) and every axis.
_WIDENED_LAYOUTS: list[Case] = [
    ((2**9 + 3, 2**10 + 1), (1,)),
    ((2**9 + 3, 2**10 + 1), (0,)),
    ((2**9 + 3, 2**10 + 1), None),
]
_WIDENING = {"widened-in-slabs", "every-axis-in-pieces", "widened-through-numpy"}

# NumPy's one-pass totals below the threads' size (2**20 to 2**21 elements, one job, tiles
# of 2**17 elements): the last tile of rows or columns short, and an odd every-axis run.
_ONE_PASS_LAYOUTS: list[Case] = [
    ((2**10 + 3, 2**10 + 1), (1,)),
    ((2**10 + 3, 2**10 + 1), (0,)),
    ((2**10 + 3, 2**10 + 1), None),
]
_ONE_PASS = {
    "first-axis-in-one-pass",
    "every-axis-in-one-pass",
    "last-axes-in-one-pass",
    "log-sum-exp-in-one-pass",
}

# The layouts of some accelerators alone: (the cases, the accelerators, what they are).
_OWN_LAYOUTS = [
    (_TORCH_LAYOUTS, {"blocked-norm"}, "PyTorch's blocked L2"),
    (_WIDENED_LAYOUTS, _WIDENING, "the widening accelerators"),
    (_ONE_PASS_LAYOUTS, _ONE_PASS, "NumPy's one-pass totals"),
]

# Shapes and axes each accelerator is tried on: small, and large enough for the threaded
# NumPy accelerator (2**21 elements or more with a kept axis).
_CASES: list[Case] = [
    ((3, 5), (1,)),
    ((4, 3, 5), (0, 2)),
    ((7,), None),
    ((6, 4), (0,)),
    ((2, 2**20), (1,)),
    ((2**11, 2**10), (0,)),
    ((2**11, 2**10), None),
    *_NUMPY_LAYOUTS,
    *_TORCH_LAYOUTS,
    *_WIDENED_LAYOUTS,
    *_ONE_PASS_LAYOUTS,
]

_SPECIAL = {
    "float": [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-30],
}


def _backend(profile: Profile) -> Any:
    for backend in BACKENDS:
        if backend.name == profile.name:
            return backend
    pytest.skip(f"no test backend named {profile.name}")


def _values(dtype: str, shape: tuple[int, ...], special: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        low, high = max(int(info.min), -50), min(int(info.max), 50)
        return rng.integers(low, high + 1, shape).astype(dtype)
    values = rng.standard_normal(shape)
    if special:  # a third of small data, a few hundred places of large data
        flat = values.reshape(-1)
        picks = rng.choice(_SPECIAL["float"], size=min(flat.size // 3, 300))
        flat[rng.choice(flat.size, size=picks.size, replace=False)] = picks
    with np.errstate(over="ignore"):  # 3e38 is inf in float16: as intended
        return values.astype(np_dtype(dtype))


@contextlib.contextmanager
def _registered(profile: Profile, accelerators: tuple[Accelerator, ...]) -> Iterator[None]:
    """``profile`` with ``accelerators`` in place of its own, within the block."""
    before = profile.accelerators
    object.__setattr__(profile, "accelerators", accelerators)
    try:
        yield
    finally:
        object.__setattr__(profile, "accelerators", before)


def _ids(entry: tuple[Profile, Accelerator]) -> str:
    return f"{entry[0].name}-{entry[1].name}"


def test_every_accelerator_declares_its_place() -> None:
    assert _REGISTERED, "no accelerator registered"
    names = [_ids(e) for e in _REGISTERED]
    assert len(names) == len(set(names))
    for _, accelerator in _REGISTERED:
        assert accelerator.ops <= set(anyreduce._reductions.__all__)
        assert accelerator.dtypes, accelerator.name
        assert accelerator.covers.strip(), accelerator.name
        assert accelerator.earned.strip(), accelerator.name


# The generic kernel's result of each case, kept for the next accelerators that cover it:
# a case's data are made from a seed of its dtype and shape, so they are the same data, and
# the kernel's result depends on its data alone. (The cases of one shape run one after
# another; a result is the size of the output, and at most _KEPT are kept.)
_WANTED: dict[tuple[Any, ...], Any] = {}
_KEPT = 256


def _kept(cache: dict[tuple[Any, ...], Any], key: tuple[Any, ...], compute: Any) -> Any:
    """``cache[key]``, computed by ``compute()`` the first time (at most _KEPT kept)."""
    if key not in cache:
        if len(cache) >= _KEPT:
            cache.clear()
        cache[key] = compute()
    return cache[key]


def _generic(op: str, data: Any, axes: tuple[int, ...] | None, key: tuple[Any, ...]) -> Any:
    def compute() -> Any:
        with no_accelerators():
            return getattr(anyreduce, op)(data, axes)

    return _kept(_WANTED, key, compute)


@pytest.mark.parametrize("entry", _REGISTERED, ids=_ids)
@pytest.mark.parametrize("special", [False, True], ids=["normal", "specials"])
@pytest.mark.parametrize(("shape", "axes"), _CASES, ids=str)
def test_accelerator_equals_the_generic_kernel(
    entry: tuple[Profile, Accelerator],
    special: bool,
    shape: tuple[int, ...],
    axes: tuple[int, ...] | None,
) -> None:
    profile, accelerator = entry
    if (shape, axes) in _NUMPY_LAYOUTS and profile.name not in {"numpy", "torch"}:
        pytest.skip("a NumPy layout: the other libraries' large cases are above")
    for cases, names, what in _OWN_LAYOUTS:
        if (shape, axes) in cases and accelerator.name not in names:
            pytest.skip(f"a layout of {what}: the others' cases are above")
    backend = _backend(profile)
    large = math.prod(shape) > 2**16
    checked = 0
    with backend.active() as xp:
        # Large data in float32, int32 and bfloat16 (held in a carrier) only (time), in
        # float16 where it covers no float32, or in the dtypes of an accelerator that
        # covers none of them.
        large_dtypes = accelerator.dtypes & {"float32", "int32", "bfloat16"}
        if "float32" not in accelerator.dtypes:
            large_dtypes |= accelerator.dtypes & {"float16"}
        large_dtypes = large_dtypes or accelerator.dtypes
        for dtype in sorted(accelerator.dtypes):
            if not backend.has(dtype) or (large and dtype not in large_dtypes):
                continue
            values = _values(dtype, shape, special, seed=len(dtype) + len(shape))
            data = make(xp, values, dtype)
            if not profile.eager(data):  # a CUDA tensor: the dispatch offers it no accelerator
                continue
            for op in sorted(accelerator.ops):
                if dtype == "bool" and op not in {"reduce_max", "reduce_min"}:
                    continue
                normal = tuple(range(len(shape))) if axes is None else axes
                ran = accelerator.run(op, data, normal, True, profile)
                if math.prod(shape) < accelerator.min_elements:
                    # The dispatch skips it for fewer elements: it must decline them.
                    assert ran is None, f"{accelerator.name} ran {op} below min_elements"
                if ran is None:  # declined: a layout it does not cover
                    continue
                case = (dtype, shape, axes, special)
                want = _generic(op, data, axes, (profile.name, op, *case))
                checked += 1
                bound = (
                    None if accelerator.exact else _bound(op, values, normal, backend, dtype, case)
                )
                _assert_same(
                    ran, want, dtype, exact=accelerator.exact, what=f"{op} {dtype}", bound=bound
                )
    if not checked:
        pytest.skip(f"{accelerator.name} covers nothing of {shape} over {axes}")


# The contract bounds the error of a float sum by 8 eps (of the accumulator) times the sum
# of its terms' magnitudes, whatever the order of the additions. L2 and LogSum are such a
# sum under a root and a logarithm: their results are compared as squares and exponentials.
_LINEAR = {
    "reduce_sum": "sum",
    "reduce_mean": "sum",
    "reduce_l1": "sum",
    "reduce_sum_square": "sum",
    "reduce_l2": "square",
    "reduce_log_sum": "exp",
}


# The oracle's magnitude is sum |x| for Sum, Mean, L1 and LogSum and sum x**2 for
# SumSquare and L2 (anyreduce.testing.magnitude): one of each per case, kept for the next
# operators and accelerators of the case (each takes 0.5-2.5 s on 2**21 values).
_MAGNITUDE_OF = {
    "reduce_sum": "reduce_sum",
    "reduce_mean": "reduce_sum",
    "reduce_l1": "reduce_sum",
    "reduce_log_sum": "reduce_sum",
    "reduce_sum_square": "reduce_sum_square",
    "reduce_l2": "reduce_sum_square",
}
_MAGNITUDES: dict[tuple[Any, ...], np.ndarray] = {}


def _magnitude(
    op: str, values: np.ndarray, axes: tuple[int, ...], key: tuple[Any, ...] | None
) -> Any:
    kind = _MAGNITUDE_OF[op]

    def compute() -> Any:
        return reference.magnitude(kind, values.astype(np.float64), axes, keepdims=True)

    return compute() if key is None else _kept(_MAGNITUDES, (kind, *key), compute)


def _bound(
    op: str,
    values: np.ndarray,
    axes: tuple[int, ...],
    backend: Backend,
    dtype: str,
    key: tuple[Any, ...] | None = None,
) -> tuple[str, np.ndarray] | None:
    """How far apart two results that both meet the contract may be, as (form, bound):
    ``form`` of each result (itself, its square, its exponential) may differ by
    ``bound``, twice the contract's own, where ``op`` accumulates a float sum. ``key``
    names a registry case's data (its dtype, shape, axes and kind), for the magnitudes
    kept between calls."""
    if op not in _LINEAR or not dtype.startswith(("float", "bfloat")):
        return None
    acc = accumulator(backend, dtype)
    mag = _magnitude(op, values, axes, key)
    if op == "reduce_mean":
        mag = mag / max(1, math.prod(values.shape[a] for a in axes))
    return _LINEAR[op], 2 * 8 * float(np.finfo(acc).eps) * mag


def _assert_same(
    got: Any,
    want: Any,
    dtype: str,
    *,
    exact: bool,
    what: str,
    bound: tuple[str, np.ndarray] | None = None,
) -> None:
    assert got.dtype == want.dtype, what
    assert tuple(got.shape) == tuple(want.shape), what
    g, w = to_numpy(got), to_numpy(want)
    if dtype == "bool" or not dtype.startswith(("float", "bfloat")):
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    g, w = g.astype(np.float64), w.astype(np.float64)
    if exact:  # bit for bit: NaN where NaN, and the sign of zero
        np.testing.assert_array_equal(g, w, err_msg=what)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=what)
        return
    if bound is not None:
        # Where a slice cancels, two orders of addition may both meet the contract and
        # still differ by far more than the result (3e38 - 3e38 + 1.4): those elements are
        # held to the contract's bound, on the sum each result stands for.
        form, allowed = bound
        with np.errstate(over="ignore", invalid="ignore"):
            gs, ws = {"sum": (g, w), "square": (g * g, w * w), "exp": (np.exp(g), np.exp(w))}[form]
            within = (
                np.isfinite(g)
                & np.isfinite(w)
                & (np.abs(gs - ws) <= allowed + 8 * TOLERANCE[dtype] * np.maximum(abs(gs), abs(ws)))
            )
        g = np.where(within, w, g)
    np.testing.assert_allclose(g, w, rtol=8 * TOLERANCE[dtype], equal_nan=True, err_msg=what)


def _tied_extremes(op: str, dtype: str, shape: tuple[int, ...], tie: str) -> np.ndarray:
    """Data whose extreme ``op`` finds is a tie: 0.0 and -0.0 (``tie="zeros"``), or NaN
    with its sign bit clear and set (``"nans"``), at a few hundred places each."""
    rng = np.random.default_rng(7)
    values = np.abs(rng.standard_normal(shape))
    if op == "reduce_max":
        values = -values
    flat = values.reshape(-1)
    places = rng.choice(flat.size, size=min(flat.size, 600), replace=False)
    ties = [0.0, -0.0] if tie == "zeros" else [math.nan, -math.nan]
    flat[places] = np.resize(ties, places.size)
    return values.astype(np_dtype(dtype))


@pytest.mark.parametrize("entry", _REGISTERED, ids=_ids)
@pytest.mark.parametrize("tie", ["zeros", "nans"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [((3, 5), (1,)), ((2**11, 2**10), None), ((2**11, 2**10), (1,)), ((2**11, 2**10), (0,))],
    ids=str,
)
def test_exact_extremes_keep_the_kernels_zero_and_nan(
    entry: tuple[Profile, Accelerator],
    tie: str,
    shape: tuple[int, ...],
    axes: tuple[int, ...] | None,
) -> None:
    """Which of two tied zeros (or NaNs) a Max or Min returns is its loop's choice: an
    exact accelerator returns the generic kernel's, sign bit included."""
    profile, accelerator = entry
    ops = sorted(accelerator.ops & {"reduce_max", "reduce_min"})
    floats = sorted(accelerator.dtypes & {"float16", "float32", "float64"})
    if not (accelerator.exact and ops and floats):
        pytest.skip(f"{accelerator.name}: no exact float Max or Min")
    backend = _backend(profile)
    normal = tuple(range(len(shape))) if axes is None else axes
    checked = 0
    with backend.active() as xp:
        for dtype in floats:
            if not backend.has(dtype):
                continue
            for op in ops:
                data = make(xp, _tied_extremes(op, dtype, shape, tie), dtype)
                if not profile.eager(data):
                    continue
                ran = accelerator.run(op, data, normal, False, profile)
                if ran is None:
                    continue
                with no_accelerators():
                    want = getattr(anyreduce, op)(data, axes, keepdims=False)
                checked += 1
                _assert_same(ran, want, dtype, exact=True, what=f"{op} {dtype} {tie}")
    if not checked:
        pytest.skip(f"{accelerator.name} covers nothing of {shape} over {axes}")


@pytest.mark.parametrize("entry", _REGISTERED, ids=_ids)
def test_dispatch_never_calls_an_accelerator_outside_its_domain(
    entry: tuple[Profile, Accelerator],
) -> None:
    profile, accelerator = entry
    backend = _backend(profile)
    calls: list[tuple[str, Any]] = []

    def spy(op: str, x: Any, axes: Any, keepdims: bool, p: Profile) -> Any:
        calls.append((op, x.dtype))
        assert math.prod(x.shape) >= accelerator.min_elements, f"{accelerator.name}: too small"
        return original(op, x, axes, keepdims, p)

    original = accelerator.run
    replaced = tuple(
        dataclasses.replace(a, run=spy) if a is accelerator else a for a in profile.accelerators
    )
    with _registered(profile, replaced), backend.active() as xp:
        for dtype in ("float32", "int16", "bool"):
            if not backend.has(dtype):
                continue
            data = make(xp, _values(dtype, (4, 6), False, 1), dtype)
            for op in anyreduce._reductions.__all__:
                if dtype == "bool" and op not in {"reduce_max", "reduce_min"}:
                    continue
                getattr(anyreduce, op)(data, 1)
    for op, dt in calls:
        assert op in accelerator.ops, f"{accelerator.name} ran {op}"
        assert _backends._base.dtype_name(xp, dt) in accelerator.dtypes


@pytest.mark.parametrize("entry", _REGISTERED, ids=_ids)
def test_no_accelerator_runs_when_they_are_off(entry: tuple[Profile, Accelerator]) -> None:
    profile, accelerator = entry
    backend = _backend(profile)

    def refuse(*args: Any) -> Any:
        raise AssertionError(f"{accelerator.name} ran with accelerators off")

    replaced = tuple(dataclasses.replace(a, run=refuse) for a in profile.accelerators)
    with _registered(profile, replaced), backend.active() as xp, no_accelerators():
        data = make(xp, _values("float32", (4, 6), False, 2), "float32")
        for op in sorted(accelerator.ops):
            getattr(anyreduce, op)(data, 1)


@pytest.mark.accelerated
def test_the_dispatch_keeps_freed_temporaries_for_eager_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """glibc's trim threshold is raised at the first eager call (keep_freed_pieces): a
    kernel's temporaries of about 1 MiB are then not faulted in anew each call."""
    calls: list[None] = []
    monkeypatch.setattr(_backends, "keep_freed_pieces", lambda: calls.append(None))
    anyreduce.reduce_l2(np.ones((4, 6), np.int8), 1)
    assert calls
    calls.clear()
    with no_accelerators():  # the generic kernels alone: nothing but them runs
        anyreduce.reduce_l2(np.ones((4, 6), np.int8), 1)
    assert not calls


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [(1,), (0, 1)], ids=["last", "every"])
def test_blocked_norm_keeps_the_range_of_the_generic_kernel(
    dtype: str, axes: tuple[int, ...]
) -> None:
    """PyTorch's ``blocked-norm`` on rows whose sums of squares leave the float range:
    a row of zeros is 0 (told apart from underflow by its largest and smallest values);
    a row of tiny values, whose squares underflow (over the last axis), and a row whose
    squares overflow decline the data to the next accelerator, and the call keeps their
    L2."""
    torch = pytest.importorskip("torch")
    (accelerator,) = [a for p, a in _REGISTERED if a.name == "blocked-norm"]
    from anyreduce._backends._torch import PROFILE

    tiny, huge = (1e-30, 1e20) if dtype == "float32" else (1e-200, 1e160)
    values = np.random.default_rng(9).standard_normal((1024, 2**11 + 5)).astype(dtype)
    values[3] = 0.0
    x = torch.from_numpy(values)
    got = accelerator.run("reduce_l2", x, axes, True, PROFILE)
    with no_accelerators():
        want = anyreduce.reduce_l2(x, list(axes))
    assert got is not None
    bound = _bound("reduce_l2", values, axes, _backend(PROFILE), dtype)
    _assert_same(got, want, dtype, exact=False, what=f"{dtype} {axes}", bound=bound)
    if axes == (1,):
        assert float(got[3, 0]) == 0.0
        assert math.copysign(1.0, float(got[3, 0])) == 1.0
    for row, value in [(4, tiny), (6, huge)]:
        values[row, :-7] = value
        values[row, -7:] = -value
        ran = accelerator.run("reduce_l2", torch.from_numpy(values), axes, True, PROFILE)
        if value == huge or axes == (1,):  # over every axis, the other rows keep the range
            assert ran is None
        got = anyreduce.reduce_l2(torch.from_numpy(values), list(axes))
        with no_accelerators():
            want = anyreduce.reduce_l2(torch.from_numpy(values), list(axes))
        _assert_same(got, want, dtype, exact=False, what=f"{dtype} {axes} {value}", bound=None)
        if axes == (1,):
            expected = value * math.sqrt(values.shape[1])
            np.testing.assert_allclose(float(got[row, 0]), expected, rtol=1e-6)
        values[row] = 0.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [(1,), (0,), (0, 1)], ids=["last", "first", "every"])
def test_one_pass_totals_take_the_careful_terms_bit_for_bit(
    dtype: str, axes: tuple[int, ...]
) -> None:
    """NumPy's one-pass totals of the careful forms' terms (the data scaled by 2**-64;
    float32 squares in float64), written a buffer at a time, equal the generic
    ``plain_total`` of the same terms bit for bit, on rows and columns of odd lengths."""
    import array_api_compat

    from anyreduce._agnostic._kernels import plain_total, scaled_down, wide_square
    from anyreduce._backends import _numpy

    one_pass = {
        (1,): _numpy._last_axes_total,
        (0,): _numpy._first_axis_total,
        (0, 1): _numpy._every_axis_total,
    }[axes]
    values = (np.random.default_rng(11).standard_normal((2**11 + 3, 2**10 + 7)) * 1e30).astype(
        dtype
    )
    xp = _numpy._shim(array_api_compat.array_namespace(values))
    terms = [(scaled_down, values.dtype)]
    if dtype == "float32":
        terms.append((wide_square, np.dtype(np.float64)))
    for term, acc in terms:
        with np.errstate(all="ignore"):
            want = plain_total(xp, term, values, axes, True, acc)
            got = one_pass(xp, term, values, axes, True, acc)
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes(), term.__name__


_LINEAR_TOTALS = {"reduce_sum", "reduce_mean", "reduce_log_sum"}


def _few_suspect_rows(dtype: str, shape: tuple[int, int], kind: str) -> np.ndarray:
    """Normal data with a few suspect rows: a NaN, an infinity, partial sums that overflow
    ([huge, huge, -huge, ...]), squares that underflow, all zeros, or one of each
    (``"each"``)."""
    huge, tiny = (3e38, 1e-30) if dtype == "float32" else (1.7e308, 1e-200)
    values = np.random.default_rng(13).standard_normal(shape)
    width = shape[1]
    cancelling = np.resize([huge, huge, -huge], width)
    rows = {
        "nan": (5, np.where(np.arange(width) == 7, math.nan, 1.0)),
        "inf": (40, np.where(np.arange(width) == 3, math.inf, 1.0)),
        "overflow": (77, cancelling),
        "underflow": (200, np.full(width, tiny)),
        "zeros": (301, np.zeros(width)),
    }
    for name, (row, filled) in rows.items():
        if kind in (name, "each"):
            values[row] = filled
    return values.astype(dtype)


def _computed_again(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The count of slices each ``CarefulLater`` computes again alone, call after call
    (none where it noted none)."""
    from anyreduce._backends._common import CarefulLater

    again: list[int] = []
    finish = CarefulLater.finish

    def spy(self: CarefulLater, *args: Any) -> Any:
        if self.flags is not None and self.flags is not False:
            again.append(int(np.count_nonzero(to_numpy(self.flags))))
        return finish(self, *args)

    monkeypatch.setattr(CarefulLater, "finish", spy)
    return again


# The accelerators that take a few suspect slices alone, by layout; the last is PyTorch's.
_LATER = {
    (1,): ["last-axes-in-one-pass", "careful-sums-in-slabs"],
    (0,): ["first-axis-in-one-pass", "careful-sums-in-slabs"],
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [(1,), (0,)], ids=["last", "first"])
@pytest.mark.parametrize("kind", ["nan", "inf", "overflow", "underflow", "zeros", "each"])
@pytest.mark.parametrize("torch_tensor", [False, True], ids=["numpy", "torch"])
def test_a_few_suspect_slices_are_computed_alone(
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    axes: tuple[int, ...],
    kind: str,
    torch_tensor: bool,
) -> None:
    """Where a few rows (or columns) are suspect, NaN, infinite, overflowing on the way,
    underflowing squares or all zeros, NumPy's one-pass accelerators and PyTorch's
    careful sums compute those slices again alone (a lone column taken twice): bit for bit
    the generic kernel (PyTorch's: within the bound, as the accelerator is held)."""
    again = _computed_again(monkeypatch)
    name = _LATER[axes][torch_tensor]
    rows = _few_suspect_rows(dtype, (2**10 + 3, 2**11 + 1), kind)
    values = np.ascontiguousarray(rows.T) if axes == (0,) else rows
    data: Any = values
    if torch_tensor:
        data = pytest.importorskip("torch").from_numpy(values)
    found = [(p, a) for p, a in _REGISTERED if a.name == name]
    if not found:
        pytest.skip(f"{name} is not registered")
    ((profile, accelerator),) = found
    for op in sorted(accelerator.ops):
        again.clear()
        got = accelerator.run(op, data, axes, True, profile)
        what = f"{op} {dtype} {kind}"
        assert got is not None, what
        with no_accelerators():
            want = getattr(anyreduce, op)(data, list(axes))
        _assert_same(got, want, dtype, exact=accelerator.exact, what=what)
        # The rows that are suspect: a total that is not finite (Sum, Mean, LogSum); for
        # L2, a sum of squares that is inf, 0 or below the smallest normal number / eps**2.
        careful = {"reduce_l2": {"inf", "overflow", "underflow", "zeros"}}.get(
            op, {"nan", "inf", "overflow"} if op in _LINEAR_TOTALS else set()
        )
        present = {"nan", "inf", "overflow", "underflow", "zeros"} if kind == "each" else {kind}
        assert again == ([len(careful & present)] if careful & present else []), what


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "bfloat16", ">f4"], ids=lambda d: d.strip(">")
)
@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((307, 433), (1,)),
        ((433, 307), (0,)),
        ((307, 2, 217), (1, 2)),
        ((431, 307), (0,)),
    ],
    ids=["last", "first", "last-two", "first-odd-block"],
)
@pytest.mark.parametrize("kind", ["nan", "inf", "overflow", "underflow", "zeros", "each"])
def test_careful_when_needed_computes_a_few_suspect_slices_alone(
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    kind: str,
) -> None:
    """NumPy's careful-when-needed, on C-ordered data of ``LATER_ELEMENTS[op]`` or more (under
    the one-pass accelerators' size), computes a few suspect rows or columns again alone:
    bit for bit the generic kernel, whatever the dtype (carried ones included)."""
    from anyreduce._backends import _numpy

    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    again = _computed_again(monkeypatch)
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if a.name == "careful-when-needed" and p.name == "numpy"
    ]
    rows = _few_suspect_rows("float32", (307, math.prod(shape) // 307), kind)
    values = np.ascontiguousarray(rows.T) if axes == (0,) else rows
    with np.errstate(over="ignore"):  # float16: the overflowing row becomes infinite
        values = values.reshape(shape).astype(np_dtype(dtype) if dtype != ">f4" else dtype)
    for op in sorted(accelerator.ops):
        assert values.flags.c_contiguous
        assert values.size >= _numpy.LATER_ELEMENTS[op]
        again.clear()
        got = accelerator.run(op, values, axes, True, profile)
        with no_accelerators():
            want = getattr(anyreduce, op)(values, list(axes))
        what = f"{op} {dtype} {kind}"
        assert got.dtype == want.dtype, what
        assert got.shape == want.shape, what
        assert got.tobytes() == want.tobytes(), what
        if kind == "nan" and op in _LINEAR_TOTALS and dtype in ("float32", "float64"):
            assert again == [1], what  # the NaN's row alone


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes", [(1,), (0,)], ids=["last", "first"])
@pytest.mark.parametrize("kind", ["nan", "inf", "overflow", "zeros", "each"])
def test_torch_careful_later_computes_a_few_suspect_slices_alone(
    monkeypatch: pytest.MonkeyPatch, dtype: str, axes: tuple[int, ...], kind: str
) -> None:
    """PyTorch's careful-later, on contiguous CPU tensors of its sizes, and its careful
    product through NumPy compute a few suspect rows or columns again alone: within the
    bound of the generic kernel, and only those slices (the NaN's, for the linear totals
    and Prod)."""
    torch = pytest.importorskip("torch")
    again = _computed_again(monkeypatch)
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if (p.name, a.name) == ("torch", "careful-later")
    ]
    rows = _few_suspect_rows(dtype, (2**10 + 3, 2**10 + 7), kind)
    if kind in ("nan", "inf"):  # products in range but for the suspect row
        rows = np.where(np.isfinite(rows), 1 + 0.001 * rows, rows).astype(dtype)
    data = torch.from_numpy(np.ascontiguousarray(rows.T) if axes == (0,) else rows)
    # Larger products go through NumPy's pieces first, with CarefulLater too.
    ((_, through),) = [
        (p, a)
        for p, a in _REGISTERED
        if (p.name, a.name) == ("torch", "careful-product-through-numpy")
    ]
    runs = [(op, accelerator) for op in sorted(accelerator.ops)] + [("reduce_prod", through)]
    for op, chosen in runs:
        again.clear()
        got = chosen.run(op, data, axes, True, profile)
        what = f"{chosen.name} {op} {dtype} {kind}"
        assert got is not None, what
        with no_accelerators():
            want = getattr(anyreduce, op)(data, list(axes))
        _assert_same(got, want, dtype, exact=False, what=what)
        if kind == "nan" and op != "reduce_l2":
            assert again == [1], what  # the NaN's row alone


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((1000, 67), (1,)), ((67, 1000), (0,)), ((500, 2, 67), (1, 2)), ((67, 50, 20), (0,))],
    ids=["last", "first", "last-two", "first-of-three"],
)
@pytest.mark.parametrize("rows", [1, 2, 17, 43, 300], ids=lambda n: f"{n}-suspect")
@pytest.mark.parametrize("keepdims", [True, False], ids=["keepdims", "dropped"])
def test_jax_jit_computes_a_few_suspect_slices_alone(
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    rows: int,
    keepdims: bool,
) -> None:
    """JAX's jit kernel over trailing axes or the first axis: up to a 16th of the slices
    suspect (1, 2, 17 and 43 of 1000: counts of 1, 16 and 256 gathered) computed again
    alone, more (300) the careful form under lax.cond; within the bound of the generic
    kernel either way, every kind of suspect slice at once."""
    jax = pytest.importorskip("jax")
    from anyreduce._backends import _jax

    monkeypatch.setattr(_jax, "_LATER_ELEMENTS", 2**16)  # its size, smaller (time)
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if (p.name, a.name) == ("jax", "jit")
    ]
    values = np.random.default_rng(19).standard_normal((1000, 67)).astype(np.float32)
    picked = np.random.default_rng(23).choice(1000, rows, replace=False)
    fills = [math.nan, math.inf, -math.inf, 3e38, 0.0, 1e-30]
    for i, row in enumerate(picked):
        values[row, :: 1 + i % 5] = fills[i % len(fills)]
    values = np.ascontiguousarray(values.T) if axes == (0,) else values
    data = jax.numpy.asarray(values.reshape(shape))
    for op in ["reduce_sum", "reduce_mean", "reduce_log_sum", "reduce_l2", "reduce_prod"]:
        got = accelerator.run(op, data, axes, keepdims, profile)
        with no_accelerators():
            want = getattr(anyreduce, op)(data, list(axes), keepdims=keepdims)
        _assert_same(got, want, "float32", exact=False, what=f"{op} {rows}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [((300, 70), (1,)), ((300, 70), (0,)), ((5, 6, 7), (0, 2)), ((64,), (0,)), ((9, 9), (0, 1))],
    ids=["last", "first", "outer-two", "vector", "every"],
)
@pytest.mark.parametrize("share", [0.0, 0.1, 0.5, 1.0], ids=lambda s: f"{s:.0%}-special")
def test_jax_log_sum_exp_shift_by_xla_max_is_the_nan_searching_kernel_bit_for_bit(
    dtype: str, shape: tuple[int, ...], axes: tuple[int, ...], share: float
) -> None:
    """LogSumExp's shift taken by XLA's max (JAX's ``Profile.peak``), which drops NaN on
    the CPU, gives the bits of the kernel whose shift is the shim's max, which searches
    for NaN: NaN of either sign, infinities of both signs, values that overflow exp, in a
    tenth, half and every place of a slice; compiled by the ``jit`` accelerator and by a
    user's ``jax.jit`` alike."""
    jax = pytest.importorskip("jax")
    from anyreduce._agnostic._kernels import largest
    from anyreduce._backends import _jax

    backend = next(b for b in BACKENDS if b.name.startswith("jax") and b.has(dtype))
    searching = dataclasses.replace(_jax.PROFILE, peak=largest)
    rng = np.random.default_rng(29)
    values = rng.standard_normal(shape)
    special = rng.random(shape) < share
    fills = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3e38, -3e38, 1e-30, 1000.0, -1000.0]
    values[special] = rng.choice(fills, size=int(special.sum()))
    with backend.active() as xp, np.errstate(over="ignore"):  # 3e38 is inf in float16
        data = make(xp, values, dtype)
        for keepdims in (True, False):

            def kernel(x: Any, profile: Profile = searching, keep: bool = keepdims) -> Any:
                return _backends.run_kernel(
                    profile, xp, "reduce_log_sum_exp", x, axes, keep, profile.select
                )

            want = jax.jit(kernel)(data)
            got = [
                _jax._compiled("reduce_log_sum_exp", axes, keepdims)(data),
                jax.jit(lambda x, k=keepdims: anyreduce.reduce_log_sum_exp(x, axes, keepdims=k))(
                    data
                ),
            ]
            for result in got:
                assert result.dtype == want.dtype
                bits = [
                    np.asarray(jax.device_get(r)).astype(np.float64).tobytes()
                    for r in (result, want)
                ]
                assert bits[0] == bits[1], (dtype, keepdims)


@pytest.mark.parametrize(
    ("shape", "axes", "where", "count"),
    [
        ((515, 1025), (1,), (7, slice(None)), 1),
        ((1025, 515), (0,), (slice(None), 7), 1),
        ((35, 16, 1025), (2,), (3, 9, slice(None)), 1),
        ((1025, 35, 16), (0,), (slice(None), 3, 9), 1),
        ((1025, 35, 16), (0,), (slice(None), slice(3, 5), 9), 2),
    ],
    ids=str,
)
@pytest.mark.parametrize("kind", ["nan", "inf", "zero"])
def test_a_few_suspect_products_are_computed_alone(
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    where: tuple[Any, ...],
    count: int,
    kind: str,
) -> None:
    """``careful-product-in-pieces`` on data whose products are in range but for a row or
    column (two, in the last case) holding a NaN, an infinity or a zero: those slices
    alone take the zero count and the careful product, on a copy indexed out of the data
    (a slab of columns, as ``threads`` hands it, is not copied whole), within the bound;
    the others' products are NumPy's own."""
    again = _computed_again(monkeypatch)
    name = "careful-product-in-pieces"
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if (p.name, a.name) == ("numpy", name)
    ]
    rng = np.random.default_rng(17)
    values = (1 + 0.001 * rng.standard_normal(shape)).astype(np.float32)
    values[where] = {"nan": math.nan, "inf": math.inf, "zero": 0.0}[kind]
    if axes == (0,):  # a view of every other column, as a slab of columns is a view
        wide = np.empty((shape[0], 2 * math.prod(shape[1:])), np.float32)
        wide[:, ::2] = values.reshape(shape[0], -1)
        values = wide[:, ::2].reshape(shape)
    accelerator.run("reduce_prod", values, axes, True, profile)  # first calls' caches
    again.clear()
    tracemalloc.start()
    try:
        got = accelerator.run("reduce_prod", values, axes, True, profile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with no_accelerators():
        want = anyreduce.reduce_prod(values, list(axes))
    assert got is not None
    _assert_same(got, want, "float32", exact=False, what=kind)
    assert again == [count]
    assert peak < values.nbytes / 4, f"{peak / values.nbytes:.0%} of the input"


_NEG_NAN = -np.float64(np.nan)

# Data for the careful total over every axis: (what to put where, whether the pieces whose
# plain sums are not finite decide it without a pass over the others; None: not asked, as
# the plain total of NaNs of two bit patterns is the kernel's own).
_DECIDING: dict[str, tuple[list[tuple[int, Any]], bool | None]] = {
    "nan": ([(5, np.nan)], True),
    "-nan": ([(5, _NEG_NAN)], True),
    "nan and -nan": ([(5, np.nan), (2**20 + 9, _NEG_NAN)], None),
    "inf": ([(5, np.inf)], True),
    "-inf": ([(5, -np.inf)], True),
    "both infinities": ([(5, np.inf), (2**20 + 9, -np.inf)], True),
    "nan and inf": ([(5, np.nan), (2**20 + 9, np.inf)], True),
    "overflow": ([(i, "huge") for i in range(100, 104)], False),
    "nan and overflow": ([(5, np.nan), *[(i, "huge") for i in range(2**20, 2**20 + 4)]], True),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", list(_DECIDING))
def test_every_axis_careful_total_from_the_pieces_that_decide_it(
    monkeypatch: pytest.MonkeyPatch, dtype: str, kind: str
) -> None:
    """Over every axis, the careful total (the terms scaled by 2**-64) of data holding a
    NaN or an infinity is decided by the pieces whose plain sums are not finite; where it
    is not (NaNs of two bit patterns, partial sums that overflow), every piece is summed.
    The bits of the generic kernel either way, NaN payload and sign included."""
    from anyreduce._backends import _numpy

    decided: list[bool] = []
    decided_by = _numpy._decided_by

    def spy(*args: Any) -> Any:
        found = decided_by(*args)
        decided.append(found is not None)
        return found

    monkeypatch.setattr(_numpy, "_decided_by", spy)
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if (p.name, a.name) == ("numpy", "every-axis-in-one-pass")
    ]
    huge = float(np.finfo(dtype).max) / 2
    values = np.random.default_rng(21).standard_normal(2**21).astype(dtype)
    places, deciding = _DECIDING[kind]
    for place, value in places:
        values[place] = huge if value == "huge" else value
    values = values.reshape(2**11, 2**10)
    for op in sorted(_LINEAR_TOTALS):
        decided.clear()
        got = accelerator.run(op, values, (0, 1), True, profile)
        with no_accelerators():
            want = getattr(anyreduce, op)(values, None)
        assert got is not None
        assert got.dtype == want.dtype, op
        assert got.tobytes() == want.tobytes(), (op, got, want)
        assert decided == ([] if deciding is None else [deciding]), op


# --- CUDA: where a host read is not allowed -------------------------------------------------


# Small data: clean (the accelerator must run), with IEEE specials, and over the range
# (slices of 10**-45 to 10**38 in float32: L2 totals under the floor, products that
# underflow or overflow, sums that overflow), in the layouts it takes and those it declines.
_SMALL_LAYOUTS: list[tuple[tuple[int, ...], tuple[int, ...], str]] = [
    ((3, 2, 2), (1,), "c"),
    ((3, 2, 2), (0, 1, 2), "c"),
    ((3, 2, 2), (1, 2), "c"),
    ((5, 7), (0,), "c"),
    ((7, 5), (0,), "transposed"),
    ((5, 14), (1,), "strided"),
    ((1,), (0,), "c"),
    ((64, 256), (1,), "c"),
    ((17, 3), (0,), "c"),  # NumPy's declines: a leading axis of more than 16
    ((4, 3, 5), (0, 2), "c"),  # NumPy's declines: not a trailing run
    ((64, 257), (1,), "c"),  # NumPy's declines: more than 2**14 elements (half: taken)
    ((257, 256), (1,), "c"),  # declined: more than 2**16 elements (half: taken)
    ((511, 512), (1,), "c"),  # half: taken, the largest of a row's length; others declined
    ((512, 512), (1,), "c"),  # declined: 2**18 elements
]


# The largest power of ten of each float type: "range" data go 7 below its smallest.
_TOP_POWER = {"float16": 4, "bfloat16": 38, "float32": 38, "float64": 307}


def _small_values(dtype: str, shape: tuple[int, ...], kind: str) -> np.ndarray:
    rng = np.random.default_rng(len(shape) + len(kind))
    # Magnitudes in [0.9, 1.1): the products of 256 of them stay finite and far from 0.
    values = rng.uniform(0.9, 1.1, shape) * rng.choice([-1.0, 1.0], shape)
    flat = values.reshape(-1)
    if kind == "specials":
        picks = rng.choice(_SPECIAL["float"], size=max(1, flat.size // 3))
        flat[rng.choice(flat.size, size=picks.size, replace=False)] = picks
    elif kind == "range":
        top = _TOP_POWER[dtype]
        flat *= 10.0 ** rng.integers(-top - 7, top + 1, flat.size)
    with np.errstate(over="ignore", under="ignore"):
        return values.astype(np_dtype(dtype))


def _tensor_on(values: np.ndarray) -> Any:
    """A tensor on the memory of ``values``, with its strides (ml_dtypes' bfloat16 as
    PyTorch's)."""
    import torch

    if values.dtype == np_dtype("bfloat16"):
        return torch.from_numpy(values.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(values)


def _bytes(t: Any) -> bytes:
    """The bytes of tensor ``t``'s values, in order (bfloat16 as the float32 that holds
    each of its values exactly: NumPy has no bfloat16)."""
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy(force=True).tobytes()  # force: a gradient may be a ZeroTensor


def _declares_small(library: str, values: np.ndarray, axes: tuple[int, ...]) -> bool:
    """Whether ``library``'s small-in-few-steps declares data ``values`` over ``axes``:
    NumPy's, at most 2**14 elements over a trailing run of axes or one axis of at most
    16; PyTorch's, at most 2**16 elements over any axes. Float16 and bfloat16: fewer than
    2**18 elements."""
    half = values.dtype.itemsize == 2
    if values.size > (2**18 - 1 if half else 2**16 if library == "torch" else 2**14):
        return False
    return library == "torch" or (
        axes == tuple(range(values.ndim - len(axes), values.ndim))
        or (len(axes) == 1 and values.shape[axes[0]] <= 16)
    )


_SMALL_DTYPES = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", _SMALL_DTYPES)
@pytest.mark.parametrize("kind", ["clean", "specials", "range"])
@pytest.mark.parametrize(("shape", "axes", "layout"), _SMALL_LAYOUTS, ids=str)
@pytest.mark.parametrize("keepdims", [True, False], ids=["keepdims", "dropped"])
def test_small_in_few_steps_is_the_generic_kernel_bit_for_bit(
    library: str,
    dtype: str,
    kind: str,
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    layout: str,
    keepdims: bool,
) -> None:
    """small-in-few-steps gives the generic kernel's bytes where it runs, declines every
    result the kernel would take the careful form of, and runs on clean data in the
    layouts it declares (NumPy's and PyTorch's, on the CPU)."""
    entries = [
        (p, a) for p, a in _REGISTERED if a.name == "small-in-few-steps" and p.name == library
    ]
    if not entries:
        pytest.skip(f"{library} is not installed")
    ((profile, accelerator),) = entries
    if dtype not in accelerator.dtypes:
        pytest.skip(f"{library}'s small-in-few-steps declares no {dtype}")
    if np_dtype(dtype) is None:
        pytest.skip("ml_dtypes is not installed")
    values = _small_values(dtype, shape, kind)
    if layout == "transposed":
        values = values.T.copy().T
    elif layout == "strided":
        values = values[:, ::2]
    declared = _declares_small(library, values, axes)
    before = values.copy()
    data = _tensor_on(values) if library == "torch" else values
    for op in sorted(accelerator.ops):
        got = accelerator.run(op, data, axes, keepdims, profile)
        what = f"{op} {dtype} {kind}"
        if not declared:
            assert got is None, what
            continue
        if kind == "clean":
            assert got is not None, what
        if got is None:
            continue
        with no_accelerators():
            want = to_numpy(getattr(anyreduce, op)(data, list(axes), keepdims=keepdims))
        got = to_numpy(got)
        assert got.dtype == want.dtype, what
        assert got.shape == want.shape, what
        assert got.tobytes() == want.tobytes(), what
    assert values.tobytes() == before.tobytes()  # unchanged (NaN's bits included)


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf, 0.0, "largest", "smallest"], ids=str)
@pytest.mark.parametrize("keepdims", [True, False], ids=["keepdims", "dropped"])
def test_small_in_few_steps_tests_every_value_of_a_few(
    library: str, dtype: str, special: float | str, keepdims: bool
) -> None:
    """A result of a few values is tested value by value in Python: one value the kernel
    would take the careful form of (or NaN), in any place, declines the call or gives
    the generic kernel's bytes."""
    entries = [
        (p, a) for p, a in _REGISTERED if a.name == "small-in-few-steps" and p.name == library
    ]
    if not entries:
        pytest.skip(f"{library} is not installed")
    ((profile, accelerator),) = entries
    info = np.finfo(np_dtype(dtype))
    value = {"largest": float(info.max), "smallest": float(info.smallest_subnormal)}.get(
        special, special
    )
    clean = _small_values(dtype, (3, 2, 2), "clean")
    for place in np.ndindex(3, 2):
        values = clean.copy()
        values[place[0], :, place[1]] = value
        data = _tensor_on(values) if library == "torch" else values
        for op in sorted(accelerator.ops):
            got = accelerator.run(op, data, (1,), keepdims, profile)
            if got is None:
                continue
            with no_accelerators():
                want = to_numpy(getattr(anyreduce, op)(data, [1], keepdims=keepdims))
            assert to_numpy(got).tobytes() == want.tobytes(), f"{op} {place}"


@pytest.mark.parametrize("dtype", _SMALL_DTYPES)
@pytest.mark.parametrize("kind", ["clean", "ties"])
@pytest.mark.parametrize(("shape", "axes", "layout"), _SMALL_LAYOUTS[:8], ids=str)
def test_small_in_few_steps_gives_the_generic_gradients(
    dtype: str, kind: str, shape: tuple[int, ...], axes: tuple[int, ...], layout: str
) -> None:
    """PyTorch's small-in-few-steps on tensors that require grad: the generic kernel's
    values and gradients, first and second, bit for bit (ties: Max, Min and LogSumExp's
    shift share the gradient among equal largest values)."""
    torch = pytest.importorskip("torch")
    ((profile, accelerator),) = [
        (p, a) for p, a in _REGISTERED if a.name == "small-in-few-steps" and p.name == "torch"
    ]
    if dtype not in accelerator.dtypes:
        pytest.skip(f"small-in-few-steps declares no {dtype}")
    if np_dtype(dtype) is None:
        pytest.skip("ml_dtypes is not installed")
    values = _small_values(dtype, shape, "clean")
    if kind == "ties":
        values = (np.round(values.astype(np.float64) * 4) / 4).astype(values.dtype)
    if layout == "transposed":
        values = values.T.copy().T
    elif layout == "strided":
        values = values[:, ::2]
    weights = torch.from_numpy(np.random.default_rng(5).standard_normal(values.shape))
    for op in sorted(accelerator.ops):
        ours, generic = (_tensor_on(values).requires_grad_(True) for _ in range(2))
        got = accelerator.run(op, ours, axes, False, profile)
        assert got is not None, op
        with no_accelerators():
            want = getattr(anyreduce, op)(generic, list(axes), keepdims=False)
        assert _bytes(got) == _bytes(want), op
        grads = []
        for x, result in ((ours, got), (generic, want)):
            (first,) = torch.autograd.grad(result.sum(), x, create_graph=True)
            second = None
            if first.requires_grad:  # not for Sum, Mean, Max and Min: constant in x
                (second,) = torch.autograd.grad((first * weights.to(first.dtype)).sum(), x)
            grads.append((first.detach(), second))
        (first, second), (first_want, second_want) = grads
        assert _bytes(first) == _bytes(first_want), op
        assert (second is None) == (second_want is None), op
        if second is not None:
            assert _bytes(second) == _bytes(second_want), op


def _exact_product(row: np.ndarray, dtype: str) -> Any:
    """The exact product of ``row``, rounded to ``dtype`` (inf or 0 beyond its range)."""
    exact = Fraction(1)
    for value in row.tolist():
        exact *= Fraction(value)
    try:
        wide = float(exact)
    except OverflowError:
        wide = math.inf if exact > 0 else -math.inf
    with np.errstate(over="ignore", under="ignore"):
        return np.dtype(dtype).type(wide)


def _beyond_the_range(dtype: str, n: int) -> np.ndarray:
    """512 rows of ``n`` values whose partial products wander far beyond ``dtype``'s range
    (most products end in it, the others beyond it); the first five meet a zero, an
    infinity or a NaN after their partial products overflowed or underflowed."""
    rng = np.random.default_rng(3)
    top = 3 if dtype == "float32" else 30
    rows = rng.choice([-1.0, 1.0], (512, n)) * 10.0 ** rng.uniform(-top, top, (512, n))
    big, tiny = (1e30, 1e-30) if dtype == "float32" else (1e300, 1e-300)
    rows[:5] = np.abs(rows[:5])  # the signs below decide
    rows[0, :3] = [big, big, 0.0]  # overflows, then meets a zero: 0, not NaN
    rows[1, :3] = [tiny, tiny, np.inf]  # underflows, then meets inf: inf, not NaN
    rows[2, :3] = [big, -0.0, np.inf]  # 0 * inf: NaN
    rows[3, :2] = [tiny, -0.0]  # the signs' parity: a negative zero
    rows[4, :2] = [np.nan, big]
    return rows


def _assert_specials(got: np.ndarray, firsts: list[int]) -> None:
    """The products of the first five rows of :func:`_beyond_the_range`, at ``firsts``."""
    for j, want in zip(firsts, [0.0, np.inf, np.nan, -0.0, np.nan], strict=True):
        if np.isnan(want):
            assert np.isnan(got[j]), j
        else:
            assert got[j] == want, j
            assert np.signbit(got[j]) == np.signbit(want), j


def _assert_products(
    got: np.ndarray, plain: np.ndarray, slices: np.ndarray, dtype: str, firsts: list[int]
) -> None:
    """``got``, the products of ``slices``, where ``firsts`` are the places of the rows of
    :func:`_beyond_the_range` that meet specials. Where the library's plain product
    ``plain`` is finite and not 0, it is the result; elsewhere the exact product rounded:
    float64 carries float32's well within half an ulp and rounds once, float64's takes n
    roundings (or one spacing among subnormal numbers)."""
    _assert_specials(got, firsts)
    n = slices.shape[1]
    roundings = 1 if dtype == "float32" else n
    checked = 0
    for j in range(0, slices.shape[0], 4):
        if j in firsts:
            continue
        if np.isfinite(plain[j]) and plain[j] != 0:
            assert got[j] == plain[j], j
            continue
        want = _exact_product(slices[j], dtype)
        checked += 1
        if got[j] != want:
            assert np.isfinite(want), (j, got[j], want)
            assert want != 0, (j, got[j], want)
            allowed = max(roundings * np.finfo(dtype).eps * abs(want), np.spacing(abs(want)))
            assert abs(got[j] - want) <= allowed, (j, got[j], want)
    assert checked >= 20  # many slices took the careful product
    finite = np.isfinite(got) & (got != 0)
    assert 0.2 < np.mean(finite) < 0.98  # in range and beyond it, both


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["last", "first", "slab-of-columns", "few-columns"])
@pytest.mark.parametrize(
    "name", ["careful-product-by-exponents", "careful-product-by-exponents-through-numpy"]
)
def test_product_by_exponents_is_the_product_rounded_once(
    name: str, dtype: str, layout: str
) -> None:
    """NumPy's careful-product-by-exponents (and PyTorch's, through it): products far
    beyond the type's range on the way (and at the end) within the contract's n
    roundings of the exact product (float32: within one of its own ulps), and IEEE's
    zeros, infinities and NaNs, signs included, where partial products overflow or
    underflow before they meet them. Over the first axis, many suspect columns are read
    row by row, a few gathered."""
    found = [(p, a) for p, a in _REGISTERED if a.name == name]
    if not found:
        pytest.skip(f"{name}: its library is not installed")
    ((profile, accelerator),) = found
    rows = _beyond_the_range(dtype, 300)
    if layout == "few-columns":  # 5 suspect columns of 512, gathered
        rows[5:] = np.where(np.arange(300) < 3, 1.0, 1.01)
    values = rows.astype(dtype)
    axes: tuple[int, ...] = (1,)
    order = np.arange(512)
    if layout in ("first", "few-columns"):
        values, axes = np.ascontiguousarray(values.T), (0,)
    elif layout == "slab-of-columns":
        wide = np.concatenate([values.T, values.T], axis=1)
        values, axes, order = wide[:, 256:768], (0,), np.r_[256:512, 0:256]
    assert values.size >= accelerator.min_elements
    data: Any = values
    with np.errstate(all="ignore"):
        plain = np.multiply.reduce(values, axis=axes)
    if profile.name == "torch":
        torch = pytest.importorskip("torch")
        data = torch.from_numpy(values)  # a strided view stays one
        plain = torch.prod(data, dim=axes[0]).numpy()
    got = accelerator.run("reduce_prod", data, axes, False, profile)
    assert got is not None
    got = to_numpy(got)
    assert got.dtype == values.dtype
    assert got.shape == (512,)
    slices = values if axes == (1,) else values.T
    firsts = [int(np.flatnonzero(order == k)[0]) for k in range(5)]
    if layout == "few-columns":
        _assert_specials(got, firsts)
        np.testing.assert_array_equal(got[5:], plain[5:])
        return
    _assert_products(got, plain, slices, dtype, firsts)


def _cuda_torch() -> Any:
    import backends

    torch = pytest.importorskip("torch")
    if backends.DEVICE == "CPU" or not torch.cuda.is_available():
        pytest.skip("the GPU lane only (pytest --device cuda)")
    return torch


def test_torch_cuda_calls_make_no_synchronisation_in_sync_debug_mode() -> None:
    """``torch.cuda.set_sync_debug_mode("error")`` asks that nothing synchronise: the
    dispatch then offers no accelerator, and the generic kernels read nothing."""
    torch = _cuda_torch()
    x = torch.rand(64, 128, device="cuda")
    with no_accelerators():
        want = {op: getattr(anyreduce, op)(x, [1]) for op in anyreduce._reductions.__all__}
    torch.cuda.synchronize()
    with warnings.catch_warnings():  # torch warns that the mode is a prototype
        warnings.filterwarnings("ignore", "Synchronization debug mode", UserWarning)
        try:
            torch.cuda.set_sync_debug_mode("error")
            got = {op: getattr(anyreduce, op)(x, [1]) for op in anyreduce._reductions.__all__}
        finally:
            torch.cuda.set_sync_debug_mode(0)
    for op, result in got.items():
        torch.testing.assert_close(result, want[op], rtol=0, atol=0, msg=op)


def test_torch_cuda_calls_are_captured_in_a_cuda_graph() -> None:
    """Within ``torch.cuda.graph`` a synchronisation is an error: the dispatch offers no
    accelerator, and a replay on new data gives the generic kernels' values."""
    torch = _cuda_torch()
    ops = anyreduce._reductions.__all__
    x = torch.rand(64, 128, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capturing stream, as torch asks
        for op in ops:
            getattr(anyreduce, op)(x, [1])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = {op: getattr(anyreduce, op)(x, [1]) for op in ops}
    x.copy_(torch.rand(64, 128, device="cuda") * 4 - 2)
    graph.replay()
    torch.cuda.synchronize()
    with no_accelerators():
        for op in ops:
            want = getattr(anyreduce, op)(x, [1])
            torch.testing.assert_close(captured[op], want, rtol=0, atol=0, equal_nan=True, msg=op)


def test_torch_cuda_sum_square_near_the_largest_number_stays_finite() -> None:
    """``fused-norms-on-cuda`` squares a root: a sum of squares just below float32's
    largest number stays finite, and one past it is inf, as in the generic kernel."""
    torch = _cuda_torch()
    largest = torch.finfo(torch.float32).max
    root = math.sqrt(largest)
    x = torch.tensor([[root * (1 - 2.0**-24), 0.0], [root, root], [1.0, 2.0]], device="cuda")
    got = anyreduce.reduce_sum_square(x, [1], keepdims=False)
    with no_accelerators():
        want = anyreduce.reduce_sum_square(x, [1], keepdims=False)
    assert bool(torch.isfinite(want[0]))
    assert bool(torch.isfinite(got[0]))
    assert bool(torch.isinf(want[1]))
    assert bool(torch.isinf(got[1]))
    torch.testing.assert_close(got, want, rtol=2 * TOLERANCE["float32"], atol=0)
