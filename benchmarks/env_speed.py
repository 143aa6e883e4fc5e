#!/usr/bin/env python3
"""Raw env speed: steps/s with random masked actions on ``default``, per env, beside a toy env of
the same observation and action sizes (the reference: what Gymnasium + numpy cost alone).

    python benchmarks/env_speed.py [--steps 20000] [--repeat 3] [--profile ordering]

Target: the ordering env >= 10,000 steps/s on one core. Steps/s count env.step calls (episode
resets are included in the time: they are part of a training run's cost).

The row "ordering, plain" is the ordering env with FIFO's components in the seats no agent
controls (no elastic scaling, no room-making preemption): the cost of the simulator, the
observation and Gymnasium alone, a ceiling for any choice of heuristic components.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym
import numpy as np

import envs  # noqa: F401
from envs.dual import DualEnv

TARGET = 10_000.0


class Toy(gym.Env):
    """Same spaces as the ordering env, trivial dynamics."""

    def __init__(self, obs_dim: int, n: int) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(n)
        self._mask = np.ones(n, dtype=bool)
        self._t = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(self.observation_space.shape, np.float32), {"action_mask": self._mask.copy()}

    def step(self, action):  # type: ignore[no-untyped-def]
        self._t += 1
        obs = self.np_random.random(self.observation_space.shape, dtype=np.float32)
        return obs, 0.0, self._t >= 600, False, {"action_mask": self._mask.copy()}

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()


def gym_rate(env: gym.Env, steps: int) -> float:
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        a = rng.choice(np.flatnonzero(env.action_masks()))
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    return steps / (time.perf_counter() - t0)


def dual_rate(steps: int) -> float:
    env = DualEnv()
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.reset()
            continue
        mask = env.observe(agent)["action_mask"]
        env.step(int(rng.choice(np.flatnonzero(mask))))
    return steps / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", choices=("ordering", "placement"), default=None)
    args = p.parse_args()
    ordering = gym.make("loangym/Ordering-v1").unwrapped
    placement = gym.make("loangym/Placement-v1").unwrapped
    plain = gym.make("loangym/Ordering-v1", placement="fifo", scaling="fifo", reclaim="fifo", preemption=None).unwrapped
    if args.profile:
        env = ordering if args.profile == "ordering" else placement
        prof = cProfile.Profile()
        prof.enable()
        gym_rate(env, args.steps)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    toy = Toy(ordering.observation_space.shape[0], ordering.action_space.n)
    runs = {
        "toy (reference)": lambda: gym_rate(toy, args.steps),
        "ordering": lambda: gym_rate(ordering, args.steps),
        "ordering, plain": lambda: gym_rate(plain, args.steps),
        "placement": lambda: gym_rate(placement, args.steps),
        "dual (AEC)": lambda: dual_rate(args.steps),
    }
    rates = {name: statistics.median(fn() for _ in range(args.repeat)) for name, fn in runs.items()}
    ref = rates["toy (reference)"]
    print(f"{'env':16} {'steps/s':>9} {'vs toy':>7}  (median of {args.repeat} x {args.steps} steps, default scenario)")
    for name, r in rates.items():
        print(f"{name:16} {r:9,.0f} {r / ref:7.2f}")
    print(
        f"ordering vs target {TARGET:,.0f}: {rates['ordering'] / TARGET:.2f} "
        f"(plain components: {rates['ordering, plain'] / TARGET:.2f})"
    )


if __name__ == "__main__":
    main()
