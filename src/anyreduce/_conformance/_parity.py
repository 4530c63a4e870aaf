"""Cross-framework parity: one reduction on every installed backend, runtime and framework
expression, on the same data, each compared with the exact result.

A report is never vacuous: it is ok only when something was compared, everything compared
agrees and nothing raised that the caller did not expect. Arguments are checked before any
work (an unknown name, an axis out of range, a dtype no one has are errors here).
"""

from __future__ import annotations

import contextlib
import math
import operator
import warnings
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._cases import OPENVINO_OPS, SpecCase
from ._data import DISTRIBUTIONS, DTYPES, MAX_ELEMENTS, as_numpy, generate
from ._exact import (
    OP_NAMES,
    Exact,
    _finfo,
    compare,
    exact,
    np_dtype,
    onnx_name,
    spacing,
    tolerance,
)
from ._native import NATIVE_LIBRARIES, NATIVES, natives_for
from ._runtimes import RUNTIMES, discover_runtimes
from ._targets import LIBRARIES, MODES, Target, discover

__all__ = [
    "ParityReport",
    "ParityRow",
    "check_axes",
    "check_distribution",
    "check_dtype",
    "check_expected",
    "check_names",
    "check_shape",
    "describe_problem",
    "op_name",
    "parity",
    "selectable_names",
]


def selectable_names() -> tuple[str, ...]:
    """Every name ``backends=`` takes: libraries, their modes (``jax32``), their CUDA
    devices, runtimes, scipy."""
    cuda = tuple(f"{name}:cuda" for name in ("torch", "jax"))
    runtimes = tuple(r.name for r in RUNTIMES)
    natives = (n for n in NATIVE_LIBRARIES if n not in LIBRARIES)
    return (*LIBRARIES, *MODES, *cuda, *runtimes, *natives)


def check_names(names: Sequence[str] | None, label: str = "backends") -> tuple[str, ...] | None:
    """``names`` as a tuple, each a name :func:`selectable_names` lists; None for all."""
    return check_choices(names, selectable_names(), label)


def check_choices(
    names: Sequence[str] | None, valid: Sequence[str], label: str
) -> tuple[str, ...] | None:
    """``names`` (one name, or a sequence of them) as a tuple, each one of ``valid``, at
    least one; None for all."""
    listed = listed_names(names, label, valid)
    if listed is None:
        return None
    unknown = [n for n in listed if n not in valid]
    if unknown:
        msg = f"{label}: unknown name {unknown[0]!r}; expected one of {', '.join(valid)}"
        raise ValueError(msg)
    return listed


def listed_names(
    names: Sequence[str] | str | None, label: str, valid: Sequence[str] = ()
) -> tuple[str, ...] | None:
    """``names`` as a tuple (one name as a tuple of one, not of its letters); None for
    all; ``ValueError`` when empty."""
    if names is None:
        return None
    listed = (names,) if isinstance(names, str) else tuple(names)
    if not listed:
        hint = f" of {', '.join(valid)}" if valid else ", or None for all"
        msg = f"{label}: empty; give at least one{hint}"
        raise ValueError(msg)
    return listed


def check_count(value: object, label: str) -> int:
    """``value``, an integer of 0 or more (not a bool): a seed, a number of examples."""
    message = f"{label} must be an integer of 0 or more, got {value!r}"
    if isinstance(value, bool):
        raise TypeError(message)
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(message) from None
    if count < 0:
        raise ValueError(message)
    return count


def check_expected(names: Collection[str], label: str = "expected_errors") -> tuple[str, ...]:
    """``names`` as a tuple, each a backend, runtime or native expression name."""
    if isinstance(names, str):
        names = [names]
    valid = (*selectable_names(), *(n.name for n in NATIVES))
    for name in names:
        if name not in valid:
            msg = f"{label}: unknown name {name!r}; expected one of {', '.join(valid)}"
            raise ValueError(msg)
    return tuple(names)


