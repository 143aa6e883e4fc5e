#!/usr/bin/env python3
"""MaskablePPO training speed of the ordering agent on ``default`` in train.py's env (its
components and job slots): env steps per second of ``learn``, rollouts and updates included,
beside SB3's own ``MlpPolicy`` on a toy env of the same observation and action sizes (the
reference: what SB3 costs alone; it calibrates this machine) and our slot network on that toy env
(what the network costs alone).

    python benchmarks/train_speed.py [--steps 8192] [--n-envs 4] [--repeat 2] [--processes 2] [--check]

Every row prints its ratio to SB3's ``MlpPolicy`` on the toy env, measured in the same run (each
timing of a row paired with one of the reference just before it; the median ratio over
``--repeat`` pairs in each of ``--processes`` fresh processes, as in env_speed.py), and its target
ratio (issue 21: the ordering agent on ``default`` at least 0.30). ``--check`` exits
with status 1 when a ratio is below its target. torch runs on one thread, as train.py does;
steps/s are per CPU second of this process (steadier than wall time on a shared machine, the
same on an idle one).

It also splits the ordering run's time between the env (``step``, ``reset`` and
``action_masks``) and the rest (the network, rollout buffer and updates), and prints two upper
bounds that follow from the split: the rate with a free learner (the env alone), and the rate if
the env and the learner overlapped perfectly on the two cores (the slower of the two alone).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import DummyVecEnv

import envs  # noqa: F401
from agents.dual import TrainConfig
from agents.networks import SlotPolicy, ordering_policy_kwargs
from benchmarks.env_speed import Samples, Toy, add_sampling_arguments, paired, report, rows_from, sampled

REFERENCE = "toy, SB3 MlpPolicy"
ORDERING = "ordering, default"
TARGETS = {ORDERING: 0.30}


class Timed(gym.Wrapper):
    """Adds the wall time spent in the env (``step``, ``reset``, ``action_masks``) to ``clock[0]``."""

    def __init__(self, env: gym.Env, clock: list[float]) -> None:
        super().__init__(env)
        self.clock = clock

    def _timed(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        self.clock[0] += time.process_time() - t0
        return out

    def step(self, action):  # type: ignore[no-untyped-def]
        return self._timed(self.env.step, action)

    def reset(self, **kwargs):  # type: ignore[no-untyped-def]
        return self._timed(self.env.reset, **kwargs)

    def action_masks(self):  # type: ignore[no-untyped-def]
        return self._timed(self.env.unwrapped.action_masks)  # type: ignore[attr-defined]


def rate(make_env, steps: int, n_envs: int, slots: bool = True, clock: list[float] | None = None) -> float:  # type: ignore[no-untyped-def]
    """Steps/s of ``learn`` with train.py's hyper-parameters; ``slots=False``: SB3's own
    ``MlpPolicy`` instead of the slot network (the issue's reference figure is for that).
    ``clock``: a one-element list that receives the env's share of the timed seconds."""
    c = TrainConfig()
    spent = [0.0]
    venv = DummyVecEnv([lambda: Timed(make_env(), spent) for _ in range(n_envs)])
    model = MaskablePPO(
        SlotPolicy if slots else "MlpPolicy",
        venv,
        learning_rate=c.learning_rate,
        n_steps=c.n_steps,
        batch_size=c.batch_size,
        n_epochs=c.n_epochs,
        policy_kwargs=ordering_policy_kwargs(c.max_jobs, c.hidden, c.activation) if slots else None,
        seed=0,
        device="cpu",
    )
    model.learn(c.n_steps * n_envs)  # warm-up: the first episodes and torch's first calls
    spent[0] = 0.0
    t0 = time.process_time()
    model.learn(steps, reset_num_timesteps=False)
    elapsed = time.process_time() - t0
    if clock is not None:
        clock[0] = spent[0] / elapsed
    return steps / elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8192)
    p.add_argument("--n-envs", type=int, default=4)
    add_sampling_arguments(p, repeat=2, processes=2)
    p.add_argument("--check", action="store_true", help="exit with status 1 if a ratio is below its target")
    args = p.parse_args()
    if args.n_envs < 1:
        p.error(f"--n-envs must be at least 1, got {args.n_envs}")
    th.set_num_threads(1)
    c = TrainConfig()  # train.py's env: its components and job slots

    def ordering() -> gym.Env:
        return gym.make("loangym/Ordering-v1", max_jobs=c.max_jobs, seeds=c.train_seeds, **c.core_kwargs())

    def measure() -> Samples:
        probe: Any = ordering()
        obs_dim, n = probe.observation_space.shape[0], probe.action_space.n
        share: list[float] = []  # the env's share of each ordering run

        def timed_ordering() -> float:
            clock = [0.0]
            r = rate(ordering, args.steps, args.n_envs, True, clock)
            share.append(clock[0])
            return r

        runs = {
            REFERENCE: lambda: rate(lambda: Toy(obs_dim, n), args.steps, args.n_envs, slots=False),
            "toy, slot network": lambda: rate(lambda: Toy(obs_dim, n), args.steps, args.n_envs),
            ORDERING: timed_ordering,
        }
        samples = paired(runs, REFERENCE, args.repeat)
        samples[ORDERING]["share"] = share
        return samples

    samples = sampled(p, args, measure)
    if samples is None:
        return 0
    note = (
        f"(median ratio to {REFERENCE} timed just before; "
        f"{args.processes} processes x {args.repeat} x {args.steps}, {args.n_envs} envs)"
    )
    status = report(rows_from(samples, TARGETS), "steps/s", args.check, note)
    r, env = statistics.median(samples[ORDERING]["rate"]), statistics.median(samples[ORDERING]["share"])
    print(
        f"ordering: env {env:.0%} of the time; bounds: free learner {r / env:,.0f} steps/s, "
        f"env and learner overlapped on 2 cores {r / max(env, 1.0 - env):,.0f} steps/s"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
