"""The ``xp`` fixture: every test runs on every installed backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from anyreduce._lib import _small
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


@pytest.fixture(params=["small", "general"])
def kernel_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both ways anyreduce computes: small inputs' own formulations where they apply
    (``anyreduce._lib._small``), and the general kernels alone. Most test data are small,
    so without the second the general kernels would go untested on them. (Tests on the
    ``xp`` fixture get the same through ``backends.BOTH_PATHS``.)
    """
    if request.param == "general":
        with _small.general_only():
            yield request.param
    else:
        yield request.param
