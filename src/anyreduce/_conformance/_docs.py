"""Regenerate the divergences table of ``docs/semantics.md`` from :mod:`._divergences`.

``python -m anyreduce._conformance._docs docs/semantics.md`` rewrites the text between the
two marker lines; ``conformance/test_divergences.py`` checks the page is up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._divergences import markdown_table

BEGIN = "<!-- divergences: generated from anyreduce/_conformance/_divergences.py -->"
END = "<!-- end of divergences -->"


def update(path: Path) -> bool:
    """Rewrite the table in ``path``; whether it changed."""
    text = path.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n{markdown_table()}{END}{tail}"
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover
    changed = update(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/semantics.md"))
    print("updated" if changed else "up to date")
