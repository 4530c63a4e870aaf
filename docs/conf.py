"""Sphinx configuration for the anyreduce documentation.

Build with warnings as errors::

    sphinx-build -W --keep-going -b html docs docs/_build/html

Tables that restate facts the code owns (the ONNX opset table, the divergences, the command
line help) are generated at build time by ``_ext/anyreduce_docs.py``, never typed by hand.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import types
from pathlib import Path

import anyreduce

sys.path.insert(0, str(Path(__file__).parent / "_ext"))


def _public_modules() -> list[types.ModuleType]:
    names = [
        info.name
        for info in pkgutil.walk_packages(anyreduce.__path__, "anyreduce.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    return [anyreduce, *map(importlib.import_module, names)]


project = "anyreduce"
author = "The anyreduce developers"
copyright = "2026, The anyreduce developers"
release = anyreduce.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "anyreduce_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md"]
templates_path = ["_templates"]
nitpicky = False

# MyST: fenced directives, ``$...$`` maths, heading anchors for cross-page links.
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "fieldlist"]
myst_heading_anchors = 3

# API reference: one page per public function, generated from the docstrings.
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_default_options = {"members": False}

# numpydoc renders the docstrings and checks them: a missing section fails the build.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = {"PR01", "PR02", "PR03", "RT01", "EX01", "SS01", "SS03"}
# The checks are for functions. Classes and constants are checked by tests/test_public_api.py
# (numpydoc would read a constant's type's docstring, and a dataclass's fields as parameters).
numpydoc_validation_exclude = {
    rf"^{re.escape(module.__name__)}\.{re.escape(name)}$"
    for module in _public_modules()
    for name in module.__all__
    if not inspect.isfunction(getattr(module, name))
}

html_theme = "furo"
html_title = f"anyreduce {release}"
html_static_path: list[str] = []
html_theme_options = {
    "source_repository": "https://github.com/anyreduce/anyreduce",
    "source_branch": "main",
    "source_directory": "docs/",
}
