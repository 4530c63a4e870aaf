"""The array libraries an ONNX backend can run on, and the crossing to and from NumPy.

An ONNX backend receives and returns NumPy arrays; in between, everything runs on the
library's own arrays, on its own device. This is the only module of the ONNX profile that
names a library, and it does so only to move data across that boundary: the computing is
the core's, through the array API.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LIBRARIES", "Library", "library", "parse_device"]

Array = Any

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


def _is_bfloat16(a: np.ndarray) -> bool:
    return bool(a.dtype.name == "bfloat16")


def _bfloat16() -> Any:
    import ml_dtypes

    return ml_dtypes.bfloat16


# --- numpy


def _numpy_in(a: np.ndarray, device: str) -> Array:
    return np.array(a, copy=True)


def _numpy_out(a: Array) -> np.ndarray:
    return np.asarray(a)


# --- torch


def _torch_device(device: str) -> str:
    kind, index = parse_device(device)
    return f"cuda:{index}" if kind == "CUDA" else "cpu"


def _torch_in(a: np.ndarray, device: str) -> Array:
    import torch

    host = np.array(a, copy=True)  # torch.from_numpy warns on read-only arrays
    if _is_bfloat16(host):
        # torch cannot read ml_dtypes' bfloat16: move the bits as int16.
        tensor = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(host)
    return tensor.to(_torch_device(device))


def _torch_out(a: Array) -> np.ndarray:
    import torch

    tensor = a.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return np.asarray(tensor.view(torch.int16).numpy().view(_bfloat16()))
    return np.asarray(tensor.numpy())


def _torch_has(device: str) -> bool:
    import torch

    kind, index = parse_device(device)
    if kind == "CUDA":
        return bool(torch.cuda.is_available()) and index < torch.cuda.device_count()
    return index == 0


# --- jax


def _jax_in(a: np.ndarray, device: str) -> Array:
    import jax

    _, index = parse_device(device)
    return jax.device_put(np.array(a, copy=True), _jax_devices(device)[index])


def _jax_devices(device: str) -> list[Any]:
    import jax

    kind, _ = parse_device(device)
    try:
        return list(jax.devices("gpu" if kind == "CUDA" else "cpu"))
    except RuntimeError:  # no such platform
        return []


def _jax_has(device: str) -> bool:
    _, index = parse_device(device)
    return index < len(_jax_devices(device))


def _jax_out(a: Array) -> np.ndarray:
    return np.asarray(a)


@contextlib.contextmanager
def _jax_context() -> Iterator[None]:
    # ONNX models carry float64 and int64 tensors: run with JAX's 64-bit types enabled.
    import jax

    with jax.enable_x64(True):
        yield


# --- array-api-strict


def _strict_in(a: np.ndarray, device: str) -> Array:
    return importlib.import_module("array_api_strict").asarray(np.array(a, copy=True))


def _strict_out(a: Array) -> np.ndarray:
    return np.array(np.from_dlpack(a), copy=True)


# --- dask


def _dask_in(a: np.ndarray, device: str) -> Array:
    import dask.array

    return dask.array.from_array(np.array(a, copy=True))  # type: ignore[no-untyped-call]


def _dask_out(a: Array) -> np.ndarray:
    # NumPy computes the graph now; its IEEE warnings (log(0) = -inf) are expected values.
    with np.errstate(all="ignore"):
        return np.asarray(a.compute())


def _cpu_only(device: str) -> bool:
    return parse_device(device) == ("CPU", 0)


@contextlib.contextmanager
def _no_context() -> Iterator[None]:
    yield


@dataclass(frozen=True)
class Library:
    """One array library an ONNX backend runs on.

    Attributes
    ----------
    name : str
        The name :func:`anyreduce.onnx.backend_for` takes (``"torch"``).
    module : str
        The module that must be importable.
    extra : str
        The anyreduce extra that installs it.
    from_numpy : callable
        ``(array, device) -> native array`` on ``device`` (``"CPU"`` or ``"CUDA"``).
    to_numpy : callable
        ``native array -> numpy.ndarray``.
    supports : callable
        ``device -> bool`` for a valid device string (:func:`parse_device`).
    context : callable
        A context manager every run of the library happens in.
    """

    name: str
    module: str
    extra: str
    from_numpy: Callable[[np.ndarray, str], Array]
    to_numpy: Callable[[Array], np.ndarray]
    supports: Callable[[str], bool] = _cpu_only
    context: Callable[[], contextlib.AbstractContextManager[None]] = _no_context


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("numpy", "numpy", "", _numpy_in, _numpy_out),
        Library("torch", "torch", "torch", _torch_in, _torch_out, _torch_has),
        Library(
            "jax",
            "jax",
            "jax",
            _jax_in,
            _jax_out,
            _jax_has,
            _jax_context,
        ),
        Library(
            "array_api_strict",
            "array_api_strict",
            "strict",
            _strict_in,
            _strict_out,
        ),
        Library("dask", "dask", "dask", _dask_in, _dask_out),
    )
}


def library(name: object) -> Library:
    """The installed library called ``name``; ValueError if unknown, ImportError if absent."""
    if not isinstance(name, str):
        msg = (
            f"backend_for: the array library must be a name, one of {', '.join(LIBRARIES)}; "
            f"got {type(name).__name__}"
        )
        raise TypeError(msg)
    if name not in LIBRARIES:
        msg = f"backend_for: unknown array library {name!r}; expected one of {', '.join(LIBRARIES)}"
        raise ValueError(msg)
    lib = LIBRARIES[name]
    try:
        importlib.import_module(lib.module)
    except ImportError as e:
        msg = f'backend_for({name!r}) needs {lib.module}: pip install "anyreduce[{lib.extra}]"'
        raise ImportError(msg) from e
    return lib
