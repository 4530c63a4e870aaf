"""PyTorch: its workarounds and accelerators."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from collections.abc import Callable
from typing import Any

import array_api_compat

from .._agnostic._kernels import _SCALE, Term, l2_floor, plain_total, scaled_down
from .._lib import _dtypes
from .._lib._axes import reduced_shape
from .._lib._memo import library_key, memo
from . import _threads
from ._base import ALL_OPS, EXTREMES, Accelerator, Profile, namespace_for, run_kernel
from ._common import (
    PIECE,
    BareShim,
    FixedInfo,
    Shim,
    astype_rounding_once,
    every_axis_in_slabs,
    in_pieces,
    least_and_finite,
    log_sum_exp_in_place,
    may_round_twice,
    named,
    rounded_once,
    run_careful_later,
)
from ._numpy import (
    _FLOATS,
    _GUARDED,
    CAREFUL_PRODUCT_IN_PIECES,
    INTEGER_MEAN_IN_PIECES,
    WIDENED_ELEMENTS,
    ProductSlices,
    guarded,
    numpy_quiet,
)

__all__ = ["PROFILE", "eager"]

Namespace = Any
Array = Any


Axes = tuple[int, ...]

_NUMERIC = frozenset(
    {
        "bool",
        "int8",
        "uint8",
        "int16",
        "int32",
        "int64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
    }
)


def recognises(xp: Namespace) -> bool:
    return named(xp, "torch")


@memo()
def _carriers() -> dict[Any, Any]:
    # torch has no sum/prod/abs/max/min/compare kernels for uint16, uint32 and uint64
    # ("sum_cpu" not implemented for 'UInt32', torch 2.13; pytorch/pytorch#58734):
    # compute in a signed type that holds every value (uint16 -> int32, uint32 -> int64)
    # or every bit pattern (uint64 -> int64; the kernels map its order and value).
    import torch

    return {torch.uint16: torch.int32, torch.uint32: torch.int64, torch.uint64: torch.int64}


# The dtypes :func:`_carriers` lifts, by name.
_UNSIGNED_CARRIED = ("uint16", "uint32", "uint64")


def namespace_of(data: object) -> Namespace | None:
    """array-api-compat's torch namespace for a tensor, found without array-api-compat's
    cached type tests (``torch.compile`` warns about each ``lru_cache`` it traces, and a
    first call inside compilation looks the namespace up there)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(data, torch.Tensor):
        return None
    from array_api_compat import torch as xp

    return xp


def _lift(x: Array) -> Array:
    carrier = _carriers().get(x.dtype)
    return x if carrier is None else x.to(carrier)


def _refuses(x: Array) -> str | None:
    # Nested, sparse and masked tensors: their reductions are not those of the dense array.
    import torch

    if x.is_nested:
        return (
            "data is a nested tensor; reduce its components (data.unbind()) or a padded "
            "dense tensor (data.to_padded_tensor(padding))"
        )
    if x.layout != torch.strided:
        return f"data is a tensor of layout {x.layout}; pass data.to_dense()"
    if isinstance(x, torch.masked.MaskedTensor):
        # torch's own reductions of one honour the mask in some operators and fail in
        # others (torch 2.13); ours would take the masked positions' values.
        return (
            "data is a MaskedTensor, whose mask anyreduce would ignore; pass "
            "data.to_tensor(value) to give the masked positions a value"
        )
    return None


def eager(x: Array) -> bool:
    """A plain CPU or CUDA tensor outside any compiler, tracer or ``torch.func`` transform.

    On CUDA a host read is one synchronisation with the device, which the accelerators
    may make; not while the stream captures a CUDA graph (a synchronisation is an error
    there) or while ``torch.cuda.set_sync_debug_mode`` asks to be told of them.
    """
    import torch

    if not (
        type(x) is torch.Tensor
        and not torch.compiler.is_compiling()
        and not torch._C._functorch.is_functorch_wrapped_tensor(x)
    ):
        return False
    if x.is_cpu:  # not x.device.type, which makes a device object (0.3 us)
        return True
    return (
        x.is_cuda
        and torch.cuda.get_sync_debug_mode() == 0
        and not torch.cuda.is_current_stream_capturing()
    )


def _on_cpu(x: Array) -> bool:
    return bool(x.is_cpu)


# --- small data, in a few steps ------------------------------------------------------------

#: The most elements ``small-in-few-steps`` takes (256 KiB of float32): data whose
#: reduction costs less than the generic kernel's steps around it, and below the sizes
#: of the accelerators that follow (``careful-later`` takes Prod from 2**16 elements,
#: the others from 2**17 or more).
SMALL_ELEMENTS = 2**16
#: The most elements of float16 and bfloat16 it takes: up to ``widened-through-numpy``'s
#: smallest, where nothing else covers their L2, SumSquare and LogSumExp. Their steps
#: through float64 temporaries cost more than the steps around them up to there.
SMALL_HALF_ELEMENTS = 2 * WIDENED_ELEMENTS - 1


@memo()
def _l2_floor(dtype: Any) -> float:
    """The generic L2's floor (:func:`l2_floor`), below which a total is suspect."""
    import torch

    return l2_floor(torch.finfo(dtype))


#: Results of at most this many values are tested in Python, as NumPy's are: ``tolist``
#: and the built-in ``sum`` and ``min`` of 6 values take 0.8-1.2 us, of 32 values 1.2-1.9,
#: against 1.8-2.1 for ``t.sum().item()`` or ``torch.aminmax`` and its two ``item``; of
#: 64 values, 1.9-2.2 against 1.8-2.2, and more cost more.
FEW_VALUES = 32


def _finite(t: Array) -> bool:
    """Whether every value of ``t`` is finite (their sum is: a sum that overflows says no,
    which only sends the call to the generic kernel)."""
    if t.numel() <= FEW_VALUES:
        return math.isfinite(sum(t.flatten().tolist()))
    return math.isfinite(t.sum().item())


def _least_and_finite(t: Array, *, magnitude: bool = False) -> tuple[float, bool]:
    """The smallest value of ``t`` (with ``magnitude``, of its absolute values; any value
    where one is NaN), and whether every value is finite."""
    import torch

    if t.numel() <= FEW_VALUES:
        return least_and_finite(t.flatten().tolist(), magnitude=magnitude)
    smallest, largest = torch.aminmax(torch.abs(t) if magnitude else t)
    return smallest.item(), largest.item() < math.inf  # both NaN where one is


