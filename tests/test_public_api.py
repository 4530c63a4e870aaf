"""The public surface: ``__all__`` is exactly the public names, and each one is documented.

A public module is one whose dotted path has no part starting with ``_``; every module of the
package that exists is found by walking it, so a new public module is checked as it lands.
"""

from __future__ import annotations
import __future__

import importlib
import importlib.resources
import inspect
import pkgutil
import re
import types
from pathlib import Path
from typing import Any

import pytest

import anyreduce

PUBLIC_MODULES = sorted(
    ["anyreduce"]
    + [
        info.name
        for info in pkgutil.walk_packages(anyreduce.__path__, "anyreduce.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
)

TOP_LEVEL = {
    "AxisError",
    "__version__",
    "get_num_threads",
    "reduce_l1",
    "reduce_l2",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "reduce_sum_square",
    "set_num_threads",
}


def _defined_elsewhere(value: object) -> bool:
    """An object from outside anyreduce: a module, or a name imported for annotations."""
    if isinstance(value, types.ModuleType):
        return True  # a public submodule is reached as an attribute and documented on its own
    origin = getattr(value, "__module__", None)
    return isinstance(origin, str) and origin.split(".")[0] != "anyreduce"


def public_names(module: types.ModuleType) -> set[str]:
    """Names without an underscore that the module defines or re-exports from anyreduce."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, __future__._Feature):
            continue
        if _defined_elsewhere(value):
            continue
        names.add(name)
    return names


def exported(module_name: str) -> list[tuple[str, Any]]:
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


def test_top_level_names() -> None:
    assert set(anyreduce.__all__) == TOP_LEVEL


def test_public_modules_found() -> None:
    assert "anyreduce" in PUBLIC_MODULES
    assert all(not name.endswith("__main__") for name in PUBLIC_MODULES)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_exactly_the_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    declared = module.__all__
    assert len(declared) == len(set(declared)), f"{module_name}.__all__ repeats a name"
    missing = [name for name in declared if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ lists names it does not define: {missing}"
    leaked = public_names(module) - set(declared)
    assert not leaked, f"{module_name} has public names outside __all__: {sorted(leaked)}"
    assert set(declared) - {"__version__"} == public_names(module)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_star_import_gives_all(module_name: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"from {module_name} import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(importlib.import_module(module_name).__all__)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_module_docstring(module_name: str) -> None:
    doc = inspect.getdoc(importlib.import_module(module_name))
    assert doc, f"{module_name} has no docstring"


def _sections(doc: str) -> dict[str, str]:
    """The numpydoc sections of ``doc``: title -> body."""
    parts = re.split(r"^([A-Z][A-Za-z ]+)\n-{3,}\n", doc, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _documented_parameters(body: str) -> list[str]:
    names = []
    for line in body.splitlines():
        match = re.match(r"^(\*{0,2}\w+)(\s*:.*)?$", line)
        if match:
            names.append(match.group(1).lstrip("*"))
    return names


PUBLIC_FUNCTIONS = sorted(
    {
        (module_name, name)
        for module_name in PUBLIC_MODULES
        for name, obj in exported(module_name)
        if inspect.isfunction(obj)
    }
)
PUBLIC_CLASSES = sorted(
    {
        (module_name, name)
        for module_name in PUBLIC_MODULES
        for name, obj in exported(module_name)
        if inspect.isclass(obj)
    }
)


@pytest.mark.parametrize(("module_name", "name"), PUBLIC_FUNCTIONS)
def test_function_docstring_is_complete(module_name: str, name: str) -> None:
    func = getattr(importlib.import_module(module_name), name)
    doc = inspect.getdoc(func)
    assert doc, f"{module_name}.{name} has no docstring"
    summary = doc.splitlines()[0]
    assert summary.endswith("."), f"{module_name}.{name}: summary line {summary!r}"
    sections = _sections(doc)
    parameters = list(inspect.signature(func).parameters)
    required = ["Returns", "Examples"] + (["Parameters"] if parameters else [])
    for section in required:
        assert section in sections, f"{module_name}.{name}: no {section} section"
    if parameters:
        assert _documented_parameters(sections["Parameters"]) == parameters
    assert ">>>" in sections["Examples"]


@pytest.mark.parametrize(("module_name", "name"), PUBLIC_FUNCTIONS)
def test_function_is_annotated(module_name: str, name: str) -> None:
    func = getattr(importlib.import_module(module_name), name)
    signature = inspect.signature(func)
    unannotated = [
        p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty
    ]
    assert not unannotated, f"{module_name}.{name}: parameters without a type: {unannotated}"
    assert signature.return_annotation is not inspect.Signature.empty


# Classes whose docstring does not yet document their attributes or show an example.
UNDOCUMENTED_CLASSES: set[tuple[str, str]] = set()


@pytest.mark.parametrize(
    ("module_name", "name"),
    [
        pytest.param(
            *key,
            marks=pytest.mark.xfail(
                strict=True, reason="no Attributes or Examples section in the docstring yet"
            ),
        )
        if key in UNDOCUMENTED_CLASSES
        else key
        for key in PUBLIC_CLASSES
    ],
)
def test_class_docstring(module_name: str, name: str) -> None:
    doc = inspect.getdoc(getattr(importlib.import_module(module_name), name))
    assert doc, f"{module_name}.{name} has no docstring"
    assert "Examples" in _sections(doc) or "Attributes" in _sections(doc)


def test_reductions_document_what_they_raise() -> None:
    for name in sorted(n for n in TOP_LEVEL if n.startswith("reduce_")):
        sections = _sections(inspect.getdoc(getattr(anyreduce, name)) or "")
        raised = _documented_parameters(sections["Raises"])
        assert raised == ["AxisError", "TypeError", "ValueError"], name


def test_axis_error_is_value_and_index_error() -> None:
    assert issubclass(anyreduce.AxisError, ValueError)
    assert issubclass(anyreduce.AxisError, IndexError)
    assert repr(anyreduce.AxisError("x")) == "AxisError('x')"
    assert anyreduce.AxisError.__module__ == "anyreduce"


def test_package_is_typed() -> None:
    assert (importlib.resources.files("anyreduce") / "py.typed").is_file()


def _api_reference_entries() -> dict[str, set[str]]:
    """The names ``docs/api.md`` lists under each ``.. currentmodule::``."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    entries: dict[str, set[str]] = {}
    module = None
    in_summary = False
    for line in text.splitlines():
        if line.startswith(".. currentmodule::"):
            module = line.split("::")[1].strip()
            entries.setdefault(module, set())
        elif line.startswith(".. autosummary::"):
            in_summary = True
        elif in_summary and line.startswith("   ") and not line.strip().startswith(":"):
            if line.strip() and module is not None:
                entries[module].add(line.strip())
        elif line.strip().startswith("```"):
            in_summary = False
    return entries


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_api_reference_lists_every_public_name(module_name: str) -> None:
    listed = _api_reference_entries().get(module_name, set())
    declared = set(importlib.import_module(module_name).__all__) - {"__version__"}
    assert listed == declared, f"docs/api.md for {module_name}: {sorted(listed ^ declared)}"
