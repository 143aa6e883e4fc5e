#!/usr/bin/env python3
"""Do two sweeps give the same numbers? A refactor or a speed-up must keep every figure bit for bit.

    python benchmarks/same_results.py BEFORE AFTER          # two evaluate.py --out folders (or results.json)
    python benchmarks/same_results.py --record OUT FILE     # keep OUT's figures in FILE (compact JSON)

Runs are matched by (policy, scenario, seed, settings); every metric both sides have is compared
exactly, except the wall-clock ``decision_ms_*``. Metrics only one side has (added since) are
listed once, not counted as differences. Prints each difference and exits 1 if there is any, 2 on
a bad argument. ``benchmarks/data/results_0017439.json`` holds every heuristic on every scenario,
seeds 0-2, at commit 0017439 (shockwave on cloud, default and dynamic only: it takes hours on the
large scenarios), the reference of the read-path and speed-up issues.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

TIMING = ("decision_ms_mean", "decision_ms_p99")
Key = tuple[str, str, int, str]


def runs(path: Path) -> dict[Key, dict[str, Any]]:
    """(policy, scenario, seed, settings) -> metrics, from a results.json, an --out folder (its
    task files, so an unfinished sweep counts too) or a file written by --record."""
    if path.is_dir():
        docs = [json.loads(p.read_text())["task"] for p in sorted((path / "tasks").glob("*.json"))]
    else:
        doc = json.loads(path.read_text())
        docs = doc["runs"]
    out = {}
    for r in docs:
        key = (r["policy"], r["scenario"], int(r["seed"]), json.dumps(r["settings"], sort_keys=True))
        out[key] = {k: v for k, v in r["metrics"].items() if k not in TIMING}
    return out


def compare(before: dict[Key, dict[str, Any]], after: dict[Key, dict[str, Any]]) -> tuple[list[str], set[str], int]:
    """(differences, metrics only one side has, runs compared)."""
    diffs, one_sided = [], set()
    common = sorted(set(before) & set(after))
    for key in common:
        b, a = before[key], after[key]
        one_sided |= set(a) ^ set(b)
        for k in sorted(set(a) & set(b)):
            if a[k] != b[k]:
                diffs.append(f"{key[0]} on {key[1]} seed {key[2]} {key[3]}: {k} {b[k]!r} -> {a[k]!r}")
    return diffs, one_sided, len(common)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--record", action="store_true", help="write BEFORE's figures to the file AFTER")
    args = p.parse_args(argv)
    for path in (args.before,) if args.record else (args.before, args.after):
        if not path.exists():
            print(f"error: {path}: no such results.json or evaluate.py --out folder.")
            return 2
    if args.record:
        rows = [
            {"policy": k[0], "scenario": k[1], "seed": k[2], "settings": json.loads(k[3]), "metrics": m}
            for k, m in sorted(runs(args.before).items())
        ]
        args.after.write_text(json.dumps({"runs": rows}, separators=(",", ":")) + "\n")
        print(f"recorded {len(rows)} runs in {args.after}")
        return 0
    diffs, one_sided, n = compare(runs(args.before), runs(args.after))
    for d in diffs:
        print(d)
    if one_sided:
        print(f"metrics on one side only (not compared): {', '.join(sorted(one_sided))}")
    print(f"{n} runs compared, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
