"""Malformed calls of the ONNX backend: refused with our error, naming what is wrong.

``anyreduce.onnx.backend_for(library)`` and its ``prepare``, ``run`` (of what ``prepare``
returns), ``run_model``, ``run_node`` and ``supports_device`` are walked with a table of
bad arguments: wrong types, wrong counts, unknown names, dtypes and shapes the model does
not declare, malformed nodes and attributes, devices the library cannot use. For each, on
every library: the exception is a TypeError or ValueError raised by anyreduce (never a
traceback from another package), its message is one line naming the argument, node or
attribute, the inputs are unchanged and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anyreduce
import anyreduce.onnx
from backends import Backend

onnx = pytest.importorskip("onnx")
helper = onnx.helper
TensorProto = onnx.TensorProto

ANYREDUCE_SOURCE = Path(anyreduce.__file__).resolve().parent


def _model(
    nodes: list[Any],
    inputs: list[Any],
    outputs: list[Any] | None = None,
    opset: int | None = 18,
) -> Any:
    graph = helper.make_graph(
        nodes,
        "probe",
        inputs,
        outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
    )
    imports = [] if opset is None else [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


X_INFO = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
AXES_INFO = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
SUM = helper.make_node("ReduceSum", ["x"], ["y"])
SUM_AXES = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
MODEL = _model([SUM], [X_INFO])
MODEL_AXES = _model(
    [SUM_AXES],
    [X_INFO, AXES_INFO],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
)
NO_OPSET = _model([SUM], [X_INFO], opset=None)
RELU = _model([helper.make_node("Relu", ["x"], ["y"])], [X_INFO])
STRING_INITIALIZER = _model([SUM], [])
STRING_INITIALIZER.graph.initializer.append(
    helper.make_tensor("x", TensorProto.STRING, [1], [b"a"])
)
SEQUENCE_INPUT = _model(
    [helper.make_node("Identity", ["x"], ["y"])],
    [helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, [2])],
)


def _node(op: str, inputs: list[str], outputs: tuple[str, ...] = ("y",), **attrs: Any) -> Any:
    return helper.make_node(op, inputs, list(outputs), **attrs)


def _with_attribute(node: Any, name: str, value: Any, kind: int) -> Any:
    node = _node(node.op_type, list(node.input))
    node.attribute.append(helper.make_attribute(name, value, attr_type=kind))
    return node


class Data:
    """The arrays the calls use, fresh for each test, and copies to prove them untouched."""

    def __init__(self) -> None:
        self.x = np.array([[1.0, 2.0], [4.0, 8.0]], dtype=np.float32)
        self.axes = np.array([1], dtype=np.int64)
        self.words = np.array([["a", "b"], ["c", "d"]])
        self.objects = np.array([[1.0, None], [2.0, 3.0]], dtype=object)
        self.flags = np.array([True, False])
        self.complex = np.array([1 + 2j, 3 - 1j])
        self.bytes = np.array([1, 2], dtype=np.uint8)
        self.ints = np.array([4, 9], dtype=np.int32)
        self._before = {k: np.array(v, copy=True) for k, v in vars(self).items()}

    def unchanged(self) -> bool:
        return all(
            np.array_equal(getattr(self, k), v, equal_nan=v.dtype.kind == "f")
            and getattr(self, k).dtype == v.dtype
            for k, v in self._before.items()
        )


Call = Callable[[Any, Data], Any]

# (id, call(backend class, data), exception type, regular expression the message matches)
BAD: list[tuple[str, Call, type[Exception], str]] = [
    # run_model / run: inputs
    (
        "inputs-empty-list",
        lambda be, d: be.run_model(MODEL, []),
        ValueError,
        r"takes 1 input.*'x'.*got 0",
    ),
    (
        "inputs-too-many",
        lambda be, d: be.run_model(MODEL, [d.x, d.x]),
        ValueError,
        r"takes 1 input.*got 2",
    ),
    (
        "inputs-unknown-name",
        lambda be, d: be.run_model(MODEL, {"z": d.x}),
        ValueError,
        r"'z' is not an input of the model; its inputs are 'x'",
    ),
    (
        "inputs-missing-name",
        lambda be, d: be.run_model(MODEL, {}),
        ValueError,
        r"input 'x' is missing",
    ),
    (
        "inputs-an-array",
        lambda be, d: be.run_model(MODEL, d.x),
        TypeError,
        r"inputs must be a list of NumPy arrays .* got ndarray",
    ),
    (
        "inputs-a-string",
        lambda be, d: be.run_model(MODEL, "x"),
        TypeError,
        r"inputs must be a list .* got str",
    ),
    (
        "inputs-none",
        lambda be, d: be.run_model(MODEL, None),
        TypeError,
        r"inputs must be a list .* got NoneType",
    ),
    (
        "input-a-list",
        lambda be, d: be.run_model(MODEL, [d.x.tolist()]),
        TypeError,
        r"input 'x' must be a NumPy array, got list",
    ),
    (
        "input-wrong-dtype",
        lambda be, d: be.run_model(MODEL, [d.x.astype(np.float64)]),
        TypeError,
        r"input 'x' has dtype float64; the model declares float32",
    ),
    (
        "input-wrong-shape",
        lambda be, d: be.run_model(MODEL, [d.x[:1]]),
        ValueError,
        r"input 'x' has shape \(1, 2\); the model declares \(2, 2\)",
    ),
    (
        "input-wrong-rank",
        lambda be, d: be.run_model(MODEL, [d.x[None]]),
        ValueError,
        r"input 'x' has shape \(1, 2, 2\)",
    ),
    (
        "input-strings",
        lambda be, d: be.run_model(MODEL, [d.words]),
        TypeError,
        r"input 'x' has dtype <U1; anyreduce takes bool, integer and floating",
    ),
    (
        "input-objects",
        lambda be, d: be.run_model(MODEL, [d.objects]),
        TypeError,
        r"input 'x' has dtype object",
    ),
    (
        "axes-input-out-of-range",
        lambda be, d: be.run_model(MODEL_AXES, [d.x, np.array([5])]),
        anyreduce.AxisError,
        r"ReduceSum-13: axis 5 is out of range",
    ),
    (
        "axes-input-float",
        lambda be, d: be.run_model(MODEL_AXES, [d.x, np.array([0.5])]),
        TypeError,
        r"input 'axes' has dtype float64; the model declares int64",
    ),
    # prepare / run_model: models
    (
        "model-none",
        lambda be, d: be.run_model(None, [d.x]),
        TypeError,
        r"prepare: model must be an onnx.ModelProto, got NoneType",
    ),
    (
        "model-bytes",
        lambda be, d: be.prepare(MODEL.SerializeToString()),
        TypeError,
        r"prepare: model must be an onnx.ModelProto, got bytes",
    ),
    (
        "model-a-node",
        lambda be, d: be.prepare(SUM),
        TypeError,
        r"prepare: model must be an onnx.ModelProto, got NodeProto",
    ),
    ("model-no-default-opset", lambda be, d: be.prepare(NO_OPSET), ValueError, r"prepare: .*opset"),
    (
        "model-unsupported-op",
        lambda be, d: be.prepare(RELU),
        ValueError,
        r"prepare: operator ai.onnx::Relu is not supported; anyreduce runs Abs, Add",
    ),
    (
        "model-string-initializer",
        lambda be, d: be.prepare(STRING_INITIALIZER),
        TypeError,
        r"prepare: initializer 'x' has dtype object; anyreduce takes bool, integer and floating",
    ),
    (
        "model-sequence-input",
        lambda be, d: be.prepare(SEQUENCE_INPUT),
        ValueError,
        r"prepare: graph input 'x' is a sequence_type; anyreduce runs tensors only",
    ),
    # devices
    (
        "device-unknown",
        lambda be, d: be.prepare(MODEL, "XYZ"),
        ValueError,
        r"prepare: device must be 'CPU', 'CUDA' or 'CUDA:N'.*got 'XYZ'",
    ),
    (
        "device-lower-case",
        lambda be, d: be.run_model(MODEL, [d.x], "cpu"),
        ValueError,
        r"prepare: device must be .*got 'cpu'",
    ),
    (
        "device-none",
        lambda be, d: be.prepare(MODEL, None),
        TypeError,
        r"prepare: device must be a string.*got NoneType",
    ),
    (
        "device-cuda-99",
        lambda be, d: be.prepare(MODEL, "CUDA:99"),
        ValueError,
        r"prepare: device 'CUDA:99' is not available to \w+ here",
    ),
    (
        "device-cpu-1",
        lambda be, d: be.prepare(MODEL, "CPU:1"),
        ValueError,
        r"prepare: device 'CPU:1' is not available",
    ),
    (
        "run-node-device",
        lambda be, d: be.run_node(SUM, [d.x], "XYZ"),
        ValueError,
        r"run_node: device must be .*got 'XYZ'",
    ),
    # run_node: nodes and their inputs
    (
        "node-none",
        lambda be, d: be.run_node(None, [d.x]),
        TypeError,
        r"run_node: node must be an onnx.NodeProto, got NoneType",
    ),
    (
        "node-a-name",
        lambda be, d: be.run_node("ReduceSum", [d.x]),
        TypeError,
        r"run_node: node must be an onnx.NodeProto, got str",
    ),
    (
        "node-one-input-given-two",
        lambda be, d: be.run_node(SUM, [d.x, d.axes]),
        ValueError,
        r"ReduceSum-13: the node declares 1 input\(s\) \('x'\) but 2 were given",
    ),
    (
        "node-two-inputs-given-one",
        lambda be, d: be.run_node(SUM_AXES, [d.x]),
        ValueError,
        r"ReduceSum-13: the node declares 2 input\(s\) \('x', 'axes'\) but 1 were given",
    ),
    (
        "node-inputs-an-array",
        lambda be, d: be.run_node(SUM, d.x),
        TypeError,
        r"ReduceSum-13: inputs must be a list of NumPy arrays, got ndarray",
    ),
    (
        "node-input-a-list",
        lambda be, d: be.run_node(SUM, [[1.0, 2.0]]),
        TypeError,
        r"ReduceSum-13: input 0 must be a NumPy array, got list",
    ),
    (
        "node-input-strings",
        lambda be, d: be.run_node(SUM, [d.words]),
        TypeError,
        r"ReduceSum-13: input 0 has dtype <U1",
    ),
    (
        "node-two-outputs",
        lambda be, d: be.run_node(_node("ReduceSum", ["x"], ("y", "z")), [d.x]),
        ValueError,
        r"ReduceSum-13: has one output; the node declares 2",
    ),
    (
        "node-named",
        lambda be, d: be.run_node(
            helper.make_node("ReduceSum", ["x"], ["y"], name="r1", keepdims=7), [d.x]
        ),
        ValueError,
        r"ReduceSum-13 node 'r1': keepdims must be",
    ),
    (
        "node-other-domain",
        lambda be, d: be.run_node(
            helper.make_node("ReduceSum", ["x"], ["y"], domain="com.example"), [d.x]
        ),
        ValueError,
        r"run_node: operator com.example::ReduceSum is not supported",
    ),
    (
        "node-unsupported-op",
        lambda be, d: be.run_node(_node("Softmax", ["x"]), [d.x]),
        ValueError,
        r"run_node: operator ai.onnx::Softmax is not supported",
    ),
    (
        "opset-unknown",
        lambda be, d: be.run_node(SUM, [d.x], opset_version=99),
        ValueError,
        r"opset 99 is unknown",
    ),
    (
        "opset-a-string",
        lambda be, d: be.run_node(SUM, [d.x], opset_version="13"),
        TypeError,
        r"opset must be an integer, got '13'",
    ),
    # attributes
    (
        "cast-to-float",
        lambda be, d: be.run_node(
            _with_attribute(_node("Cast", ["x"]), "to", 1.0, onnx.AttributeProto.FLOAT), [d.x]
        ),
        TypeError,
        r"Cast \(opset 28\): attribute 'to' must be of type INT, got FLOAT",
    ),
    (
        "cast-to-string-type",
        lambda be, d: be.run_node(_node("Cast", ["x"], to=8), [d.x]),
        TypeError,
        r"Cast \(opset 28\): cannot cast to ONNX type 8 \(string\) here; 'to' takes 1 \(float32\)",
    ),
    (
        "cast-to-unknown",
        lambda be, d: be.run_node(_node("Cast", ["x"], to=100), [d.x]),
        TypeError,
        r"cannot cast to ONNX type 100 \(unknown\) here",
    ),
    (
        "cast-no-to",
        lambda be, d: be.run_node(_node("Cast", ["x"]), [d.x]),
        ValueError,
        r"Cast \(opset 28\): attribute 'to' is required",
    ),
    (
        "keepdims-float",
        lambda be, d: be.run_node(
            _with_attribute(SUM, "keepdims", 1.0, onnx.AttributeProto.FLOAT), [d.x]
        ),
        TypeError,
        r"ReduceSum-13: attribute 'keepdims' must be of type INT, got FLOAT",
    ),
    (
        "keepdims-2",
        lambda be, d: be.run_node(_node("ReduceSum", ["x"], keepdims=2), [d.x]),
        ValueError,
        r"ReduceSum-13: keepdims must be",
    ),
    (
        "axes-attribute-strings",
        lambda be, d: be.run_node(
            _with_attribute(SUM, "axes", [b"0"], onnx.AttributeProto.STRINGS),
            [d.x],
            opset_version=11,
        ),
        TypeError,
        r"ReduceSum-11: attribute 'axes' must be of type INTS, got STRINGS",
    ),
    (
        "attribute-unknown",
        lambda be, d: be.run_node(_node("Sqrt", ["x"], alpha=1.0), [d.x]),
        ValueError,
        r"Sqrt \(opset 28\): unexpected attribute 'alpha'; Sqrt \(opset 28\) has no attributes",
    ),
    (
        "constant-no-value",
        lambda be, d: be.run_node(_node("Constant", []), []),
        ValueError,
        r"Constant \(opset 28\): takes exactly one of the attributes value, ",
    ),
    (
        "constant-string",
        lambda be, d: be.run_node(_node("Constant", [], value_string="a"), []),
        TypeError,
        r"Constant \(opset 28\): attribute 'value_string' is not supported",
    ),
    # element-wise dtypes and shapes
    (
        "abs-bool",
        lambda be, d: be.run_node(_node("Abs", ["x"]), [d.flags]),
        TypeError,
        r"Abs \(opset 28\): input dtype bool is not supported; it takes int8",
    ),
    (
        "abs-complex",
        lambda be, d: be.run_node(_node("Abs", ["x"]), [d.complex]),
        TypeError,
        r"Abs \(opset 28\): input dtype \S*complex128 is not supported",
    ),
    (
        "abs-strings",
        lambda be, d: be.run_node(_node("Abs", ["x"]), [d.words]),
        TypeError,
        r"Abs \(opset 28\): input 0 has dtype <U1",
    ),
    (
        "sqrt-int",
        lambda be, d: be.run_node(_node("Sqrt", ["x"]), [d.ints]),
        TypeError,
        r"Sqrt \(opset 28\): input dtype int32 is not supported; it takes float16",
    ),
    (
        "neg-unsigned",
        lambda be, d: be.run_node(_node("Neg", ["x"]), [d.bytes]),
        TypeError,
        r"Neg \(opset 28\): input dtype uint8 is not supported",
    ),
    (
        "pow-unsigned-base",
        lambda be, d: be.run_node(_node("Pow", ["x", "e"]), [d.bytes, d.bytes]),
        TypeError,
        r"Pow \(opset 28\): base dtype uint8 is not supported; it takes int32, int64",
    ),
    (
        "add-two-dtypes",
        lambda be, d: be.run_node(_node("Add", ["a", "b"]), [d.x, d.x.astype(np.float64)]),
        TypeError,
        r"Add \(opset 28\): inputs must have one dtype, got float32 and float64",
    ),
    (
        "add-shapes",
        lambda be, d: be.run_node(_node("Add", ["a", "b"]), [d.x, np.ones(3, np.float32)]),
        ValueError,
        r"Add \(opset 28\): input shapes \(2, 2\) and \(3,\) do not broadcast",
    ),
    (
        "mul-one-input",
        lambda be, d: be.run_node(_node("Mul", ["a"]), [d.x]),
        ValueError,
        r"Mul \(opset 28\): takes 2 inputs, got 1",
    ),
]


def _library(backend: Backend) -> str:
    if backend.name == "jax32":
        pytest.skip("backend_for('jax') always enables 64-bit types: the jax row covers it")
    return backend.name


def _raised_by_anyreduce(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback is anyreduce's own code."""
    tb = error.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return ANYREDUCE_SOURCE in Path(tb.tb_frame.f_code.co_filename).resolve().parents


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [pytest.param(call, error, message, id=name) for name, call, error, message in BAD],
)
def test_malformed_call_is_refused(
    xp: Any,
    backend: Backend,
    call: Call,
    error: type[Exception],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    backend_class = anyreduce.onnx.backend_for(_library(backend))
    data = Data()
    with pytest.raises(error, match=message) as raised:
        call(backend_class, data)
    assert type(raised.value).__module__ in ("builtins", "anyreduce"), type(raised.value)
    assert _raised_by_anyreduce(raised.value), raised.traceback
    assert "\n" not in str(raised.value)
    assert data.unchanged()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("nosuch", ValueError, r"backend_for: unknown array library 'nosuch'; expected one of"),
        (None, TypeError, r"backend_for: the array library must be a name, one of numpy"),
        (["numpy"], TypeError, r"the array library must be a name.*got list"),
    ],
    ids=repr,
)
def test_backend_for_refuses_unknown_libraries(
    name: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        anyreduce.onnx.backend_for(name)
    assert _raised_by_anyreduce(raised.value)


@pytest.mark.parametrize(
    "device", ["CPU", "CPU:1", "CUDA", "CUDA:0", "CUDA:7", "XYZ", "cpu", "", None]
)
def test_supports_device_and_prepare_agree(xp: Any, backend: Backend, device: Any) -> None:
    """Where supports_device says False, prepare refuses; where True, the model runs."""
    backend_class = anyreduce.onnx.backend_for(_library(backend))
    x = np.array([[1.0, 2.0], [4.0, 8.0]], dtype=np.float32)
    if backend_class.supports_device(device):
        (y,) = backend_class.run_model(MODEL, [x], device)
        assert y.tolist() == [[15.0]]
        return
    assert device != "CPU"
    with pytest.raises((TypeError, ValueError), match=r"^prepare: device"):
        backend_class.prepare(MODEL, device)
    with pytest.raises((TypeError, ValueError), match=r"^run_node: device"):
        backend_class.run_node(SUM, [x], device)
    assert not backend_class.is_compatible(MODEL, device)


def test_a_node_given_its_declared_inputs_runs(xp: Any, backend: Backend) -> None:
    """The one-input node of the issue gives the full sum, not a sum over axes taken from
    a second input."""
    backend_class = anyreduce.onnx.backend_for(_library(backend))
    x = np.array([[1.0, 2.0], [4.0, 8.0]], dtype=np.float32)
    (y,) = backend_class.run_node(SUM, [x])
    assert y.tolist() == [[15.0]]
    (y,) = backend_class.run_node(SUM_AXES, [x, np.array([1])])
    assert y.tolist() == [[3.0], [12.0]]


# --- odd layouts: accepted, computed as NumPy computes them, and left as they were

FREE = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])
ROW_SUMS = _model(
    [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
    [FREE],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
)
ROW_SUMS.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1]), "axes"))


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


