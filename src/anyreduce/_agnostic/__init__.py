"""The ten reductions written once, with standard array-API calls only.

This package is the semantics of anyreduce: what runs under every tracer and compiler
(``torch.compile``, ``torch.export``, ``torch.func``, ``jax.jit``, Dask graphs), and what
every accelerator (``anyreduce._backends``) is proven equal to. Nothing here imports a
backend, tests which backend it runs on, reads array values on the host or branches on
sizes: shapes, dtypes and the namespace's declared dtypes are the only inputs to control
flow.
"""

from ._kernels import KERNELS, Context, Kernel, where_suspect

__all__ = ["KERNELS", "Context", "Kernel", "where_suspect"]
