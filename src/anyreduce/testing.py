"""Tools for checking anyreduce, and other implementations, against the contract.

:func:`parity` runs one reduction on every installed backend and runtime and measures each
against the exact result; :func:`conformance` runs the whole conformance suite (what the
``anyreduce conformance`` command runs) and returns its report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._conformance._parity import ParityReport, ParityRow, parity

__all__ = ["ParityReport", "ParityRow", "conformance", "parity"]


def conformance(
    *,
    backends: Sequence[str] | None = None,
    suites: Sequence[str] | None = None,
    examples: int = 40,
    seed: int = 0,
) -> Any:
    """Run the conformance suite and return its report.

    Parameters
    ----------
    backends : sequence of str, optional
        Only these backends and runtimes (``"numpy"``, ``"torch"``, ``"onnxruntime"``, ...);
        default: every installed one.
    suites : sequence of str, optional
        Among ``"onnx-node"``, ``"seed"``, ``"openvino-seed"``, ``"differential"``;
        default: all.
    examples : int, default 40
        Generated cases per profile for the differential checks.
    seed : int, default 0
        Seed of the generated cases.

    Returns
    -------
    Report
        ``.ok`` (no case failed), ``.results``, ``.matrix()``, ``.as_json()``.

    Examples
    --------
    >>> from anyreduce.testing import conformance
    >>> report = conformance(backends=["numpy"], suites=["seed"])
    >>> report.ok
    True
    """
    from ._conformance._engine import SUITES, Settings, run

    settings = Settings(
        columns=tuple(backends) if backends else None,
        suites=tuple(suites) if suites else SUITES,
        examples=examples,
        seed=seed,
    )
    return run(settings)
