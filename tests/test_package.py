"""Packaging facts: imports, version, command line."""

from __future__ import annotations

import subprocess
import sys

import anyreduce


def test_import_pulls_in_no_backend() -> None:
    code = (
        "import sys, anyreduce, anyreduce._reductions, anyreduce._lib._ops\n"
        "heavy = [m for m in ('torch', 'jax', 'dask', 'onnx', 'onnxruntime', 'openvino',"
        " 'array_api_strict') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version() -> None:
    assert anyreduce.__version__.count(".") >= 2
    out = subprocess.run(
        [sys.executable, "-m", "anyreduce", "--version"], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == f"anyreduce {anyreduce.__version__}"


def test_demo_runs_on_installed_backends() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "anyreduce", "demo"], check=True, capture_output=True, text=True
    )
    assert "reduce_log_sum_exp" in out.stdout
    assert "[ 4.  6. 12. 14. 20. 22.]" in out.stdout
