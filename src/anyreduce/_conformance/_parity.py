"""Cross-framework parity: one reduction on every installed backend and runtime, each
compared with the exact result."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._cases import ONNX_OPS, OPENVINO_OPS, SpecCase
from ._exact import compare, exact, np_dtype, tolerance
from ._runtimes import discover_runtimes
from ._targets import discover

__all__ = ["ParityReport", "ParityRow", "parity"]

_NAMES = {name: op for op, name in ONNX_OPS.items()}


@dataclass(frozen=True)
class ParityRow:
    """One backend's or runtime's result, measured against the exact one.

    Attributes
    ----------
    name : str
        The backend (``numpy``, ``torch``, ...) or runtime (``onnxruntime``, ...).
    kind : str
        ``"backend"`` or ``"runtime"``.
    max_ulps : float
        The largest error over all outputs, in units in the last place of the dtype.
    max_relative : float
        The largest relative error over all outputs.
    agrees : bool
        Whether every output is within the dtype's tolerance of the exact result.
    error : str
        Why there is no result (the runtime refused the case), or ``""``.
    """

    name: str
    kind: str  # "backend" or "runtime"
    max_ulps: float
    max_relative: float
    agrees: bool
    error: str = ""  # why there is no result, when there is none


@dataclass(frozen=True)
class ParityReport:
    """Parity of one reduction on one input across backends and runtimes.

    Returned by :func:`anyreduce.testing.parity`; ``str()`` gives the printed table.

    Attributes
    ----------
    op : str
        The reduction, e.g. ``"reduce_l2"``.
    shape : tuple of int
        The shape of the generated input.
    dtype : str
        Its dtype name.
    axes : tuple of int or None
        The axes reduced over; None for all.
    keepdims : bool
        Whether reduced axes were kept.
    tolerance : float
        The relative tolerance "agrees" uses, against the error scale.
    rows : list of ParityRow
        One row per backend and runtime that ran.
    not_run : dict of str to str
        Backends and runtimes that were not run, with the reason.
    ok : bool
        Whether every backend and runtime that gave a result agrees.
    """

    op: str
    shape: tuple[int, ...]
    dtype: str
    axes: tuple[int, ...] | None
    keepdims: bool
    tolerance: float  # the relative tolerance "agrees" uses, against the error scale
    rows: list[ParityRow] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every backend and runtime that gave a result agrees with the exact one."""
        return all(r.agrees for r in self.rows if not r.error)

    def __str__(self) -> str:
        axes = "all" if self.axes is None else list(self.axes)
        lines = [
            f"{self.op} of {self.dtype}{list(self.shape)} over axes {axes}, "
            f"keepdims={self.keepdims}; exact reference in Python integers / math.fsum",
            f"agreement: error <= {self.tolerance:.3g} x the error scale + 1/2 ulp",
            "",
            f"{'':20} {'kind':8} {'max ulps':>12} {'max rel err':>12}  agrees",
        ]
        for r in self.rows:
            if r.error:
                lines.append(f"{r.name:20} {r.kind:8} {'-':>12} {'-':>12}  {r.error}")
            else:
                lines.append(
                    f"{r.name:20} {r.kind:8} {_number(r.max_ulps):>12} "
                    f"{_number(r.max_relative):>12}  {'yes' if r.agrees else 'NO'}"
                )
        for name, why in self.not_run.items():
            lines.append(f"{name:20} not run: {why}")
        return "\n".join(lines)


