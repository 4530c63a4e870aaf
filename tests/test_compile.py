"""Compilers, exporters and function transforms run the generic kernels, and as well as
the native expressions do.

* ``torch.compile(fullgraph=True)`` when the process's first anyreduce call happens inside
  compilation (build, compile, train);
* ``torch.export`` with a dynamic batch size: no guard on sizes;
* ``torch.compile(dynamic=True)``: no more graphs than the native expression, and the
  values of eager when it is the process's first compile;
* ``jax.jit``, ``jax.grad``, ``jax.vmap``, ``torch.func.grad`` and ``torch.func.vmap``
  never call an accelerator (they run on tracers, not on eager data).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import anyreduce
import reference
from anyreduce import _backends

OPS = reference.OP_NAMES


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(anyreduce, op)(*args, **kwargs)


# ---------------------------------------------------------------------------------------
# torch.compile as the first call


_FIRST_CALL = textwrap.dedent(
    """
    import warnings

    warnings.simplefilter("always")

    import torch
    import anyreduce

    OPS = OPS_HERE
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    x[1, :3] = torch.tensor([3e38, 3e38, -3e38])  # partial sums overflow: a careful slice
    x[2, :2] = torch.tensor([1e-30, 2e-30])
    with warnings.catch_warnings(record=True) as caught:
        compiled = {}
        results = {}
        for op in OPS:  # every op compiled before any op runs eagerly
            f = getattr(anyreduce, op)
            for axes in ((1,), None):
                torch._dynamo.reset()
                fn = torch.compile(
                    lambda a, f=f, axes=axes: f(a, axes, keepdims=False),
                    fullgraph=True,
                    backend="eager",
                )
                results[op, axes] = fn(x)
    for (op, axes), got in results.items():
        want = getattr(anyreduce, op)(x, axes, keepdims=False)
        assert got.dtype == want.dtype, (op, axes)
        assert got.shape == want.shape, (op, axes)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=str(op))
    # No warning at all: Dynamo warns about every functools.lru_cache it traces, and
    # anyreduce's own caches and lookups are plain dictionaries for that reason. torch
    # 2.11's own deprecation of torch.jit.script_method, warned as Dynamo loads, is not ours.
    ours = [w for w in caught if "torch.jit.script_method" not in str(w.message)]
    assert not ours, [f"{w.category.__name__}: {w.message}" for w in ours]
    print("ok")
    """
)


def _run_fresh(script: str, *args: str) -> None:
    """Run ``script`` (with OPS_HERE the operators) in a fresh process with ``args``;
    it prints ok."""
    command = [sys.executable, "-c", script.replace("OPS_HERE", repr(tuple(OPS))), *args]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "ok"


def test_torch_compile_as_the_first_call() -> None:
    """A fresh process: each op first runs compiled, fullgraph, and equals eager."""
    pytest.importorskip("torch")
    _run_fresh(_FIRST_CALL)


_DYNAMIC_FIRST = textwrap.dedent(
    """
    import torch
    import anyreduce

    OPS = OPS_HERE
    for op in OPS:  # each op's first compile is dynamic, in a process that compiled none
        f = getattr(anyreduce, op)
        for axes in ((1,), (0,)):
            torch._dynamo.reset()
            fn = torch.compile(
                lambda a, f=f, axes=axes: f(a, axes),
                dynamic=True,
                fullgraph=True,
                backend="eager",
            )
            for rows in (1, 2, 3, 7, 16):
                x = torch.rand(rows, 8) + 0.5
                if rows > 1:  # partial sums overflow: a careful slice
                    x[1, :3] = torch.tensor([3e38, 3e38, -3e38])
                got, want = fn(x), f(x, axes)
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    print("ok")
    """
)


def test_torch_dynamic_compile_as_the_first_compile() -> None:
    """A fresh process: ``torch.compile(dynamic=True, fullgraph=True)`` of each op, over
    five batch sizes, equals eager (the module's float constants would be symbolic inputs,
    which ``torch.cond`` refuses)."""
    pytest.importorskip("torch")
    _run_fresh(_DYNAMIC_FIRST)


_NO_RECOMPILE = textwrap.dedent(
    """
    import torch
    import anyreduce

    torch._dynamo.config.error_on_recompile = True
    OPS = OPS_HERE
    for dtype in (torch.float32, torch.float16, torch.int32):
        x = (torch.rand(4, 16) * 10).to(dtype)
        for op in OPS:  # each op compiled before it runs eagerly, then called again
            f = getattr(anyreduce, op)
            for axes in ((1,), None):
                torch._dynamo.reset()  # the lambdas share their code, whose entries these are
                fn = torch.compile(lambda a, f=f, axes=axes: f(a, axes), backend="eager")
                for _ in range(3):
                    fn(x)
    print("ok")
    """
)


def test_torch_compile_does_not_recompile_on_the_second_call() -> None:
    """A fresh process: the trace of a first call leaves anyreduce's tables as they were,
    so the guards on them hold at the next call (with ``error_on_recompile``, a recompile
    is an error). Before, each trace filled the tables and every operator compiled twice."""
    pytest.importorskip("torch")
    _run_fresh(_NO_RECOMPILE)


_EAGER_BETWEEN = textwrap.dedent(
    """
    import sys

    import numpy as np
    import torch
    import anyreduce
    import anyreduce.onnx
    import anyreduce.openvino

    torch._dynamo.config.error_on_recompile = True
    OPS = OPS_HERE
    x = torch.rand(4, 16) + 0.5
    calls = [f"anyreduce.{op}(a, (1,))" for op in OPS]  # the three public fronts
    calls += [f"anyreduce.onnx.{op}(a, [1], opset=13)" for op in OPS]
    calls += [f"anyreduce.openvino.{op}(a, [1])" for op in OPS if op in anyreduce.openvino.__all__]
    compiled = {}
    for call in calls:
        # One function (one code object) a call: Dynamo's entries are kept per code.
        fn = eval(f"lambda a: {call}", {"anyreduce": anyreduce})
        if sys.argv[1:] == ["warm"]:  # the tables hold this call's entries when it is traced
            fn(x)
        compiled[call] = torch.compile(fn, fullgraph=True, backend="eager")
        compiled[call](x)
    dtypes = (torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool)
    for dtype in dtypes:  # eager calls fill every table with new entries
        for op in OPS:
            for axes in ((0,), None, [1], 1, ()):
                for data in (torch.ones(3, 4, dtype=dtype), np.ones((3, 4), dtype="float32")):
                    try:
                        getattr(anyreduce, op)(data, axes)
                    except TypeError:  # bool data: not every operator takes them
                        pass
        for call, fn in compiled.items():  # a recompile is an error
            want = eval(call, {"anyreduce": anyreduce, "a": x})
            torch.testing.assert_close(fn(x), want, rtol=0, atol=0, equal_nan=True)
    print("ok")
    """
)


@pytest.mark.parametrize("order", ["compiled-first", "warm"])
def test_torch_compile_is_not_undone_by_eager_calls(order: str) -> None:
    """A fresh process: each op of the three public fronts (``anyreduce``,
    ``anyreduce.onnx``, ``anyreduce.openvino``) compiled (fullgraph), then eager calls of
    other dtypes, axes and libraries between compiled calls; none recompiles. Before, the trace read
    anyreduce's tables and Dynamo guarded their contents: every eager call that added an
    entry failed the guards, and after eight the compiled function failed with
    ``FailOnRecompileLimitHit`` (without fullgraph, it ran eagerly from then on)."""
    pytest.importorskip("torch")
    _run_fresh(_EAGER_BETWEEN, *(["warm"] if order == "warm" else []))


_UNGUARDED = textwrap.dedent(
    """
    import torch
    import anyreduce

    OPS = OPS_HERE
    unguarded = {"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe}
    x = torch.rand(4, 16) * 10
    x[1, :3] = torch.tensor([3e38, 3e38, -3e38])  # partial sums overflow: a careful slice
    x[2, :2] = torch.tensor([1e-30, 2e-30])
    for op in OPS:
        f = getattr(anyreduce, op)
        for axes in ((1,), None):
            torch.compiler.reset()
            fn = torch.compile(
                lambda a, f=f, axes=axes: f(a, axes),
                fullgraph=True,
                backend="eager",
                options=unguarded,
            )
            first = fn(x)  # compiled before the eager call fills the tables
            want = f(x, axes)
            for got in (first, fn(x), fn(x * 1)):
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
            # The guards on the data stay: another dtype is compiled for its own.
            wide = x.double()
            torch.testing.assert_close(fn(wide), f(wide, axes), rtol=0, atol=0, equal_nan=True)
    print("ok")
    """
)


def test_torch_compile_without_guards_on_globals_keeps_the_values() -> None:
    """A fresh process: compiled with ``guard_filter_fn=skip_guard_on_globals_unsafe``
    (the user guide's advice for a reduction compiled alone in a hot loop), each op
    equals eager, before and after an eager call fills the tables the trace read (they
    remember pure functions of the dtype and the axes), and on data of another dtype."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch.compiler, "skip_guard_on_globals_unsafe"):
        pytest.skip("this PyTorch has no torch.compiler.skip_guard_on_globals_unsafe")
    _run_fresh(_UNGUARDED)


_AFTER_OTHERS = textwrap.dedent(
    """
    import numpy as np
    import torch
    import anyreduce
    from anyreduce import _reductions
    from anyreduce._lib import _memo

    OPS = OPS_HERE
    others = [np.arange(1.0, 7.0, dtype=d).reshape(2, 3) for d in ("float16", "float32")]
    try:
        import jax.numpy as jnp

        others += [jnp.asarray(a) for a in others]
    except ImportError:
        pass
    for a in others:  # NumPy dtypes in the other libraries' tables
        for op in OPS:
            getattr(anyreduce, op)(a, [1])
    before = [set(t) for t in _memo.TABLES], set(_reductions._VALID)
    x = torch.rand(4, 16)
    for op in OPS:  # the first PyTorch calls, compiled
        f = getattr(anyreduce, op)
        torch._dynamo.reset()
        fn = torch.compile(lambda a, f=f: f(a, (1,)), fullgraph=True, backend="eager")
        fn(x)
    after = [set(t) for t in _memo.TABLES], set(_reductions._VALID)
    assert after == before, "a table was added inside a trace"
    print("ok")
    """
)


def test_torch_compile_after_other_libraries_adds_no_table_in_the_trace() -> None:
    """A fresh process that reduced NumPy (and JAX) data first: PyTorch's first calls,
    compiled, find their tables made. With torch 2.11, fullgraph failed in such a process
    (``Unsupported``: Dynamo could not hash a NumPy dtype as a dictionary key)."""
    pytest.importorskip("torch")
    _run_fresh(_AFTER_OTHERS)


# ---------------------------------------------------------------------------------------
# torch.export with a dynamic batch


@pytest.mark.parametrize("axes", [(1,), (0,), None], ids=["kept-batch", "batch", "all"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_torch_export_with_a_dynamic_batch(
    op: str, axes: tuple[int, ...] | None, strict: bool
) -> None:
    """Exported with a dynamic batch (strict: traced by Dynamo), equal to eager at four
    batch sizes, on values whose plain totals overflow too (the careful branches), and with
    no warning of ours: strict export warns of every global a trace assigns (Dynamo
    replays the assignment after the graph)."""
    torch = pytest.importorskip("torch")
    from torch.export import Dim

    f = getattr(anyreduce, op)

    class Reduce(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return f(x, axes, keepdims=False)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = torch.export.export(
            Reduce(), (torch.rand(4, 16),), dynamic_shapes={"x": {0: Dim("batch")}}, strict=strict
        )
    ours = [w for w in caught if "side effects" in str(w.message) or "anyreduce" in w.filename]
    assert not ours, [f"{w.category.__name__}: {w.message}" for w in ours]
    module = exported.module()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.rand(batch, 16, generator=generator) + 0.5 for batch in (2, 3, 50, 5000)]
    inputs.append(torch.full((3, 16), 3e38))
    for x in inputs:
        batch = x.shape[0]
        got = module(x)
        want = f(x, axes, keepdims=False)
        assert got.dtype == want.dtype == x.dtype
        assert tuple(got.shape) == tuple(want.shape), batch
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------------------
# torch.compile(dynamic=True): graph count


def _natives(torch: Any) -> dict[str, Callable[[Any, Any], Any]]:
    """The expression a user would write instead of each op (keepdims, as ours)."""

    def norm(order: int) -> Callable[[Any, Any], Any]:
        return lambda x, d: torch.linalg.vector_norm(x, ord=order, dim=d, keepdim=True)

    return {
        "reduce_sum": lambda x, d: torch.sum(x, d, keepdim=True),
        "reduce_sum_square": lambda x, d: torch.sum(x * x, d, keepdim=True),
        "reduce_l1": norm(1),
        "reduce_l2": norm(2),
        "reduce_mean": lambda x, d: torch.mean(x, d, keepdim=True),
        "reduce_prod": lambda x, d: torch.prod(x, d[0], keepdim=True),
        "reduce_max": lambda x, d: torch.amax(x, d, keepdim=True),
        "reduce_min": lambda x, d: torch.amin(x, d, keepdim=True),
        "reduce_log_sum": lambda x, d: torch.log(torch.sum(x, d, keepdim=True)),
        "reduce_log_sum_exp": lambda x, d: torch.logsumexp(x, d, keepdim=True),
    }


_ROWS = (1, 2, 3, 4, 7, 16, 33, 100, 257, 1000)


def _graphs(torch: Any, fn: Callable[[Any], Any]) -> int:
    """Graphs Dynamo builds for ``fn`` over inputs of ten batch sizes."""
    torch._dynamo.reset()
    built: list[Any] = []

    def counting(graph: Any, inputs: Any) -> Any:
        built.append(graph)
        return graph.forward

    compiled = torch.compile(fn, backend=counting, dynamic=True)
    for rows in _ROWS:
        compiled(torch.rand(rows, 8) + 0.5)
    return len(built)


@pytest.mark.parametrize("op", OPS)
def test_torch_dynamic_compile_builds_no_more_graphs_than_native(op: str) -> None:
    torch = pytest.importorskip("torch")
    native = _natives(torch)[op]
    f = getattr(anyreduce, op)
    for dim in ((1,), (0,)):
        ours = _graphs(torch, lambda x, dim=dim: f(x, dim))
        theirs = _graphs(torch, lambda x, dim=dim: native(x, dim))
        assert ours <= theirs, f"{op} over {dim}: {ours} graphs, native {theirs}"


# ---------------------------------------------------------------------------------------
# Transforms run the generic kernel


@contextlib.contextmanager
def refused_accelerators(name: str) -> Iterator[list[str]]:
    """Library ``name``'s accelerators replaced by ones that record each call."""
    profile = next(p for p in _backends.PROFILES if p.name == name)
    calls: list[str] = []

    def record(op: str, x: Any, axes: Any, keepdims: bool, p: Any) -> Any:
        calls.append(f"{op} on {type(x).__name__}")
        return None  # declined: the generic kernel computes

    before = profile.accelerators
    replaced = tuple(dataclasses.replace(a, run=record) for a in before)
    object.__setattr__(profile, "accelerators", replaced)
    try:
        yield calls
    finally:
        object.__setattr__(profile, "accelerators", before)


def _data() -> np.ndarray:
    rng = np.random.default_rng(5)
    return rng.permutation(np.linspace(0.5, 2.0, 24)).reshape(2, 3, 4)


@pytest.mark.accelerated
def test_torch_func_transforms_run_the_generic_kernel() -> None:
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(_data())
    batched = {}
    with refused_accelerators("torch") as calls:
        call("reduce_sum", x, (1,))
        assert calls, "the spy sees eager calls"
        calls.clear()
        for op in OPS:
            f = getattr(anyreduce, op)
            grad = torch.func.grad(lambda a, f=f: f(a, (0, 2)).sum())(x)
            assert tuple(grad.shape) == tuple(x.shape)
            batched[op] = torch.func.vmap(lambda a, f=f: f(a, (1,), keepdims=False))(x)
        assert not calls, calls
    for op, got in batched.items():
        torch.testing.assert_close(got, call(op, x, (2,), keepdims=False))


@pytest.mark.accelerated
def test_jax_transforms_run_the_generic_kernel() -> None:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        x = jax.numpy.asarray(_data())
        with refused_accelerators("jax") as calls:
            call("reduce_sum", x, (1,))
            assert calls, "the spy sees eager calls"
            calls.clear()
            for op in OPS:
                f = getattr(anyreduce, op)
                jitted = jax.jit(lambda a, f=f: f(a, (0, 2)))(x)
                grad = jax.grad(lambda a, f=f: f(a, (0, 2)).sum())(x)
                batched = jax.vmap(lambda a, f=f: f(a, (1,), keepdims=False))(x)
                assert jitted.shape == (1, 3, 1)
                assert grad.shape == x.shape
                assert batched.shape == (2, 3)
        assert not calls, calls


def test_eager_is_false_under_tracers() -> None:
    """The profiles' own test: tracers are never eager data."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    profiles = {p.name: p for p in _backends.PROFILES}
    seen: list[bool] = []

    def torch_probe(a: Any) -> Any:
        seen.append(profiles["torch"].eager(a))
        return a.sum()

    x = torch.ones(3)
    assert profiles["torch"].eager(x)
    torch.func.grad(torch_probe)(x)
    torch.func.vmap(torch_probe)(x)
    torch._dynamo.reset()
    torch.compile(torch_probe, backend="eager", fullgraph=True)(x)

    def jax_probe(a: Any) -> Any:
        seen.append(profiles["jax"].eager(a))
        return a.sum()

    y = jax.numpy.ones(3)
    assert profiles["jax"].eager(y)
    jax.jit(jax_probe)(y)
    jax.grad(jax_probe)(y)
    jax.vmap(jax_probe)(y)
    assert seen == [False] * 6
