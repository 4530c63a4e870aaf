"""``anyreduce conformance``: the specification cases on every installed backend and runtime."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._conformance._engine import COLUMNS, SUITES
from ._arguments import add_backend_options, at_least, output_file

NAME = "conformance"
HELP = "run the ONNX and OpenVINO conformance cases on every installed backend and runtime"
DESCRIPTION = (
    "Run the conformance suite: the ONNX backend node tests (through "
    "anyreduce.onnx.backend_for), the worked examples of the ONNX and OpenVINO documents at "
    "every opset version, and generated cases compared with the ONNX reference evaluator, "
    "onnxruntime and the OpenVINO runtime, on every installed array library (NumPy always; "
    "PyTorch, JAX, array-api-strict, Dask and CUDA devices when present). Prints a matrix "
    "of operator x backend; exits 1 if any case failed or none ran. A runtime's documented "
    "divergence from the contract is reported as 'div', not as a failure."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_backend_options(
        parser,
        "backend",
        f"test only this backend or runtime (repeatable; one of {', '.join(COLUMNS)})",
        COLUMNS,
    )
    parser.add_argument(
        "--suite",
        action="append",
        choices=SUITES,
        help="run only this suite (repeatable; default: all)",
    )
    parser.add_argument(
        "--examples",
        type=at_least(0, "0 or more"),
        default=40,
        metavar="N",
        help="generated (hypothesis) cases per profile for the differential checks (default: 40)",
    )
    parser.add_argument(
        "--seed",
        type=at_least(0, "0 or more"),
        default=0,
        help="seed of the generated cases, 0 or more (default: 0)",
    )
    parser.add_argument(
        "--json", type=output_file, metavar="PATH", help="write the full report as JSON"
    )
    parser.add_argument(
        "--html", type=output_file, metavar="PATH", help="write a self-contained HTML report"
    )
    parser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")


class _PlainProgress:
    """One line per step, for terminals without rich."""

    def __init__(self) -> None:
        self._label = ""

    def __call__(self, done: int, total: int, label: str) -> None:
        if label not in (self._label, "done"):
            print(f"[{done}/{total}] {label}", file=sys.stderr, flush=True)
        self._label = label


class _RichProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._task: Any = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if self._task is None:
            self._task = self._progress.add_task(label, total=total)
        self._progress.update(self._task, completed=done, description=label)


def _print_report(report: Any) -> None:
    from anyreduce._conformance._execute import FAILED
    from anyreduce._conformance._report import matrix_lines

    print()
    for line in matrix_lines(report):
        print(line)
    counts = report.counts()
    print(
        f"\n{counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['divergent']} divergent (documented) in {report.seconds:.1f} s"
    )
    if not report.results:
        print("\nnothing was tested: no case ran on the backends and suites asked for")
    if report.not_tested:
        print("\nnot tested:")
        for name, why in report.not_tested.items():
            print(f"  {name}: {why}")
    failures = [r for r in report.problems() if r.status == FAILED]
    if failures:
        print("\nfailures:")
        for result in failures[:30]:
            print(f"  {result.column} {result.op} {result.case}: {result.detail[:300]}")
        if len(failures) > 30:
            print(f"  ... and {len(failures) - 30} more (see --json or --html)")


def _quiet_fork_warning() -> None:
    import warnings

    # ``import openvino`` sends telemetry from a forked process; with JAX loaded, the fork
    # warns. It concerns OpenVINO's telemetry, not the results.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)


def run(args: argparse.Namespace) -> int:
    _quiet_fork_warning()
    import importlib.util

    from anyreduce._conformance._engine import Settings
    from anyreduce._conformance._engine import run as run_suite
    from anyreduce._conformance._report import write_html, write_json

    settings = Settings(
        columns=tuple(args.backend) if args.backend else None,
        suites=tuple(args.suite) if args.suite else SUITES,
        examples=args.examples,
        seed=args.seed,
    )
    if args.no_progress:
        report = run_suite(settings)
    elif importlib.util.find_spec("rich") is not None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        columns = (
            "{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, transient=True) as bar:
            report = run_suite(settings, _RichProgress(bar))
    else:
        report = run_suite(settings, _PlainProgress())
    _print_report(report)
    if args.json:
        write_json(report, args.json)
        print(f"JSON report: {args.json}")
    if args.html:
        write_html(report, args.html)
        print(f"HTML report: {args.html}")
    return 0 if report.ok else 1
