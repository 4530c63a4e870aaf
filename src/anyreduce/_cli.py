"""The ``anyreduce`` command line (also ``python -m anyreduce``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__

# Sub-command modules under anyreduce._commands, imported only when their command runs.
COMMANDS = ("demo",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anyreduce",
        description=(
            "The ONNX reductions, written once for NumPy, PyTorch, JAX, Dask and array-api-strict."
        ),
    )
    parser.add_argument("--version", action="version", version=f"anyreduce {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"anyreduce._commands.{name}")
        sub = commands.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
