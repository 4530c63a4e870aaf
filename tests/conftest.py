"""The ``xp`` fixture: every test runs on every installed backend."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import backends
from anyreduce._backends import accelerators_enabled, no_accelerators
from anyreduce._lib._libraries import parse_device
from backends import BACKENDS, Backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default=None,
        help="where the xp fixture puts its data: cpu (default) or cuda, the GPU lane "
        "(PyTorch and JAX on their first CUDA device; the other backends are skipped)",
    )


def pytest_configure(config: pytest.Config) -> None:
    device = config.getoption("--device") or os.environ.get("ANYREDUCE_TEST_DEVICE", "cpu")
    try:
        parse_device(device.upper())
    except ValueError:
        msg = f"--device (or ANYREDUCE_TEST_DEVICE) must be cpu, cuda or cuda:N; got {device!r}"
        raise pytest.UsageError(msg) from None
    backends.DEVICE = device.upper()
    if backends.DEVICE != "CPU":
        # JAX takes 75% of a GPU's memory at its first call: one worker of pytest-xdist
        # would leave none to the others.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With every accelerator off (ANYREDUCE_ACCELERATORS=0), the tests of an accelerator's
    own behaviour are skipped: the generic kernels' values are tested everywhere else."""
    if accelerators_enabled():
        return
    skip = pytest.mark.skip(reason="tests an accelerator, and ANYREDUCE_ACCELERATORS=0")
    for item in items:
        if item.get_closest_marker("accelerated") is not None:
            item.add_marker(skip)


@pytest.fixture(params=BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def xp(backend: Backend) -> Iterator[Any]:
    """The array-API namespace of one backend (skipped when it is not installed)."""
    with backend.active() as namespace:
        yield namespace


@pytest.fixture
def dtype_available(backend: Backend) -> Any:
    def check(dtype: str) -> None:
        if not backend.has(dtype):
            pytest.skip(f"{backend.name} has no {dtype}")

    return check


@pytest.fixture(params=["accelerated", "generic"])
def kernel_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both ways anyreduce computes: with the backends' accelerators where they apply, and
    with the generic kernels alone (what runs under tracers and compilers). (Tests on the
    ``xp`` fixture get the same through ``backends.BOTH_PATHS``.)
    """
    if request.param == "generic":
        with no_accelerators():
            yield request.param
    else:
        yield request.param