def check_dtype(dtype: str, op: str | None = None, label: str = "dtype") -> str:
    """``dtype`` if it is a dtype name parity runs (and ``op`` takes)."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        msg = f"{label} {dtype!r} is not supported; expected one of {', '.join(DTYPES)}"
        raise TypeError(msg)
    if dtype == "bool" and op is not None and op not in ("reduce_max", "reduce_min"):
        msg = f"{label} bool: {op} takes no bool data (only reduce_max and reduce_min do)"
        raise TypeError(msg)
    if dtype == "bfloat16":
        try:
            np_dtype(dtype)
        except ImportError:
            msg = f"{label} bfloat16 needs the ml_dtypes package, which is not installed"
            raise TypeError(msg) from None
    return dtype


def check_distribution(distribution: str, label: str = "distribution") -> str:
    if distribution not in DISTRIBUTIONS:
        msg = f"{label} {distribution!r} is unknown; expected one of {', '.join(DISTRIBUTIONS)}"
        raise ValueError(msg)
    return distribution


def check_shape(shape: Sequence[int], label: str = "shape") -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints of at most :data:`MAX_ELEMENTS` elements."""
    try:
        dims = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        msg = f"{label} must be a sequence of non-negative integers, got {shape!r}"
        raise TypeError(msg) from None
    if any(n < 0 for n in dims):
        msg = f"{label} {list(dims)} has a negative length; lengths must be 0 or more"
        raise ValueError(msg)
    if math.prod(dims) > MAX_ELEMENTS:
        msg = (
            f"{label} {list(dims)} has {math.prod(dims)} elements; "
            f"at most {MAX_ELEMENTS} are allowed (the exact reference is slow)"
        )
        raise ValueError(msg)
    return dims


def check_axes(
    op: str, axes: int | Sequence[int] | None, ndim: int, label: str = "axes"
) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    """``axes`` as given (a tuple, or None) and the sorted non-negative axes reduced; the
    errors name ``op`` where it is not empty."""
    import anyreduce

    if axes is None:
        return None, tuple(range(ndim))
    named = f"{op}: " if op else ""
    given_axes: object = axes  # checked: callers need not be typed
    listed = (
        [given_axes]
        if isinstance(given_axes, (int, np.integer))
        else list(given_axes)
        if isinstance(given_axes, (list, tuple, range))
        else None
    )
    if listed is None or any(
        isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) for a in listed
    ):
        msg = f"{named}{label} must be an integer or a sequence of integers, got {axes!r}"
        raise TypeError(msg)
    given = tuple(int(a) for a in listed)
    if not given:
        return given, tuple(range(ndim))
    allowed = f"distinct integers in [{-ndim}, {ndim - 1}]" if ndim else "none (rank 0)"
    for a in given:
        if not -ndim <= a < ndim:
            msg = f"{named}{label} {a} is out of range for rank-{ndim} data; allowed: {allowed}"
            raise anyreduce.AxisError(msg)
    if len({a % ndim for a in given}) < len(given):
        msg = f"{named}{label} {list(given)} repeat an axis of rank-{ndim} data; allowed: {allowed}"
        raise anyreduce.AxisError(msg)
    return given, tuple(sorted(a % ndim for a in given))


@dataclass(frozen=True)
class ParityRow:
    """One backend's, runtime's or framework expression's result against the exact one.

    Attributes
    ----------
    name : str
        The backend (``numpy``, ``torch``, ...), runtime (``onnxruntime``, ...) or
        expression (``torch.linalg.vector_norm``, ...).
    kind : str
        ``"backend"`` (anyreduce on that library), ``"runtime"`` or ``"native"``.
    max_ulps : float
        The largest error over all outputs, in units in the last place of the dtype.
    max_relative : float
        The largest relative error over all outputs.
    agrees : bool
        Whether every output is within the dtype's tolerance of the exact result.
    error : str
        What it raised, or ``""``.
    note : str
        What else to know (a native function's own result dtype), or ``""``.
    detail : str
        Why it disagrees, or ``""``.
    worst_index : tuple of int or None
        The output element with the largest error.
    expected, actual : float, int, bool or None
        The exact and the computed value of that element.
    inputs : tuple
        The values reduced into it (the first 16).
    count : int
        How many values are reduced into it.
    """

    name: str
    kind: str
    max_ulps: float
    max_relative: float
    agrees: bool
    error: str = ""
    note: str = ""
    detail: str = ""
    worst_index: tuple[int, ...] | None = None
    expected: float | int | bool | None = None
    actual: float | int | bool | None = None
    inputs: tuple[float | int | bool, ...] = ()
    count: int = 0


