"""Small inputs: each reduction as one or a few native calls of its backend.

On a small array the general kernels (``_ops``) cost their Python and dispatch steps, not
their arithmetic: each array-API call through ``array_api_compat`` costs 1-3 us, as much
as the backend's whole sum of a (3, 2, 2) array, and a kernel makes four to twelve of
them. Here each operator has, per backend and dtype, a formulation of the same contract
in the backend's own calls, used only for inputs of at most :data:`LIMIT` elements:

* NumPy: ufunc reductions called directly (``np.add.reduce`` skips ``np.sum``'s Python
  wrapper, ~1.4 us); float32 and float16 accumulate in float64 and round once, which
  also makes L2 range-safe and lets LogSumExp be ``np.logaddexp.reduce`` (one call, exact
  for the -inf, +inf and NaN rules) up to 512 elements;
* PyTorch: the plain operators called without the ``array_api_compat`` wrappers, one
  fused operator where there is one (``torch.linalg.vector_norm`` in float64 for L2,
  ``torch.logsumexp``); the float32 and float64 mean is ``torch.sum`` divided by a cached
  0-d count, which is what ``torch.mean`` computes, for less. They are differentiable,
  traceable by ``torch.compile`` and batched by ``torch.func.vmap``. LogSumExp of a float32 or
  float16 tensor of at most 128 elements outside autograd and every transformation is
  numpy's, on the tensor's own memory (see :func:`_through_numpy`).

An operator and dtype without a formulation that keeps every rule of the contract (the
float64 L2 and LogSumExp, the integer L2 and log reductions, PyTorch's unsigned types
held in carriers, float64 sums numpy would add term by term, ...) takes the general
kernel. Empty inputs, the no-op form (no axes) and rank 0 never come here.

Measured on float32 (3, 2, 2) over axis 1, overhead per call over the backend's own sum,
general kernel then small path (us; numpy 2.4, torch 2.13, 2 shared cores, best of 40
rounds): numpy Sum 7.8 -> 0.6, SumSquare 10 -> 1.1, L1 12 -> 1.0, L2 28 -> 1.5, Mean
11 -> 1.9, Prod 7 -> 0.1, Max 9 -> 0.2, Min 5.6 -> 0.2, LogSum 8.4 -> 1.0, LogSumExp
32 -> 0.7; torch Sum 12 -> 1.0, SumSquare 20 -> 2.1, L1 15 -> 2.5, L2 57 -> 4.5, Mean
18 -> 3.4, Prod 16 -> 1.2, Max 9 -> 1.0, Min 9 -> 1.0, LogSum 14 -> 2.3, LogSumExp
50 -> 3.9.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LIMIT", "form_for", "general_only", "reduce", "reduce_by"]

Array = Any
Axes = tuple[int, ...]
#: ``form(x, axes, keepdims)``: the reduction, or None where it does not apply after all.
Form = Callable[[Array, Axes, bool], Array | None]
Forms = dict[str, dict[Any, Form]]

LIMIT = 4096
"""Largest input, in elements, that the small path takes.

