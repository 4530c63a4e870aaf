"""Argument types the commands share: each checks its value while the command line is read.

A bad value is an ``argparse.ArgumentTypeError``; argparse names the option, and the
command line prints that as one line and exits with status 2 before any work starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["at_least", "output_file", "plot_file"]


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