@dataclass(frozen=True)
class ParityReport:
    """Parity of one reduction on one input across backends, runtimes and frameworks.

    Returned by :func:`anyreduce.testing.parity`; ``str()`` gives the printed table.

    Attributes
    ----------
    op : str
        The reduction, e.g. ``"reduce_l2"``.
    shape : tuple of int
        The shape of the input.
    dtype : str
        Its dtype name.
    axes : tuple of int or None
        The axes reduced over; None for all.
    keepdims : bool
        Whether reduced axes were kept.
    tolerance : float
        The relative tolerance "agrees" uses, against the error scale.
    rows : list of ParityRow
        One row per backend, runtime and native expression that ran.
    not_run : dict of str to str
        Those that were not run, with the reason.
    distribution : str
        The distribution the data were drawn from, ``"given"`` for the caller's data.
    seed : int
        The seed of the generated data.
    expected_errors : tuple of str
        Names whose errors the caller expects (they do not make the report fail).
    native : bool
        Whether the frameworks' own expressions ran.
    backends : tuple of str or None
        The names the run was restricted to.
    ok : bool
        Something was compared, everything compared agrees and nothing raised unexpectedly.
    """

    op: str
    shape: tuple[int, ...]
    dtype: str
    axes: tuple[int, ...] | None
    keepdims: bool
    tolerance: float
    rows: list[ParityRow] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)
    distribution: str = "normal"
    seed: int = 0
    expected_errors: tuple[str, ...] = ()
    native: bool = False
    backends: tuple[str, ...] | None = None

    @property
    def compared(self) -> list[ParityRow]:
        """The rows with a result."""
        return [r for r in self.rows if not r.error]

    @property
    def problems(self) -> list[ParityRow]:
        """The rows that disagree, or raised an error the caller did not expect."""
        return [
            r
            for r in self.rows
            if (r.error and r.name not in self.expected_errors) or (not r.error and not r.agrees)
        ]

    @property
    def ok(self) -> bool:
        """Something was compared, all of it agrees, and nothing raised unexpectedly."""
        return bool(self.compared) and not self.problems

    def verdict(self) -> str:
        """One line: ``ok`` with what was compared, or why not."""
        if not self.compared:
            return "NOT OK: nothing was compared (see 'not run' and the errors above)"
        if self.problems:
            names = ", ".join(r.name for r in self.problems)
            return f"NOT OK: {len(self.problems)} of {len(self.rows)} disagree or fail: {names}"
        return f"ok: {len(self.compared)} compared, all agree with the exact result"

    def reproduce(self) -> str:
        """The Python call and the command line that run this comparison again."""
        options = []
        if self.axes is not None:
            options.append(f"axes={list(self.axes)!r}")
        if not self.keepdims:
            options.append("keepdims=False")
        if self.native:
            options.append("native=True")
        if self.backends:
            options.append(f"backends={list(self.backends)!r}")
        if self.expected_errors:
            options.append(f"expected_errors={list(self.expected_errors)!r}")
        argv = []
        if self.axes is not None:
            argv.append(f"--axes {','.join(map(str, self.axes))}")
        if not self.keepdims:
            argv.append("--keepdims 0")
        if self.native:
            argv.append("--native")
        argv += [f"--backend {name}" for name in self.backends or ()]
        argv += [f"--expect-error {name}" for name in self.expected_errors]
        if self.distribution == "given":
            call = f"parity({self.op!r}, data=<your {self.dtype}{list(self.shape)} array>"
            line = f"anyreduce parity {self.op} --data <your .npy file>"
        else:
            call = (
                f"parity({self.op!r}, {self.shape!r}, {self.dtype!r}, "
                f"distribution={self.distribution!r}, seed={self.seed}"
            )
            shape = ",".join(map(str, self.shape))
            line = (
                f"anyreduce parity {self.op} --shape {shape} --dtype {self.dtype} "
                f"--distribution {self.distribution} --seed {self.seed}"
            )
        call = ", ".join([call, *options]) + ")"
        return f"anyreduce.testing.{call}\n  or: {' '.join([line, *argv])}"

    def failure_message(self) -> str:
        """What :func:`anyreduce.testing.assert_parity` raises with: each problem, its worst
        element, and how to reproduce it."""
        axes = "all axes" if self.axes is None else f"axes {list(self.axes)}"
        source = (
            "the given data"
            if self.distribution == "given"
            else f"{self.distribution} data (seed {self.seed})"
        )
        lines = [f"parity of {self.op} on {self.dtype}{list(self.shape)} over {axes}, {source}:"]
        if not self.compared:
            lines.append("  nothing was compared:")
            lines += [f"  {name}: not run: {why}" for name, why in self.not_run.items()]
        for row in self.problems:
            lines.append(f"  {row.name} ({row.kind}): {describe_problem(row)}")
            if row.inputs and row.count <= len(row.inputs):
                lines.append(f"    minimal: {self._minimal(row)}")
        lines.append(f"reproduce: {self.reproduce()}")
        return "\n".join(lines)

    def _minimal(self, row: ParityRow) -> str:
        """A call on just the values reduced into ``row``'s worst element."""
        values = ", ".join(_literal(v) for v in row.inputs)
        keep = [f"backends=[{_selector(row)!r}]"]
        if row.kind == "native":
            keep.append("native=True")
        return (
            f"anyreduce.testing.parity({self.op!r}, data=np.array([{values}], "
            f"dtype={self.dtype!r}), {', '.join(keep)})"
        )

    def __str__(self) -> str:
        axes = "all" if self.axes is None else list(self.axes)
        source = "given data" if self.distribution == "given" else f"{self.distribution} data"
        lines = [
            f"{self.op} of {self.dtype}{list(self.shape)} ({source}) over axes {axes}, "
            f"keepdims={self.keepdims}; exact reference in Python integers / math.fsum",
            f"agreement: error <= {self.tolerance:.3g} x the error scale + 1/2 ulp",
            "",
            f"{'':32} {'kind':8} {'max ulps':>10} {'max rel err':>12}  agrees",
        ]
        for r in self.rows:
            if r.error:
                expected = " (expected)" if r.name in self.expected_errors else ""
                lines.append(f"{r.name:32} {r.kind:8} {'-':>10} {'-':>12}  {r.error}{expected}")
            else:
                note = f"  ({r.note})" if r.note else ""
                lines.append(
                    f"{r.name:32} {r.kind:8} {_number(r.max_ulps):>10} "
                    f"{_number(r.max_relative):>12}  {'yes' if r.agrees else 'NO'}{note}"
                )
        for name, why in self.not_run.items():
            lines.append(f"{name:32} not run: {why}")
        lines += ["", self.verdict()]
        return "\n".join(lines)


