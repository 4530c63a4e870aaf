"""The array libraries (and devices) the conformance suite runs anyreduce on.

A :class:`Target` moves NumPy data onto its library and device and results back, and says
which dtypes it has. :func:`discover` finds the installed ones without importing any
library that is not installed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._exact import np_dtype

__all__ = ["LIBRARIES", "Target", "discover"]

# The libraries anyreduce.onnx.backend_for knows, in report order.
LIBRARIES = ("numpy", "torch", "jax", "array_api_strict", "dask")


@dataclass(frozen=True)
class Target:
    """One array library on one device."""

    name: str  # the column in the report: the library, with ":cuda" for a GPU
    library: str  # the name anyreduce.onnx.backend_for takes
    device: str = "CPU"  # the ONNX backend device string, "CPU" or "CUDA"
    missing: frozenset[str] = field(default_factory=frozenset)  # dtypes it lacks

    def has(self, dtype: str) -> bool:
        return dtype not in self.missing

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The library's global mode for the suite: JAX with 64-bit types on."""
        if self.library == "jax":
            import jax

            with jax.enable_x64(True):
                yield
        else:
            yield

    def from_numpy(self, host: np.ndarray) -> Any:
        """``host`` as an array of this target (exact values, same dtype)."""
        dtype = host.dtype.name  # "bfloat16" for ml_dtypes data
        if self.library == "torch":
            import torch

            device = "cuda" if self.device == "CUDA" else "cpu"
            if dtype == "bfloat16":
                return torch.from_numpy(host.astype(np.float32)).to(torch.bfloat16).to(device)
            return torch.from_numpy(np.array(host, copy=True)).to(device)
        if self.library == "jax":
            import jax
            import jax.numpy as jnp

            platform = "gpu" if self.device == "CUDA" else "cpu"
            return jax.device_put(jnp.asarray(host), jax.devices(platform)[0])
        if self.library == "dask":
            import dask.array as da

            chunks = tuple(max(1, (n + 1) // 2) for n in host.shape)
            return da.from_array(np.array(host, copy=True), chunks=chunks)  # type: ignore[no-untyped-call]
        if self.library == "array_api_strict":
            import array_api_strict as xps

            flat = xps.asarray(host.ravel().tolist(), dtype=getattr(xps, dtype))
            return xps.reshape(flat, host.shape)
        return np.array(host, copy=True)

    def to_numpy(self, array: Any) -> np.ndarray:
        """The values of ``array`` (of this target) as NumPy on the host."""
        if self.library == "torch":
            import torch

            tensor = array.detach().cpu()
            if tensor.dtype == torch.bfloat16:
                return np.asarray(tensor.float().numpy().astype(np_dtype("bfloat16")))
            return np.asarray(tensor.numpy())
        if self.library == "dask":
            with np.errstate(all="ignore"):
                return np.asarray(array.compute(scheduler="sync"))
        if self.library == "array_api_strict":
            return np.asarray(array._array)
        return np.asarray(array)

    def is_native(self, array: Any) -> bool:
        """Whether ``array`` is an array of this target's library (not a scalar, not NumPy)."""
        if self.library == "numpy":
            return isinstance(array, np.ndarray)
        module = type(array).__module__.split(".")[0]
        if self.library == "jax":
            return module in ("jaxlib", "jax")
        return module == self.library


_MISSING = {
    "numpy": frozenset({"bfloat16"}),
    "dask": frozenset({"bfloat16"}),
    "array_api_strict": frozenset({"float16", "bfloat16"}),
    "torch": frozenset(),
    "jax": frozenset(),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _gpu_targets(library: str) -> list[Target]:
    """CUDA devices of ``library`` when it has them (the library is installed)."""
    try:
        if library == "torch":
            import torch

            if torch.cuda.is_available():
                return [Target("torch:cuda", "torch", "CUDA", _MISSING["torch"])]
        elif library == "jax":
            import jax

            if any(d.platform == "gpu" for d in jax.devices()):
                return [Target("jax:cuda", "jax", "CUDA", _MISSING["jax"])]
    except RuntimeError:  # a library built with GPU support but no usable device
        return []
    return []


def discover(wanted: tuple[str, ...] | None = None) -> tuple[list[Target], dict[str, str]]:
    """The installed targets (restricted to ``wanted`` names) and why the others are absent."""
    found: list[Target] = []
    absent: dict[str, str] = {}
    for library in LIBRARIES:
        candidates = [Target(library, library, "CPU", _MISSING[library])]
        if not _installed(library):
            if wanted is None or library in wanted:
                absent[library] = "not installed"
            continue
        candidates += _gpu_targets(library)
        found += [t for t in candidates if wanted is None or t.name in wanted]
    if not any(name.endswith(":cuda") for name in [t.name for t in found]) and (
        wanted is None or any(w.endswith(":cuda") for w in wanted)
    ):
        absent["cuda"] = "no CUDA device found (torch, jax)"
    return found, absent
