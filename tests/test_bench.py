"""``anyreduce bench`` runs end to end on tiny data; speed targets live in the benchmark itself."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anyreduce._bench import format_table, to_markdown
from anyreduce._bench._memory import peak_extra_bytes
from anyreduce._cli import main

OPS = (
    "reduce_sum",
    "reduce_sum_square",
    "reduce_l1",
    "reduce_l2",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
    "reduce_log_sum",
    "reduce_log_sum_exp",
)


def test_bench_quick_writes_table_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    args = ["bench", "--quick", "--shape", "4", "8", "--axes", "last"]
    args += ["--backends", "numpy", "torch", "jax", "--dtypes", "float32", "float16"]
    args += ["--no-memory", "--repeats", "2"]
    status = main([*args, "--json", str(out), "--markdown", str(md)])
    assert status == 0
    printed = capsys.readouterr().out
    assert "no targets judged" in printed
    result = json.loads(out.read_text())
    assert set(result) == {"meta", "large", "small", "compiled", "masked", "narrow", "memory"}
    assert result["memory"] == []  # --no-memory
    assert result["compiled"] == []  # a quick run compiles nothing
    assert result["meta"]["contended"] is None
    assert "idle machine" in printed
    backends = {r["backend"] for r in result["large"]} - set(result["meta"]["missing_backends"])
    assert backends  # numpy at least
    keys = {(r["backend"], r["dtype"], r["axes"], r["op"]) for r in result["large"]}
    for backend in backends:
        for op in OPS:
            assert (backend, "float32", "last", op) in keys
            assert (backend, "float16", "last", op) in keys
    for record in result["large"]:
        assert record["ours_ms"] > 0
        assert record["vs_sum"] > 0
        assert record["meets"] is None  # quick runs judge no target
    numpy_l2 = next(r for r in result["large"] if (r["backend"], r["op"]) == ("numpy", "reduce_l2"))
    assert numpy_l2["native_ms"] is not None
    assert {r["op"] for r in result["small"]} == set(OPS)
    assert "| backend |" in md.read_text()
    assert "LogSumExp" in format_table(result)
    assert to_markdown(result).count("\n") > len(result["large"])
    # LogSumExp of masked logits: every backend, reported, not judged.
    masked = result["masked"]
    assert {(r["backend"], r["op"], r["axes"]) for r in masked} == {
        (b, "reduce_log_sum_exp", "last") for b in backends
    }
    assert all(r["meets"] is None and r["vs_sum"] > 0 for r in masked)
    assert "masked" in format_table(result)
    assert "masked" in to_markdown(result)
    # Narrow data (points in space), over both axes: every backend, reported, not judged.
    narrow = result["narrow"]
    assert {(r["backend"], r["op"], r["axes"]) for r in narrow} == {
        (b, op, axes)
        for b in backends
        for op in ("reduce_sum", "reduce_max", "reduce_l2", "reduce_log_sum_exp")
        for axes in ("first", "last")
    }
    assert all(r["meets"] is None and r["shape"] == [2048, 3] for r in narrow)
    assert "Narrow data" in format_table(result)
    assert "Narrow data" in to_markdown(result)


def test_bench_ratios_pair_the_calls_of_each_round() -> None:
    from anyreduce._bench._engine import _Contender, _paired

    ours = _Contender(("numpy", "op", "ours", "anyreduce"), lambda: None, id, [2.0, 4.0, 6.0])
    anchor = _Contender(("numpy", "op", "sum", "sum"), lambda: None, id, [1.0, 4.0, 2.0])
    # Ratios within rounds 2, 1, 3: their median, not 4 / 2 (the ratio of the medians).
    assert _paired(ours, anchor) == 2.0


def test_bench_pauses_between_the_calls_of_different_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyreduce._bench import _engine
    from anyreduce._bench._engine import _Contender, _time_units

    log: list[str] = []
    monkeypatch.setattr(_engine.time, "sleep", lambda s: log.append(f"pause {s}"))

    def contender(backend: str, role: str) -> _Contender:
        return _Contender((backend, "op", role, role), lambda: log.append(f"{backend} {role}"), id)

    units = [
        [contender("numpy", "sum"), contender("numpy", "ours"), contender("numpy", "ort")],
        [contender("torch", "sum"), contender("torch", "ours")],
    ]
    _time_units(units, 2, 60.0)
    pause = f"pause {_engine._SETTLE_S}"
    warm_up = ["numpy sum", "numpy ours", "numpy ort", "torch sum", "torch ours"]
    # onnxruntime's kernel is another library than its unit's backend: pauses around it,
    # and between the backends; every other round takes each unit in reverse.
    first = ["numpy sum", "numpy ours", pause, "numpy ort", pause, "torch sum", "torch ours"]
    second = [pause, "numpy ort", pause, "numpy ours", "numpy sum", pause, "torch ours"]
    assert log == [*warm_up, *first, *second, "torch sum"]


def test_bench_full_runs_again_with_openblas_threads_asleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyreduce._commands import bench

    name, value = bench.QUIET_BLAS
    calls: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(bench.subprocess, "call", lambda cmd, env: calls.append((cmd, env)) or 3)
    argv = ["bench", "--backends", "numpy", "--no-small"]
    assert main(argv) == 3  # the child's exit status
    ((command, env),) = calls
    assert command[1:] == ["-m", "anyreduce", *argv]
    assert env[name] == value
    # A bad argument stops the command before it runs again.
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "--ops", "reduce_median"])
    assert stopped.value.code == 2
    assert len(calls) == 1


@pytest.mark.parametrize(("option", "value"), [("--ops", "reduce_median"), ("--backends", "cupy")])
def test_bench_rejects_unknown_names(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "--quick", option, value])
    assert stopped.value.code == 2
    assert f"argument {option}: invalid choice: '{value}' (choose from " in capsys.readouterr().err


def test_bench_knows_the_benchmark_backends() -> None:
    from anyreduce._bench._anchors import BACKEND_NAMES
    from anyreduce._commands import bench

    assert bench.BACKENDS == BACKEND_NAMES


def test_numpy_peak_memory_counts_temporaries_not_output() -> None:
    x = np.ones((256, 1024), dtype=np.float32)
    assert peak_extra_bytes("numpy", lambda: np.sum(x, axis=1)) < x.nbytes // 10
    assert peak_extra_bytes("numpy", lambda: np.sum(x * x, axis=1)) >= x.nbytes
    assert peak_extra_bytes("jax", lambda: None) is None


def _counting_backend(calls: list[str]) -> Any:
    from anyreduce._bench._anchors import Backend

    def maker(label: str) -> Any:
        return lambda x, a: lambda: calls.append(label)

    return Backend(
        name="numpy",
        convert=lambda x: x,
        sync=lambda r: r,
        plain_sum=maker("sum"),
        native={op: {"first": maker("first"), "second": maker("second")} for op in OPS},
    )


@pytest.mark.parametrize("warmed", [frozenset(), frozenset({"numpy"})])
@pytest.mark.parametrize(("dtype", "natives"), [("float32", 2), ("float16", 1)])
def test_bench_times_every_native_only_where_targets_are_judged(
    dtype: str, natives: int, warmed: frozenset[str]
) -> None:
    from anyreduce._bench._engine import JUDGED_DTYPE, Settings, _large_group, _rounds

    calls: list[str] = []
    settings = Settings(shape=(4, 8), ops=("reduce_l2",), onnxruntime=False, memory=False)
    data = {"normal": np.ones((4, 8), np.float32), "near_one": np.ones((4, 8), np.float32)}
    data = {k: v.astype(dtype) for k, v in data.items()}
    backend = _counting_backend(calls)
    arrays = {"numpy": data}
    records = _large_group(settings, [backend], dtype, "last", data, arrays, print, warmed=warmed)
    judged = dtype == JUDGED_DTYPE
    rounds = _rounds(settings, judged)
    # A warm-up call (skipped for a library warmed by the judged groups where targets are
    # not judged), then one call per round of each native timed.
    calls_made = rounds + (0 if warmed and not judged else 1)
    assert calls.count("first") == calls_made
    assert calls.count("second") == calls_made * (natives - 1)
    assert rounds == (settings.repeats if judged else 2)
    if natives == 1:
        assert records[0]["native"] == "first"


def test_bench_small_overhead_is_the_median_difference_within_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyreduce._bench import _engine

    # Three rounds of 1000 calls: the sum's samples take 10, 30, 20 ms, ours 12, 31, 50 ms.
    # Within rounds ours is 2, 1, 30 ms slower (median 2 ms: 2 us a call); the medians of
    # each, 31 and 20 ms, are 11 us a call apart.
    samples = {"sum": iter([0.010, 0.030, 0.020]), "ours": iter([0.012, 0.031, 0.050])}

    def fake_time_units(units: list[list[Any]], repeats: int, budget_s: float) -> None:
        for unit in units:
            for c in unit:
                role = c.key[2]
                c.times = [next(samples[role]) for _ in range(3)] if role in samples else [1.0]

    monkeypatch.setattr(_engine, "_time_units", fake_time_units)
    settings = _engine.Settings(ops=("reduce_sum",), small_calls=1000)
    backend = _counting_backend([])
    (record,) = _engine._small(settings, [backend], print)
    assert record["overhead_us"] == pytest.approx(2.0)
    assert record["sum_us"] == pytest.approx(20.0)
    assert record["ours_us"] == pytest.approx(31.0)
    assert record["meets"] is True


def _started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The spinning processes the benchmark starts, as they start."""
    from anyreduce._bench import _contention

    started: list[Any] = []
    popen = _contention.subprocess.Popen

    def recording(command: Any, *args: Any, **kwargs: Any) -> Any:
        process = popen(command, *args, **kwargs)
        if _contention.SPIN in command:  # not another command (platform's uname)
            started.append(process)
        return process

    monkeypatch.setattr(_contention.subprocess, "Popen", recording)
    return started


