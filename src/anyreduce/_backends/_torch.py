"""PyTorch: its workarounds and accelerators."""

from __future__ import annotations

import functools
from typing import Any

import array_api_compat

from ._base import Accelerator, Profile
from ._numpy import _FLOATS, _GUARDED, guarded

__all__ = ["PROFILE", "eager"]

Namespace = Any
Array = Any


def recognises(xp: Namespace) -> bool:
    return bool(array_api_compat.is_torch_namespace(xp))


@functools.cache
def _carriers() -> dict[Any, Any]:
    # torch has no sum/prod/abs/max/min/compare kernels for uint16, uint32 and uint64
    # ("sum_cpu" not implemented for 'UInt32', torch 2.13; pytorch/pytorch#58734):
    # compute in a signed type that holds every value (uint16 -> int32, uint32 -> int64)
    # or every bit pattern (uint64 -> int64; the kernels map its order and value).
    import torch

    return {torch.uint16: torch.int32, torch.uint32: torch.int64, torch.uint64: torch.int64}


def _lift(x: Array) -> Array:
    carrier = _carriers().get(x.dtype)
    return x if carrier is None else x.to(carrier)


def _refuses(x: Array) -> str | None:
    # Nested and sparse tensors: their reductions are not those of the dense array.
    import torch

    if x.is_nested:
        return (
            "data is a nested tensor; reduce its components (data.unbind()) or a padded "
            "dense tensor (data.to_padded_tensor(padding))"
        )
    if x.layout != torch.strided:
        return f"data is a tensor of layout {x.layout}; pass data.to_dense()"
    return None


def eager(x: Array) -> bool:
    """A plain CPU tensor outside any compiler, tracer or ``torch.func`` transform.

    CUDA tensors are not: reading a value on the host would synchronise the device.
    """
    import torch

    return bool(
        type(x) is torch.Tensor
        and x.device.type == "cpu"
        and not torch.compiler.is_compiling()
        and not torch._C._functorch.is_functorch_wrapped_tensor(x)
    )


PROFILE = Profile(
    name="torch",
    recognises=recognises,
    lift=_lift,
    refuses=_refuses,
    eager=eager,
    accelerators=(
        Accelerator(
            name="careful-when-needed",
            ops=_GUARDED,
            dtypes=_FLOATS,
            covers="CPU tensors; the careful form only for data with a suspect slice",
            earned=(
                "float32 (4096, 8192) L2 over the last axis: with the scaled form always "
                "computed, 3 passes over the data; here 1 and a test on the result"
            ),
            exact=True,
            run=guarded,
        ),
    ),
)
