"""A run's ratios against the same ratios of a saved run (``anyreduce bench --compare``).

Each ratio divides one time by an anchor timed beside it in the same run, so two runs on
the same machine can be compared ratio by ratio, where their absolute times cannot. A
ratio is judged within :data:`TOLERANCE` when it is at most that much larger than the
saved one; a smaller ratio (faster against the same anchor) always is.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

__all__ = ["TOLERANCE", "compare", "compare_by_turns", "is_result"]

#: How much larger a ratio may be than the saved run's before it counts as worse.
TOLERANCE = 1.1

#: The ratios compared, by table of the result.
RATIOS = {"large": ("vs_sum", "vs_native", "vs_onnxruntime"), "compiled": ("vs_native",)}

#: The fields that name a row: the same operator on the same data in both runs.
_ROW = ("backend", "dtype", "shape", "axes", "op")

#: The settings under which ratios are comparable at all.
_SETTINGS = ("shape", "contended", "device", "quick")


def is_result(data: object) -> bool:
    """Whether ``data`` (read from JSON) has the shape of an ``anyreduce bench --json`` file."""
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
        return False
    for table in RATIOS:
        records = data.get(table, [])
        if not isinstance(records, list):
            return False
        for record in records:
            if not isinstance(record, dict) or any(field not in record for field in _ROW):
                return False
    return "large" in data


def _key(table: str, record: dict[str, Any]) -> tuple[object, ...]:
    return (table, *(str(record[field]) for field in _ROW), str(record.get("data")))


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None  # type: ignore[arg-type]


def _part(meta: dict[str, Any], place: str) -> dict[str, Any]:
    part = meta.get(place)
    return part if isinstance(part, dict) else {}


def _differences(now: dict[str, Any], then: dict[str, Any]) -> list[str]:
    """What differs between two runs' settings, machines, library versions and threads."""
    found = []
    places = [
        ("settings", _SETTINGS),
        ("machine", ("processor", "cpus")),
        ("versions", None),
        ("backends", None),
    ]
    for place, fields in places:
        new, old = (_part(meta, place) for meta in (now, then))
        if fields is not None:
            names = list(fields)
        elif place == "backends":  # a backend run in one of them only has no rows to compare
            names = sorted(set(new) & set(old))
        else:
            names = sorted(set(new) | set(old))
        missing = "not installed" if place == "versions" else "unknown"
        for name in names:
            before, after = old.get(name, missing), new.get(name, missing)
            if before != after:
                label = f"{name}:" if place == "backends" else name
                found.append(f"{label} {before} -> {after}")
    return found


def compare(result: dict[str, Any], saved: dict[str, Any], name: str) -> dict[str, Any]:
    """Each ratio of ``result`` beside the same ratio of ``saved`` (a file called ``name``).

    Rows measured in only one of the runs are not compared; ``unmatched`` counts the saved
    run's. A compile that failed now where it ran then counts as worse.
    """
    result = json.loads(json.dumps(result))  # as --json writes it: tuples become lists
    rows = {_key(t, r): r for t in RATIOS for r in saved.get(t, [])}
    ratios: list[dict[str, Any]] = []
    matched = 0
    for table, names in RATIOS.items():
        for record in result.get(table, []):
            old = rows.get(_key(table, record))
            if old is None:
                continue
            matched += 1
            for ratio in names:
                then, now = _number(old.get(ratio)), _number(record.get(ratio))
                if then is None or (now is None and not record.get("failed")):
                    continue
                change = None if now is None else now / then
                ratios.append(
                    {
                        "table": table,
                        **{field: record[field] for field in ("backend", "dtype", "axes", "op")},
                        "ratio": ratio,
                        "then": then,
                        "now": now,
                        "change": change,
                        "meets": change is not None and change <= TOLERANCE,
                    }
                )
    return {
        "baseline": name,
        "baseline_date": saved["meta"].get("date"),
        "tolerance": TOLERANCE,
        "differences": _differences(result["meta"], saved["meta"]),
        "ratios": ratios,
        "unmatched": len(rows) - matched,
    }


def _medians(runs: list[dict[str, Any]], field: str) -> dict[tuple[object, ...], float]:
    """The median over ``runs`` of ``field`` in each row that every run measured."""
    values: dict[tuple[object, ...], list[float]] = {}
    for run in runs:
        for table in RATIOS:
            for record in run.get(table, []):
                number = _number(record.get(field))
                if number is not None:
                    values.setdefault(_key(table, record), []).append(number)
    return {key: statistics.median(v) for key, v in values.items() if len(v) == len(runs)}


def compare_by_turns(
    before: list[dict[str, Any]], after: list[dict[str, Any]], name: str
) -> dict[str, Any]:
    """Two codes timed by turns on one machine: each row's median time, after against before.

    ``before`` and ``after`` are results of ``anyreduce bench --json``, run alternately in
    the same session (``benchmarks/by_turns.py``). On a shared machine a ratio to an anchor
    moves with the anchor's own noise; here the times themselves are set side by side, and
    the medians of the plain sums, which no change of anyreduce touches, tell how far the
    machine alone moved them (``anchors_beyond_tolerance``: more than :data:`TOLERANCE`
    apart, either way). A time is judged within :data:`TOLERANCE` when its median after
    is at most that much larger than before.
    """
    rows = []
    anchors = [_medians(runs, "sum_ms") for runs in (before, after)]
    ours_before, ours_after = (_medians(runs, "ours_ms") for runs in (before, after))
    for key in sorted(ours_before.keys() & ours_after.keys(), key=str):
        then, now = ours_before[key], ours_after[key]
        change = now / then
        rows.append(
            {
                "table": key[0],
                **dict(zip(_ROW, key[1 : 1 + len(_ROW)], strict=True)),
                "then_ms": then,
                "now_ms": now,
                "change": change,
                "meets": change <= TOLERANCE,
            }
        )
    shared = anchors[0].keys() & anchors[1].keys()
    moved = [anchors[1][k] / anchors[0][k] for k in shared]
    return {
        "baseline": name,
        "rounds": min(len(before), len(after)),
        "tolerance": TOLERANCE,
        "times": rows,
        "anchors_beyond_tolerance": sum(not 1 / TOLERANCE <= m <= TOLERANCE for m in moved),
        "anchors": len(moved),
    }
