"""``anyreduce parity``: one reduction (or, with ``--all``, every one) on every backend,
runtime and framework, against the exact result."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._arguments import add_backend_options, at_least

NAME = "parity"
HELP = "compare reductions across backends, runtimes and frameworks, against the exact result"
DESCRIPTION = (
    "Run one reduction on every installed backend (NumPy, PyTorch, JAX, array-api-strict, "
    "Dask), runtime (ONNX reference, onnxruntime, OpenVINO) and, with --native, the "
    "frameworks' own functions (np.linalg.norm, torch.logsumexp, jax.nn.logsumexp, ...) on "
    "the same data (generated, or --data file.npy), and print for each the largest error in "
    "units in the last place, the largest relative error and whether it agrees with the "
    "exact result (Python integers, math.fsum) within the dtype's tolerance. With --all, "
    "every op x dtype x distribution, as one library x op matrix. Exits 0 when everything "
    "compared agrees, 1 when something disagrees, fails or nothing was compared, 2 for bad "
    "arguments. The same as anyreduce.testing.parity() and parity_sweep()."
)

_DEFAULT_SHAPE = (64, 1000)
_SWEEP_SHAPE = (8, 32)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "op", nargs="?", help="the reduction: reduce_l2, reduce_sum, ... (or ReduceL2, ...)"
    )
    parser.add_argument(
        "--shape",
        help="data shape, e.g. 64,1000 (default: 64,1000; with --all 8,32)",
    )
    parser.add_argument(
        "--dtype",
        help="data dtype (default: float32); with --all, a comma-separated list (default: all)",
    )
    parser.add_argument(
        "--distribution",
        help="of the generated data: normal (default), uniform, wide, specials, cancelling, "
        "integers; with --all, a comma-separated list (default: all)",
    )
    parser.add_argument("--data", metavar="FILE", help="compare on this .npy file's array")
    parser.add_argument("--axes", help="axes to reduce, e.g. 1 or 0,1 (default: all; --all: -1)")
    parser.add_argument(
        "--keepdims", type=int, choices=(0, 1), default=1, help="keep reduced axes (default: 1)"
    )
    parser.add_argument(
        "--seed",
        type=at_least(0, "0 or more"),
        default=0,
        help="seed of the data, 0 or more (default: 0)",
    )
    add_backend_options(parser, "backend", "only this backend, runtime or framework (repeatable)")
    parser.add_argument(
        "--native", action="store_true", help="also the frameworks' own functions of the op"
    )
    parser.add_argument(
        "--expect-error",
        action="append",
        default=[],
        metavar="NAME",
        help="an error of this backend, runtime or function is expected (repeatable)",
    )
    parser.add_argument(
        "--all", action="store_true", help="every op x dtype x distribution, as one matrix"
    )
    parser.add_argument("--json", metavar="PATH", help="with --all: write the report as JSON")
    parser.add_argument("--html", metavar="PATH", help="with --all: write a self-contained page")
    parser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


class _ArgumentError(Exception):
    """An argument is wrong: one line for stderr."""


def _integers(text: str, label: str, example: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in text.split(",") if n.strip())
    except ValueError:
        msg = f"{label} must be comma-separated integers, e.g. {example}; got {text!r}"
        raise _ArgumentError(msg) from None


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def _quiet_fork_warning() -> None:
    import warnings

    # ``import openvino`` sends telemetry from a forked process; with JAX loaded, the fork
    # warns. It concerns OpenVINO's telemetry, not the results.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)


def run(args: argparse.Namespace) -> int:
    _quiet_fork_warning()
    # Every argument is checked before any work; what fails later is not the caller's.
    try:
        settings = _sweep_settings(args) if args.all else _one_settings(args)
    except (_ArgumentError, ValueError, TypeError) as error:
        print(f"anyreduce parity: {error}", file=sys.stderr)
        return 2
    return _sweep(args, settings) if args.all else _one(settings)


def _load(path: str) -> Any:
    import numpy as np

    try:
        loaded = np.load(path, allow_pickle=False)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the same refusal
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        msg = f"--data {path}: cannot read a .npy array of numbers ({first})"
        raise _ArgumentError(msg) from None
    if not isinstance(loaded, np.ndarray):  # an .npz archive
        loaded.close()
        msg = f"--data {path}: not a .npy array (an .npz archive holds several; save one)"
        raise _ArgumentError(msg)
    return loaded


def _one_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of :func:`parity`, each checked."""
    from anyreduce._conformance import _parity

    if args.op is None:
        msg = "give the reduction (reduce_l2, ...), or --all for every one"
        raise _ArgumentError(msg)
    if args.json or args.html:
        msg = "--json and --html go with --all"
        raise _ArgumentError(msg)
    op = _parity.op_name(args.op)
    backends = _parity.check_names(args.backend, label="--backend")
    distribution = _parity.check_distribution(args.distribution or "normal", "--distribution")
    if args.data is not None:
        if args.shape is not None:
            msg = "give --shape or --data, not both"
            raise _ArgumentError(msg)
        data = _load(args.data)
        shape, dtype = tuple(data.shape), data.dtype.name
        _parity.check_dtype(dtype, op, label=f"--data {args.data}: dtype")
        _parity.check_shape(shape, label=f"--data {args.data}: shape")
        if args.dtype is not None and args.dtype != dtype:
            msg = f"--dtype {args.dtype} differs from --data's {dtype}; leave it out"
            raise _ArgumentError(msg)
    else:
        data = None
        given = (
            _DEFAULT_SHAPE if args.shape is None else _integers(args.shape, "--shape", "64,1000")
        )
        shape = _parity.check_shape(given, label="--shape")
        dtype = _parity.check_dtype(args.dtype or "float32", op, label="--dtype")
    axes = None if args.axes is None else _integers(args.axes, "--axes", "1 or 0,1")
    _parity.check_axes(op, axes, len(shape), label="--axes")
    return {
        "op": op,
        "shape": None if data is not None else shape,
        "dtype": None if data is not None else dtype,
        "axes": axes,
        "data": data,
        "distribution": distribution,
        "keepdims": bool(args.keepdims),
        "seed": args.seed,
        "backends": backends,
        "native": args.native,
        "expected_errors": _parity.check_expected(args.expect_error, "--expect-error"),
    }