def _number(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _data(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(np.dtype(dtype))
        low, high = max(int(info.min), -100), min(int(info.max), 100)
        return np.asarray(rng.integers(low, high, shape, endpoint=True).astype(dtype))
    return np.asarray(rng.standard_normal(shape).astype(np_dtype(dtype)))


def parity(
    op: str,
    shape: Sequence[int],
    dtype: str = "float32",
    axes: int | Sequence[int] | None = None,
    *,
    keepdims: bool = True,
    seed: int = 0,
    backends: Sequence[str] | None = None,
) -> ParityReport:
    """Run one reduction on every installed backend and runtime on the same data.

    Parameters
    ----------
    op : str
        The reduction, as anyreduce names it (``"reduce_l2"``) or as ONNX does
        (``"ReduceL2"``).
    shape : sequence of int
        Shape of the generated data.
    dtype : str, default "float32"
        Its dtype: an integer or floating dtype name (``"bfloat16"`` included), or bool.
    axes : int, sequence of int or None, default None
        Axes to reduce over; None reduces over all.
    keepdims : bool, default True
    seed : int, default 0
        Seed of the generated data (standard normal for floats, integers in [-100, 100]).
    backends : sequence of str, optional
        Only these backends and runtimes (``"numpy"``, ``"torch"``, ``"onnxruntime"``, ...).

    Returns
    -------
    ParityReport
        Per backend and runtime, the largest error in units in the last place of
        ``dtype``, the largest relative error, and whether the result agrees with the exact
        one within the dtype's tolerance. ``str(report)`` is a table.

    Examples
    --------
    >>> from anyreduce.testing import parity
    >>> report = parity("reduce_l2", (64, 1000), "float16", axes=1, backends=["numpy"])
    >>> report.rows[0].agrees
    True
    """
    onnx_op = op if op in ONNX_OPS else _NAMES.get(op)
    if onnx_op is None:
        msg = f"parity: unknown reduction {op!r}; expected one of {', '.join(_NAMES)}"
        raise ValueError(msg)
    shape = tuple(int(n) for n in shape)
    data = _data(shape, dtype, seed)
    axes_tuple = None if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    ndim = len(shape)
    reduced = tuple(range(ndim)) if not axes_tuple else tuple(sorted(a % ndim for a in axes_tuple))
    want = exact(onnx_op, data, reduced, keepdims)
    report = ParityReport(
        ONNX_OPS[onnx_op], shape, dtype, axes_tuple, keepdims, tolerance(want.dtype, want.count)
    )
    wanted = tuple(backends) if backends else None
    targets, absent = discover(wanted)
    runtimes, absent_runtimes = discover_runtimes(wanted)
    report.not_run.update({**absent, **absent_runtimes})
    import anyreduce

    function = getattr(anyreduce, ONNX_OPS[onnx_op])
    for target in targets:
        if not target.has(dtype):
            report.not_run[target.name] = f"has no {dtype}"
            continue
        with target.active():
            try:
                result = function(target.from_numpy(data), axes_tuple, keepdims=keepdims)
                got = target.to_numpy(result)
            except Exception as error:  # noqa: BLE001 - reported, not raised
                report.rows.append(_failed(target.name, "backend", error))
                continue
        report.rows.append(_row(target.name, "backend", onnx_op, got, want))
    for runtime in runtimes:
        case = _runtime_case(runtime, onnx_op, data, axes_tuple, keepdims)
        if case is None:
            report.not_run[runtime.name] = f"has no {onnx_op}"
            continue
        try:
            got = runtime.execute(case)
        except Exception as error:  # noqa: BLE001 - reported, not raised
            report.rows.append(_failed(runtime.name, "runtime", error))
            continue
        report.rows.append(_row(runtime.name, "runtime", onnx_op, got, want))
    return report


def _runtime_case(
    runtime: Any, op: str, data: np.ndarray, axes: tuple[int, ...] | None, keepdims: bool
) -> SpecCase | None:
    if runtime.profile == "openvino":
        if op not in OPENVINO_OPS:
            return None
        every = tuple(range(data.ndim))
        return SpecCase.openvino(op, data, axes or every, keep_dims=keepdims)
    from ..onnx import op_version

    version = op_version(op, runtime.max_opset())
    form = "absent" if axes is None else "input" if version.axes_input else "attribute"
    return SpecCase.onnx(op, version.since, data, axes, form, keepdims=int(keepdims))


def _row(name: str, kind: str, op: str, got: np.ndarray, want: Any) -> ParityRow:
    verdict = compare(op, got, want)
    return ParityRow(name, kind, verdict.max_ulps, verdict.max_relative, verdict.agrees)


def _failed(name: str, kind: str, error: Exception) -> ParityRow:
    first = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
    return ParityRow(name, kind, math.inf, math.inf, False, f"{type(error).__name__}: {first}")
