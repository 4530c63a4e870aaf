"""Time this checkout against another revision by turns, on this machine.

    python benchmarks/by_turns.py REV                  # 4 rounds of the default tables
    python benchmarks/by_turns.py REV --rounds 6 --check -- --backend numpy --ops reduce_l2

The code of ``REV`` (``git archive``) and of this checkout's ``src/`` take turns running
``anyreduce bench --json``, each in its own process, the order reversed every other round.
Then each row's median time over the rounds is set beside the other code's. On a shared
machine a ratio to an anchor moves with the anchor's own noise, and another host moves
every ratio (see docs/performance.md): this is how a change is checked against the 1.1x
of ``benchmarks/results/latest.json``, with the code that made that file as ``REV``.
Arguments after ``--`` go to ``anyreduce bench``; by default the memory, onnxruntime,
small, masked, narrow and compiled tables are left out (the large ones take about 95 s a
run on 2 cores). ``--check`` exits with status 1 when a median time is more than 1.1x;
``--json PATH`` writes the comparison and every run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LARGE_ONLY = ["--no-memory", "--no-onnxruntime", "--no-small", "--no-masked", "--no-narrow"]
LARGE_ONLY += ["--no-compiled"]


def _export(revision: str, into: Path) -> Path:
    """The ``src/`` of ``revision``, written under ``into``."""
    archive = into / "src.tar"
    with archive.open("wb") as out:
        command = ["git", "archive", revision, "src"]
        subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.DEVNULL, check=True)
    with tarfile.open(archive) as tar:  # filters came with 3.10.12, 3.11.4 and 3.12
        extract = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(into, **extract)  # type: ignore[arg-type]
    return into / "src"


def _bench(src: Path, args: list[str], out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "anyreduce", "bench", *args, "--json", str(out)]
    done = subprocess.run(command, env=env, check=False, stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        sys.exit(f"by_turns.py: anyreduce bench {' '.join(args)} failed (status {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main(argv: list[str]) -> int:
    from anyreduce._bench._compare import TOLERANCE, compare_by_turns

    parser = argparse.ArgumentParser(
        prog="by_turns.py",
        description=__doc__.split("\n")[0],
        usage="%(prog)s [-h] [--rounds N] [--check] revision [-- bench arguments]",
    )
    parser.add_argument("revision", help="the code to time against (any git revision)")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each code (default 4)")
    parser.add_argument("--check", action="store_true", help="exit 1 past 1.1x")
    parser.add_argument("--json", metavar="PATH", help="write the comparison and every run")
    mine, args = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    options = parser.parse_args(mine)
    if options.rounds < 1:
        parser.error(f"argument --rounds: must be 1 or more, got {options.rounds}")
    args = args or LARGE_ONLY
    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            old = _export(options.revision, Path(tmp))
        except subprocess.CalledProcessError:
            parser.error(f"argument revision: git cannot archive {options.revision!r}")
        for r in range(options.rounds):
            turns = [("before", old, before), ("after", ROOT / "src", after)]
            for label, src, runs in turns if r % 2 == 0 else turns[::-1]:
                runs.append(_bench(src, args, Path(tmp) / f"{label}-{r}.json"))
                print(f"round {r + 1}: {label} done", file=sys.stderr)
    result = compare_by_turns(before, after, options.revision)
    worse = [row for row in result["times"] if not row["meets"]]
    for row in sorted(result["times"], key=lambda row: -row["change"])[:10]:
        where = f"{row['backend']} {row['dtype']} {row['op']} over {row['axes']} ({row['table']})"
        print(f"{where}: {row['then_ms']:.2f} -> {row['now_ms']:.2f} ms, x{row['change']:.3f}")
    print(
        f"{len(result['times']) - len(worse)} of {len(result['times'])} median times within "
        f"{TOLERANCE}x of {options.revision}'s over {result['rounds']} rounds by turns; the "
        f"plain sums' own: {result['anchors'] - result['anchors_beyond_tolerance']} of "
        f"{result['anchors']} within {TOLERANCE}x either way"
    )
    if options.json:
        written = {"comparison": result, "before": before, "after": after}
        Path(options.json).write_text(json.dumps(written, indent=1))
    return 1 if options.check and worse else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's comparison, installed or not
    sys.exit(main(sys.argv[1:]))
