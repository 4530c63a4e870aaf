"""The one backend registry (``anyreduce._lib._libraries``) and the four places that use it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from anyreduce._lib import _libraries
from anyreduce._lib._libraries import LIBRARIES, MISSING_DTYPES, parse_device
from backends import ALL_DTYPES, BACKENDS, np_dtype

VALUES = {
    "bool": [True, False, True],
    "int8": [-128, 0, 127],
    "uint8": [0, 1, 255],
    "int16": [-32768, 5, 32767],
    "uint16": [0, 7, 65535],
    "int32": [-(2**31), 9, 2**31 - 1],
    "uint32": [0, 11, 2**32 - 1],
    "int64": [-(2**63), 13, 2**63 - 1],
    "uint64": [0, 17, 2**64 - 1],
    "float16": [-65504.0, 2.0**-24, np.inf],
    "bfloat16": [-3.3895314e38, 2.0**-133, -np.inf],
    "float32": [3.4028235e38, 2.0**-149, np.nan],
    "float64": [1.7976931348623157e308, 5e-324, -0.0],
}


def test_every_user_names_the_registry() -> None:
    from anyreduce._bench._anchors import BACKEND_NAMES
    from anyreduce._conformance._targets import LIBRARIES as TARGETS
    from anyreduce.onnx._libraries import LIBRARIES as ONNX

    assert tuple(b.name for b in BACKENDS) == tuple(LIBRARIES)
    primary = tuple(name for name, lib in LIBRARIES.items() if lib.mode_of is None)
    assert primary == TARGETS == tuple(ONNX) == BACKEND_NAMES
    assert all(ONNX[name] is LIBRARIES[name] for name in primary)
    assert {name for name, lib in LIBRARIES.items() if lib.mode_of} == {"jax32"}
    assert {name: lib.missing for name, lib in LIBRARIES.items()} == MISSING_DTYPES


def test_importing_the_registry_imports_no_array_library() -> None:
    code = (
        "import sys, anyreduce._lib._libraries as r\n"
        "[lib.installed() for lib in r.LIBRARIES.values()]\n"
        "print([m for m in ('torch', 'jax', 'dask', 'array_api_strict', 'ml_dtypes')"
        " if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", LIBRARIES)
def test_data_crosses_exactly_both_ways(name: str) -> None:
    lib = LIBRARIES[name]
    pytest.importorskip(lib.module)
    with lib.namespace():
        for dtype in ALL_DTYPES:
            if not lib.has(dtype):
                continue
            host = np.asarray(VALUES[dtype], dtype=np_dtype(dtype)).reshape(3, 1)
            native = lib.from_numpy(host)
            assert lib.is_native(native), (dtype, type(native))
            assert native.dtype == lib.dtype(dtype), (dtype, native.dtype)
            assert tuple(native.shape) == (3, 1)
            back = lib.to_numpy(native)
            assert back.dtype == host.dtype, (dtype, back.dtype)
            assert back.tobytes() == host.tobytes(), (dtype, back, host)
            assert not np.shares_memory(back, host)


@pytest.mark.parametrize("name", LIBRARIES)
def test_parity_reads_every_library_through_the_registry(name: str) -> None:
    from anyreduce._conformance._data import as_numpy

    lib = LIBRARIES[name]
    pytest.importorskip(lib.module)
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    with lib.namespace():
        native = lib.from_numpy(host)
        assert as_numpy(native).tobytes() == host.tobytes()
    with pytest.raises(TypeError, match="data must be an array"):
        as_numpy(np.float32(1))


@pytest.mark.parametrize("name", LIBRARIES)
def test_the_missing_dtypes_are_the_ones_the_namespace_lacks(name: str) -> None:
    lib = LIBRARIES[name]
    pytest.importorskip(lib.module)
    with lib.namespace() as xp:
        for dtype in lib.missing:
            if name in ("numpy", "dask") and dtype == "bfloat16":
                continue  # NumPy's dtypes (ml_dtypes' bfloat16 aside) are all it has
            if name == "jax32":
                continue  # the names exist; the arrays come out 32-bit (test_jax_modes)
            assert not hasattr(xp, dtype), (name, dtype)


@pytest.mark.parametrize("name", LIBRARIES)
def test_devices(name: str) -> None:
    lib = LIBRARIES[name]
    pytest.importorskip(lib.module)
    assert lib.supports("CPU")
    assert lib.supports("CPU:0")
    assert not lib.supports("CPU:1")
    assert not lib.supports("CUDA:64")
    assert lib.supports("CUDA") == (lib.gpus() > 0)


def test_jax_modes() -> None:
    pytest.importorskip("jax")
    with LIBRARIES["jax"].namespace() as xp:
        assert xp.asarray(1.0).dtype == xp.float64
    with LIBRARIES["jax32"].namespace() as xp:
        assert xp.asarray(1.0).dtype == xp.float32


@pytest.mark.parametrize("name", LIBRARIES)
def test_sync_gives_the_values(name: str) -> None:
    lib = LIBRARIES[name]
    pytest.importorskip(lib.module)
    with lib.namespace() as xp:
        total = lib.sync(xp.sum(lib.from_numpy(np.arange(4.0, dtype=np.float32))))
        assert float(np.asarray(total if name != "array_api_strict" else total._array)) == 6.0


def test_dask_data_come_in_halves_unless_told() -> None:
    pytest.importorskip("dask")
    lib = LIBRARIES["dask"]
    assert lib.from_numpy(np.zeros((5, 1, 4))).chunksize == (3, 1, 2)
    assert lib.from_numpy(np.zeros((5, 4)), chunks=(5, 1)).chunksize == (5, 1)


@pytest.mark.parametrize(
    ("device", "error"), [(0, TypeError), ("cuda", ValueError), ("GPU:0", ValueError)]
)
def test_bad_devices_are_named(device: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="device must be"):
        parse_device(device)


def test_unknown_library_is_named() -> None:
    with pytest.raises(ValueError, match="unknown array library 'cupy'; expected one of numpy"):
        _libraries.get("cupy")
