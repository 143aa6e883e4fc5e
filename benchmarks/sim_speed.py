#!/usr/bin/env python3
"""Simulator speed on a Philly-scale synthetic workload: 117k jobs over 75 days on 2,474 GPUs.

    python benchmarks/sim_speed.py [--jobs 117000] [--repeat 3] [--profile fifo]

Prints, per policy, the median over repeats of jobs/s and events/s of ``Engine.run`` (the
workload is generated once, outside the timing), and the ratio to the targets (fifo >= 20,000
jobs/s; sjf and tiresias >= 5,000 jobs/s, one core). ``--profile NAME`` prints where the time
goes (cProfile, top functions by own time).
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

import numpy as np

from envs.sim.engine import Engine, SimConfig
from envs.sim.model import V100, Pool, ServerSpec
from envs.sim.throughput import ThroughputModel
from envs.sim.workload import AttributeSampler, SyntheticWorkload, build_jobs, generate
from heuristics.registry import make

TARGETS = {"fifo": 20_000.0, "sjf": 5_000.0, "tiresias": 5_000.0}


def philly_cluster() -> list[ServerSpec]:
    """2,474 GPUs: 309 servers of 8 V100s and one of 2."""
    servers = [ServerSpec(i, V100, 8, Pool.TRAINING) for i in range(309)]
    return [*servers, ServerSpec(309, V100, 2, Pool.TRAINING)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=117_000)
    p.add_argument("--days", type=float, default=75.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--policies", default="fifo,sjf,tiresias")
    p.add_argument("--profile", default=None, help="profile one policy instead of timing")
    args = p.parse_args()

    servers = philly_cluster()
    rng = np.random.default_rng(0)
    rows = generate(SyntheticWorkload(num_jobs=args.jobs, duration_days=args.days), rng)
    jobs = build_jobs(rows, AttributeSampler(any_gpu_fraction=0.0), rng, max_gpus_per_job=2474)
    tp = ThroughputModel()
    config = SimConfig()
    print(f"{len(jobs):,} jobs over {args.days:g} days on {sum(s.num_gpus for s in servers):,} GPUs")

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        Engine(servers, jobs, make(args.profile), tp, None, config).run()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return

    print(f"{'policy':10} {'jobs/s':>10} {'events/s':>10} {'target':>8} {'ratio':>6}  (median of {args.repeat})")
    for name in args.policies.split(","):
        rates, evs = [], []
        for _ in range(args.repeat):
            engine = Engine(servers, jobs, make(name), tp, None, config)
            t0 = time.perf_counter()
            r = engine.run()
            dt = time.perf_counter() - t0
            rates.append(len(jobs) / dt)
            evs.append(r.events / dt)
        jps = statistics.median(rates)
        target = TARGETS.get(name, float("nan"))
        print(f"{name:10} {jps:10,.0f} {statistics.median(evs):10,.0f} {target:8,.0f} {jps / target:6.2f}")


if __name__ == "__main__":
    main()
