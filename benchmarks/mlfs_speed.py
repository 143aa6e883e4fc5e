#!/usr/bin/env python3
"""MLFS's decision overhead at the paper's real-experiment scale: 1,860 jobs on 80 GPUs.

    python benchmarks/mlfs_speed.py [--seed 0] [--repeat 3] [--policies mlfs,mlfs-noctl,tiresias]

Runs each policy on the ``deadline`` scenario (10 servers x 8 V100, 1,860 jobs; its ML features
added by the scenario's ``make_jobs``, through ``scenarios.build`` when ``scenarios/base.py`` has
the hook, else here with the stream the hook uses) and prints, per policy, the wall-clock time
of one scheduling decision (the engine's ``decision_ms``: mean, p50, p99, max; the median over
repeats of each), the number of decisions and of actions taken, the run's wall time, and the
ratio of the mean to the target (<= 10 ms) and to the paper's 54 ms per decision.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from envs.sim import scenarios
from envs.sim.engine import Engine
from envs.sim.model import JobSpec
from heuristics.registry import make

TARGET_MS = 10.0
PAPER_MS = 54.0


def deadline_jobs(seed: int) -> tuple[scenarios.Built, list[JobSpec]]:
    s = scenarios.get("deadline")
    built = scenarios.build(s, seed)
    jobs = built.jobs
    if jobs and jobs[0].curve is None:  # no make_jobs hook in scenarios/base.py yet
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(7)[6])
        jobs = s.make_jobs(jobs, rng)  # type: ignore[attr-defined]
    return built, jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", default="mlfs,mlfs-noctl,tiresias")
    args = ap.parse_args()
    built, jobs = deadline_jobs(args.seed)
    gpus = sum(s.num_gpus for s in built.servers)
    print(f"deadline scenario, seed {args.seed}: {len(jobs)} jobs on {gpus} GPUs; median of {args.repeat} runs")
    header = f"{'policy':<12}{'decisions':>10}{'mean ms':>9}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'run s':>8}"
    print(header + f"{'vs 10 ms':>10}{'vs 54 ms':>10}")
    sim = built.scenario.sim
    for name in args.policies.split(","):
        stats: list[tuple[float, float, float, float, float]] = []
        n = 0
        for _ in range(args.repeat):
            engine = Engine(built.servers, jobs, make(name), scenarios.shared_throughput(), built.demand, sim)
            t0 = time.perf_counter()
            r = engine.run()
            wall = time.perf_counter() - t0
            d = r.decision_ms
            n = d.size
            stats.append((float(d.mean()), float(np.median(d)), float(np.percentile(d, 99)), float(d.max()), wall))
        mean, p50, p99, top, wall = (statistics.median(x) for x in zip(*stats, strict=True))
        print(
            f"{name:<12}{n:>10}{mean:>9.3f}{p50:>8.3f}{p99:>8.2f}{top:>8.1f}{wall:>8.1f}"
            f"{mean / TARGET_MS:>10.3f}{mean / PAPER_MS:>10.3f}"
        )


if __name__ == "__main__":
    main()