Float32 (n // 64, 64) over axis 1, small path against general kernel: at 4096 elements
every form took 0.1-0.6 of the time (numpy and torch), at 16384 0.2-0.8, at 65536
numpy's float64-accumulating forms took up to 1.4 times as long (SumSquare, Mean).
4096 keeps their float64 temporaries within 32 KiB; beyond, the arithmetic outweighs
the per-call cost and the general kernels' choices (blocks, fused passes) win.
"""

_enabled = True


@contextlib.contextmanager
def general_only() -> Iterator[None]:
    """Within the context every reduction takes the general kernel (tests check both paths)."""
    global _enabled  # noqa: PLW0603 - one process-wide switch, for tests
    before = _enabled
    _enabled = False
    try:
        yield
    finally:
        _enabled = before


def reduce(name: str, x: Array, axes: Axes, keepdims: bool) -> Array | None:
    """Operator ``name`` of ``x`` over ``axes`` by the small path; None where it does not apply.

    ``x`` is validated data and ``axes`` normalised; an empty ``axes`` (the no-op form) is
    left to the general kernel.
    """
    return reduce_by(form_for(name, x), x, axes, keepdims)


def reduce_by(
    found: tuple[Form, Callable[[Array], int]] | None, x: Array, axes: Axes, keepdims: bool
) -> Array | None:
    """:func:`reduce` with the form already found by :func:`form_for` for ``x``'s operator,
    type and dtype (callers keep it per type and dtype)."""
    if found is None or not axes or not _enabled:
        return None
    form, size = found
    if not 0 < size(x) <= LIMIT:
        return None
    return form(x, axes, keepdims)


def form_for(name: str, x: Array) -> tuple[Form, Callable[[Array], int]] | None:
    """The small-path form of operator ``name`` for arrays of ``x``'s type and dtype, and
    how to count their elements; None where that type or dtype has none.

    It depends on the type and dtype alone, so a caller may keep it per (type, dtype) and
    pass it to :func:`reduce_by`.
    """
    kind = type(x)
    try:
        path = _PATHS[kind]
    except KeyError:
        path = _PATHS[kind] = _path_for(x)
    if path is None:
        return None
    forms, size = path
    form = forms[name].get(x.dtype)
    return None if form is None else (form, size)


# The small path of each array type, found once per type: its forms and how to count its
# elements, or None where the type has none.
_PATHS: dict[type, tuple[Forms, Callable[[Array], int]] | None] = {}


def _path_for(x: Array) -> tuple[Forms, Callable[[Array], int]] | None:
    import array_api_compat

    if type(x).__module__ == "numpy" and array_api_compat.is_numpy_array(x):
        import numpy as np

        return _numpy_forms(np), operator.attrgetter("size")
    if array_api_compat.is_torch_array(x) and type(x).__name__ == "Tensor":
        import torch

        return _torch_path(torch), torch.Tensor.numel
    return None


def _count(shape: Any, axes: Axes) -> int:
    """Number of elements each output element reduces."""
    return math.prod([shape[a] for a in axes])


# --- NumPy ---------------------------------------------------------------------------------

# Sums whose terms numpy adds one after the other (every reduced axis outside the
# contiguous trailing run) stay within the general kernel's blocks of 16 terms.
_SEQUENTIAL = 16


def _pairwise_enough(shape: tuple[int, ...], axes: Axes) -> bool:
    """Whether numpy's own float64 sum over ``axes`` is as accurate as the general kernel's.

    NumPy sums the trailing run of reduced axes pairwise and any other reduced axis term
    by term (see ``_backends.sums_pairwise``): at most one such axis, of at most 16 terms,
    is what the general kernel's blocked sum adds in a row too.
    """
    inner = len(shape)
    while inner > 0 and inner - 1 in axes:
        inner -= 1
    outer = [a for a in axes if a < inner]
    return not outer or (len(outer) == 1 and shape[outer[0]] <= _SEQUENTIAL)


# Largest input whose LogSumExp numpy takes term by term (see wide_log_sum_exp).
_LOGADDEXP = 512


def _numpy_quiet(np: Any) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """``(enter, leave)``: ``np.errstate(all="ignore")`` at a fifth of its cost.

    The small path's float steps give the contract's IEEE values (log(0) = -inf, inf -
    inf = nan, an overflowing cast = inf, a NaN maximum), on which numpy warns.
    ``np.errstate`` builds its error state anew on every entry (~1 us, numpy 2.4);
    setting numpy's prebuilt state in its context variable costs ~0.2 us.
    """
    try:
        from numpy._core.umath import _extobj_contextvar, _make_extobj
    except ImportError:  # pragma: no cover - NumPy 1.x: the public context manager

        def enter() -> Any:
            state = np.errstate(all="ignore")
            state.__enter__()
            return state

        def leave(state: Any) -> None:
            state.__exit__(None, None, None)

        return enter, leave

    return functools.partial(_extobj_contextvar.set, _make_extobj(all="ignore")), (
        _extobj_contextvar.reset
    )


def _numpy_forms(np: Any) -> Forms:  # noqa: PLR0915 - one table of forms
    ndarray, asarray = np.ndarray, np.asarray
    add, multiply = np.add.reduce, np.multiply.reduce
    maximum, minimum = np.maximum.reduce, np.minimum.reduce
    absolute, sqrt, log, trunc = np.abs, np.sqrt, np.log, np.trunc
    logaddexp = np.logaddexp.reduce
    f64 = np.dtype(np.float64)
    enter, leave = _numpy_quiet(np)

    def array(r: Any) -> Array:
        # NumPy reductions to rank 0 give NumPy scalars, not 0-D arrays.
        return r if type(r) is ndarray else asarray(r)

    def floats(body: Callable[[Array, Axes, bool], Any]) -> Form:
        """``body`` under ignored floating-point warnings, its result as an array."""

        def form(x: Array, axes: Axes, keepdims: bool) -> Array | None:
            token = enter()
            try:
                r = body(x, axes, keepdims)
            finally:
                leave(token)
            return None if r is None else array(r)

        return form

    def pairwise(body: Callable[[Array, Axes, bool], Any]) -> Callable[..., Any]:
        """float64 sums: numpy's own where it is accurate enough, else the general kernel."""

        def form(x: Array, axes: Axes, keepdims: bool) -> Any:
            return body(x, axes, keepdims) if _pairwise_enough(x.shape, axes) else None

        return form

    def exact(body: Callable[[Array, Axes, bool], Any]) -> Form:
        """Integer and bool steps: no floating-point warnings to silence."""
        return lambda x, axes, keepdims: array(body(x, axes, keepdims))

    # float32 and float16: accumulate in float64, round once.
    def wide_sum(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(x, axes, f64, None, keepdims).astype(x.dtype)

    # x.astype(f64) then y * y: 0.35 us less than np.square(x, dtype=f64) (numpy 2.4).
    def wide_sum_square(x: Array, axes: Axes, keepdims: bool) -> Any:
        y = x.astype(f64)
        return add(y * y, axes, None, None, keepdims).astype(x.dtype)

    def wide_l1(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(absolute(x), axes, f64, None, keepdims).astype(x.dtype)

    def wide_l2(x: Array, axes: Axes, keepdims: bool) -> Any:
        # Squares of float32 and float16 values, and sums of a few thousand of them, are
        # finite and normal in float64: no overflow or underflow in between.
        y = x.astype(f64)
        return sqrt(add(y * y, axes, None, None, keepdims)).astype(x.dtype)

    # The count per result element as x.size // total.size: 0.3 us less than from the
    # shape and axes.
    def wide_mean(x: Array, axes: Axes, keepdims: bool) -> Any:
        total = add(x, axes, f64, None, keepdims)
        return (total / (x.size // total.size)).astype(x.dtype)

    def wide_prod(x: Array, axes: Axes, keepdims: bool) -> Any:
        return multiply(x, axes, f64, None, keepdims).astype(x.dtype)

    def wide_log_sum(x: Array, axes: Axes, keepdims: bool) -> Any:
        return log(add(x, axes, f64, None, keepdims)).astype(x.dtype)

    def wide_log_sum_exp(x: Array, axes: Axes, keepdims: bool) -> Any:
        # log(exp(a) + exp(b)) term by term, max-shifted by numpy (-inf and +inf slices
        # and NaN as the contract says); in float64 the float32 result rounds once. Its
        # log1p and exp per element cost ~30 ns: 10 us against the general kernel's 23 at
        # 256 elements, 21 against 39 at 512, 36 against 38 at 1024.
        if x.size > _LOGADDEXP:
            return None
        return logaddexp(x, axes, f64, None, keepdims).astype(x.dtype)

    # float64: numpy's own sums where they are accurate enough.
    def own_sum(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(x, axes, None, None, keepdims)

    def own_sum_square(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(x * x, axes, None, None, keepdims)

    def own_l1(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(absolute(x), axes, None, None, keepdims)

    def own_mean(x: Array, axes: Axes, keepdims: bool) -> Any:
        total = add(x, axes, None, None, keepdims)
        return total / (x.size // total.size)

    def own_log_sum(x: Array, axes: Axes, keepdims: bool) -> Any:
        return log(add(x, axes, None, None, keepdims))

    def own_prod(x: Array, axes: Axes, keepdims: bool) -> Any:
        return multiply(x, axes, None, None, keepdims)

    def own_max(x: Array, axes: Axes, keepdims: bool) -> Any:
        return maximum(x, axes, None, None, keepdims)

    def own_min(x: Array, axes: Axes, keepdims: bool) -> Any:
        return minimum(x, axes, None, None, keepdims)

    # Integers: exact modulo 2**bits in their own dtype.
    def int_sum(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(x, axes, x.dtype, None, keepdims)

    def int_sum_square(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(x * x, axes, x.dtype, None, keepdims)

    def int_l1(x: Array, axes: Axes, keepdims: bool) -> Any:
        return add(absolute(x), axes, x.dtype, None, keepdims)  # |min| wraps to min

    def int_prod(x: Array, axes: Axes, keepdims: bool) -> Any:
        return multiply(x, axes, x.dtype, None, keepdims)

    def int_mean(x: Array, axes: Axes, keepdims: bool) -> Any:
        # Sums of at most LIMIT values of 32 bits or fewer are exact in float64 (below
        # 2**44), and their quotient by n <= LIMIT is never within an ulp of the next
        # integer, so truncating it gives the exact mean truncated toward zero.
        total = add(x, axes, f64, None, keepdims)
        return trunc(total / (x.size // total.size)).astype(x.dtype)

    floats32 = ("float32", "float16")
    signed = ("int8", "int16", "int32", "int64")
    unsigned = ("uint8", "uint16", "uint32", "uint64")
    narrow_ints = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
    table: dict[str, dict[str, Form]] = {
        "reduce_sum": {
            **dict.fromkeys(floats32, floats(wide_sum)),
            "float64": floats(pairwise(own_sum)),
            **dict.fromkeys((*signed, *unsigned), exact(int_sum)),
        },
        "reduce_sum_square": {
            **dict.fromkeys(floats32, floats(wide_sum_square)),
            "float64": floats(pairwise(own_sum_square)),
            **dict.fromkeys((*signed, *unsigned), exact(int_sum_square)),
        },
        "reduce_l1": {
            **dict.fromkeys(floats32, floats(wide_l1)),
            "float64": floats(pairwise(own_l1)),
            **dict.fromkeys(signed, exact(int_l1)),
            **dict.fromkeys(unsigned, exact(int_sum)),
        },
        "reduce_l2": dict.fromkeys(floats32, floats(wide_l2)),
        "reduce_mean": {
            **dict.fromkeys(floats32, floats(wide_mean)),
            "float64": floats(pairwise(own_mean)),
            **dict.fromkeys(narrow_ints, exact(int_mean)),
        },
        "reduce_prod": {
            "float32": floats(own_prod),
            "float64": floats(own_prod),
            "float16": floats(wide_prod),
            **dict.fromkeys((*signed, *unsigned), exact(int_prod)),
        },
        "reduce_max": {
            **dict.fromkeys(("float32", "float16", "float64"), floats(own_max)),
            **dict.fromkeys((*signed, *unsigned, "bool"), exact(own_max)),
        },
        "reduce_min": {
            **dict.fromkeys(("float32", "float16", "float64"), floats(own_min)),
            **dict.fromkeys((*signed, *unsigned, "bool"), exact(own_min)),
        },
        "reduce_log_sum": {
            **dict.fromkeys(floats32, floats(wide_log_sum)),
            "float64": floats(pairwise(own_log_sum)),
        },
        "reduce_log_sum_exp": dict.fromkeys(floats32, floats(wide_log_sum_exp)),
    }
    return {name: {np.dtype(d): f for d, f in forms.items()} for name, forms in table.items()}


# --- PyTorch -------------------------------------------------------------------------------


def _torch_path(torch: Any) -> Forms:
    import numpy as np

    forms = _torch_forms(torch)
    on_numpy = _numpy_forms(np)["reduce_log_sum_exp"]
    for dtype, np_dtype in ((torch.float32, np.float32), (torch.float16, np.float16)):
        own = forms["reduce_log_sum_exp"][dtype]
        forms["reduce_log_sum_exp"][dtype] = _through_numpy(
            torch, own, on_numpy[np.dtype(np_dtype)]
        )
    return forms


# Largest tensor whose LogSumExp goes through numpy: 4.5 us against 12 us for
# torch.logsumexp at 12 elements, 7.8 against 10.9 us at 128, 14 against 10 us at 256.
_THROUGH_NUMPY = 128


def _through_numpy(torch: Any, own: Form, numpy_form: Form) -> Form:
    """``own``, or ``numpy_form`` on the memory of a plain CPU tensor outside autograd.

    ``torch.logsumexp`` is ten operator dispatches inside: 9 us on a float32 (3, 2, 2)
    tensor against 1.8 us for ``torch.sum``, where numpy's float64 ``logaddexp.reduce``
    on the tensor's own memory (``Tensor.numpy()`` is a view, ``torch.from_numpy`` shares
    the result) takes 3.6 us all told (torch 2.13, numpy 2.4). Only a tensor of at most
    ``_THROUGH_NUMPY`` elements that needs no gradient, on the CPU, outside
    ``torch.compile``, ``torch.jit.trace`` and every ``torch.func`` transformation goes
    through numpy; one numpy cannot view (a negative or conjugate bit) takes ``own``.
    """
    from_numpy = torch.from_numpy
    compiling = torch.compiler.is_compiling
    tracing = torch._C._get_tracing_state
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor

    def form(x: Array, axes: Axes, keepdims: bool) -> Array | None:
        if (
            x.is_cpu
            and x.numel() <= _THROUGH_NUMPY
            and not x.requires_grad
            and not compiling()
            and tracing() is None
            and not wrapped(x)
        ):
            try:
                data = x.numpy()
            except (RuntimeError, TypeError):
                return own(x, axes, keepdims)
            result = numpy_form(data, axes, keepdims)
            return own(x, axes, keepdims) if result is None else from_numpy(result)
        return own(x, axes, keepdims)

    return form


# Most cached counts of :func:`_torch_mean` (0-d tensors) before the cache starts again.
_COUNTS = 1024


def _torch_mean(torch: Any) -> Form:
    """The mean of a float32 or float64 tensor: torch.mean is torch.sum then a division by
    the count (the same values bit for bit), made inside at ~3 us more than the sum; a
    division by a cached 0-d tensor of the count in the data's dtype costs ~2 us (torch
    2.13). Traced or compiled, torch.mean: no tensor constant to record or guard on."""
    tsum, mean, div, inference_mode = torch.sum, torch.mean, torch.div, torch.inference_mode
    compiling = torch.compiler.is_compiling
    tracing = torch._C._get_tracing_state
    # Keyed by shape, axes and dtype: one lookup in place of counting (~0.5 us).
    counts: dict[tuple[Any, Axes, Any], Array] = {}

    def own_mean(x: Array, axes: Axes, keepdims: bool) -> Array:
        if compiling() or tracing() is not None:
            return mean(x, axes, keepdims)
        key = (x.shape, axes, x.dtype)
        count = counts.get(key)
        if count is None:
            if len(counts) >= _COUNTS:
                counts.clear()
            # A normal tensor even when first made under torch.inference_mode: an
            # inference tensor cannot be saved for a later call's backward pass.
            with inference_mode(False):
                count = torch.tensor(float(_count(x.shape, axes)), dtype=x.dtype)
            counts[key] = count
        return div(tsum(x, axes, keepdims), count)

    return own_mean


def _torch_forms(torch: Any) -> Forms:
    tsum, mean, prod, amax, amin = torch.sum, torch.mean, torch.prod, torch.amax, torch.amin
    tany, tall, absolute, log, div = torch.any, torch.all, torch.abs, torch.log, torch.div
    logsumexp, norm = torch.logsumexp, torch.linalg.vector_norm
    f64, i64 = torch.float64, torch.int64
    # Tensor.float() and its kin cost ~0.8 us less than Tensor.to(dtype) (torch 2.13).
    casts = {
        torch.float32: torch.Tensor.float,
        torch.float16: torch.Tensor.half,
        torch.bfloat16: torch.Tensor.bfloat16,
    }

    def narrow(r: Array, dtype: Any) -> Array:
        return casts[dtype](r)

    def prod_over(x: Array, axes: Axes, keepdims: bool, dtype: Any) -> Array | None:
        # torch.prod takes one dim; over every axis, the flattened array (a view).
        if len(axes) == 1:
            return prod(x, axes[0], keepdims, dtype=dtype)
        if len(axes) == x.ndim:
            total = prod(x.reshape(-1), 0, dtype=dtype)
            return total.reshape((1,) * x.ndim) if keepdims else total
        return None

    # float32 and float64: the backend's own operators, accumulating in the data's dtype
    # (torch's float sums are cascaded: pairwise accuracy).
    def own_sum(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(x, axes, keepdims)

    def own_sum_square(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(x * x, axes, keepdims)

    def own_l1(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(absolute(x), axes, keepdims)  # abs' derivative at 0 is 0

    own_mean = _torch_mean(torch)

    def own_prod(x: Array, axes: Axes, keepdims: bool) -> Array | None:
        return prod_over(x, axes, keepdims, None)

    def own_log_sum(x: Array, axes: Axes, keepdims: bool) -> Array:
        return log(tsum(x, axes, keepdims))

    def own_log_sum_exp(x: Array, axes: Axes, keepdims: bool) -> Array:
        # Max-shifted, a +-inf maximum unshifted: the contract's -inf, +inf and NaN
        # values; its gradient is the softmax, 0 at -inf.
        return logsumexp(x, axes, keepdims)

    def own_max(x: Array, axes: Axes, keepdims: bool) -> Array:
        return amax(x, axes, keepdims)  # NaN propagates

    def own_min(x: Array, axes: Axes, keepdims: bool) -> Array:
        return amin(x, axes, keepdims)

    # float16 and bfloat16 accumulate in float64 and round once (the general kernel's
    # accumulation type, so that sums that cancel round correctly).
    def wide_sum(x: Array, axes: Axes, keepdims: bool) -> Array:
        return narrow(tsum(x, axes, keepdims, dtype=f64), x.dtype)

    def wide_sum_square(x: Array, axes: Axes, keepdims: bool) -> Array:
        y = x.to(f64)
        return narrow(tsum(y * y, axes, keepdims), x.dtype)

    def wide_l1(x: Array, axes: Axes, keepdims: bool) -> Array:
        return narrow(norm(x, 1, axes, keepdims, dtype=f64), x.dtype)

    def wide_l2(cast: Callable[[Array], Array]) -> Form:
        # float32, float16, bfloat16: one fused pass in float64, where their squares and
        # sums of them are finite and normal (range-safe) and accumulate accurately; its
        # gradient at a zero norm is 0. vector_norm in float32 itself overflows on
        # [1e20, 1e20] (torch 2.13). The cast back bound per dtype: float32's L2 is the
        # tightest against its 5 us target.
        def form(x: Array, axes: Axes, keepdims: bool) -> Array:
            return cast(norm(x, 2, axes, keepdims, dtype=f64))

        return form

    def wide_mean(x: Array, axes: Axes, keepdims: bool) -> Array:
        return narrow(mean(x, axes, keepdims, dtype=f64), x.dtype)

    def wide_prod(x: Array, axes: Axes, keepdims: bool) -> Array | None:
        total = prod_over(x, axes, keepdims, f64)
        return None if total is None else narrow(total, x.dtype)

    def wide_log_sum(x: Array, axes: Axes, keepdims: bool) -> Array:
        return narrow(log(tsum(x, axes, keepdims, dtype=f64)), x.dtype)

    def wide_log_sum_exp(x: Array, axes: Axes, keepdims: bool) -> Array:
        return narrow(logsumexp(x.to(f64), axes, keepdims), x.dtype)

    # Integers (the types torch has kernels for): exact modulo 2**bits in their own dtype.
    def int_sum(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(x, axes, keepdims, dtype=x.dtype)

    def int_sum_square(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(x * x, axes, keepdims, dtype=x.dtype)

    def int_l1(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tsum(absolute(x), axes, keepdims, dtype=x.dtype)  # |min| wraps to min

    def int_prod(x: Array, axes: Axes, keepdims: bool) -> Array | None:
        return prod_over(x, axes, keepdims, x.dtype)

    def int_mean(x: Array, axes: Axes, keepdims: bool) -> Array:
        # Sums of at most LIMIT values of 32 bits or fewer are exact in int64.
        total = tsum(x, axes, keepdims, dtype=i64)
        return div(total, _count(x.shape, axes), rounding_mode="trunc").to(x.dtype)

    def any_(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tany(x, axes, keepdims)

    def all_(x: Array, axes: Axes, keepdims: bool) -> Array:
        return tall(x, axes, keepdims)

    own = (torch.float32, torch.float64)
    wide = (torch.float16, torch.bfloat16)
    signed = (torch.int8, torch.int16, torch.int32, torch.int64)
    ints = (*signed, torch.uint8)  # uint16, uint32, uint64 go through carriers
    narrow_ints = (torch.int8, torch.int16, torch.int32, torch.uint8)
    return {
        "reduce_sum": {
            **dict.fromkeys(own, own_sum),
            **dict.fromkeys(wide, wide_sum),
            **dict.fromkeys(ints, int_sum),
        },
        "reduce_sum_square": {
            **dict.fromkeys(own, own_sum_square),
            **dict.fromkeys(wide, wide_sum_square),
            **dict.fromkeys(ints, int_sum_square),
        },
        "reduce_l1": {
            **dict.fromkeys(own, own_l1),
            **dict.fromkeys(wide, wide_l1),
            **dict.fromkeys(signed, int_l1),
            torch.uint8: int_sum,
        },
        # float64 has no wider type: its range-safe L2 is the general kernel's.
        "reduce_l2": {dtype: wide_l2(casts[dtype]) for dtype in (torch.float32, *wide)},
        "reduce_mean": {
            **dict.fromkeys(own, own_mean),
            **dict.fromkeys(wide, wide_mean),
            **dict.fromkeys(narrow_ints, int_mean),
        },
        "reduce_prod": {
            **dict.fromkeys(own, own_prod),
            **dict.fromkeys(wide, wide_prod),
            **dict.fromkeys(ints, int_prod),
        },
        "reduce_max": {**dict.fromkeys((*own, *wide, *ints), own_max), torch.bool: any_},
        "reduce_min": {**dict.fromkeys((*own, *wide, *ints), own_min), torch.bool: all_},
        "reduce_log_sum": {
            **dict.fromkeys(own, own_log_sum),
            **dict.fromkeys(wide, wide_log_sum),
        },
        "reduce_log_sum_exp": {
            **dict.fromkeys(own, own_log_sum_exp),
            **dict.fromkeys(wide, wide_log_sum_exp),
        },
    }
