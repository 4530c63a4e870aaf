"""Remembered results of pure functions, in a form compilers trace without comment.

``functools.cache`` would do, except that ``torch.compile`` warns once for every
``lru_cache``-wrapped function it traces (it ignores the cache and traces the function).
A plain dictionary it traces as a dictionary, provided it can compare the keys: strings,
numbers, tuples and dtypes, not modules. So a function of an array namespace is keyed
by its library's name (:func:`library_key`); the name also keeps dtypes of different
libraries from being compared (array-api-strict warns when its dtypes meet NumPy's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["library_key", "memo"]

F = TypeVar("F", bound=Callable[..., Any])

_MISSING = object()


def library_key(xp: Any, *rest: Any) -> Hashable:
    """The key of a function of ``(xp, ...)``: the namespace's module name (a namespace
    wrapped with workarounds answers with the name of the one it wraps)."""
    return (getattr(xp, "__name__", None) or id(xp), *rest)


def memo(
    *, limit: int | None = None, key: Callable[..., Hashable] | None = None
) -> Callable[[F], F]:
    """Remember ``fn``'s result per ``key(*args)`` (the positional arguments themselves
    when ``key`` is None); errors are not remembered. With ``limit``, everything is
    forgotten when that many are held."""

    def decorate(fn: F) -> F:
        table: dict[Hashable, Any] = {}

        def store(k: Hashable, args: tuple[Any, ...]) -> Any:
            value = fn(*args)
            if limit is not None and len(table) >= limit:
                table.clear()
            table[k] = value
            return value

        if key is None:

            @functools.wraps(fn)
            def remembered(*args: Any) -> Any:
                value = table.get(args, _MISSING)
                return store(args, args) if value is _MISSING else value

        else:

            @functools.wraps(fn)
            def remembered(*args: Any) -> Any:
                k = key(*args)
                value = table.get(k, _MISSING)
                return store(k, args) if value is _MISSING else value

        return remembered  # type: ignore[return-value]

    return decorate
