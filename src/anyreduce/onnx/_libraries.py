"""The array libraries an ONNX backend can run on: those of the registry
(``anyreduce._lib._libraries``) that are no mode of another one.

An ONNX backend receives and returns NumPy arrays; in between, everything runs on the
library's own arrays, on its own device, in its mode (JAX with 64-bit types: ONNX models
carry float64 and int64 tensors). The registry moves data across that boundary; the
computing is the core's, through the array API.
"""

from __future__ import annotations

import importlib

from .._lib._libraries import LIBRARIES as _REGISTRY
from .._lib._libraries import Library, parse_device

__all__ = ["LIBRARIES", "Library", "library", "parse_device"]

LIBRARIES: dict[str, Library] = {
    name: lib for name, lib in _REGISTRY.items() if lib.mode_of is None
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
