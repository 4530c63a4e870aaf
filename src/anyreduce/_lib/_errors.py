"""The exceptions anyreduce raises."""

from __future__ import annotations

__all__ = ["AxisError"]


class AxisError(ValueError, IndexError):
    """An axis is out of range, repeated, or given for a rank-0 input.

    Subclasses both :class:`ValueError` and :class:`IndexError`, like
    :class:`numpy.exceptions.AxisError`, so code written for either keeps working.
    The message names the operator, the offending axis and the input's rank.

    Examples
    --------
    >>> import numpy as np
    >>> import anyreduce
    >>> try:
    ...     anyreduce.reduce_sum(np.ones((2, 3)), axes=[2])
    ... except anyreduce.AxisError as e:
    ...     print(e)
    reduce_sum: axis 2 is out of range for an input of rank 2 (valid axes are -2 to 1)
    """

    # Shown, and pickled, as the public name rather than this private module.
    __module__ = "anyreduce"
