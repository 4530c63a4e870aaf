"""Remembered results of pure functions, in a form compilers trace without comment.

``functools.cache`` would do, except that ``torch.compile`` warns once for every
``lru_cache``-wrapped function it traces (it ignores the cache and traces the function).
A plain dictionary it traces as a dictionary, provided it can compare the keys: strings,
numbers, tuples and dtypes, not modules, and not every library's dtypes. So a function
of an array namespace keeps a table per library, named by the namespace's module
(:func:`library_key`): a compiler tracing one library's lookups meets only that library's
keys, and dtypes of different libraries are never compared (array-api-strict warns when
its dtypes meet NumPy's).

The tables of PyTorch's namespace exist from the start (:data:`PRESET`), so that a
PyTorch call traced by Dynamo never adds a table to a dictionary that holds the other
libraries' tables: with torch 2.11, ``torch.compile(fullgraph=True)`` of a PyTorch call in
a process that had reduced JAX data first failed with ``Unsupported`` (Dynamo cannot
hash a NumPy dtype, which JAX's arrays have, as a dictionary key). It passed once these
tables were made in advance and the PyTorch shim made in a trace no longer copied the
module's names (``anyreduce._backends._torch``; both changed at once).

A Dynamo trace reads no table at all (:func:`dynamo_tracing`): Dynamo guards what it
reads, and eager calls change the tables.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

__all__ = ["dynamo_tracing", "library_key", "memo", "tracing"]

F = TypeVar("F", bound=Callable[..., Any])

_MISSING = object()

#: The libraries whose tables are made with every keyed memo (see the module's text).
PRESET = ("array_api_compat.torch",)

#: Every keyed memo's dictionary of tables (for the tests).
TABLES: list[dict[Hashable, dict[Hashable, Any]]] = []


def tracing() -> bool:
    """Whether PyTorch's Dynamo is tracing the call, where a memo computes what it misses
    and leaves its table as it was (as :mod:`anyreduce._reductions` leaves its own).

    Dynamo guards each lookup of a trace: a key that was missing must still be missing.
    A result stored by the trace itself broke that guard on the next call, and every
    operator compiled twice (``torch.compile`` of float32 L2, first call 4.9 s, second
    1.0 s more). Asked on a miss only, so a lookup that finds its key costs nothing more.
    """
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.compiler.is_compiling())


_module = sys.modules.get


def dynamo_tracing() -> bool:
    """Whether PyTorch's Dynamo is tracing the call, where no table is read.

    Dynamo guards every table a trace reads, on its contents: a key that was found must
    still be there, and one that was missing must still be missing; a dictionary looked up
    by a key it cannot compare is guarded on its length. An eager call that added a key
    then failed the guards, and the compiled function was compiled again:
    ``torch.compile(fullgraph=True)`` of float32 L2 failed at the recompile limit (8)
    after eager calls on eight other dtypes. What a table holds depends on the arguments
    alone, so a trace that computes it anew reads the same values and guards only the
    arguments. A flag set for the length of a traced call would cost less than asking at
    each look-up, but Dynamo replays a global's assignment after the graph, and
    ``torch.export`` warns of it (or fails, with ``side_effect_replay_policy="error"``).

    Outside a trace: 0.1 us a call with PyTorch imported, 0.04 without; the memos ask
    the same written out (0.07 us).
    """
    torch = _module("torch")
    return torch is not None and torch.compiler.is_dynamo_compiling()


def library_key(xp: Any, *rest: Any) -> tuple[Hashable, Hashable]:
    """The key of a function of ``(xp, ...)``: a table per library, named by the
    namespace's module (a namespace wrapped with workarounds answers with the name of the
    one it wraps), holding the other arguments. A compiler tracing one library's lookups
    then meets only that library's keys: Dynamo cannot trace a dictionary holding, say,
    ml_dtypes' float8 NumPy dtypes, which PyTorch calls never see."""
    return getattr(xp, "__name__", None) or id(xp), rest


def memo(
    *, limit: int | None = None, key: Callable[..., tuple[Hashable, Hashable]] | None = None
) -> Callable[[F], F]:
    """Remember ``fn``'s result per positional arguments; with ``key``, per
    ``key(*args)``, a pair (table, key within it). Errors are not remembered. With
    ``limit``, a table is emptied when that many are held."""

    def decorate(fn: F) -> F:
        tables: dict[Hashable, dict[Hashable, Any]] = {name: {} for name in PRESET}
        if key is not None:
            TABLES.append(tables)

        def store(table: dict[Hashable, Any], k: Hashable, args: tuple[Any, ...]) -> Any:
            value = fn(*args)
            if tracing():  # the table as it was: see tracing()
                return value
            if limit is not None and len(table) >= limit:
                table.clear()
            table[k] = value
            return value

        if key is None:
            table: dict[Hashable, Any] = {}

            @functools.wraps(fn)
            def remembered(*args: Any) -> Any:
                torch = _module("torch")  # no table read in a trace: see dynamo_tracing
                if torch is not None and torch.compiler.is_dynamo_compiling():
                    return fn(*args)
                value = table.get(args, _MISSING)
                return store(table, args, args) if value is _MISSING else value

        elif key is library_key:
            # library_key written out: one call less on every look-up (the dispatch and the
            # kernels make about seven a call; 0.1-0.2 us each).

            @functools.wraps(fn)
            def remembered(xp: Any, *rest: Any) -> Any:
                torch = _module("torch")
                if torch is not None and torch.compiler.is_dynamo_compiling():
                    return fn(xp, *rest)
                part = getattr(xp, "__name__", None) or id(xp)
                table = tables.get(part)
                if table is None:
                    table = tables[part] = {}
                value = table.get(rest, _MISSING)
                return store(table, rest, (xp, *rest)) if value is _MISSING else value

        else:

            @functools.wraps(fn)
            def remembered(*args: Any) -> Any:
                torch = _module("torch")
                if torch is not None and torch.compiler.is_dynamo_compiling():
                    return fn(*args)
                part, k = key(*args)
                table = tables.get(part)
                if table is None:
                    table = tables[part] = {}
                value = table.get(k, _MISSING)
                return store(table, k, args) if value is _MISSING else value

        return remembered  # type: ignore[return-value]

    return decorate