def test_bench_contended_spins_one_process_per_core_for_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from anyreduce._bench._engine import _cores

    started = _started(monkeypatch)
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    args = ["bench", "--quick", "--contended", "--shape", "4", "8", "--axes", "last"]
    args += ["--backends", "numpy", "--ops", "reduce_sum", "reduce_l2", "--no-small"]
    args += ["--no-masked", "--no-narrow", "--no-onnxruntime", "--repeats", "1"]
    assert main([*args, "--json", str(out), "--markdown", str(md)]) == 0
    result = json.loads(out.read_text())
    contended = result["meta"]["contended"]
    cores = _cores()
    assert contended["spinners"] == cores == len(started)
    assert contended["spinning_at_end"] == cores  # they lasted the whole run
    assert contended["limit_s"] > 0
    assert all(p.poll() is not None for p in started)  # and are gone after it
    assert f"contended: {cores} spinning processes" in capsys.readouterr().out
    assert "contended:" in md.read_text()
    assert result["meta"]["targets"]["contended_vs_native"] == 1.5


def test_bench_contended_spinners_stop_on_errors_and_interrupts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyreduce._bench._contention import spinners

    started = _started(monkeypatch)

    def interrupted_run(error: type[BaseException]) -> None:
        with spinners(2, 60.0):
            assert len(started) == 2
            assert all(p.poll() is None for p in started)
            raise error

    for error in (KeyboardInterrupt, RuntimeError):
        with pytest.raises(error):
            interrupted_run(error)
        assert all(p.poll() is not None for p in started)
        started.clear()
    with pytest.raises(ValueError, match="spinning processes must be at least 1, got 0"):
        spinners(0, 60.0).__enter__()


