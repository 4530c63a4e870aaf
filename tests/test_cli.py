"""The command line's help and version: every command and every option says what it does."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import anyreduce
from anyreduce import _cli


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = sorted(_commands())


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_every_listed_command_is_registered() -> None:
    assert set(COMMANDS) == set(_cli.COMMANDS)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--version"], capsys)
    assert code == 0
    assert out.strip() == f"anyreduce {anyreduce.__version__}"


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--help"], capsys)
    assert code == 0
    assert out.startswith("usage: anyreduce")
    assert "--version" in out
    for name, parser in _commands().items():
        assert name in out
        assert parser.description, f"anyreduce {name} has no description"


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run([], capsys)
    assert code == 2
    assert "usage: anyreduce" in err
    assert "COMMAND" in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["no-such-command"], capsys)
    assert code == 2
    assert "no-such-command" in err


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([name, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: anyreduce {name}")
    parser = _commands()[name]
    assert parser.description
    # argparse re-wraps the description, breaking lines at spaces and hyphens.
    assert "".join(parser.description.split()) in "".join(out.split())


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_has_help(name: str) -> None:
    parser = _commands()[name]
    silent = [
        action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        and action.help != argparse.SUPPRESS
        and not (action.help or "").strip()
    ]
    assert not silent, f"anyreduce {name}: arguments without help: {silent}"


def test_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "anyreduce", "--help"], check=True, capture_output=True, text=True
    )
    assert out.stdout.startswith("usage: anyreduce")
