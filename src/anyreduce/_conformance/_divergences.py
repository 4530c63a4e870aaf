"""Where other runtimes disagree with the contract: the documented divergences.

This list is the single source of the divergences table in ``docs/semantics.md`` (rendered
by :func:`markdown_table`) and of the suite's verdicts: a runtime result that disagrees
with the contract is ``divergent`` when one entry here :meth:`~Divergence.covers` it, and
a failure otherwise. Each entry carries a concrete ``example`` case;
``conformance/test_divergences.py`` runs it on the runtime to prove the divergence is real
(and still there) and on anyreduce to prove ours is the contract's answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cases import ContractError, SpecCase
from ._exact import Exact, compare

__all__ = ["DIVERGENCES", "Divergence", "classify", "markdown_table"]

Got = Any  # the runtime's result: a NumPy array or the exception it raised
Want = Any  # the contract's: an Exact, or the ContractError it demands

INTEGERS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOATS = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Divergence:
    """One way a runtime departs from the contract, with an example that shows it."""

    id: str
    runtime: str
    case: str  # which cases, in words
    theirs: str  # the runtime's answer on the example
    ours: str  # the contract's (and anyreduce's) answer on the example
    why: str  # why the contract differs
    example: Callable[[], SpecCase]
    covers: Callable[[SpecCase, Got, Want], bool]
    #: The first release of the runtime that gives the contract's answer, if one does.
    fixed_in: str | None = None

    def diverges_in(self, version: str) -> bool:
        """Whether release ``version`` of the runtime still departs from the contract."""
        return self.fixed_in is None or _release(version) < _release(self.fixed_in)


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric parts of a version string: ``"1.32.0rc1"`` is (1, 32, 0)."""
    parts: list[int] = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(parts)


# --- predicates ---------------------------------------------------------------------------


def _raised(got: Got) -> bool:
    return isinstance(got, BaseException)


def _accepted_invalid(got: Got, want: Want) -> bool:
    return isinstance(want, ContractError) and not _raised(got)


def _has_duplicates(case: SpecCase) -> bool:
    ndim = case.data.ndim
    axes = [a % ndim for a in case.axes or () if ndim and -ndim <= a < ndim]
    return len(set(axes)) != len(axes)


def _values_differ(got: Got, want: Want) -> bool:
    """A result of the right dtype and shape whose values disagree."""
    if _raised(got) or not isinstance(want, Exact):
        return False
    array = np.asarray(got)
    return bool(array.dtype == want.dtype and array.shape == want.values.shape)


def _mismatches(got: Got, want: Exact) -> np.ndarray:
    """Mask of the elements that disagree (floats only)."""
    mask = np.zeros(want.values.shape, dtype=bool)
    flat_got = np.asarray(got).astype(np.float64).ravel()
    for i, (g, w, s) in enumerate(
        zip(flat_got, want.values.ravel(), want.scales.ravel(), strict=True)
    ):
        ill = None if want.ill is None else np.array(want.ill.ravel()[i])
        one = Exact(
            np.array(w, dtype=np.float64),
            np.array(s),
            want.count,
            want.dtype,
            ill,
            want.scale_exponent,
        )
        mask.ravel()[i] = not compare("", np.asarray(g).astype(want.dtype), one).agrees
    return mask


def _float_case(case: SpecCase) -> bool:
    return case.dtype in FLOATS


def _version_1_negative(case: SpecCase) -> bool:
    return (case.opset or 0) < 11 and any(a < 0 for a in case.axes or ())


def _float32_values(got: Got, want: Want) -> bool:
    """Every disagreeing value is a float32 value: the result was computed in float32."""
    bad = _mismatches(got, want)
    values = np.asarray(got).astype(np.float64)[bad]
    with np.errstate(over="ignore"):
        return bool(np.all(values.astype(np.float32).astype(np.float64) == values))


def _out_of_range(case: SpecCase) -> bool:
    ndim = case.data.ndim
    return any(not -ndim <= a < ndim for a in case.axes or ())


