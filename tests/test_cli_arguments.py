"""Bad command-line arguments: one line on stderr naming the argument, exit status 2, nothing run.

Every command is walked with a table of bad values (wrong types, out-of-range numbers,
unknown names, impossible output paths). For each, the command must stop while its
arguments are read: one line on stderr that names the argument and says what is allowed,
nothing on stdout, exit status 2, no traceback, no file written and the command's work
never started. (``anyreduce parity`` checks its own arguments; it is not walked here.)
Good arguments reach the command, and a run exits 0, or 1 where it finds a failure
(``bench --check`` here; ``conformance`` and ``parity`` in ``test_cli_conformance.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from anyreduce import _cli

# (arguments, the option the message must name, words of what is allowed)
BAD = [
    # anyreduce conformance
    (["conformance", "--html", "{missing}/report.html"], "--html", "does not exist"),
    (["conformance", "--json", "{tmp}"], "--json", "is a directory"),
    (["conformance", "--json", "{file}/report.json"], "--json", "is not a directory"),
    (["conformance", "--html", ""], "--html", "expected a file path"),
    (["conformance", "--examples", "-1"], "--examples", "0 or more"),
    (["conformance", "--examples", "many"], "--examples", "0 or more"),
    (["conformance", "--seed", "-3"], "--seed", "0 or more"),
    (["conformance", "--seed", "1.5"], "--seed", "0 or more"),
    (["conformance", "--backend", "cupy"], "--backend", "choose from"),
    (["conformance", "--suite", "everything"], "--suite", "choose from"),
    # anyreduce demo
    (["demo", "--axes", "5"], "--axes", "-3 to 2"),
    (["demo", "--axes", "-4"], "--axes", "-3 to 2"),
    (["demo", "--axes", "0", "0"], "--axes", "each once"),
    (["demo", "--axes", "1", "-2"], "--axes", "each once"),
    (["demo", "--axes", "one"], "--axes", "int"),
    # anyreduce bench
    (["bench", "--backends", "nosuch"], "--backends", "choose from 'numpy'"),
    (["bench", "--ops", "reduce_median"], "--ops", "choose from 'reduce_sum'"),
    (["bench", "--shape", "-5", "3"], "--shape", "positive integer"),
    (["bench", "--shape", "0"], "--shape", "positive integer"),
    (["bench", "--shape", "4x8"], "--shape", "positive integer"),
    (["bench", "--repeats", "0"], "--repeats", "positive integer"),
    (["bench", "--repeats", "-3"], "--repeats", "positive integer"),
    (["bench", "--axes", "middle"], "--axes", "choose from 'last'"),
    (["bench", "--dtypes", "int8"], "--dtypes", "choose from 'float32'"),
    (["bench", "--device", "tpu"], "--device", "choose from 'cpu'"),
    (["bench", "--json", "{missing}/bench.json"], "--json", "does not exist"),
    (["bench", "--markdown", "{tmp}"], "--markdown", "is a directory"),
    (["bench", "--markdown", "{file}/bench.md"], "--markdown", "is not a directory"),
    (["bench", "--plot", "{missing}/plot.png"], "--plot", "does not exist"),
    (["bench", "--compare", "{missing}/latest.json"], "--compare", "does not exist"),
    (["bench", "--compare", "{tmp}"], "--compare", "is a directory"),
    (["bench", "--compare", "{file}"], "--compare", "is not JSON"),
]


def _fill(argv: list[str], tmp_path: Path) -> list[str]:
    places = {
        "missing": str(tmp_path / "no_such_dir"),
        "tmp": str(tmp_path),
        "file": str(tmp_path / "a_file"),
    }
    return [arg.format(**places) for arg in argv]


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding one file, and commands whose work fails the test if it starts."""
    (tmp_path / "a_file").write_text("keep\n")
    for name in _cli.COMMANDS:
        module = __import__(f"anyreduce._commands.{name}", fromlist=["run"])

        def started(args: object, name: str = name) -> int:
            pytest.fail(f"anyreduce {name} started its work despite a bad argument")

        monkeypatch.setattr(module, "run", started)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "option", "allowed"), BAD, ids=[" ".join(argv) for argv, _, _ in BAD]
)
def test_bad_argument_is_one_line_and_status_2(
    argv: list[str],
    option: str,
    allowed: str,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = sorted(sandbox.rglob("*"))
    with pytest.raises(SystemExit) as stopped:
        _cli.main(_fill(argv, sandbox))
    out, err = capsys.readouterr()
    assert stopped.value.code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"anyreduce {argv[0]}: argument {option}")
    assert allowed in lines[0]
    assert "Traceback" not in err
    assert sorted(sandbox.rglob("*")) == before
    assert (sandbox / "a_file").read_text() == "keep\n"


