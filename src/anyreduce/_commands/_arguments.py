"""Argument types the commands share: each checks its value while the command line is read.

A bad value is an ``argparse.ArgumentTypeError``; argparse names the option, and the
command line prints that as one line and exits with status 2 before any work starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "SavedRun",
    "add_backend_options",
    "at_least",
    "bench_result",
    "output_file",
    "plot_file",
]


def add_backend_options(
    parser: argparse.ArgumentParser, dest: str, help: str, choices: Any = None
) -> None:
    """The backends a command runs, spelt alike by every command: ``--backend NAME``
    (repeatable) or ``--backends NAME [NAME ...]``, both adding to one list, ``dest``."""
    parser.add_argument(
        "--backend", dest=dest, action="append", choices=choices, metavar="NAME", help=help
    )
    parser.add_argument(
        "--backends",
        dest=dest,
        action="extend",
        nargs="+",
        choices=choices,
        metavar="NAME",
        help="several at once: the same as --backend for each",
    )


def at_least(low: int, what: str) -> Callable[[str], int]:
    """An ``int`` option whose value must be ``low`` or more (``what`` says it in words)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            msg = f"expected {what}, got {text!r}"
            raise argparse.ArgumentTypeError(msg) from None
        if value < low:
            msg = f"expected {what}, got {value}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def output_file(text: str) -> Path:
    """A file the command can write once it has run: checked now, created only then.

    The folder must exist (nothing is created on the way) and be writable; the path must
    not be a folder itself, and an existing file there must be writable.
    """
    if not text:
        msg = "expected a file path, got an empty string"
        raise argparse.ArgumentTypeError(msg)
    path = Path(text)
    folder = path.parent
    if path.is_dir():
        msg = f"{text!r} is a directory; give the path of a file to write"
        raise argparse.ArgumentTypeError(msg)
    if not folder.exists():
        msg = f"cannot write {text!r}: the directory {str(folder)!r} does not exist"
        raise argparse.ArgumentTypeError(msg)
    if not folder.is_dir():
        msg = f"cannot write {text!r}: {str(folder)!r} is not a directory"
        raise argparse.ArgumentTypeError(msg)
    if not os.access(path if path.exists() else folder, os.W_OK):
        msg = f"cannot write {text!r}: permission denied"
        raise argparse.ArgumentTypeError(msg)
    return path


def plot_file(text: str) -> Path:
    """An :func:`output_file` for a plot, which needs matplotlib."""
    path = output_file(text)
    if importlib.util.find_spec("matplotlib") is None:
        msg = "writing a plot needs matplotlib: pip install matplotlib"
        raise argparse.ArgumentTypeError(msg)
    return path


class SavedRun(NamedTuple):
    """A file written by ``anyreduce bench --json``: its path as given, and its content."""

    path: str
    result: dict[str, Any]


def bench_result(text: str) -> SavedRun:
    """A saved benchmark run to compare with: read and checked now."""
    from .._bench._compare import is_result

    path = Path(text)
    what = "a file written by 'anyreduce bench --json'"
    if not text:
        msg = f"expected {what}, got an empty string"
        raise argparse.ArgumentTypeError(msg)
    if path.is_dir():
        msg = f"{text!r} is a directory; give {what}"
        raise argparse.ArgumentTypeError(msg)
    if not path.exists():
        msg = f"cannot read {text!r}: the file does not exist"
        raise argparse.ArgumentTypeError(msg)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        msg = f"cannot read {text!r}: {error.strerror}"
        raise argparse.ArgumentTypeError(msg) from None
    except UnicodeDecodeError:
        msg = f"{text!r} is not JSON (not UTF-8 text); give {what}"
        raise argparse.ArgumentTypeError(msg) from None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        msg = f"{text!r} is not JSON ({error.msg} at {where}); give {what}"
        raise argparse.ArgumentTypeError(msg) from None
    if not is_result(data):
        msg = (
            f"{text!r} is not a result of 'anyreduce bench --json' (an object with 'meta' "
            "and a 'large' list of rows naming backend, dtype, shape, axes and op)"
        )
        raise argparse.ArgumentTypeError(msg)
    return SavedRun(text, data)
