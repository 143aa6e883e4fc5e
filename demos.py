#!/usr/bin/env python3
"""Record expert demonstrations (a heuristic acting in an RL env) as versioned .npz datasets.

    python demos.py --expert aryl --scenario default --episodes 20 --seed 1000 --out demos/aryl.npz
    python demos.py --expert aryl,sjf --env placement --episodes 20 --out demos/placement/
    python demos.py --expert fifo --trace my_cluster.csv --episodes 5 --out demos/fifo-trace.npz

--out ending in .npz is one file (several experts go into it together, told apart by its
expert_ids array); anything else is a folder with one <expert>.npz per expert. Episode i uses
scenario seed SEED + i: pick seeds apart from the ones you evaluate on. The components the agent
does not control are the expert's own unless --placement/--scaling/--reclaim/--preemption (and
--ordering in the placement env) say otherwise, so the expert reproduces its heuristic. The file
format is documented in agents/dataset.py; agents.dataset.load_demos reads it back.
A user error (unknown expert or scenario, bad --set, bad trace, unwritable --out) prints one
sentence and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agents import dataset as ds
from agents import smoke
from envs.core import Components
from envs.sim.config import ConfigError, HelpFormatter, parse_sets
from envs.sim.inference import InferenceConfigError
from envs.sim.workload import TraceError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--expert", required=True, help="comma-separated component heuristics, e.g. aryl,sjf")
    p.add_argument("--env", default="ordering", choices=list(ds.ENVS), help="which seat the expert takes")
    p.add_argument("--scenario", default="default", help="scenario name")
    p.add_argument("--episodes", type=int, default=20, help="episodes per expert")
    p.add_argument("--seed", type=int, default=0, help="scenario seed of the first episode")
    p.add_argument("--trace", default=None, help="replay this CSV trace (our schema); implies --scenario trace")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="scenario override")
    p.add_argument("--max-jobs", type=int, default=None, help="job slots K of the ordering env (default: its own)")
    for seat in ("ordering", "placement", "scaling", "reclaim"):
        p.add_argument(f"--{seat}", default=ds.EXPERT, help=f"{seat} component (default: the expert's own)")
    p.add_argument("--preemption", default=ds.EXPERT, help="preemption component, or 'none' (default: the expert's)")
    p.add_argument("--reward", default="jct", help="the env's reward: jct, slowdown, fee or deadline")
    p.add_argument("--out", default=None, help="a .npz file, or a folder for <expert>.npz (default: demos/<env>/)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 140)
    command = ("demos.py", *(argv if argv is not None else sys.argv[1:]))
    try:
        experts = [e.strip() for e in args.expert.split(",") if e.strip()]
        if not experts:
            raise ConfigError("--expert names no heuristic.")
        if len(set(experts)) < len(experts):
            raise ConfigError(f"--expert names a heuristic twice: '{args.expert}'.")
        overrides = tuple(smoke.sets(parse_sets(args.sets)).items())
        args.episodes = smoke.count(args.episodes, 1)
        configs = [
            ds.RecordConfig(
                expert=e,
                env=args.env,
                scenario=args.scenario,
                overrides=overrides,
                trace=args.trace,
                episodes=args.episodes,
                seed=args.seed,
                max_jobs=args.max_jobs,
                ordering=args.ordering,
                components=Components(args.placement, args.scaling, args.reclaim, args.preemption),
                reward=args.reward,
                command=command,
            )
            for e in experts
        ]
        for c in configs:
            c.validate()
        plan = ds.output_paths(args.out or f"demos/{args.env}", experts)
    except (ConfigError, TraceError, InferenceConfigError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        return 2

    recorded: dict[str, ds.Demos] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        job = bar.add_task("episodes", total=len(configs) * args.episodes)
        for c in configs:
            bar.update(job, description=f"{c.expert} episodes")
            recorded[c.expert] = ds.record(c, on_episode=lambda _: bar.advance(job))

    try:
        for path, names in plan:
            ds.save_demos(ds.merge_demos([recorded[n] for n in names], list(names)), path)
            console.print(f"wrote {path}", highlight=False)
    except OSError as e:
        console.print(f"[red]error:[/red] cannot write demos: {e}.", highlight=False, soft_wrap=True)
        return 2
    for c in configs:
        for s in ds.summaries(recorded[c.expert]):
            jct = "-" if s.mean_avg_jct_s is None else f"{s.mean_avg_jct_s:,.0f}"
            ret = "-" if s.mean_return is None else f"{s.mean_return:.4f}"
            console.print(
                f"{s.expert} ({c.env}): {s.episodes} episodes, {s.steps} steps, "
                f"mean return {ret}, mean avg JCT {jct} s",
                highlight=False,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