# (arguments, what the message quotes, the option it suggests or None)
UNKNOWN = [
    (["conformance", "--backnd", "torch"], "--backnd torch", "--backend"),
    (["conformance", "extra"], "extra", None),
    (["demo", "--axis", "1"], "--axis 1", "--axes"),
    (["bench", "--quick", "--no-such-option"], "--no-such-option", None),
    (["bench", "--jsn=out.json"], "--jsn=out.json", "--json"),
    (["parity", "reduce_l2", "--dtypes", "float16"], "--dtypes float16", "--dtype"),
]


@pytest.mark.parametrize(
    ("argv", "quoted", "suggested"), UNKNOWN, ids=[" ".join(argv) for argv, _, _ in UNKNOWN]
)
def test_unknown_argument_is_one_line_naming_the_command(
    argv: list[str],
    quoted: str,
    suggested: str | None,
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An option a command does not have is refused by that command, in one line that
    quotes what was not understood and names the command's closest option, if any."""
    with pytest.raises(SystemExit) as stopped:
        _cli.main(argv)
    out, err = capsys.readouterr()
    assert stopped.value.code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    command = f"anyreduce {argv[0]}"
    assert lines[0].startswith(f"{command}: unrecognized arguments: {quoted}")
    assert lines[0].endswith(f"(see '{command} --help')")
    if suggested is None:
        assert "did you mean" not in lines[0]
    else:
        assert f"did you mean {suggested}?" in lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["conformance", "--html", "/nonexistent_dir/report.html"],
        ["demo", "--axes", "0", "0"],
        ["bench", "--shape", "-5", "3"],
    ],
    ids=" ".join,
)
def test_bad_argument_from_the_shell(argv: list[str]) -> None:
    """The program itself (a new process), as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "anyreduce", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert argv[1] in done.stderr


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["bench", "--repeats", "1", "--shape", "3"], "repeats"),
        (["conformance", "--examples", "0", "--seed", "0"], "examples"),
        (["demo", "--axes", "-3", "2"], "axes"),
        (["demo", "--axes"], "axes"),
    ],
)
def test_good_arguments_reach_the_command(
    argv: list[str], option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    module = __import__(f"anyreduce._commands.{argv[0]}", fromlist=["run"])
    monkeypatch.setattr(module, "run", lambda args: seen.append(getattr(args, option)) or 0)
    assert _cli.main(argv) == 0
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("command", "option"),
    [("bench", "backends"), ("conformance", "backend"), ("parity", "backend")],
)
@pytest.mark.parametrize(
    "spelt",
    [
        ["--backend", "numpy", "--backend", "torch"],
        ["--backends", "numpy", "torch"],
        ["--backends", "numpy", "--backend", "torch"],
    ],
    ids=" ".join,
)
def test_every_command_takes_backends_spelt_either_way(
    command: str, option: str, spelt: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--backend NAME`` (repeatable) and ``--backends NAME ...`` mean the same in every
    command that takes backends (``bench`` took only the second, the others the first)."""
    seen: list[object] = []
    module = __import__(f"anyreduce._commands.{command}", fromlist=["run"])
    monkeypatch.setattr(module, "run", lambda args: seen.append(getattr(args, option)) or 0)
    assert _cli.main([command, *spelt]) == 0
    assert seen == [["numpy", "torch"]]


def test_good_output_paths_are_written_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing file is overwritten, a new one created: only once the command has run."""
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    seen: list[object] = []
    from anyreduce._commands import conformance

    monkeypatch.setattr(conformance, "run", lambda args: seen.append(args) or 0)
    argv = ["conformance", "--json", str(existing), "--html", str(tmp_path / "new.html")]
    assert _cli.main(argv) == 0
    assert not (tmp_path / "new.html").exists()
    assert existing.read_text() == "{}"


def test_demo_with_all_axes_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["demo", "--axes", "-1", "0"]) == 0
    assert "reduce_log_sum_exp" in capsys.readouterr().out


@pytest.mark.parametrize(("meets", "status"), [(False, 1), (True, 0), (None, 0)])
def test_bench_check_exits_1_when_a_judged_target_is_missed(
    meets: bool | None, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyreduce._bench

    result = {"meta": {}, "large": [{"meets": meets}], "small": [], "masked": [], "narrow": []}
    monkeypatch.setattr(anyreduce._bench, "run_suite", lambda settings, progress: result)
    monkeypatch.setattr(anyreduce._bench, "format_table", lambda result: "table")
    assert _cli.main(["bench", "--quick", "--check"]) == status
    assert _cli.main(["bench", "--quick"]) == 0  # without --check, nothing is judged


def test_bench_on_a_missing_gpu_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from anyreduce._lib._libraries import LIBRARIES

    if any(LIBRARIES[n].installed() and LIBRARIES[n].gpus() for n in ("torch", "jax")):
        pytest.skip("a CUDA device is present: the run would start")
    code = _cli.main(["bench", "--quick", "--device", "cuda", "--backends", "numpy", "torch"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "anyreduce bench: argument --device: no cuda device found (PyTorch, JAX) among the "
        "backends numpy, torch"
    ]
