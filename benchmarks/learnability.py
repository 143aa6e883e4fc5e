#!/usr/bin/env python3
"""How much of the ordering seat's lookahead headroom an agent could learn from its observation.

    python benchmarks/learnability.py --task default [--base srtf] [--episodes 10] [--seed 50000]
        [--width 5] [--folds 5] [--margins 0,0.5,1,2]

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
from envs import lookahead
from envs.obs import JOB
from envs.ordering import OrderingEnv
from envs.sim.config import ConfigError


@dataclass(frozen=True)
class Decision:
    episode: int
    features: np.ndarray  # one row per option, the base's choice first
    advantages: np.ndarray  # metric after each option minus after the base's choice


def collect(env: OrderingEnv, base: str, seeds: Sequence[int], width: int, metric: str, lower: bool) -> list[Decision]:
    """The decisions with a choice along ``base``'s own trajectory, each option played on by it;
    advantages signed so that lower is better whatever the metric."""
    sign = 1.0 if lower else -1.0
    slots, n_job = env.slots, len(JOB)
    out = []
    for episode, seed in enumerate(seeds):
        obs, info = env.reset(options={"scenario_seed": seed})
        while "metrics" not in info:
            a = env.expert_action(base)
            core, visible = env.core, env.visible
            mine = None if a == slots else visible[a]
            jobs = lookahead.ordering_jobs(core, mine, visible, env.fits, slots, width)
            if len(jobs) > 1:
                values = []
                for job in jobs:
                    trial = core.copy()
                    lookahead.start(job)(trial)
                    values.append(lookahead.value(lookahead.play(trial, base, slots), metric))
                rows = obs[: slots * n_job].reshape(slots, n_job)
                cluster = obs[slots * n_job :]
                picks = [slots if j is None else visible.index(j) for j in jobs]
                chosen = rows[picks[0]] if picks[0] < slots else np.zeros(n_job, np.float32)
                feats = [
                    np.concatenate([r, r - chosen, cluster, [float(p == slots)]])
                    for p in picks
                    for r in [rows[p] if p < slots else np.zeros(n_job, np.float32)]
                ]
                out.append(Decision(episode, np.asarray(feats, np.float32), sign * (np.asarray(values) - values[0])))
            obs, _, _, _, info = env.step(a)
    return out


def held_out(
    decisions: Sequence[Decision], folds: int, margins: Sequence[float], seed: int
) -> dict[float, tuple[float, float, float]]:
    """Per margin: the mean realised advantage of the learned deviations on held-out episodes,
    its 95% CI half-width, and the share of decisions where it deviated."""
    import torch as th

    th.set_num_threads(1)
    th.manual_seed(seed)
    episodes = sorted({d.episode for d in decisions})
    scale = float(np.median(np.abs(np.concatenate([d.advantages[1:] for d in decisions])))) or 1.0
    picked: dict[float, list[tuple[float, bool]]] = {m: [] for m in margins}
    for k in range(folds):
        test = set(episodes[k::folds])
        train = [d for d in decisions if d.episode not in test]
        width = decisions[0].features.shape[1]
        net = th.nn.Sequential(
            th.nn.Linear(width, 64), th.nn.ReLU(), th.nn.Linear(64, 64), th.nn.ReLU(), th.nn.Linear(64, 1)
        )
        opt = th.optim.Adam(net.parameters(), 1e-3, weight_decay=1e-4)
        xs = [th.from_numpy(d.features) for d in train]
        ys = [th.from_numpy(np.clip(d.advantages / scale, -20, 20).astype(np.float32)) for d in train]
        rng = np.random.default_rng(seed + k)
        for _ in range(30):
            for i in rng.permutation(len(train)):
                p = net(xs[i]).squeeze(-1)
                loss = ((p - p[0] - ys[i]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        with th.no_grad():
            for d in decisions:
                if d.episode not in test:
                    continue
                p = net(th.from_numpy(d.features)).squeeze(-1).numpy()
                p = p - p[0]
                c = int(np.argmin(p))
                for m in margins:
                    pick = c if p[c] < -m else 0
                    picked[m].append((float(d.advantages[pick]), pick != 0))
    out = {}
    for m, xs_ in picked.items():
        realised = np.asarray([x for x, _ in xs_])
        ci = 1.96 * realised.std(ddof=1) / np.sqrt(len(realised)) if len(realised) > 1 else float("nan")
        out[m] = (float(realised.mean()), float(ci), float(np.mean([dev for _, dev in xs_])))
    return out


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
    args = p.parse_args(argv)
    try:
        task = suite.get(args.task)
        experts = dict(zip(task.train[::2], task.train[1::2], strict=False)).get("--experts")
        base = args.base or experts or task.heuristics[0]
        margins = [float(x) for x in args.margins.split(",")]
        if args.episodes < 2 or not 2 <= args.folds <= args.episodes or args.width < 1:
            raise ConfigError("--episodes must be at least 2, --folds between 2 and --episodes, --width at least 1.")
        sets = dict(smoke.sets(dict(task.sets)))
        slots = next((int(v.split("=")[1]) for v in task.train if v.startswith("max_jobs=")), 32)
        env = OrderingEnv(
            max_jobs=slots,
            scenario=task.scenario,
            overrides=sets,
            **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), base),
        )
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seeds = smoke.seeds(list(range(args.seed, args.seed + args.episodes)))
    decisions = collect(env, base, seeds, args.width, task.metric, task.lower_is_better)
    best = statistics.fmean(float(d.advantages.min()) for d in decisions)
    better = np.mean([d.advantages.min() < 0 for d in decisions])
    print(f"task {task.name}, base {base}: {len(decisions)} decisions with a choice, seeds {seeds[0]}-{seeds[-1]}")
    print(f"  foresight: a better option at {better:.0%} of them, mean best advantage {best:+,.1f} ({task.metric})")
    for m, (mean, ci, dev) in held_out(decisions, min(args.folds, len(seeds)), margins, args.seed).items():
        print(f"  learned, margin {m:g}: realised advantage {mean:+,.1f} +- {ci:,.1f}, deviating at {dev:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
