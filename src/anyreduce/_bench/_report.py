"""The benchmark's results as a text table, a Markdown table and a plot of the ratios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["format_table", "plot_ratios", "to_markdown"]

_SHORT = {
    "reduce_sum": "Sum",
    "reduce_sum_square": "SumSquare",
    "reduce_l1": "L1",
    "reduce_l2": "L2",
    "reduce_mean": "Mean",
    "reduce_prod": "Prod",
    "reduce_max": "Max",
    "reduce_min": "Min",
    "reduce_log_sum": "LogSum",
    "reduce_log_sum_exp": "LogSumExp",
}


def _f(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _mem(record: dict[str, Any]) -> str:
    fraction = record.get("extra_fraction")
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def _mark(meets: bool | None) -> str:
    return {True: "ok", False: "MISS", None: ""}[meets]


_HEAD = ["backend", "dtype", "axes", "op", "ms", "x sum", "x native", "x ort", "GB/s", "mem", ""]


def _large_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            r["backend"],
            r["dtype"],
            r["axes"],
            _SHORT.get(r["op"], r["op"]),
            _f(r["ours_ms"], 1),
            _f(r["vs_sum"]),
            _f(r["vs_native"]),
            _f(r["vs_onnxruntime"]),
            _f(r["gb_per_s"], 1),
            _mem(r),
            _mark(r.get("meets")),
        ]
        for r in records
    ]


_MASKED_TITLE = (
    "LogSumExp of masked logits (half the entries -1e9, as attention masks write), "
    "float32, last axis: not judged; the native times show which exp kernels slow down"
)


_NARROW_TITLE = (
    "Narrow data (float32 points in space, one row of 3 per point), over the first and the "
    "last axis: not judged; NumPy's own kernels loop once per row here"
)


def _rows(result: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    head = _HEAD
    rows = _large_rows(result["large"])
    small_head = ["backend", "op", "us", "sum us", "native us", "overhead us", ""]
    small_rows = [
        [
            r["backend"],
            _SHORT.get(r["op"], r["op"]),
            _f(r["ours_us"], 1),
            _f(r["sum_us"], 1),
            _f(r["native_us"], 1),
            _f(r["overhead_us"], 1),
            _mark(r.get("meets")),
        ]
        for r in result["small"]
    ]
    return head, rows, small_head, small_rows


def _aligned(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def judged_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of a run whose targets are judged (large, small, compiled and memory)."""
    records = (
        result["large"] + result["small"] + result.get("compiled", []) + result.get("memory", [])
    )
    return [r for r in records if r.get("meets") is not None]


_MEMORY_HEAD = ["backend", "dtype", "axes", "op", "mem", ""]


def _memory_rows(result: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["backend"],
            r["dtype"],
            r["axes"],
            _SHORT.get(r["op"], r["op"]),
            _mem(r),
            _mark(r.get("meets")),
        ]
        for r in result.get("memory", [])
    ]


def _memory_title(result: dict[str, Any]) -> str:
    shape = tuple(result["memory"][0]["shape"])
    return f"peak extra memory of ours as % of the input {shape}, other dtypes than float32"


def _compiled_lines(result: dict[str, Any]) -> list[str]:
    """One line per compiled record: both times and their ratio, with the target."""
    lines = []
    for r in result.get("compiled", []):
        target = r.get("target_vs_native")
        judged = "" if target is None else f" (target <= {target}: {_mark(r['meets'])})"
        what = "torch.compile"
        if r.get("guards"):  # reported only: both compiled with this guard filter
            what += f" (guard_filter_fn=torch.compiler.{r['guards']}, not judged)"
        if r.get("failed"):
            lines.append(f"{what}, float32 L2: did not compile ({r['failed']}){judged}")
            continue
        lines.append(
            f"{what}, float32 {tuple(r['shape'])} L2 over the last axis: ours "
            f"{r['ours_ms']:.2f} ms, {r['native']} {r['native_ms']:.2f} ms, "
            f"x native {r['vs_native']:.2f}{judged}"
        )
    return lines


