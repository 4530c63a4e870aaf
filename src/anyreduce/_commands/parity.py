"""``anyreduce parity``: one reduction on every backend and runtime, against the exact result."""

from __future__ import annotations

import argparse

NAME = "parity"
HELP = "compare one reduction across every installed backend and runtime"
DESCRIPTION = (
    "Run one reduction on every installed backend (NumPy, PyTorch, JAX, array-api-strict, "
    "Dask) and runtime (ONNX reference, onnxruntime, OpenVINO) on the same generated data, "
    "and print for each the largest error in units in the last place, the largest relative "
    "error and whether it agrees with the exact result (Python integers, math.fsum) within "
    "the dtype's tolerance. Exits 1 if a backend disagrees. The same as "
    "anyreduce.testing.parity()."
)


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in text.split(",") if n.strip())
    except ValueError:
        msg = f"shape must be comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _axes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in text.split(",") if n.strip())
    except ValueError:
        msg = f"axes must be comma-separated integers, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="the reduction: reduce_l2, reduce_sum, ... (or ReduceL2, ...)")
    parser.add_argument(
        "--shape", type=_shape, default=(64, 1000), help="data shape, e.g. 64,1000 (default)"
    )
    parser.add_argument("--dtype", default="float32", help="data dtype (default: float32)")
    parser.add_argument(
        "--axes", type=_axes, default=None, help="axes to reduce, e.g. 1 or 0,1 (default: all)"
    )
    parser.add_argument(
        "--keepdims", type=int, choices=(0, 1), default=1, help="keep reduced axes (default: 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data (default: 0)")
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="only this backend or runtime (repeatable)",
    )


def _quiet_fork_warning() -> None:
    import warnings

    # ``import openvino`` sends telemetry from a forked process; with JAX loaded, the fork
    # warns. It concerns OpenVINO's telemetry, not the results.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)


def run(args: argparse.Namespace) -> int:
    _quiet_fork_warning()
    import sys

    from anyreduce.testing import parity

    try:
        report = parity(
            args.op,
            args.shape,
            args.dtype,
            args.axes,
            keepdims=bool(args.keepdims),
            seed=args.seed,
            backends=args.backend,
        )
    except (ValueError, TypeError) as error:
        print(f"anyreduce parity: {error}", file=sys.stderr)
        return 2
    print(report)
    return 0 if report.ok else 1
