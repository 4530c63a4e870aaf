"""The array libraries (and devices) the conformance suite runs anyreduce on.

A :class:`Target` is one library of the registry (``anyreduce._lib._libraries``) on one
device. :func:`discover` finds the installed ones without importing any library that is
not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._lib import _libraries

__all__ = ["LIBRARIES", "MODES", "Target", "discover"]

# The libraries anyreduce.onnx.backend_for knows, in report order.
LIBRARIES = tuple(name for name, lib in _libraries.LIBRARIES.items() if lib.mode_of is None)
# Modes of those libraries (JAX without 64-bit types, "jax32"): run by the parity tools when
# named, after their library; no ONNX backend, so not in the conformance suite.
MODES = tuple(name for name, lib in _libraries.LIBRARIES.items() if lib.mode_of is not None)


@dataclass(frozen=True)
class Target:
    """One array library on one device."""

    name: str  # the column in the report: the library, with ":cuda" for a GPU
    library: str  # the name anyreduce.onnx.backend_for takes
    device: str = "CPU"  # the ONNX backend device string, "CPU" or "CUDA"

    @property
    def _lib(self) -> _libraries.Library:
        return _libraries.LIBRARIES[self.library]

    @property
    def missing(self) -> frozenset[str]:
        """The dtypes the library lacks."""
        return frozenset(self._lib.missing)

    def has(self, dtype: str) -> bool:
        return self._lib.has(dtype)

    @property
    def reads_subnormals_as_zero(self) -> bool:
        """Whether the library reads subnormal inputs as zero on this device (XLA on the
        CPU): the contract's one exception, a slice of them reducing as zeros would."""
        return _libraries.parse_device(self.device)[0] in self._lib.subnormals_as_zero

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The library's global mode for the suite: JAX with 64-bit types on."""
        with self._lib.mode():
            yield

    def from_numpy(self, host: np.ndarray) -> Any:
        """``host`` as an array of this target (exact values, same dtype)."""
        return self._lib.from_numpy(host, self.device)

    def to_numpy(self, array: Any) -> np.ndarray:
        """The values of ``array`` (of this target) as NumPy on the host."""
        return self._lib.to_numpy(array)

    def is_native(self, array: Any) -> bool:
        """Whether ``array`` is an array of this target's library (not a scalar, not NumPy)."""
        return self._lib.is_native(array)


def discover(wanted: tuple[str, ...] | None = None) -> tuple[list[Target], dict[str, str]]:
    """The installed targets (restricted to ``wanted`` names) and why the others are absent."""
    found: list[Target] = []
    absent: dict[str, str] = {}
    named_modes = tuple(m for m in MODES if wanted is not None and m in wanted)
    for library in (*LIBRARIES, *named_modes):
        candidates = [Target(library, library, "CPU")]
        if not _libraries.installed(_libraries.LIBRARIES[library].module):
            if wanted is None or library in wanted:
                absent[library] = "not installed"
            continue
        if _libraries.LIBRARIES[library].gpus():
            candidates.append(Target(f"{library}:cuda", library, "CUDA"))
        found += [t for t in candidates if wanted is None or t.name in wanted]
    if not any(t.name.endswith(":cuda") for t in found) and (
        wanted is None or any(w.endswith(":cuda") for w in wanted)
    ):
        absent["cuda"] = "no CUDA device found (torch, jax)"
    return found, absent
