"""The array libraries anyreduce runs on: one table shared by the tests, the conformance
engine, the benchmark and :func:`anyreduce.onnx.backend_for`.

Each :class:`Library` says how to import the library and get its array-API namespace (in
its mode: JAX with or without 64-bit types), which of the contract's dtypes it lacks, how to
move NumPy data (bfloat16 as ``ml_dtypes.bfloat16`` included) onto one of its devices and
back, how to wait for a result, and which devices it has. Nothing is imported until a
library is used; importing this module imports no array library but NumPy.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEVICES",
    "LIBRARIES",
    "MISSING_DTYPES",
    "Library",
    "get",
    "installed",
    "library_of",
    "parse_device",
]

Array = Any
Namespace = Any

#: The dtypes of the contract (spec §3) each library lacks.
MISSING_DTYPES: dict[str, tuple[str, ...]] = {
    "numpy": (),
    "torch": (),
    "jax": (),
    # JAX's default mode: no 64-bit types.
    "jax32": ("int64", "uint64", "float64"),
    "array_api_strict": ("float16", "bfloat16"),
    "dask": (),
}

# onnx.backend.base.Device: a DeviceType name, then an optional ":index".
_DEVICE = re.compile(r"(CPU|CUDA)(?::([0-9]+))?")
DEVICES = "'CPU', 'CUDA' or 'CUDA:N' (onnx.backend.base.DeviceType, upper case)"


def parse_device(device: object) -> tuple[str, int]:
    """``("CPU", 0)`` or ``("CUDA", n)`` from an ONNX backend device string.

    TypeError for a non-string, ValueError for a string that names no ONNX device type.
    """
    if not isinstance(device, str):
        msg = f"device must be a string, one of {DEVICES}; got {type(device).__name__}"
        raise TypeError(msg)
    match = _DEVICE.fullmatch(device)
    if match is None:
        msg = f"device must be {DEVICES}; got {device!r}"
        raise ValueError(msg)
    return match[1], int(match[2] or 0)


def _bfloat16() -> Any:
    import ml_dtypes

    return ml_dtypes.bfloat16


def _halves(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(1, (n + 1) // 2) for n in shape)


def _cpu_only(device: str) -> int:
    return 1 if parse_device(device)[0] == "CPU" else 0


@contextlib.contextmanager
def _no_mode() -> Iterator[None]:
    yield


def _same(a: Array) -> Array:
    return a


# --- numpy


def _numpy_namespace() -> Namespace:
    import array_api_compat.numpy as xp

    return xp


def _numpy_in(host: np.ndarray, device: str, chunks: Any) -> Array:
    return np.array(host, copy=True)


def _numpy_out(a: Array) -> np.ndarray:
    return np.asarray(a)


# --- torch


def _torch_namespace() -> Namespace:
    import array_api_compat.torch as xp

    return xp


def _torch_device(device: str) -> str:
    kind, index = parse_device(device)
    return f"cuda:{index}" if kind == "CUDA" else "cpu"


def _torch_in(host: np.ndarray, device: str, chunks: Any) -> Array:
    import torch

    copy = np.array(host, copy=True)  # torch.from_numpy warns on read-only arrays
    if copy.dtype.name == "bfloat16":
        # torch cannot read ml_dtypes' bfloat16: move the bits as int16.
        tensor = torch.from_numpy(copy.view(np.int16)).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(copy)
    return tensor.to(_torch_device(device))


def _torch_out(a: Array) -> np.ndarray:
    import torch

    tensor = a.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return np.asarray(tensor.view(torch.int16).numpy().view(_bfloat16()))
    return np.asarray(tensor.numpy())


def _torch_sync(a: Array) -> Array:
    # CUDA kernels run after the call returns: wait for the tensor's device.
    if a.device.type == "cuda":
        import torch

        torch.cuda.synchronize(a.device)
    return a


def _torch_devices(device: str) -> int:
    import torch

    if parse_device(device)[0] == "CUDA":
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    return 1


# --- jax


def _jax_namespace() -> Namespace:
    import jax.numpy as jnp

    return jnp


def _jax_platform(device: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices("gpu" if parse_device(device)[0] == "CUDA" else "cpu"))
    except RuntimeError:  # no such platform
        return []


def _jax_in(host: np.ndarray, device: str, chunks: Any) -> Array:
    import jax

    return jax.device_put(np.array(host, copy=True), _jax_platform(device)[parse_device(device)[1]])


def _jax_devices(device: str) -> int:
    return len(_jax_platform(device))


def _jax_sync(a: Array) -> Array:
    return a.block_until_ready()


def _jax_mode(x64: bool) -> Callable[[], contextlib.AbstractContextManager[None]]:
    @contextlib.contextmanager
    def mode() -> Iterator[None]:
        import jax

        with jax.enable_x64(x64):
            yield

    return mode


# --- array-api-strict


def _strict_namespace() -> Namespace:
    return importlib.import_module("array_api_strict")


def _strict_in(host: np.ndarray, device: str, chunks: Any) -> Array:
    return _strict_namespace().asarray(np.array(host, copy=True))


def _strict_out(a: Array) -> np.ndarray:
    return np.array(np.from_dlpack(a), copy=True)


# --- dask


def _dask_namespace() -> Namespace:
    import array_api_compat.dask.array as xp

    return xp


def _dask_in(host: np.ndarray, device: str, chunks: Any) -> Array:
    import dask.array as da

    copy = np.array(host, copy=True)
    return da.from_array(copy, chunks=_halves(copy.shape) if chunks is None else chunks)  # type: ignore[no-untyped-call]


def _dask_out(a: Array) -> np.ndarray:
    # NumPy computes the graph now; its IEEE warnings (log(0) = -inf) are expected values.
    with np.errstate(all="ignore"):
        return np.asarray(a.compute(scheduler="sync"))


def _dask_sync(a: Array) -> Array:
    return a.compute()


@dataclass(frozen=True)
class Library:
    """One array library (in one mode) anyreduce runs on.

    Attributes
    ----------
    name : str
        Its name in the registry (``"torch"``, ``"jax32"``).
    module : str
        The module that must be importable.
    extra : str
        The anyreduce extra that installs it (``""``: a dependency of anyreduce).
    missing : tuple of str
        The contract's dtypes it lacks (:data:`MISSING_DTYPES`).
    mode_of : str or None
        For a mode of another library (JAX without 64-bit types), that library's name: it
        is no name :func:`anyreduce.onnx.backend_for` takes.
    subnormals_as_zero : frozenset of str
        The device types (``"CPU"``, ``"CUDA"``) on which the library reads subnormal
        inputs as zero: XLA's CPU code, the contract's one exception.
    """

    name: str
    module: str
    extra: str
    missing: tuple[str, ...]
    _namespace: Callable[[], Namespace]
    _in: Callable[[np.ndarray, str, Any], Array]
    _out: Callable[[Array], np.ndarray]
    _sync: Callable[[Array], Array] = _same
    _devices: Callable[[str], int] = _cpu_only
    _mode: Callable[[], contextlib.AbstractContextManager[None]] = _no_mode
    mode_of: str | None = None
    subnormals_as_zero: frozenset[str] = frozenset()

    def installed(self) -> bool:
        """Whether the library can be imported (without importing it)."""
        return installed(self.module)

    def has(self, dtype: str) -> bool:
        """Whether the library has the contract's dtype called ``dtype``."""
        return dtype not in self.missing

    def mode(self) -> contextlib.AbstractContextManager[None]:
        """The library's global mode (JAX's 64-bit types on or off); a no-op elsewhere."""
        return self._mode()

    def array_namespace(self) -> Namespace:
        """Import the library and return its array-API namespace (the mode is the caller's)."""
        return self._namespace()

    @contextlib.contextmanager
    def namespace(self) -> Iterator[Namespace]:
        """Import the library and yield its array-API namespace, in the library's mode."""
        with self.mode():
            yield self._namespace()

    def dtype(self, name: str) -> Any:
        """The library's dtype object called ``name``."""
        if self.name == "torch":
            return getattr(importlib.import_module("torch"), name)
        if name == "bfloat16" and self.name in {"numpy", "dask"}:
            return np.dtype(importlib.import_module("ml_dtypes").bfloat16)
        if self.name == "dask":
            return np.dtype(name)
        return getattr(self._namespace(), name)

    def from_numpy(self, host: np.ndarray, device: str = "CPU", *, chunks: Any = None) -> Array:
        """A copy of ``host`` (exact values, same dtype) on ``device`` (an ONNX device string).

        ``chunks``: Dask's chunks (default: each axis in two halves); ignored elsewhere.
        """
        return self._in(host, device, chunks)

    def to_numpy(self, array: Array) -> np.ndarray:
        """The values of ``array`` (of this library) as NumPy on the host."""
        return self._out(array)

    def sync(self, result: Array) -> Array:
        """``result`` once computed: waits for asynchronous and lazy libraries."""
        return self._sync(result)

    def supports(self, device: str) -> bool:
        """Whether ``device`` (an ONNX device string, :func:`parse_device`) exists here."""
        return parse_device(device)[1] < self._devices(device)

    def gpus(self) -> int:
        """How many CUDA devices the (installed) library sees; 0 where it has none."""
        try:
            return self._devices("CUDA")
        except RuntimeError:  # a library built with GPU support but no usable device
            return 0

    def is_native(self, array: Array) -> bool:
        """Whether ``array`` is an array of this library (not a scalar, not NumPy's)."""
        if self.name == "numpy":
            return isinstance(array, np.ndarray)
        module = type(array).__module__.split(".")[0]
        if self.module == "jax":
            return module in ("jaxlib", "jax")
        return module == self.module


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library(
            "numpy", "numpy", "", MISSING_DTYPES["numpy"], _numpy_namespace, _numpy_in, _numpy_out
        ),
        Library(
            "torch",
            "torch",
            "torch",
            MISSING_DTYPES["torch"],
            _torch_namespace,
            _torch_in,
            _torch_out,
            _torch_sync,
            _devices=_torch_devices,
        ),
        Library(
            "jax",
            "jax",
            "jax",
            MISSING_DTYPES["jax"],
            _jax_namespace,
            _jax_in,
            _numpy_out,
            _jax_sync,
            _jax_devices,
            _jax_mode(True),  # ONNX models and the contract's dtypes need int64 and float64
            subnormals_as_zero=frozenset({"CPU"}),
        ),
        Library(
            "jax32",
            "jax",
            "jax",
            MISSING_DTYPES["jax32"],
            _jax_namespace,
            _jax_in,
            _numpy_out,
            _jax_sync,
            _jax_devices,
            _jax_mode(False),
            mode_of="jax",
            subnormals_as_zero=frozenset({"CPU"}),
        ),
        Library(
            "array_api_strict",
            "array_api_strict",
            "strict",
            MISSING_DTYPES["array_api_strict"],
            _strict_namespace,
            _strict_in,
            _strict_out,
        ),
        Library(
            "dask",
            "dask",
            "dask",
            MISSING_DTYPES["dask"],
            _dask_namespace,
            _dask_in,
            _dask_out,
            _dask_sync,
        ),
    )
}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def get(name: str) -> Library:
    """The library called ``name``; ValueError naming the known ones if there is none."""
    if name not in LIBRARIES:
        msg = f"unknown array library {name!r}; expected one of {', '.join(LIBRARIES)}"
        raise ValueError(msg)
    return LIBRARIES[name]


def library_of(xp: Namespace) -> str:
    """The registry name of the library behind namespace ``xp`` (``"jax"`` for JAX in
    either mode)."""
    from .._backends import profile_for

    return profile_for(xp).name
