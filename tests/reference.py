"""The exact oracle of the test suite: ``anyreduce.testing``'s, under the names the tests use.

There is one implementation (``anyreduce.testing.exact`` and ``anyreduce.testing.magnitude``,
shared with the conformance suite and parity); this module only re-exports it.
"""

from __future__ import annotations

from anyreduce.testing import OP_NAMES, magnitude
from anyreduce.testing import exact as reduce

__all__ = ["OP_NAMES", "magnitude", "reduce"]