def _number(value: float) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _value(value: float | None) -> str:
    """``value`` as a message shows it: ``500.0``, ``inf``, ``nan``, ``-3``."""
    return str(value)


def _literal(value: float | None) -> str:
    """``value`` as Python code: ``500.0``, ``np.inf``, ``np.nan``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def _selector(row: ParityRow) -> str:
    """The ``backends=`` name that selects ``row`` (a native expression: its library)."""
    libraries = [n.library for n in NATIVES if n.name == row.name and row.kind == "native"]
    return libraries[0] if libraries else row.name


def describe_problem(row: ParityRow) -> str:
    """What went wrong in ``row``: its error, or its worst element and inputs."""
    if row.error:
        return f"raised {row.error}"
    if row.worst_index is None:
        return f"disagrees: {row.detail}"
    off = (
        f"off by {abs(row.actual - row.expected)}"
        if isinstance(row.expected, int) and isinstance(row.actual, int)
        else f"{_number(row.max_ulps)} ulps"
    )
    text = (
        f"worst output {list(row.worst_index)}: exact {_value(row.expected)}, "
        f"got {_value(row.actual)} ({off})"
    )
    if row.inputs:
        more = f", ... ({row.count} values)" if row.count > len(row.inputs) else ""
        text += f"; inputs [{', '.join(_value(v) for v in row.inputs)}{more}]"
    if row.note:
        text += f"; {row.note}"
    return text


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Other libraries' warnings (overflow in a native norm) are results here, not noise."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def parity(
    op: str,
    shape: Sequence[int] | None = None,
    dtype: str | None = None,
    axes: int | Sequence[int] | None = None,
    *,
    data: Any = None,
    distribution: str = "normal",
    keepdims: bool = True,
    seed: int = 0,
    backends: Sequence[str] | None = None,
    native: bool = False,
    expected_errors: Collection[str] = (),
) -> ParityReport:
    """Run one reduction on every installed backend, runtime and framework on the same data.

    Parameters
    ----------
    op : str
        The reduction, as anyreduce names it (``"reduce_l2"``) or as ONNX does
        (``"ReduceL2"``).
    shape : sequence of int, optional
        Shape of the generated data (at most 10 000 000 elements); not with ``data``.
    dtype : str, optional
        Its dtype: an integer or floating dtype name (``"bfloat16"`` included), or bool;
        default float32, or ``data``'s.
    axes : int, sequence of int or None, default None
        Axes to reduce over; None reduces over all.
    data : array, optional
        The data to compare on, instead of generated data: a NumPy, PyTorch, JAX, Dask or
        array-api-strict array.
    distribution : str, default "normal"
        Of the generated data: ``"normal"``, ``"uniform"`` (in [-1, 1]), ``"wide"``
        (magnitudes across the dtype's range), ``"specials"`` (zeros, infinities, NaN,
        subnormals, the extremes), ``"cancelling"`` (large terms that cancel within each
        reduced slice) or ``"integers"`` (in [-100, 100]).
    keepdims : bool, default True
    seed : int, default 0
        Seed of the generated data.
    backends : sequence of str, optional
        Only these backends, runtimes and frameworks (``"numpy"``, ``"torch"``,
        ``"onnxruntime"``, ``"scipy"``, ...); an unknown name is a ``ValueError``. The
        ``"jax"`` backend runs with 64-bit types on; ``"jax32"``, JAX's default mode
        without them, runs only when named.
    native : bool, default False
        Also run each selected framework's own expressions of the op
        (``torch.linalg.vector_norm``, ``jax.nn.logsumexp``, ...): rows of kind
        ``"native"``. A framework that is not installed is listed as not run.
    expected_errors : collection of str
        Names (``"onnxruntime"``, ``"torch.mean"``) whose errors do not make the report fail.

    Returns
    -------
    ParityReport
        Per row, the largest error in units in the last place of the dtype, the largest
        relative error, whether it agrees with the exact result within the dtype's
        tolerance, and its worst element. ``report.ok`` is False when nothing was compared,
        something disagrees, or something raised that was not expected.

    Examples
    --------
    >>> from anyreduce.testing import parity
    >>> report = parity("reduce_l2", (64, 1000), "float16", axes=1, backends=["numpy"])
    >>> report.rows[0].agrees, report.ok
    (True, True)
    >>> import numpy as np
    >>> report = parity("reduce_l2", data=np.array([300, 400], np.float16), native=True,
    ...                 backends=["numpy"])
    >>> [(row.name, row.actual) for row in report.rows]
    [('numpy', 500.0), ('np.linalg.norm', inf), ('np.linalg.vector_norm', inf)]
    """
    with named_errors("parity"):
        name = op_name(op)
        given_keepdims: object = keepdims  # checked: callers need not be typed
        if not isinstance(given_keepdims, bool):
            msg = f"keepdims must be True or False, got {keepdims!r}"
            raise ValueError(msg)  # noqa: TRY004 - spec.md §5: ValueError for a bad keepdims
        seed = check_count(seed, "seed")
        wanted = check_names(backends)
        expected = check_expected(expected_errors)
        host, dtype, distribution = _input(name, shape, dtype, data, distribution)
        given_axes, reduced = check_axes(name, axes, host.ndim)
    if data is None:
        host = generate(host.shape, dtype, distribution, seed, reduced)
    onnx_op = onnx_name(name)
    with _quiet():
        want = exact(onnx_op, host, reduced, keepdims)
    report = ParityReport(
        name,
        tuple(host.shape),
        dtype,
        given_axes,
        keepdims,
        tolerance(want.dtype, want.count),
        distribution=distribution,
        seed=seed,
        expected_errors=expected,
        native=native,
        backends=wanted,
    )
    _run_backends(report, host, want, reduced, wanted)
    _run_runtimes(report, host, want, onnx_op, reduced, wanted)
    if native:
        _run_natives(report, host, want, reduced, wanted)
    return report


@contextlib.contextmanager
def named_errors(function: str) -> Iterator[None]:
    """A ``TypeError`` or ``ValueError`` raised inside, as one line that names ``function``
    (as the reductions name themselves)."""
    try:
        yield
    except (TypeError, ValueError) as error:
        text = str(error)
        if text.startswith(f"{function}: "):
            raise
        msg = f"{function}: {text}"
        try:  # the same class (AxisError stays one), where it is made from a message
            named = type(error)(msg)
        except Exception:  # noqa: BLE001 - a class of another signature: its base
            named = TypeError(msg) if isinstance(error, TypeError) else ValueError(msg)
        raise named from None


def op_name(op: str) -> str:
    """anyreduce's name of ``op`` (given either way); ``ValueError`` for an unknown one."""
    given: object = op  # checked: callers need not be typed
    if not isinstance(given, str):
        msg = f"op must be a reduction name, got {op!r}"
        raise TypeError(msg)
    onnx_op = onnx_name(op)
    return {onnx_name(n): n for n in OP_NAMES}.get(onnx_op, op)


