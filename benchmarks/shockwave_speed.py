#!/usr/bin/env python3
"""Shockwave's planner speed, and the 900-job / 256-GPU run.

    .venv/bin/python benchmarks/shockwave_speed.py            # both parts
    .venv/bin/python benchmarks/shockwave_speed.py --skip-900

Part 1: one re-plan with 120 jobs (the 120 jobs of ``dynamic`` seed 0, all in the system at once,
boosted as in a relaxed plan), solved ``--reps`` times: the median wall time (target <= 2 s),
and the re-plans of a whole ``dynamic`` run. Part 2: ``dynamic`` at Shockwave's largest size
(900 jobs, 32 servers = 256 GPUs): wall time and metrics, with ``themis`` as a reference.
Wall-clock figures depend on the machine; every other figure is reproducible.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.sim import scenarios
from envs.sim.metrics import summarize
from heuristics.registry import make
from heuristics.shockwave import Shockwave, ShockwaveConfig
from heuristics.shockwave_plan import PlanInput, SolverLimits, solve

BIG = {"workload.synthetic.num_jobs": "900", "cluster.training_servers": "32"}
KEYS = (
    "worst_ftf",
    "unfair_fraction",
    "worst_ftf_run",
    "unfair_fraction_run",
    "makespan_s",
    "avg_jct_s",
    "preemptions",
    "utilization_training",
)


def replan_120(reps: int) -> None:
    jobs = scenarios.build(scenarios.get("dynamic"), 0).jobs
    rng = np.random.default_rng(0)
    c = ShockwaveConfig()
    inp = PlanInput(
        gpus=np.array([j.num_gpus for j in jobs]),
        remaining=np.array([j.duration for j in jobs]),
        progress=rng.uniform(0.0, 0.6, len(jobs)),
        weights=np.exp(rng.uniform(0.0, np.log(100.0), len(jobs))),
        capacity=32,
        rounds=c.window_rounds,
        round_s=c.round_s,
        k=c.k,
    )
    limits = SolverLimits(c.time_limit_s, c.node_limit, c.mip_rel_gap, c.max_binaries)
    times, status = [], set()
    for _ in range(reps):
        plan = solve(inp, limits)
        times.append(plan.seconds)
        status.add(plan.status)
    print(
        f"one re-plan, 120 jobs x {c.window_rounds} rounds on 32 GPUs: median {statistics.median(times):.3f} s "
        f"over {reps} solves (min {min(times):.3f}, max {max(times):.3f}; {', '.join(sorted(status))}; target <= 2 s)"
    )
    pol = Shockwave(c)
    t0 = time.perf_counter()
    result = scenarios.simulate(scenarios.get("dynamic"), pol, 0)
    wall = time.perf_counter() - t0
    sec = [p.seconds for p in pol.plans]
    busiest = max(p.jobs for p in pol.plans)
    print(
        f"dynamic seed 0 (120 jobs, 32 GPUs): {len(sec)} re-plans, median {statistics.median(sec):.3f} s, "
        f"max {max(sec):.3f} s, busiest {busiest} jobs; whole run {wall:.1f} s; "
        + ", ".join(f"{k} {summarize(result)[k]:.3f}" for k in KEYS[:3])
    )


def big_run() -> None:
    s = scenarios.get("dynamic", BIG)
    for name in ("shockwave", "themis"):
        pol = make(name)
        t0 = time.perf_counter()
        result = scenarios.simulate(s, pol, 0)
        wall = time.perf_counter() - t0
        m = summarize(result)
        extra = ""
        if isinstance(pol, Shockwave):
            sec = [p.seconds for p in pol.plans]
            extra = (
                f"; {len(sec)} re-plans, median {statistics.median(sec):.3f} s, max {max(sec):.3f} s, "
                f"busiest {max(p.jobs for p in pol.plans)} jobs"
            )
        print(
            f"900 jobs / 256 GPUs, {name}: {m['jobs_finished']}/{m['jobs_total']} finished in {wall:.1f} s wall" + extra
        )
        print("   " + ", ".join(f"{k} {m[k]:.3f}" for k in KEYS))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5, help="solves of the 120-job re-plan")
    p.add_argument("--skip-900", action="store_true", help="only part 1")
    args = p.parse_args()
    replan_120(args.reps)
    if not args.skip_900:
        big_run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