def _contention(result: dict[str, Any]) -> str:
    contended = result["meta"].get("contended")
    if not contended:
        return "idle machine (no spinning processes)"
    return (
        f"contended: {contended['spinners']} spinning processes, one per core, for the whole "
        f"run; judged: x native <= {result['meta']['targets']['contended_vs_native']}"
    )


_COMPARED_HEAD = ["backend", "dtype", "axes", "op", "ratio", "then", "now", "change"]
_RATIO_NAMES = {"vs_sum": "x sum", "vs_native": "x native", "vs_onnxruntime": "x ort"}


def _compared(result: dict[str, Any]) -> tuple[str, list[list[str]], str]:
    """A comparison with a saved run: its summary, the rows that got worse, the differences."""
    comparison = result["comparison"]
    ratios = comparison["ratios"]
    tolerance = comparison["tolerance"]
    worse = sorted(
        (r for r in ratios if not r["meets"]),
        key=lambda r: (
            r["dtype"] != "float32",
            -(r["change"] if r["change"] is not None else float("inf")),
        ),
    )
    # float32 first: its targets are the judged ones.
    dtypes = sorted(dict.fromkeys(r["dtype"] for r in ratios), key=lambda d: d != "float32")
    counts = []
    for dtype in dtypes:
        of = [r for r in ratios if r["dtype"] == dtype]
        within = sum(1 for r in of if r["meets"])
        better = sum(1 for r in of if r["change"] is not None and r["change"] * tolerance < 1)
        counts.append(
            f"{dtype} {within} of {len(of)} ratios within {tolerance}x of the saved ones or "
            f"lower ({better} lower by more than {tolerance}x)"
        )
    measured = "; ".join(counts) if counts else "no ratio measured in both runs"
    summary = f"against {comparison['baseline']} (measured {comparison['baseline_date']}): "
    summary += measured
    if worse:
        summary += f"; {len(worse)} more than {tolerance}x the saved ones"
    rows = [
        [
            r["backend"],
            r["dtype"],
            r["axes"],
            _SHORT.get(r["op"], r["op"]) + (" compiled" if r["table"] == "compiled" else ""),
            _RATIO_NAMES.get(r["ratio"], r["ratio"]),
            _f(r["then"]),
            "failed" if r["now"] is None else _f(r["now"]),
            _f(r["change"]),
        ]
        for r in worse
    ]
    notes = []
    if comparison["differences"]:
        notes.append(
            "the runs differ in " + "; ".join(comparison["differences"]) + ": ratios compare "
            "fairly between runs of the same settings on the same machine and libraries"
        )
    if comparison["unmatched"]:
        notes.append(f"{comparison['unmatched']} of the saved run's rows were not measured here")
    return summary, rows, "; ".join(notes)


def _summary(result: dict[str, Any]) -> str:
    judged = judged_records(result)
    if not judged:
        return "no targets judged (quick run or no float32 data)"
    missed = [r for r in judged if not r["meets"]]
    return f"targets met in {len(judged) - len(missed)} of {len(judged)} judged cases"