def _input(
    op: str,
    shape: Sequence[int] | None,
    dtype: str | None,
    data: Any,
    distribution: str,
) -> tuple[np.ndarray, str, str]:
    """The input (a placeholder of the right shape for generated data), dtype, source."""
    if data is None:
        if shape is None:
            msg = "give the data's shape (and dtype), or data=an array"
            raise TypeError(msg)
        dims = check_shape(shape)
        name = check_dtype("float32" if dtype is None else dtype, op)
        check_distribution(distribution)
        return np.empty(dims, dtype=np.bool_), name, distribution
    if shape is not None:
        msg = "give either shape or data, not both"
        raise TypeError(msg)
    host = as_numpy(data)
    name = host.dtype.name
    if dtype is not None and dtype != name:
        msg = f"dtype {dtype!r} differs from the data's {name}; leave it out"
        raise TypeError(msg)
    check_dtype(name, op, label="data dtype")
    check_shape(host.shape, label="data shape")
    return host, name, "given"


def _run_backends(
    report: ParityReport,
    host: np.ndarray,
    want: Exact,
    reduced: tuple[int, ...],
    wanted: tuple[str, ...] | None,
) -> None:
    import anyreduce

    targets, absent = discover(wanted)
    report.not_run.update(absent)
    function = getattr(anyreduce, report.op)
    for target in targets:
        if not target.has(report.dtype):
            report.not_run[target.name] = f"has no {report.dtype}"
            continue
        try:
            with target.active(), _quiet():
                result = function(target.from_numpy(host), report.axes, keepdims=report.keepdims)
                got = target.to_numpy(result)
        except Exception as error:  # noqa: BLE001 - reported, not raised
            report.rows.append(_failed(target.name, "backend", error))
            continue
        row = _row(target.name, "backend", onnx_name(report.op), got, want, host, reduced)
        if not row.agrees and target.reads_subnormals_as_zero:
            row = _as_zeros(report, row, got, host, reduced) or row
        report.rows.append(row)


