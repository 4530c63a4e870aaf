"""Remembered results of pure functions, in a form compilers trace without comment.

``functools.cache`` would do, except that ``torch.compile`` warns once for every
``lru_cache``-wrapped function it traces (it ignores the cache and traces the function).
A plain dictionary it traces as a dictionary, provided it can compare the keys: strings,
numbers and dtypes, not modules. So an array namespace in the arguments is keyed by its
module's name (a namespace wrapped with workarounds by the name of the one it wraps):
every function remembered here depends on the namespace only through its library.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["memo"]

F = TypeVar("F", bound=Callable[..., Any])

_MISSING = object()


def _key(arg: Any) -> Any:
    if isinstance(arg, types.ModuleType) or hasattr(arg, "__array_namespace_info__"):
        return ("namespace", getattr(arg, "__name__", None) or id(arg))
    return arg


def memo(limit: int | None = None) -> Callable[[F], F]:
    """Remember ``fn``'s result per tuple of positional arguments (errors are not
    remembered); with ``limit``, forget everything when that many are held."""

    def decorate(fn: F) -> F:
        table: dict[tuple[Any, ...], Any] = {}

        @functools.wraps(fn)
        def remembered(*args: Any) -> Any:
            key = tuple([_key(a) for a in args])
            value = table.get(key, _MISSING)
            if value is _MISSING:
                value = fn(*args)
                if limit is not None and len(table) >= limit:
                    table.clear()
                table[key] = value
            return value

        return remembered  # type: ignore[return-value]

    return decorate