BASE = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5
LAYOUTS: dict[str, Callable[[], np.ndarray]] = {
    "c-order": BASE.copy,
    "fortran-order": lambda: np.asfortranarray(BASE),
    "reversed": lambda: BASE.copy()[::-1, ::-1],
    "every-other-column": lambda: BASE.copy()[:, ::2],
    "read-only": lambda: _read_only(BASE),
    "broadcast-view": lambda: np.broadcast_to(BASE[:1], (4, 6)),
    "zero-rows": lambda: np.zeros((0, 6), dtype=np.float32),
    "zero-columns": lambda: np.zeros((4, 0), dtype=np.float32),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_odd_layouts_run_unchanged(xp: Any, backend: Backend, layout: str) -> None:
    backend_class = anyreduce.onnx.backend_for(_library(backend))
    x = LAYOUTS[layout]()
    before = (x.copy(), x.strides, x.flags.writeable)
    (y,) = backend_class.run_model(ROW_SUMS, [x])
    assert y.dtype == np.float32
    assert y.shape == (x.shape[0],)
    np.testing.assert_allclose(y, np.sum(x, axis=1, dtype=np.float64), rtol=1e-6)
    assert np.array_equal(x, before[0])
    assert (x.strides, x.flags.writeable) == before[1:]


@pytest.mark.parametrize(
    ("op", "error", "message"),
    [
        (
            ["ReduceSum"],
            TypeError,
            r"^op must be the name of an ONNX reduction \(a str\), got list",
        ),
        (None, TypeError, r"^op must be the name of an ONNX reduction \(a str\), got NoneType"),
        ("Relu", ValueError, r"^'Relu' is not an ONNX reduction; expected one of ReduceSum"),
    ],
    ids=repr,
)
def test_op_version_refuses_what_is_not_a_reduction(
    op: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        anyreduce.onnx.op_version(op, 13)
    assert _raised_by_anyreduce(raised.value)
