"""Generated cases for the differential checks.

A case is drawn through a :class:`Chooser`, so that the same drawing code runs under
hypothesis (``hypothesis_strategies``: shrinking, a database, pytest integration) and,
where hypothesis is not installed, on a seeded NumPy generator (:class:`RandomChooser`).
Drawn: operator, opset, dtype (any the version admits), shape (rank 0 to 4, zero-size
included), values (small integers, uniform, wide magnitudes, special values, dtype limits),
the axes form (absent, attribute, input; OpenVINO scalar or vector of any integer type),
negative axes, keepdims, noop_with_empty_axes, and now and then an invalid axis (duplicate,
out of range, negative at version 1) whose error the contract demands.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from ._cases import ONNX_OPS, OPENVINO_OPS, SpecCase
from ._exact import np_dtype

__all__ = [
    "Chooser",
    "RandomChooser",
    "draw_onnx_case",
    "draw_openvino_case",
    "hypothesis_strategies",
]

T = TypeVar("T")

MAX_ELEMENTS = 48

# NumPy holds bfloat16 data only through ml_dtypes, which a plain install does not have.
_HAS_BFLOAT16 = importlib.util.find_spec("ml_dtypes") is not None


def _available(dtypes: Sequence[str]) -> tuple[str, ...]:
    return tuple(d for d in dtypes if d != "bfloat16" or _HAS_BFLOAT16)


OPENVINO_DTYPES = (
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64",
)  # fmt: skip
AXES_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "uint64")


class Chooser(Protocol):
    """The two draws case generation needs."""

    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...


class RandomChooser:
    """A :class:`Chooser` on a seeded NumPy generator (no shrinking, no hypothesis needed)."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self._rng.integers(len(options)))]

    def integer(self, low: int, high: int) -> int:
        return int(self._rng.integers(low, high, endpoint=True))


class _HypothesisChooser:
    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self._draw = draw

    def choice(self, options: Sequence[T]) -> T:
        from hypothesis import strategies as st

        return self._draw(st.sampled_from(list(options)))  # type: ignore[no-any-return]

    def integer(self, low: int, high: int) -> int:
        from hypothesis import strategies as st

        return int(self._draw(st.integers(low, high)))


def _shape(c: Chooser) -> tuple[int, ...]:
    rank = c.integer(0, 4)
    dims = [c.choice((1, 2, 3, 4, 2, 3, 5, 0)) for _ in range(rank)]
    while math.prod(dims) > MAX_ELEMENTS:
        dims[dims.index(max(dims))] -= 1
    return tuple(dims)


def _values(c: Chooser, dtype: str, shape: tuple[int, ...], positive: bool = False) -> np.ndarray:
    """Data of ``dtype``: one flavour of values, from a drawn seed."""
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    n = math.prod(shape)
    target = np_dtype(dtype)
    if dtype == "bool":
        p = c.choice((0.1, 0.5, 0.9, 1.0, 0.0))
        return np.asarray(rng.random(shape) < p)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(target)
        flavour = c.choice(("small", "small", "full", "limits"))
        low, high = int(info.min), int(info.max)
        if flavour == "small" or positive:
            low, high = max(low, 0 if positive else -6), min(high, 9)
            raw = rng.integers(low, high, size=n, endpoint=True)
        elif flavour == "full":
            raw = rng.integers(low, high, size=n, endpoint=True, dtype=target)
        else:
            pool = np.array(
                sorted({low, high, 0, 1, max(low, -1), high - 1, low + 1}), dtype=target
            )
            raw = rng.choice(pool, size=n)
        return np.asarray(raw, dtype=target).reshape(shape)
    info = np.finfo(np.float32) if dtype == "bfloat16" else np.finfo(target)
    big = float(info.max)
    flavour = c.choice(("small", "uniform", "uniform", "wide", "specials"))
    if flavour == "small":
        values = rng.integers(0 if positive else -5, 6, size=n).astype(np.float64)
    elif flavour == "uniform":
        values = rng.uniform(0 if positive else -10, 10, size=n)
    elif flavour == "wide":
        top = math.log10(big) - 0.5
        bottom = math.log10(float(info.smallest_normal)) + 0.5
        values = 10 ** rng.uniform(bottom, top, size=n)
        if not positive:
            values *= rng.choice((-1.0, 1.0), size=n)
    else:
        pool = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, big, -big, 0.5, 3.0])
        values = rng.uniform(-10, 10, size=n)
        mask = rng.random(n) < 0.4
        values[mask] = rng.choice(pool, size=int(mask.sum()))
    with np.errstate(over="ignore"):
        return np.asarray(values.astype(target)).reshape(shape)