def format_table(result: dict[str, Any]) -> str:
    """Plain-text tables of a run: large inputs, then small inputs."""
    head, rows, small_head, small_rows = _rows(result)
    meta = result["meta"]
    shape = tuple(meta["settings"]["shape"])
    parts = [
        _contention(result),
        f"large inputs {shape}: median ms; ratios to the backend's plain sum, its best native "
        "expression and onnxruntime; peak extra memory as % of the input",
        _aligned(head, rows),
    ]
    if result.get("masked"):
        parts += [f"\n{_MASKED_TITLE}", _aligned(head, _large_rows(result["masked"]))]
    if result.get("narrow"):
        shape = tuple(result["narrow"][0]["shape"])
        title = f"{_NARROW_TITLE}, {shape}"
        parts += [f"\n{title}", _aligned(head, _large_rows(result["narrow"]))]
    if small_rows:
        parts += [
            f"\nsmall input {tuple(meta['settings']['small_shape'])}: median us per call",
            _aligned(small_head, small_rows),
        ]
    if result.get("compiled"):
        parts += ["", *_compiled_lines(result)]
    if result.get("memory"):
        parts += [f"\n{_memory_title(result)}", _aligned(_MEMORY_HEAD, _memory_rows(result))]
    if result.get("comparison"):
        summary, worse, notes = _compared(result)
        parts.append(f"\n{summary}" + (":" if worse else ""))
        if worse:
            parts.append(_aligned(_COMPARED_HEAD, worse))
        if notes:
            parts.append(notes)
    parts.append(f"\n{_summary(result)}; {meta['seconds']:.0f} s")
    return "\n".join(parts)


def _md(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(result: dict[str, Any]) -> str:
    """The tables of a run in Markdown."""
    head, rows, small_head, small_rows = _rows(result)
    parts = [_contention(result) + ".", "", _md(head, rows)]
    if result.get("masked"):
        parts += ["", _MASKED_TITLE + ":", "", _md(head, _large_rows(result["masked"]))]
    if result.get("narrow"):
        title = f"{_NARROW_TITLE}, {tuple(result['narrow'][0]['shape'])}:"
        parts += ["", title, "", _md(head, _large_rows(result["narrow"]))]
    if small_rows:
        parts += ["", _md(small_head, small_rows)]
    if result.get("compiled"):
        parts += ["", *(line + "." for line in _compiled_lines(result))]
    if result.get("memory"):
        parts += ["", _memory_title(result) + ":", "", _md(_MEMORY_HEAD, _memory_rows(result))]
    if result.get("comparison"):
        summary, worse, notes = _compared(result)
        parts += ["", summary + (":" if worse else ".")]
        if worse:
            parts += ["", _md(_COMPARED_HEAD, worse)]
        if notes:
            parts += ["", notes + "."]
    parts += ["", _summary(result) + "."]
    return "\n".join(parts)


def plot_ratios(result: dict[str, Any], path: str | Path) -> Path:
    """Bar charts of each operator's time over the plain sum: one panel per dtype and axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    large = result["large"]
    order = {"last": 0, "first": 1, "all": 2}
    panels = sorted(
        {(r["dtype"], r["axes"]) for r in large},
        key=lambda p: (p[0] != "float32", p[0], order.get(p[1], 3)),
    )
    ops = list(dict.fromkeys(r["op"] for r in large))
    backends = list(dict.fromkeys(r["backend"] for r in large))
    fig, axs = plt.subplots(
        len(panels), 1, figsize=(11, 2.8 * len(panels)), squeeze=False, sharex=True
    )
    width = 0.8 / max(1, len(backends))
    for ax, (dtype, axes) in zip(axs[:, 0], panels, strict=True):
        for j, backend in enumerate(backends):
            values = []
            for op in ops:
                match = [
                    r
                    for r in large
                    if (r["dtype"], r["axes"], r["backend"], r["op"]) == (dtype, axes, backend, op)
                ]
                values.append(match[0]["vs_sum"] if match else 0.0)
            xs = [i + (j - (len(backends) - 1) / 2) * width for i in range(len(ops))]
            ax.bar(xs, values, width, label=backend)
        ax.axhline(1.5, color="grey", linestyle="--", linewidth=0.8)
        ax.axhline(4.0, color="grey", linestyle=":", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("time / plain sum")
        ax.set_title(f"{dtype}, reduced over {axes} axes", fontsize=10)
        ax.legend(fontsize=8, ncol=len(backends))
    axs[-1, 0].set_xticks(range(len(ops)))
    axs[-1, 0].set_xticklabels([_SHORT.get(op, op) for op in ops])
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
