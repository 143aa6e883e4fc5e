#!/usr/bin/env python3
"""How much of the ordering seat's lookahead headroom an agent could learn from its observation.

    python benchmarks/learnability.py --task default [--base srtf] [--episodes 10] [--seed 50000]
        [--width 5] [--folds 5] [--margins 0,0.5,1,2] [--sampled K] [--every N]

The clairvoyant lookahead (``envs/lookahead.py``) beats its base by trying each option on a copy
of the episode, whose future it therefore knows. This asks how much of that gain is visible in
what an agent sees. Along the base's own trajectory in the ordering env (the task's components,
its slots), at every decision with a choice it records the observation and, for each option
(the base's choice, the next ``--width`` jobs that can start, "advance"), the task's metric once
the base has played the episode on from that option. An option's advantage is its metric minus
the base choice's (negative is better for JCT).

A small network then learns each option's advantage from the observation (the option's job row,
its difference to the base choice's row, the cluster features, whether it is "advance"), fitted
on the other episodes (``--folds`` folds by episode). On held-out decisions it deviates from the
base where it predicts a gain larger than a margin (in units of the median |advantage|), and the
realised advantage of what it picked is reported, beside the foresight's: the mean best
advantage per decision. A realised mean above zero says the deviations it could learn cost more
than they win: the lookahead's headroom is foresight, not a pattern in the observation.

``--sampled K`` fits instead each option's advantage averaged over K copies whose hidden state is
redrawn from what the run has seen (``envs.lookahead.redrawn``: the arrivals to come, their work,
the speed fluctuations, and at ``none`` the unfinished jobs' work): the gain a policy without
foresight could expect, the blind lookahead's teacher signal. The realised advantages are still
the true ones. ``--every N`` labels every N-th decision with a choice only (the cost of a label
grows with K).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import smoke
from agents import tasks as suite
from agents.deviation import NetPredictor, Policy, deviation, episode, network
from envs import lookahead
from envs.core import Core
from envs.ordering import OrderingEnv
from envs.sim.config import ConfigError


@dataclass(frozen=True)
class Decision:
    episode: int
    features: np.ndarray  # one row per option, the base's choice first
    advantages: np.ndarray  # metric after each option minus after the base's choice
    off: bool = False  # an earlier decision of the episode departed from the base's choice
    blind: np.ndarray | None = None  # the same, averaged over redrawn futures (--sampled): what is fitted

    @property
    def target(self) -> np.ndarray:
        """What a network learns: the blind advantages where there are some, else the true ones."""
        return self.advantages if self.blind is None else self.blind


def collect(
    env: OrderingEnv,
    base: str,
    seeds: Sequence[int],
    width: int,
    metric: str,
    lower: bool,
    policy: Policy | None = None,
    first: int = 0,
    samples: int = 0,
    every: int = 1,
) -> list[Decision]:
    """The decisions with a choice along the trajectory of ``policy`` (None: ``base``'s own, see
    :func:`episode`), each option played on by ``base``; advantages signed so that lower is better
    whatever the metric. Episodes are numbered from ``first``. Only every ``every``-th decision
    with a choice is labelled. With ``samples``, each option is also played on ``samples`` copies
    whose hidden state is redrawn (:func:`lookahead.redrawn`, every option on the same draws;
    zeros where nothing can be drawn yet): their mean is the decision's ``blind`` advantages, the
    gain a policy that sees no future could expect (the rng: the episode's scenario seed)."""
    sign = 1.0 if lower else -1.0
    out = []
    for number, seed in enumerate(seeds, first):
        rng = np.random.default_rng(seed)
        seen = [0]

        def label(
            jobs: list[int | None],
            feats: np.ndarray,
            off: bool,
            number: int = number,
            seen: list[int] = seen,
            rng: np.random.Generator = rng,
        ) -> None:
            seen[0] += 1
            if (seen[0] - 1) % every:
                return
            values = [_played(env.core, job, base, env.slots, metric) for job in jobs]
            blind = None
            if samples:
                draws = [lookahead.redrawn(env.core, rng) for _ in range(samples)]
                per = [[_played(d, job, base, env.slots, metric) for job in jobs] for d in draws if d is not None]
                mean = np.mean(per, axis=0) if per else np.zeros(len(jobs))
                blind = sign * (mean - mean[0])
            out.append(Decision(number, feats, sign * (np.asarray(values) - values[0]), off, blind))

        episode(env, base, seed, width, policy, label)
    return out


def _played(core: Core, job: int | None, base: str, slots: int, metric: str) -> float:
    """``metric`` once ``job`` (None: advance) is started on a copy of ``core`` and ``base`` has
    played the episode on from there."""
    trial = core.copy()
    lookahead.start(job)(trial)
    return lookahead.value(lookahead.play(trial, base, slots), metric)


def scale_of(decisions: Sequence[Decision]) -> float:
    """The median |advantage| (of what is fitted: ``target``) of the options beside the base's
    choice: the margins' unit."""
    return float(np.median(np.abs(np.concatenate([d.target[1:] for d in decisions])))) or 1.0


def fit(decisions: Sequence[Decision], scale: float, seed: int, epochs: int = 30, reseed: bool = True) -> NetPredictor:
    """A small network fitted to each option's advantage (in units of ``scale``, clipped at 20)
    relative to the base choice's; returns the predictor of an option array's relative advantages.
    ``seed`` orders the passes, and seeds torch's initialisation unless ``reseed`` is False."""
    import torch as th

    th.set_num_threads(1)
    if reseed:
        th.manual_seed(seed)
    net = network(decisions[0].features.shape[1])
    opt = th.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
    xs = [th.from_numpy(d.features) for d in decisions]
    ys = [th.from_numpy(np.clip(d.target / scale, -20, 20).astype(np.float32)) for d in decisions]
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        for i in rng.permutation(len(decisions)):
            p = net(xs[i]).squeeze(-1)
            loss = ((p - p[0] - ys[i]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return NetPredictor(net)


def held_out(
    decisions: Sequence[Decision], folds: int, margins: Sequence[float], seed: int
) -> dict[float, tuple[float, float, float]]:
    """Per margin: the mean realised advantage of the learned deviations on held-out episodes,
    its 95% CI half-width, and the share of decisions where it deviated."""
    import torch as th

    th.manual_seed(seed)  # once: the folds' networks draw on from it in turn
    episodes = sorted({d.episode for d in decisions})
    scale = scale_of(decisions)
    picked: dict[float, list[tuple[float, bool]]] = {m: [] for m in margins}
    for k in range(folds):
        test = set(episodes[k::folds])
        predict = fit([d for d in decisions if d.episode not in test], scale, seed + k, reseed=False)
        for d in decisions:
            if d.episode not in test:
                continue
            for m in margins:
                pick = deviation(predict, m)(d.features)
                picked[m].append((float(d.advantages[pick]), pick != 0))
    out = {}
    for m, xs_ in picked.items():
        realised = np.asarray([x for x, _ in xs_])
        ci = 1.96 * realised.std(ddof=1) / np.sqrt(len(realised)) if len(realised) > 1 else float("nan")
        out[m] = (float(realised.mean()), float(ci), float(np.mean([dev for _, dev in xs_])))
    return out


def setup(name: str, base: str | None) -> tuple[suite.BenchTask, str, OrderingEnv]:
    """Task ``name``, its base heuristic (``base``, else its recipe's expert, else its first
    heuristic) and the ordering env of its recipe (its slots) with the base in the other seats."""
    task = suite.get(name)
    experts = dict(zip(task.train[::2], task.train[1::2], strict=False)).get("--experts")
    base = base or experts or task.heuristics[0]
    slots = next((int(v.split("=")[1]) for v in task.train if v.startswith("max_jobs=")), 32)
    env = OrderingEnv(
        max_jobs=slots,
        scenario=task.scenario,
        overrides=dict(smoke.sets(dict(task.sets))),
        **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), base),
    )
    return task, base, env


def add_label_arguments(p: argparse.ArgumentParser) -> None:
    """``--sampled`` and ``--every`` (of :func:`collect`), here and in ``dagger.py``."""
    p.add_argument(
        "--sampled",
        type=int,
        default=0,
        help="fit each option's advantage averaged over K redrawn futures (envs.lookahead.redrawn): what a "
        "policy without foresight could expect; what is realised stays the true future's (default 0: fit that)",
    )
    p.add_argument("--every", type=int, default=1, help="label every N-th decision with a choice (default 1: all)")


def check_label_arguments(args: argparse.Namespace, env: OrderingEnv) -> None:
    """ConfigError for a bad ``--sampled`` or ``--every``, or for ``--sampled`` where
    :func:`lookahead.redrawn` cannot hide what the policies do not see (on ``env``'s episode
    ``args.seed``)."""
    if args.sampled < 0 or args.every < 1:
        raise ConfigError("--sampled must be at least 0 and --every at least 1.")
    if args.sampled:
        env.reset(options={"scenario_seed": args.seed})
        try:
            lookahead.check_blind(env.core)
        except ValueError as e:
            raise ConfigError(f"--sampled: {e}.") from None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="default", help="a task of agents/tasks.py (default: default)")
    p.add_argument("--base", default=None, help="base heuristic (default: the task's recipe's expert)")
    p.add_argument("--episodes", type=int, default=10, help="episodes recorded (default 10)")
    p.add_argument("--seed", type=int, default=50_000, help="scenario seed of the first episode (default 50000)")
    p.add_argument("--width", type=int, default=5, help="options beside the base's own choice (default 5)")
    p.add_argument("--folds", type=int, default=5, help="folds by episode (default 5)")
    p.add_argument(
        "--margins", default="0,0.5,1,2", help="deviation margins, in median |advantage| (default 0,0.5,1,2)"
    )
    add_label_arguments(p)
    args = p.parse_args(argv)
    try:
        margins = [float(x) for x in args.margins.split(",")]
        if args.episodes < 2 or not 2 <= args.folds <= args.episodes or args.width < 1:
            raise ConfigError("--episodes must be at least 2, --folds between 2 and --episodes, --width at least 1.")
        task, base, env = setup(args.task, args.base)
        check_label_arguments(args, env)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seeds = smoke.seeds(list(range(args.seed, args.seed + args.episodes)))
    decisions = collect(
        env, base, seeds, args.width, task.metric, task.lower_is_better, samples=args.sampled, every=args.every
    )
    best = statistics.fmean(float(d.advantages.min()) for d in decisions)
    better = np.mean([d.advantages.min() < 0 for d in decisions])
    print(f"task {task.name}, base {base}: {len(decisions)} decisions with a choice, seeds {seeds[0]}-{seeds[-1]}")
    print(f"  foresight: a better option at {better:.0%} of them, mean best advantage {best:+,.1f} ({task.metric})")
    if args.sampled:
        seen = np.mean([d.target.min() < 0 for d in decisions])
        print(f"  blind ({args.sampled} draws): a better option by the draws at {seen:.0%}; fitted to these")
    for m, (mean, ci, dev) in held_out(decisions, min(args.folds, len(seeds)), margins, args.seed).items():
        print(f"  learned, margin {m:g}: realised advantage {mean:+,.1f} +- {ci:,.1f}, deviating at {dev:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
