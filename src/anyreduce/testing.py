"""Tools for checking anyreduce, and other implementations, against the contract.

:func:`parity` runs one reduction on every installed backend, runtime and (with
``native=True``) framework expression and measures each against the exact result;
:func:`assert_parity` is the same as an assertion for test suites; :func:`parity_sweep`
runs it for every op, dtype and distribution. :func:`exact` is the exact oracle they (and
the conformance suite) use, :func:`magnitude` the size of what an op accumulates.
:data:`OP_NAMES` names the ten reductions, in report order.
:func:`conformance` runs the whole conformance suite (what the ``anyreduce conformance``
command runs) and returns its report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._conformance._exact import OP_NAMES, magnitude
from ._conformance._exact import reduce as exact
from ._conformance._parity import ParityReport, ParityRow, parity
from ._conformance._sweep import SweepCell, SweepReport, parity_sweep

__all__ = [
    "OP_NAMES",
    "ParityReport",
    "ParityRow",
    "SweepCell",
    "SweepReport",
    "assert_parity",
    "conformance",
    "exact",
    "magnitude",
    "parity",
    "parity_sweep",
]


def assert_parity(*args: Any, **kwargs: Any) -> ParityReport:
    """:func:`parity`, raising ``AssertionError`` unless its report is ok.

    The message names each library that disagrees or fails, its worst output element with
    the exact and computed values and the inputs reduced into it, and the call that
    reproduces it; a report with nothing compared fails too.

    Parameters
    ----------
    *args
        The positional arguments of :func:`parity`: ``op``, ``shape``, ``dtype``, ``axes``.
    **kwargs
        Its keyword arguments: ``data``, ``distribution``, ``keepdims``, ``seed``,
        ``backends``, ``native``, ``expected_errors``.

    Returns
    -------
    ParityReport
        The report, when it is ok.

    Examples
    --------
    >>> import numpy as np
    >>> from anyreduce.testing import assert_parity
    >>> assert_parity("reduce_l2", (64, 1000), "float16", axes=1, backends=["numpy"]).ok
    True
    >>> report = assert_parity("reduce_l2", data=np.array([300, 400], np.float16),
    ...                        backends=["numpy", "torch"], native=True,
    ...                        expected_errors=())  # doctest: +SKIP
    Traceback (most recent call last):
    AssertionError: parity of reduce_l2 on float16[2] over all axes, the given data:
      np.linalg.norm (native): worst output [0]: exact 500.0, got inf (inf ulps); ...
    """
    report = parity(*args, **kwargs)
    if not report.ok:
        raise AssertionError(report.failure_message())
    return report


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
    backends : str or sequence of str, optional
        Only these backends and runtimes (``"numpy"``, ``"torch"``, ``"torch:cuda"``,
        ``"onnxruntime"``, ...); default: every installed one. An unknown name, or none,
        is a ``ValueError``.
    suites : str or sequence of str, optional
        Among ``"onnx-node"``, ``"seed"``, ``"openvino-seed"``, ``"differential"``,
        ``"divergences"``; default: all. An unknown name, or none, is a ``ValueError``.
    examples : int, default 40
        Generated cases per profile for the differential checks, 0 or more.
    seed : int, default 0
        Seed of the generated cases, 0 or more.

    Returns
    -------
    Report
        ``.ok`` (some case ran, none failed), ``.results``, ``.matrix()``, ``.as_json()``.

    Examples
    --------
    >>> from anyreduce.testing import conformance
    >>> report = conformance(backends=["numpy"], suites=["seed"])
    >>> report.ok
    True
    """
    from ._conformance._engine import COLUMNS, SUITES, Settings, run
    from ._conformance._parity import check_choices, check_count

    settings = Settings(
        columns=check_choices(backends, COLUMNS, "conformance: backends"),
        suites=check_choices(suites, SUITES, "conformance: suites") or SUITES,
        examples=check_count(examples, "conformance: examples"),
        seed=check_count(seed, "conformance: seed"),
    )
    return run(settings)