#: The note of a row judged on its data's subnormal numbers read as zero.
SUBNORMALS_AS_ZERO = "subnormal inputs read as zero (XLA on the CPU), as the contract allows"


def _as_zeros(
    report: ParityReport,
    row: ParityRow,
    got: np.ndarray,
    host: np.ndarray,
    reduced: tuple[int, ...],
) -> ParityRow | None:
    """The row of ``got`` judged against the exact result of ``host`` with its subnormal
    numbers read as zeros of their sign, where that agrees; None otherwise (and for data
    without subnormal numbers)."""
    if host.dtype.kind in "biu":
        return None
    values = host.astype(np.float64)
    subnormal = (values != 0) & (np.abs(values) < _finfo(host.dtype).smallest_normal)
    if not subnormal.any():
        return None
    zeroed = np.where(subnormal, np.copysign(0.0, values), values).astype(host.dtype)
    onnx_op = onnx_name(report.op)
    with _quiet():
        want = exact(onnx_op, zeroed, reduced, report.keepdims)
    note = "; ".join(n for n in (row.note, SUBNORMALS_AS_ZERO) if n)
    judged = _row(row.name, row.kind, onnx_op, got, want, zeroed, reduced, note)
    return judged if judged.agrees else None


def _run_runtimes(
    report: ParityReport,
    host: np.ndarray,
    want: Exact,
    onnx_op: str,
    reduced: tuple[int, ...],
    wanted: tuple[str, ...] | None,
) -> None:
    runtimes, absent = discover_runtimes(wanted)
    report.not_run.update(absent)
    for runtime in runtimes:
        case = _runtime_case(runtime, onnx_op, host, report.axes, report.keepdims)
        if case is None:
            report.not_run[runtime.name] = f"has no {onnx_op}"
            continue
        try:
            with _quiet():
                got = runtime.execute(case)
        except Exception as error:  # noqa: BLE001 - reported, not raised
            report.rows.append(_failed(runtime.name, "runtime", error))
            continue
        report.rows.append(_row(runtime.name, "runtime", onnx_op, got, want, host, reduced))


