"""``anyreduce bench``: time the reductions against each backend's own kernels."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from .._lib._libraries import LIBRARIES
from .._lib._ops import OPS
from ._arguments import add_backend_options, at_least, bench_result, output_file, plot_file

NAME = "bench"
HELP = (
    "time every reduction on every installed backend against the backend's plain sum, "
    "its best native expression and onnxruntime"
)


#: The libraries the benchmark knows (``anyreduce._bench._anchors.BACKEND_NAMES``): the
#: registry's, modes of another one (jax32) left out.
BACKENDS = tuple(name for name, lib in LIBRARIES.items() if lib.mode_of is None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: small data, few repeats, no targets judged",
    )
    add_backend_options(
        parser,
        "backends",
        f"a backend to time (repeatable; one of {', '.join(BACKENDS)}; default: numpy torch jax)",
        BACKENDS,
    )
    parser.add_argument(
        "--ops", nargs="+", choices=tuple(OPS), metavar="OP", help="e.g. reduce_l2 (default: all)"
    )
    parser.add_argument(
        "--axes",
        nargs="+",
        choices=("last", "first", "all"),
        help="axis choices for the large input (default: all three)",
    )
    parser.add_argument(
        "--dtypes",
        nargs="+",
        choices=("float32", "float16"),
        help="dtypes of the large input (default: float32 float16)",
    )
    parser.add_argument(
        "--shape",
        type=at_least(1, "a positive integer"),
        nargs="+",
        metavar="N",
        help="large input shape, positive integers (default 4096 8192)",
    )
    parser.add_argument(
        "--repeats",
        type=at_least(1, "a positive integer"),
        help="timing rounds per group, 1 or more (default 7)",
    )
    parser.add_argument(
        "--contended",
        action="store_true",
        help="run with one spinning process per core for the whole run; judged: "
        "each operator within 1.5x the backend's best native expression",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="where the data live (default: cpu); cuda times PyTorch and JAX on their first "
        "GPU, without onnxruntime's CPU kernels and the memory tables",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip peak-memory measurement")
    parser.add_argument("--no-onnxruntime", action="store_true", help="skip the onnxruntime anchor")
    parser.add_argument("--no-small", action="store_true", help="skip the small-input overhead")
    parser.add_argument("--no-masked", action="store_true", help="skip LogSumExp of masked logits")
    parser.add_argument("--no-narrow", action="store_true", help="skip the narrow-data table")
    parser.add_argument(
        "--no-compiled", action="store_true", help="skip torch.compile of L2 against vector_norm"
    )
    parser.add_argument(
        "--json", type=output_file, metavar="PATH", help="write the results as JSON"
    )
    parser.add_argument(
        "--markdown", type=output_file, metavar="PATH", help="write the tables as Markdown"
    )
    parser.add_argument(
        "--plot",
        type=plot_file,
        metavar="PATH",
        help="write a plot of the ratios (needs matplotlib)",
    )
    parser.add_argument(
        "--compare",
        type=bench_result,
        metavar="PATH",
        help="set each ratio beside the same ratio of a run saved with --json (e.g. "
        "benchmarks/results/latest.json); a ratio more than 1.1x the saved one is worse",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit with status 1 when a judged target is missed or, with --compare, a ratio "
        "is more than 1.1x the saved one",
    )


def _settings(args: argparse.Namespace) -> Any:
    from .._bench import Settings

    changes: dict[str, object] = {}
    # Options that give a value: the setting's name, and how the value becomes it.
    valued: dict[str, tuple[str, Callable[[Any], object]]] = {
        "backends": ("backends", tuple),
        "ops": ("ops", tuple),
        "axes": ("axes", tuple),
        "dtypes": ("dtypes", tuple),
        "shape": ("shape", tuple),
        "repeats": ("repeats", int),
        "device": ("device", str.upper),
    }
    for option, (setting, convert) in valued.items():
        value = getattr(args, option)
        if value:
            changes[setting] = convert(value)
    # Flags that turn a part of the run off (or contention on).
    flags = {
        "no_memory": ("memory", False),
        "no_onnxruntime": ("onnxruntime", False),
        "no_small": ("small_shape", ()),
        "no_masked": ("masked", False),
        "no_narrow": ("narrow", False),
        "no_compiled": ("compiled", False),
        "contended": ("contended", True),
    }
    for option, (setting, value) in flags.items():
        if getattr(args, option):
            changes[setting] = value
    return Settings.quick_settings(**changes) if args.quick else Settings(**changes)  # type: ignore[arg-type]


#: OpenBLAS's idle threads spin for about 2**28 cycles (0.1 s here) after each call before
#: they sleep; 4 (2**4 cycles) puts them to sleep at once. Read when OpenBLAS loads.
QUIET_BLAS = ("OPENBLAS_THREAD_TIMEOUT", "4")


def run(args: argparse.Namespace) -> int:
    from .._bench import format_table, plot_ratios, run_suite, to_markdown
    from .._bench._compare import compare
    from .._bench._report import judged_records

    name, value = QUIET_BLAS
    if not args.quick and name not in os.environ:
        # NumPy's BLAS products (anyreduce's sums over leading or all axes, the einsum
        # anchors) leave OpenBLAS's threads spinning on the second core, which slowed
        # whatever ran next: onnxruntime's sum over axis 0 took 13-14.5 ms after one,
        # 9.6-10 ms after np.sum; PyTorch's L1 25.8 against 7.4 ms (2 cores). A full run
        # therefore runs again in a child process where they sleep at once; set the
        # variable to keep OpenBLAS's own setting.
        command = [sys.executable, "-m", "anyreduce", *args.argv]
        return subprocess.call(command, env={**os.environ, name: value})
    settings = _settings(args)
    if settings.device != "CPU":
        chosen = [n for n in settings.backends if LIBRARIES[n].installed()]
        if not any(LIBRARIES[n].gpus() for n in chosen):
            print(
                f"anyreduce bench: argument --device: no {args.device} device found "
                f"(PyTorch, JAX) among the backends {', '.join(settings.backends)}",
                file=sys.stderr,
            )
            return 2
    result = run_suite(settings, progress=lambda line: print(line, flush=True))
    if args.compare:
        result["comparison"] = compare(result, args.compare.result, args.compare.path)
    print(format_table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(to_markdown(result) + "\n")
    if args.plot:
        plot_ratios(result, args.plot)
    missed = [r for r in judged_records(result) if not r["meets"]]
    worse = [r for r in result.get("comparison", {}).get("ratios", []) if not r["meets"]]
    if args.check and (missed or worse):
        return 1
    return 0
