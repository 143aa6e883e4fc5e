#!/usr/bin/env python3
"""Train the dual ordering/placement agents: behaviour cloning from expert demonstrations, then
alternating MaskablePPO rounds.

    python train.py                                   # default scenario, BC warm start, dual PPO
    python train.py --scenario loaning --total-steps 100000 --rounds 4 --seed 1
    python train.py --set learning_rate=1e-4 --set workload.num_jobs=200
    python train.py --resume runs/default__dual__0__20261129-120000

Writes runs/<scenario>__<exp>__<seed>__<time>/ (config.yaml, command.txt, commit.txt, tb/,
checkpoints/, state.json). Ctrl-C saves a checkpoint; --resume continues from it. A user error
(bad flag, unknown name, bad trace, missing run folder) prints one sentence and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

SCENARIO_SECTIONS = ("cluster.", "inference.", "workload.", "sim.")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def validate(config) -> None:  # type: ignore[no-untyped-def]
    from agents.networks import ACTIVATIONS
    from envs.core import composed
    from envs.sim import scenarios
    from envs.sim.config import ConfigError

    core = config.core_config()
    scenarios.build(core.scenario_obj(), config.train_seeds[0])
    for name in config.experts:
        composed(name)
    if config.total_steps < 1 or config.rounds < 1 or config.n_envs < 1:
        raise ConfigError("--total-steps, --rounds and --n-envs must be positive.")
    if config.activation not in ACTIVATIONS:
        raise ConfigError(f"--set activation must be one of {', '.join(ACTIVATIONS)}, got '{config.activation}'.")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 140)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from agents import rundir
    from envs.sim.config import ConfigError
    from envs.sim.inference import InferenceConfigError
    from envs.sim.workload import TraceError

    try:
        if args.resume:
            run = Path(args.resume)
            config = rundir.load_config(run)
        else:
            config = build_config(args)
        validate(config)
    except (ConfigError, TraceError, InferenceConfigError, rundir.RunDirError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2

    from agents.dual import Trainer

    command = ["train.py", *(argv if argv is not None else sys.argv[1:])]
    if not args.resume:
        run = rundir.new_run_dir(config, Path(args.out))
    console.print(f"run folder: {run}")

    with Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("steps", total=config.total_steps)
        trainer = Trainer(config, run, progress=lambda n: bar.advance(task, n))
        if args.resume:
            with (run / "command.txt").open("a", encoding="utf-8") as f:
                f.write(" ".join(command) + "\n")
        else:
            rundir.write_run_files(run, config, command, trainer.layout())
        bar.update(task, completed=min(trainer.state.steps, config.total_steps))
        try:
            if config.bc and not trainer.state.bc:
                bar.update(task, description="demonstrations + behaviour cloning")
                reports = trainer.warm_start(Path(args.demos))
                for agent, rep in reports.items():
                    console.print(
                        f"BC {agent}: held-out accuracy {rep.heldout_accuracy:.3f} ({rep.heldout_steps} steps)"
                    )
            if not trainer.state.evals:
                trainer.evaluate()
            trainer.train()
        except KeyboardInterrupt:
            trainer.save()
            console.print(f"interrupted: checkpoint saved; continue with --resume {run}")
            return 130

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
    console.print(f"best agent avg JCT {trainer.state.best_jct:,.0f} s; checkpoints in {run / 'checkpoints'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
