#!/usr/bin/env python3
"""Train the dual ordering/placement agents: behaviour cloning from expert demonstrations, then
alternating MaskablePPO rounds.

    python train.py                                   # default scenario, BC warm start, dual PPO
    python train.py --scenario loaning --total-steps 100000 --rounds 4 --seed 1
    python train.py --set learning_rate=1e-4 --set workload.num_jobs=200
    python train.py --resume runs/default__dual__0__20261129-120000
    python train.py --resume runs/default__dual__0__20261129-120000 --total-steps 80000
    python train.py --seeds 0-4 --backend ray                # five seeds as Ray tasks, and their summary

Writes runs/<scenario>__<exp>__<seed>__<time>/ (config.yaml, command.txt, commit.txt,
layout.json, tb/, checkpoints/, state.json). Progress is committed after each behaviour cloning,
rollout and evaluation, so that any kill leaves a consistent folder (agents/rundir.py). Ctrl-C
(SIGINT) or SIGTERM stops at once, the folder holding its last commit, with exit status 130 or
143; --resume continues from that commit, redoing what came after it, and writes layout.json
again if it was deleted. With --total-steps N, --resume trains the run on to N steps in all (the
phases done stay; the rest is planned as a new run's); other flags must agree with its
config.yaml, except --eval-every and --threads, which apply and are recorded. Each phase trains
exactly its steps (total_steps, rounded to a multiple of n_envs, said at start). A terminal
shows a bar of the steps trained (one per seed with --seeds, here or on Ray), and one line per
evaluation (steps, steps/s, the agent's avg JCT) reports the progress, in a terminal or not. A
user error (bad flag or value, unknown name, bad trace, a corrupt or inconsistent run folder)
prints one sentence and exits 2, with nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agents.console import progress_bar
from envs.sim.config import HelpFormatter

SCENARIO_SECTIONS = ("cluster.", "inference.", "workload.", "sim.", "information.")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from agents.dual import TrainConfig

    config = TrainConfig()

    def default(field: str) -> str:
        v = getattr(config, field)
        return f"(default: {','.join(v) if isinstance(v, tuple) else f'{v:,}' if isinstance(v, int) else v})"

    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--scenario", default=None, help=f"scenario name {default('scenario')}")
    p.add_argument("--trace", default=None, help="train on this CSV trace (our schema)")
    p.add_argument(
        "--total-steps", type=int, default=None, help=f"env steps, both agents together {default('total_steps')}"
    )
    p.add_argument(
        "--rounds", type=int, default=None, help=f"alternating ordering/placement rounds {default('rounds')}"
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"env steps between held-out evaluations, and one at each phase's end {default('eval_every')}",
    )
    p.add_argument(
        "--seed", type=int, default=None, help=f"of the agents, the episodes and the cloning {default('seed')}"
    )
    p.add_argument(
        "--bc", dest="bc", action="store_true", default=None, help="warm start by behaviour cloning (default)"
    )
    p.add_argument("--no-bc", dest="bc", action="store_false", help="no behaviour cloning")
    p.add_argument("--experts", default=None, help=f"ordering experts to clone, e.g. aryl,sjf {default('experts')}")
    p.add_argument("--n-envs", type=int, default=None, help=f"parallel envs per agent {default('n_envs')}")
    p.add_argument("--exp", default=None, help=f"experiment name, part of the run folder's name {default('exp')}")
    p.add_argument("--out", default="runs", help="folder for run folders (default: runs)")
    p.add_argument("--demos", default="demos", help="folder caching the expert demonstrations (default: demos)")
    p.add_argument(
        "--resume", default=None, metavar="RUN_DIR", help="continue this run (with --total-steps N: to N steps)"
    )
    p.add_argument("--seeds", default=None, help="train these seeds, each its own run, e.g. 0-4 or 0,2,5")
    p.add_argument("--backend", default="local", choices=("local", "ray"), help="where --seeds train (default: local)")
    p.add_argument("--address", default=None, help="with --backend ray: a running Ray cluster's address")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hyper-parameter (learning_rate=1e-4) or a scenario field (workload.num_jobs=200)",
    )
    p.add_argument("--threads", type=int, default=None, help=f"torch threads {default('threads')}")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace, base=None):  # type: ignore[no-untyped-def]
    """The TrainConfig of the flags, over ``base`` (default: TrainConfig's defaults)."""
    from agents.dual import TrainConfig
    from envs.sim.config import apply_overrides, parse_sets

    base = base if base is not None else TrainConfig()
    sets = parse_sets(args.sets)
    scen = {k: v for k, v in sets.items() if k.startswith(SCENARIO_SECTIONS)}
    hyper = {k: v for k, v in sets.items() if k not in scen}
    config = apply_overrides(base, hyper, what="training") if hyper else base
    flags = {
        "scenario": args.scenario,
        "trace": args.trace,
        "total_steps": args.total_steps,
        "rounds": args.rounds,
        "eval_every": args.eval_every,
        "seed": args.seed,
        "bc": args.bc,
        "n_envs": args.n_envs,
        "exp": args.exp,
        "threads": args.threads,
        "experts": tuple(e.strip() for e in args.experts.split(",") if e.strip()) if args.experts else None,
    }
    config = dataclasses.replace(config, **{k: v for k, v in flags.items() if v is not None})
    if scen:
        config = dataclasses.replace(config, overrides={**config.overrides, **scen})
    return config


FLAGS = {
    "scenario": "--scenario",
    "trace": "--trace",
    "total_steps": "--total-steps",
    "rounds": "--rounds",
    "eval_every": "--eval-every",
    "seed": "--seed",
    "bc": "--bc",
    "experts": "--experts",
    "n_envs": "--n-envs",
    "exp": "--exp",
    "threads": "--threads",
    "overrides": "--set",
}
"""The flag of each TrainConfig field that has one (the others are ``--set <field>``)."""


def flag_of(field: str) -> str:
    return FLAGS.get(field, f"--set {field}")


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived (raised by the handlers :func:`main` installs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Stopped` (the previous handlers come back after)."""

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    old = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a run folder is created whole)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def figure_format(figure: str) -> str:
    """How train.py formats metric ``figure``: seconds whole, the rest to three decimals."""
    return ",.0f" if figure.endswith("_s") else ".3f"


def figure_cell(figure: str, value: float | None) -> str:
    """``value`` of metric ``figure`` as train.py prints it ("-": none)."""
    return "-" if value is None else format(value, figure_format(figure))


def figure_name(figure: str) -> str:
    """Metric ``figure``'s name in train.py's table headings."""
    return "avg JCT s" if figure == "avg_jct_s" else figure


def figure_said(figure: str, value: float | None) -> str:
    """``value`` of metric ``figure`` as train.py's lines say it: "avg JCT 9,407 s", "deadline_hit_ratio 0.932"."""
    if figure == "avg_jct_s":
        return f"avg JCT {figure_cell(figure, value)} s"
    return f"{figure} {figure_cell(figure, value)}"


def progress_line(
    console: Console, planned: int, start: int, figure: str, prefix: str = ""
) -> Callable[[dict[str, Any]], None]:
    """Prints one line per evaluation (after ``prefix``): steps, the speed since ``start`` steps,
    the agent's avg JCT and, where the reward's ``figure`` is another, that figure."""
    t0 = time.monotonic()

    def line(entry: dict[str, Any]) -> None:
        steps, agent = entry["steps"], entry["agent"]
        rate = (steps - start) / max(time.monotonic() - t0, 1e-9)
        speed = f", {rate:.0f} steps/s" if steps > start else ""
        unfinished = f", {agent['jobs_unfinished']:.0f} jobs unfinished" if agent["jobs_unfinished"] else ""
        other = f", {figure_said(figure, agent[figure])}" if figure != "avg_jct_s" else ""
        console.print(
            f"{prefix}{steps:,}/{planned:,} steps{speed}; eval: agent avg JCT {agent['avg_jct_s']:,.0f} s"
            f"{other}{unfinished}",
            highlight=False,
        )

    return line


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 done, 2 a user error (nothing written), 130 after SIGINT and 143 after
    SIGTERM (the run folder holds its last commit: resume it)."""
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 140)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    where: list[Path] = []  # the run folder, once it exists
    with stopping_on_signals():
        try:
            return _main(args, argv, console, where)
        except Stopped as stop:
            for s in STOP_SIGNALS:
                signal.signal(s, signal.SIG_IGN)  # a second signal does not cut this short
            name = signal.Signals(stop.signum).name
            if args.seeds is not None:
                console.print(
                    f"stopped by {name}: each run folder under {args.out} holds its last commit; "
                    "continue each with --resume",
                    highlight=False,
                )
            elif where:
                console.print(
                    f"stopped by {name}: {where[0]} holds its last commit; continue with --resume {where[0]}",
                    highlight=False,
                )
            else:
                console.print(f"stopped by {name} before a run folder was created", highlight=False)
            return 128 + stop.signum


def _main(args: argparse.Namespace, argv: list[str] | None, console: Console, where: list[Path]) -> int:
    from agents import rundir, smoke
    from agents.dual import AGENTS, Trainer
    from envs.sim.config import ConfigError
    from envs.sim.inference import InferenceConfigError
    from envs.sim.workload import TraceError

    command = ["train.py", *(argv if argv is not None else sys.argv[1:])]
    if args.seeds is not None:
        return _seeds(args, command, console)
    try:
        if args.resume:
            run = Path(args.resume)
            where.append(run)
            saved = rundir.load_config(run)
            args.total_steps, args.eval_every = smoke.steps(args.total_steps), smoke.steps(args.eval_every)
            config = rundir.resumed_config(run, saved, build_config(args, saved), flag_of)
            config.validate(flag_of)
        else:
            config = smoke.train_config(build_config(args))
            config.validate(flag_of)
            rundir.check_folder(Path(args.out), "--out")
        if config.bc and not args.resume:
            rundir.check_folder(Path(args.demos), "--demos")
        trainer = Trainer(config, resume=run if args.resume else None)
        if config.bc and args.resume and set(trainer.state.bc) != set(AGENTS):
            rundir.check_folder(Path(args.demos), "--demos")
    except (ConfigError, TraceError, InferenceConfigError, rundir.RunDirError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2

    if args.resume:
        if trainer.resume(command):
            console.print(f"{run / 'layout.json'} was missing: written again from config.yaml")
        if config.total_steps != saved.total_steps:
            console.print(
                f"budget {saved.total_steps} -> {config.total_steps} steps (recorded in config.yaml): "
                f"{config.planned_steps() - trainer.state.steps} steps to train from the {trainer.state.steps} done"
            )
    else:
        with signals_held():
            run = trainer.create(Path(args.out), command)
            where.append(run)
    console.print(f"run folder: {run}")
    planned = config.planned_steps()
    if planned != config.total_steps:
        console.print(
            f"note: --total-steps {config.total_steps} is no multiple of --n-envs {config.n_envs} "
            f"(every step moves all envs): training {planned} steps"
        )

    with progress_bar(console, "training") as bar:
        task = bar.add_task("steps", total=planned, completed=trainer.state.steps)
        trainer.progress = lambda n: bar.advance(task, n)
        if config.bc:
            trainer.warm_start(
                Path(args.demos),
                lambda agent, rep: console.print(
                    f"BC {agent}: held-out accuracy {rep.heldout_accuracy:.3f} ({rep.heldout_steps} steps)"
                ),
            )
        trainer.on_eval = progress_line(console, planned, trainer.state.steps, config.figure)
        trainer.train()

    last = trainer.state.evals[-1]
    fig = config.figure
    extra = () if fig == "avg_jct_s" else (fig,)
    table = Table(title=f"held-out seeds {list(config.eval_seeds)}: mean over episodes")
    for col in ("policy", "avg JCT s", "p95 JCT s", "avg queue s", "usage", *extra):
        table.add_column(col, justify="right")
    rows = [("agent (latest)", last["agent"]), *list(last["baselines"].items())]
    for name, m in rows:
        table.add_row(
            name,
            f"{m['avg_jct_s']:,.0f}",
            f"{m['p95_jct_s']:,.0f}",
            f"{m['avg_queue_s']:,.0f}",
            f"{m['utilization']:.3f}",
            *(figure_cell(fig, m.get(fig)) for fig in extra),
        )
    console.print(table)
    console.print(
        f"{trainer.state.steps} steps trained; best agent {figure_said(fig, trainer.state.best)}; "
        f"checkpoints in {run / 'checkpoints'}"
    )
    return 0


def _seeds(args: argparse.Namespace, command: list[str], console: Console) -> int:
    """--seeds: one run per seed (here or as Ray tasks), then their summary over the seeds."""
    from agents import multiseed, rundir, smoke
    from envs.sim.config import ConfigError
    from envs.sim.inference import InferenceConfigError
    from envs.sim.workload import TraceError

    try:
        for flag, given in (("--seed", args.seed is not None), ("--resume", args.resume is not None)):
            if given:
                raise ConfigError(f"--seeds trains new runs of each seed it names, so {flag} cannot be given with it.")
        if args.address and args.backend != "ray":
            raise ConfigError("--address names a Ray cluster, so it needs --backend ray.")
        seeds = smoke.seeds(multiseed.parse_seeds(args.seeds))
        config = smoke.train_config(build_config(args))
        for s in sorted({seeds[0], seeds[-1], min(seeds), max(seeds)}):
            dataclasses.replace(config, seed=s).validate(flag_of)
        rundir.check_folder(Path(args.out), "--out")
        if config.bc:
            rundir.check_folder(Path(args.demos), "--demos")
    except (ConfigError, TraceError, InferenceConfigError, rundir.RunDirError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2
    where_ = "on Ray" if args.backend == "ray" else "one after the other"
    console.print(f"training seeds {', '.join(map(str, seeds))} {where_}: {config.planned_steps()} steps each")

    def done(r: multiseed.SeedRun) -> None:
        console.print(f"seed {r.seed}: {r.run}: {r.steps} steps, agent avg JCT {r.final['avg_jct_s']:,.0f} s")

    try:
        with progress_bar(console, "seed {task.fields[seed]}") as bar:
            tasks = {s: bar.add_task("steps", total=config.planned_steps(), seed=s) for s in seeds}
            runs = multiseed.run_seeds(
                config,
                seeds,
                args.out,
                args.demos,
                command,
                backend=args.backend,
                address=args.address,
                cpus=min(len(seeds), os.cpu_count() or 1),
                on_done=done,
                hold=signals_held,
                watch=lambda seed: progress_line(console, config.planned_steps(), 0, config.figure, f"seed {seed}: "),
                steps=lambda seed, n: bar.advance(tasks[seed], n),
            )
    except ConfigError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2
    table = Table(title=f"agent at its last evaluation, {len(runs)} seeds (held-out seeds {list(config.eval_seeds)})")
    fig = config.figure
    extra = () if fig == "avg_jct_s" else (fig,)
    for col in ("seed", "avg JCT s", "p95 JCT s", "avg queue s", "usage", *extra, f"best {figure_name(fig)}"):
        table.add_column(col, justify="right")
    for r in runs:
        m = r.final
        table.add_row(
            str(r.seed),
            f"{m['avg_jct_s']:,.0f}",
            f"{m['p95_jct_s']:,.0f}",
            f"{m['avg_queue_s']:,.0f}",
            f"{m['utilization']:.3f}",
            *(figure_cell(fig, m.get(fig)) for fig in extra),
            figure_cell(fig, r.best),
        )
    stats = multiseed.summary(runs, fig)

    def cell(key: str, fmt: str) -> str:
        st = stats[key]
        if st.mean is None:
            return "-"
        return format(st.mean, fmt) + (f" ± {format(st.ci95, fmt)}" if st.ci95 is not None else "")

    table.add_row(
        "mean ± 95% CI",
        cell("avg_jct_s", ",.0f"),
        cell("p95_jct_s", ",.0f"),
        cell("avg_queue_s", ",.0f"),
        cell("utilization", ".3f"),
        *(cell(fig, figure_format(fig)) for fig in extra),
        cell("best", figure_format(fig)),
    )
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
