"""Scale out: chunked Dask arrays and Dask clusters, and JAX arrays sharded over devices.

On Dask every reduction must build a graph and compute nothing; the graph must reduce
chunk by chunk (no rechunk, no chunk or array held longer than its own task needs) and
give the contract's values whatever the chunking. A real ``dask.distributed`` cluster
reduces an array several times larger than a worker's memory. On JAX, arrays sharded over
several (forced host) devices reduce under ``jax.jit`` and keep a sharding JAX chose.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
import scale_data
from backends import TOLERANCE, assert_result, make, np_dtype, to_numpy

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
import array_api_compat.dask.array as dxp  # noqa: E402

OPS = reference.OP_NAMES
FLOAT_STEP_OPS = {"reduce_l2", "reduce_log_sum", "reduce_log_sum_exp"}
SPLIT_EVERY = 4


def _refuse(*args: Any, **kwargs: Any) -> Any:
    msg = "a reduction computed Dask data while building its graph"
    raise AssertionError(msg)


@contextlib.contextmanager
def nothing_computed() -> Iterator[None]:
    """Any compute (``.compute()``, ``bool()``, ``float()``, ``np.asarray``) raises inside."""
    with dask.config.set(scheduler=_refuse):
        yield


def _layers() -> list[Any]:
    """(layer, op, function, keyword arguments) for every public reduction."""
    cases = [("anyreduce", op, getattr(anyreduce, op), {"keepdims": False}) for op in OPS]
    for layer, keyword in (("onnx", "keepdims"), ("openvino", "keep_dims")):
        try:
            module = importlib.import_module(f"anyreduce.{layer}")
        except ImportError:  # pragma: no cover - the profiles ship with the package
            continue
        names = [n for n in module.__all__ if n.startswith("reduce_")]
        cases += [(layer, n, getattr(module, n), {keyword: False}) for n in names]
    return [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in cases]


LAYERS = _layers()


# ---------------------------------------------------------------------------------------
# Values: how a test can see what the graph does.


def _nbytes(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _compute_measured(result: Any) -> tuple[np.ndarray, int, int]:
    """The value of ``result`` computed task by task, the most bytes held at once and the
    bytes of the largest task result."""
    from dask.callbacks import Callback

    held = [0, 0]

    class Watch(Callback):  # type: ignore[misc]
        def _posttask(self, key: Any, value: Any, dsk: Any, state: Any, worker: Any) -> None:
            held[0] = max(held[0], sum(_nbytes(v) for v in state["cache"].values()))
            held[1] = max(held[1], _nbytes(value))

    with Watch(), np.errstate(all="ignore"):
        value = np.asarray(result.compute(scheduler="sync"))
    return value, held[0], held[1]


def assert_chunkwise(result: Any, data: Any) -> None:
    """``result``'s graph reduces ``data`` chunk by chunk: no rechunk, no task gathering more
    than ``SPLIT_EVERY`` pieces per reduced axis (a tree), nothing held but a few chunks."""
    from dask.core import get_dependencies

    graph = result.__dask_graph__()
    names = [str(name) for name in graph.layers]
    assert not [n for n in names if n.startswith(("rechunk", "concatenate"))], names
    tasks = dict(graph)
    fan_in = max(len(get_dependencies(tasks, key)) for key in tasks)
    assert fan_in <= SPLIT_EVERY, f"a task gathers {fan_in} inputs"
    largest_chunk = max(math.prod(c) for c in itertools.product(*data.chunks)) * 8
    output = math.prod(result.shape) * 8  # the last task gathers the output's chunks
    assert 3 * largest_chunk + 2 * output < data.nbytes / 2, "the test's data is too small"
    _, held, biggest = _compute_measured(result)
    assert biggest <= max(largest_chunk, output), (biggest, largest_chunk)
    held_most = 3 * largest_chunk + 2 * output
    assert held <= held_most, f"{held} bytes held at once, chunks of {largest_chunk}"


# ---------------------------------------------------------------------------------------
# Every public function builds a graph only, and that graph is chunk-wise.


@pytest.mark.parametrize(("layer", "op", "function", "keywords"), LAYERS)
def test_every_function_builds_a_lazy_graph(
    layer: str, op: str, function: Callable[..., Any], keywords: dict[str, Any]
) -> None:
    values = (np.arange(1, 121, dtype=np.float32).reshape(12, 10) % 7 + 1) / 4
    if op.startswith("reduce_logical"):
        values = values > 1
    data = da.from_array(values, chunks=((5, 0, 7), (3, 3, 4)))
    axes_forms: list[Any] = [[0], [1], [0, 1], [-1], np.asarray([1, 0], dtype=np.int64)]
    for axes in axes_forms:
        with nothing_computed():
            result = function(data, axes, **keywords)
        assert isinstance(result, da.Array), type(result)
        expected = function(values, axes, **keywords)
        assert result.dtype == expected.dtype
        assert tuple(result.shape) == tuple(expected.shape)
        got = to_numpy(result)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=TOLERANCE["float32"], atol=0)


@pytest.mark.parametrize("op", OPS)
def test_graph_reduces_chunk_by_chunk(op: str) -> None:
    shape, chunks = (2048, 6), (64, 3)  # 32 x 2 chunks; the array is 64 chunks' bytes
    data = scale_data.lazy_array(shape, chunks, seed=3)
    host = np.concatenate(
        [
            np.concatenate([scale_data.chunk_values(3, loc) for loc in row], axis=1)
            for row in _rows(data.chunks)
        ]
    )
    with dask.config.set(split_every=SPLIT_EVERY):
        for axes in ([0], None, [1]):
            with nothing_computed():
                result = getattr(anyreduce, op)(data, axes)
            assert_chunkwise(result, data)
            expected = np.asarray(getattr(anyreduce, op)(host, axes))
            rtol = 2.0**-48
            if op == "reduce_prod":
                # Each factor adds one rounding whatever the order: two orders of n
                # factors (chunk by chunk here, rows of 256 in NumPy) differ by up to
                # n * eps, 12288 * 2**-52 over all axes.
                n = host.size if axes is None else math.prod(host.shape[a] for a in axes)
                rtol = max(rtol, n * 2.0**-52)
            np.testing.assert_allclose(to_numpy(result), expected, rtol=rtol)


def _rows(chunks: tuple[tuple[int, ...], ...]) -> list[list[scale_data.Location]]:
    locations = list(scale_data.locations(chunks))
    width = len(chunks[1])
    return [locations[i : i + width] for i in range(0, len(locations), width)]


@pytest.mark.parametrize(("layer", "op", "function", "keywords"), LAYERS)
def test_unknown_chunk_sizes_are_an_error_that_says_what_to_do(
    layer: str, op: str, function: Callable[..., Any], keywords: dict[str, Any]
) -> None:
    values = np.arange(1, 21, dtype=np.float32)
    data = da.from_array(values, chunks=5)
    masked = data[data > 3.5] if not op.startswith("reduce_logical") else (data > 3.5)[data > 1]
    assert math.isnan(masked.shape[0])
    # The profiles name their operators as ONNX and OpenVINO do, with the version.
    camel = "".join(word.capitalize() for word in op.split("_"))
    label = op if layer == "anyreduce" else rf"{camel}-\d+"
    with (
        nothing_computed(),
        pytest.raises(
            ValueError, match=rf"^{label}: axis 0 of data has unknown length.*chunk_sizes"
        ),
    ):
        function(masked, [0], **keywords)


# ---------------------------------------------------------------------------------------
# Values across chunk boundaries: unequal chunks, empty chunks, chunked and unchunked axes.

SHAPE = (7, 6, 5)
CHUNKINGS = {
    "unequal": ((3, 4), (1, 5), (5,)),
    "empty-chunks": ((3, 0, 4), (0, 6, 0), (2, 0, 3)),
    "tiny": ((1,) * 7, (2, 2, 2), (1, 4)),
}
AXES_CASES: list[tuple[Any, bool, bool]] = [
    (None, True, False),
    ([0], False, False),
    ([1], True, False),
    ([2], False, False),  # unchunked in "unequal"
    ([0, 2], True, False),  # a chunked and an unchunked axis at once
    ([-1, 1], False, False),
    ([0, 1, 2], False, False),
    ([], True, True),  # the no-op form
]
DTYPES = ("float16", "float32", "float64", "int8", "uint64", "bool")


def _sample(op: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng([OPS.index(op), DTYPES.index(dtype)])
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        # Positive for the sums (no cancellation), near 1 so products stay in range.
        values = rng.uniform(0.5, 1.5, shape)
        if op in {"reduce_max", "reduce_min", "reduce_l1", "reduce_l2", "reduce_log_sum_exp"}:
            values *= rng.choice([-1.0, 1.0], shape)
        return values.astype(np_dtype(dtype))
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if op in FLOAT_STEP_OPS:
        low, high = max(low, -1000), min(high, 1000)
    return rng.integers(low, high, shape, endpoint=True, dtype=dtype)


# bool is taken by max and min only (the other ops' TypeError is tested in test_dtypes).
OP_DTYPES = [
    (op, dtype)
    for op in OPS
    for dtype in DTYPES
    if dtype != "bool" or op in {"reduce_max", "reduce_min"}
]


@pytest.mark.parametrize("chunking", CHUNKINGS)
@pytest.mark.parametrize(("op", "dtype"), OP_DTYPES)
def test_values_across_chunk_boundaries(op: str, dtype: str, chunking: str) -> None:
    values = _sample(op, dtype, SHAPE)
    data = make(dxp, values, dtype, chunks=CHUNKINGS[chunking])
    function = getattr(anyreduce, op)
    for axes, keepdims, noop in AXES_CASES:
        with nothing_computed():
            result = function(data, axes, keepdims=keepdims, noop_with_empty_axes=noop)
        expected = reference.reduce(op, values, axes, keepdims=keepdims, noop_with_empty_axes=noop)
        assert_result(result, dxp, dtype, expected.shape, expected, like=data)


_M = float(np.finfo(np.float64).max)
# Rows whose result overflows (the contract's inf), or whose careful form is taken.
_OVERFLOWING = {
    "reduce_sum": [_M, _M, 1.0, 0.0],
    "reduce_l2": [_M, _M, 1.0, 0.0],
    "reduce_prod": [1e200, 1e200, 1e200, 2.0],
    "reduce_sum_square": [1e200, 1e200, 0.0, 1.0],
    "reduce_mean": [_M, _M, _M, _M],
    "reduce_log_sum_exp": [_M, _M, 1.0, 0.0],
    "reduce_l1": [_M, -_M, 1.0, 0.0],
    "reduce_log_sum": [_M, _M, 1.0, 0.0],
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("chunks", [(1, 2), (2, 4)], ids=["chunked", "whole"])
@pytest.mark.parametrize("op", sorted(_OVERFLOWING))
def test_results_that_overflow_compute_without_warnings(op: str, chunks: tuple[int, int]) -> None:
    """Dask computes later, outside anyreduce: NumPy's overflow warnings about the values
    the contract asks for reached the caller then (Sum, L2 and Prod of float64 data near
    the largest number; the careful forms scaled back with ``*``)."""
    values = np.array([_OVERFLOWING[op], [1.0, 2.0, 3.0, 4.0]])
    result = getattr(anyreduce, op)(dxp.asarray(da.from_array(values, chunks=chunks)), [1])
    want = getattr(anyreduce, op)(values, [1])
    np.testing.assert_array_equal(np.asarray(result.compute()), want)


@pytest.mark.parametrize("op", OPS)
def test_zero_size_array_stays_lazy(op: str) -> None:
    values = np.ones((4, 0, 3), dtype=np.float32)
    data = da.from_array(values, chunks=((2, 2), (0,), (2, 1)))
    for axes in ([1], [0, 2], None):
        with nothing_computed():
            result = getattr(anyreduce, op)(data, axes)
        expected = reference.reduce(op, values, axes, keepdims=True)
        assert_result(result, dxp, "float32", expected.shape, expected, like=data)


# ---------------------------------------------------------------------------------------
# Accuracy: chunking changes the order of summation, not the error bound.

BOUND_OPS = (
    "reduce_sum",
    "reduce_mean",
    "reduce_l1",
    "reduce_sum_square",
    "reduce_l2",
    "reduce_log_sum_exp",
)


def _exact(op: str, column: np.ndarray) -> tuple[float, float]:
    """The exact value of ``op`` over ``column`` and the bound 8 * eps * M on its error before
    the final step, as a multiple of eps (see the numerics issue)."""
    xs = [float(v) for v in column]
    if op in {"reduce_sum", "reduce_mean"}:
        total, magnitude = math.fsum(xs), math.fsum(abs(v) for v in xs)
        if op == "reduce_sum":
            return total, 8 * magnitude
        # The division rounds once more.
        return total / len(xs), (8 * magnitude + abs(total)) / len(xs)
    if op == "reduce_l1":
        total = math.fsum(abs(v) for v in xs)
        return total, 8 * total
    squares = math.fsum(v * v for v in xs)
    if op == "reduce_sum_square":
        return squares, 8 * squares
    if op == "reduce_l2":
        # sqrt(S (1 + d)) = sqrt(S) (1 + d / 2), and the root rounds once more.
        return math.sqrt(squares), 5 * math.sqrt(squares)
    top = max(xs)
    shifted = math.fsum(math.exp(v - top) for v in xs)
    # log(M (1 + d)) = log M + d: an absolute error of 8 eps, then the rounding of the result.
    result = top + math.log(shifted)
    return result, 8 + 2 * abs(result)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", BOUND_OPS)
def test_accuracy_bound_holds_on_chunks(op: str, dtype: str) -> None:
    rng = np.random.default_rng([BOUND_OPS.index(op), 64 if dtype == "float64" else 32])
    values = rng.uniform(-1.0, 1.0, (30000, 3)) * rng.choice([1.0, 1e3], (30000, 3))
    values = values.astype(dtype)
    data = da.from_array(values, chunks=((7000, 0, 13000, 10000), (2, 1)))
    result = getattr(anyreduce, op)(data, [0], keepdims=False)
    got = to_numpy(result).astype(np.float64)
    eps = float(np.finfo(dtype).eps)
    for j in range(values.shape[1]):
        exact, bound = _exact(op, values[:, j])
        assert abs(got[j] - exact) <= bound * eps, (op, dtype, j, got[j], exact, bound)


# ---------------------------------------------------------------------------------------
# A real cluster: two worker processes, each with less memory than a quarter of the data.

WORKER_MEMORY = 150 * 2**20
ROWS, COLUMNS, CHUNK_ROWS = 9_375_000, 8, 125_000  # 600 MB of float64 in 75 chunks of 8 MB


def _expected_by_chunks(seed: int, chunks: tuple[tuple[int, ...], ...]) -> dict[str, float]:
    """Each op's full reduction of the generated data, recomputed chunk by chunk in NumPy."""
    sums: dict[str, list[float]] = {"sum": [], "abs": [], "squares": []}
    product, top, bottom, count = 1.0, -math.inf, math.inf, 0
    maxima: list[float] = []
    exp_sums: list[float] = []
    for location in scale_data.locations(chunks):
        x = scale_data.chunk_values(seed, location)
        sums["sum"].append(float(np.sum(x)))  # pairwise: off by about 1e-16 relative
        sums["abs"].append(float(np.sum(np.abs(x))))
        sums["squares"].append(float(np.sum(x * x)))
        product *= float(np.prod(x))
        top, bottom, count = max(top, float(x.max())), min(bottom, float(x.min())), count + x.size
        maxima.append(float(x.max()))
        exp_sums.append(float(np.sum(np.exp(x - x.max()))))
    total = math.fsum(sums["sum"])
    shift = max(maxima)
    rescaled = math.fsum(s * math.exp(m - shift) for s, m in zip(exp_sums, maxima, strict=True))
    return {
        "reduce_sum": total,
        "reduce_sum_square": math.fsum(sums["squares"]),
        "reduce_l1": math.fsum(sums["abs"]),
        "reduce_l2": math.sqrt(math.fsum(sums["squares"])),
        "reduce_mean": total / count,
        "reduce_prod": product,
        "reduce_max": top,
        "reduce_min": bottom,
        "reduce_log_sum": math.log(total),
        "reduce_log_sum_exp": shift + math.log(rescaled),
    }


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore:.*[Pp]ort.*:UserWarning")
def test_distributed_cluster_reduces_more_than_its_memory() -> None:
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    # The workers cannot import the tests directory: the generator travels by value.
    cloudpickle.register_pickle_by_value(scale_data)
    data = scale_data.lazy_array((ROWS, COLUMNS), (CHUNK_ROWS, COLUMNS), seed=11)
    assert data.nbytes > 3.5 * WORKER_MEMORY
    results = [getattr(anyreduce, op)(data, keepdims=False) for op in OPS]
    with (
        # A paused worker waits for memory to fall, which a worker process's own ~70 MB never
        # does: no pausing, so going over the limit shows as a restart (checked below).
        dask.config.set({"distributed.worker.memory.pause": False}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=WORKER_MEMORY,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        ) as cluster,
        distributed.Client(cluster, timeout="120s") as client,
    ):
        workers = client.run(os.getpid)
        futures = client.compute(results)
        distributed.wait(futures, timeout=300)
        values = client.gather(futures)
        limits = client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit)
        pauses = client.run(lambda dask_worker: dask_worker.memory_manager.memory_pause_fraction)
        # The same two processes: no worker went over its limit and was restarted.
        assert client.run(os.getpid) == workers
    assert set(limits.values()) == {WORKER_MEMORY}
    assert set(pauses.values()) == {False}
    expected = _expected_by_chunks(11, data.chunks)
    for op, value in zip(OPS, values, strict=True):
        assert value.shape == ()
        assert value.dtype == np.float64
        np.testing.assert_allclose(float(value), expected[op], rtol=1e-9, err_msg=op)


