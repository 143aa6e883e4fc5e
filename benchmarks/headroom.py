#!/usr/bin/env python3
"""Where a task's headroom lies, seat by seat: the best realistic heuristic's composition with
one seat at a time taken by something that sees the truth, on the same seeds.

    python benchmarks/headroom.py --task default [--base mlfs] [--seeds 200000-200009]
        [--set workload.synthetic.num_jobs=60] [--lookahead 4]

Rows (each the mean of the task's metric over the seeds, and its change against the base):

- ``base``: the base heuristic's ordering in the ordering seat, its components in the others
  (the agents' seats, run as in ``agents.partners.play_episode``).
- ``ordering = oracle-sjf``: the ordering seat ranks by the true remaining time.
- ``ordering = lookahead``: a clairvoyant one-step lookahead in the ordering seat. At every
  decision it tries the base's choice, the next ``--lookahead`` jobs that can start and
  "advance", each on a copy of the whole simulation played to its end with the base heuristic
  (so it knows every future arrival, duration and fluctuation), and takes the best. It is at
  least as good as the base on every seed (the base's own choice is among those tried), and
  it costs one simulation per candidate per decision: use small instances.
- ``placement = oracle-speed``: the placement seat puts each job on the server where it runs
  fastest by the machines' true speed factors.

A row with an oracle in a seat runs on a view that shows the truth (``CoreConfig.oracle``), so
the heuristics in the other seats see it too; where the task is clairvoyant that adds only the
machines' true speeds.
- ``scaling = fifo``: FIFO's scaling component, which never rescales: elastic jobs keep their
  requested size (what the gang-size seat's heuristic is worth, not an oracle).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import evaluation as ev
from agents import smoke
from agents import tasks as suite
from envs.core import Components, Core, CoreConfig
from envs.sim.config import ConfigError

SLOTS = 32


def _value(core: Core, metric: str) -> float:
    assert core.metrics is not None
    v = core.metrics[metric]
    return float("nan") if v is None else float(v)


def _play(core: Core, ordering: str, *first: int | None) -> Core:
    """Play ``core`` to its end with heuristic ``ordering`` in the ordering seat; ``first``, if
    given: the job to start (None: advance) at the current decision instead of its choice."""
    ranking = core.heuristic(ordering).ordering
    forced = list(first)
    while True:
        visible, _ = core.next_choice(SLOTS)
        if core.done:
            return core
        job = forced.pop() if forced else core.expert_job(ranking, visible)
        if job is None:
            core.advance()
        else:
            core.start(job)


def lookahead(config: CoreConfig, seed: int, base: str, width: int, metric: str, lower: bool) -> float:
    """The clairvoyant one-step lookahead over ``base`` (module docstring): the episode's metric."""
    core = Core(config)
    core.reset(seed)
    ranking = core.heuristic(base).ordering
    sign = 1.0 if lower else -1.0
    while True:
        visible, fits = core.next_choice(SLOTS)
        if core.done:
            return _value(core, metric)
        mine = core.expert_job(ranking, visible)
        others = [j for j, f in zip(visible, fits, strict=True) if f and j != mine][:width]
        candidates: list[int | None] = [mine, *others]
        if core.ordering_mask(fits, SLOTS)[SLOTS] and mine is not None:
            candidates.append(None)
        best, best_value = mine, None
        for c in candidates:
            value = sign * _value(_play(core.copy(), base, c), metric)
            if best_value is None or value < best_value:
                best, best_value = c, value
        if best is None:
            core.advance()
        else:
            core.start(best)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="default", help="a task of agents/tasks.py (default: default)")
    p.add_argument(
        "--base",
        default=None,
        help="base heuristic: the best realistic one of the task's leaderboard (default: the task's first heuristic)",
    )
    p.add_argument("--seeds", default="200000-200004", help="scenario seeds (default 200000-200004)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more scenario overrides")
    p.add_argument("--lookahead", type=int, default=3, help="jobs tried beside the base's choice (default 3)")
    p.add_argument("--no-lookahead", action="store_true", help="skip the (slow) lookahead row")
    args = p.parse_args(argv)
    try:
        task = suite.get(args.task)
        seeds = smoke.seeds(ev.parse_seeds(args.seeds))
        sets = smoke.sets(dict(task.sets) | dict(kv.split("=", 1) for kv in args.set))
        base = args.base or task.heuristics[0]
        components = Components(base, base, base, base)
        config = CoreConfig.from_kwargs(scenario=task.scenario, overrides=sets, components=components)
        config.validate()
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    metric, lower = task.metric, task.lower_is_better

    def mean_of(cfg: CoreConfig, ordering: str) -> float:
        return statistics.mean(_value(_play(_started(cfg, s), ordering), metric) for s in seeds)

    rows: list[tuple[str, float]] = [("base", mean_of(config, base))]
    rows.append(("ordering = oracle-sjf", mean_of(dataclasses.replace(config, oracle=True), "oracle-sjf")))
    if not args.no_lookahead:
        rows.append(
            (
                f"ordering = lookahead ({args.lookahead})",
                statistics.mean(lookahead(config, s, base, args.lookahead, metric, lower) for s in seeds),
            )
        )
    seats = (("placement = oracle-speed", "placement", "oracle-speed"), ("scaling = fifo", "scaling", "fifo"))
    for label, field, name in seats:
        cfg = dataclasses.replace(config, components=dataclasses.replace(components, **{field: name}))
        rows.append((label, mean_of(cfg, base)))
    ref = rows[0][1]
    print(f"task {task.name} ({task.scenario}, {sets}), base {base}, {metric} over seeds {args.seeds}:")
    for label, value in rows:
        change = (value - ref) / abs(ref) if ref else float("nan")
        print(f"  {label:32} {value:12,.3f}  {100 * change:+6.1f}%")
    return 0


def _started(config: CoreConfig, seed: int) -> Core:
    core = Core(config)
    core.reset(seed)
    return core


if __name__ == "__main__":
    sys.exit(main())
