"""The ``xp`` fixture: every test runs on every installed backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