def test_bench_contended_spinners_stop_by_themselves() -> None:
    import time

    from anyreduce._bench._contention import spinners

    with spinners(1, 0.2) as record:
        time.sleep(3.0)
    assert record["spinning_at_end"] == 0
    assert record["seconds"] >= 3.0


@pytest.mark.parametrize(("vs_native", "meets"), [(1.4, True), (1.6, False), (None, True)])
def test_bench_contended_judges_ours_against_the_best_native(
    vs_native: float | None, meets: bool
) -> None:
    from anyreduce._bench._engine import Settings, _judge

    record = {
        "dtype": "float32",
        "op": "reduce_l2",
        "vs_sum": 9.0,  # not judged beside other work
        "vs_native": vs_native,
        "vs_onnxruntime": 9.0,
        "extra_fraction": 0.0,
    }
    judged = _judge(record, Settings(contended=True))
    assert judged["meets"] is meets
    assert judged["target_vs_native"] == 1.5
    assert judged["target_vs_sum"] is None
    assert "vs_sum" not in judged["checks"]
    assert "vs_onnxruntime" not in judged["checks"]


def test_bench_measures_memory_of_integer_dtypes_too() -> None:
    from anyreduce._bench import format_table, to_markdown
    from anyreduce._bench._anchors import load_backend
    from anyreduce._bench._engine import MEMORY_DTYPES, MEMORY_TARGET, Settings, _memory

    assert {"int8", "int32"} <= set(MEMORY_DTYPES)
    backend = load_backend("numpy")
    assert backend is not None
    settings = Settings(shape=(64, 128), ops=("reduce_sum", "reduce_log_sum_exp"))
    records = _memory(settings, [backend], lambda line: None)
    assert {(r["dtype"], r["axes"], r["op"]) for r in records} == {
        (d, a, op) for d in MEMORY_DTYPES for a in settings.axes for op in settings.ops
    }
    for r in records:
        assert r["input_bytes"] == 64 * 128 * np.dtype(r["dtype"]).itemsize
        assert r["extra_fraction"] == r["extra_bytes"] / r["input_bytes"]
        assert r["meets"] is (r["extra_fraction"] <= MEMORY_TARGET)
    result = {"meta": {"seconds": 0.0, "settings": {"shape": [64, 128]}}, "large": []}
    result.update({"small": [], "memory": records})
    assert "peak extra memory of ours" in format_table(result)
    assert "| int8 |" in to_markdown(result)
    quick = Settings.quick_settings(shape=(8, 8), ops=("reduce_sum",))
    assert all(r["meets"] is None for r in _memory(quick, [backend], lambda line: None))
    assert _memory(Settings(memory=False), [backend], lambda line: None) == []


