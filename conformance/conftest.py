"""The conformance suite: spec cases and differential checks on every installed backend.

Run with ``python -m pytest conformance -n 2``. The number of generated cases per
differential test is ``ANYREDUCE_CONFORMANCE_EXAMPLES`` (default 40).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helpers beside this file (columns.py) are imported by name.
sys.path.insert(0, str(Path(__file__).parent))

# The ``import openvino`` telemetry forks a process from a thread; JAX warns about any fork.
FORK_WARNING = "ignore:os.fork\\(\\) was called:RuntimeWarning"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", FORK_WARNING)