def _widened(x: Array, acc: Any) -> Array:
    """``x`` in accumulator ``acc``: itself where it is already (``x.to`` of its own dtype
    costs 0.9 us a call, a fifth of a small call's overhead). Dtypes are compared with
    ``is`` here and below: PyTorch's are singletons, and ``==`` costs 0.1 us."""
    return x if x.dtype is acc else x.to(acc)


def _plain(total: Array, x: Array) -> bool:
    """Whether the generic kernel takes sum ``total`` of ``x`` as it is: where it is
    finite, or always where it was widened (float16 and bfloat16 in float64, whose sums
    cannot overflow: the kernel has no careful form for them)."""
    return total.dtype is not x.dtype or _finite(total)


def _small_sum(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    total = torch.sum(x, axes, dtype=acc, keepdim=keepdims)
    return total if _plain(total, x) else None


def _small_mean(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    # torch.mean on the CPU is the sum divided by the count in place: the kernel's two
    # calls in one, and the same gradient (float32 (3, 2, 2): 12.8 -> 10.9 us a call).
    mean = torch.mean(x, axes, dtype=acc, keepdim=keepdims)
    return mean if _plain(mean, x) else None


def _fresh(y: Array, x: Array) -> bool:
    """Whether ``y``, ``x`` widened, is a copy of its own that no gradient is taken
    through: its steps may overwrite it. One float64 temporary in place of two: half the
    memory, and float16 (256, 512) L2 84-145 -> 75 us a call (before the dispatch kept
    freed temporaries, two of 1 MiB were faulted in anew each call: 700-750 us)."""
    return y is not x and not y.requires_grad


def _squares(torch: Any, x: Array, acc: Any) -> Array:
    """The squares of ``x`` in ``acc``: a fresh widened copy squared in place."""
    y = _widened(x, acc)
    return y.mul_(y) if _fresh(y, x) else torch.multiply(y, y)


def _small_sum_square(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    return torch.sum(_squares(torch, x, acc), axes, dtype=acc, keepdim=keepdims)


def _small_l1(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    return torch.sum(torch.abs(x), axes, dtype=acc, keepdim=keepdims)


def _small_l2(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    total = torch.sum(_squares(torch, x, acc), axes, dtype=acc, keepdim=keepdims)
    # Neither infinite nor below the floor (nor 0): the generic kernel's plain root.
    least, finite = _least_and_finite(total)
    if least >= _l2_floor(acc) and finite:
        return torch.sqrt(total)
    return None


def _small_prod(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    product = _eager_shim(namespace_for(x)).prod(x, axis=axes, keepdims=keepdims, dtype=acc)
    # Finite and not 0: the generic kernel's plain product.
    least, finite = _least_and_finite(product, magnitude=True)
    return product if least > 0 and finite else None


def _small_max(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    return torch.amax(x, axes, keepdim=keepdims)


def _small_min(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array:
    return torch.amin(x, axes, keepdim=keepdims)


def _small_log_sum(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    total = torch.sum(x, axes, dtype=acc, keepdim=keepdims)
    return torch.log(total) if _plain(total, x) else None


def _small_log_sum_exp(torch: Any, x: Array, axes: Axes, keepdims: bool, acc: Any) -> Array | None:
    y = _widened(x, acc)
    shift = torch.amax(y, axes, keepdim=True)
    if not _finite(shift):
        return None
    # The largest term is exp(0) = 1: the total is at least 1, never 0.
    terms = y.sub_(shift) if _fresh(y, x) else y - shift
    if terms.requires_grad:
        terms = torch.exp(terms)
    else:
        torch.exp(terms, out=terms)
    total = torch.sum(terms, axes, dtype=acc, keepdim=True)
    result = torch.log(total) + shift
    return result if keepdims else torch.squeeze(result, axes)


_SMALL_KERNELS: dict[str, Callable[[Any, Array, Axes, bool, Any], Array | None]] = {
    "reduce_sum": _small_sum,
    "reduce_mean": _small_mean,
    "reduce_sum_square": _small_sum_square,
    "reduce_l1": _small_l1,
    "reduce_l2": _small_l2,
    "reduce_prod": _small_prod,
    "reduce_max": _small_max,
    "reduce_min": _small_min,
    "reduce_log_sum": _small_log_sum,
    "reduce_log_sum_exp": _small_log_sum_exp,
}


def _small(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """The generic kernel's PyTorch calls on clean results, and nothing around them: a
    result the kernel would take the careful form of (an infinity, NaN, a product or an
    L2 total of 0 or near it) declines, and the generic kernel takes the call. The calls
    that remain make the kernel's autograd graph: the same gradients, to the bit."""
    import torch

    dtype = x.dtype
    full = dtype is torch.float32 or dtype is torch.float64
    if x.numel() > (SMALL_ELEMENTS if full else SMALL_HALF_ELEMENTS) or not axes:
        return None
    if not _on_cpu(x):
        return None
    if full:
        return _SMALL_KERNELS[op](torch, x, axes, keepdims, dtype)
    # float16 and bfloat16 add up in float64 (compute_float), and the kernel rounds back
    # once (rounded_once: torch's own conversion rounds twice).
    result = _SMALL_KERNELS[op](torch, x, axes, keepdims, torch.float64)
    if result is None or result.dtype is dtype:
        return result
    if result.numel() <= FEW_VALUES and not may_round_twice(result.reshape(-1).tolist()):
        return result.to(dtype)  # the same values as rounded_once's
    return rounded_once(namespace_for(x), result, dtype)


_SMALL = Accelerator(
    name="small-in-few-steps",
    ops=ALL_OPS,
    dtypes=_FLOATS,
    covers=(
        "CPU tensors of at most 2**16 elements, any layout and axes, autograd included "
        "(the kernel's own calls: the same gradients); float16 and bfloat16 of fewer than "
        "2**18, added up in float64 as the kernel does (a widened copy without autograd "
        "squared or exponentiated in place); results the generic kernel takes as they "
        "are (finite; L2 totals above its floor, products not 0)"
    ),
    earned=(
        "float32 (3, 2, 2) over axis 1, a call, separate processes: Sum 17.3-18.6 -> "
        "10.4-11.2 us, L2 53.0-56.3 -> 13.6-15.9, Prod 26.8-29.4 -> 12.6-13.5, LogSumExp "
        "47.5-51.6 -> 18.5-20.6 (torch.sum 2.1); (64, 256) over the last axis: L2 "
        "55.4-58.2 -> 15.4-16.3, LogSumExp 62.1-81.7 -> 36.0-45.9; (3, 2, 2) requiring "
        "grad, the call and its backward: L2 157-229 -> 77-81 us, LogSumExp 178-198 -> "
        "108-125 (torch.sum's 29-34); from 2**14 to 2**16 elements, (128, 256) and "
        "(256, 256) over the last axis: L2 67-79 -> 24-51 us, Prod 29-41 -> 14-30, Sum "
        "19-25 -> 11-17; float16 and bfloat16, by turns with it left out: (3, 2, 2) L2 "
        "31-35 -> 19-21 us, Prod 29-32 -> 18, LogSumExp 44-47 -> 25-26, Sum 14-16 -> 13; "
        "(64, 256) over the last axis L2 41-52 -> 26-35, LogSumExp 86-95 -> 61-71; by "
        "turns with the code before (2**16 and two temporaries): float16 (256, 512) L2 "
        "967 -> 139 us, LogSumExp 1229 -> 388; bfloat16 Prod 129 -> 37, L2 77 -> 49; "
        "with the dispatch's keep_freed_pieces, by turns with the 2**16 limit: float16 "
        "(256, 512) L2 103 -> 75, LogSumExp 241 -> 198, bfloat16 Prod 122 -> 35; Mean "
        "as torch.mean (3, 2, 2) 12.8 -> 10.9 us"
    ),
    exact=True,
    run=_small,
)


def _in_slabs(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    if not _on_cpu(x):
        return None
    import torch

    def slab(part: Array) -> Array:
        from . import reduce

        return reduce(op, part, axes, keepdims, array_api_compat.array_namespace(part))

    return _threads.split(x, axes, keepdims, slab, concat=torch.cat, threaded=False)


# The operators whose element-wise step makes a temporary of the data's size, that slabs
# keep fast beside other work: LogSumExp's five kernels a slab took 2-3x torch.logsumexp
# with every core busy (441 against 219 ms without slabs over the last axis, same run).
_SLABBED = frozenset({"reduce_l1", "reduce_l2", "reduce_sum_square"})

_SLABS = Accelerator(
    name="slabs",
    ops=_SLABBED,
    dtypes=_NUMERIC,
    covers=(
        "CPU tensors of at least 2**21 elements with a kept axis long enough for two slabs "
        "of about 2**20 elements; PyTorch threads each slab's kernels itself"
    ),
    earned=(
        "float32 (4096, 8192) over the last axis, L2 416 -> 37 ms, SumSquare 106 -> 19 ms "
        "(busy machine, same run): the temporary is a slab's size, not 128 MB that the "
        "allocator returns and page-faults anew each call"
    ),
    exact=False,
    run=_in_slabs,
    min_elements=_threads.LARGE,
)


def _host(x: Array) -> Any:
    """The NumPy array on CPU tensor ``x``'s memory; bfloat16 as ml_dtypes' bfloat16, or
    None where ml_dtypes is not installed."""
    import torch

    if x.dtype != torch.bfloat16:
        return x.numpy()
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes comes with jax and the test extra
        return None
    return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def _hostable(x: Array) -> bool:
    """Whether :func:`_host` can view ``x``'s memory (told by the dtype alone)."""
    import torch

    return x.dtype != torch.bfloat16 or importlib.util.find_spec("ml_dtypes") is not None


def _tensor(a: Any) -> Array:
    """NumPy result ``a`` as a tensor on its memory (ml_dtypes' bfloat16 as bfloat16)."""
    import numpy as np
    import torch

    a = np.asarray(a)
    if _dtypes.is_extension_bfloat16(a.dtype):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _through_numpy(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile, smallest: int = _threads.LARGE
) -> Array | None:
    """The NumPy profile's reduction of the tensor's memory, as a tensor again.

    NumPy's slabs run on its own pool threads, which do not wait for each other between
    slabs as PyTorch's parallel regions do when another process holds a core; and NumPy
    widens float16 in its loops, where PyTorch 2.13 converts a large tensor in full first.
    """
    # Large tensors only (``smallest`` elements), where NumPy's slabs pay; smaller ones
    # keep PyTorch's own order of additions, so that eager results equal compiled ones bit
    # for bit.
    if x.requires_grad or x.numel() < smallest or not _on_cpu(x):
        return None
    from . import reduce

    data = _host(x)
    if data is None:
        return None
    return _tensor(reduce(op, data, axes, keepdims, array_api_compat.array_namespace(data)))


# PyTorch sums float16 and bfloat16 with dtype=float64 by converting the whole tensor to
# float64 first (torch 2.13): 400% of the input.
def _half_through_numpy(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    import torch

    if op == "reduce_log_sum" and x.dtype == torch.bfloat16:
        # NumPy adds bfloat16's float32 carriers in another order: a slice of values up
        # to 3e38 that cancel gives a sum of another sign near zero, log's NaN where the
        # kernel gives -inf (the exact sum, -190, gives NaN), beyond what the accelerator
        # test accepts. log-sum-in-slabs takes it.
        return None
    return _through_numpy(op, x, axes, keepdims, profile)


_HALF_THROUGH_NUMPY = Accelerator(
    name="half-through-numpy",
    ops=ALL_OPS - EXTREMES,
    dtypes=frozenset({"float16", "bfloat16"}),
    covers=(
        "CPU tensors of at least 2**21 elements that do not require grad; the NumPy "
        "profile on the same memory (bfloat16 where ml_dtypes is installed, LogSum of "
        "bfloat16 not)"
    ),
    earned=(
        "float16 (4096, 8192) over the last axis, idle: Sum 106 -> 21 ms, L2 190 -> 37, "
        "LogSumExp 299 -> 62; every core busy: Sum 182 -> 47, LogSumExp 565 -> 140 "
        "(float32 slabs were faster idle but 1.4-3x slower busy, and were dropped). "
        "bfloat16 (4096, 8192) over the last, first and every axis, two threads: Sum and "
        "Mean 400% of the input -> 6.5-7.1%, 124-154 -> 14-43 ms; Prod 403% -> 1.9-6.7%, "
        "557-1000 -> 739-1084 ms; L1 15.7% -> 6.5-6.7%, 16-55 -> 20-97 ms"
    ),
    exact=False,
    run=_half_through_numpy,
    min_elements=_threads.LARGE,
)

# A slab of bfloat16 widened into float64 holds 4x its own bytes: 2**19 elements (4 MiB)
# beside the 64 MiB of (4096, 8192) is 6.3% of the input.
_HALF_SLAB = _threads.SLAB_ELEMENTS // 2


def _sums_in_slabs(
    y: Array, axes: Axes, keepdims: bool, dtype: Any, scale: int = 0
) -> Array | None:
    """PyTorch's sums of ``y * 2**-scale`` over ``axes`` in ``dtype``, a slab of 2**19
    elements at a time: slabs of kept positions, joined, or over every axis flat slabs,
    added. None where the data are not split."""
    import torch

    def terms(part: Array) -> Array:
        return part * 2.0**-scale if scale else part

    def sums(part: Array) -> Array:
        return torch.sum(terms(part), dim=axes, keepdim=keepdims, dtype=dtype)

    if len(axes) < y.ndim:
        return _threads.split(
            y, axes, keepdims, sums, concat=torch.cat, threaded=False, elements=_HALF_SLAB
        )

    def total(part: Array) -> Array:
        return torch.sum(terms(part), dtype=dtype)

    parts = _threads.flat_slabs(y, total, threaded=False, elements=_HALF_SLAB)
    if parts is None:
        return None
    whole = torch.sum(torch.stack(parts))
    return whole.reshape((1,) * y.ndim) if keepdims else whole


def _log_sum_in_slabs(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """The generic LogSum of a bfloat16 CPU tensor, given its plain float64 total taken a
    slab at a time (:func:`_sums_in_slabs`); None where the data are not split."""
    if x.requires_grad or not _on_cpu(x):
        return None
    import torch

    sums = _sums_in_slabs(x, axes, keepdims, torch.float64)
    if sums is None:
        return None

    def total(
        xp: Namespace, term: Term | None, y: Array, over: Axes, keep: bool, dtype: Any
    ) -> Array:
        # The kernel's plain total of the data; any other sum is its own.
        ours = term is None and y is x and over == axes and keep == keepdims
        if ours and dtype == torch.float64:
            return sums
        return plain_total(xp, term, y, over, keep, dtype)

    xp = namespace_for(x)
    return run_kernel(profile, xp, op, x, axes, keepdims, select=profile.select, total=total)


_LOG_SUM_IN_SLABS = Accelerator(
    name="log-sum-in-slabs",
    ops=frozenset({"reduce_log_sum"}),
    dtypes=frozenset({"bfloat16"}),
    covers=(
        "CPU tensors of at least 2**21 elements that do not require grad, with a kept axis "
        "long enough for two slabs or C-ordered over every axis; the generic kernel given "
        "its plain float64 total, summed in slabs of 2**19 elements taken in turn "
        "(PyTorch threads each slab's sum)"
    ),
    earned=(
        "bfloat16 (4096, 8192) over the last, first and every axis, two threads: 400% of "
        "the input -> 6.3%, 70-92 -> 31-47 ms idle, 138-206 -> 68-122 ms with every core "
        "busy (the generic kernel's steps on each slab instead: 834-907 ms busy); the same "
        "values bit for bit on cancelling data of +-3e38"
    ),
    exact=False,
    run=_log_sum_in_slabs,
    min_elements=_threads.LARGE,
)


def _careful_sums_in_slabs(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """The generic Sum, Mean or LogSum of a CPU tensor, the careful form only where some
    total is not finite, its scaled terms summed a slab at a time
    (:func:`_sums_in_slabs`)."""
    if x.requires_grad or x.numel() < _threads.LARGE or not _on_cpu(x):
        return None

    def total(
        xp: Namespace, term: Term | None, y: Array, over: Axes, keep: bool, dtype: Any
    ) -> Array:
        if term is scaled_down and over:
            found = _sums_in_slabs(y, over, keep, dtype, scale=_SCALE)
            if found is not None:
                return found
        return plain_total(xp, term, y, over, keep, dtype)

    return run_careful_later(profile, op, x, axes, keepdims, total)


_CAREFUL_SUMS_IN_SLABS = Accelerator(
    name="careful-sums-in-slabs",
    ops=frozenset({"reduce_sum", "reduce_mean", "reduce_log_sum"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "CPU tensors of at least 2**21 elements that do not require grad: the generic "
        "kernel with the careful form only where some total is not finite (a NaN or an "
        "infinity in the data, or partial sums that overflow), its terms x * 2**-64 summed "
        "in slabs of 2**19 elements taken in turn (PyTorch threads each slab's sum), with "
        "a kept axis long enough for two slabs or C-ordered over every axis; over trailing "
        "axes or the first axis, a few suspect slices (a 16th at most) computed again alone "
        "(``CarefulLater``)"
    ),
    earned=(
        "float32 (4096, 8192) holding one NaN, over the last, first and every axis, two "
        "threads, by turns: 100% of the input in the scaled terms -> 1.6%; Sum and Mean "
        "48-67 -> 18-45 ms idle (4.3-10.8 ms without the NaN, unchanged), 103-148 -> "
        "46-115 ms beside two spinning processes; one NaN row or column, last and first "
        "axis: 25-60 -> 5.6-10.0 ms with the row computed alone"
    ),
    exact=False,
    run=_careful_sums_in_slabs,
    min_elements=_threads.LARGE,
)

_TEMPORARIES_THROUGH_NUMPY = Accelerator(
    name="temporaries-through-numpy",
    # The operators whose element-wise step makes a temporary of the data's size.
    ops=_SLABBED | {"reduce_log_sum_exp"},
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "CPU tensors of at least 2**21 elements that do not require grad; the NumPy "
        "profile (threads, slabs, LogSumExp in place) on the same memory"
    ),
    earned=(
        "float32 (4096, 8192), every core busy (same run): L1 over the last axis 110 -> "
        "24 ms (vector_norm 32 ms), SumSquare 238 -> 26, LogSumExp 170 -> 55 ms "
        "(torch.logsumexp 150 ms) with 6.3% extra memory instead of 100%; PyTorch's slabs "
        "wait at each parallel region for a descheduled thread"
    ),
    exact=False,
    run=_through_numpy,
    min_elements=_threads.LARGE,
)


def _widened_through_numpy(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    if op == "reduce_sum_square" and not x.is_floating_point():
        return None  # integer squares wrap in the integer type: nothing is widened
    return _through_numpy(op, x, axes, keepdims, profile, smallest=2 * WIDENED_ELEMENTS)


_WIDENED_THROUGH_NUMPY = Accelerator(
    name="widened-through-numpy",
    # The operators that widen the data into float64: integer L2 and LogSumExp, float16
    # SumSquare, L2 and LogSumExp.
    ops=frozenset({"reduce_l2", "reduce_log_sum_exp", "reduce_sum_square"}),
    dtypes=frozenset({"float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64"}),
    covers=(
        "CPU tensors of at least 2**18 elements (float16 from 2**21: half-through-numpy) "
        "that do not require grad; the NumPy profile (slabs of float64 temporaries, pieces "
        "over every axis) on the same memory (bfloat16 where ml_dtypes is installed). The "
        "float64 sums are added in another order: a truncated result can differ by one "
        "where the float64 value lies within its rounding of an integer (int8 and int16 "
        "L2: exact sums, the same result)"
    ),
    earned=(
        "int8 (4096, 8192): LogSumExp held 24x the input in float64 temporaries, L2 over "
        "every axis 16x; through NumPy under 0.1x. (1024, 1024): int8 L2 16x, LogSumExp "
        "24x, float16 L2 and SumSquare 8x, LogSumExp 12x; through NumPy one slab of 1 MiB. "
        "int8 L2 over the last axis 9.5 -> 1.4 ms, LogSumExp 12-16 ms either way (int32 "
        "over every axis 8.6 -> 12.3 ms). bfloat16 (4096, 8192), through ml_dtypes: "
        "LogSumExp 1200% -> 6.3-6.8%, 350-400 -> 110-160 ms; L2 and SumSquare 25% -> 6.3-6.8%"
    ),
    exact=False,
    run=_widened_through_numpy,
    min_elements=2 * WIDENED_ELEMENTS,
)


def _through_numpy_from_two_slabs(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """:func:`_through_numpy` of tensors NumPy splits into slabs widened alone."""
    return _through_numpy(op, x, axes, keepdims, profile, smallest=2 * WIDENED_ELEMENTS)


_UNSIGNED_THROUGH_NUMPY = Accelerator(
    name="unsigned-through-numpy",
    ops=ALL_OPS,
    dtypes=frozenset(_UNSIGNED_CARRIED),
    covers=(
        "CPU tensors of at least 2**18 elements: the NumPy profile, which has kernels for "
        "these types, on the same memory (PyTorch's generic kernel lifts the tensor into a "
        "wider signed type first). Integer results bit for bit; L2, LogSumExp and LogSum "
        "add their float64 terms in another order, and uint64 values of 2**63 and more "
        "are rounded to float64 once, not twice: a truncated result can differ by one"
    ),
    earned=(
        "(2048, 4096) over the last axis, lifted: uint16 Sum 200% of the input and 37 ms, "
        "L2 1000% and 219 ms, LogSumExp 1400% and 360 ms; uint64 Max 300% and 246 ms, L2 "
        "413% and 421 ms"
    ),
    exact=False,
    run=_through_numpy_from_two_slabs,
    min_elements=2 * WIDENED_ELEMENTS,
)


# The exact mean of integers sums them in int64, and PyTorch sums a narrower tensor with
# dtype=int64 by converting it whole first (torch 2.13).
_NARROW_INTEGER_MEAN_THROUGH_NUMPY = Accelerator(
    name="narrow-integer-mean-through-numpy",
    ops=frozenset({"reduce_mean"}),
    dtypes=frozenset({"int8", "uint8", "int16", "int32"}),
    covers=(
        "CPU tensors of at least 2**18 elements: the NumPy profile, whose sums take the "
        "data into int64 a buffer at a time, on the same memory; the same exact mean"
    ),
    earned=(
        "(4096, 8192) over the last, first and every axis, two threads: int32 200% of the "
        "input -> 0.1%, 145-159 -> 10-21 ms; int8 800% -> 0.2-0.5%, 131-154 -> 10-18 ms"
    ),
    exact=True,
    run=_through_numpy_from_two_slabs,
    min_elements=2 * WIDENED_ELEMENTS,
)


def _log_sum_exp(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    if x.requires_grad or not _on_cpu(x):
        return None
    return log_sum_exp_in_place(x, axes, keepdims, profile)


_LOG_SUM_EXP_IN_PLACE = Accelerator(
    name="log-sum-exp-in-place",
    ops=frozenset({"reduce_log_sum_exp"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "CPU tensors that do not require grad (from 2**21 elements: "
        "temporaries-through-numpy); the generic kernel's steps with exp(x - shift) "
        "written over x - shift"
    ),
    earned=(
        "float32 (1024, 1024), (1024, 2047) and (512, 512), last, first and every axis: "
        "200-202% of the input in temporaries -> 100-102%, 1.0-2.3 -> 1.1-1.8 ms on "
        "(1024, 1024), bit for bit"
    ),
    exact=True,
    run=_log_sum_exp,
)


def _every_axis(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    if not _on_cpu(x):
        return None
    return every_axis_in_slabs(op, x, axes, keepdims, threaded=False)


_EVERY_AXIS = Accelerator(
    name="every-axis-in-slabs",
    ops=_SLABBED,
    dtypes=_NUMERIC - {"bool"},
    covers=(
        "contiguous CPU tensors of at least 2**21 elements reduced over every axis: slabs of "
        "2**20 elements of the flattened data, taken in turn (PyTorch threads each slab's "
        "kernels), merged by the operator that composes (a sum of L1 or SumSquare "
        "partials, an L2 of L2s; integers: L1 and SumSquare only)"
    ),
    earned=(
        "float32 (4096, 8192), every axis: L1 13.4 -> 11.9 ms, SumSquare 12.7 -> 11.4, "
        "L2 190 -> 12.4 ms, and the temporary the data's size -> a slab's (idle, same run); "
        "int8 and int32 L1 and SumSquare: 100% extra memory"
    ),
    exact=False,
    run=_every_axis,
    min_elements=_threads.LARGE,
)


def _fused_norm(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """L1, L2 or SumSquare of a CUDA tensor in one ``torch.linalg.vector_norm`` kernel,
    accumulated in the dtype the policy gives.

    A float32 or float64 L2 whose sum of squares may have left the range of its
    accumulator (the generic kernel's suspect slices) is declined. SumSquare is the square
    of the L2, without a synchronisation: the root and the square add 1.5 eps to the sum's
    error, and a sum that underflowed did so in the generic kernel's squares too. The
    square of a correctly rounded root of a finite sum is finite; a root one ulp high
    (a device's approximate square root) may square past the largest number, which is
    then returned.
    """
    if x.device.type != "cuda" or x.requires_grad or not axes:
        return None
    import torch

    xp = namespace_for(x)
    acc = _dtypes.compute_float(xp, x.dtype)
    order = 1 if op == "reduce_l1" else 2
    r = torch.linalg.vector_norm(x, order, dim=axes, keepdim=keepdims, dtype=acc)
    if op == "reduce_sum_square":
        square = r * r
        largest = torch.finfo(acc).max
        r = torch.where(torch.isinf(square) & torch.isfinite(r), largest, square)
    elif order == 2 and acc == x.dtype:
        # The generic kernel's test, total == inf or total < floor, on the root; the
        # bound is doubled so that the root's rounding cannot hide a suspect slice.
        floor = 2.0 * math.sqrt(l2_floor(torch.finfo(acc)))
        if bool(torch.any(torch.isinf(r) | (r < floor))):
            return None
    return r if r.dtype is x.dtype else rounded_once(xp, r, x.dtype)


_FUSED_NORMS = Accelerator(
    name="fused-norms-on-cuda",
    ops=frozenset({"reduce_l1", "reduce_l2", "reduce_sum_square"}),
    dtypes=_FLOATS,
    covers=(
        "CUDA tensors that do not require grad; L2 declines where a slice's sum of squares "
        "overflows or nears the smallest normal number (one synchronisation); SumSquare is "
        "the square of the L2 (no synchronisation)"
    ),
    earned=(
        "H200, float32 (16384, 32768) over the last axis: L1 1.50 -> 0.48 ms, L2 6.77 -> "
        "0.53 ms (torch.sum 0.48 ms, same run): the generic L1 writes |x| first, and its L2 "
        "computes the float64 form for every slice; SumSquare: H100, same shape, 2.12 -> "
        "0.75 ms (torch.sum 0.69), where the generic kernel writes the square first"
    ),
    exact=False,
    run=_fused_norm,
)


# Blocks whose sums of squares ``vector_norm`` takes: its loop over a contiguous last axis
# keeps one sum per vector lane and adds the lanes in turn at the end (torch 2.13, 8 lanes
# of float32 with AVX2: bit for bit), so each lane adds 16 squares in a row, as NumPy's
# pairwise sum adds 16 terms in a row in each of its 8 accumulators.
_NORM_BLOCK = 128


def _trailing_run(x: Array, axes: Axes) -> int | None:
    """The number of elements in a slice if ``axes`` are the tensor's trailing axes and
    each slice is one contiguous run of memory, else None."""
    if not axes or tuple(sorted(axes)) != tuple(range(x.ndim - len(axes), x.ndim)):
        return None
    run = 1
    for a in reversed(range(x.ndim - len(axes), x.ndim)):
        if x.shape[a] != 1 and x.stride(a) != run:
            return None
        run *= x.shape[a]
    return run


def _blocked_squares(x: Array, axes: Axes, run: int) -> Any:
    """The sums of squares of the slices over ``axes``, each a run of ``run`` elements,
    as a float64 ndarray: each block's sum taken by ``torch.linalg.vector_norm`` (one
    fused pass over the data, no temporary) as its root, and the roots squared and added
    in float64 by NumPy on one thread. A block's root squared again is its sum within
    1.5 eps; a block whose sum overflowed is inf, and so is its slice's total."""
    import numpy as np
    import torch

    lead = tuple(x.shape[: x.ndim - len(axes)])
    rows = x.reshape((*lead, run))  # a view: the slices are contiguous runs
    whole = run - run % _NORM_BLOCK
    roots = []
    if whole:
        blocks = rows[..., :whole].view((*lead, whole // _NORM_BLOCK, _NORM_BLOCK))
        roots.append(torch.linalg.vector_norm(blocks, dim=-1))
    if whole != run:
        roots.append(torch.linalg.vector_norm(rows[..., whole:], dim=-1, keepdim=True))
    sums = [np.square(r.numpy(), dtype=np.float64).sum(axis=-1) for r in roots]
    return np.asarray(sums[0] + sums[1] if len(sums) == 2 else sums[0])


def _blocked_norm(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    """The L2 as the root of :func:`_blocked_squares`, rounded once.

    Data with a slice whose sum of squares overflowed or underflowed (the generic
    kernel's test, on the float64 sums) are declined before any careful form is paid
    for: NumPy takes its careful form in the same pass as its plain sums, where the
    kernel here would widen all the data. A sum of 0 is a slice of zeros, or one whose
    squares all underflowed: the slices' largest and smallest values, taken as the
    kernel takes them (without a temporary), tell the two apart."""
    if x.requires_grad or x.numel() < _threads.LARGE or not _on_cpu(x):
        return None
    run = _trailing_run(x, axes)
    if run is None:
        return None
    import numpy as np
    import torch

    narrow = np.float32 if x.dtype == torch.float32 else np.float64
    floor = l2_floor(np.finfo(narrow))
    with numpy_quiet():
        squares = _blocked_squares(x, axes, run)
        zero = squares == 0
        out_of_range = np.isinf(squares) | (squares < floor)
        if (out_of_range & ~zero).any():
            return None
        if zero.any():
            rows = x.reshape((*squares.shape, run))
            top, bottom = torch.amax(rows, dim=-1).numpy(), torch.amin(rows, dim=-1).numpy()
            if (zero & ((top != 0) | (bottom != 0))).any():
                return None
        root = torch.from_numpy(np.asarray(np.sqrt(squares).astype(narrow)))
        return root.reshape(reduced_shape(tuple(x.shape), axes, keepdims))


_BLOCKED_NORM = Accelerator(
    name="blocked-norm",
    ops=frozenset({"reduce_l2"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "CPU tensors of at least 2**21 elements that do not require grad, reduced over "
        "trailing axes whose slices are contiguous (every axis of a contiguous tensor), "
        "and whose sums of squares neither overflow nor underflow: vector_norm of blocks "
        "of 128 elements, the blocks' squares added in float64"
    ),
    earned=(
        "float32 (4096, 8192), anyreduce bench with the code before it by turns, twice: "
        "idle, last axis 16.4-18.5 -> 7.3-7.5 ms (2.8-3.1x -> 1.28-1.39x vector_norm), "
        "every axis 13.9-15.4 -> 6.9-8.6 ms; beside two spinning processes 2.02-2.04x -> "
        "1.17-1.26x vector_norm over the last axis, 1.52-1.53x -> 0.86-1.29x over every "
        "axis: one pass over the data and no temporary of its size"
    ),
    exact=False,
    run=_blocked_norm,
    min_elements=_threads.LARGE,
)


def _parts_through_numpy(
    xp: Namespace,
    x: Array,
    axes: Axes,
    partial: Any,
    merge: Any,
    empty: tuple[float, ...],
    dtype: Any,
) -> tuple[Array, ...]:
    """``Context.parts`` for a CPU tensor that does not require grad: the statistics taken
    by the NumPy profile's pieces on the tensor's memory, as tensors again."""
    import numpy as np
    import torch

    from ._numpy import PROFILE as NUMPY

    data = _host(x)
    nxp = NUMPY.shim(array_api_compat.array_namespace(data))
    with NUMPY.quiet():
        parts = in_pieces(nxp, data, axes, partial, merge, empty, None)
    return tuple(torch.from_numpy(np.asarray(part)) for part in parts)


def _statistics_through_numpy(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    if x.requires_grad or x.numel() < 2 * PIECE or not _on_cpu(x) or not _hostable(x):
        return None
    parts = dataclasses.replace(profile, parts=_parts_through_numpy)
    return run_careful_later(parts, op, x, axes, keepdims)


def _product_by_exponents_through_numpy(
    op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile
) -> Array | None:
    """PyTorch's plain product (the kernel's); where it is 0, infinite or NaN, NumPy's
    product by exponents of those slices (``careful-product-by-exponents``), read on the
    tensor's memory and written into the product's."""
    import numpy as np
    import torch

    if (
        x.dtype not in (torch.float32, torch.float64)
        or x.requires_grad
        or x.numel() < 2 * PIECE
        or not _on_cpu(x)
    ):
        return None
    slices = ProductSlices(x.numpy(), axes)
    if not slices.covered:
        return None
    sx = profile.shim(array_api_compat.array_namespace(x))
    plain = sx.prod(x, axis=axes, keepdims=True, dtype=x.dtype).contiguous()
    with np.errstate(all="ignore"):
        slices.careful(plain.numpy().reshape(-1), slices.data.dtype)
    return plain if keepdims else torch.squeeze(plain, dim=axes)


_PRODUCT_BY_EXPONENTS_THROUGH_NUMPY = Accelerator(
    name="careful-product-by-exponents-through-numpy",
    ops=frozenset({"reduce_prod"}),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "CPU tensors of at least 2**17 elements that do not require grad, contiguous over "
        "trailing axes, 2-D or contiguous over the first axis, slices of at most 2**16 "
        "elements: PyTorch's product, and where it is 0, infinite or NaN NumPy's "
        "careful-product-by-exponents of those slices on the tensor's memory; held to "
        "the bound"
    ),
    earned=(
        "float32 (4096, 8192) of standard normals, every product underflowing, separate "
        "processes: last axis 277-280 -> 117-118 ms, first 374-377 -> 54-55 (torch.prod "
        "28 and 12)"
    ),
    exact=False,
    run=_product_by_exponents_through_numpy,
    min_elements=2 * PIECE,
)


# As NumPy's statistics in pieces, the pieces NumPy's: PyTorch's own kernels on pieces of
# 2**16 elements each wait for a descheduled thread when another process holds a core.
# (4096, 4096), median ms over the last axis, the first and every axis, with two spinning
# processes on two cores: int64 Mean 1092 (whole) -> 22804 (PyTorch's pieces); float32
# Prod of ReLU outputs 191, 195, 159 -> 578, 6024, 6032.
_CAREFUL_PRODUCT_THROUGH_NUMPY = dataclasses.replace(
    CAREFUL_PRODUCT_IN_PIECES,
    name="careful-product-through-numpy",
    covers=(
        "CPU tensors of at least 2**17 elements that do not require grad: PyTorch's "
        "product, and the careful product's statistics taken by NumPy's pieces on the "
        "same memory (bfloat16 where ml_dtypes is installed)"
    ),
    earned=(
        "float32 (4096, 4096) over the last, first and every axis, idle (beside two "
        "spinning processes): values 1-99, every product overflowing, 911, 896, 949 -> "
        "291, 304, 318 ms (1603, 1730, 1611 -> 452, 418, 539), 825% -> 3.4-4.4% extra "
        "memory; ReLU outputs 82, 94, 84 -> 26, 55, 33 ms (164, 183, 171 -> 35, 62, 43). "
        "bfloat16 (4096, 8192) of normal data: 1650% -> 1.7-3.8%, 1.8-2.2 s -> 0.6-0.8 s. "
        "A few suspect rows or columns alone (CarefulLater): float32 with one NaN, last "
        "and first axis, by turns, (1000, 1000) 8137-10138 -> 773-985 us (clean 209-243)"
    ),
    run=_statistics_through_numpy,
)


#: The fewest elements of the data on which ``careful-later`` runs, by operator: a slice
#: computed again alone costs PyTorch 100-250 us (each step of the kernel a call of a few
#: us), more than the careful form of every slice of smaller data. CPU float32, one NaN
#: (L2: one infinity; Prod: a NaN) in a row or column, over the last and first axis, by
#: turns: Sum (512, 512) 129-211 -> 162-207 us, (725, 725) 306-362 -> 232-302; L2 (256,
#: 256) 204-220 -> 308-330, (725, 725) 3727-3889 -> 579-679, but with a row of zeros 470-590
#: -> 577-684, and (1000, 1000) 788-871 -> 753-875; Prod (256, 256) 1610-1765 -> 380-411.
_LATER_ELEMENTS = {
    "reduce_sum": 2**19,
    "reduce_mean": 2**19,
    "reduce_log_sum": 2**19,
    "reduce_l2": 2**20,
    "reduce_prod": 2**16,
}


def _careful_later(op: str, x: Array, axes: Axes, keepdims: bool, profile: Profile) -> Array | None:
    if (
        x.numel() < _LATER_ELEMENTS[op]
        or not _on_cpu(x)
        or x.requires_grad
        or not x.is_contiguous()
    ):
        return None
    return run_careful_later(profile, op, x, axes, keepdims)


_CAREFUL_LATER = Accelerator(
    name="careful-later",
    ops=frozenset(_LATER_ELEMENTS),
    dtypes=frozenset({"float32", "float64"}),
    covers=(
        "contiguous CPU tensors that do not require grad, of 2**16 (Prod), 2**19 (Sum, "
        "Mean, LogSum) or 2**20 (L2) elements or more: the generic kernel, a few suspect "
        "rows or columns (a 16th at most) computed again alone (CarefulLater), else the "
        "careful form where needed; PyTorch may sum a lone row in another order than "
        "among many, so held to the bound"
    ),
    earned=(
        "CPU float32 with one NaN (L2: one infinity), last and first axis, by turns: Sum "
        "(725, 725) 315-388 -> 232-315 us (clean 76-96), (1448, 1448) 982-1092 -> 510-587 "
        "(clean 312-337); L2 (1448, 1448) 10429-11487 -> 1089-1229 (clean 768-876); Prod "
        "(256, 256) 1792-2065 -> 408-525 (clean 60-73)"
    ),
    exact=False,
    run=_careful_later,
    min_elements=min(_LATER_ELEMENTS.values()),
)
_INTEGER_MEAN_THROUGH_NUMPY = dataclasses.replace(
    INTEGER_MEAN_IN_PIECES,
    name="integer-mean-through-numpy",
    covers=(
        "CPU tensors of at least 2**17 elements: the limbs' sums taken by NumPy's pieces "
        "on the same memory, added exactly"
    ),
    earned=(
        "int64 (4096, 4096) over the last, first and every axis, idle (beside two "
        "spinning processes): 509, 558, 501 -> 68, 126, 60 ms (940, 963, 1078 -> 140, "
        "158, 126), 300% -> 1.2-1.5% extra memory"
    ),
    run=_statistics_through_numpy,
)


def _select(xp: Namespace, suspect: Array, careful: Any, plain: Array) -> Array:
    """The generic select; under ``torch.compile`` and ``torch.export``, the careful form
    in a ``torch.cond`` branch taken only when some slice is suspect.

    Inductor otherwise computes both forms in one loop: compiled float32 L2 of (2048,
    4096) took 1.38x compiled ``torch.linalg.vector_norm`` (the float64 sum of squares
    that guards the range beside the float32 one).
    """
    import torch

    if not torch.compiler.is_compiling():
        return xp.where(suspect, careful(), plain)

    def chosen() -> Array:
        return xp.where(suspect, careful(), plain)

    def as_is() -> Array:  # torch.cond's branches may not return their inputs
        return plain.clone()

    return torch.cond(torch.any(suspect), chosen, as_is)


def _prod(xp: Namespace) -> Any:
    """``xp.prod`` taking a product over every axis as one over the flattened data, and
    one over a tuple of one axis as one over that axis.

    array-api-compat's product over a tuple of axes moves them last and flattens them
    (torch.prod takes one axis; pytorch/pytorch#56586), which copies the data: float32
    (4096, 8192) over both axes took 110 ms against 4 ms over one (torch 2.13); over one
    axis of a small tensor, four calls in place of one.
    """

    def prod(x: Array, /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Array:
        if isinstance(axis, tuple) and len(axis) == 1:
            axis = axis[0]  # one torch.prod, not array-api-compat's moves and flattening
        every = axis is None or (isinstance(axis, tuple) and len(axis) == x.ndim)
        if not every or x.ndim < 2:
            return xp.prod(x, axis=axis, keepdims=keepdims, dtype=dtype)
        total = xp.prod(xp.reshape(x, (-1,)), axis=0, dtype=dtype)
        return xp.reshape(total, (1,) * x.ndim) if keepdims else total

    return prod


def _shim(xp: Namespace) -> Namespace:
    import torch

    if torch.compiler.is_compiling():
        # The process's first PyTorch call is compiled: a shim made in the trace, without
        # the copy of the module's names (torch 2.11's Dynamo cannot trace
        # ``__dict__.update``), and not kept for eager calls.
        return BareShim(xp, prod=_prod(xp), astype=_astype(xp))
    return _eager_shim(xp)


def _astype(xp: Namespace) -> Any:
    """``xp.astype``, float64 to float16 and bfloat16 rounded once: torch converts float64
    to both through float32, rounding twice (torch 2.13; no upstream issue found), and the
    kernels' totals of float16 and bfloat16 data are float64 (see rounded_once)."""
    import torch

    return astype_rounding_once(xp, torch.float64, (torch.float16, torch.bfloat16))


def _truth(torch_reduce: Any, compat_reduce: Any) -> Any:
    """``xp.any`` or ``xp.all`` going straight to torch's for a bool tensor reduced whole
    (the eager select's question on every guarded call): array-api-compat's adds a
    conversion to bool, 2-3 us on a small tensor; and over a tuple of axes (bool Max and
    Min), where array-api-compat's moves the axes last and flattens them, a copy of the
    data (array-api-compat 1.16; torch takes a tuple of dims since 2.2)."""

    import torch

    boolean = torch.bool

    def truth(x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        if x.dtype == boolean:
            if axis is None and not keepdims:
                return torch_reduce(x)
            if isinstance(axis, tuple) and axis:
                return torch_reduce(x, dim=axis, keepdim=keepdims)
        return compat_reduce(x, axis=axis, keepdims=keepdims)

    return truth


def _direct(native: Any, compat: Any) -> Any:
    """An element-wise function of array-api-compat's namespace going straight to torch's
    ``native`` when its last two arguments are tensors of one dtype, where the promotion
    fix has nothing to do (array-api-compat 1.16): ``where`` 1-2 us a call (LogSumExp makes
    three calls, L2 two), ``subtract`` 3 us of the 6.5 the kernels' test for non-finite
    results took on a small tensor."""
    import torch

    def call(*args: Any) -> Array:
        x1, x2 = args[-2:]
        if type(x1) is torch.Tensor and type(x2) is torch.Tensor and x1.dtype == x2.dtype:
            return native(*args)
        return compat(*args)

    return call


@memo(key=library_key)
def _eager_shim(xp: Namespace) -> Namespace:
    import torch

    return Shim(
        xp,
        prod=_prod(xp),
        astype=_astype(xp),
        any=_truth(torch.any, xp.any),
        all=_truth(torch.all, xp.all),
        where=_direct(torch.where, xp.where),
        subtract=_direct(torch.subtract, xp.subtract),
        __array_namespace_info__=FixedInfo(xp),
    )


PROFILE = Profile(
    name="torch",
    recognises=recognises,
    namespace_of=namespace_of,
    shim=_shim,
    lift=_lift,
    refuses=_refuses,
    select=_select,
    eager=eager,
    accelerators=(
        _SMALL,
        _BLOCKED_NORM,
        _HALF_THROUGH_NUMPY,
        _LOG_SUM_IN_SLABS,
        _TEMPORARIES_THROUGH_NUMPY,
        _WIDENED_THROUGH_NUMPY,
        _UNSIGNED_THROUGH_NUMPY,
        _NARROW_INTEGER_MEAN_THROUGH_NUMPY,
        _SLABS,
        _EVERY_AXIS,
        _LOG_SUM_EXP_IN_PLACE,
        _FUSED_NORMS,
        _PRODUCT_BY_EXPONENTS_THROUGH_NUMPY,
        _CAREFUL_PRODUCT_THROUGH_NUMPY,
        _INTEGER_MEAN_THROUGH_NUMPY,
        _CAREFUL_SUMS_IN_SLABS,
        _CAREFUL_LATER,
        Accelerator(
            name="careful-when-needed",
            ops=_GUARDED,
            dtypes=_FLOATS,
            covers=(
                "CPU and CUDA tensors; the careful form only for data with a suspect slice "
                "(on CUDA, one synchronisation a call to read the test)"
            ),
            earned=(
                "float32 (4096, 8192) L2 over the last axis: with the scaled form always "
                "computed, 3 passes over the data; here 1 and a test on the result. H200, "
                "float32 (16384, 32768): Sum 1.99 -> 0.53 ms, Mean 1.99 -> 0.53, LogSum "
                "2.00 -> 0.55 (torch.sum 0.48 ms, same run)"
            ),
            exact=True,
            run=guarded,
        ),
    ),
)