def _native_target(library: str, targets: dict[str, Target]) -> Target | None:
    return targets.get("numpy" if library == "scipy" else library)


def _run_natives(
    report: ParityReport,
    host: np.ndarray,
    want: Exact,
    reduced: tuple[int, ...],
    wanted: tuple[str, ...] | None,
) -> None:
    targets = {t.name: t for t in discover(None)[0]}
    for native in natives_for(report.op, wanted):
        target = _native_target(native.library, targets)
        if not native.available() or target is None:
            report.not_run[native.name] = f"{native.library} is not installed"
            continue
        why = native.refuses(report.dtype, reduced) or (
            "" if target.has(report.dtype) else f"{native.library} has no {report.dtype}"
        )
        if why:
            report.not_run[native.name] = why
            continue
        try:
            with target.active(), _quiet():
                result = native.call(target.from_numpy(host), reduced, report.keepdims)
                got = np.asarray(target.to_numpy(result))
        except Exception as error:  # noqa: BLE001 - reported, not raised
            report.rows.append(_failed(native.name, "native", error))
            continue
        note = ""
        if got.dtype != host.dtype:
            # A framework's own function may widen (torch.sum of int8 is int64, np.mean of
            # ints float64); its value is what a port sees, compared in the input's dtype.
            note = f"returns {got.dtype.name}, compared as {report.dtype}"
            with _quiet():
                got = np.asarray(got.astype(host.dtype))
        row = _row(native.name, "native", onnx_name(report.op), got, want, host, reduced, note)
        if not row.agrees and target.reads_subnormals_as_zero:
            row = _as_zeros(report, row, got, host, reduced) or row
        report.rows.append(row)


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
    form = "absent" if not axes else "input" if version.axes_input else "attribute"
    return SpecCase.onnx(op, version.since, data, axes or None, form, keepdims=int(keepdims))


