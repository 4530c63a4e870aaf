"""Timing and memory measurement of the reductions against their anchors.

Every group (one dtype and one axis choice) holds all contenders of all backends: our
operator, the backend's plain sum, its native expressions and onnxruntime's kernel. They are
timed in rounds, one call each per round, so that all of them see the same machine state
(turbo, caches, other load); the median over rounds is reported.

Within a round, each operator is timed back to back with its anchors (the backend's plain
sum, ours, the native expressions and onnxruntime's kernel; the order reversed every other
round), and a ratio is the median over rounds of the ratio within each round. On a
shared machine the speed drifts by tens of percent from second to second; paired ratios
cancel that drift where a ratio of two medians taken seconds apart does not.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import os
import platform
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ._anchors import BACKEND_NAMES, Backend, load_backend, onnxruntime_kernel
from ._contention import spinners
from ._memory import peak_extra_bytes

__all__ = ["Settings", "run_suite"]

Axes = tuple[int, ...]
Progress = Callable[[str], None]

#: Ops whose speed target is 4x the plain sum (they need exp/log of every element).
LOG_OPS = ("reduce_log_sum", "reduce_log_sum_exp")
RATIO_TARGET = 1.5
LOG_RATIO_TARGET = 4.0
MEMORY_TARGET = 0.10  # of the input's size
#: With every core taken by a spinning process (``--contended``): ours over the best
#: native expression of the same run.
CONTENDED_NATIVE_TARGET = 1.5
#: Each spinner of a contended run stops by itself after this long.
CONTENDED_LIMIT_S = 3600.0
#: Dtypes whose peak extra memory is measured beside the large groups' float32 (for
#: every operator, axis choice and backend that can measure it), judged like float32's.
MEMORY_DTYPES = ("float16", "int8", "int32")
SMALL_OVERHEAD_TARGET_US = 5.0
#: ``torch.compile`` of our float32 L2 over the last axis against ``torch.compile`` of
#: ``torch.linalg.vector_norm`` on the same data (see :func:`_compiled`).
COMPILED_TARGET = 1.2
COMPILED_SHAPE = (2048, 4096)
#: The guard filter (a function of ``torch.compiler``) of the reported-only compiled pair:
#: Dynamo then checks no guard on globals at each call. Each function the trace inlines
#: adds guards on its globals, checked before every call, and a call that follows a large
#: kernel finds them out of the processor's caches: the kernel's steps (the dispatch,
#: the shim, the dtype look-ups) cost a compiled L2 0.13-0.23x of ``vector_norm``'s time.
UNGUARDED = "skip_guard_on_globals_unsafe"
#: Calls of each compiled function per sample: one call (1-3 ms) is too short a sample.
COMPILED_CALLS = 20
#: Rounds of the small-input group per ``Settings.repeats`` (see :func:`_small`).
SMALL_ROUNDS_PER_REPEAT = 2
#: "Never slower than" is judged with this allowance for run-to-run noise.
NOISE = 1.05


@dataclass
class Settings:
    """What to run. The defaults are the suite the targets are stated for."""

    shape: tuple[int, ...] = (4096, 8192)
    small_shape: tuple[int, ...] = (3, 2, 2)
    small_axes: Axes = (1,)
    dtypes: tuple[str, ...] = ("float32", "float16")
    backends: tuple[str, ...] = ("numpy", "torch", "jax")
    ops: tuple[str, ...] = ()  # empty: all ten
    axes: tuple[str, ...] = ("last", "first", "all")
    repeats: int = 7
    small_calls: int = 300
    group_budget_s: float = 25.0  # a group stops repeating (after 3 rounds) past this
    memory: bool = True
    onnxruntime: bool = True
    #: Also time LogSumExp of masked logits (float32, last axis), reported, not judged.
    masked: bool = True
    #: Also time Sum, Max, L2 and LogSumExp of narrow data (float32 points in space) over
    #: each axis, reported, not judged: the shapes where NumPy's own kernels are slowest.
    narrow: bool = True
    narrow_shape: tuple[int, ...] = (2**20, 3)
    #: Also time ``torch.compile`` of L2 against that of ``vector_norm`` (judged; not in a
    #: quick run, where compiling would take most of the time).
    compiled: bool = True
    seed: int = 0
    quick: bool = False
    #: One spinning process per core for the length of the run (see ``_contention``).
    contended: bool = False
    #: Where the data live: "CPU", or "CUDA" (PyTorch and JAX on their first GPU; the
    #: other backends, onnxruntime's CPU kernels and the memory tables are left out).
    device: str = "CPU"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def quick_settings(cls, **changes: Any) -> Settings:
        """A smoke-test run: small data, few repeats, no targets judged."""
        base: dict[str, Any] = {
            "shape": (256, 512),
            "dtypes": ("float32",),
            "repeats": 3,
            "small_calls": 20,
            "group_budget_s": 5.0,
            "narrow_shape": (2048, 3),
            "quick": True,
        }
        base.update(changes)
        return cls(**base)


def _axes_choice(name: str, ndim: int) -> Axes | None:
    return {"last": (ndim - 1,), "first": (0,), "all": None}[name]


@dataclass
class _Contender:
    key: tuple[str, ...]  # (backend or "onnxruntime", op or "", role, label)
    fn: Callable[[], Any]
    sync: Callable[[Any], Any]
    times: list[float] = field(default_factory=list)

    @property
    def library(self) -> str:
        """The library whose threads run the call: the backend, or onnxruntime."""
        return "onnxruntime" if self.key[2] == "ort" else self.key[0]

    def call(self) -> float:
        start = time.perf_counter()
        self.sync(self.fn())
        return time.perf_counter() - start

    @property
    def median(self) -> float:
        return float(np.median(self.times)) if self.times else math.nan


def _time_units(
    units: list[list[_Contender]],
    repeats: int,
    budget_s: float,
    warm_up: Callable[[_Contender], bool] | None = None,
) -> None:
    """Rounds of one call per contender, each unit's calls back to back; every other
    round takes each unit in reverse order, so no contender always follows another.

    An untimed call of each contender (of those ``warm_up`` selects; all by default)
    comes first: JAX compiles, onnxruntime allocates, caches and lazy imports fill.

    Between calls of different libraries (a backend, onnxruntime) the loop pauses for
    ``_SETTLE_S``: thread pools (XLA's, PyTorch's) keep their threads busy for a moment
    after a call, and the first calls of the next backend ran up to twice as long beside
    them; onnxruntime's sum of float32 (4096, 8192) over axis 1 took 7.2 ms right after
    ``torch.sum`` and 4.4-4.7 ms 5 or 20 ms later. OpenBLAS's threads spin for longer
    (see ``anyreduce._commands.bench.QUIET_BLAS``).
    """
    for unit in units:
        for c in unit:
            if warm_up is None or warm_up(c):
                c.sync(c.fn())
    start = time.perf_counter()
    previous = None
    for r in range(repeats):
        for unit in units:
            for c in unit if r % 2 == 0 else reversed(unit):
                if previous is not None and c.library != previous:
                    time.sleep(_SETTLE_S)
                previous = c.library
                c.times.append(c.call())
        if r + 1 >= min(3, repeats) and time.perf_counter() - start > budget_s:
            break


_SETTLE_S = 0.02


def _caller(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``fn(*args)`` as a zero-argument callable (binds the loop's current values)."""
    return functools.partial(fn, *args)


