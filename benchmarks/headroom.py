#!/usr/bin/env python3
"""Where a task's headroom lies, seat by seat: the best realistic heuristic's composition with
one seat at a time taken by something that sees the truth, on the same seeds.

    python benchmarks/headroom.py --task default [--base mlfs] [--seeds 200000-200009]
        [--set workload.synthetic.num_jobs=60] [--lookahead 4] [--searches ordering,gang|none]
        [--sampled 8]

Rows (each the mean of the task's metric over the seeds, and its change against the base):

- ``base``: the base heuristic's ordering in the ordering seat, its components in the others
  (the agents' seats, run as in ``agents.partners.play_episode``). In every row the ordering seat
  sees every waiting job (:func:`slots`), so the base is the heuristic as it runs alone.
- ``ordering = oracle-sjf``: the ordering seat ranks by the true remaining time.
- ``SEAT = lookahead``: a clairvoyant one-step lookahead in one seat (``--searches``). At every
  decision it tries the base's own choice and up to ``--lookahead`` others, each on a copy of
  the whole simulation played to its end by the base heuristic (so it knows every future
  arrival, duration and fluctuation), and takes the best. It is at least as good as the base on
  every seed (the base's own choice is among those tried), and it costs one simulation per
  option per decision: use small instances. The options per seat:

  - ``ordering``: the next jobs that can start, and "advance";
  - ``gang``: the elastic job the base starts, at its min, middle and max size instead of the
    base's (packed as the base's placement packs);
  - ``preemption``: where the base starts nothing more, preempting one of the running jobs with
    the most true remaining work (it loses its work since its last checkpoint).

- ``SEAT = sampled lookahead``, with ``--sampled K``: the same search without foresight, so that
  it measures what a policy could gain from what it sees. Each option is played on K copies in
  which the jobs to come (their arrival times and work), the speed fluctuations and, at
  information ``estimate`` and ``none``, the work of every unfinished job are drawn anew from
  what the run has seen (``envs.lookahead.redrawn``: the arrivals at the rate so far, the work of
  the jobs to come from the arrived jobs', at ``estimate`` the unfinished jobs' about their
  estimates, at ``none`` from the finished jobs' above what each has done; not on machines with
  latent speeds),
  and the base's choice gives way only to an option better on the K draws beyond doubt
  (``envs.lookahead.best_sampled``). Preemption candidates are then the running jobs with the
  most work done. It may lose to the base where the draws mislead it.
- ``placement = oracle-speed``: the placement seat puts each job on the server where it runs
  fastest by the machines' true speed factors; where the base's own placement waits for faster
  GPUs (``srsf-eft``), ``oracle-srsf-eft-speed``'s, which also waits for a truly faster machine.
- ``scaling = fifo``: FIFO's scaling component, which never rescales: elastic jobs keep their
  requested size (what the base's scaling heuristic is worth, not an oracle).

Where the task's metric is the deadline hit ratio, a ``ceiling`` line: the share of deadlines any
policy could meet at most (:func:`deadline_ceiling`), since no oracle plans for deadlines.

A row with an oracle in a seat runs on a view that shows the truth (``CoreConfig.oracle``), so
the heuristics in the other seats see it too; where the task is clairvoyant that adds only the
machines' true speeds. Last, how much of the durations the job fields could predict
(:func:`feature_r2`): where that is little, the ordering headroom of a task without duration
information is information no policy can learn.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import evaluation as ev
from agents import smoke
from agents import tasks as suite
from envs.core import Components, Core, CoreConfig
from envs.lookahead import Step, best, best_sampled, check_blind, ordering_jobs, play, start, value
from envs.sim.config import ConfigError
from envs.sim.policy import ClusterView, JobStatus, Start, reconsiders
from heuristics.common import TRAINING_ONLY, pack
from heuristics.mlfs import MlfsConfig
from heuristics.mlfs_priority import latest_start
from heuristics.registry import make


def slots(core: Core) -> int:
    """The ordering seat's slots in every row: the episode's every job, so the seat sees the whole
    queue as the heuristic run alone does (with fewer, a long queue's tail is hidden from the base
    in the seat, and every row is measured against a weaker base than the heuristic itself)."""
    return core.view.num_jobs


def _start_with(start: Start) -> Step:
    return lambda core: core.start_with(start)


def _preempt(job: int) -> Step:
    return lambda core: core.preempt(job)


def _ordering_options(
    core: Core, mine: int | None, visible: list[int], fits: list[bool], width: int, blind: bool = False
) -> list[Step]:
    """The base's choice, the next ``width`` jobs that can start, and "advance" where allowed."""
    return [start(j) for j in ordering_jobs(core, mine, visible, fits, slots(core), width)]


