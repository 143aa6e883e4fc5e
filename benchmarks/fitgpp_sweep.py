#!/usr/bin/env python3
"""FitGpp's trade-off: sweep ``s`` x ``max_preemptions`` on ``te-be`` and print per-class slowdowns.

    .venv/bin/python benchmarks/fitgpp_sweep.py --seeds 0-4
    .venv/bin/python benchmarks/fitgpp_sweep.py --s 0,0.5,1 --max-preemptions 1,3 --seeds 0-2

Each cell is the mean over seeds of the per-seed figure; the change columns compare those means
with ``fifo``'s on the same seeds (the paper's headline: TE p95 -96.6%, BE p50 +18.0%, BE p95
+23.9%). Extra ``--set`` overrides apply to the scenario (keys without ``policy.``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from agents import evaluation as ev
from envs.sim.config import ConfigError, parse_sets

KEYS = ("te_p95_slowdown", "be_p50_slowdown", "be_p95_slowdown", "preemptions_per_be_job")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="te-be")
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--s", default="0,0.25,0.5,0.75,1", help="values of policy.s")
    p.add_argument("--max-preemptions", default="1,3,5", help="values of policy.max_preemptions")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--workers", type=int, default=ev.default_workers())
    args = p.parse_args(argv)
    console = Console(width=max(Console().width, 120))
    try:
        seeds = ev.parse_seeds(args.seeds)
        scen = parse_sets(args.sets)
        grid = [(s.strip(), m.strip()) for m in args.max_preemptions.split(",") for s in args.s.split(",")]
        points = [{**scen, "policy.s": s, "policy.max_preemptions": m} for s, m in grid]
        tasks = ev.plan(["fifo"], [args.scenario], seeds, [scen])
        tasks += ev.plan(["fitgpp"], [args.scenario], seeds, points)
    except ConfigError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2
    with console.status(f"{len(tasks)} runs"):
        results = ev.execute(tasks, workers=args.workers)
    groups: dict[tuple[tuple[str, str], ...], list[ev.TaskResult]] = {}
    for r in results:
        groups.setdefault(r.task.policy_sets, []).append(r)

    def mean(rs: list[ev.TaskResult], key: str) -> float:
        return sum(float(r.metrics[key]) for r in rs) / len(rs)

    base = {k: mean(groups[()], k) for k in KEYS}
    table = Table(
        title=f"fitgpp on {args.scenario}, mean over seeds {args.seeds} (fifo: "
        + ", ".join(f"{k} {base[k]:.3g}" for k in KEYS[:3])
        + ")"
    )
    for col in (
        "s",
        "max_preempt",
        "TE p95",
        "BE p50",
        "BE p95",
        "preempt/BE",
        "dTE p95",
        "dBE p50",
        "dBE p95",
    ):
        table.add_column(col, justify="right")
    for s, m in grid:
        row = {k: mean(groups[(("s", s), ("max_preemptions", m))], k) for k in KEYS}
        delta = [f"{100 * (row[k] / base[k] - 1):+.1f}%" for k in KEYS[:3]]
        table.add_row(s, m, *(f"{row[k]:.3f}" for k in KEYS), *delta)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
