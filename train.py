#!/usr/bin/env python3
"""Train the dual ordering/placement agents: behaviour cloning from expert demonstrations, then
alternating MaskablePPO rounds.

    python train.py                                   # default scenario, BC warm start, dual PPO
    python train.py --scenario loaning --total-steps 100000 --rounds 4 --seed 1
    python train.py --set learning_rate=1e-4 --set workload.num_jobs=200
    python train.py --resume runs/default__dual__0__20261129-120000

Writes runs/<scenario>__<exp>__<seed>__<time>/ (config.yaml, command.txt, commit.txt,
layout.json, tb/, checkpoints/, state.json). Progress is committed after each behaviour cloning,
rollout and evaluation, so that any kill leaves a consistent folder (agents/rundir.py). Ctrl-C
(SIGINT) or SIGTERM stops at once, the folder holding its last commit, with exit status 130 or
143; --resume continues from that commit, redoing what came after it, and writes layout.json
again if it was deleted. Each phase trains exactly its steps (total_steps, rounded to a multiple
of n_envs, said at start). A user error (bad flag or value, unknown name, bad trace, a corrupt or
inconsistent run folder) prints one sentence and exits 2, with nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from envs.sim.config import HelpFormatter

SCENARIO_SECTIONS = ("cluster.", "inference.", "workload.", "sim.", "information.")
RUN_FLAGS = ("scenario", "trace", "total_steps", "rounds", "seed", "bc", "experts", "n_envs", "exp", "threads")
"""The flags that set a run's config (refused with --resume: the run continues as config.yaml says)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--scenario", default=None, help="scenario name (default: default)")
    p.add_argument("--trace", default=None, help="train on this CSV trace (our schema)")
    p.add_argument("--total-steps", type=int, default=None, help="env steps, both agents together")
    p.add_argument("--rounds", type=int, default=None, help="alternating ordering/placement rounds")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--bc", dest="bc", action="store_true", default=None, help="warm start by behaviour cloning")
    p.add_argument("--no-bc", dest="bc", action="store_false", help="no behaviour cloning")
    p.add_argument("--experts", default=None, help="ordering experts to clone, e.g. aryl,sjf")
    p.add_argument("--n-envs", type=int, default=None, help="parallel envs per agent")
    p.add_argument("--exp", default=None, help="experiment name (part of the run folder's name)")
    p.add_argument("--out", default="runs", help="folder for run folders")
    p.add_argument("--demos", default="demos", help="folder caching the expert demonstrations")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue this run")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hyper-parameter (learning_rate=1e-4) or a scenario field (workload.num_jobs=200)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default 1)")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from agents.dual import TrainConfig
    from envs.sim.config import apply_overrides, parse_sets

    sets = parse_sets(args.sets)
    scen = {k: v for k, v in sets.items() if k.startswith(SCENARIO_SECTIONS)}
    hyper = {k: v for k, v in sets.items() if k not in scen}
    config = apply_overrides(TrainConfig(), hyper, what="training") if hyper else TrainConfig()
    flags = {
        "scenario": args.scenario,
        "trace": args.trace,
        "total_steps": args.total_steps,
        "rounds": args.rounds,
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
            if where:
                console.print(
                    f"stopped by {name}: {where[0]} holds its last commit; continue with --resume {where[0]}",
                    highlight=False,
                )
            else:
                console.print(f"stopped by {name} before a run folder was created", highlight=False)
            return 128 + stop.signum


def _main(args: argparse.Namespace, argv: list[str] | None, console: Console, where: list[Path]) -> int:
    from agents import rundir
    from agents.dual import AGENTS, Trainer
    from envs.sim.config import ConfigError
    from envs.sim.inference import InferenceConfigError
    from envs.sim.workload import TraceError

    command = ["train.py", *(argv if argv is not None else sys.argv[1:])]
    try:
        if args.resume:
            given = [f"--{k.replace('_', '-')}" for k in RUN_FLAGS if getattr(args, k) is not None]
            if given or args.sets:
                raise ConfigError(
                    f"--resume continues the run as its config.yaml says, so {', '.join(given or ['--set'])} "
                    "cannot be given with it."
                )
            run = Path(args.resume)
            where.append(run)
            config = rundir.load_config(run)
        else:
            config = build_config(args)
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

    with Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("steps", total=planned, completed=trainer.state.steps)
        trainer.progress = lambda n: bar.advance(task, n)
        if config.bc:
            trainer.warm_start(
                Path(args.demos),
                lambda agent, rep: console.print(
                    f"BC {agent}: held-out accuracy {rep.heldout_accuracy:.3f} ({rep.heldout_steps} steps)"
                ),
            )
        trainer.train()

    last = trainer.state.evals[-1]
    table = Table(title=f"held-out seeds {list(config.eval_seeds)}: mean over episodes")
    for col in ("policy", "avg JCT s", "p95 JCT s", "avg queue s", "usage"):
        table.add_column(col, justify="right")
    rows = [("agent (latest)", last["agent"]), *list(last["baselines"].items())]
    for name, m in rows:
        table.add_row(
            name,
            f"{m['avg_jct_s']:,.0f}",
            f"{m['p95_jct_s']:,.0f}",
            f"{m['avg_queue_s']:,.0f}",
            f"{m['utilization']:.3f}",
        )
    console.print(table)
    console.print(
        f"{trainer.state.steps} steps trained; best agent avg JCT {trainer.state.best_jct:,.0f} s; "
        f"checkpoints in {run / 'checkpoints'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
