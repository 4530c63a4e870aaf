"""Backends as the benchmark sees them: the registry's libraries with their anchors.

Data in and results synchronised come from the registry (``anyreduce._lib._libraries``);
the benchmark runs each library in its default mode (JAX's 64-bit types as its
configuration leaves them: the report records which). Each backend gives its plain sum
(the one-pass floor every operator is compared with) and, for each operator, one or more
native expressions; the fastest of them in a run is the "best native" anchor.
onnxruntime's kernels are built here too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._lib._libraries import LIBRARIES, Library

__all__ = ["BACKEND_NAMES", "Backend", "load_backend", "onnxruntime_kernel"]

Array = Any
Axes = tuple[int, ...]
Fn = Callable[[], Any]
# (array, axes or None for all) -> a zero-argument callable doing the work
Maker = Callable[[Array, "Axes | None"], Fn]

#: The registry's libraries, modes of another one (jax32) left out.
BACKEND_NAMES = tuple(name for name, lib in LIBRARIES.items() if lib.mode_of is None)
#: The dtypes of the large input the benchmark knows.
BENCH_DTYPES = ("float32", "float16")


@dataclass
class Backend:
    """One array library: data in, results synchronised, and its anchors."""

    name: str
    convert: Callable[[np.ndarray], Array]
    sync: Callable[[Any], Any]
    plain_sum: Maker
    native: dict[str, dict[str, Maker]] = field(default_factory=dict)
    dtypes: tuple[str, ...] = BENCH_DTYPES
    memory: str | None = None  # how peak extra memory is measured, None if it is not
    notes: str = ""


def _backend(name: str, plain_sum: Maker, native: dict[str, dict[str, Maker]]) -> Backend:
    """Backend ``name`` of the registry: its data, synchronisation and dtypes, and anchors."""
    lib: Library = LIBRARIES[name]
    return Backend(
        name=name,
        convert=lib.from_numpy,
        sync=lib.sync,
        plain_sum=plain_sum,
        native=native,
        dtypes=tuple(d for d in BENCH_DTYPES if lib.has(d)),
    )


def _einsum_subscripts(ndim: int, axes: Axes | None) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"[:ndim]
    kept = "" if axes is None else "".join(c for i, c in enumerate(letters) if i not in axes)
    return f"{letters},{letters}->{kept}"


def _keep_shape(shape: Sequence[int], axes: Axes | None) -> tuple[int, ...]:
    return tuple(1 if axes is None or i in axes else n for i, n in enumerate(shape))


def _numpy() -> Backend:
    np_: Any = np  # untyped calls: axes may be None

    def einsum_sq(x: Array, a: Axes | None) -> Array:
        s = np_.einsum(_einsum_subscripts(x.ndim, a), x, x)
        return np_.reshape(s, _keep_shape(x.shape, a))

    def lse_shift(x: Array, a: Axes | None) -> Array:
        m = np_.max(x, axis=a, keepdims=True)
        return np_.log(np_.sum(np_.exp(x - m), axis=a, keepdims=True)) + m

    native: dict[str, dict[str, Maker]] = {
        "reduce_sum": {"np.sum": lambda x, a: lambda: np_.sum(x, axis=a, keepdims=True)},
        "reduce_mean": {"np.mean": lambda x, a: lambda: np_.mean(x, axis=a, keepdims=True)},
        "reduce_max": {"np.max": lambda x, a: lambda: np_.max(x, axis=a, keepdims=True)},
        "reduce_min": {"np.min": lambda x, a: lambda: np_.min(x, axis=a, keepdims=True)},
        "reduce_prod": {"np.prod": lambda x, a: lambda: np_.prod(x, axis=a, keepdims=True)},
        "reduce_l1": {
            "vector_norm(ord=1)": lambda x, a: (
                lambda: np_.linalg.vector_norm(x, ord=1, axis=a, keepdims=True)
            ),
        },
        "reduce_l2": {
            "sqrt(einsum)": lambda x, a: lambda: np_.sqrt(einsum_sq(x, a)),
            "vector_norm": lambda x, a: lambda: np_.linalg.vector_norm(x, axis=a, keepdims=True),
        },
        "reduce_sum_square": {"einsum": lambda x, a: lambda: einsum_sq(x, a)},
        "reduce_log_sum": {
            "log(np.sum)": lambda x, a: lambda: np_.log(np_.sum(x, axis=a, keepdims=True))
        },
        "reduce_log_sum_exp": {"max-shifted": lambda x, a: lambda: lse_shift(x, a)},
    }
    if importlib.util.find_spec("scipy") is not None:
        from scipy.special import logsumexp  # type: ignore[import-untyped]

        native["reduce_log_sum_exp"]["scipy logsumexp"] = lambda x, a: (
            lambda: logsumexp(x, axis=a, keepdims=True)
        )
    backend = _backend("numpy", lambda x, a: lambda: np_.sum(x, axis=a, keepdims=True), native)
    backend.memory = "tracemalloc"
    return backend


def _torch() -> Backend:
    import torch

    def dims(x: Array, a: Axes | None) -> tuple[int, ...]:
        return tuple(range(x.ndim)) if a is None else a

    def prod(x: Array, a: Axes | None) -> Array:
        # torch.prod takes one dim at a time.
        for d in sorted(dims(x, a), reverse=True):
            x = torch.prod(x, dim=d, keepdim=True)
        return x

    def vecdot(x: Array, a: Axes | None) -> Fn:
        d = dims(x, a)
        if len(d) == 1:
            return lambda: torch.linalg.vecdot(x, x, dim=d[0]).unsqueeze(d[0])
        return lambda: torch.sum(torch.square(x), dim=d, keepdim=True)

    native: dict[str, dict[str, Maker]] = {
        "reduce_sum": {"torch.sum": lambda x, a: lambda: torch.sum(x, dims(x, a), keepdim=True)},
        "reduce_mean": {"torch.mean": lambda x, a: lambda: torch.mean(x, dims(x, a), keepdim=True)},
        "reduce_max": {"torch.amax": lambda x, a: lambda: torch.amax(x, dims(x, a), keepdim=True)},
        "reduce_min": {"torch.amin": lambda x, a: lambda: torch.amin(x, dims(x, a), keepdim=True)},
        "reduce_prod": {"torch.prod": lambda x, a: lambda: prod(x, a)},
        "reduce_l1": {
            "vector_norm(ord=1)": lambda x, a: (
                lambda: torch.linalg.vector_norm(x, 1, dims(x, a), keepdim=True)
            )
        },
        "reduce_l2": {
            "vector_norm": lambda x, a: (
                lambda: torch.linalg.vector_norm(x, 2, dims(x, a), keepdim=True)
            )
        },
        "reduce_sum_square": {"vecdot": vecdot},
        "reduce_log_sum": {
            "log(torch.sum)": lambda x, a: lambda: torch.log(torch.sum(x, dims(x, a), keepdim=True))
        },
        "reduce_log_sum_exp": {
            "torch.logsumexp": lambda x, a: lambda: torch.logsumexp(x, dims(x, a), keepdim=True)
        },
    }
    backend = _backend("torch", lambda x, a: lambda: torch.sum(x, dims(x, a), keepdim=True), native)
    backend.memory = "torch profiler"
    backend.notes = f"{torch.get_num_threads()} threads"
    return backend


def _x64(jnp: Any) -> str:
    return "on" if jnp.asarray(1.0).dtype == jnp.float64 else "off"


def _jax() -> Backend:
    import jax
    import jax.numpy as jnp

    def jitted(fn: Callable[[Array, Axes | None], Array]) -> Maker:
        def make(x: Array, a: Axes | None) -> Fn:
            compiled = jax.jit(lambda y: fn(y, a))
            return lambda: compiled(x)

        return make

    def lse(x: Array, a: Axes | None) -> Array:
        return jax.nn.logsumexp(x, axis=a, keepdims=True)

    native: dict[str, dict[str, Maker]] = {
        "reduce_sum": {"jit(sum)": jitted(lambda x, a: jnp.sum(x, a, keepdims=True))},
        "reduce_mean": {"jit(mean)": jitted(lambda x, a: jnp.mean(x, a, keepdims=True))},
        "reduce_max": {"jit(max)": jitted(lambda x, a: jnp.max(x, a, keepdims=True))},
        "reduce_min": {"jit(min)": jitted(lambda x, a: jnp.min(x, a, keepdims=True))},
        "reduce_prod": {"jit(prod)": jitted(lambda x, a: jnp.prod(x, a, keepdims=True))},
        "reduce_l1": {"jit(sum(abs))": jitted(lambda x, a: jnp.sum(jnp.abs(x), a, keepdims=True))},
        "reduce_l2": {
            "jit(norm)": jitted(lambda x, a: jnp.linalg.vector_norm(x, axis=a, keepdims=True))
        },
        "reduce_sum_square": {
            "jit(sum(x*x))": jitted(lambda x, a: jnp.sum(x * x, a, keepdims=True))
        },
        "reduce_log_sum": {
            "jit(log(sum))": jitted(lambda x, a: jnp.log(jnp.sum(x, a, keepdims=True)))
        },
        "reduce_log_sum_exp": {"jit(logsumexp)": jitted(lse)},
    }
    # An eager jnp.sum: itself compiled once per signature and cached by JAX.
    backend = _backend("jax", lambda x, a: lambda: jnp.sum(x, a, keepdims=True), native)
    backend.notes = "x64 " + _x64(jnp)
    return backend


def _generic(name: str) -> Backend:
    # Backends without specialised kernels: the plain array-API composition is their native.
    xp = LIBRARIES[name].array_namespace()
    native: dict[str, dict[str, Maker]] = {
        "reduce_sum": {"sum": lambda x, a: lambda: xp.sum(x, axis=a, keepdims=True)},
        "reduce_mean": {"mean": lambda x, a: lambda: xp.mean(x, axis=a, keepdims=True)},
        "reduce_max": {"max": lambda x, a: lambda: xp.max(x, axis=a, keepdims=True)},
        "reduce_min": {"min": lambda x, a: lambda: xp.min(x, axis=a, keepdims=True)},
        "reduce_prod": {"prod": lambda x, a: lambda: xp.prod(x, axis=a, keepdims=True)},
        "reduce_l1": {"sum(abs)": lambda x, a: lambda: xp.sum(xp.abs(x), axis=a, keepdims=True)},
        "reduce_l2": {
            "sqrt(sum(x*x))": lambda x, a: lambda: xp.sqrt(xp.sum(x * x, axis=a, keepdims=True))
        },
        "reduce_sum_square": {
            "sum(x*x)": lambda x, a: lambda: xp.sum(x * x, axis=a, keepdims=True)
        },
        "reduce_log_sum": {
            "log(sum)": lambda x, a: lambda: xp.log(xp.sum(x, axis=a, keepdims=True))
        },
        "reduce_log_sum_exp": {
            "log(sum(exp))": lambda x, a: lambda: xp.log(xp.sum(xp.exp(x), axis=a, keepdims=True))
        },
    }
    return _backend(name, lambda x, a: lambda: xp.sum(x, axis=a, keepdims=True), native)


# The backends with native expressions of their own; the others get the generic ones.
_LOADERS: dict[str, Callable[[], Backend]] = {"numpy": _numpy, "torch": _torch, "jax": _jax}


def load_backend(name: str) -> Backend | None:
    """The backend called ``name``, or None when its library is not installed."""
    if not LIBRARIES[name].installed():
        return None
    loader = _LOADERS.get(name)
    return loader() if loader is not None else _generic(name)


def onnxruntime_kernel(
    onnx_name: str, data: np.ndarray, axes: Axes | None
) -> Callable[[], Any] | None:
    """onnxruntime's kernel for ``onnx_name`` over ``axes`` (keepdims=1), None if unavailable."""
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        return None
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    elem = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float16"): TensorProto.FLOAT16}
    if data.dtype not in elem:
        return None
    inputs = ["x"]
    initializers = []
    if axes is not None:
        axes_value = np.asarray(axes, dtype=np.int64)
        initializers.append(onnx.numpy_helper.from_array(axes_value, "axes"))
        inputs.append("axes")
    node = helper.make_node(onnx_name, inputs, ["y"], keepdims=1)
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", elem[data.dtype], list(data.shape))],
        [helper.make_tensor_value_info("y", elem[data.dtype], None)],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # onnxruntime's worker threads spin after a run, holding both cores for the next
    # contender: PyTorch calls timed right after took twice as long (L1: 23 against
    # 8.4 ms). Without spinning its own kernel times the same.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        feed = {"x": data}
        session.run(None, feed)
    except Exception:  # noqa: BLE001 - a kernel onnxruntime lacks is simply not an anchor
        return None
    return lambda: session.run(None, feed)