def test_bench_judges_compiled_l2_against_compiled_vector_norm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from anyreduce._bench import _engine
    from anyreduce._bench._anchors import Backend
    from anyreduce._bench._report import _compiled_lines, judged_records

    # Samples of ours 30, 26, 24 ms against 20 ms each: paired ratios 1.5, 1.3, 1.2; then
    # the pair compiled without guards on globals: 22, 21, 20 ms (1.1, 1.05, 1.0).
    ours = [0.030, 0.026, 0.024, 0.022, 0.021, 0.020]
    samples = {"ours": iter(ours), "native": iter([0.020] * 6)}

    def fake_time_units(units: list[list[Any]], repeats: int, budget_s: float) -> None:
        for c in units[0]:
            c.times = [next(samples[c.key[2]]) for _ in range(3)]

    monkeypatch.setattr(_engine, "_time_units", fake_time_units)
    backend = Backend(
        name="torch",
        convert=torch.from_numpy,
        sync=lambda r: r,
        plain_sum=lambda x, a: lambda: None,
    )
    compiles: list[dict[str, Any]] = []

    def compile_(fn: Any, **options: Any) -> Any:
        compiles.append(options)
        return fn  # no compiling here

    monkeypatch.setattr(torch, "compile", compile_)
    record, unguarded = _engine._compiled(_engine.Settings(), [backend], lambda line: None)
    assert record["vs_native"] == pytest.approx(1.3)
    assert record["ours_ms"] == pytest.approx(26.0 / _engine.COMPILED_CALLS)
    assert record["meets"] is False
    # Reported, not judged, and another row for --compare: both compiled with the filter.
    assert unguarded["vs_native"] == pytest.approx(1.05)
    assert unguarded["meets"] is None
    assert unguarded["target_vs_native"] is None
    assert unguarded["guards"] == unguarded["data"] == "skip_guard_on_globals_unsafe"
    assert [c.get("options") for c in compiles] == [None, None] + 2 * [
        {"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe}
    ]
    result = {"large": [], "small": [], "compiled": [record, unguarded]}
    assert judged_records(result) == [record]
    assert "not judged" in _compiled_lines(result)[1]
    assert _engine._compiled(_engine.Settings.quick_settings(), [backend], print) == []
    assert _engine._compiled(_engine.Settings(compiled=False), [backend], print) == []


def test_bench_reports_a_compile_that_fails_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from anyreduce._bench import _engine
    from anyreduce._bench._anchors import Backend
    from anyreduce._bench._report import _compiled_lines, judged_records

    def broken(fn: Any, **options: Any) -> Any:
        def call(*args: Any) -> Any:
            raise RuntimeError("Unsupported: a dictionary key it cannot hash\nmore detail")

        return call

    monkeypatch.setattr(torch, "compile", broken)
    backend = Backend(
        name="torch",
        convert=torch.from_numpy,
        sync=lambda r: r,
        plain_sum=lambda x, a: lambda: None,
    )
    lines: list[str] = []
    (record,) = _engine._compiled(_engine.Settings(), [backend], lines.append)
    assert record["meets"] is False
    reason = "RuntimeError: Unsupported: a dictionary key it cannot hash"
    assert record["failed"] == f"anyreduce: {reason}"
    assert judged_records({"large": [], "small": [], "compiled": [record]}) == [record]
    (line,) = _compiled_lines({"compiled": [record]})
    assert "did not compile" in line
    assert "MISS" in line
    assert any("failed to compile" in line for line in lines)


def _run(**changes: Any) -> dict[str, Any]:
    """A bench result with two float32 rows and a compiled one (the fields compare reads)."""
    meta = {
        "settings": {"shape": [4096, 8192], "contended": False, "device": "CPU", "quick": False},
        "machine": {"platform": "Linux-x86_64", "processor": "x86_64", "cpus": 2},
        "versions": {"anyreduce": "0.1.0", "numpy": "2.4.6", "torch": "2.13.0+cpu"},
        "backends": {"numpy": "", "torch": "2 threads"},
        "date": "2026-11-01T10:00:00Z",
    }
    row = {"backend": "numpy", "dtype": "float32", "shape": [4096, 8192], "data": "normal"}
    row |= {"ours_ms": 10.0, "gb_per_s": 13.4, "meets": None}
    large = [
        {**row, "axes": "last", "op": "reduce_sum", "vs_sum": 0.70, "vs_native": 0.68,
         "vs_onnxruntime": 1.36},
        {**row, "axes": "last", "op": "reduce_l2", "vs_sum": 1.07, "vs_native": 0.98,
         "vs_onnxruntime": None},
    ]  # fmt: skip
    compiled = [
        {"backend": "torch", "dtype": "float32", "shape": [2048, 4096], "axes": "last",
         "op": "reduce_l2", "vs_native": 1.12, "ours_ms": 2.4, "native_ms": 2.1,
         "native": "torch.compile(vector_norm)"}
    ]  # fmt: skip
    result = {"meta": meta, "large": large, "small": [], "compiled": compiled}
    for path, value in changes.items():
        *keys, last = path.split("__")
        place: Any = result
        for key in keys:
            place = place[int(key)] if key.isdigit() else place[key]
        place[last] = value
    return result


def test_bench_compare_judges_each_ratio_against_the_same_ratio_of_a_saved_run() -> None:
    from anyreduce._bench._compare import TOLERANCE, compare

    assert TOLERANCE == 1.1
    then = _run()
    # Sum's x sum 0.70 -> 0.80 (1.14x worse), its x native 0.68 -> 0.60 (better); L2's x sum
    # 1.07 -> 1.17 (1.09x: within), compiled L2 1.12 -> 1.25 (1.12x worse).
    now = _run(large__0__vs_sum=0.80, large__0__vs_native=0.60, large__1__vs_sum=1.17)
    now["compiled"][0]["vs_native"] = 1.25
    now["meta"]["settings"]["shape"] = (4096, 8192)  # a run's own settings hold tuples
    comparison = compare(now, then, "latest.json")
    rows = {(r["op"], r["table"], r["ratio"]): r for r in comparison["ratios"]}
    # x sum, x native and x ort where both runs have it; the compiled x native.
    assert set(rows) == {
        ("reduce_sum", "large", "vs_sum"),
        ("reduce_sum", "large", "vs_native"),
        ("reduce_sum", "large", "vs_onnxruntime"),
        ("reduce_l2", "large", "vs_sum"),
        ("reduce_l2", "large", "vs_native"),
        ("reduce_l2", "compiled", "vs_native"),
    }
    sum_ratio = rows["reduce_sum", "large", "vs_sum"]
    assert (sum_ratio["then"], sum_ratio["now"]) == (0.70, 0.80)
    assert sum_ratio["change"] == pytest.approx(0.80 / 0.70)
    worse = {(r["op"], r["table"], r["ratio"]) for r in comparison["ratios"] if not r["meets"]}
    assert worse == {("reduce_sum", "large", "vs_sum"), ("reduce_l2", "compiled", "vs_native")}
    assert comparison["baseline"] == "latest.json"
    assert comparison["baseline_date"] == "2026-11-01T10:00:00Z"
    assert comparison["tolerance"] == TOLERANCE
    assert comparison["differences"] == []
    assert comparison["unmatched"] == 0


def test_bench_compare_names_what_differs_between_the_runs() -> None:
    from anyreduce._bench._compare import compare

    now = _run(
        meta__machine__cpus=16,
        meta__versions__torch="2.11.0+cu130",
        meta__settings__contended=True,
        meta__settings__shape=[256, 512],
    )
    del now["meta"]["versions"]["numpy"]
    now["meta"]["backends"] = {"numpy": "", "torch": "4 threads", "jax": "x64 off"}
    now["large"][0]["shape"] = [256, 512]
    comparison = compare(now, _run(), "latest.json")
    assert comparison["differences"] == [
        "shape [4096, 8192] -> [256, 512]",
        "contended False -> True",
        "cpus 2 -> 16",
        "numpy 2.4.6 -> not installed",
        "torch 2.13.0+cpu -> 2.11.0+cu130",
        "torch: 2 threads -> 4 threads",  # a backend run in one of the runs only: no rows
    ]
    # A hand-made file whose meta lacks a part, or has another shape there, is read too.
    bare = _run(meta__machine=[2, "x86_64"])
    del bare["meta"]["versions"]
    assert compare(_run(), bare, "saved.json")["differences"] == [
        "processor unknown -> x86_64",
        "cpus unknown -> 2",
        "anyreduce not installed -> 0.1.0",
        "numpy not installed -> 2.4.6",
        "torch not installed -> 2.13.0+cpu",
    ]
    # Rows of another shape are not compared; the saved run's other rows are counted.
    assert {r["op"] for r in comparison["ratios"] if r["table"] == "large"} == {"reduce_l2"}
    assert comparison["unmatched"] == 1
    # A quick run measures nothing the saved full run did.
    from anyreduce._bench._report import _compared

    for table in ("large", "compiled"):
        for record in now[table]:
            record["shape"] = [256, 512]
    summary, worse, notes = _compared({"comparison": compare(now, _run(), "latest.json")})
    assert summary.endswith("no ratio measured in both runs")
    assert worse == []
    assert notes.startswith("the runs differ in shape [4096, 8192] -> [256, 512]; contended")
    assert notes.endswith("3 of the saved run's rows were not measured here")


def test_bench_compare_is_reported_and_fails_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import anyreduce._bench

    saved = tmp_path / "latest.json"
    saved.write_text(json.dumps(_run()))
    now = _run(large__1__vs_sum=1.40)  # L2 1.07 -> 1.40 x sum: 1.31x worse
    now["meta"]["seconds"] = 1.0
    now["meta"]["settings"]["small_shape"] = [3, 2, 2]
    now.update(masked=[], narrow=[], memory=[])
    monkeypatch.setattr(anyreduce._bench, "run_suite", lambda settings, progress: now)
    out = tmp_path / "now.json"
    md = tmp_path / "now.md"
    argv = ["bench", "--quick", "--compare", str(saved), "--json", str(out), "--markdown", str(md)]
    assert main(argv) == 0  # reported, not judged, without --check
    printed = capsys.readouterr().out
    summary = f"against {saved} (measured 2026-11-01T10:00:00Z): float32 5 of 6 ratios within"
    assert summary in printed
    assert re.search(r"\n *numpy +float32 +last +L2 +x sum +1\.07 +1\.40 +1\.31\n", printed)
    assert json.loads(out.read_text())["comparison"]["ratios"][3]["meets"] is False
    assert "| numpy | float32 | last | L2 | x sum | 1.07 | 1.40 | 1.31 |" in md.read_text()
    assert main([*argv, "--check"]) == 1
    # The same run against itself: nothing moved.
    saved.write_text(json.dumps(now))
    assert main([*argv, "--check"]) == 0
    assert "float32 6 of 6 ratios" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[1, 2]", "not a result of 'anyreduce bench --json'"),
        ('{"meta": {}}', "not a result of 'anyreduce bench --json'"),
        ('{"meta": {}, "large": {}}', "not a result of 'anyreduce bench --json'"),
        ("{", "is not JSON"),
        ("\udcff{}", "is not JSON (not UTF-8 text)"),
        ('{"meta": {}, "large": [{"op": "reduce_sum"}]}', "not a result of 'anyreduce bench"),
    ],
    ids=["a-list", "no-rows", "rows-not-a-list", "broken-json", "not-utf-8", "row-without-names"],
)
def test_bench_compare_rejects_a_file_that_is_no_bench_result(
    content: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "saved.json"
    saved.write_bytes(content.encode("utf-8", "surrogateescape"))  # \udcff: the byte 0xff
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "--quick", "--compare", str(saved)])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("anyreduce bench: argument --compare: ")
    assert words in line


