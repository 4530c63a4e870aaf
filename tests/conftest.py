"""The ``xp`` fixture: every test runs on every installed backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from anyreduce._backends import no_accelerators
from backends import BACKENDS, Backend


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