def _repeated(fn: Callable[[], Any], sync: Callable[[Any], Any], n: int) -> Callable[[], Any]:
    def calls() -> None:
        for _ in range(n):
            sync(fn())

    return calls


def _ops(settings: Settings) -> tuple[str, ...]:
    from .._lib._ops import OPS

    return settings.ops or tuple(OPS)


def _data(settings: Settings, shape: tuple[int, ...], dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(settings.seed)
    normal = rng.standard_normal(shape, dtype=np.float32)
    # Products of normal data under- or overflow, and subnormal arithmetic is slow on x86;
    # ReduceProd is timed on data near one, whose products stay normal.
    near_one = 1 + np.float32(1e-3) * rng.standard_normal(shape, dtype=np.float32)
    return {"normal": normal.astype(dtype), "near_one": near_one.astype(dtype)}


#: The share of masked entries, and their value, in the masked-logits data: attention
#: masks write -1e9 (or -inf) where a token may not attend.
MASKED_SHARE = 0.5
MASKED_VALUE = -1e9


#: Tables of the large-input kind that are reported and not judged.
REPORTED_ONLY = ("masked", "narrow")
#: The operators of the narrow-data table.
NARROW_OPS = ("reduce_sum", "reduce_max", "reduce_l2", "reduce_log_sum_exp")


def _masked_data(settings: Settings, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Normal logits with ``MASKED_SHARE`` of the entries set to ``MASKED_VALUE``.

    exp of most of them underflows to zero, which sends some exp kernels off their
    vectorised loop (see ``_backends.exp_of_difference``).
    """
    rng = np.random.default_rng(settings.seed)
    normal = rng.standard_normal(shape, dtype=np.float32)
    masked = np.where(rng.random(shape) < MASKED_SHARE, np.float32(MASKED_VALUE), normal)
    return {"normal": masked, "near_one": masked}


def _array(arrays: dict[str, Any], op: str) -> Any:
    return arrays["near_one" if op == "reduce_prod" else "normal"]


def _units(
    settings: Settings,
    backends: list[Backend],
    axes: Axes | None,
    data: dict[str, np.ndarray],
    arrays: dict[str, dict[str, Any]],
    every_native: bool = True,
) -> list[list[_Contender]]:
    """Per backend and operator, the contenders timed back to back: the backend's plain
    sum, ours, its native expressions and onnxruntime's kernel.

    Units of one backend follow each other, so no backend's call runs right after
    another's (whose thread pool may still be busy; see :func:`_time_units`). Where the
    targets are not judged (dtypes other than :data:`JUDGED_DTYPE`) only the first
    native expression of each operator is timed (see :func:`_rounds`).
    """
    import anyreduce

    from .._lib._ops import OPS

    kernels = {
        op: onnxruntime_kernel(OPS[op].onnx_name, _array(data, op), axes)
        if settings.onnxruntime
        else None
        for op in _ops(settings)
    }
    units: list[list[_Contender]] = []
    for b in (b for b in backends if b.name in arrays):
        plain = b.plain_sum(arrays[b.name]["normal"], axes)
        for op in _ops(settings):
            xo = _array(arrays[b.name], op)
            ours = _caller(getattr(anyreduce, op), xo, axes)
            unit = [
                _Contender((b.name, op, "sum", "sum"), plain, b.sync),
                _Contender((b.name, op, "ours", "anyreduce"), ours, b.sync),
            ]
            natives = list(b.native.get(op, {}).items())
            for label, make in natives if every_native else natives[:1]:
                unit.append(_Contender((b.name, op, "native", label), make(xo, axes), b.sync))
            kernel = kernels[op]
            if kernel is not None:
                unit.append(_Contender((b.name, op, "ort", "onnxruntime"), kernel, id))
            units.append(unit)
    return units


#: The dtype whose large-input targets are judged; the others are reported.
JUDGED_DTYPE = "float32"
#: Libraries that compile nothing and whose kernels need no first call per dtype: once
#: their judged groups have run, the unjudged groups skip their warm-up calls (a third
#: of each float16 group's time, most of it NumPy's float16 loops; JAX compiles per
#: dtype and onnxruntime builds a session per group, so theirs stay).
EAGER = ("numpy", "torch")


def _rounds(settings: Settings, judged: bool) -> int:
    """Timing rounds of a large-input group: ``settings.repeats`` where targets are judged,
    a third of them (at least 2) elsewhere.

    float16 calls take 5-40x their float32 time on the CPU (NumPy's float16 sum of
    (4096, 8192) over axis 0: 250 ms; SciPy's logsumexp 2.6 s): a round of the float16
    group over the first axis took 15-26 s, and with 3 rounds, every native expression
    and the warm-up round, the three float16 groups took 197 s of a 376 s run (2 cores).
    """
    return settings.repeats if judged else max(2, settings.repeats // 3)


def _paired(ours: _Contender, anchor: _Contender) -> float:
    """Median over rounds of ours' time over the anchor's, both timed in the same round."""
    return float(np.median([a / b for a, b in zip(ours.times, anchor.times, strict=True)]))


def _large_group(
    settings: Settings,
    backends: list[Backend],
    dtype: str,
    axes_name: str,
    data: dict[str, np.ndarray],
    arrays: dict[str, dict[str, Any]],
    progress: Progress,
    kind: str = "normal",
    warmed: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """Time one group (a dtype and an axis choice) and judge its records.

    Contenders of the libraries in ``warmed`` get no warm-up call where targets are not
    judged (see :data:`EAGER`).
    """
    import anyreduce

    shape = data["normal"].shape
    axes = _axes_choice(axes_name, len(shape))
    judged = dtype == JUDGED_DTYPE
    units = _units(settings, backends, axes, data, arrays, every_native=judged)
    contenders = [c for unit in units for c in unit]
    repeats = _rounds(settings, judged)
    t0 = time.perf_counter()
    cold = None if judged else (lambda c: c.library not in warmed)
    _time_units(units, repeats, settings.group_budget_s, cold)
    progress(
        f"  {dtype} {axes_name:<5} {'' if kind == 'normal' else kind + ' '}"
        f"{len(contenders)} contenders x "
        f"{len(contenders[0].times)} rounds in {time.perf_counter() - t0:.1f} s"
    )
    by_key = {c.key[:3]: c for c in contenders if c.key[2] != "native"}
    natives: dict[tuple[str, str], list[_Contender]] = {}
    for c in contenders:
        if c.key[2] == "native":
            natives.setdefault((c.key[0], c.key[1]), []).append(c)
    nbytes = data["normal"].nbytes
    records = []
    for b in (b for b in backends if b.name in arrays):
        for op in _ops(settings):
            plain = by_key[(b.name, op, "sum")]
            ours = by_key[(b.name, op, "ours")]
            best = min(natives.get((b.name, op), []), key=lambda c: c.median, default=None)
            ort = by_key.get((b.name, op, "ort"))
            record: dict[str, Any] = {
                "size": "large",
                "data": kind,
                "backend": b.name,
                "dtype": dtype,
                "shape": list(shape),
                "axes": axes_name,
                "op": op,
                "ours_ms": ours.median * 1e3,
                "sum_ms": plain.median * 1e3,
                "native_ms": best.median * 1e3 if best else None,
                "native": best.key[3] if best else None,
                "onnxruntime_ms": ort.median * 1e3 if ort else None,
                "rounds": len(ours.times),
                "gb_per_s": nbytes / ours.median / 1e9,
                "input_bytes": nbytes,
                "vs_sum": _paired(ours, plain),
                "vs_native": _paired(ours, best) if best else None,
                "vs_onnxruntime": _paired(ours, ort) if ort else None,
            }
            # Memory is judged on float32 only, and measured for ours only: it costs a
            # profiled call each (the natives' took about 12 s of a 5-minute run).
            if settings.memory and b.memory is not None and dtype == "float32":
                fn = _caller(getattr(anyreduce, op), _array(arrays[b.name], op), axes)
                record["extra_bytes"] = peak_extra_bytes(b.name, fn)
                record["extra_fraction"] = record["extra_bytes"] / nbytes
            records.append(_judge(record, settings))
    return records


def _judge(record: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Mark which targets of the issue a large record meets (None: no target applies)."""
    if settings.quick or record["dtype"] != JUDGED_DTYPE or record.get("data") in REPORTED_ONLY:
        record["target_vs_sum"] = None
        record["meets"] = None
        return record
    checks: dict[str, bool] = {}
    if settings.contended:
        # Beside other work only the best native expression of the same run is a fair
        # anchor: the plain sum and onnxruntime's kernel lose their threads as ours do.
        record["target_vs_sum"] = None
        record["target_vs_native"] = CONTENDED_NATIVE_TARGET
        if record["vs_native"] is not None:
            checks["vs_native"] = record["vs_native"] <= CONTENDED_NATIVE_TARGET
    else:
        target = LOG_RATIO_TARGET if record["op"] in LOG_OPS else RATIO_TARGET
        record["target_vs_sum"] = target
        checks["vs_sum"] = record["vs_sum"] <= target
        if record["vs_native"] is not None:
            checks["vs_native"] = record["vs_native"] <= NOISE
        if record["vs_onnxruntime"] is not None:
            checks["vs_onnxruntime"] = record["vs_onnxruntime"] <= NOISE
    if record.get("extra_fraction") is not None:
        checks["memory"] = record["extra_fraction"] <= MEMORY_TARGET
    record["checks"] = checks
    record["meets"] = all(checks.values())
    return record


def _small(settings: Settings, backends: list[Backend], progress: Progress) -> list[dict[str, Any]]:
    """Per-call time on the small input, each operator timed back to back with the
    backend's own sum and its first native expression; the overhead is the median over
    rounds of the difference within a round (as the large ratios are paired).

    A sample is ``settings.small_calls`` calls, and the group runs
    ``SMALL_ROUNDS_PER_REPEAT`` times ``settings.repeats`` rounds: a sample takes 1-10 ms,
    and the differences are a few microseconds per call against a machine whose speed
    drifts by tens of percent (two medians taken apart put PyTorch's own sum at 6.8 and
    3.1 us a call in two runs).
    """
    import anyreduce

    ops = _ops(settings)
    count = math.prod(settings.small_shape)
    data = np.arange(1, count + 1, dtype=np.float32).reshape(settings.small_shape)
    axes = settings.small_axes
    records = []
    t0 = time.perf_counter()
    n = settings.small_calls
    for b in backends:
        x = b.convert(data)
        units = []
        for op in ops:
            unit = [
                _Contender((b.name, op, "sum", "sum"), b.plain_sum(x, axes), b.sync),
                _Contender(
                    (b.name, op, "ours", "anyreduce"),
                    _caller(getattr(anyreduce, op), x, axes),
                    b.sync,
                ),
            ]
            natives = b.native.get(op, {})
            if natives:
                label, make = next(iter(natives.items()))
                unit.append(_Contender((b.name, op, "native", label), make(x, axes), b.sync))
            for c in unit:  # time n calls per sample: one call is below the clock's grain
                c.fn = _repeated(c.fn, c.sync, n)
                c.sync = id
            units.append(unit)
        _time_units(units, settings.repeats * SMALL_ROUNDS_PER_REPEAT, settings.group_budget_s)
        per_call = 1e6 / n
        plain = float(np.median([t for unit in units for t in unit[0].times])) * per_call
        for op, unit in zip(ops, units, strict=True):
            sum_c, ours = unit[0], unit[1]
            native = unit[2] if len(unit) > 2 else None
            overhead = float(
                np.median([a - s for a, s in zip(ours.times, sum_c.times, strict=True)])
            )
            record: dict[str, Any] = {
                "size": "small",
                "backend": b.name,
                "dtype": "float32",
                "shape": list(settings.small_shape),
                "axes": str(list(axes)),
                "op": op,
                "ours_us": ours.median * per_call,
                "sum_us": plain,
                "native_us": native.median * per_call if native else None,
                "native": native.key[3] if native else None,
                "overhead_us": overhead * per_call,
            }
            applies = not settings.quick and not settings.contended and b.name in EAGER
            record["target_overhead_us"] = SMALL_OVERHEAD_TARGET_US if applies else None
            met = record["overhead_us"] <= SMALL_OVERHEAD_TARGET_US
            record["meets"] = met if applies else None
            records.append(record)
    progress(f"  small {settings.small_shape}: {time.perf_counter() - t0:.1f} s")
    return records


def _meta(settings: Settings, backends: list[Backend]) -> dict[str, Any]:
    import importlib.metadata as md

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    names = ("anyreduce", "numpy", "torch", "jax", "jaxlib", "dask", "onnxruntime", "scipy")
    versions = {d: v for d in names if (v := version(d)) is not None}
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]

        pools = [
            {k: p.get(k) for k in ("internal_api", "num_threads", "architecture", "version")}
            for p in threadpool_info()
        ]
    except ImportError:
        pools = []

    return {
        "settings": {k: v for k, v in asdict(settings).items() if k != "extra"},
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "versions": versions,
        "threadpools": pools,
        # Thread settings read from the environment (see anyreduce._commands.bench).
        "environment": {
            k: os.environ[k]
            for k in ("OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
            if k in os.environ
        },
        "backends": {b.name: b.notes for b in backends},
        "targets": {
            "vs_sum": RATIO_TARGET,
            "vs_sum_log_ops": LOG_RATIO_TARGET,
            "vs_native_and_onnxruntime": NOISE,
            "extra_memory_fraction": MEMORY_TARGET,
            "small_overhead_us": SMALL_OVERHEAD_TARGET_US,
            "contended_vs_native": CONTENDED_NATIVE_TARGET,
        },
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_suite(settings: Settings, progress: Progress = print) -> dict[str, Any]:
    """Run the benchmark; the results as a JSON-ready dict (``meta``, ``large``, ``small``).

    Floating-point warnings are silenced: the anchors compute log of negative sums and
    the like, whose values do not matter here.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if not settings.contended:
            return _run_suite(settings, progress)
        count = _cores()
        progress(f"contended: {count} spinning processes, one per core")
        with spinners(count, CONTENDED_LIMIT_S) as contention:
            result = _run_suite(settings, progress)
        result["meta"]["contended"] = contention
        return result


def _cores() -> int:
    """The cores this process may run on (all of them where the platform cannot say)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _run_suite(settings: Settings, progress: Progress) -> dict[str, Any]:
    names = [n for n in settings.backends if n in BACKEND_NAMES]
    unknown = sorted(set(settings.backends) - set(BACKEND_NAMES))
    if unknown:
        msg = f"bench: unknown backend(s) {unknown}; choose from {list(BACKEND_NAMES)}"
        raise ValueError(msg)
    backends = [b for b in (load_backend(n) for n in names) if b is not None]
    if settings.device != "CPU":
        moved = (_on_device(b, settings.device) for b in backends)
        backends = [b for b in moved if b is not None]
        settings = dataclasses.replace(settings, onnxruntime=False, memory=False)
    missing = [n for n in names if n not in {b.name for b in backends}]
    start = time.perf_counter()
    large: list[dict[str, Any]] = []
    warmed: frozenset[str] = frozenset()
    for dtype in settings.dtypes:
        data = _data(settings, settings.shape, dtype)
        arrays = {
            b.name: {k: b.convert(v) for k, v in data.items()}
            for b in backends
            if dtype in b.dtypes
        }
        for axes_name in settings.axes:
            large += _large_group(
                settings, backends, dtype, axes_name, data, arrays, progress, warmed=warmed
            )
        if dtype == JUDGED_DTYPE:
            warmed = frozenset(b.name for b in backends if b.name in EAGER and b.name in arrays)
        del arrays
        gc.collect()
    masked = _masked(settings, backends, progress)
    narrow = _narrow(settings, backends, progress)
    small = _small(settings, backends, progress) if settings.small_shape else []
    compiled = _compiled(settings, backends, progress)
    memory = _memory(settings, backends, progress)
    meta = _meta(settings, backends)
    meta["missing_backends"] = missing
    meta["contended"] = None
    meta["seconds"] = time.perf_counter() - start
    return {
        "meta": meta,
        "large": large,
        "small": small,
        "compiled": compiled,
        "masked": masked,
        "narrow": narrow,
        "memory": memory,
    }


def _on_device(backend: Backend, device: str) -> Backend | None:
    """``backend`` with its data on ``device`` ("CUDA"), None where it has no such device."""
    from .._lib._libraries import LIBRARIES

    library = LIBRARIES[backend.name]
    if not library.supports(device):
        return None
    notes = f"{backend.notes}, {_device_name(backend.name)}".lstrip(", ")
    return dataclasses.replace(
        backend,
        convert=functools.partial(library.from_numpy, device=device),
        memory=None,
        notes=notes,
    )


def _device_name(library: str) -> str:
    if library == "torch":
        import torch

        return str(torch.cuda.get_device_name(0))
    if library == "jax":
        import jax

        return str(jax.devices("gpu")[0].device_kind)
    return ""


def _memory(
    settings: Settings, backends: list[Backend], progress: Progress
) -> list[dict[str, Any]]:
    """Peak extra memory of ours for the dtypes of :data:`MEMORY_DTYPES` (float32's is in
    the large records), every operator and axis choice, on the backends that measure it;
    judged against :data:`MEMORY_TARGET` as float32's is."""
    import anyreduce

    measured = [b for b in backends if b.memory is not None]
    if not settings.memory or not measured:
        return []
    t0 = time.perf_counter()
    records = []
    for dtype in MEMORY_DTYPES:
        data = _data(settings, settings.shape, dtype)
        nbytes = data["normal"].nbytes
        for b in measured:
            arrays = {k: b.convert(v) for k, v in data.items()}
            for axes_name in settings.axes:
                axes = _axes_choice(axes_name, len(settings.shape))
                for op in _ops(settings):
                    fn = _caller(getattr(anyreduce, op), _array(arrays, op), axes)
                    extra = peak_extra_bytes(b.name, fn)
                    record: dict[str, Any] = {
                        "size": "memory",
                        "backend": b.name,
                        "dtype": dtype,
                        "shape": list(settings.shape),
                        "axes": axes_name,
                        "op": op,
                        "input_bytes": nbytes,
                        "extra_bytes": extra,
                        "extra_fraction": None if extra is None else extra / nbytes,
                    }
                    applies = not settings.quick and extra is not None
                    record["target_extra_fraction"] = MEMORY_TARGET if applies else None
                    met = record["extra_fraction"] is not None and (
                        record["extra_fraction"] <= MEMORY_TARGET
                    )
                    record["meets"] = met if applies else None
                    records.append(record)
            del arrays
            gc.collect()
    progress(f"  memory {', '.join(MEMORY_DTYPES)}: {time.perf_counter() - t0:.1f} s")
    return records


def _narrow(
    settings: Settings, backends: list[Backend], progress: Progress
) -> list[dict[str, Any]]:
    """Sum, Max, L2 and LogSumExp of narrow float32 data over its first and last axes:
    reported, not judged."""
    ops = tuple(op for op in NARROW_OPS if op in _ops(settings))
    if not settings.narrow or not ops:
        return []
    data = _data(settings, settings.narrow_shape, "float32")
    arrays = {
        b.name: {k: b.convert(v) for k, v in data.items()}
        for b in backends
        if "float32" in b.dtypes
    }
    only = dataclasses.replace(settings, ops=ops)
    records = []
    for axes_name in ("first", "last"):
        records += _large_group(
            only, backends, "float32", axes_name, data, arrays, progress, "narrow"
        )
    del arrays
    gc.collect()
    return records


def _compiled(
    settings: Settings, backends: list[Backend], progress: Progress
) -> list[dict[str, Any]]:
    """``torch.compile(fullgraph=True)`` of our float32 L2 over the last axis against the
    same of ``torch.linalg.vector_norm``, :data:`COMPILED_SHAPE`: judged against
    :data:`COMPILED_TARGET` (not in a quick run, where compiling would take most of the
    time). Then, reported only, the same pair compiled with :data:`UNGUARDED` (where the
    installed PyTorch has it): what Dynamo's guards on globals cost each call."""
    torch_backend = next((b for b in backends if b.name == "torch"), None)
    if settings.quick or not settings.compiled or torch_backend is None:
        return []
    if "reduce_l2" not in _ops(settings):
        return []
    import torch

    rng = np.random.default_rng(settings.seed)
    x = torch_backend.convert(rng.standard_normal(COMPILED_SHAPE, dtype=np.float32))
    records = [_compiled_pair(settings, torch_backend, x, None, progress)]
    guard_filter = getattr(torch.compiler, UNGUARDED, None)
    if guard_filter is not None and not records[0].get("failed"):
        records.append(_compiled_pair(settings, torch_backend, x, guard_filter, progress))
    return records


def _compiled_pair(
    settings: Settings,
    backend: Backend,
    x: Any,
    guard_filter: Callable[..., Any] | None,
    progress: Progress,
) -> dict[str, Any]:
    """One compiled pair (ours and ``vector_norm``) timed by turns: its record."""
    import torch

    import anyreduce

    options: dict[str, Any] | None = None
    if guard_filter is not None:
        options = {"guard_filter_fn": guard_filter}
    t0 = time.perf_counter()
    # Dynamo keeps compiled entries per code object, the lambdas' below for both pairs:
    # a call would first check the other pair's entries' guards.
    torch.compiler.reset()
    ours = torch.compile(lambda a: anyreduce.reduce_l2(a, (1,)), fullgraph=True, options=options)
    native = torch.compile(
        lambda a: torch.linalg.vector_norm(a, 2, (1,), keepdim=True),
        fullgraph=True,
        options=options,
    )
    sync = backend.sync
    unit = [
        _Contender(("torch", "reduce_l2", "ours", "anyreduce"), _caller(ours, x), sync),
        _Contender(("torch", "reduce_l2", "native", "vector_norm"), _caller(native, x), sync),
    ]
    label = "compiled L2" if guard_filter is None else f"compiled L2 ({UNGUARDED})"
    for c in unit:
        try:
            c.sync(c.fn())  # compiles
        except RuntimeError as e:  # a compiler's error (Dynamo's are RuntimeErrors) is a result
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            progress(f"  {label}: {c.key[3]} failed to compile: {reason}")
            failed = f"{c.key[3]}: {type(e).__name__}: {reason}"
            return _compiled_record(settings, None, None, None, failed, guard_filter=guard_filter)
        c.fn = _repeated(c.fn, c.sync, COMPILED_CALLS)
        c.sync = id
    _time_units([unit], 3 * settings.repeats, settings.group_budget_s)
    progress(f"  {label}: {len(unit[0].times)} rounds in {time.perf_counter() - t0:.1f} s")
    ours_c, native_c = unit
    ratio = _paired(ours_c, native_c)
    ours_ms = ours_c.median * 1e3 / COMPILED_CALLS
    native_ms = native_c.median * 1e3 / COMPILED_CALLS
    return _compiled_record(settings, ours_ms, native_ms, ratio, guard_filter=guard_filter)


def _compiled_record(
    settings: Settings,
    ours_ms: float | None,
    native_ms: float | None,
    ratio: float | None,
    failed: str | None = None,
    *,
    guard_filter: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """The compiled L2 record: both times and their ratio, or ``failed`` (who did not
    compile, and why: a miss). With ``guard_filter`` (:data:`UNGUARDED`), reported only."""
    judged = not settings.contended and guard_filter is None
    record: dict[str, Any] = {
        "size": "compiled",
        "backend": "torch",
        "dtype": "float32",
        "shape": list(COMPILED_SHAPE),
        "axes": "last",
        "op": "reduce_l2",
        "ours_ms": ours_ms,
        "native_ms": native_ms,
        "native": "torch.compile(vector_norm)",
        "vs_native": ratio,
        "target_vs_native": COMPILED_TARGET if judged else None,
        "meets": ratio is not None and ratio <= COMPILED_TARGET if judged else None,
    }
    if guard_filter is not None:  # another row than the judged one (see _compare)
        record["data"] = record["guards"] = UNGUARDED
    if failed is not None:
        record["failed"] = failed
    return record


def _masked(
    settings: Settings, backends: list[Backend], progress: Progress
) -> list[dict[str, Any]]:
    """LogSumExp of masked logits over the last axis, float32: reported, not judged."""
    op = "reduce_log_sum_exp"
    if not settings.masked or op not in _ops(settings):
        return []
    data = _masked_data(settings, settings.shape)
    arrays = {
        b.name: {k: b.convert(v) for k, v in data.items()}
        for b in backends
        if "float32" in b.dtypes
    }
    only = dataclasses.replace(settings, ops=(op,))
    records = _large_group(only, backends, "float32", "last", data, arrays, progress, "masked")
    del arrays
    gc.collect()
    return records
