"""The ONNX profile: every version rule and every error of ``anyreduce.onnx``, per backend.

The version table itself is checked against the schemas of the installed ``onnx``
package; the rules it drives are checked on every backend.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import anyreduce
import anyreduce.onnx
import reference
from anyreduce.onnx import NEWEST_OPSET, VERSIONS, OpVersion
from backends import ALL_DTYPES, Backend, assert_result, make, np_dtype

OPS = reference.OP_NAMES
ONNX_NAMES = {
    "reduce_sum": "ReduceSum",
    "reduce_sum_square": "ReduceSumSquare",
    "reduce_l1": "ReduceL1",
    "reduce_l2": "ReduceL2",
    "reduce_mean": "ReduceMean",
    "reduce_prod": "ReduceProd",
    "reduce_max": "ReduceMax",
    "reduce_min": "ReduceMin",
    "reduce_log_sum": "ReduceLogSum",
    "reduce_log_sum_exp": "ReduceLogSumExp",
}
VERSION_CASES = [
    pytest.param(op, version, id=version.label)
    for op in OPS
    for version in VERSIONS[ONNX_NAMES[op]]
]
VALUES = np.array([[1, 0, 3], [4, 5, 2]])


def call(op: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(anyreduce.onnx, op)(*args, **kwargs)


def attribute_axes_versions(op: str) -> list[OpVersion]:
    return [v for v in VERSIONS[ONNX_NAMES[op]] if not v.axes_input]


# --- the table


def test_table_matches_the_onnx_schemas() -> None:
    defs = pytest.importorskip("onnx.defs")
    type_names = {
        "tensor(bool)": "bool",
        "tensor(int8)": "int8",
        "tensor(uint8)": "uint8",
        "tensor(int32)": "int32",
        "tensor(int64)": "int64",
        "tensor(uint32)": "uint32",
        "tensor(uint64)": "uint64",
        "tensor(bfloat16)": "bfloat16",
        "tensor(float16)": "float16",
        "tensor(float)": "float32",
        "tensor(double)": "float64",
    }
    schemas = defs.get_all_schemas_with_history()
    assert set(VERSIONS) == set(ONNX_NAMES.values())
    for op, versions in VERSIONS.items():
        since = sorted(s.since_version for s in schemas if s.name == op and s.domain == "")
        assert [v.since for v in versions] == since, op
        for version in versions:
            schema = defs.get_schema(op, version.since)
            inputs = [i.name for i in schema.inputs]
            assert version.axes_input == (inputs == ["data", "axes"]), version.label
            assert ("axes" in schema.attributes) == (not version.axes_input), version.label
            has_noop = "noop_with_empty_axes" in schema.attributes
            assert version.noop_with_empty_axes == has_noop, version.label
            (constraint,) = schema.type_constraints
            admitted = {type_names[t] for t in constraint.allowed_type_strs}
            assert set(version.dtypes) == admitted, version.label
            assert version.function == schema.has_function, version.label
            assert version.negative_axes == (version.since >= 11), version.label
    assert max(v.since for vs in VERSIONS.values() for v in vs) == NEWEST_OPSET


@pytest.mark.parametrize(
    ("op", "opset", "label"),
    [
        ("ReduceSum", 1, "ReduceSum-1"),
        ("ReduceSum", 10, "ReduceSum-1"),
        ("ReduceSum", 12, "ReduceSum-11"),
        ("ReduceSum", 28, "ReduceSum-13"),
        ("ReduceL1", 17, "ReduceL1-13"),
        ("ReduceL1", 18, "ReduceL1-18"),
        ("ReduceMax", 12, "ReduceMax-12"),
        ("ReduceMax", 19, "ReduceMax-18"),
        ("ReduceMin", 27, "ReduceMin-20"),
        ("ReduceLogSum", 27, "ReduceLogSum-18"),
        ("ReduceLogSumExp", 28, "ReduceLogSumExp-28"),
    ],
)
def test_opset_selects_the_newest_version_not_after_it(op: str, opset: int, label: str) -> None:
    assert anyreduce.onnx.op_version(op, opset).label == label


def test_op_version_rejects_unknown_operators() -> None:
    with pytest.raises(ValueError, match="'ReduceFoo' is not an ONNX reduction"):
        anyreduce.onnx.op_version("ReduceFoo", 13)


# --- type constraints


@pytest.mark.parametrize(("op", "version"), VERSION_CASES)
def test_type_constraint_of_each_version(
    xp: Any, backend: Backend, op: str, version: OpVersion
) -> None:
    """Every dtype: rejected with the admitted list, or accepted.

    Values are computed for the dtypes this version adds; for the others acceptance is
    shown on zero-size data (the kernels' values per dtype are the core's tests).
    """
    history = VERSIONS[version.op]
    earlier = [v for v in history if v.since < version.since]
    added = set(version.dtypes) - set(earlier[-1].dtypes if earlier else ())
    for dtype in ALL_DTYPES:
        if not backend.has(dtype):
            continue
        values = VALUES if dtype in added else np.zeros((2, 0))
        data = make(xp, values, dtype)
        if dtype in version.dtypes:
            result = call(op, data, [1], keepdims=0, opset=version.since)
            host = values.astype(np_dtype(dtype))
            expected = reference.reduce(op, host, [1], keepdims=False)
            assert_result(result, xp, dtype, (2,), expected, like=data)
        else:
            allowed = ", ".join(version.dtypes)
            match = f"^{version.label}: input dtype {dtype} is not supported; .* takes {allowed}$"
            with pytest.raises(TypeError, match=match):
                call(op, data, [1], opset=version.since)


@pytest.mark.parametrize(
    ("op", "dtype", "first"),
    [
        ("reduce_max", "int8", 12),
        ("reduce_min", "uint8", 12),
        ("reduce_max", "bool", 20),
        ("reduce_min", "bool", 20),
        ("reduce_sum", "bfloat16", 13),
        ("reduce_l2", "bfloat16", 13),
    ],
)
def test_dtype_arrives_at_its_version(
    xp: Any, backend: Backend, op: str, dtype: str, first: int
) -> None:
    if not backend.has(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    data = make(xp, VALUES, dtype)
    with pytest.raises(TypeError, match=f"input dtype {dtype} is not supported"):
        call(op, data, opset=first - 1)
    expected = reference.reduce(op, VALUES.astype(np_dtype(dtype)), None)
    assert_result(call(op, data, opset=first), xp, dtype, (1, 1), expected, like=data)


@pytest.mark.parametrize("op", ["reduce_log_sum", "reduce_log_sum_exp"])
@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_log_reductions_are_float_only_from_28(xp: Any, op: str, dtype: str) -> None:
    data = make(xp, VALUES, dtype)
    expected = reference.reduce(op, VALUES.astype(dtype), [0])
    assert_result(call(op, data, [0], opset=27), xp, dtype, (1, 3), expected, like=data)
    name = ONNX_NAMES[op]
    with pytest.raises(TypeError, match=f"^{name}-28: input dtype {dtype} is not supported"):
        call(op, data, [0])


# --- axes


@pytest.mark.parametrize("op", OPS)
def test_version_1_rejects_negative_axes(xp: Any, op: str) -> None:
    data = make(xp, VALUES, "float32")
    label = f"{ONNX_NAMES[op]}-1"
    match = f"^{label}: axis -1 is out of range for an input of rank 2 \\(valid axes are 0 to 1\\)$"
    with pytest.raises(anyreduce.AxisError, match=match):
        call(op, data, [-1], opset=1)
    with pytest.raises(anyreduce.AxisError, match=f"^{label}: axis -2"):
        call(op, data, [0, -2], opset=10)
    expected = reference.reduce(op, VALUES.astype(np.float32), [1])
    assert_result(call(op, data, [1], opset=1), xp, "float32", (2, 1), expected, like=data)
    assert_result(call(op, data, [-1], opset=11), xp, "float32", (2, 1), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_empty_axes_mean_all_before_axes_became_an_input(xp: Any, op: str) -> None:
    data = make(xp, VALUES, "float32")
    expected = reference.reduce(op, VALUES.astype(np.float32), None)
    for version in attribute_axes_versions(op):
        result = call(op, data, [], opset=version.since)
        assert_result(result, xp, "float32", (1, 1), expected, like=data)
    for axes in (None, np.array([], dtype=np.int64)):
        result = call(op, data, axes, opset=1)
        assert_result(result, xp, "float32", (1, 1), expected, like=data)


@pytest.mark.parametrize("op", OPS)
def test_noop_with_empty_axes_only_where_the_version_has_it(xp: Any, op: str) -> None:
    values = -VALUES.astype(np.float32)
    data = make(xp, values, "float32")
    noop = reference.reduce(op, values, [], noop_with_empty_axes=True)
    full = reference.reduce(op, values, None, keepdims=False)
    for version in VERSIONS[ONNX_NAMES[op]]:
        # False (0) is the default and valid at every version.
        if version.since in (1, NEWEST_OPSET):
            result = call(op, data, [], keepdims=0, noop_with_empty_axes=0, opset=version.since)
            assert_result(result, xp, "float32", (), full, like=data)
        if version.noop_with_empty_axes:
            result = call(op, data, [], noop_with_empty_axes=1, opset=version.since)
            assert_result(result, xp, "float32", (2, 3), noop, like=data)
        else:
            match = (
                f"^{version.label}: noop_with_empty_axes does not exist before "
                f"{version.op}-(13|18); got noop_with_empty_axes=True$"
            )
            with pytest.raises(ValueError, match=match):
                call(op, data, [], noop_with_empty_axes=True, opset=version.since)


@pytest.mark.parametrize(
    ("axes", "shape", "match"),
    [
        ([2], (2, 3), "ReduceL2-18: axis 2 is out of range for an input of rank 2"),
        ([-3], (2, 3), "ReduceL2-18: axis -3 is out of range for an input of rank 2"),
        ([0, -2], (2, 3), r"ReduceL2-18: axis -2 is repeated in axes \[0, -2\]"),
        ([0], (), "ReduceL2-18: axis 0 is given for a rank-0 input"),
    ],
)
def test_axis_errors_name_the_onnx_operator(
    xp: Any, axes: list[int], shape: tuple[int, ...], match: str
) -> None:
    data = make(xp, np.ones(shape), "float32")
    with pytest.raises(anyreduce.AxisError, match=f"^{match}"):
        anyreduce.onnx.reduce_l2(data, axes)


# --- flags, opsets, data


@pytest.mark.parametrize("flag", ["keepdims", "noop_with_empty_axes"])
@pytest.mark.parametrize("value", [2, -1, "1", 0.5, None])
def test_flags_are_0_or_1(xp: Any, flag: str, value: object) -> None:
    data = make(xp, VALUES, "float32")
    with pytest.raises(ValueError, match=f"^ReduceSum-13: {flag} must be True, False, 1 or 0"):
        anyreduce.onnx.reduce_sum(data, **{flag: value})


@pytest.mark.parametrize("opset", [0, -1, 29, 100])
def test_unknown_opset_is_a_value_error(xp: Any, opset: int) -> None:
    data = make(xp, VALUES, "float32")
    match = f"^ReduceMean: opset {opset} is unknown; anyreduce knows opsets 1 to {NEWEST_OPSET}$"
    with pytest.raises(ValueError, match=match):
        anyreduce.onnx.reduce_mean(data, opset=opset)


@pytest.mark.parametrize("opset", ["13", 13.0, True, None])
def test_opset_must_be_an_integer(xp: Any, opset: object) -> None:
    data = make(xp, VALUES, "float32")
    with pytest.raises(TypeError, match=r"^ReduceMean: opset must be an integer"):
        anyreduce.onnx.reduce_mean(data, opset=opset)  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [[1.0, 2.0], 3.0, "x"])
def test_data_must_be_an_array(data: object) -> None:
    with pytest.raises(TypeError, match=r"^ReduceProd-18: data must be an array"):
        anyreduce.onnx.reduce_prod(data)


@pytest.mark.parametrize("op", OPS)
def test_defaults_are_the_newest_opset_with_keepdims(xp: Any, op: str) -> None:
    values = VALUES.astype(np.float32)
    data = make(xp, values, "float32")
    expected = reference.reduce(op, values, None)
    assert_result(call(op, data), xp, "float32", (1, 1), expected, like=data)
    top = getattr(anyreduce, op)(data)
    assert_result(top, xp, "float32", (1, 1), expected, like=data)


# --- run_node


def node(op: str, inputs: list[str], **attributes: Any) -> Any:
    helper = pytest.importorskip("onnx.helper")
    return helper.make_node(op, inputs, ["y"], **attributes)


def test_run_node_axes_attribute_before_the_input_version(xp: Any) -> None:
    values = VALUES.astype(np.float32)
    data = make(xp, values, "float32")
    outputs = anyreduce.onnx.run_node(
        node("ReduceL1", ["x"], axes=[1], keepdims=0), [data], opset=17
    )
    assert len(outputs) == 1
    expected = reference.reduce("reduce_l1", values, [1], keepdims=False)
    assert_result(outputs[0], xp, "float32", (2,), expected, like=data)


def test_run_node_axes_input_from_its_version(xp: Any, backend: Backend) -> None:
    values = VALUES.astype(np.float32)
    data = make(xp, values, "float32")
    expected = reference.reduce("reduce_sum", values, [0], keepdims=False)
    axes_dtype = "int64" if backend.has("int64") else "int32"
    for axes in (make(xp, [0], axes_dtype), np.array([-2], dtype=np.int64)):
        (result,) = anyreduce.onnx.run_node(
            node("ReduceSum", ["x", "axes"], keepdims=0), [data, axes], opset=13
        )
        assert_result(result, xp, "float32", (3,), expected, like=data)


def test_run_node_absent_axes_input(xp: Any) -> None:
    values = -VALUES.astype(np.float32)
    data = make(xp, values, "float32")
    full = reference.reduce("reduce_l2", values, None)
    noop = reference.reduce("reduce_l2", values, [], noop_with_empty_axes=True)
    run = anyreduce.onnx.run_node
    (result,) = run(node("ReduceL2", ["x", ""]), [data, None])
    assert_result(result, xp, "float32", (1, 1), full, like=data)
    (result,) = run(node("ReduceL2", ["x"], noop_with_empty_axes=1), [data])
    assert_result(result, xp, "float32", (2, 3), noop, like=data)


def test_run_node_defaults_to_the_newest_opset(xp: Any) -> None:
    data = make(xp, VALUES, "int32")
    with pytest.raises(TypeError, match=r"^ReduceLogSum-28: input dtype int32"):
        anyreduce.onnx.run_node(node("ReduceLogSum", ["x"]), [data])
    (result,) = anyreduce.onnx.run_node(node("ReduceLogSum", ["x"]), [data], opset=18)
    expected = reference.reduce("reduce_log_sum", VALUES.astype(np.int32), None)
    assert_result(result, xp, "int32", (1, 1), expected, like=data)


@pytest.mark.parametrize(
    ("op", "inputs", "attributes", "opset", "error", "match"),
    [
        (
            "ReduceSum",
            ["x"],
            {"axes": [0]},
            13,
            ValueError,
            "^ReduceSum-13: unexpected attribute 'axes'",
        ),
        ("ReduceSum", ["x", "a"], {}, 11, ValueError, "^ReduceSum-11: takes 1 input"),
        ("ReduceSum", ["x", "a", "b"], {}, 13, ValueError, "^ReduceSum-13: takes 1 or 2 inputs"),
        (
            "ReduceMax",
            ["x"],
            {"noop_with_empty_axes": 1},
            17,
            ValueError,
            "^ReduceMax-13: unexpected attribute 'noop_with_empty_axes'",
        ),
        ("ReduceMean", ["x"], {"keepdims": 3}, 18, ValueError, "^ReduceMean-18: keepdims must be"),
        ("ReduceSum", ["x"], {}, 29, ValueError, "opset 29 is unknown"),
        ("Relu", ["x"], {}, 18, ValueError, "^run_node: operator ai.onnx::Relu is not supported"),
        ("Mul", ["x"], {}, 18, ValueError, r"^Mul \(opset 18\): takes 2 inputs, got 1"),
        (
            "Abs",
            ["x"],
            {"alpha": 1.0},
            18,
            ValueError,
            "unexpected attribute 'alpha'; Abs \\(opset 18\\) has no attributes$",
        ),
        ("Cast", ["x"], {}, 18, ValueError, "attribute 'to' is required"),
        ("Cast", ["x"], {"to": 8}, 18, TypeError, r"cannot cast to ONNX type 8 \(string\)"),
    ],
)
def test_run_node_errors(
    xp: Any,
    op: str,
    inputs: list[str],
    attributes: dict[str, Any],
    opset: int,
    error: type[Exception],
    match: str,
) -> None:
    data = make(xp, VALUES, "float32")
    args = [data] + [make(xp, [0], "int32")] * (len(inputs) - 1)
    with pytest.raises(error, match=match):
        anyreduce.onnx.run_node(node(op, inputs, **attributes), args, opset=opset)


def test_run_node_rejects_other_domains() -> None:
    helper = pytest.importorskip("onnx.helper")
    custom = helper.make_node("ReduceSum", ["x"], ["y"], domain="com.example")
    with pytest.raises(ValueError, match=r"^run_node: operator com.example::ReduceSum"):
        anyreduce.onnx.run_node(custom, [np.ones(3)])


def test_run_node_requires_data() -> None:
    with pytest.raises(ValueError, match=r"^ReduceSum-13: the first input"):
        anyreduce.onnx.run_node(node("ReduceSum", ["", "a"]), [None, np.array([0])])


def test_run_node_elementwise_operators(xp: Any, backend: Backend) -> None:
    values = np.array([[-1.5, 0.0, 4.0]], dtype=np.float32)
    data = make(xp, values, "float32")
    run = anyreduce.onnx.run_node
    with np.errstate(divide="ignore", invalid="ignore"):
        cases = {
            "Abs": np.abs(values),
            "Sqrt": np.sqrt(values),
            "Exp": np.exp(values),
            "Log": np.log(values),
        }
    for op, expected in cases.items():
        (result,) = run(node(op, ["x"]), [data])
        assert_result(result, xp, "float32", (1, 3), expected, like=data)
    (result,) = run(node("Mul", ["x", "x"]), [data, data])
    assert_result(result, xp, "float32", (1, 3), values * values, like=data)
    wide = "float64" if backend.has("float64") else "float32"
    code = 11 if wide == "float64" else 1
    (result,) = run(node("Cast", ["x"], to=code), [data])
    assert_result(result, xp, wide, (1, 3), values, like=data)
    like = make(xp, [1], "int32")
    (result,) = run(node("CastLike", ["x", "like"]), [data, like])
    assert_result(result, xp, "int32", (1, 3), [[-1, 0, 4]], like=data)
    with pytest.raises(TypeError, match="one dtype"):
        run(node("Mul", ["x", "like"]), [data, like])


def test_run_node_abs_of_integers_wraps(xp: Any) -> None:
    data = make(xp, [-128, -3, 7], "int8")
    (result,) = anyreduce.onnx.run_node(node("Abs", ["x"]), [data])
    assert_result(result, xp, "int8", (3,), [-128, 3, 7], like=data)


@pytest.mark.parametrize("op", ["Sqrt", "Exp", "Log"])
def test_run_node_float_only_elementwise_operators(xp: Any, op: str) -> None:
    data = make(xp, [1, 2], "int32")
    with pytest.raises(TypeError, match=rf"^{op} \(opset 28\): input dtype int32 is not"):
        anyreduce.onnx.run_node(node(op, ["x"]), [data])


# --- onnx is optional


def test_onnx_is_needed_only_for_protobufs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    message = r'pip install "anyreduce\[onnx\]"'
    with pytest.raises(ImportError, match=message):
        anyreduce.onnx.backend_for("numpy")
    with pytest.raises(ImportError, match=message):
        anyreduce.onnx.run_node(object(), [np.ones(2)])
    result = anyreduce.onnx.reduce_sum(np.ones(2))
    np.testing.assert_array_equal(result, [2.0])


def test_import_without_onnx_in_a_fresh_interpreter() -> None:
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "import numpy as np, anyreduce.onnx as o\n"
        "assert o.reduce_l1(np.array([-1.0, 2.0]), keepdims=0) == 3.0\n"
        "assert 'onnx' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- backend_for


def test_backend_for_unknown_library() -> None:
    pytest.importorskip("onnx")
    with pytest.raises(ValueError, match=r"^backend_for: unknown array library 'cupy'"):
        anyreduce.onnx.backend_for("cupy")


def test_backend_for_missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")
    monkeypatch.setitem(sys.modules, "dask", None)
    match = r"^backend_for\('dask'\) needs dask: pip install \"anyreduce\[dask\]\""
    with pytest.raises(ImportError, match=match):
        anyreduce.onnx.backend_for("dask")


@pytest.mark.parametrize("library", ["numpy", "torch", "jax", "array_api_strict", "dask"])
def test_backend_runs_models_with_initializers(library: str) -> None:
    onnx = pytest.importorskip("onnx")
    pytest.importorskip(library)
    from onnx import TensorProto, helper, numpy_helper

    backend = anyreduce.onnx.backend_for(library)
    assert issubclass(backend, onnx.backend.base.Backend)
    assert backend is anyreduce.onnx.backend_for(library)
    assert backend.supports_device("CPU")
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSumSquare", ["x", "axes"], ["s"], keepdims=0),
            helper.make_node("Sqrt", ["s"], ["y"]),
        ],
        "norm",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])],
        initializer=[numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert backend.is_compatible(model)
    x = np.array([[3.0, 4.0], [6.0, 8.0]])
    (by_position,) = backend.run_model(model, [x])
    prepared = backend.prepare(model)
    assert isinstance(prepared, onnx.backend.base.BackendRep)
    (by_name,) = prepared.run({"x": x})
    for result in (by_position, by_name):
        assert isinstance(result, np.ndarray)
        assert result.dtype == np.float64
        np.testing.assert_allclose(result, [5.0, 10.0], rtol=1e-15)
    (single,) = backend.run_node(
        helper.make_node("ReduceMax", ["x"], ["y"], axes=[0]), [x], opset_version=11
    )
    np.testing.assert_array_equal(single, [[6.0, 8.0]])


def test_backend_refuses_what_it_cannot_run() -> None:
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    backend = anyreduce.onnx.backend_for("numpy")
    assert not backend.supports_device("CUDA")
    assert not backend.supports_device("TPU")
    info = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["x"])], "g", info, info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert not backend.is_compatible(model)
    custom = helper.make_model(graph, opset_imports=[helper.make_opsetid("com.example", 1)])
    assert not backend.is_compatible(custom)
