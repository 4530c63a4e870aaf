"""``anyreduce demo``: the ten reductions of the seed example on every installed backend."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .._lib._libraries import LIBRARIES

NAME = "demo"
HELP = "run the ten reductions of the ONNX example on every installed backend"

# The registry's libraries, modes of another one (jax32) left out.
_BACKENDS = tuple(name for name, lib in LIBRARIES.items() if lib.mode_of is None)
SHAPE = (3, 2, 2)  # the data of the ONNX example: 1..12


class _Axes(argparse.Action):
    """Axes of the example data: each in [-3, 2], none twice (checked before anything runs)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        axes = list(values or ())
        rank = len(SHAPE)
        allowed = f"the data has rank {rank}, so axes are -{rank} to {rank - 1}, each once"
        seen: set[int] = set()
        for axis in axes:
            if not -rank <= axis < rank:
                msg = f"axis {axis} is out of range: {allowed}"
                raise argparse.ArgumentError(self, msg)
            if axis % rank in seen:
                msg = f"axis {axis} is repeated in {axes}: {allowed}"
                raise argparse.ArgumentError(self, msg)
            seen.add(axis % rank)
        setattr(namespace, self.dest, axes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--axes",
        type=int,
        nargs="*",
        default=[1],
        action=_Axes,
        help="axes to reduce over, -3 to 2, none twice; none given: all (default: 1)",
    )


def _arrays() -> dict[str, object]:
    """The example data on every installed library of the registry (its own mode aside)."""
    import numpy as np

    data = np.arange(1, 13, dtype=np.float32).reshape(SHAPE)
    return {
        name: LIBRARIES[name].from_numpy(data, chunks=(2, 2, 2))
        for name in _BACKENDS
        if LIBRARIES[name].installed()
    }


def run(args: argparse.Namespace) -> int:

    import anyreduce
    from anyreduce._lib._ops import OPS

    arrays = _arrays()
    missing = [name for name in _BACKENDS if name not in arrays]
    print(f"data = 1..12 shaped (3, 2, 2), axes = {args.axes}, keepdims = 0")
    for name in OPS:
        print(f"\n{name}")
        for backend, data in arrays.items():
            result = getattr(anyreduce, name)(data, args.axes, keepdims=False)
            kind = type(result).__module__.split(".")[0]
            values = LIBRARIES[backend].to_numpy(result)
            print(f"  {backend:<17} {kind:<17} {values.ravel()}")
    if missing:
        print(f"\nnot installed, not run: {', '.join(missing)}")
    return 0
