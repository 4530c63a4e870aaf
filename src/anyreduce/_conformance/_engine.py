"""The conformance run: every case on every installed target and runtime, into a report."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ._cases import ROWS, SpecCase, load_node_cases, openvino_seed_cases, seed_cases
from ._divergences import DIVERGENCES
from ._execute import (
    DIVERGENT,
    FAILED,
    PASSED,
    Result,
    run_node_case,
    run_on_runtime,
    run_on_target,
)
from ._generate import RandomChooser, draw_onnx_case, draw_openvino_case
from ._runtimes import RUNTIMES, Runtime, discover_runtimes
from ._targets import LIBRARIES, Target, discover

__all__ = ["SUITES", "Report", "Settings", "check_divergence", "generate_cases", "run"]

SUITES = ("onnx-node", "seed", "openvino-seed", "differential", "divergences")
#: Every name a run's columns take: the array libraries, their CUDA devices, the runtimes.
COLUMNS = (*LIBRARIES, "torch:cuda", "jax:cuda", *(r.name for r in RUNTIMES))
PACKAGES = (
    "anyreduce", "numpy", "torch", "jax", "array-api-strict", "dask", "onnx", "onnxruntime",
    "openvino", "hypothesis",
)  # fmt: skip

Progress = Callable[[int, int, str], None]  # (cases done, cases in all, what runs now)


@dataclass(frozen=True)
class Settings:
    """What a run covers."""

    columns: tuple[str, ...] | None = None  # targets and runtimes by name; None: all
    suites: tuple[str, ...] = SUITES
    examples: int = 40  # generated cases per profile for the differential checks
    seed: int = 0


@dataclass
class Report:
    """Every result of a run, and what could not be tested."""

    settings: Settings
    columns: list[str]
    not_tested: dict[str, str]
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)

    def counts(self) -> Counter[str]:
        return Counter(r.status for r in self.results)

    def matrix(self) -> dict[str, dict[str, Counter[str]]]:
        """op -> column -> Counter of statuses."""
        table: dict[str, dict[str, Counter[str]]] = {
            op: {c: Counter() for c in self.columns} for op in ROWS
        }
        for r in self.results:
            table[r.op][r.column][r.status] += 1
        return {op: cells for op, cells in table.items() if any(cells.values())}

    @property
    def ok(self) -> bool:
        """Some case ran, and none failed: a run that tested nothing (every backend asked
        for absent) is not a success."""
        return bool(self.results) and self.counts()[FAILED] == 0

    def problems(self) -> list[Result]:
        """Failed results first, then divergent ones."""
        order = {FAILED: 0, DIVERGENT: 1}
        chosen = [r for r in self.results if r.status in order]
        return sorted(chosen, key=lambda r: (order[r.status], r.op, r.column, r.case))

    def as_json(self) -> dict[str, Any]:
        counts = self.counts()
        divergence_counts = Counter(r.divergence for r in self.results if r.divergence)
        return {
            "anyreduce": self.versions.get("anyreduce", ""),
            "python": platform.python_version(),
            "versions": self.versions,
            "seconds": round(self.seconds, 2),
            "settings": {
                "columns": list(self.settings.columns or ()),
                "suites": list(self.settings.suites),
                "examples": self.settings.examples,
                "seed": self.settings.seed,
            },
            "columns": self.columns,
            "not_tested": self.not_tested,
            "summary": {s: counts[s] for s in (PASSED, FAILED, DIVERGENT)},
            "matrix": {
                op: {
                    c: {s: cell[s] for s in (PASSED, FAILED, DIVERGENT)} for c, cell in row.items()
                }
                for op, row in self.matrix().items()
            },
            "divergences": [
                {
                    "id": d.id,
                    "runtime": d.runtime,
                    "case": d.case,
                    "theirs": d.theirs,
                    "ours": d.ours,
                    "why": d.why,
                    "seen": divergence_counts[d.id],
                }
                for d in DIVERGENCES
            ],
            "problems": [r.as_json() for r in self.problems()],
        }


def _versions() -> dict[str, str]:
    installed = {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}
    return {p: installed[p] for p in PACKAGES if p in installed}


def generate_cases(profile: str, count: int, seed: int) -> list[SpecCase]:
    """``count`` generated cases of ``profile``: hypothesis when installed, else NumPy."""
    draw = draw_onnx_case if profile == "onnx" else draw_openvino_case
    if count <= 0:
        return []
    if importlib.util.find_spec("hypothesis") is None:
        return [draw(RandomChooser(seed * 1_000_003 + i)) for i in range(count)]
    import hypothesis
    from hypothesis import HealthCheck, Phase, given
    from hypothesis import settings as hypothesis_settings

    from ._generate import hypothesis_strategies

    cases: list[SpecCase] = []
    strategy = hypothesis_strategies()[profile]()

    @hypothesis.seed(seed)
    @hypothesis_settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(case: SpecCase) -> None:
        cases.append(case)

    collect()
    for i in range(len(cases)):
        cases[i] = cases[i].with_name("differential", f"#{i} {cases[i].describe()}")
    return cases


@dataclass
class _Plan:
    """The work of a run as (size, label, job) steps, so progress can be shown."""

    steps: list[tuple[int, str, Callable[[], list[Result]]]] = field(default_factory=list)

    def add(self, size: int, label: str, job: Callable[[], list[Result]]) -> None:
        if size:
            self.steps.append((size, label, job))

    @property
    def total(self) -> int:
        return sum(size for size, _, _ in self.steps)


def _spec_jobs(
    plan: _Plan, label: str, cases: list[SpecCase], targets: list[Target], runtimes: list[Runtime]
) -> None:
    for target in targets:

        def on_target(target: Target = target) -> list[Result]:
            return [r for c in cases if (r := run_on_target(c, target)) is not None]

        plan.add(len(cases), f"{label} on {target.name}", on_target)
    for runtime in runtimes:

        def on_runtime(runtime: Runtime = runtime) -> list[Result]:
            return [r for c in cases if (r := run_on_runtime(c, runtime)) is not None]

        plan.add(len(cases), f"{label} on {runtime.name}", on_runtime)


def check_divergence(divergence: Any, runtime: Runtime) -> Result:
    """Run a documented divergence's example: it must still diverge, and as documented,
    unless the installed release of the runtime is one that fixed it: then it must agree
    with the contract."""
    case = divergence.example().with_name("divergences", divergence.id)
    result = run_on_runtime(case, runtime)
    if result is None:
        msg = f"{runtime.name} cannot run the example of {divergence.id}"
        raise RuntimeError(msg)
    version = runtime.version()
    if version and not divergence.diverges_in(version):
        if result.status != PASSED:
            result.detail = (
                f"{divergence.id} was fixed in {runtime.name} {divergence.fixed_in}, but "
                f"{version} still shows it ({result.status}: {result.detail})"
            )
            result.status = FAILED
        return result
    if result.status != DIVERGENT or result.divergence != divergence.id:
        result.detail = (
            f"the example of {divergence.id} no longer shows it "
            f"({result.status}: {result.detail or 'agrees with the contract'})"
        )
        result.status = FAILED
    return result


def _chunks(cases: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(cases), size):
        yield cases[start : start + size]


def _node_jobs(plan: _Plan, targets: list[Target]) -> None:
    node_cases = load_node_cases()
    for target in targets:
        for chunk in _chunks(node_cases, 33):

            def nodes(target: Target = target, chunk: list[Any] = chunk) -> list[Result]:
                return [run_node_case(c, target) for c in chunk]

            plan.add(len(chunk), f"ONNX node tests on {target.name}", nodes)


def run(settings: Settings, progress: Progress | None = None) -> Report:
    """Run the suites of ``settings`` on every installed target and runtime."""
    started = time.perf_counter()
    wanted = settings.columns
    targets, absent_targets = discover(wanted)
    runtimes, absent_runtimes = discover_runtimes(wanted)
    report = Report(
        settings,
        [t.name for t in targets] + [r.name for r in runtimes],
        {**absent_targets, **absent_runtimes},
        versions=_versions(),
    )
    plan = _Plan()
    if "onnx-node" in settings.suites:
        if importlib.util.find_spec("onnx") is not None:
            _node_jobs(plan, targets)
        else:
            report.not_tested["onnx-node"] = "the ONNX backend node tests need onnx"
    onnx_runtimes = [r for r in runtimes if r.profile == "onnx"]
    openvino_runtimes = [r for r in runtimes if r.profile == "openvino"]
    if "seed" in settings.suites:
        _spec_jobs(plan, "seed examples", list(seed_cases()), targets, onnx_runtimes)
    if "openvino-seed" in settings.suites:
        cases = list(openvino_seed_cases())
        _spec_jobs(plan, "OpenVINO examples", cases, targets, openvino_runtimes)
    if "differential" in settings.suites:
        onnx_cases = generate_cases("onnx", settings.examples, settings.seed)
        _spec_jobs(plan, "generated ONNX cases", onnx_cases, targets, onnx_runtimes)
        openvino_cases = generate_cases("openvino", settings.examples, settings.seed)
        _spec_jobs(plan, "generated OpenVINO cases", openvino_cases, targets, openvino_runtimes)
    if "divergences" in settings.suites:
        for runtime in runtimes:
            documented = [d for d in DIVERGENCES if d.runtime == runtime.name]

            def examples(
                runtime: Runtime = runtime, chosen: list[Any] = documented
            ) -> list[Result]:
                return [check_divergence(d, runtime) for d in chosen]

            plan.add(len(documented), f"divergence examples on {runtime.name}", examples)
    done = 0
    for size, label, job in plan.steps:
        if progress is not None:
            progress(done, plan.total, label)
        report.results += job()
        done += size
    if progress is not None:
        progress(done, plan.total, "done")
    report.seconds = time.perf_counter() - started
    return report
