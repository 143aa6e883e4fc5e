#!/usr/bin/env python3
"""Raw env speed: steps/s with random masked actions on ``default``, per env, beside a toy env of
the same observation and action sizes (the reference: what Gymnasium + numpy cost alone).

    python benchmarks/env_speed.py [--steps 20000] [--repeat 3] [--processes 3] [--check]
    python benchmarks/env_speed.py --profile ordering|plain|placement|dual [--steps 5000]

Every row prints its ratio to the toy env measured in the same run (absolute speeds swing 2.5-3x
from day to day on a shared machine; the ratio holds), and its target ratio (issue 21): ordering
0.05, ordering with FIFO's components 0.10, placement 0.02, dual 0.05. The toy env's own speed
drifts within a process and differs between fresh processes by as much as 1.6x, so each timing of
a row is paired with a timing of the toy env just before it, and the ratio printed is the median
of those pairs' ratios over ``--repeat`` pairs in each of ``--processes`` fresh processes (the
rates printed are medians too). ``--check`` exits with
status 1 when a ratio is below its target. Steps/s count env.step calls per CPU second of this
process (steadier than wall time on a shared machine, the same on an idle one; episode resets are
included: they are part of a training run's cost), after an untimed warm-up of each env (first-call
costs such as numba's compile are not timed). ``--profile ENV`` prints the top
functions by own time, in microseconds per env step (cProfile; its overhead included).

The row "ordering, plain" is the ordering env with FIFO's components in the seats no agent
controls (no elastic scaling, no room-making preemption): the cost of the simulator, the
observation and Gymnasium alone, a ceiling for any choice of heuristic components.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym
import numpy as np

import envs  # noqa: F401
from envs.dual import DualEnv

REFERENCE = "toy (reference)"
WARM_UP = 300  # untimed steps of each env before the timed ones
TARGETS = {"ordering": 0.05, "ordering, plain": 0.10, "placement": 0.02, "dual (AEC)": 0.05}


@dataclass(frozen=True)
class Row:
    """One benchmark row: its rate, its ratio to its reference (measured in the same run) and
    the least ratio it should reach (None: no target)."""

    name: str
    rate: float
    ratio: float
    target: float | None = None

    @property
    def missed(self) -> bool:
        return self.target is not None and not self.ratio >= self.target


Samples = dict[str, dict[str, list[float]]]
"""per row, lists of figures by name: ``rate``, and ``ratio`` (to the reference timed just before)"""


def paired(runs: Mapping[str, Callable[[], float]], reference: str, repeat: int) -> Samples:
    """Time every row ``repeat`` times, each time right after a timing of ``reference`` (its ratio
    is to that timing): a drift of the machine's or the process's speed then moves both alike."""
    out: Samples = {name: {"rate": [], "ratio": []} for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            ref = runs[reference]()
            rate = ref if name == reference else fn()
            out[name]["rate"].append(rate)
            out[name]["ratio"].append(rate / ref)
    return out


def in_processes(argv: list[str], processes: int, measure: Callable[[], Samples]) -> Samples:
    """``measure()`` here when ``processes`` is 1; else the pooled samples of ``processes`` fresh
    runs of this script (``argv`` with ``--processes 1 --samples``), one after another (a child's
    errors reach this process's stderr, and its failure stops the run)."""
    if processes == 1:
        return measure()
    pooled: Samples = {}
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, argv[0], *argv[1:], "--processes", "1", "--samples"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        for name, figures in json.loads(out.splitlines()[-1]).items():
            for key, values in figures.items():
                pooled.setdefault(name, {}).setdefault(key, []).extend(values)
    return pooled


def rows_from(samples: Samples, targets: Mapping[str, float]) -> list[Row]:
    """Each row's median rate and median paired ratio."""
    return [
        Row(name, statistics.median(s["rate"]), statistics.median(s["ratio"]), targets.get(name))
        for name, s in samples.items()
    ]


def add_sampling_arguments(p: argparse.ArgumentParser, repeat: int, processes: int) -> None:
    p.add_argument("--repeat", type=int, default=repeat, help="paired timings of each row per process")
    p.add_argument("--processes", type=int, default=processes, help="fresh processes whose timings are pooled")
    p.add_argument("--samples", action="store_true", help=argparse.SUPPRESS)  # a child: print the samples as JSON


def sampled(p: argparse.ArgumentParser, args: argparse.Namespace, measure: Callable[[], Samples]) -> Samples | None:
    """The pooled samples; None in a child process, which has printed its own (``--samples``).
    ``args.steps`` and the sampling arguments must be positive (else the usage error, exit 2)."""
    for flag in ("steps", "repeat", "processes"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    samples = in_processes(sys.argv, args.processes, measure)
    if args.samples:
        print(json.dumps(samples))
        return None
    return samples


def report(rows: list[Row], unit: str, check: bool, note: str = "") -> int:
    """Print the rows (rate, ratio, target); the exit status: 1 if ``check`` and a ratio is below
    its target, else 0."""
    print(f"{'':20} {unit:>10} {'ratio':>7} {'target':>7}  {note}")
    for row in rows:
        target = f"{row.target:7.3f}" if row.target is not None else f"{'-':>7}"
        flag = "  BELOW TARGET" if row.missed else ""
        print(f"{row.name:20} {row.rate:10,.0f} {row.ratio:7.3f} {target}{flag}")
    missed = [row for row in rows if row.missed]
    if check and missed:
        names = ", ".join(f"{r.name} ({r.ratio:.3f} < {r.target:g})" for r in missed)
        print(f"check failed: {len(missed)} ratio(s) below target: {names}")
        return 1
    return 0


def profile_per_step(fn: Callable[[], object], steps: int, top: int = 25) -> None:
    """Run ``fn`` under cProfile; print the top functions by own time, in microseconds per step."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof)
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    total = sum(v[2] for _, v in entries)
    print(f"{total / steps * 1e6:,.0f} us of own time per step in all; top {top} by own time:")
    print(f"{'us/step':>9} {'calls/step':>10} {'cum us/step':>11}  function")
    for (file, line, func), (_cc, nc, tt, ct, _callers) in entries[:top]:
        where = f"{Path(file).name}:{line}({func})" if line else func
        print(f"{tt / steps * 1e6:9.1f} {nc / steps:10.2f} {ct / steps * 1e6:11.1f}  {where}")


class Toy(gym.Env):
    """Same spaces as the ordering env, trivial dynamics."""

    def __init__(self, obs_dim: int, n: int) -> None:
        self._shape = (obs_dim,)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, self._shape, np.float32)
        self.action_space = gym.spaces.Discrete(n)
        self._mask = np.ones(n, dtype=bool)
        self._t = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(self._shape, np.float32), {"action_mask": self._mask.copy()}

    def step(self, action):  # type: ignore[no-untyped-def]
        self._t += 1
        obs = self.np_random.random(self._shape, dtype=np.float32)
        return obs, 0.0, self._t >= 600, False, {"action_mask": self._mask.copy()}

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()


def gym_rate(env: Any, steps: int) -> float:
    """Steps/s of ``env`` (a Gymnasium env with ``action_masks``) under random valid actions."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.process_time()
    for _ in range(steps):
        a = rng.choice(np.flatnonzero(env.action_masks()))
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    return steps / (time.process_time() - t0)


def dual_rate(steps: int) -> float:
    env = DualEnv()
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.process_time()
    for _ in range(steps):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.reset()
            continue
        mask = env.observe(agent)["action_mask"]
        env.step(int(rng.choice(np.flatnonzero(mask))))
    return steps / (time.process_time() - t0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000)
    add_sampling_arguments(p, repeat=3, processes=3)
    p.add_argument("--check", action="store_true", help="exit with status 1 if a ratio is below its target")
    p.add_argument("--profile", choices=("ordering", "plain", "placement", "dual"), default=None)
    args = p.parse_args()

    def runs() -> dict[str, Callable[[], float]]:
        """The rows' timings, each env warmed up (first-call costs such as numba's compile or cache
        load, imports and caches are paid here, not timed)."""
        ordering: Any = gym.make("loangym/Ordering-v1").unwrapped
        placement = gym.make("loangym/Placement-v1").unwrapped
        plain = gym.make(
            "loangym/Ordering-v1", placement="fifo", scaling="fifo", reclaim="fifo", preemption=None
        ).unwrapped
        toy = Toy(ordering.observation_space.shape[0], ordering.action_space.n)
        for env in (ordering, plain, placement):
            gym_rate(env, WARM_UP)
        dual_rate(WARM_UP)
        return {
            REFERENCE: lambda: gym_rate(toy, args.steps),
            "ordering": lambda: gym_rate(ordering, args.steps),
            "ordering, plain": lambda: gym_rate(plain, args.steps),
            "placement": lambda: gym_rate(placement, args.steps),
            "dual (AEC)": lambda: dual_rate(args.steps),
        }

    if args.profile:
        name = {"plain": "ordering, plain", "dual": "dual (AEC)"}.get(args.profile, args.profile)
        profile_per_step(runs()[name], args.steps)
        return 0
    samples = sampled(p, args, lambda: paired(runs(), REFERENCE, args.repeat))
    if samples is None:
        return 0
    note = (
        f"(median ratio to the toy env timed just before; "
        f"{args.processes} processes x {args.repeat} x {args.steps} steps)"
    )
    return report(rows_from(samples, TARGETS), "steps/s", args.check, note)


if __name__ == "__main__":
    sys.exit(main())
