#!/usr/bin/env python3
"""Evaluate scheduling policies on scenarios and seeds.

    python evaluate.py --policies fifo,sjf,tiresias --scenario loaning --seeds 0,1,2 --out results/
    python evaluate.py --policies fifo,sjf --trace my_cluster.csv --out results/

Prints a table of the mean over seeds and writes OUT/results.json and OUT/results.csv.
A user error (bad trace, unknown policy or scenario, bad --set) prints one sentence and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agents import evaluation as ev
from envs.sim.config import ConfigError, parse_sets
from envs.sim.inference import InferenceConfigError
from envs.sim.workload import TraceError

#: metric -> column heading of the printed table
TABLE = {
    "avg_jct_s": "avg JCT s",
    "p95_jct_s": "p95 JCT s",
    "avg_queue_s": "avg queue s",
    "makespan_s": "makespan s",
    "utilization": "usage",
    "preemptions": "preempt",
    "jobs_unfinished": "unfinished",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", default="fifo,sjf,tiresias", help="comma-separated policy names")
    p.add_argument("--scenario", default="default", help="scenario name (see --list)")
    p.add_argument("--seeds", default="0", help="e.g. 0,1,2 or 0-4")
    p.add_argument("--trace", default=None, help="replay this CSV trace (our schema); implies --scenario trace")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field (cluster.training_servers=32) or a policy one (policy.round_s=60)",
    )
    p.add_argument("--out", default=None, help="folder for results.json and results.csv")
    p.add_argument("--workers", type=int, default=ev.default_workers(), help="processes to run tasks in")
    p.add_argument("--list", action="store_true", help="list policies and scenarios, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 140)
    from envs.sim import scenarios
    from heuristics import registry

    if args.list:
        console.print("policies: " + ", ".join(registry.names()))
        console.print("scenarios: " + ", ".join(scenarios.names()))
        return 0
    try:
        sets = parse_sets(args.sets)
        scenario = args.scenario
        if args.trace:
            scenario = "trace"
            sets["workload.trace"] = args.trace
        scen_sets, pol_sets = ev.split_sets(sets)
        seeds = ev.parse_seeds(args.seeds)
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        if not policies:
            raise ConfigError("--policies names no policy.")
        tasks = [
            ev.Task(p, scenario, s, tuple(scen_sets.items()), tuple(pol_sets.items())) for p in policies for s in seeds
        ]
        ev.validate(tasks)
    except (ConfigError, TraceError, InferenceConfigError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        job = bar.add_task("runs", total=len(tasks))
        results = ev.run_tasks(tasks, args.workers, on_done=lambda r: bar.advance(job))

    table = Table(title=f"{scenario}: mean over seeds {args.seeds}")
    table.add_column("policy")
    for heading in TABLE.values():
        table.add_column(heading, justify="right")
    for (policy, _), row in ev.mean_by_policy(results, list(TABLE)).items():
        table.add_row(policy, *(_fmt(row[k]) for k in TABLE))
    console.print(table)
    if args.out:
        ev.write_results(Path(args.out), results, ["evaluate.py", *(argv if argv is not None else sys.argv[1:])])
        console.print(f"wrote {Path(args.out) / 'results.json'} and results.csv")
    return 0


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"


if __name__ == "__main__":
    sys.exit(main())