def _axes(c: Chooser, ndim: int, *, negative: bool, invalid: bool) -> tuple[int, ...]:
    """Distinct axes, some negative where allowed; with ``invalid``, one bad axis."""
    pool = list(range(ndim))
    chosen: list[int] = []
    for _ in range(c.integer(0, ndim)):
        axis = pool.pop(c.integer(0, len(pool) - 1))
        chosen.append(axis - ndim if negative and c.choice((False, True)) else axis)
    if invalid:
        kind = c.choice(("duplicate", "range", "negative") if ndim else ("range",))
        if kind == "duplicate":
            axis = chosen[0] if chosen else c.integer(0, ndim - 1)
            alias = axis - ndim if axis >= 0 else axis + ndim
            if not chosen:
                chosen.append(axis)
            chosen.append(c.choice((axis, alias)))
        elif kind == "range":
            chosen.append(c.choice((ndim, -ndim - 1, ndim + 1)))
        else:
            chosen.append(-1)
    order = [c.integer(0, 1000) for _ in chosen]
    return tuple(a for _, a in sorted(zip(order, chosen, strict=True)))


def draw_onnx_case(c: Chooser, *, max_opset: int | None = None) -> SpecCase:
    """One ONNX-profile case (any operator, version, dtype, axes form and flags)."""
    from ..onnx import NEWEST_OPSET, VERSIONS

    op = c.choice(tuple(ONNX_OPS))
    versions = [v for v in VERSIONS[op] if max_opset is None or v.since <= max_opset]
    version = c.choice(versions)
    later = [v.since for v in VERSIONS[op] if v.since > version.since]
    last = min(later[0] - 1 if later else NEWEST_OPSET, max_opset or NEWEST_OPSET)
    opset = c.choice((version.since, version.since, last))
    dtype = c.choice(_available(version.dtypes))
    shape = _shape(c)
    data = _values(c, dtype, shape, positive=op == "ReduceLogSum" and c.choice((True, False)))
    invalid = c.integer(0, 9) == 0
    forms = ("absent", "input", "input") if version.axes_input else ("absent", "attribute")
    form = c.choice(forms)
    axes: tuple[int, ...] | None = None
    if form != "absent":
        axes = _axes(c, len(shape), negative=version.negative_axes, invalid=invalid)
    noop = c.choice((None, 0, 1)) if version.noop_with_empty_axes else None
    return SpecCase.onnx(op, opset, data, axes, form, keepdims=c.choice((0, 1)), noop=noop)


def draw_openvino_case(c: Chooser) -> SpecCase:
    """One OpenVINO-profile case (any operation, dtype, axes of any integer type)."""
    op = c.choice(tuple(OPENVINO_OPS))
    dtype = "bool" if op.startswith("ReduceLogical") else c.choice(_available(OPENVINO_DTYPES))
    shape = _shape(c)
    data = _values(c, dtype, shape)
    invalid = c.integer(0, 9) == 0
    axes = _axes(c, len(shape), negative=True, invalid=invalid)
    form = "scalar" if len(axes) == 1 and c.choice((False, True)) else "vector"
    axes_dtype = c.choice(AXES_DTYPES)
    if any(a < 0 for a in axes) and axes_dtype.startswith("uint"):
        axes_dtype = "int64"
    if any(not -128 <= a < 128 for a in axes):
        axes_dtype = "int64"
    return SpecCase.openvino(
        op, data, axes, keep_dims=bool(c.choice((0, 1))), axes_form=form, axes_dtype=axes_dtype
    )


def hypothesis_strategies() -> dict[str, Any]:
    """``{"onnx": strategy, "openvino": strategy}`` of SpecCases (needs hypothesis)."""
    from hypothesis import strategies as st

    @st.composite
    def onnx_cases(draw: Any, max_opset: int | None = None) -> SpecCase:
        return draw_onnx_case(_HypothesisChooser(draw), max_opset=max_opset)

    @st.composite
    def openvino_cases(draw: Any) -> SpecCase:
        return draw_openvino_case(_HypothesisChooser(draw))

    return {"onnx": onnx_cases, "openvino": openvino_cases}