def _timed(ours: tuple[float, float], plain: float = 5.0) -> dict[str, Any]:
    """A bench result whose two large rows took ``ours`` ms beside a plain sum of ``plain``."""
    changes = {f"large__{i}__ours_ms": ms for i, ms in enumerate(ours)}
    return _run(**changes, large__0__sum_ms=plain, large__1__sum_ms=plain)


def test_bench_by_turns_sets_each_median_time_beside_the_other_codes() -> None:
    from anyreduce._bench._compare import compare_by_turns

    before = [_timed((10.0, 10.0)), _timed((11.0, 10.0), 6.0), _timed((30.0, 10.0), 4.0)]
    after = [_timed((12.5, 12.0)), _timed((12.0, 12.0), 9.0), _timed((9.0, 12.0))]
    result = compare_by_turns(before, after, "fbd8a47")
    rows = {(row["table"], row["op"]): row for row in result["times"]}
    assert set(rows) == {("large", "reduce_sum"), ("large", "reduce_l2"), ("compiled", "reduce_l2")}
    # The medians, not the means or the fastest: one slow or fast round moves nothing.
    assert rows["large", "reduce_sum"]["then_ms"] == 11.0
    assert rows["large", "reduce_sum"]["now_ms"] == 12.0
    assert rows["large", "reduce_sum"]["meets"] is True  # 1.09x
    assert rows["large", "reduce_l2"]["change"] == pytest.approx(1.2)
    assert rows["large", "reduce_l2"]["meets"] is False
    assert rows["compiled", "reduce_l2"]["change"] == 1.0
    # The plain sum's median moved 5 -> 5 ms on both rows: the machine held still.
    assert (result["anchors"], result["anchors_beyond_tolerance"]) == (2, 0)
    assert result["rounds"] == 3
    # A row that one of the runs did not measure is not compared.
    del after[1]["large"][0]
    assert {row["op"] for row in compare_by_turns(before, after, "x")["times"]} == {"reduce_l2"}


