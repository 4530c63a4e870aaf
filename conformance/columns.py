"""The targets (array libraries) and runtimes the conformance tests are parametrized over."""

from __future__ import annotations

import os

import pytest

from anyreduce._conformance._runtimes import RUNTIMES, Runtime
from anyreduce._conformance._targets import LIBRARIES, Target, discover

# Generated cases per differential test.
EXAMPLES = int(os.environ.get("ANYREDUCE_CONFORMANCE_EXAMPLES", "40"))

TARGET_NAMES = LIBRARIES
ONNX_RUNTIMES = tuple(r.name for r in RUNTIMES if r.profile == "onnx")
OPENVINO_RUNTIMES = tuple(r.name for r in RUNTIMES if r.profile == "openvino")


def target(name: str) -> Target:
    """The installed target ``name`` (CPU), or skip."""
    pytest.importorskip(name)
    found, _ = discover((name,))
    return found[0]


def runtime(name: str) -> Runtime:
    """The installed runtime ``name``, or skip."""
    chosen = next(r for r in RUNTIMES if r.name == name)
    pytest.importorskip(chosen.module)
    if chosen.profile == "onnx":
        pytest.importorskip("onnx")
    return chosen


def report(results: list) -> str:
    """The failed results, one per line, for an assertion message."""
    failed = [r for r in results if r.status == "failed"]
    lines = [f"{len(failed)} of {len(results)} cases failed:"]
    lines += [f"  {r.case}: {r.detail[:400]}" for r in failed[:25]]
    return "\n".join(lines)
