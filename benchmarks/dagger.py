#!/usr/bin/env python3
"""Learned deviations from the ordering seat's heuristic, labelled on the states they visit
(DAgger-style).

    python benchmarks/dagger.py --task contention-none [--base qssf] [--rounds 3] [--episodes 3]
        [--seed 0] [--width 3] [--margins 0,1,2,4,8] [--rollout-margins 1,2,4] [--epochs 30]
        [--sampled K] [--every N] [--select-seeds N] [--save FOLDER]

``benchmarks/learnability.py`` labels every option of a decision with its lookahead advantage
(the metric once the base has played the episode on from it, minus the base choice's) along the
base's own trajectory, and fits a network to predict it from the observation. Deviating where
that network predicts a gain wins decision by decision on held-out episodes of the base's
trajectory, but chained over a whole episode its deviations lead to states it never saw. Here
the labels follow the learned policy instead:

* round 0 labels the decisions along the base's trajectory on ``--episodes`` training seeds of
  the task, and fits the network;
* round i > 0 plays the current policy (the base, except where the network predicts a gain beyond
  a margin) on fresh training seeds, each episode at one of ``--rollout-margins`` in turn, labels
  every option at the states it visits (options played on by the base, as before), adds them to
  the earlier rounds' and refits.

After each round the closed-loop policy plays the task's evaluation seeds at each of
``--margins``, beside the base in the same seat (the ordering env with the base's action at
every step). The round and margin with the best evaluation mean then play the task's test seeds,
reported as the paired difference to the base in the seat with a 95% CI (Student t over seeds);
where none beats the base there, the run's policy is the base itself, and it stops (no test
seeds played, nothing saved). ``--select-seeds N`` adds the last N training seeds of the task (which
no round may label) to the evaluation seeds for that choice: ten seeds pick by chance among
deviations within a percent or two of the base.
Margins are in units of round 0's median |advantage| (of the options beside the base's choice),
fixed for all rounds so that a margin means the same in each.

``--sampled K`` labels with a teacher that has no foresight: each option's advantage averaged
over K futures redrawn from what the run has seen (``learnability.py``'s ``--sampled``), where the
default labels with the true future. The deviations it teaches are then ones a policy could
expect to gain from what it sees. ``--every N`` labels every N-th decision with a choice only.

``--save FOLDER`` writes the round and margin picked on the evaluation seeds as a deviation agent
(``agents/deviation.py``: ``agent.json`` and ``network.pt``) before the test seeds run;
``evaluate.py --policies dagger:FOLDER`` plays it. A FOLDER that holds anything else is refused.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import deviation as dv
from agents import smoke
from agents.provenance import git_commit
from benchmarks import learnability as ln
from benchmarks.suite import paired
from envs.ordering import OrderingEnv
from envs.sim.config import ConfigError


def rounds(
    env: OrderingEnv,
    base: str,
    seeds: Sequence[Sequence[int]],
    width: int,
    metric: str,
    lower: bool,
    rollout_margins: Sequence[float],
    seed: int,
    epochs: int = 30,
    samples: int = 0,
    every: int = 1,
) -> Iterator[tuple[list[ln.Decision], dv.NetPredictor, float]]:
    """Per round (one a list of ``seeds``): the decisions it labelled, the predictor fitted on
    them and all earlier rounds', and the margins' unit (round 0's median |advantage|). Round 0
    follows the base; round i > 0 the previous round's predictor, episode k of the round at
    ``rollout_margins[k % len(rollout_margins)]``. ``samples`` and ``every``: as
    :func:`learnability.collect` (with ``samples``, the blind advantages are fitted)."""
    data: list[ln.Decision] = []
    predict: dv.NetPredictor | None = None
    scale, number = 1.0, 0
    for r, round_seeds in enumerate(seeds):
        new: list[ln.Decision] = []
        for k, s in enumerate(round_seeds):
            policy = None
            if predict is not None:
                policy = dv.deviation(predict, rollout_margins[k % len(rollout_margins)])
            new += ln.collect(env, base, [s], width, metric, lower, policy, first=number, samples=samples, every=every)
            number += 1
        if r == 0:
            scale = ln.scale_of(new)
        data += new
        predict = ln.fit(data, scale, seed + r, epochs)
        yield new, predict, scale


def closed_loop(
    env: OrderingEnv, base: str, seeds: Sequence[int], width: int, metric: str, policy: dv.Policy | None
) -> tuple[list[float], float]:
    """Each seed's ``metric`` with ``policy`` deviating from ``base`` in the seat (None: the base
    every step), and the share of decisions with a choice where it deviated."""
    values, choices, deviations = [], 0, 0
    for s in seeds:
        metrics, c, d = dv.episode(env, base, s, width, policy)
        if metrics.get("jobs_unfinished"):
            raise RuntimeError(f"seed {s}: {metrics['jobs_unfinished']} jobs unfinished")
        values.append(float(metrics[metric]))
        choices, deviations = choices + c, deviations + d
    return values, deviations / max(choices, 1)


def _fig(x: float, sign: str = "") -> str:
    """A figure as printed: seconds to a tenth, a ratio (deadline hits) to four digits."""
    return f"{x:{sign},.1f}" if abs(x) >= 1 else f"{x:{sign}.4g}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="contention-none", help="a task of agents/tasks.py (default: contention-none)")
    p.add_argument("--base", default=None, help="base heuristic (default: the task's recipe's expert)")
    p.add_argument("--rounds", type=int, default=3, help="on-policy rounds after round 0 (default 3)")
    p.add_argument("--episodes", type=int, default=3, help="labelled episodes per round (default 3)")
    p.add_argument("--seed", type=int, default=0, help="first training seed (default 0); rounds take the next ones")
    p.add_argument("--width", type=int, default=3, help="options beside the base's own choice (default 3)")
    p.add_argument(
        "--margins", default="0,1,2,4,8", help="evaluated margins, in median |advantage| (default 0,1,2,4,8)"
    )
    p.add_argument(
        "--rollout-margins", default="1,2,4", help="margins of the rounds' rollouts, episode by episode (default 1,2,4)"
    )
    p.add_argument("--epochs", type=int, default=30, help="passes over the data per fit (default 30)")
    p.add_argument(
        "--select-seeds",
        type=int,
        default=0,
        help="pick the round and margin on the evaluation seeds and the task's last N training seeds (default 0)",
    )
    p.add_argument("--save", default=None, help="write the picked round and margin as a deviation agent here")
    ln.add_label_arguments(p)
    args = p.parse_args(argv)
    try:
        try:
            margins = [float(x) for x in args.margins.split(",")]
            rollout_margins = [float(x) for x in args.rollout_margins.split(",")]
        except ValueError:
            raise ConfigError("--margins and --rollout-margins must be comma-separated numbers.") from None
        if min(margins + rollout_margins) < 0:
            raise ConfigError("--margins and --rollout-margins must not be negative.")
        if args.rounds < 1 or args.episodes < 1 or args.width < 1 or args.epochs < 1:
            raise ConfigError("--rounds, --episodes, --width and --epochs must be at least 1.")
        task, base, env = ln.setup(args.task, args.base)
        ln.check_label_arguments(args, env)
        save = None if args.save is None else Path(args.save)
        if save is not None and save.exists():
            if not save.is_dir():
                raise ConfigError(f"--save {save} is a file, not a folder.")
            other = sorted(p.name for p in save.iterdir() if p.name not in (dv.AGENT_FILE, dv.NETWORK_FILE))
            if other:
                raise ConfigError(
                    f"--save {save} holds other files ({', '.join(other)}): give a new or an agent's folder."
                )
        train = task.train_seeds
        if not 0 <= args.select_seeds <= len(train) // 2:
            raise ConfigError(f"--select-seeds must be between 0 and {len(train) // 2}, got {args.select_seeds}.")
        last = train.stop - args.select_seeds  # the selection's training seeds begin here
        if not train.start <= args.seed <= last - (args.rounds + 1) * args.episodes:
            raise ConfigError(
                f"--seed must leave the {(args.rounds + 1) * args.episodes} episodes of all rounds within "
                f"the task's training seeds {train.start}-{last - 1}"
                + (f" (from {last} on they select: --select-seeds {args.select_seeds})." if args.select_seeds else ".")
            )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.process_time()
    metric, lower = task.metric, task.lower_is_better
    sign = 1.0 if lower else -1.0
    round_seeds = [
        smoke.seeds(list(range(args.seed + r * args.episodes, args.seed + (r + 1) * args.episodes)))
        for r in range(args.rounds + 1)
    ]
    eval_seeds = smoke.seeds(list(task.eval_seeds) + list(train[len(train) - args.select_seeds :]))
    test_seeds = smoke.seeds(list(task.test_seeds))
    base_eval, _ = closed_loop(env, base, eval_seeds, args.width, metric, None)
    ref = statistics.fmean(base_eval)
    extra = eval_seeds[len(task.eval_seeds) :]
    print(
        f"task {task.name}, base {base}, width {args.width}; {metric} on evaluation seeds "
        f"{eval_seeds[0]}-{eval_seeds[min(len(eval_seeds), len(task.eval_seeds)) - 1]}"
        + (f" and training seeds {extra[0]}-{extra[-1]}" if extra else "")
        + f": {base} in the seat {_fig(ref)}",
        flush=True,
    )
    best: tuple[float, int, float] | None = None
    predictors: list[dv.NetPredictor] = []
    for r, (new, predict, scale) in enumerate(
        rounds(
            *(env, base, round_seeds, args.width, metric, lower, rollout_margins, args.seed, args.epochs),
            *(args.sampled, args.every),
        )
    ):
        predictors.append(predict)
        off = np.mean([d.off for d in new])
        gain = statistics.fmean(float(d.advantages.min()) for d in new)
        print(
            f"round {r}: seeds {round_seeds[r][0]}-{round_seeds[r][-1]}, {len(new)} decisions "
            f"({off:.0%} after a deviation), mean best advantage {_fig(sign * gain, '+')}, unit {_fig(scale)}; "
            f"{time.process_time() - start:,.0f} CPU-s so far",
            flush=True,
        )
        for m in margins:
            values, dev = closed_loop(env, base, eval_seeds, args.width, metric, dv.deviation(predict, m))
            mean = statistics.fmean(values)
            print(f"  margin {m:g}: {_fig(mean)} ({mean / ref - 1:+.1%} vs {base}), deviating at {dev:.1%}", flush=True)
            if best is None or sign * mean < sign * best[0]:
                best = (mean, r, m)
    assert best is not None
    mean, r, m = best
    if not sign * mean < sign * ref:
        print(f"no round and margin beat {base} in the seat on the evaluation seeds: the run's policy is {base}")
        print(f"{(time.process_time() - start) / 60:,.1f} CPU-min")
        return 0
    if save is not None:
        record = {
            "task": task.name,
            "round": r,
            "unit": scale,
            "evaluation": {"seeds": eval_seeds, metric: mean, base: ref},
            "command": " ".join(["python", "benchmarks/dagger.py", *(sys.argv[1:] if argv is None else argv)]),
            "commit": git_commit(),
        }
        dv.save(save, predictors[r].net, base, args.width, m, env.slots, record)
        print(f"saved round {r} at margin {m:g} to {save}", flush=True)
    base_test, _ = closed_loop(env, base, test_seeds, args.width, metric, None)
    test, dev = closed_loop(env, base, test_seeds, args.width, metric, dv.deviation(predictors[r], m))
    diff, ci = paired(test, base_test)
    half = "n/a" if ci is None else _fig(ci)
    print(
        f"test seeds {test_seeds[0]}-{test_seeds[-1]}, round {r} at margin {m:g} (best on evaluation): "
        f"{_fig(statistics.fmean(test))} vs {base} {_fig(statistics.fmean(base_test))}, paired difference "
        f"{_fig(diff, '+')} +- {half} ({diff / statistics.fmean(base_test):+.2%}), deviating at {dev:.1%}"
    )
    print(f"{(time.process_time() - start) / 60:,.1f} CPU-min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