def _by_turns() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "by_turns.py"
    spec = importlib.util.spec_from_file_location("by_turns", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_by_turns_alternates_the_codes_and_fails_check_past_tolerance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    by_turns = _by_turns()
    order = []

    def bench(src: Path, args: list[str], out: Path) -> dict[str, Any]:
        order.append(out.stem)
        assert args == ["--backend", "numpy"]
        return _timed((10.0, 12.0)) if out.stem.startswith("after") else _timed((10.0, 10.0))

    monkeypatch.setattr(by_turns, "_export", lambda revision, into: tmp_path)
    monkeypatch.setattr(by_turns, "_bench", bench)
    argv = ["fbd8a47", "--rounds", "3", "--", "--backend", "numpy"]
    assert by_turns.main(argv) == 0  # reported, not judged, without --check
    # Each round runs both codes, the first of them in turn: the machine's drift cancels.
    assert order == ["before-0", "after-0", "after-1", "before-1", "before-2", "after-2"]
    printed = capsys.readouterr().out
    assert "numpy float32 reduce_l2 over last (large): 10.00 -> 12.00 ms, x1.200" in printed
    assert "2 of 3 median times within 1.1x of fbd8a47's over 3 rounds by turns" in printed
    assert by_turns.main([*argv[:3], "--check", *argv[3:]]) == 1
    saved = tmp_path / "turns.json"
    assert by_turns.main([*argv[:3], "--json", str(saved), *argv[3:]]) == 0
    written = json.loads(saved.read_text())
    assert len(written["before"]) == len(written["after"]) == 3
    assert written["comparison"]["times"][1]["change"] == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["no-such-revision"], "argument revision: git cannot archive 'no-such-revision'"),
        (["HEAD", "--rounds", "0"], "argument --rounds: must be 1 or more, got 0"),
    ],
    ids=["unknown-revision", "no-rounds"],
)
def test_bench_by_turns_rejects_bad_arguments_in_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        _by_turns().main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"by_turns.py: error: {words}"
