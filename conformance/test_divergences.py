"""Every documented divergence is real: its example, run on its runtime, disagrees with the
contract in the documented way, and anyreduce gives the contract's answer. The table in
docs/semantics.md is the one rendered from the same data."""

from __future__ import annotations

from pathlib import Path

import pytest
from columns import runtime, target

from anyreduce._conformance._divergences import DIVERGENCES, Divergence, markdown_table
from anyreduce._conformance._execute import DIVERGENT, FAILED, PASSED, run_on_runtime, run_on_target

SEMANTICS = Path(__file__).parent.parent / "docs" / "semantics.md"


def test_ids_are_unique() -> None:
    ids = [d.id for d in DIVERGENCES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=lambda d: d.id)
def test_runtime_diverges_as_documented(divergence: Divergence) -> None:
    chosen = runtime(divergence.runtime)
    case = divergence.example()
    result = run_on_runtime(case, chosen)
    assert result is not None
    version = chosen.version()
    if version and not divergence.diverges_in(version):
        # Fixed in this release: the runtime now gives the contract's answer.
        assert result.status == PASSED, (result.status, result.detail, result.actual)
        return
    assert result.status == DIVERGENT, (result.status, result.detail, result.actual)
    assert result.divergence == divergence.id, result.detail


def test_divergences_know_the_release_that_fixed_them() -> None:
    fixed = next(d for d in DIVERGENCES if d.id == "onnxruntime-zero-size-shape")
    assert fixed.diverges_in("1.31.1")
    assert not fixed.diverges_in("1.32.0")
    assert not fixed.diverges_in("1.33.0rc1")
    assert all(d.diverges_in("99.0") for d in DIVERGENCES if d.fixed_in is None)


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=lambda d: d.id)
def test_anyreduce_gives_the_contract_answer(divergence: Divergence) -> None:
    result = run_on_target(divergence.example(), target("numpy"))
    if result is None:  # NumPy has no bfloat16: the same example on torch
        result = run_on_target(divergence.example(), target("torch"))
    assert result is not None
    assert result.status == PASSED, result.detail


def test_semantics_page_lists_every_divergence() -> None:
    text = SEMANTICS.read_text()
    assert markdown_table() in text, "regenerate: python -m anyreduce._conformance._docs"


def test_the_conformance_run_expects_the_contract_from_a_fixing_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyreduce._conformance._engine import check_divergence
    from anyreduce._conformance._runtimes import Runtime

    fixed = next(d for d in DIVERGENCES if d.id == "onnxruntime-zero-size-shape")
    chosen = runtime(fixed.runtime)
    agrees = run_on_runtime(fixed.example(), chosen)
    assert agrees is not None
    fixed_here = agrees.status == PASSED  # whether the installed release has the fix
    for version in ("1.31.1", "1.32.0"):
        monkeypatch.setattr(Runtime, "version", lambda self, v=version: v)
        result = check_divergence(fixed, chosen)
        if version == "1.32.0":  # a fixing release must agree with the contract
            expected = PASSED if fixed_here else FAILED
        else:  # an older one must still diverge as documented
            expected = FAILED if fixed_here else DIVERGENT
        assert result.status == expected, result.detail


def test_the_reference_reads_a_scalar_axes_tensor_as_one_axis() -> None:
    """The other side of ``onnxruntime-scalar-axes``: the ONNX reference gives the
    contract's answer for a 0-D axes input."""
    divergence = next(d for d in DIVERGENCES if d.id == "onnxruntime-scalar-axes")
    result = run_on_runtime(divergence.example(), runtime("onnx.reference"))
    assert result is not None
    assert result.status == PASSED, (result.status, result.detail)