def _where_expected(got: Got, want: Want, expected: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Values differ, and only where ``expected(values)`` holds."""
    if not _values_differ(got, want):
        return False
    bad = _mismatches(got, want)
    return bool(bad.any()) and bool(np.all(expected(want.values.astype(np.float64))[bad]))


def _l2_overflow_or_underflow(got: Got, want: Want) -> bool:
    if not _values_differ(got, want):
        return False
    bad = _mismatches(got, want)
    g = np.asarray(got).astype(np.float64)[bad]
    return bool(bad.any()) and bool(np.all(np.isinf(g) | (g == 0)))


def _nan_dropped(case: SpecCase, got: Got, want: Want) -> bool:
    return bool(np.isnan(case.data.astype(np.float64)).any()) and _where_expected(
        got, want, np.isnan
    )


def _lse_of_infinities(got: Got, want: Want) -> bool:
    if not _values_differ(got, want):
        return False
    bad = _mismatches(got, want)
    g = np.asarray(got).astype(np.float64)[bad]
    w = want.values.astype(np.float64)[bad]
    return bool(bad.any()) and bool(np.all(np.isinf(w) & np.isnan(g)))


def _onnx(
    op: str,
    opset: int,
    values: Any,
    dtype: str,
    axes: tuple[int, ...] | None = None,
    form: str = "absent",
    keepdims: int = 0,
    noop: int | None = None,
) -> Callable[[], SpecCase]:
    def build() -> SpecCase:
        from ._exact import np_dtype

        data = np.asarray(values, dtype=np.float64 if dtype in FLOATS else object)
        data = np.asarray(data.astype(np_dtype(dtype)))
        return SpecCase.onnx(
            op, opset, data, axes, form, keepdims=keepdims, noop=noop, suite="divergence"
        )

    return build


def _openvino(
    op: str, values: Any, dtype: str, axes: tuple[int, ...], keep_dims: bool = False
) -> Callable[[], SpecCase]:
    def build() -> SpecCase:
        from ._exact import np_dtype

        data = np.asarray(np.asarray(values).astype(np_dtype(dtype)))
        return SpecCase.openvino(op, data, axes, keep_dims=keep_dims, suite="divergence")

    return build


_REF = "onnx.reference"
_ORT = "onnxruntime"
_OV = "openvino"

DIVERGENCES: tuple[Divergence, ...] = (
    # --- the ONNX reference evaluator ---------------------------------------------------
    Divergence(
        "reference-float16-accumulation",
        _REF,
        "float16/bfloat16 data whose squares, sums or products leave the type's range",
        "ReduceL2 of float16 [300, 400]: inf",
        "500",
        "It accumulates in the input type; the contract accumulates float16 and bfloat16 "
        "in float32 and rounds once (spec §3), as onnxruntime and torch do.",
        _onnx("ReduceL2", 18, [300, 400], "float16"),
        lambda case, got, want: case.dtype in ("float16", "bfloat16") and _values_differ(got, want),
    ),
    Divergence(
        "reference-logsumexp-infinities",
        _REF,
        "ReduceLogSumExp of a slice whose maximum is -inf or +inf",
        "ReduceLogSumExp of float32 [-inf, -inf]: nan",
        "-inf (and +inf for a slice holding +inf)",
        "It subtracts the maximum without a guard, and inf - inf is NaN; the contract "
        "shifts only by finite maxima (spec §4).",
        _onnx("ReduceLogSumExp", 18, [-np.inf, -np.inf], "float32"),
        lambda case, got, want: case.op == "ReduceLogSumExp" and _lse_of_infinities(got, want),
    ),
    Divergence(
        "reference-integer-log",
        _REF,
        "ReduceLogSum/ReduceLogSumExp of integers (opsets 1 to 27, whose type constraint "
        "admits them)",
        "TypeError (no implementation for integer inputs)",
        "the float64 result truncated toward zero, e.g. ReduceLogSum of int32 [3, 4]: 1",
        "Integer inputs are valid before opset 28; the contract computes them in float64 "
        "and truncates (spec §3).",
        _onnx("ReduceLogSum", 18, [3, 4], "int32"),
        lambda case, got, want: (
            case.op in ("ReduceLogSum", "ReduceLogSumExp")
            and case.dtype in INTEGERS
            and _raised(got)
        ),
    ),
    Divergence(
        "reference-logsumexp-rank-0",
        _REF,
        "ReduceLogSumExp of a rank-0 input",
        "TypeError from its attribute handling",
        "the input itself, e.g. float32 5.0 gives 5.0",
        "Rank-0 input is valid; its full reduction is the element itself (spec §2).",
        _onnx("ReduceLogSumExp", 18, 5.0, "float32"),
        lambda case, got, want: (
            case.op == "ReduceLogSumExp" and case.data.ndim == 0 and _raised(got)
        ),
    ),
    Divergence(
        "reference-l2-range",
        _REF,
        "ReduceL2 of float32/float64 data whose squares overflow or underflow",
        "ReduceL2 of float32 [1e20, 1e20]: inf",
        "1.4142135e20",
        "Intermediate squares must not overflow or underflow when the norm is representable "
        "(spec §3).",
        _onnx("ReduceL2", 18, [1e20, 1e20], "float32"),
        lambda case, got, want: (
            case.op == "ReduceL2" and _float_case(case) and _l2_overflow_or_underflow(got, want)
        ),
    ),
    Divergence(
        "reference-integer-l2",
        _REF,
        "ReduceL2 of integers whose squares overflow the type",
        "ReduceL2 of int32 [65536, 0]: 0 (the square wraps to 0)",
        "65536",
        "It squares in the input type; the contract takes the root of the exact sum of "
        "squares computed in float64 (spec §3).",
        _onnx("ReduceL2", 13, [65536, 0], "int32"),
        lambda case, got, want: (
            case.op == "ReduceL2" and case.dtype in INTEGERS and _values_differ(got, want)
        ),
    ),
    Divergence(
        "reference-integer-mean",
        _REF,
        "ReduceMean of integers: large int64/uint64 values, sums beyond the type, empty sets",
        "ReduceMean of int64 [2**62 + 1, 2**62 + 3]: 4611686018427387904",
        "4611686018427387906 (exact, truncated toward zero)",
        "It averages in float64 and casts back (and casts NaN for an empty set); the "
        "contract's integer mean is exact, and 0 over an empty set (spec §1, §3).",
        _onnx("ReduceMean", 13, [2**62 + 1, 2**62 + 3], "int64"),
        lambda case, got, want: (
            case.op == "ReduceMean" and case.dtype in INTEGERS and _values_differ(got, want)
        ),
    ),
    Divergence(
        "reference-sum-square-widens",
        _REF,
        "ReduceSumSquare of int32/uint32",
        "an int64/uint64 result",
        "an int32/uint32 result",
        "The output type equals the input type (spec §3; the schema's T is shared by input "
        "and output).",
        _onnx("ReduceSumSquare", 13, [1, 2], "int32"),
        lambda case, got, want: (
            case.op == "ReduceSumSquare"
            and case.dtype in ("int32", "uint32")
            and not _raised(got)
            and np.asarray(got).dtype != case.data.dtype
        ),
    ),
    Divergence(
        "reference-negative-axes-version-1",
        _REF,
        "negative axes at version 1 (opsets 1 to 10)",
        "accepted, counted from the end",
        "AxisError",
        "Version 1 of every reduction accepts axes in [0, r-1] only (spec §6).",
        _onnx("ReduceSum", 1, [[1, 2], [3, 4]], "float32", (-1,), "attribute"),
        lambda case, got, want: _version_1_negative(case) and _accepted_invalid(got, want),
    ),
    Divergence(
        "reference-product-range",
        _REF,
        "ReduceProd of float data whose partial products leave the type's range",
        "ReduceProd of float32 [1e-30, 1e-30, 1e30]: 0",
        "1e-30",
        "It multiplies in the input type, so partial products underflow or overflow; the "
        "contract's result must not when it is representable (spec §3).",
        _onnx("ReduceProd", 13, [1e-30, 1e-30, 1e30], "float32"),
        lambda case, got, want: (
            case.op == "ReduceProd" and _float_case(case) and _values_differ(got, want)
        ),
    ),
    # --- onnxruntime -----------------------------------------------------------------------
    Divergence(
        "onnxruntime-missing-kernels",
        _ORT,
        "uint32, uint64 and bfloat16 data; float16 at opsets before 11",
        "NOT_IMPLEMENTED or INVALID_GRAPH: no CPU kernel for the type, or a function body "
        "it cannot type (its Python API takes no bfloat16 arrays at all)",
        "the reduction, e.g. ReduceSum of uint32 [1, 2]: 3",
        "The schemas admit these types; anyreduce computes every type it admits.",
        _onnx("ReduceSum", 13, [1, 2], "uint32"),
        lambda case, got, want: (
            _raised(got)
            and (
                case.dtype in ("uint32", "uint64", "bfloat16")
                or (case.dtype == "float16" and (case.opset or 0) < 11)
            )
        ),
    ),
    Divergence(
        "onnxruntime-integer-saturation",
        _ORT,
        "integer ReduceSum, ReduceSumSquare, ReduceL1, ReduceProd, ReduceMean, "
        "ReduceLogSumExp whose exact result leaves the type",
        "ReduceSum of int32 [2**30, 2**30]: 2147483647 (saturated)",
        "-2147483648 (wrapped modulo 2**32)",
        "The contract wraps integer sums and products modulo 2**bits as numpy, torch and the "
        "reference do, and computes the mean exactly (spec §3).",
        _onnx("ReduceSum", 13, [2**30, 2**30], "int32"),
        lambda case, got, want: (
            case.dtype in INTEGERS
            and case.op
            in (
                "ReduceSum",
                "ReduceSumSquare",
                "ReduceL1",
                "ReduceProd",
                "ReduceMean",
                "ReduceLogSumExp",
            )
            and _values_differ(got, want)
        ),
    ),
    Divergence(
        "onnxruntime-duplicate-axes",
        _ORT,
        "repeated axes (also as a negative and a non-negative alias)",
        "ReduceSum over axes [1, 1]: the sum over axis 1",
        "AxisError",
        "numpy, torch, JAX, the reference and OpenVINO's specification reject repeated axes "
        "(spec §2).",
        _onnx("ReduceSum", 13, [[1, 2], [3, 4]], "float32", (1, 1), "input"),
        lambda case, got, want: _has_duplicates(case) and _accepted_invalid(got, want),
    ),
    Divergence(
        "onnxruntime-nan-max-min",
        _ORT,
        "ReduceMax/ReduceMin of a slice holding NaN (not in first place)",
        "ReduceMax of float32 [1, nan, 3]: 3",
        "nan",
        "NaN propagates through every reduction (spec §4), as in numpy, torch and the reference.",
        _onnx("ReduceMax", 18, [1, np.nan, 3], "float32"),
        lambda case, got, want: (
            case.op in ("ReduceMax", "ReduceMin") and _nan_dropped(case, got, want)
        ),
    ),
    Divergence(
        "onnxruntime-l2-range",
        _ORT,
        "ReduceL2 of float32/float64 data whose squares overflow or underflow",
        "ReduceL2 of float32 [1e20, 1e20]: inf",
        "1.4142135e20",
        "Intermediate squares must not overflow or underflow when the norm is representable "
        "(spec §3).",
        _onnx("ReduceL2", 18, [1e20, 1e20], "float32"),
        lambda case, got, want: (
            case.op == "ReduceL2" and _float_case(case) and _l2_overflow_or_underflow(got, want)
        ),
    ),
    Divergence(
        "onnxruntime-zero-size-shape",
        _ORT,
        "zero-size data reduced over some axes",
        "ReduceSum of a float32 [0, 5] array over axis -1, keepdims 0: shape [0, 5]",
        "shape [0]",
        "A reduced axis becomes 1 (or goes) whatever the other extents (spec §1-2).",
        _onnx("ReduceSum", 13, np.zeros((0, 5)), "float32", (-1,), "input"),
        lambda case, got, want: (
            case.data.size == 0
            and not _raised(got)
            and isinstance(want, Exact)
            and np.asarray(got).shape != want.values.shape
        ),
        fixed_in="1.32.0",
    ),
    Divergence(
        "onnxruntime-negative-axes-version-1",
        _ORT,
        "negative axes at version 1 (opsets 1 to 10)",
        "accepted, counted from the end",
        "AxisError",
        "Version 1 of every reduction accepts axes in [0, r-1] only (spec §6).",
        _onnx("ReduceSum", 1, [[1, 2], [3, 4]], "float32", (-1,), "attribute"),
        lambda case, got, want: _version_1_negative(case) and _accepted_invalid(got, want),
    ),
    Divergence(
        "onnxruntime-scalar-axes",
        _ORT,
        "a 0-D axes tensor where axes is an input (ReduceSum from opset 13, the others from 18)",
        "FAIL: An axes tensor must be a vector tensor",
        "the reduction over that one axis, e.g. ReduceSum-13 of float32 [[1, 2], [3, 4]] "
        "over a 0-D axes 1 (keepdims 0): [3, 7]",
        "The schemas type axes as tensor(int64) of no fixed rank and the ONNX reference "
        "reads a 0-D one as one axis; the contract takes a 0-D integer array as one axis "
        "(spec §2).",
        _onnx("ReduceSum", 18, [[1, 2], [3, 4]], "float32", (1,), "scalar"),
        lambda case, got, want: (
            case.profile == "onnx" and case.axes_form == "scalar" and _raised(got)
        ),
    ),
    Divergence(
        "onnxruntime-unchecked-axes",
        _ORT,
        "out-of-range axes on a rank-0 or zero-size input",
        "ReduceSum of a rank-0 float32 over axis 0: accepted",
        "AxisError",
        "Axes must lie in [-r, r-1]; a rank-0 input takes no axis at all (spec §2).",
        _onnx("ReduceSum", 13, 5.0, "float32", (0,), "input"),
        lambda case, got, want: (
            (case.data.ndim == 0 or case.data.size == 0)
            and _out_of_range(case)
            and _accepted_invalid(got, want)
        ),
    ),
    Divergence(
        "onnxruntime-logsumexp-float16-overflow",
        _ORT,
        "ReduceLogSumExp-18 of float16 values beyond about 11",
        "ReduceLogSumExp-18 of float16 [4392, 1]: inf",
        "4392",
        "The contract shifts by the slice maximum so exp cannot overflow (spec §4).",
        _onnx("ReduceLogSumExp", 18, [4392, 1], "float16"),
        lambda case, got, want: (
            case.op == "ReduceLogSumExp"
            and case.dtype == "float16"
            and _where_expected(got, want, np.isfinite)
            and bool(np.all(np.isinf(np.asarray(got).astype(np.float64))[_mismatches(got, want)]))
        ),
    ),
    Divergence(
        "onnxruntime-logsumexp-nan-with-inf",
        _ORT,
        "ReduceLogSumExp (float16, versions before 18) of a slice holding both NaN and +inf",
        "ReduceLogSumExp-13 of float16 [inf, nan]: inf",
        "nan",
        "NaN propagates through every reduction (spec §4).",
        _onnx("ReduceLogSumExp", 13, [np.inf, np.nan], "float16"),
        lambda case, got, want: (
            case.op == "ReduceLogSumExp"
            and _where_expected(got, want, np.isnan)
            and bool(np.all(np.isinf(np.asarray(got).astype(np.float64))[_mismatches(got, want)]))
        ),
    ),
    Divergence(
        "onnxruntime-empty-bool-extremes",
        _ORT,
        "ReduceMax and ReduceMin of bool data over an empty set (opset 20)",
        "RUNTIME_EXCEPTION: ReduceMax is not defined for empty set with bool type",
        "the identity: False for ReduceMax (any), True for ReduceMin (all)",
        "The empty set has an identity for logical or and and (spec §1), as for every other type.",
        _onnx("ReduceMax", 20, np.zeros((0,), dtype=bool), "bool"),
        lambda case, got, want: (
            _raised(got)
            and case.op in ("ReduceMax", "ReduceMin")
            and case.dtype == "bool"
            and case.data.size == 0
        ),
    ),
    Divergence(
        "onnxruntime-integer-log-sum",
        _ORT,
        "ReduceLogSum of integers whose sum leaves the type's range (opsets 1 to 18)",
        "the logarithm of the sum taken without wrapping: int32 [2**30, 2**30]: 21",
        "the logarithm of the wrapped sum ReduceSum gives (-2**31), so the dtype minimum",
        "ReduceLogSum-18 is ReduceSum, then Log, and ReduceSum of integers wraps (spec §3), as "
        "the reference's does.",
        _onnx("ReduceLogSum", 13, [2**30, 2**30], "int32"),
        lambda case, got, want: (
            case.op == "ReduceLogSum" and not _float_case(case) and _values_differ(got, want)
        ),
    ),
    Divergence(
        "onnxruntime-empty-mean",
        _ORT,
        "ReduceMean of float data over an empty set",
        "0",
        "nan",
        "The mean of no values is 0/0 (spec §1), as in numpy and the reference.",
        _onnx("ReduceMean", 13, np.zeros((0,)), "float32"),
        lambda case, got, want: (
            case.op == "ReduceMean" and case.data.size == 0 and _where_expected(got, want, np.isnan)
        ),
    ),
    Divergence(
        "onnxruntime-product-range",
        _ORT,
        "ReduceProd of float data whose partial products leave the type's range",
        "ReduceProd of float32 [1e-30, 1e-30, 1e30]: 0",
        "1e-30",
        "It multiplies in the input type, so partial products underflow or overflow; the "
        "contract's result must not when it is representable (spec §3).",
        _onnx("ReduceProd", 13, [1e-30, 1e-30, 1e30], "float32"),
        lambda case, got, want: (
            case.op == "ReduceProd" and _float_case(case) and _values_differ(got, want)
        ),
    ),
    # --- the OpenVINO runtime (CPU plugin) -------------------------------------------------
    Divergence(
        "openvino-empty-axes-keep-dims-false",
        _OV,
        "empty axes with keep_dims false",
        "compile_model fails (CPU plugin: invalid reduce configuration)",
        "the element-wise part, e.g. ReduceL1 of float32 [[-1, 2], [3, -4]] gives its "
        "absolute values",
        "Empty axes mean no reduction; keep_dims has nothing to drop (spec §7).",
        _openvino("ReduceL1", [[-1, 2], [3, -4]], "float32", ()),
        lambda case, got, want: not case.axes and not case.keepdims and _raised(got),
    ),
    Divergence(
        "openvino-duplicate-axes",
        _OV,
        "repeated axes",
        "ReduceSum over axes [0, 0]: the sum over axis 0",
        "AxisError",
        "OpenVINO's specification requires unique axes (spec §7).",
        _openvino("ReduceSum", [[1, 2], [3, 4]], "float32", (0, 0)),
        lambda case, got, want: _has_duplicates(case) and _accepted_invalid(got, want),
    ),
    Divergence(
        "openvino-rank-0-axes",
        _OV,
        "an axis given for a rank-0 input",
        "ReduceSum of a rank-0 float32 over axis 0: accepted",
        "AxisError",
        "Axes must lie in [-r, r-1], an empty range for rank 0 (spec §7).",
        _openvino("ReduceSum", 5.0, "float32", (0,)),
        lambda case, got, want: (
            case.data.ndim == 0 and _out_of_range(case) and _accepted_invalid(got, want)
        ),
    ),
    Divergence(
        "openvino-no-bfloat16-arrays",
        _OV,
        "bfloat16 data",
        "its Python API takes no bfloat16 NumPy arrays",
        "the reduction, e.g. ReduceSum of bfloat16 [1, 2]: 3",
        "bfloat16 is a supported numeric type of the operations (spec §7).",
        _openvino("ReduceSum", [1, 2], "bfloat16", (0,)),
        lambda case, got, want: case.dtype == "bfloat16" and _raised(got),
    ),
    Divergence(
        "openvino-integer-arithmetic",
        _OV,
        "integer data whose exact result needs the type's full width",
        "ReduceSum of int8 [100, 100]: 127 (saturated); of int64 [2**40, 3]: ReduceMax 3 "
        "(64-bit integers are computed in 32 bits)",
        "-56 (wrapped modulo 2**8); 1099511627776",
        "The contract wraps sums and products modulo 2**bits and computes every integer type "
        "at its own width (spec §3); the CPU plugin saturates 8/16-bit results, goes through "
        "float32 for 32-bit ones and truncates 64-bit ones to 32 bits.",
        _openvino("ReduceSum", [100, 100], "int8", (0,)),
        lambda case, got, want: case.dtype in INTEGERS and _values_differ(got, want),
    ),
    Divergence(
        "openvino-float64-as-float32",
        _OV,
        "float64 data",
        "the float32 result: ReduceSum of float64 [1 + 2**-40]: 1.0",
        "1.0000000000009095",
        "The CPU plugin computes float64 in float32 (saturating at its range); the contract "
        "computes every type at least at its own precision (spec §3).",
        _openvino("ReduceSum", [1 + 2**-40], "float64", (0,)),
        lambda case, got, want: (
            case.dtype == "float64" and _values_differ(got, want) and _float32_values(got, want)
        ),
    ),
    Divergence(
        "openvino-l2-range",
        _OV,
        "ReduceL2 of float32 data whose squares overflow or underflow",
        "ReduceL2 of float32 [1e20, 1e20]: inf; of [1e-30, 1e-30]: 0",
        "1.4142135e20; 1.4142135e-30",
        "Intermediate squares must not overflow or underflow when the norm is representable "
        "(spec §3).",
        _openvino("ReduceL2", [1e20, 1e20], "float32", (0,)),
        lambda case, got, want: (
            case.op == "ReduceL2" and _float_case(case) and _l2_overflow_or_underflow(got, want)
        ),
    ),
    Divergence(
        "openvino-nan-max-min",
        _OV,
        "ReduceMax/ReduceMin of a slice holding NaN",
        "ReduceMax of float32 [1, nan, 3]: 3",
        "nan",
        "NaN propagates through every reduction (spec §4).",
        _openvino("ReduceMax", [1, np.nan, 3], "float32", (0,)),
        lambda case, got, want: (
            case.op in ("ReduceMax", "ReduceMin") and _nan_dropped(case, got, want)
        ),
    ),
    Divergence(
        "openvino-empty-set",
        _OV,
        "ReduceMean/ReduceMax/ReduceMin of float data over an empty set",
        "ReduceMean: 0; ReduceMax: the lowest finite value (-3.4028235e38 for float32)",
        "nan; -inf (and +inf for ReduceMin)",
        "The values over an empty set are the ONNX identities (spec §1).",
        _openvino("ReduceMean", np.zeros((2, 0)), "float32", (1,)),
        lambda case, got, want: (
            case.data.size == 0
            and _float_case(case)
            and case.op in ("ReduceMean", "ReduceMax", "ReduceMin")
            and _values_differ(got, want)
        ),
    ),
)


def classify(runtime: str, case: SpecCase, got: Got, want: Want) -> str | None:
    """The id of the documented divergence covering a disagreement, or None."""
    for divergence in DIVERGENCES:
        if divergence.runtime == runtime and divergence.covers(case, got, want):
            return divergence.id
    return None


def markdown_table() -> str:
    """The divergences as the Markdown table ``docs/semantics.md`` holds."""
    lines = [
        "| id | runtime | case | their answer | ours | why | test |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in DIVERGENCES:
        test = f"`conformance/test_divergences.py::test_runtime_diverges_as_documented[{d.id}]`"
        runtime = d.runtime if d.fixed_in is None else f"{d.runtime} before {d.fixed_in}"
        cells = [f"`{d.id}`", runtime, d.case, d.theirs, d.ours, d.why, test]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