def _gang_options(
    core: Core, mine: int | None, visible: list[int], fits: list[bool], width: int, blind: bool = False
) -> list[Step]:
    """The base's start, and the elastic job it starts at its min, middle and max size instead
    (packed on as few servers as possible, in the pools and type order of the base's placement)."""
    options = [start(mine)]
    if mine is None:
        return options
    spec = core.view.job(mine)
    if spec.max_gpus <= spec.min_gpus:
        return options
    placement = core.scheduler.placement
    pools = getattr(placement, "pools", TRAINING_ONLY)
    order = getattr(placement, "type_order", "fastest")
    for n in sorted({spec.min_gpus, (spec.min_gpus + spec.max_gpus) // 2, spec.max_gpus} - {spec.num_gpus}):
        alloc = pack(core.view, spec, n, pools, type_order=order)
        if alloc is not None:
            options.append(_start_with(Start(mine, alloc)))
    return options


def _preemption_options(
    core: Core, mine: int | None, visible: list[int], fits: list[bool], width: int, blind: bool = False
) -> list[Step]:
    """Where the base starts nothing more: also preempting one of the ``width`` running jobs with
    the most true remaining work (``blind``: the most work done), its GPUs free at once and its
    work since its last checkpoint lost, the base then going on at the same decision point. Jobs
    still checkpointing after a graceful preemption of the base's are no candidates."""
    options = [start(mine)]
    if mine is not None or not visible:
        return options
    running = [j for j in core.view.running if core.view.status_of(j) == JobStatus.RUNNING]  # not checkpointing
    if blind:  # the longest running are the likeliest to run on
        view = core.view
        longer = [(-view.work_done(j), j) for j in running]
    else:
        truth = ClusterView(core.engine, oracle=True) if core.engine is not None else core.view
        longer = [(-truth.remaining_work(j), j) for j in running]
    longest = [j for _, j in sorted(longer)[:width]]
    options += [_preempt(j) for j in longest]
    return options


OPTIONS = {"ordering": _ordering_options, "gang": _gang_options, "preemption": _preemption_options}


def lookahead(
    config: CoreConfig,
    seed: int,
    base: str,
    width: int,
    metric: str,
    lower: bool,
    seat: str = "ordering",
    samples: int = 0,
) -> float:
    """The one-step lookahead over ``base`` in ``seat`` (module docstring): the episode's metric.
    At every decision each option (the base's own first) is tried on a copy of the whole
    simulation played to its end by the base; the best is taken. The copies are clairvoyant, or
    with ``samples`` each option's score is the mean over that many copies whose hidden work is
    redrawn (:func:`envs.lookahead.best_sampled`)."""
    rng = np.random.default_rng(seed)
    core = _started(config, seed)
    ranking = core.heuristic(base).ordering
    n = slots(core)
    while True:
        if seat == "preemption":  # also the decision points where nothing can start
            visible, fits = core.choices(n) if not core.done else ([], [])
        else:
            visible, fits = core.next_choice(n)
        if core.done:
            return value(core, metric)
        mine = core.expert_job(ranking, visible)
        options = OPTIONS[seat](core, mine, visible, fits, width, samples > 0)
        if samples:
            options[best_sampled(core, options, base, n, metric, lower, rng, samples)](core)
        else:
            options[best(core, options, base, n, metric, lower)](core)


def feature_r2(config: CoreConfig, seeds: Sequence[int]) -> tuple[float, float]:
    """How much of ln(duration) the job fields a non-clairvoyant policy sees could predict, over
    the seeds' jobs (R^2, out of sample): (1) the categorical fields (model, GPU count, min and
    max GPUs, class, user, template), each job predicted by the mean of the other jobs with the
    same fields (the overall mean where it has none); (2) for the jobs with a deadline, a line
    fitted to ln(deadline - submit), whose relative window a user sets from the duration."""
    groups: dict[tuple[object, ...], list[float]] = {}
    window: list[tuple[float, float]] = []
    for seed in seeds:
        core = _started(config, seed)
        assert core.engine is not None
        truth = ClusterView(core.engine, oracle=True)
        for j in range(core.num_jobs):
            s = truth.job(j)
            y = math.log(s.duration)
            key = (s.model, s.num_gpus, s.min_gpus, s.max_gpus, s.job_class, s.user, s.template)
            groups.setdefault(key, []).append(y)
            if s.deadline is not None and s.deadline > s.submit_time:
                window.append((math.log(s.deadline - s.submit_time), y))
    ys = [y for g in groups.values() for y in g]
    mean = statistics.fmean(ys)
    sse = 0.0
    for g in groups.values():
        total = sum(g)
        sse += sum((y - ((total - y) / (len(g) - 1) if len(g) > 1 else mean)) ** 2 for y in g)
    r2_fields = 1.0 - sse / sum((y - mean) ** 2 for y in ys)
    xs, ws = [x for x, _ in window], [y for _, y in window]
    r2_window = statistics.correlation(xs, ws) ** 2 if len(window) > 2 else float("nan")
    return r2_fields, r2_window


def deadline_ceiling(config: CoreConfig, seeds: Sequence[int]) -> float:
    """The share of the deadlines any policy could meet at most: a job meets its deadline only if
    it could alone, from its submission at its fastest rate (its most GPUs, packed, on its fastest
    GPU type, work up to its required accuracy where early stops are on: mlfs's
    :func:`~heuristics.mlfs_priority.latest_start`, nominal speeds: a bound where no machine runs
    faster than nominal, as on ``deadline``'s cluster, whose speed factors are 1 and whose only
    slowdown is contention). The mean over the seeds of each episode's share of jobs with a
    deadline that could."""
    cfg = MlfsConfig()
    shares = []
    for seed in seeds:
        core = _started(config, seed)
        assert core.engine is not None
        truth = ClusterView(core.engine, oracle=True)
        jobs = [truth.job(j) for j in range(core.num_jobs)]
        can = [s.submit_time <= latest_start(truth, s.job_id, cfg) for s in jobs if s.deadline is not None]
        shares.append(sum(can) / len(can) if can else float("nan"))
    return statistics.mean(shares)


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
    p.add_argument("--lookahead", type=int, default=3, help="options tried beside the base's own (default 3)")
    p.add_argument(
        "--searches",
        default=",".join(OPTIONS),
        help=f"seats searched by the (slow) lookahead, comma-separated, or none (default {','.join(OPTIONS)})",
    )
    p.add_argument(
        "--sampled",
        type=int,
        default=0,
        metavar="K",
        help="make the lookahead blind: score each option over K copies in which what the run's "
        "policies cannot see is redrawn (default 0: clairvoyant copies)",
    )
    args = p.parse_args(argv)
    try:
        task = suite.get(args.task)
        seeds = smoke.seeds(ev.parse_seeds(args.seeds))
        sets = smoke.sets(dict(task.sets) | dict(kv.split("=", 1) for kv in args.set))
        base = args.base or task.heuristics[0]
        components = Components(base, base, base, base)
        config = CoreConfig.from_kwargs(scenario=task.scenario, overrides=sets, components=components)
        config.validate()
        if args.sampled < 0:
            raise ConfigError(f"--sampled: expected a count >= 0, got {args.sampled}.")
        if args.sampled:
            try:
                check_blind(_started(config, seeds[0]))
            except ValueError as e:
                raise ConfigError(f"--sampled: {e}.") from None
        searches = [] if args.searches == "none" else args.searches.split(",")
        if unknown := [x for x in searches if x not in OPTIONS]:
            raise ConfigError(f"--searches: unknown seat '{unknown[0]}'; valid: {', '.join(OPTIONS)} or none.")
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    metric, lower = task.metric, task.lower_is_better

    def mean_of(cfg: CoreConfig, ordering: str) -> float:
        cores = (_started(cfg, s) for s in seeds)
        return statistics.mean(value(play(core, ordering, slots(core)), metric) for core in cores)

    rows: list[tuple[str, float]] = [("base", mean_of(config, base))]
    rows.append(("ordering = oracle-sjf", mean_of(dataclasses.replace(config, oracle=True), "oracle-sjf")))
    for seat in searches:
        values = [lookahead(config, s, base, args.lookahead, metric, lower, seat, args.sampled) for s in seeds]
        kind = (
            f"sampled lookahead ({args.lookahead}, {args.sampled})" if args.sampled else f"lookahead ({args.lookahead})"
        )
        rows.append((f"{seat} = {kind}", statistics.mean(values)))
    own = getattr(make(base), "placement", None)  # a base that waits for faster GPUs meets the oracle that waits
    speed = "oracle-srsf-eft-speed" if own is not None and reconsiders(own) else "oracle-speed"
    seats = ((f"placement = {speed}", "placement", speed), ("scaling = fifo", "scaling", "fifo"))
    for label, field, name in seats:
        cfg = dataclasses.replace(config, components=dataclasses.replace(components, **{field: name}))
        rows.append((label, mean_of(cfg, base)))
    ref = rows[0][1]
    print(f"task {task.name} ({task.scenario}, {sets}), base {base}, {metric} over seeds {args.seeds}:")
    for label, v in rows:
        change = (v - ref) / abs(ref) if ref else float("nan")
        print(f"  {label:34} {v:12,.3f}  {100 * change:+6.1f}%")
    if metric == "deadline_hit_ratio":
        print(f"ceiling: {deadline_ceiling(config, seeds):.4f} of the deadlines could be met at all (each job alone")
        print("  at its fastest rate from its submission): no policy meets more")
    fields, window = feature_r2(config, seeds)
    print(f"R^2 of ln(duration), out of sample: {fields:.3f} from the job's categorical fields, ", end="")
    print(f"{window:.3f} from ln(deadline - submit) where it has one")
    return 0


def _started(config: CoreConfig, seed: int) -> Core:
    core = Core(config)
    core.reset(seed)
    return core


if __name__ == "__main__":
    sys.exit(main())
