"""``anyreduce demo``: the ten reductions of the seed example on every installed backend."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence
from typing import Any

NAME = "demo"
HELP = "run the ten reductions of the ONNX example on every installed backend"

_BACKENDS = ("numpy", "torch", "jax", "dask", "array_api_strict")
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


def _namespaces() -> dict[str, object]:
    import numpy as np

    data = np.arange(1, 13, dtype=np.float32).reshape(SHAPE)
    arrays: dict[str, object] = {"numpy": data}
    if importlib.util.find_spec("torch"):
        import torch

        arrays["torch"] = torch.from_numpy(data.copy())
    if importlib.util.find_spec("jax"):
        import jax.numpy as jnp

        arrays["jax"] = jnp.asarray(data)
    if importlib.util.find_spec("dask"):
        import dask.array as da

        arrays["dask"] = da.from_array(data, chunks=(2, 2, 2))  # type: ignore[no-untyped-call]
    if importlib.util.find_spec("array_api_strict"):
        import array_api_strict as xps

        arrays["array_api_strict"] = xps.reshape(xps.asarray(data.ravel().tolist()), (3, 2, 2))
    return arrays


def run(args: argparse.Namespace) -> int:
    import numpy as np

    import anyreduce
    from anyreduce._lib._ops import OPS

    arrays = _namespaces()
    missing = [name for name in _BACKENDS if name not in arrays]
    print(f"data = 1..12 shaped (3, 2, 2), axes = {args.axes}, keepdims = 0")
    for name in OPS:
        print(f"\n{name}")
        for backend, data in arrays.items():
            result = getattr(anyreduce, name)(data, args.axes, keepdims=False)
            kind = type(result).__module__.split(".")[0]
            if backend == "dask":
                result = result.compute()
            values = np.asarray(result._array if backend == "array_api_strict" else result)
            print(f"  {backend:<17} {kind:<17} {values.ravel()}")
    if missing:
        print(f"\nnot installed, not run: {', '.join(missing)}")
    return 0
