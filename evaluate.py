#!/usr/bin/env python3
"""Evaluate scheduling policies (heuristics and trained agents) on scenarios, seeds and settings.

    python evaluate.py --policies fifo,sjf,aryl --scenarios default,loaning --seeds 0-9 --out results/x
    python evaluate.py --policies fifo,aryl,ppo:runs/default__dual__0__20261129-120000 --seeds 0-4 --out results/y
    python evaluate.py --policies fifo,tiresias --set cluster.training_servers=8,16 --set tiresias.round_s=60,300
    python evaluate.py --policies fifo,sjf --trace my_cluster.csv --out results/mine
    python evaluate.py --policies fifo,sjf --seeds 0-99 --backend ray --workers 8 --out results/big

Each (policy, scenario, seed, setting) is one task; ``--set key=v1,v2`` sweeps a grid (the
Cartesian product over every key given several values; ``;`` separates the items of one
tuple-valued value: ``--set cluster.training_mix=V100-32GB:6;A100-40GB:4``). A key is a scenario
field, ``policy.<field>`` (every policy listed) or ``<policy>.<field>`` (that policy alone: the
others run once per scenario setting, and the ratios compare each run with the reference at the
same scenario settings). ``ppo:RUN`` evaluates
the agents of a train.py run folder with the components it was trained with; ``dagger:FOLDER``
a deviation agent that ``benchmarks/dagger.py --save`` wrote (its base heuristic in every seat).

Prints mean over seeds per policy, with the ratio to ``--reference`` (policy mean / reference
mean: below 1 on times means faster than the reference). With ``--out``: results.json (runs,
aggregates with mean/std/95% CI, ratios), results.csv, aggregates.csv, plots/ (PNG), tb/
(TensorBoard) and tasks/ (one file per task). Rerunning the same command with the same --out
skips the tasks already done. A user error (bad trace, unknown policy or scenario, missing or
mismatched run folder, bad --set) prints one sentence, writes nothing and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agents import evaluation as ev
from agents import smoke, trained
from agents.console import progress_bar
from envs.sim.config import ConfigError, HelpFormatter
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
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument(
        "--policies", default="fifo,sjf,tiresias", help="comma-separated policy names, ppo:RUN_DIR and dagger:FOLDER"
    )
    p.add_argument("--scenarios", "--scenario", dest="scenarios", default=None, help="scenario names (see --list)")
    p.add_argument(
        "--seeds",
        default="0",
        help=f"e.g. 0,1,2 or 0-9 or 0-4,10 (seeds from 0; a sweep holds at most {ev.MAX_TASKS:,} tasks)",
    )
    p.add_argument("--trace", default=None, help="replay this CSV trace (our schema); implies the trace scenario")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=V1[,V2...]",
        help="override a scenario field (cluster.training_servers=32), every policy's (policy.round_s=60) "
        "or one policy's (tiresias.round_s=60); several values sweep a grid; ';' separates a tuple's items",
    )
    p.add_argument("--reference", default=None, help="policy the ratios compare with (default: the first one)")
    p.add_argument("--out", default=None, help="folder for results, plots, TensorBoard and per-task files")
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="process pool or Ray tasks")
    p.add_argument("--workers", type=int, default=ev.default_workers(), help="processes (or CPUs of a local Ray)")
    p.add_argument("--address", default=None, help="Ray cluster to join (default: start a local one)")
    p.add_argument("--list", action="store_true", help="list policies and scenarios, then exit")
    p.add_argument(
        "--list-settings",
        nargs="?",
        const="default",
        default=None,
        metavar="SCENARIO",
        help="list every --set key of SCENARIO (default: default) and of the policies, with type and default; exit",
    )
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> tuple[list[ev.Task], str]:
    """The sweep's tasks and the reference policy; raises the user's error."""
    grid = [smoke.sets(g) for g in ev.parse_grid(args.sets)]
    scenario_names = ev.parse_names(args.scenarios, "scenarios") if args.scenarios else ["default"]
    if args.trace:
        if args.scenarios and scenario_names != ["trace"]:
            raise ConfigError("--trace replays a trace in the trace scenario; drop --scenarios.")
        scenario_names = ["trace"]
        if any("workload.trace" in g for g in grid):
            raise ConfigError("give the trace either with --trace or with --set workload.trace, not both.")
        grid = [g | {"workload.trace": args.trace} for g in grid]
    policies = ev.parse_names(args.policies, "policies")
    seeds = smoke.seeds(ev.parse_seeds(args.seeds))
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}.")
    args.workers = smoke.count(args.workers, smoke.WORKERS)
    if args.backend == "ray":
        ev.require_ray()
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError(f"--out {args.out} is a file, not a folder.")
    tasks = ev.plan(policies, scenario_names, seeds, grid)
    labels = list(dict.fromkeys(t.policy for t in tasks))
    reference = args.reference or labels[0]
    if trained.is_agent(reference) and reference not in labels:
        reference = trained.agent_label(reference)
    if reference not in labels:
        raise ConfigError(f"--reference {reference} is not one of the evaluated policies: {', '.join(labels)}.")
    return tasks, reference


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from envs.sim import scenarios
    from heuristics import registry

    if args.list:
        console.print("policies: " + ", ".join(registry.names()) + ", ppo:RUN_DIR, dagger:FOLDER")
        console.print("scenarios: " + ", ".join(scenarios.names()))
        return 0
    if args.list_settings is not None:
        try:
            rows = ev.setting_keys(args.list_settings)
        except ConfigError as e:
            console.print(f"[red]error:[/red] {e}", highlight=False)
            return 2
        table = Table(
            title=f"--set keys of scenario '{args.list_settings}' and of the policies "
            "(policy.FIELD sets FIELD of every policy listed)",
            title_justify="left",
        )
        table.add_column("key", no_wrap=True)
        for heading in ("type", "default", "rule"):
            table.add_column(heading, overflow="fold")
        for r in rows:
            table.add_row(*(Text(c) for c in (r.key, r.type, r.default, r.rule)))  # no markup: "[int, float]"
        console.print(table, highlight=False)
        return 0
    out = Path(args.out) if args.out else None
    saved = 0  # tasks whose file is under out/tasks
    tasks: list[ev.Task] = []
    try:
        with ev.interrupts():  # SIGTERM stops the sweep as Ctrl-C does; a second one stops it at once
            try:
                tasks, reference = plan(args)
                if out is not None:
                    ev.check_out(out)
            except (ConfigError, TraceError, InferenceConfigError) as e:
                console.print(f"[red]error:[/red] {e}", highlight=False)
                return 2

            agents = list(dict.fromkeys(t.agent for t in tasks if t.agent is not None))
            with progress_bar(console, "{task.description}") as bar:
                job = bar.add_task("tasks", total=len(tasks))

                def on_done(r: ev.TaskResult) -> None:
                    nonlocal saved
                    saved += 1
                    bar.advance(job)

                try:
                    done = ev.sweep(
                        tasks,
                        out,
                        on_done=on_done,
                        backend=args.backend,
                        workers=args.workers,
                        address=args.address,
                        models=trained.model_bytes(agents),
                    )
                except ConfigError as e:  # found only when the sweep starts: an unreachable --address
                    console.print(f"[red]error:[/red] {e}", highlight=False)
                    return 2
                except ev.TaskFailed as e:  # (under Ray, wrapped: its cause is the sentence)
                    kept = (
                        f"; {saved} of {len(tasks)} task results are saved in {out / 'tasks'}" if out and saved else ""
                    )
                    console.print(f"[red]error:[/red] {getattr(e, 'cause', e)}{kept}", highlight=False, soft_wrap=True)
                    return 1
            if done.reused:
                console.print(f"reused {done.reused} of {len(tasks)} task results from {out / 'tasks' if out else ''}")

            command = ["evaluate.py", *(argv if argv is not None else sys.argv[1:])]
            if out is None:
                print_table(console, ev.results_document(done.results, command, reference), reference, args.seeds)
                return 0
            from agents import plots

            doc = ev.write_results(out, done.results, command, reference)
            print_table(console, doc, reference, args.seeds)
            pngs = plots.write_plots(done.results, out / "plots")
            plots.write_tensorboard(ev.aggregate(done.results), pngs, out / "tb")
            console.print(f"wrote {out}/results.json, results.csv, aggregates.csv, plots/ and tb/", highlight=False)
            return 0
    except KeyboardInterrupt:
        if not tasks:
            line = "interrupted before any task ran"
        elif out is None:
            line = "interrupted; without --out no task result is kept"
        else:
            line = (
                f"interrupted; {saved} of {len(tasks)} task results are saved in {out / 'tasks'}: "
                "rerun the same command with the same --out to resume"
            )
        console.print(line, highlight=False, soft_wrap=True)  # one line, however long
        return 130


def print_table(console: Console, doc: dict, reference: str, seeds: str) -> None:
    """One row per (policy, scenario, settings): mean over seeds, (ratio to the reference); the
    settings column shows only the settings that differ between rows (last part of each key)."""
    aggs = doc["aggregates"]
    ratio = {(r["policy"], r["scenario"], str(r["settings"])): r["metrics"] for r in doc["ratios"]}
    keys = list(dict.fromkeys(k for a in aggs for k in a["settings"]))
    varying = [k for k in keys if len({a["settings"].get(k) for a in aggs}) > 1]
    scenarios = len({a["scenario"] for a in aggs}) > 1
    table = Table(title=f"mean over seeds {seeds}; (x) = ratio to {reference}", title_justify="left")
    table.add_column("policy", no_wrap=True)
    if scenarios:
        table.add_column("scenario", no_wrap=True)
    if varying:
        table.add_column("settings", min_width=16)
    for k, heading in TABLE.items():
        table.add_column(heading, justify="right", no_wrap=True)
        if k == "avg_jct_s":
            table.add_column("95% CI", justify="right", no_wrap=True)
    why = {(r["policy"], r["scenario"], str(r["settings"])): r["why"] for r in doc["ratios"]}
    for a in aggs:
        key = (a["policy"], a["scenario"], str(a["settings"]))
        r, short = ratio.get(key, {}), why.get(key)
        unfinished = bool(a["metrics"]["jobs_unfinished"]["mean"])
        cells = [a["policy"] + (" (!)" if unfinished else "")] + ([a["scenario"]] if scenarios else [])
        if varying:
            cells.append(" ".join(f"{k.rsplit('.', 1)[-1]}={a['settings'][k]}" for k in varying if k in a["settings"]))
        for k in TABLE:
            s = a["metrics"][k]
            shown = f"\n({r[k]:.2f})" if r.get(k) is not None else "\n(unfinished)" if short else ""
            cells.append(_fmt(s["mean"]) + shown)
            if k == "avg_jct_s":
                cells.append("±" + _fmt(s["ci95"]) if s["ci95"] is not None else "-")
        table.add_row(*cells, style="yellow" if unfinished else None)
    if any(a["metrics"]["jobs_unfinished"]["mean"] for a in aggs):
        table.caption = (
            "(!) some runs left jobs unfinished: their statistics count the finished jobs only, "
            "and no ratio is computed with them (notes below)"
        )
        table.caption_justify = "left"
    console.print(table)
    notes = {(run["policy"], run["scenario"], note) for run in doc["runs"] for note in run["notes"]}
    for policy, scenario, note in sorted(notes):
        console.print(f"note: {policy} on {scenario}: {note}", highlight=False)
    dropped = [w for w in doc["meta"]["workloads"] if w["jobs_dropped"]]
    if dropped:
        seeds_ = ", ".join(f"{w['scenario']} seed {w['seed']}: {w['jobs_dropped']}" for w in dropped)
        console.print(f"dropped as unrunnable, the same jobs for every policy: {seeds_}", highlight=False)


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"


if __name__ == "__main__":
    code = main()
    if code == 130:  # interrupted, with what was done saved and said: skip the exit hooks, where
        # Python 3.11's process-pool hook can write to the stopped pool's closed pipe and print a traceback
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