# ---------------------------------------------------------------------------------------
# JAX: arrays sharded over four host devices.

_SHARDED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    import anyreduce

    devices = jax.devices()
    assert len(devices) == 4, devices
    mesh = Mesh(np.array(devices), ("rows",))
    report = []
    for dtype in ("float32", "float64", "int32"):
        rng = np.random.default_rng(5)
        host = (rng.uniform(0.5, 1.5, (8, 6)) * (10 if dtype == "int32" else 1)).astype(dtype)
        data = jax.device_put(host, NamedSharding(mesh, PartitionSpec("rows", None)))
        for op in sys.argv[1:]:
            for axes, keepdims in (((0,), False), ((1,), True), ((1,), False), ((0, 1), True)):
                run = jax.jit(lambda a, op=op, axes=axes, keepdims=keepdims: getattr(anyreduce, op)(
                    a, axes, keepdims=keepdims))
                result = run(data)
                expected = np.asarray(getattr(anyreduce, op)(host, list(axes), keepdims=keepdims))
                report.append({
                    "op": op, "dtype": dtype, "axes": axes, "keepdims": keepdims,
                    "kind": type(result).__module__.split(".")[0],
                    "result_dtype": str(result.dtype), "expected_dtype": str(expected.dtype),
                    "shape": list(result.shape), "expected_shape": list(expected.shape),
                    "devices": len(result.sharding.device_set),
                    "replicated": bool(result.sharding.is_fully_replicated),
                    "got": np.asarray(result).astype(np.float64).ravel().tolist(),
                    "want": expected.astype(np.float64).ravel().tolist(),
                })
    print(json.dumps(report))
    """
)


def test_jax_sharded_arrays_reduce_under_jit() -> None:
    pytest.importorskip("jax")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", _SHARDED_SCRIPT, *OPS],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report) == 3 * len(OPS) * 4
    for case in report:
        label = f"{case['op']} {case['dtype']} axes={case['axes']} keepdims={case['keepdims']}"
        assert case["kind"] == "jaxlib" or case["kind"] == "jax", label
        assert case["result_dtype"] == case["expected_dtype"], label
        assert case["shape"] == case["expected_shape"], label
        # No gather to one device: the result lives on the four devices of the mesh, and a
        # reduction across the unsharded axis stays sharded along the rows.
        assert case["devices"] == 4, label
        if tuple(case["axes"]) == (1,):
            assert not case["replicated"], label
        tolerance = TOLERANCE["float32" if case["dtype"] == "float32" else "float64"]
        if case["dtype"] == "int32":
            assert case["got"] == case["want"], label
        else:
            np.testing.assert_allclose(case["got"], case["want"], rtol=tolerance, err_msg=label)
