"""The ONNX backend test suite's 132 ``test_reduce_*`` node cases, on every array library.

The cases are the ``onnx`` package's own, run through ``onnx.backend.test.BackendTest``
with :func:`anyreduce.onnx.backend_for`; nothing is copied. A ``BackendTest`` loads every
case of the suite, generating the expected outputs of all ~1,900 node cases (tens of
seconds per test process); here it is handed the reduction cases only, built by importing
just the onnx package's reduction case modules. The cases and the runner are unchanged.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import warnings
from typing import Any
from unittest import mock

import pytest

import anyreduce.onnx

LIBRARIES = ("numpy", "torch", "jax", "array_api_strict", "dask")
EXPECTED_CASES = 132  # spec.md section 8
EXPECTED_EXPANDED = 41


# The onnx package computes expected outputs while it builds its cases, with NumPy
# warnings (log(0), overflow in cast) that the test configuration turns into errors.
_CASE_WARNINGS = {"action": "ignore", "category": RuntimeWarning, "module": r"onnx\.backend\.test"}


def _reduce_case_names() -> list[str]:
    try:
        import onnx.backend.test.case.node as cases
    except ImportError:
        return []
    with warnings.catch_warnings():
        warnings.filterwarnings(**_CASE_WARNINGS)
        for module in pkgutil.iter_modules(cases.__path__):
            if module.name.startswith("reduce"):
                importlib.import_module(f"{cases.__name__}.{module.name}")
    return sorted(c.name for c in cases._NodeTestCases if c.name.startswith("test_reduce_"))


CASES = _reduce_case_names()


def _reduction_cases(kind: str | None = None) -> list[Any]:
    """``load_model_tests`` restricted to the node cases of the reductions."""
    import onnx.backend.test.case.node as cases

    if kind != "node":
        return []
    return [c for c in cases._NodeTestCases if c.name.startswith("test_reduce_")]


@functools.cache
def backend_tests(library: str) -> Any:
    """``BackendTest`` of the ``test_reduce_*`` cases on ``library``, as a TestCase class."""
    import onnx.backend.test
    import onnx.backend.test.runner

    _reduce_case_names()
    with mock.patch.object(onnx.backend.test.runner, "load_model_tests", _reduction_cases):
        suite = onnx.backend.test.BackendTest(anyreduce.onnx.backend_for(library), __name__)
    return suite.include(r"^test_reduce_").tests


def test_the_suite_has_the_132_reduce_cases() -> None:
    pytest.importorskip("onnx")
    assert len(CASES) == EXPECTED_CASES
    assert sum(name.endswith("_expanded") for name in CASES) == EXPECTED_EXPANDED


def test_backend_test_selects_every_case() -> None:
    pytest.importorskip("onnx")
    tests = backend_tests("numpy")
    selected = sorted(name for name in dir(tests) if name.startswith("test_"))
    assert selected == sorted(f"{name}_{device}" for name in CASES for device in ("cpu", "cuda"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("library", LIBRARIES)
def test_backend_case(library: str, case: str) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip(library)
    tests = backend_tests(library)
    name = f"{case}_cpu"
    tests(name).debug()  # runs the case, raising its failure


@pytest.mark.parametrize("library", ["torch", "jax"])
def test_backend_cases_on_cuda(library: str) -> None:
    """All the cases on a GPU, where the library has one."""
    pytest.importorskip("onnx")
    pytest.importorskip(library)
    if not anyreduce.onnx.backend_for(library).supports_device("CUDA"):
        pytest.skip(f"{library} has no CUDA device here")
    tests = backend_tests(library)
    for case in CASES:
        tests(f"{case}_cuda").debug()
