"""Where the frameworks' own reductions differ from anyreduce, and why: each case is checked.

Every record is one row of the documentation's divergence table (``docs/divergences.md``
generates the table from ``DIVERGENCES``): the test runs the framework's own expression and
anyreduce's on the same input, and checks that each still gives the answer the table shows.
When a framework changes its answer, the test fails and the table must change with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import anyreduce


@dataclass(frozen=True)
class Outcome:
    """An answer: a value of a dtype, or an exception of a type."""

    value: float | None = None
    dtype: str | None = None
    error: str | None = None

    def __str__(self) -> str:
        if self.error:
            return f"raises {self.error}"
        return f"{_show(self.value)} ({self.dtype})"


def _show(value: float | None) -> str:
    if value is None or math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.8g}"


@dataclass(frozen=True)
class Divergence:
    """One input on which a framework's own function and anyreduce give different answers.

    ``data``, ``theirs_call`` and ``ours_call`` are Python expressions, shown as they are in
    the documentation and evaluated by the test with ``np``, ``torch``, ``jnp`` and
    ``anyreduce`` in scope and the input bound to ``x``.
    """

    id: str
    framework: str  # numpy, torch or jax
    data: str
    theirs_call: str
    theirs: Outcome
    ours_call: str
    ours: Outcome
    why: str


_L2_F16 = "float16 and bfloat16 accumulate in float32: the norm 500 is representable."
_L2_RANGE = "No intermediate overflow or underflow when the result is representable."
_DTYPE = "The output dtype is the input dtype; integers wrap modulo 2**bits, as ONNX."
_MEAN = "The mean of integers is exact, truncated toward zero, in the input dtype."
_EMPTY = "A reduction over an empty set gives the operator's identity (ONNX)."
_NAN = (
    "NaN propagates, for Max and Min too (ONNX). XLA's vectorised CPU code for large"
    " enough inputs drops it (openxla/xla#21461)."
)
_NAN_DATA = "jnp.where(jnp.arange(4096) == 1, jnp.nan, jnp.arange(4096, dtype=jnp.float32))"

DIVERGENCES = (
    Divergence(
        id="numpy-l2-float16",
        framework="numpy",
        data="np.array([300, 400], dtype=np.float16)",
        theirs_call="np.linalg.norm(x)",
        theirs=Outcome(math.inf, "float16"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(500.0, "float16"),
        why=_L2_F16,
    ),
    Divergence(
        id="numpy-l2-overflow",
        framework="numpy",
        data="np.array([1e20, 1e20], dtype=np.float32)",
        theirs_call="np.linalg.norm(x)",
        theirs=Outcome(math.inf, "float32"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4142135e20, "float32"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="numpy-l2-underflow",
        framework="numpy",
        data="np.array([1e-30, 1e-30], dtype=np.float32)",
        theirs_call="np.linalg.norm(x)",
        theirs=Outcome(0.0, "float32"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4142135e-30, "float32"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="numpy-sum-int8",
        framework="numpy",
        data="np.array([100, 100], dtype=np.int8)",
        theirs_call="np.sum(x)",
        theirs=Outcome(200, "int64"),
        ours_call="anyreduce.reduce_sum(x, keepdims=False)",
        ours=Outcome(-56, "int8"),
        why=_DTYPE,
    ),
    Divergence(
        id="numpy-mean-int8",
        framework="numpy",
        data="np.array([-7, 0], dtype=np.int8)",
        theirs_call="np.mean(x)",
        theirs=Outcome(-3.5, "float64"),
        ours_call="anyreduce.reduce_mean(x, keepdims=False)",
        ours=Outcome(-3, "int8"),
        why=_MEAN,
    ),
    Divergence(
        id="numpy-max-empty",
        framework="numpy",
        data="np.zeros((0,), dtype=np.float32)",
        theirs_call="np.max(x)",
        theirs=Outcome(error="ValueError"),
        ours_call="anyreduce.reduce_max(x, keepdims=False)",
        ours=Outcome(-math.inf, "float32"),
        why=_EMPTY,
    ),
    Divergence(
        id="torch-l2-overflow",
        framework="torch",
        data="torch.tensor([1e20, 1e20])",
        theirs_call="torch.linalg.vector_norm(x)",
        theirs=Outcome(math.inf, "float32"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4142135e20, "float32"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="torch-l2-underflow",
        framework="torch",
        data="torch.tensor([1e-30, 1e-30])",
        theirs_call="torch.linalg.vector_norm(x)",
        theirs=Outcome(0.0, "float32"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4142135e-30, "float32"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="torch-l2-bfloat16",
        framework="torch",
        data="torch.tensor([1e20, 1e20], dtype=torch.bfloat16)",
        theirs_call="torch.linalg.vector_norm(x)",
        theirs=Outcome(math.inf, "bfloat16"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4123288e20, "bfloat16"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="torch-sum-int8",
        framework="torch",
        data="torch.tensor([100, 100], dtype=torch.int8)",
        theirs_call="torch.sum(x)",
        theirs=Outcome(200, "int64"),
        ours_call="anyreduce.reduce_sum(x, keepdims=False)",
        ours=Outcome(-56, "int8"),
        why=_DTYPE,
    ),
    Divergence(
        id="torch-mean-int8",
        framework="torch",
        data="torch.tensor([-7, 0], dtype=torch.int8)",
        theirs_call="torch.mean(x)",
        theirs=Outcome(error="RuntimeError"),
        ours_call="anyreduce.reduce_mean(x, keepdims=False)",
        ours=Outcome(-3, "int8"),
        why=_MEAN,
    ),
    Divergence(
        id="torch-max-empty",
        framework="torch",
        data="torch.zeros(0)",
        theirs_call="torch.amax(x)",
        theirs=Outcome(error="RuntimeError"),
        ours_call="anyreduce.reduce_max(x, keepdims=False)",
        ours=Outcome(-math.inf, "float32"),
        why=_EMPTY,
    ),
    Divergence(
        id="torch-logsumexp-int64",
        framework="torch",
        data="torch.tensor([1, 2])",
        theirs_call="torch.logsumexp(x, 0)",
        theirs=Outcome(2.3132617, "float32"),
        ours_call="anyreduce.reduce_log_sum_exp(x, keepdims=False)",
        ours=Outcome(2, "int64"),
        why="The output dtype is the input dtype: integers are computed in float64 and "
        "truncated toward zero (ONNX before opset 28).",
    ),
    Divergence(
        id="jax-l2-float16",
        framework="jax",
        data="jnp.array([300, 400], dtype=jnp.float16)",
        theirs_call="jnp.linalg.norm(x)",
        theirs=Outcome(math.inf, "float16"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(500.0, "float16"),
        why=_L2_F16,
    ),
    Divergence(
        id="jax-l2-overflow",
        framework="jax",
        data="jnp.array([1e20, 1e20], dtype=jnp.float32)",
        theirs_call="jnp.linalg.norm(x)",
        theirs=Outcome(math.inf, "float32"),
        ours_call="anyreduce.reduce_l2(x, keepdims=False)",
        ours=Outcome(1.4142135e20, "float32"),
        why=_L2_RANGE,
    ),
    Divergence(
        id="jax-max-nan",
        framework="jax",
        data=_NAN_DATA,
        theirs_call="jnp.max(x)",
        theirs=Outcome(4095.0, "float32"),
        ours_call="anyreduce.reduce_max(x, keepdims=False)",
        ours=Outcome(math.nan, "float32"),
        why=_NAN,
    ),
    Divergence(
        id="jax-min-nan",
        framework="jax",
        data=_NAN_DATA,
        theirs_call="jnp.min(x)",
        theirs=Outcome(0.0, "float32"),
        ours_call="anyreduce.reduce_min(x, keepdims=False)",
        ours=Outcome(math.nan, "float32"),
        why=_NAN,
    ),
    Divergence(
        id="jax-sum-int8",
        framework="jax",
        data="jnp.array([100, 100], dtype=jnp.int8)",
        theirs_call="jnp.sum(x)",
        theirs=Outcome(200, "int32"),
        ours_call="anyreduce.reduce_sum(x, keepdims=False)",
        ours=Outcome(-56, "int8"),
        why=_DTYPE,
    ),
    Divergence(
        id="jax-mean-int8",
        framework="jax",
        data="jnp.array([-7, 0], dtype=jnp.int8)",
        theirs_call="jnp.mean(x)",
        theirs=Outcome(-3.5, "float32"),
        ours_call="anyreduce.reduce_mean(x, keepdims=False)",
        ours=Outcome(-3, "int8"),
        why=_MEAN,
    ),
    Divergence(
        id="jax-max-empty",
        framework="jax",
        data="jnp.zeros((0,), dtype=jnp.float32)",
        theirs_call="jnp.max(x)",
        theirs=Outcome(error="ValueError"),
        ours_call="anyreduce.reduce_max(x, keepdims=False)",
        ours=Outcome(-math.inf, "float32"),
        why=_EMPTY,
    ),
)


def _scope(framework: str) -> dict[str, Any]:
    scope: dict[str, Any] = {"np": np, "anyreduce": anyreduce}
    if framework == "torch":
        scope["torch"] = pytest.importorskip("torch")
    if framework == "jax":
        jax = pytest.importorskip("jax")
        scope["jax"] = jax
        scope["jnp"] = jax.numpy
    return scope


def _dtype_name(result: Any) -> str:
    return str(result.dtype).removeprefix("torch.")


def _check(call: str, scope: dict[str, Any], expected: Outcome) -> None:
    if expected.error:
        with pytest.raises(Exception) as info:  # noqa: PT011 - the type is checked by name
            eval(call, scope)
        assert type(info.value).__name__ == expected.error, info.value
        return
    result = eval(call, scope)
    assert _dtype_name(result) == expected.dtype
    assert tuple(result.shape) == ()
    value = float(np.asarray(result.float() if expected.dtype == "bfloat16" else result))
    assert expected.value is not None
    if math.isnan(expected.value):
        assert math.isnan(value)
    elif math.isinf(expected.value) or expected.value == 0:
        assert value == expected.value
    else:  # the table shows 8 significant digits
        assert value == pytest.approx(expected.value, rel=1e-7, abs=0)


def test_ids_are_unique() -> None:
    assert len({d.id for d in DIVERGENCES}) == len(DIVERGENCES)


@pytest.mark.parametrize("case", DIVERGENCES, ids=lambda d: d.id)
def test_divergence(case: Divergence) -> None:
    scope = _scope(case.framework)
    if case.framework == "jax":
        # These answers are JAX's defaults: 32-bit types unless x64 is enabled.
        with scope["jax"].enable_x64(False):
            scope["x"] = eval(case.data, scope)
            _check(case.theirs_call, scope, case.theirs)
            _check(case.ours_call, scope, case.ours)
        return
    scope["x"] = eval(case.data, scope)
    with np.errstate(all="ignore"):
        _check(case.theirs_call, scope, case.theirs)
    _check(case.ours_call, scope, case.ours)
