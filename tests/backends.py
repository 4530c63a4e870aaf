"""The backend matrix every test runs on, and the helpers to move data in and out of it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import pytest

from anyreduce._backends import no_accelerators
from anyreduce._lib._libraries import LIBRARIES, Library, library_of

try:
    import ml_dtypes

    BFLOAT16: Any = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - ml_dtypes ships with the test extra
    BFLOAT16 = None

#: Where the suite puts its data: "CPU", or "CUDA" for the GPU lane (``pytest --device
#: cuda``, or the environment variable ``ANYREDUCE_TEST_DEVICE``), which runs every test on
#: the libraries with a CUDA device (PyTorch, JAX) and skips the others.
DEVICE = os.environ.get("ANYREDUCE_TEST_DEVICE", "CPU").upper()

INTEGER_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
ALL_DTYPES = (*INTEGER_DTYPES, *FLOAT_DTYPES, "bool")


@dataclass(frozen=True)
class Backend:
    """One array library (and mode) the suite runs on: an entry of the registry
    (``anyreduce._lib._libraries``), optionally with every accelerator turned off."""

    name: str
    general: bool = False  # the generic kernels only: every accelerator turned off

    def __str__(self) -> str:
        return f"{self.name}-general" if self.general else self.name

    @property
    def library(self) -> Library:
        return LIBRARIES[self.name]

    @property
    def module(self) -> str:
        return self.library.module

    @property
    def missing(self) -> tuple[str, ...]:
        return self.library.missing

    @contextlib.contextmanager
    def active(self) -> Iterator[Any]:
        """Import the backend (skip if absent) and yield its array-API namespace."""
        pytest.importorskip(self.module)
        if DEVICE != "CPU" and not self.library.supports(DEVICE):
            pytest.skip(f"{self.name} has no {DEVICE} device")
        path = no_accelerators() if self.general else contextlib.nullcontext()
        with path, self.library.namespace() as xp:
            yield xp

    def has(self, dtype: str) -> bool:
        return self.library.has(dtype)


# Every library of the registry; jax32 (JAX's default: no 64-bit types) gets a smaller run,
# the semantic tests only.
BACKENDS = tuple(Backend(name) for name in LIBRARIES)
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


def accumulator(backend: Backend, dtype: str) -> str:
    """The dtype ``dtype`` is accumulated in on ``backend``."""
    if dtype in {"float32", "float64"}:
        return dtype
    return "float64" if backend.has("float64") else "float32"


def backend_of(xp: Any) -> str:
    """The name of the library behind namespace ``xp``."""
    return library_of(xp)


def np_dtype(name: str) -> Any:
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def dtype_of(xp: Any, name: str) -> Any:
    """The namespace's dtype object called ``name``."""
    return LIBRARIES[backend_of(xp)].dtype(name)


def make(xp: Any, values: Any, dtype: str, *, chunks: Any = None) -> Any:
    """An array of backend ``xp`` holding ``values`` (exactly, once cast to ``dtype``)."""
    host = np.asarray(values).astype(np_dtype(dtype))
    return LIBRARIES[backend_of(xp)].from_numpy(host, DEVICE, chunks=chunks)


def to_numpy(a: Any) -> np.ndarray:
    """The values of array ``a`` on the host, as NumPy (bfloat16 as ml_dtypes)."""
    return LIBRARIES[backend_of(array_api_compat.array_namespace(a))].to_numpy(a)


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
