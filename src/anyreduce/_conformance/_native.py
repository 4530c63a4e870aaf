"""The frameworks' own expressions of each reduction: what a person porting a model calls.

Parity measures them against the exact result beside anyreduce and the runtimes, so that a
port from one framework to another shows where the frameworks' own functions disagree
(``np.linalg.norm`` of float16 ``[300, 400]`` is inf, ``torch.linalg.vector_norm`` 500).
Each framework is imported only when its expressions run, and only when installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["NATIVES", "NATIVE_LIBRARIES", "Native", "natives_for"]

Axes = tuple[int, ...]


@dataclass(frozen=True)
class Native:
    """One framework expression of one reduction.

    ``call(x, axes, keepdims)`` takes the data as an array of ``library`` (``"scipy"``
    takes NumPy data), the reduced axes (sorted, non-negative) and keepdims.
    """

    name: str  # the call, as a person writes it: "torch.linalg.vector_norm"
    op: str  # the anyreduce name of the reduction it expresses
    library: str  # the selectable name: "numpy", "torch", "jax" or "scipy"
    call: Callable[[Any, Axes, bool], Any]
    floats_only: bool = False  # the framework's function takes floating-point data only
    max_axes: int | None = None  # the most axes it reduces over in one call

    def available(self) -> bool:
        return importlib.util.find_spec(_MODULES[self.library]) is not None

    def refuses(self, dtype: str, axes: Axes) -> str:
        """Why this expression cannot be given the case, or ``""``."""
        if self.floats_only and not dtype.startswith(("float", "bfloat")):
            return f"takes floating-point data only, not {dtype}"
        if self.max_axes is not None and len(axes) > self.max_axes:
            return f"reduces over at most {self.max_axes} axes in one call"
        return ""


_MODULES = {"numpy": "numpy", "torch": "torch", "jax": "jax", "scipy": "scipy"}
NATIVE_LIBRARIES = tuple(_MODULES)


def _np() -> Any:
    import numpy

    return numpy


def _torch() -> Any:
    import torch

    return torch


def _jnp() -> Any:
    import jax.numpy

    return jax.numpy


def _numpy_natives() -> list[Native]:
    def n(name: str, op: str, call: Callable[[Any, Axes, bool], Any], **kw: Any) -> Native:
        return Native(name, op, "numpy", call, **kw)

    return [
        n("np.sum", "reduce_sum", lambda x, a, k: _np().sum(x, axis=a, keepdims=k)),
        n(
            "np.sum(np.square(x))",
            "reduce_sum_square",
            lambda x, a, k: _np().sum(_np().square(x), axis=a, keepdims=k),
        ),
        n(
            "np.linalg.vector_norm(ord=1)",
            "reduce_l1",
            lambda x, a, k: _np().linalg.vector_norm(x, ord=1, axis=a, keepdims=k),
            floats_only=True,
        ),
        n(
            "np.sum(np.abs(x))",
            "reduce_l1",
            lambda x, a, k: _np().sum(_np().abs(x), axis=a, keepdims=k),
        ),
        n(
            "np.linalg.norm",
            "reduce_l2",
            lambda x, a, k: _np().linalg.norm(x, axis=a, keepdims=k),
            floats_only=True,
            max_axes=2,  # two axes: the Frobenius norm, the same value
        ),
        n(
            "np.linalg.vector_norm",
            "reduce_l2",
            lambda x, a, k: _np().linalg.vector_norm(x, axis=a, keepdims=k),
            floats_only=True,
        ),
        n("np.mean", "reduce_mean", lambda x, a, k: _np().mean(x, axis=a, keepdims=k)),
        n("np.prod", "reduce_prod", lambda x, a, k: _np().prod(x, axis=a, keepdims=k)),
        n("np.max", "reduce_max", lambda x, a, k: _np().max(x, axis=a, keepdims=k)),
        n("np.min", "reduce_min", lambda x, a, k: _np().min(x, axis=a, keepdims=k)),
        n(
            "np.log(np.sum(x))",
            "reduce_log_sum",
            lambda x, a, k: _np().log(_np().sum(x, axis=a, keepdims=k)),
            floats_only=True,
        ),
        n(
            "np.logaddexp.reduce",
            "reduce_log_sum_exp",
            lambda x, a, k: _np().logaddexp.reduce(x, axis=a, keepdims=k),
            floats_only=True,
        ),
    ]


def _scipy_natives() -> list[Native]:
    def logsumexp(x: Any, a: Axes, k: bool) -> Any:
        special = importlib.import_module("scipy.special")  # optional: no stubs needed
        return special.logsumexp(x, axis=a, keepdims=k)

    return [
        Native(
            "scipy.special.logsumexp", "reduce_log_sum_exp", "scipy", logsumexp, floats_only=True
        )
    ]


def _torch_natives() -> list[Native]:
    def n(name: str, op: str, call: Callable[[Any, Axes, bool], Any], **kw: Any) -> Native:
        return Native(name, op, "torch", call, **kw)

    return [
        n("torch.sum", "reduce_sum", lambda x, a, k: _torch().sum(x, dim=a, keepdim=k)),
        n(
            "torch.sum(torch.square(x))",
            "reduce_sum_square",
            lambda x, a, k: _torch().sum(_torch().square(x), dim=a, keepdim=k),
        ),
        n(
            "torch.linalg.vector_norm(ord=1)",
            "reduce_l1",
            lambda x, a, k: _torch().linalg.vector_norm(x, ord=1, dim=a, keepdim=k),
            floats_only=True,
        ),
        n(
            "torch.linalg.vector_norm",
            "reduce_l2",
            lambda x, a, k: _torch().linalg.vector_norm(x, dim=a, keepdim=k),
            floats_only=True,
        ),
        n(
            "torch.norm",
            "reduce_l2",
            lambda x, a, k: _torch().norm(x, dim=a, keepdim=k),
            floats_only=True,
        ),
        n(
            "torch.mean",
            "reduce_mean",
            lambda x, a, k: _torch().mean(x, dim=a, keepdim=k),
            floats_only=True,
        ),
        n(
            "torch.prod",
            "reduce_prod",
            lambda x, a, k: _torch().prod(x, dim=a[0], keepdim=k) if a else _torch().prod(x),
            max_axes=1,
        ),
        n("torch.amax", "reduce_max", lambda x, a, k: _torch().amax(x, dim=a, keepdim=k)),
        n("torch.amin", "reduce_min", lambda x, a, k: _torch().amin(x, dim=a, keepdim=k)),
        n(
            "torch.log(torch.sum(x))",
            "reduce_log_sum",
            lambda x, a, k: _torch().log(_torch().sum(x, dim=a, keepdim=k)),
            floats_only=True,
        ),
        n(
            "torch.logsumexp",
            "reduce_log_sum_exp",
            lambda x, a, k: _torch().logsumexp(x, dim=a, keepdim=k),
            floats_only=True,
        ),
    ]


def _jax_natives() -> list[Native]:
    def n(name: str, op: str, call: Callable[[Any, Axes, bool], Any], **kw: Any) -> Native:
        return Native(name, op, "jax", call, **kw)

    def nn_logsumexp(x: Any, a: Axes, k: bool) -> Any:
        import jax.nn

        return jax.nn.logsumexp(x, axis=a, keepdims=k)

    def scipy_logsumexp(x: Any, a: Axes, k: bool) -> Any:
        import jax.scipy.special

        return jax.scipy.special.logsumexp(x, axis=a, keepdims=k)

    return [
        n("jnp.sum", "reduce_sum", lambda x, a, k: _jnp().sum(x, axis=a, keepdims=k)),
        n(
            "jnp.sum(jnp.square(x))",
            "reduce_sum_square",
            lambda x, a, k: _jnp().sum(_jnp().square(x), axis=a, keepdims=k),
        ),
        n(
            "jnp.linalg.vector_norm(ord=1)",
            "reduce_l1",
            lambda x, a, k: _jnp().linalg.vector_norm(x, ord=1, axis=a, keepdims=k),
            floats_only=True,
        ),
        n(
            "jnp.linalg.norm",
            "reduce_l2",
            lambda x, a, k: _jnp().linalg.norm(x, axis=a, keepdims=k),
            floats_only=True,
            max_axes=2,  # two axes: the Frobenius norm, the same value
        ),
        n(
            "jnp.linalg.vector_norm",
            "reduce_l2",
            lambda x, a, k: _jnp().linalg.vector_norm(x, axis=a, keepdims=k),
            floats_only=True,
        ),
        n("jnp.mean", "reduce_mean", lambda x, a, k: _jnp().mean(x, axis=a, keepdims=k)),
        n("jnp.prod", "reduce_prod", lambda x, a, k: _jnp().prod(x, axis=a, keepdims=k)),
        n("jnp.max", "reduce_max", lambda x, a, k: _jnp().max(x, axis=a, keepdims=k)),
        n("jnp.min", "reduce_min", lambda x, a, k: _jnp().min(x, axis=a, keepdims=k)),
        n(
            "jnp.log(jnp.sum(x))",
            "reduce_log_sum",
            lambda x, a, k: _jnp().log(_jnp().sum(x, axis=a, keepdims=k)),
            floats_only=True,
        ),
        n("jax.nn.logsumexp", "reduce_log_sum_exp", nn_logsumexp, floats_only=True),
        n(
            "jax.scipy.special.logsumexp",
            "reduce_log_sum_exp",
            scipy_logsumexp,
            floats_only=True,
        ),
    ]


NATIVES: tuple[Native, ...] = (
    *_numpy_natives(),
    *_scipy_natives(),
    *_torch_natives(),
    *_jax_natives(),
)


def natives_for(op: str, libraries: tuple[str, ...] | None = None) -> list[Native]:
    """The expressions of ``op`` (anyreduce's name) of ``libraries`` (default: all)."""
    return [
        native
        for native in NATIVES
        if native.op == op and (libraries is None or native.library in libraries)
    ]