def _row(
    name: str,
    kind: str,
    onnx_op: str,
    got: np.ndarray,
    want: Exact,
    host: np.ndarray,
    reduced: tuple[int, ...],
    note: str = "",
) -> ParityRow:
    with _quiet():
        verdict = compare(onnx_op, got, want)
    worst = _worst(got, want)
    if worst is None:
        return ParityRow(
            name,
            kind,
            verdict.max_ulps,
            verdict.max_relative,
            verdict.agrees,
            note=note,
            detail=verdict.why,
        )
    index, expected, actual = worst
    inputs, count = _inputs_of(host, reduced, index)
    return ParityRow(
        name,
        kind,
        verdict.max_ulps,
        verdict.max_relative,
        verdict.agrees,
        note=note,
        detail=verdict.why,
        worst_index=index,
        expected=expected,
        actual=actual,
        inputs=inputs,
        count=count,
    )


def _worst(got: np.ndarray, want: Exact) -> tuple[tuple[int, ...], Any, Any] | None:
    """The output element farthest from the exact one (in ulps), with both values."""
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.values.shape or got.size == 0:
        return None
    if want.dtype.kind in "biu":
        errors = [
            abs(int(a) - int(e)) for a, e in zip(got.ravel(), want.values.ravel(), strict=True)
        ]
        flat = int(np.argmax(errors))
        cast = bool if want.dtype.kind == "b" else int
        return (
            tuple(int(i) for i in np.unravel_index(flat, got.shape)),
            cast(want.values.ravel()[flat]),
            cast(got.ravel()[flat]),
        )
    with _quiet():
        actual = got.astype(np.float64)
        expected = want.values.astype(np.float64)
        rounded = want.rounded().astype(np.float64)
        both_nan = np.isnan(actual) & np.isnan(expected)
        same = both_nan | (actual == rounded) | (actual == expected)
        if want.ill is not None:
            same |= want.ill  # any answer is right there
        finite = np.isfinite(actual) & np.isfinite(rounded)
        ulps = np.where(
            same,
            0.0,
            np.where(finite, np.abs(actual - expected) / spacing(rounded, want.dtype), math.inf),
        )
    flat = int(np.argmax(ulps.ravel()))
    return (
        tuple(int(i) for i in np.unravel_index(flat, got.shape)),
        float(expected.ravel()[flat]),
        float(actual.ravel()[flat]),
    )


def _inputs_of(
    host: np.ndarray, reduced: tuple[int, ...], index: tuple[int, ...]
) -> tuple[tuple[Any, ...], int]:
    """The (first 16) values reduced into output element ``index``, and how many there are."""
    kept = [i for i in range(host.ndim) if i not in reduced]
    if len(index) == host.ndim:  # keepdims: drop the reduced axes' zeros
        index = tuple(index[i] for i in kept)
    outer = tuple(host.shape[i] for i in kept)
    moved = np.transpose(host, kept + list(reduced)).reshape((*outer, -1))
    row = moved[index]
    cast: Any = bool if host.dtype.kind == "b" else int if host.dtype.kind in "iu" else float
    return tuple(cast(v) for v in row[:16]), int(row.size)


def _failed(name: str, kind: str, error: Exception) -> ParityRow:
    first = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
    return ParityRow(name, kind, math.inf, math.inf, False, f"{type(error).__name__}: {first}")
