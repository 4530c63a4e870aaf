"""``anyreduce.testing.parity``, ``assert_parity``, ``parity_sweep``, ``exact`` and the
``anyreduce parity`` command: never vacuous, on the caller's data, against the frameworks'
own functions."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anyreduce
from anyreduce._cli import main
from anyreduce._conformance import _native
from anyreduce._conformance._data import DISTRIBUTIONS, DTYPES, generate
from anyreduce.testing import assert_parity, exact, magnitude, parity, parity_sweep
from backends import dtype_of, make

pytest.importorskip("onnx")

# --- the exact oracle --------------------------------------------------------------------


def test_tests_use_the_public_oracle() -> None:
    import reference

    assert reference.reduce is exact
    assert reference.magnitude is magnitude


def test_exact_sums_whose_partial_sums_overflow_float64() -> None:
    """``math.fsum`` raises OverflowError when a partial sum leaves float64's range, also
    where the exact sum is finite: the oracle then sums exactly in integers."""
    big = 1.7e308
    x = np.array([big, big, -big])
    assert exact("reduce_sum", x, keepdims=False) == big
    assert exact("reduce_log_sum", x, keepdims=False) == math.log(big)
    assert exact("reduce_l1", x, keepdims=False) == math.inf  # 5.1e308
    tiny = float(np.finfo(np.float64).smallest_subnormal)
    assert exact("reduce_sum", np.array([big, big, -big, tiny]), keepdims=False) == big
    assert exact("reduce_sum", np.array([-big, -big, 1e300]), keepdims=False) == -math.inf
    # Rounded once: max + ulp/2 (the overflow threshold) rounds to inf, max + ulp/4 to max.
    top = float(np.finfo(np.float64).max)
    ulp = 2.0**971  # the spacing of float64 at its maximum
    assert exact("reduce_sum", np.array([top, top, -top, ulp / 2]), keepdims=False) == math.inf
    assert exact("reduce_sum", np.array([top, top, -top, ulp / 4]), keepdims=False) == top
    # A sum beyond float64 whose logarithm is not: log(3.4e308).
    assert exact("reduce_log_sum", np.array([big, big]), keepdims=False) == pytest.approx(
        math.log(big) + math.log(2.0), rel=2**-52
    )
    assert math.isnan(exact("reduce_log_sum", np.array([-big, -big]), keepdims=False))
    magnitudes = magnitude("reduce_sum", np.array([[big, -big, big]]), (1,), keepdims=True)
    assert magnitudes.tolist() == [[math.inf]]
    # An infinity beside finite values whose partial sums overflow: math.fsum raises there
    # too (parity --all over (3, 4, 5) stopped with OverflowError).
    for op in ("reduce_sum", "reduce_l1", "reduce_mean", "reduce_log_sum"):
        assert exact(op, np.array([big, big, math.inf]), keepdims=False) == math.inf, op
    assert exact("reduce_sum", np.array([-big, -big, -math.inf]), keepdims=False) == -math.inf
    assert math.isnan(
        exact("reduce_sum", np.array([big, big, math.inf, -math.inf]), keepdims=False)
    )


def test_error_bounds_of_sums_whose_magnitude_overflows_float64_are_finite() -> None:
    """The error scale of Sum, Mean, L1 and LogSum is ``sum |x|``; beyond float64 (5.1e308
    for float64 [1.7e308, 1.7e308, -1.7e308]) it read inf, and any finite answer agreed.
    The bound is (n + 1) eps of the exact scale: about 4.5e293 here."""
    from anyreduce._conformance._exact import compare
    from anyreduce._conformance._exact import exact as exact_of

    big = 1.7e308
    data = np.array([[big, big, -big], [1.0, 2.0, 3.0]])
    for op, right in [("ReduceSum", big), ("ReduceMean", big / 3)]:
        want = exact_of(op, data, (1,), False)
        assert compare(op, np.array([right, want.values[1]]), want).agrees
        near = np.nextafter(right, 0.0)  # one ulp off: within the bound
        assert compare(op, np.array([near, want.values[1]]), want).agrees
        off = compare(op, np.array([right * (1 - 1e-6), want.values[1]]), want)
        assert not off.agrees, op
    want = exact_of("ReduceLogSum", data, (1,), False)
    assert want.ill is not None
    assert not want.ill.any()  # log(1.7e308): the sum is well within its error bound
    assert not compare("ReduceLogSum", np.array([700.0, math.log(6.0)]), want).agrees
    assert compare("ReduceLogSum", want.values.copy(), want).agrees


def test_exact_takes_the_arrays_of_every_backend(xp: Any, backend: Any) -> None:
    """A PyTorch tensor warned (NumPy's __array_wrap__ deprecation) and a list failed with
    AttributeError: the oracle takes what parity takes."""
    values = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)
    data = make(xp, values, "float32")
    assert exact("reduce_l1", data, 1).tolist() == [[3.0], [7.0]]
    assert magnitude("reduce_sum", data, 0, keepdims=False).tolist() == [4.0, 6.0]
    # A NumPy scalar (a full reduction's value) is the 0-D array of its value.
    assert exact("reduce_sum", np.float32(-2.5)).tolist() == -2.5


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: exact("reduce_sum", [[1.0, 2.0]]), TypeError, "exact: data must be an array"),
        (lambda: magnitude("reduce_sum", 3.0), TypeError, "magnitude: data must be an array"),
        (
            lambda: exact("reduce_sum", np.array([1j])),
            TypeError,
            "exact: dtype complex128 is not supported",
        ),
        (
            lambda: exact("reduce_sum", np.ones(2), keepdims=2),
            ValueError,
            "exact: keepdims must be True, False, 1 or 0, got 2",
        ),
        (
            lambda: magnitude("reduce_sum", np.ones(2), noop_with_empty_axes="no"),
            ValueError,
            "magnitude: noop_with_empty_axes must be True, False, 1 or 0",
        ),
        (lambda: exact("reduce_sum", np.ones((2, 2)), True), TypeError, "exact: axes must be an"),
        (lambda: exact("reduce_sum", np.ones((2, 2)), 1.0), TypeError, "exact: axes must be an"),
        (
            lambda: magnitude("reduce_sum", np.ones((2, 2)), [2]),
            ValueError,
            r"magnitude: axes \[2\] are not distinct axes of a rank-2 array",
        ),
        (lambda: exact("reduce_foo", np.ones(2)), ValueError, "exact: unknown reduction"),
        (
            lambda: exact("reduce_sum", np.array([True])),
            TypeError,
            "exact: ReduceSum takes no bool data; ReduceMax and ReduceMin do",
        ),
        (
            lambda: magnitude("reduce_l2", np.array([True])),
            TypeError,
            "magnitude: ReduceL2 takes no bool data",
        ),
        (
            lambda: exact("reduce_sum", np.ma.masked_array([1.0, 5.0], mask=[0, 1])),
            TypeError,
            r"exact: data is a MaskedArray, whose mask anyreduce would ignore; .*filled",
        ),
        (
            lambda: magnitude("reduce_max", np.ones((2, 2)).view(np.recarray)),
            TypeError,
            "magnitude: data of type recarray, a NumPy array subclass, would lose its meaning",
        ),
        (
            lambda: parity("reduce_sum", data=np.ma.masked_array([1.0, 5.0], mask=[0, 1])),
            TypeError,
            "parity: data is a MaskedArray",
        ),
        (lambda: parity_sweep([], backends="numpy"), ValueError, "parity_sweep: ops: empty"),
        (
            lambda: parity_sweep(["reduce_sum"], (), backends="numpy"),
            ValueError,
            "parity_sweep: dtypes: empty",
        ),
        # Every argument error of parity and parity_sweep names the function.
        (lambda: parity("reduce_sum", (2, 2), "float99"), TypeError, "parity: dtype 'float99'"),
        (
            lambda: parity("reduce_sum", (2, 2), axes=1.5),
            TypeError,
            r"parity: reduce_sum: axes must be an integer or a sequence of integers, got 1\.5",
        ),
        (
            lambda: parity("reduce_sum", (2, 2), axes=2),
            anyreduce.AxisError,
            "parity: reduce_sum: axes 2 is out of range for rank-2 data",
        ),
        (
            lambda: parity("reduce_sum", (2, 2), backends=["nope"]),
            ValueError,
            "parity: backends: unknown name 'nope'",
        ),
        (lambda: parity_sweep(["ReduceFoo"]), ValueError, "parity_sweep: unknown reduction"),
        (
            lambda: parity_sweep(["reduce_sum"], backends="numpy", shape=(2, -1)),
            ValueError,
            r"parity_sweep: shape \[2, -1\] has a negative length",
        ),
        (
            lambda: parity_sweep(["reduce_sum"], backends="numpy", axes=1.5),
            TypeError,
            "parity_sweep: axes must be an integer or a sequence of integers",
        ),
        (
            lambda: parity_sweep(["reduce_sum"], backends="numpy", axes=(0, -2)),
            anyreduce.AxisError,
            r"parity_sweep: axes \[0, -2\] repeat an axis of rank-2 data",
        ),
    ],
    ids=range(24).__iter__(),
)
def test_oracle_and_sweep_refuse_bad_arguments_in_one_line(
    call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{message}") as raised:
        call()
    assert "\n" not in str(raised.value)


def test_oracle_refuses_arrays_without_values_in_one_line() -> None:
    torch = pytest.importorskip("torch")
    meta = torch.ones(3, device="meta")
    for name, call in (("exact", exact), ("magnitude", magnitude)):
        with pytest.raises(TypeError, match=f"^{name}: data must have values") as raised:
            call("reduce_sum", meta)
        assert "\n" not in str(raised.value)
    jax = pytest.importorskip("jax")
    with pytest.raises(TypeError, match=r"^parity: data must have values") as raised:
        jax.jit(lambda v: parity("reduce_sum", data=v))(jax.numpy.ones(3))
    assert "\n" not in str(raised.value)


@pytest.mark.filterwarnings("ignore:The PyTorch API of MaskedTensors:UserWarning")
def test_oracle_refuses_masked_tensors() -> None:
    torch = pytest.importorskip("torch")
    data = torch.masked.masked_tensor(torch.tensor([1.0, 5.0]), torch.tensor([True, False]))
    for name, function in (("exact", exact), ("magnitude", magnitude)):
        with pytest.raises(TypeError, match=f"^{name}: data is a MaskedTensor"):
            function("reduce_sum", data)
    with pytest.raises(TypeError, match=r"^parity: data is a MaskedTensor"):
        parity("reduce_sum", data=data)


def test_parity_sweep_takes_one_name_as_a_list_of_one() -> None:
    """``dtypes="float32"`` was split into letters ("dtype 'f' is not supported")."""
    report = parity_sweep("reduce_max", "float32", "normal", backends="numpy")
    assert report.ok
    assert (report.ops, report.dtypes, report.distributions) == (
        ("reduce_max",),
        ("float32",),
        ("normal",),
    )


def test_exact_follows_the_contract() -> None:
    assert exact("reduce_l2", np.array([300, 400], np.float16), keepdims=False) == 500.0
    wrapped = exact("reduce_sum", np.array([100, 100], np.int8), keepdims=False)
    assert wrapped.dtype == object
    assert wrapped[()] == -56  # modulo 2**8
    # The mean as an exact fraction: 2**53 + 1 is no float64, its half is.
    mean = exact("ReduceMean", np.array([2.0**53, 1.0]), 0, keepdims=False)
    assert mean[()] == 2.0**52 + 0.5
    # No intermediate product overflows float64.
    assert exact("reduce_prod", np.array([2.0**600, 2.0**600, 2.0**-700])).tolist() == [2.0**500]
    noop = exact("reduce_l1", np.array([-2.0, 3.0]), [], noop_with_empty_axes=True)
    assert noop.tolist() == [2.0, 3.0]
    assert magnitude("reduce_sum", np.array([[-1.0, 2.0]]), 1).tolist() == [[3.0]]


def test_a_log_sum_of_a_sum_near_zero_takes_any_answer() -> None:
    """Large terms that cancel: a correctly rounded float32 accumulation may give any sign,
    so the log may be anything; a well-conditioned row is still checked."""
    data = np.array([[3e7, -3e7 - 2.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    report = parity("reduce_log_sum", data=data, axes=1, backends=["numpy"])
    assert report.ok, report.failure_message()
    from anyreduce._conformance._exact import compare
    from anyreduce._conformance._exact import exact as exact_of

    want = exact_of("ReduceLogSum", data, (1,), True)
    assert want.ill is not None
    assert want.ill.tolist() == [[True], [False]]
    anything = np.array([[np.nan], [math.log(6.0)]], np.float32)
    assert compare("ReduceLogSum", anything, want).agrees
    wrong = np.array([[np.nan], [1.0]], np.float32)
    assert not compare("ReduceLogSum", wrong, want).agrees


def test_exact_refuses_what_it_cannot_answer() -> None:
    with pytest.raises(ValueError, match="unknown reduction 'reduce_median'"):
        exact("reduce_median", np.zeros(3))
    with pytest.raises(ValueError, match="axes"):
        exact("reduce_sum", np.zeros(3), [0, 0])


# --- never vacuous -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pytorch", "Torch", "nosuch"])
def test_an_unknown_backend_is_an_error_listing_the_valid_names(name: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown name '{name}'; expected one of numpy, torch"):
        parity("reduce_sum", (4, 4), "float32", backends=[name])


def test_jax_without_64_bit_types_is_a_backend_by_name() -> None:
    """JAX's default mode ("jax32": no float64, no int64) is compared when named; the
    "jax" row runs with 64-bit types on."""
    pytest.importorskip("jax")
    data = np.array([[2**30 + 5, 2**30 + 3, 7]], np.int32)
    report = parity("reduce_log_sum_exp", data=data, axes=1, backends=["jax32", "jax"])
    assert [row.name for row in report.rows] == ["jax", "jax32"]
    assert report.ok, report
    report = parity("reduce_sum", (4, 4), "float64", backends=["jax32"])
    assert report.not_run == {"jax32": "has no float64"}
    # Not among the defaults: the conformance suite's backends are ONNX backends.
    default = parity("reduce_sum", (2, 2), backends=None)
    assert "jax32" not in {row.name for row in default.rows}


@pytest.mark.parametrize("axes", [5, -3, (0, 0), (1, -1)])
def test_axes_the_op_rejects_are_an_axis_error_up_front(axes: Any) -> None:
    with pytest.raises(anyreduce.AxisError, match=r"reduce_sum: axes .* rank-2"):
        parity("reduce_sum", (4, 4), "float32", axes)


@pytest.mark.parametrize("dtype", ["complex64", "float128", "object", "str"])
def test_a_dtype_nobody_supports_is_a_type_error(dtype: str) -> None:
    with pytest.raises(TypeError, match=rf"dtype '{dtype}' is not supported; expected one of"):
        parity("reduce_sum", (4, 4), dtype)


def test_bool_is_for_max_and_min_only() -> None:
    with pytest.raises(TypeError, match="reduce_sum takes no bool"):
        parity("reduce_sum", (4, 4), "bool")
    assert parity("reduce_max", (4, 4), "bool", backends=["numpy"]).ok


def test_a_report_with_nothing_compared_is_not_ok() -> None:
    pytest.importorskip("array_api_strict")
    report = parity("reduce_sum", (4, 4), "float16", backends=["array_api_strict"])
    assert report.rows == []
    assert report.not_run["array_api_strict"] == "has no float16"
    assert not report.ok
    assert "nothing was compared" in str(report)
    with pytest.raises(AssertionError, match="nothing was compared"):
        assert_parity("reduce_sum", (4, 4), "float16", backends=["array_api_strict"])


def test_a_row_that_raised_fails_unless_expected(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("kernel missing")

    monkeypatch.setattr(anyreduce, "reduce_sum", broken)
    names = ["numpy", "onnx.reference"]
    report = parity("reduce_sum", (4, 4), "float32", backends=names)
    (failed,) = [r for r in report.rows if r.error]
    assert failed.name == "numpy"
    assert failed.error == "RuntimeError: kernel missing"
    assert not report.ok
    expected = parity("reduce_sum", (4, 4), "float32", backends=names, expected_errors=["numpy"])
    assert expected.ok
    assert "(expected)" in str(expected)
    assert "expected_errors=['numpy']" in expected.reproduce()
    assert "--expect-error numpy" in expected.reproduce()
    with pytest.raises(ValueError, match="expected_errors: unknown name 'nunpy'"):
        parity("reduce_sum", (4, 4), expected_errors=["nunpy"])
    # Nothing compared but the expected error: still vacuous.
    alone = parity("reduce_sum", (4, 4), backends=["numpy"], expected_errors=["numpy"])
    assert not alone.ok


# --- the caller's data and generated distributions ---------------------------------------


def test_parity_on_the_callers_array(xp: Any) -> None:
    values = [[1.5, -2.0, 3.25], [1e30, -1e30, 1.0]]
    report = assert_parity("reduce_sum", data=make(xp, values, "float32"), axes=1)
    assert report.distribution == "given"
    assert report.shape == (2, 3)
    assert report.dtype == "float32"
    assert report.rows
    assert all(r.agrees for r in report.rows if r.kind == "backend")
    ints = parity("reduce_sum", data=make(xp, [100, 100], "int16"), backends=["numpy"])
    assert ints.dtype == "int16"
    assert ints.ok
    assert ints.rows[0].actual == 200


def test_given_data_is_checked() -> None:
    with pytest.raises(TypeError, match="either shape or data"):
        parity("reduce_sum", (2,), data=np.zeros(2))
    with pytest.raises(TypeError, match="differs from the data's float64"):
        parity("reduce_sum", dtype="float32", data=np.zeros(2))
    with pytest.raises(TypeError, match="data must be an array"):
        parity("reduce_sum", data=[1.0, 2.0])
    with pytest.raises(TypeError, match="data dtype 'complex128' is not supported"):
        parity("reduce_sum", data=np.zeros(2, np.complex128))


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "uint16"])
def test_each_distribution_on_numpy(distribution: str, dtype: str) -> None:
    report = parity("reduce_sum", (3, 40), dtype, 1, distribution=distribution, backends=["numpy"])
    assert report.distribution == distribution
    (row,) = report.rows
    assert row.agrees, report.failure_message()


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_dtype_draws_every_distribution(distribution: str) -> None:
    for dtype in DTYPES:
        data = generate((3, 5, 4), dtype, distribution, 1, (0, 2))
        assert data.shape == (3, 5, 4)
        assert data.dtype.name == dtype


def test_the_distributions_draw_what_they_say() -> None:
    wide = generate((64, 64), "float32", "wide", 0, (1,)).astype(np.float64)
    assert np.abs(wide).max() / np.abs(wide).min() > 1e60
    specials = generate((64, 64), "float16", "specials", 0, (1,))
    assert np.isnan(specials).any()
    assert np.isposinf(specials).any()
    assert np.isneginf(specials).any()
    assert (np.abs(specials[np.isfinite(specials)]) == np.finfo(np.float16).max).any()
    assert (specials == np.float16(2.0**-24)).any()  # the smallest subnormal
    cancelling = generate((4, 100), "float32", "cancelling", 0, (1,)).astype(np.float64)
    sums = [math.fsum(row) for row in cancelling]
    sizes = [math.fsum(abs(v) for v in row) for row in cancelling]
    assert all(abs(s) < 1e-4 * m for s, m in zip(sums, sizes, strict=True))
    # Drawn per reduced slice: over axis 0, the columns cancel.
    columns = generate((100, 4), "float32", "cancelling", 0, (0,)).astype(np.float64)
    assert all(abs(math.fsum(c)) < 1e-4 * math.fsum(abs(c)) for c in columns.T)
    ints = generate((8, 8), "int8", "integers", 0, (1,))
    assert ints.dtype == np.int8
    assert np.abs(ints.astype(int)).max() <= 100


# --- the frameworks' own functions -------------------------------------------------------


def test_native_norms_of_float16_300_400() -> None:
    data = np.array([300, 400], np.float16)
    report = parity("reduce_l2", data=data, native=True, backends=["numpy", "torch", "jax"])
    rows = {r.name: r for r in report.rows}
    assert rows["numpy"].kind == "backend"
    assert rows["numpy"].actual == 500.0
    assert rows["np.linalg.norm"].kind == "native"
    assert rows["np.linalg.norm"].actual == math.inf
    assert not rows["np.linalg.norm"].agrees
    if "torch" in rows:
        assert rows["torch.linalg.vector_norm"].actual == 500.0
        assert rows["torch.linalg.vector_norm"].agrees
    if "jax" in rows:
        assert rows["jnp.linalg.norm"].actual == math.inf
    assert not report.ok


def test_native_rows_say_when_a_function_widens() -> None:
    report = parity("reduce_sum", (2, 8), "int8", 1, native=True, backends=["numpy"])
    row = next(r for r in report.rows if r.name == "np.sum")
    assert row.note == "returns int64, compared as int8"
    assert row.agrees


def test_natives_not_installed_or_not_taking_the_case_are_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _native.Native.available
    monkeypatch.setattr(
        _native.Native, "available", lambda self: self.library != "scipy" and real(self)
    )
    report = parity("reduce_log_sum_exp", (2, 4), native=True, backends=["numpy", "scipy"])
    assert report.not_run["scipy.special.logsumexp"] == "scipy is not installed"
    assert report.ok
    ints = parity("reduce_log_sum_exp", (2, 4), "int32", native=True, backends=["numpy"])
    assert "takes floating-point data only" in ints.not_run["np.logaddexp.reduce"]


# --- assert_parity -----------------------------------------------------------------------


def test_assert_parity_message_names_the_worst_element_and_a_reproducer() -> None:
    data = np.array([300, 400], np.float16)
    with pytest.raises(AssertionError) as caught:
        assert_parity("reduce_l2", data=data, native=True, backends=["numpy"])
    message = str(caught.value)
    assert message.startswith("parity of reduce_l2 on float16[2] over all axes, the given data:")
    assert "np.linalg.norm (native): worst output [0]: exact 500.0, got inf" in message
    assert "inputs [300.0, 400.0]" in message
    assert "numpy (backend)" not in message  # anyreduce agrees
    minimal = next(line for line in message.splitlines() if "minimal:" in line)
    call = minimal.split("minimal: ", 1)[1]
    again = eval(call, {"np": np, "anyreduce": anyreduce})  # our own message
    assert again.native
    assert not again.ok


def test_assert_parity_reproduces_generated_data() -> None:
    with pytest.raises(AssertionError) as caught:
        assert_parity("reduce_l2", (2, 8), "float16", 1, distribution="wide", native=True,
                      backends=["numpy"])  # fmt: skip
    line = next(s for s in str(caught.value).splitlines() if s.startswith("reproduce:"))
    call = line.removeprefix("reproduce: ")
    assert "distribution='wide', seed=0, axes=[1], native=True" in call
    again = eval(call, {"anyreduce": anyreduce})  # our own message
    assert not again.ok


def test_assert_parity_returns_the_report_when_ok() -> None:
    report = assert_parity("reduce_mean", (3, 5), "float32", 1, backends=["numpy"])
    assert report.ok
    assert report.rows[0].name == "numpy"


# --- the sweep ---------------------------------------------------------------------------


def test_sweep_matrix_of_library_by_op() -> None:
    report = parity_sweep(
        ["reduce_l2", "reduce_max"],
        ["float16", "bool"],
        ["normal", "wide"],
        shape=(2, 8),
        backends=["numpy"],
        native=True,
    )
    assert report.comparisons > 0
    assert report.matrix["numpy"]["reduce_l2"].text().endswith(" ok")
    assert report.matrix["numpy"]["reduce_max"].runs == 4  # float16 and bool, 2 each
    assert report.matrix["np.linalg.norm"]["reduce_l2"].text() == "inf 1/2 NO"
    assert report.matrix["np.linalg.norm"]["reduce_max"].text() == "-"
    assert not report.ok
    assert {p["library"] for p in report.problems} >= {"np.linalg.norm"}
    lines = report.lines()
    assert lines[0].split()[:4] == ["library", "kind", "reduce_l2", "reduce_max"]
    assert json.loads(json.dumps(report.as_json(), allow_nan=False))["ok"] is False


def test_sweep_ok_and_refusals() -> None:
    report = parity_sweep(["reduce_sum"], ["float32"], ["normal"], backends=["numpy"])
    assert report.ok
    assert report.matrix["numpy"]["reduce_sum"].text().endswith(" ok")
    with pytest.raises(TypeError, match="no op takes"):
        parity_sweep(["reduce_sum"], ["bool"])
    with pytest.raises(ValueError, match="unknown name"):
        parity_sweep(["reduce_sum"], backends=["Torch"])


# --- the command line --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--backend", "nosuch"], "--backend: unknown name 'nosuch'; expected one of numpy"),
        (["--backend", "Torch"], "--backend: unknown name 'Torch'"),
        (["--axes", "5"], "--axes 5 is out of range for rank-2 data; allowed: distinct"),
        (["--axes", "0,0"], "--axes [0, 0] repeat an axis"),
        (["--axes", "x"], "--axes must be comma-separated integers"),
        (["--dtype", "complex64"], "--dtype 'complex64' is not supported; expected one of bool"),
        (["--dtype", "float128"], "--dtype 'float128' is not supported"),
        (["--dtype", "object"], "--dtype 'object' is not supported"),
        (["--dtype", "bool"], "--dtype bool: reduce_sum takes no bool"),
        (["--shape", "99999999999"], "--shape [99999999999] has 99999999999 elements; at most"),
        (["--shape=-1,4"], "--shape [-1, 4] has a negative length"),
        (["--shape", "4x4"], "--shape must be comma-separated integers"),
        (["--distribution", "cauchy"], "--distribution 'cauchy' is unknown; expected one of"),
        (["--json", "x.json"], "--json and --html go with --all"),
        (["--expect-error", "onnxrt"], "--expect-error: unknown name 'onnxrt'; expected one of"),
    ],
)
def test_command_refuses_bad_arguments_in_one_line(
    argv: list[str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parity", "reduce_sum", "--shape", "4,4", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("anyreduce parity: ")
    assert names in line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "or --all for every one"),
        (["--all", "reduce_sum", "--dtype", "bool"], "no op takes the dtypes given"),
        (["--all", "--dtype", "float16,complex64"], "--dtype 'complex64' is not supported"),
        (["--all", "--distribution", "normal,cauchy"], "--distribution 'cauchy' is unknown"),
        (["--all", "--axes", "5"], "--all: --axes 5 is out of range for rank-2 data"),
        (["--all", "--backend", "Torch"], "--backend: unknown name 'Torch'"),
        (["--all", "--shape", "99999999999"], "at most 10000000 are allowed"),
        (["--all", "--json", "/no/such/dir/x.json"], "--json /no/such/dir/x.json: no such"),
        (["--all", "--data", "x.npy"], "--data compares one op; leave out --all"),
    ],
)
def test_command_all_refuses_bad_arguments_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parity", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert says in line


def test_command_on_a_data_file_exits_1_on_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.array([300, 400], np.float16))
    argv = ["parity", "reduce_l2", "--data", str(path), "--backend", "numpy"]
    assert main(argv) == 0
    assert "ok: 1 compared" in capsys.readouterr().out
    assert main([*argv, "--native"]) == 1
    out = capsys.readouterr().out
    assert "np.linalg.norm" in out
    assert "exact 500.0, got inf" in out


def test_command_refuses_unreadable_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([1, "a"], dtype=object), allow_pickle=True)
    complex_file = tmp_path / "complex.npy"
    np.save(complex_file, np.zeros(3, np.complex64))
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    archive = tmp_path / "two.npz"
    np.savez(archive, a=np.zeros(2), b=np.ones(2))
    for path, says in [
        (objects, "cannot read a .npy array of numbers"),
        (tmp_path / "missing.npy", "cannot read"),
        (empty, "cannot read"),
        (archive, "not a .npy array"),
        (complex_file, "dtype 'complex64' is not supported"),
    ]:
        assert main(["parity", "reduce_sum", "--data", str(path)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert says in line
        assert str(path) in line


def test_command_all_writes_matrix_json_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, page = tmp_path / "sweep.json", tmp_path / "sweep.html"
    argv = ["parity", "--all", "--dtype", "float16", "--distribution", "normal,wide"]
    argv += ["--shape", "2,8", "--backend", "numpy", "--native"]
    assert main([*argv, "--json", str(report), "--html", str(page)]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""  # no progress bar without a terminal
    assert "library" in captured.out
    assert "np.linalg.norm" in captured.out
    assert "NOT OK" in captured.out
    data = json.loads(report.read_text())
    assert data["dtypes"] == ["float16"]
    assert data["distributions"] == ["normal", "wide"]
    names = [entry["name"] for entry in data["libraries"]]
    assert "numpy" in names
    assert "np.linalg.norm" in names
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<table class='matrix'>" in html
    assert "<script" not in html
    assert "http" not in html
    ok = ["parity", "--all", "reduce_sum", "--dtype", "float32", "--distribution", "normal"]
    assert main([*ok, "--shape", "2,8", "--backend", "numpy"]) == 0


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
def test_command_all_progress_on_a_terminal(
    rich: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util
    import sys

    if rich:
        pytest.importorskip("rich")
    else:
        find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: None if name == "rich" else find_spec(name, *a),
        )
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    argv = ["parity", "--all", "reduce_sum", "--dtype", "float32,int8", "--shape", "2,4"]
    assert main([*argv, "--distribution", "normal", "--backend", "numpy"]) == 0
    err = capsys.readouterr().err
    if not rich:
        assert "[2/2] reduce_sum int8 normal" in err
    assert main([*argv, "--distribution", "normal", "--backend", "numpy", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_dtype_of_the_fixture_names(xp: Any) -> None:
    """The backends' own dtypes reach parity under their numpy names."""
    data = make(xp, [1, 2, 3], "int32")
    assert data.dtype == dtype_of(xp, "int32")
    assert parity("reduce_prod", data=data, backends=["numpy"]).rows[0].actual == 6


def test_parity_runs_with_numpy_alone() -> None:
    """No backend, runtime, framework, ml_dtypes, scipy or rich: what is absent is listed,
    the rest compared."""
    import subprocess
    import sys

    code = (
        "import importlib.util, sys\n"
        "blocked = {'torch', 'jax', 'jaxlib', 'dask', 'array_api_strict', 'onnx', 'onnxruntime',"
        " 'openvino', 'ml_dtypes', 'hypothesis', 'rich', 'scipy'}\n"
        "class Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in blocked:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Blocker())\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name.split('.')[0] in blocked"
        " else real(name, *a)\n"
        "from anyreduce._cli import main\n"
        "code = main(['parity', 'reduce_log_sum_exp', '--shape', '3,4', '--native'])\n"
        "assert main(['parity', 'reduce_sum', '--dtype', 'bfloat16']) == 2\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: 2 compared" in done.stdout  # anyreduce and np.logaddexp.reduce
    assert "torch                            not run: not installed" in done.stdout
    assert "scipy.special.logsumexp          not run: scipy is not installed" in done.stdout
    assert "onnxruntime                      not run: onnxruntime is not installed" in done.stdout
    assert "bfloat16 needs the ml_dtypes package" in done.stderr


@pytest.mark.parametrize(
    ("seed", "error"), [(-3, ValueError), (1.5, TypeError), ("0", TypeError), (True, TypeError)]
)
def test_a_seed_that_is_not_a_count_is_refused_in_one_line(seed: Any, error: type) -> None:
    message = rf"^parity: seed must be an integer of 0 or more, got {seed!r}$"
    with pytest.raises(error, match=message):
        parity("reduce_sum", (4, 4), "float32", seed=seed, backends=["numpy"])
    with pytest.raises(error, match=message.replace("parity", "parity_sweep")):
        parity_sweep(["reduce_sum"], ["float32"], seed=seed, backends=["numpy"])


def test_command_refuses_a_negative_seed_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["parity", "reduce_sum", "--shape", "4,4", "--seed=-3"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("anyreduce parity: argument --seed: expected 0 or more, got -3")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--axes", "-1,0"], None),
        (["--axes", "-2,-1"], None),
        (["--axes", "-1"], None),
        (["--shape", "-1,4"], "anyreduce parity: --shape [-1, 4] has a negative length"),
    ],
    ids=str,
)
def test_command_takes_lists_that_start_with_a_negative_number(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str | None
) -> None:
    """``--axes -1,0`` was read as an option ("argument --axes: expected one argument"),
    where ``--axes -1`` and ``--axes=-1,0`` worked."""
    command = ["parity", "reduce_sum", "--shape", "3,4", "--backend", "numpy", "--no-progress"]
    if message is None:
        assert main(command + argv) == 0
        return
    assert main(["parity", "reduce_sum", "--backend", "numpy", *argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(message), line


def test_jax_on_the_cpu_is_judged_on_subnormal_inputs_read_as_zero() -> None:
    """XLA's CPU code reads subnormal inputs as zero, the contract's one exception: JAX's
    product of an infinity and a subnormal number is NaN there (inf * 0), and the report
    says it agrees, noting why; the other backends are held to the exact product."""
    pytest.importorskip("jax")
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    data = np.array([[np.inf, tiny], [3.0, 2.0]], np.float32)
    report = parity("reduce_prod", data=data, axes=1, backends=["numpy", "jax"])
    rows = {row.name: row for row in report.rows}
    assert rows["numpy"].agrees
    assert rows["jax"].agrees, rows["jax"].detail
    assert "subnormal" in rows["jax"].note
    assert report.ok
    assert "subnormal" not in rows["numpy"].note


def test_subnormal_inputs_read_as_zero_excuse_no_other_error() -> None:
    """Judged on its subnormal numbers read as zero, a wrong answer is still wrong."""
    from anyreduce._conformance._exact import exact as exact_of
    from anyreduce._conformance._parity import ParityReport, _as_zeros, _row

    tiny = float(np.finfo(np.float32).smallest_subnormal)
    host = np.array([[np.inf, tiny], [3.0, 2.0]], np.float32)
    report = parity("reduce_prod", data=host, axes=1, backends=["numpy"])
    assert isinstance(report, ParityReport)
    want = exact_of("ReduceProd", host, (1,), True)
    for got, agrees in (([[np.nan], [6.0]], True), ([[np.nan], [7.0]], False)):
        values = np.array(got, np.float32)
        row = _row("jax", "backend", "ReduceProd", values, want, host, (1,))
        assert not row.agrees
        judged = _as_zeros(report, row, values, host, (1,))
        assert (judged is not None and judged.agrees) is agrees
    plain = np.array([[np.inf, 1.0], [3.0, 2.0]], np.float32)  # nothing to read as zero
    row = _row(
        "jax",
        "backend",
        "ReduceProd",
        np.array([[np.nan], [6.0]], np.float32),
        exact_of("ReduceProd", plain, (1,), True),
        plain,
        (1,),
    )
    assert _as_zeros(report, row, np.array([[np.nan], [6.0]], np.float32), plain, (1,)) is None
