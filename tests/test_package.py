"""Packaging facts: imports, version, command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import anyreduce

ROOT = Path(__file__).resolve().parents[1]


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


def _pins() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins = {}
    for text in (ROOT / "constraints.txt").read_text().splitlines():
        line = text.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not name==version"
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_every_requirement_within_its_bounds() -> None:
    """CI installs from ``constraints.txt``: it pins every requirement of every extra, at
    a version the requirement allows (else pip refuses to install)."""
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    if not (ROOT / "constraints.txt").exists():
        pytest.skip("not run from a source tree")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    unpinned, outside = [], []
    for text in dict.fromkeys(requirements):
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "anyreduce":
            continue
        if name not in pins:
            unpinned.append(text)
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            outside.append(f"{text} (pinned {pins[name]})")
    assert not unpinned, f"not pinned in constraints.txt: {unpinned}"
    assert not outside, f"pinned outside the requirement: {outside}"