def _one(settings: dict[str, Any]) -> int:
    from anyreduce._conformance import _parity

    report = _parity.parity(**settings)
    print(report)
    if not report.ok:
        print()
        print(report.failure_message())
    return 0 if report.ok else 1


class _PlainProgress:
    """One line, rewritten in place, for terminals without rich."""

    def __call__(self, done: int, total: int, label: str) -> None:
        end = "\n" if done == total else ""
        print(f"\r[{done}/{total}] {label:<50}", end=end, file=sys.stderr, flush=True)


class _RichProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._task: Any = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if self._task is None:
            self._task = self._progress.add_task(label, total=total)
        self._progress.update(self._task, completed=done, description=label)


def _sweep_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of :func:`parity_sweep`, each checked."""
    from anyreduce._conformance import _parity, _sweep

    if args.data is not None:
        msg = "--data compares one op; leave out --all"
        raise _ArgumentError(msg)
    ops = [_parity.op_name(args.op)] if args.op else None
    for dtype in _names(args.dtype) or ():
        _parity.check_dtype(dtype, label="--dtype")
    for distribution in _names(args.distribution) or ():
        _parity.check_distribution(distribution, "--distribution")
    _sweep.plan(ops, _names(args.dtype), _names(args.distribution))
    for option, path in (("--json", args.json), ("--html", args.html)):
        if path is not None and not Path(path).parent.is_dir():
            msg = f"{option} {path}: no such directory to write into"
            raise _ArgumentError(msg)
    shape = _SWEEP_SHAPE if args.shape is None else _integers(args.shape, "--shape", "8,32")
    shape = _parity.check_shape(shape, label="--shape")
    dtypes = _names(args.dtype)
    distributions = _names(args.distribution)
    axes: tuple[int, ...] | None = (-1,)
    if args.axes is not None:
        axes = _integers(args.axes, "--axes", "1 or 0,1") or None
    _parity.check_axes(ops[0] if ops else "--all", axes, len(shape), label="--axes")
    return {
        "ops": ops,
        "dtypes": dtypes,
        "distributions": distributions,
        "shape": shape,
        "axes": axes,
        "keepdims": bool(args.keepdims),
        "seed": args.seed,
        "backends": _parity.check_names(args.backend, label="--backend"),
        "native": args.native,
        "expected_errors": _parity.check_expected(args.expect_error, "--expect-error"),
    }


def _sweep(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    import importlib.util

    from anyreduce._conformance import _sweep

    if args.no_progress or not sys.stderr.isatty():
        report = _sweep.parity_sweep(**settings)
    elif importlib.util.find_spec("rich") is not None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, transient=True) as bar:
            report = _sweep.parity_sweep(progress=_RichProgress(bar), **settings)
    else:
        report = _sweep.parity_sweep(progress=_PlainProgress(), **settings)
    _print_sweep(report)
    if args.json:
        _sweep.write_json(report, args.json)
        print(f"JSON report: {args.json}")
    if args.html:
        _sweep.write_html(report, args.html)
        print(f"HTML report: {args.html}")
    return 0 if report.ok else 1


def _print_sweep(report: Any) -> None:
    for line in report.lines():
        print(line)
    print(f"\n{report.summary()}")
    if report.not_run:
        print("\nnot run:")
        for name, why in report.not_run.items():
            print(f"  {name}: {why}")
    if report.problems:
        print("\ndisagreements and errors:")
        for problem in report.problems[:30]:
            print(
                f"  {problem['library']} {problem['op']} {problem['dtype']} "
                f"{problem['distribution']}: {problem['what'][:200]}"
            )
        if len(report.problems) > 30:
            print(f"  ... and {len(report.problems) - 30} more (see --json or --html)")
