"""The backend matrix every test runs on, and the helpers to move data in and out of it."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import pytest

from anyreduce._backends import no_accelerators

try:
    import ml_dtypes

    BFLOAT16: Any = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - ml_dtypes ships with the test extra
    BFLOAT16 = None

INTEGER_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
ALL_DTYPES = (*INTEGER_DTYPES, *FLOAT_DTYPES, "bool")


@dataclass(frozen=True)
class Backend:
    """One array library (and mode) the suite runs on."""

    name: str
    module: str
    missing: tuple[str, ...] = ()  # dtypes the backend does not have
    general: bool = False  # the generic kernels only: every accelerator turned off

    def __str__(self) -> str:
        return f"{self.name}-general" if self.general else self.name

    @contextlib.contextmanager
    def active(self) -> Iterator[Any]:
        """Import the backend (skip if absent) and yield its array-API namespace."""
        path = no_accelerators() if self.general else contextlib.nullcontext()
        with path, self._namespace() as xp:
            yield xp

    @contextlib.contextmanager
    def _namespace(self) -> Iterator[Any]:
        pytest.importorskip(self.module)
        if self.name == "numpy":
            import array_api_compat.numpy as xp

            yield xp
        elif self.name == "array_api_strict":
            yield importlib.import_module("array_api_strict")
        elif self.name == "torch":
            import array_api_compat.torch as xp

            yield xp
        elif self.name == "dask":
            import array_api_compat.dask.array as xp

            yield xp
        else:
            import jax
            import jax.numpy as jnp

            with jax.enable_x64(self.name == "jax"):
                yield jnp

    def has(self, dtype: str) -> bool:
        return dtype not in self.missing


BACKENDS = (
    Backend("numpy", "numpy"),
    Backend("array_api_strict", "array_api_strict", ("float16", "bfloat16")),
    Backend("torch", "torch"),
    Backend("jax", "jax"),
    # JAX's default: no 64-bit types. A smaller run: the semantic tests only.
    Backend("jax32", "jax", ("int64", "uint64", "float64")),
    Backend("dask", "dask"),
)
# The backends with accelerators once more with them turned off: the generic kernels are
# what runs under every tracer and compiler, so they need their own run on every test.
BOTH_PATHS = (
    *BACKENDS,
    *(
        dataclasses.replace(b, general=True)
        for b in BACKENDS
        if b.name in {"numpy", "torch", "jax"}
    ),
)


def backend_of(xp: Any) -> str:
    """The name of the library behind namespace ``xp``."""
    if array_api_compat.is_numpy_namespace(xp):
        return "numpy"
    if array_api_compat.is_torch_namespace(xp):
        return "torch"
    if array_api_compat.is_jax_namespace(xp):
        return "jax"
    if array_api_compat.is_dask_namespace(xp):
        return "dask"
    return "array_api_strict"


def np_dtype(name: str) -> Any:
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def dtype_of(xp: Any, name: str) -> Any:
    """The namespace's dtype object called ``name``."""
    kind = backend_of(xp)
    if kind == "torch":
        import torch

        return getattr(torch, name)
    if name == "bfloat16" and kind in {"numpy", "dask"}:
        return np.dtype(BFLOAT16)
    if kind == "dask":
        return np.dtype(name)
    return getattr(xp, name)


def make(xp: Any, values: Any, dtype: str, *, chunks: Any = None) -> Any:
    """An array of backend ``xp`` holding ``values`` (exactly, once cast to ``dtype``)."""
    host = np.asarray(values).astype(np_dtype(dtype))
    kind = backend_of(xp)
    if kind == "torch":
        import torch

        if dtype == "bfloat16":
            return torch.from_numpy(host.astype(np.float32)).to(torch.bfloat16)
        return torch.from_numpy(host.copy())
    if kind == "dask":
        import dask.array as da

        return da.from_array(host, chunks=chunks or tuple(max(1, (n + 1) // 2) for n in host.shape))
    if kind == "jax":
        return xp.asarray(host)
    if kind == "array_api_strict":
        flat = xp.asarray(host.ravel().tolist(), dtype=dtype_of(xp, dtype))
        return xp.reshape(flat, host.shape)
    return xp.asarray(host)


def to_numpy(a: Any) -> np.ndarray:
    """The values of array ``a`` on the host, as NumPy (bfloat16 as ml_dtypes)."""
    xp = array_api_compat.array_namespace(a)
    kind = backend_of(xp)
    if kind == "torch":
        import torch

        t = a.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.float().numpy().astype(BFLOAT16)
        return t.numpy()
    if kind == "dask":
        # Computed here, so NumPy's IEEE warnings (log(0) = -inf) are the caller's to silence.
        with np.errstate(all="ignore"):
            return np.asarray(a.compute(scheduler="sync"))
    if kind == "array_api_strict":
        return np.asarray(a._array)
    return np.asarray(a)


TOLERANCE = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-20, "float64": 2.0**-48}


def assert_result(
    result: Any,
    xp: Any,
    dtype: str,
    shape: tuple[int, ...],
    expected: Any,
    *,
    like: Any = None,
    rtol: float | None = None,
    atol: float = 0.0,
) -> None:
    """Check namespace, dtype, shape and device of ``result``, then its values."""
    assert array_api_compat.is_array_api_obj(result), f"not an array: {type(result)}"
    assert backend_of(array_api_compat.array_namespace(result)) == backend_of(xp)
    if backend_of(xp) == "numpy":
        assert isinstance(result, np.ndarray), f"a NumPy scalar, not an array: {type(result)}"
    assert result.dtype == dtype_of(xp, dtype), f"dtype {result.dtype}, expected {dtype}"
    assert tuple(result.shape) == tuple(shape), f"shape {tuple(result.shape)}, expected {shape}"
    if like is not None:
        assert array_api_compat.device(result) == array_api_compat.device(like)
    got = to_numpy(result)
    want = np.asarray(expected)
    if dtype == "bool" or dtype in INTEGER_DTYPES:
        assert [int(v) for v in got.ravel()] == [int(v) for v in want.ravel()], (got, want)
        return
    got64 = got.astype(np.float64)
    want64 = want.astype(np.float64)
    tol = TOLERANCE[dtype] if rtol is None else rtol
    # The exact value rounded to the dtype: compare against that rounding, not the raw value.
    with np.errstate(over="ignore"):
        rounded = want64.astype(np_dtype(dtype)).astype(np.float64)
    np.testing.assert_allclose(got64, rounded, rtol=tol, atol=atol, equal_nan=True)
