"""``anyreduce bench`` runs end to end on tiny data; speed targets live in the benchmark itself."""

from __future__ import annotations

import json
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
    from anyreduce._bench._report import judged_records

    # Samples of ours 30, 26, 24 ms against 20 ms each: paired ratios 1.5, 1.3, 1.2.
    samples = {"ours": iter([0.030, 0.026, 0.024]), "native": iter([0.020] * 3)}

    def fake_time_units(units: list[list[Any]], repeats: int, budget_s: float) -> None:
        for c in units[0]:
            c.times = [next(samples[c.key[2]]) for _ in range(3)]

    monkeypatch.setattr(_engine, "_time_units", fake_time_units)
    monkeypatch.setattr(torch, "compile", lambda fn, **options: fn)  # no compiling here
    backend = Backend(
        name="torch",
        convert=torch.from_numpy,
        sync=lambda r: r,
        plain_sum=lambda x, a: lambda: None,
    )
    (record,) = _engine._compiled(_engine.Settings(), [backend], lambda line: None)
    assert record["vs_native"] == pytest.approx(1.3)
    assert record["ours_ms"] == pytest.approx(26.0 / _engine.COMPILED_CALLS)
    assert record["meets"] is False
    result = {"large": [], "small": [], "compiled": [record]}
    assert judged_records(result) == [record]
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
