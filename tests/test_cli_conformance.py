"""``anyreduce conformance`` and ``anyreduce parity``, and their Python functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anyreduce._cli import main
from anyreduce._conformance import _runtimes
from anyreduce._lib import _libraries
from anyreduce.testing import parity

pytest.importorskip("onnx")


def test_conformance_writes_matrix_json_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, page = tmp_path / "report.json", tmp_path / "report.html"
    argv = ["conformance", "--backend", "numpy", "--suite", "seed", "--suite", "differential"]
    argv += ["--examples", "5", "--no-progress", "--json", str(report), "--html", str(page)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ReduceL1" in out
    assert "numpy" in out
    assert "0 failed" in out
    data = json.loads(report.read_text())
    assert data["summary"]["failed"] == 0
    assert data["summary"]["passed"] > 0
    assert data["columns"] == ["numpy"]
    assert set(data["matrix"]) >= {"ReduceSum", "ReduceL1", "ReduceLogSumExp"}
    assert data["matrix"]["ReduceL1"]["numpy"]["passed"] > 0
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<table class='matrix'>" in html
    assert "<script" not in html
    assert "http" not in html.split("<h2>Versions</h2>")[0]  # self-contained


def test_conformance_fails_and_shows_failing_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from anyreduce._conformance import _exact, _execute

    def disagree(op: str, got: Any, want: Any) -> _exact.Comparison:
        return _exact.Comparison(False, "values differ (injected)", 1.0, 1.0)

    monkeypatch.setattr(_execute, "compare", disagree)
    page = tmp_path / "report.html"
    argv = ["conformance", "--backend", "numpy", "--suite", "openvino-seed", "--no-progress"]
    assert main([*argv, "--html", str(page)]) == 1
    assert "FAIL" in capsys.readouterr().out
    html = page.read_text()
    assert "<details class='failed'>" in html
    assert "<h4>expected</h4>" in html
    assert "<h4>actual</h4>" in html


def test_conformance_with_only_numpy_says_what_it_could_not_test(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_libraries, "installed", lambda module: module == "numpy")
    monkeypatch.setattr(_runtimes.Runtime, "available", lambda self: False)
    argv = ["conformance", "--suite", "seed", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "not tested" in out
    for name in ("torch", "jax", "dask", "array_api_strict", "onnxruntime", "openvino"):
        assert f"{name}: " in out


def test_python_m_anyreduce_conformance_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "anyreduce", "conformance", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--examples" in done.stdout
    assert "--html" in done.stdout


def test_parity_command(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["parity", "reduce_l2", "--shape", "16,200", "--dtype", "float16", "--axes", "1"]
    assert main([*argv, "--backend", "numpy", "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "max ulps" in out
    assert "numpy" in out
    assert "onnxruntime" in out


def test_parity_command_rejects_unknown_op(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parity", "reduce_median", "--shape", "4"]) == 2
    assert "unknown reduction" in capsys.readouterr().err


def test_parity_function_measures_each_backend() -> None:
    report = parity("reduce_l2", (64, 1000), "float16", axes=1, backends=["numpy", "torch"])
    assert report.tolerance < 2**-12
    assert report.ok
    assert [row.name for row in report.rows] == ["numpy", "torch"]
    for row in report.rows:
        assert row.agrees
        assert row.max_ulps <= 0.5 + 1e-9  # float32 accumulation, one rounding
        assert row.max_relative < 2**-10
    assert "reduce_l2 of float16[64, 1000]" in str(report)


def test_parity_measures_a_runtime_with_a_larger_error() -> None:
    pytest.importorskip("onnx.reference")
    # The reference evaluator sums float16 squares in float16: over 1000 values of size ~1
    # that costs more than the half ulp of the contract's one final rounding (still within
    # the worst-case bound of a float32 accumulation, so it agrees).
    report = parity("ReduceL2", (64, 1000), "float16", axes=1, backends=["onnx.reference"])
    (row,) = report.rows
    assert row.max_ulps > 0.5


def test_conformance_without_onnx_or_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiles' functions stand in for run_node, NumPy's generator for hypothesis."""
    import importlib.util

    from anyreduce._conformance import _engine, _execute

    find_spec = importlib.util.find_spec

    def absent(name: str, *args: Any) -> Any:
        return None if name in ("onnx", "hypothesis") else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", absent)
    monkeypatch.setattr(_execute, "_have_onnx", lambda: False)
    settings = _engine.Settings(columns=("numpy",), examples=30)
    report = _engine.run(settings)
    assert report.ok
    assert report.not_tested == {"onnx-node": "the ONNX backend node tests need onnx"}
    suites = {r.suite for r in report.results}
    assert suites == {"seed", "openvino-seed", "differential"}
    assert 40 < sum(r.suite == "differential" for r in report.results) <= 60  # no bfloat16


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
def test_conformance_progress(
    rich: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if rich:
        pytest.importorskip("rich")
    else:
        import importlib.util

        find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: None if name == "rich" else find_spec(name, *a),
        )
    argv = ["conformance", "--backend", "onnx.reference", "--suite", "divergences"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "divergent (documented)" in captured.out
    if not rich:
        assert "divergence examples on onnx.reference" in captured.err


def test_main_job_runs_with_numpy_alone(tmp_path: Any) -> None:
    """The main job on a plain install: no backend, runtime, ml_dtypes, hypothesis or rich."""
    import subprocess
    import sys

    code = (
        "import importlib.util, sys\n"
        "blocked = {'torch', 'jax', 'jaxlib', 'dask', 'array_api_strict', 'onnx', 'onnxruntime',"
        " 'openvino', 'ml_dtypes', 'hypothesis', 'rich'}\n"
        "class Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in blocked:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Blocker())\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name.split('.')[0] in blocked"
        " else real(name, *a)\n"
        "from anyreduce._cli import main\n"
        f"sys.exit(main(['conformance', '--examples', '20', '--json', r'{tmp_path}/r.json']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout
    assert "torch: not installed" in out.stdout


@pytest.mark.parametrize(
    ("arguments", "error", "says"),
    [
        ({"suites": ["nope"]}, ValueError, "suites: unknown name 'nope'; expected one of onnx"),
        ({"suites": "sed"}, ValueError, "suites: unknown name 'sed'; expected one of onnx-node"),
        ({"suites": []}, ValueError, "suites: empty; give at least one of onnx-node"),
        ({"backends": ["Torch"]}, ValueError, "backends: unknown name 'Torch'; expected one of"),
        ({"backends": "nupmy"}, ValueError, "backends: unknown name 'nupmy'; expected one of"),
        ({"backends": []}, ValueError, "backends: empty; give at least one of numpy"),
        ({"examples": -1}, ValueError, "examples must be an integer of 0 or more, got -1"),
        ({"examples": 2.5}, TypeError, "examples must be an integer of 0 or more, got 2.5"),
        ({"seed": -3}, ValueError, "seed must be an integer of 0 or more, got -3"),
        ({"seed": True}, TypeError, "seed must be an integer of 0 or more, got True"),
    ],
)
def test_conformance_function_refuses_bad_arguments_in_one_line(
    arguments: dict[str, Any], error: type, says: str
) -> None:
    """A name that selects nothing would run nothing and report success. (One name alone
    is taken as a list of one, as parity's ``backends`` is.)"""
    from anyreduce.testing import conformance

    with pytest.raises(error, match=r"^conformance: " + says.replace("(", r"\(")):
        conformance(**arguments)


def test_conformance_that_tested_nothing_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backend asked for but not installed runs no case: the run is not a success."""
    monkeypatch.setattr(_libraries, "installed", lambda module: module == "numpy")
    assert main(["conformance", "--backend", "torch", "--suite", "seed", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "nothing was tested" in out
    assert "torch: " in out
