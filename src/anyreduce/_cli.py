"""The ``anyreduce`` command line (also ``python -m anyreduce``)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__

# Sub-command modules under anyreduce._commands, imported only when their command runs.
COMMANDS = ("conformance", "parity", "bench", "demo")  # the order --help lists them in

_EPILOG = """\
examples:
  anyreduce conformance --html report.html    every spec case on every installed backend
  anyreduce parity reduce_l2 --shape 64,1000 --dtype float16 --axes 1
  anyreduce bench --quick                     time the reductions, briefly

Run 'anyreduce COMMAND --help' for the options of a command.
Documentation: https://anyreduce.readthedocs.io
"""


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: a bad argument is one line on stderr, then exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anyreduce",
        description=(
            "The ONNX reductions, written once for NumPy, PyTorch, JAX, Dask and\n"
            "array-api-strict. These commands check them against the ONNX and OpenVINO\n"
            "specifications and other runtimes, compare the runtimes, and time them."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"anyreduce {__version__}",
        help="print the version of anyreduce and exit",
    )
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        title="commands",
        parser_class=_CommandParser,
    )
    for name in COMMANDS:
        module = importlib.import_module(f"anyreduce._commands.{name}")
        # A command may give a longer DESCRIPTION for its own --help than its one-line HELP.
        description = getattr(module, "DESCRIPTION", module.HELP)
        sub = commands.add_parser(module.NAME, help=module.HELP, description=description)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run, parser=sub)
    return parser


# A list that starts with a negative number: argparse takes "-1" for a number but "-1,0"
# (axes, a shape) for an option, and then says "expected one argument".
_NEGATIVE_LIST = re.compile(r"-\d.*,")


def _attach_negative_lists(arguments: list[str]) -> list[str]:
    """``--axes -1,0`` as ``--axes=-1,0``: no option of these commands is a minus sign and
    a digit."""
    joined: list[str] = []
    for argument in arguments:
        previous = joined[-1] if joined else ""
        if (
            _NEGATIVE_LIST.match(argument)
            and previous.startswith("--")
            and "=" not in previous
            and previous != "--"
        ):
            joined[-1] = f"{previous}={argument}"
        else:
            joined.append(argument)
    return joined


def _refuse_unknown(command: argparse.ArgumentParser, unknown: list[str]) -> NoReturn:
    """Arguments a command does not take, refused by the command's own parser (argparse
    leaves them to the top-level one, whose message names neither the command nor the
    option meant), with the command's closest option where one is near."""
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    for argument in unknown:
        if argument.startswith("--"):
            near = difflib.get_close_matches(argument.split("=", 1)[0], options, n=1, cutoff=0.75)
            if near:
                message += f"; did you mean {near[0]}?"
                break
    command.error(message)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _attach_negative_lists(list(sys.argv[1:] if argv is None else argv))
    args, unknown = build_parser().parse_known_args(arguments)
    if unknown:
        _refuse_unknown(args.parser, unknown)
    args.argv = arguments  # a command may run itself again in a child process (bench)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
