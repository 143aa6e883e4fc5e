#!/usr/bin/env python3
"""Shockwave's fairness figures on ``dynamic``, as our metrics give them and as Shockwave's
repository would compute them from the same runs.

    .venv/bin/python benchmarks/shockwave_fairness.py [--policies shockwave,themis] [--seeds 0-4] [--workers 2]
        [--set key=value ...]

A policy may carry its settings as ``NAME:KEY=VALUE[;KEY=VALUE]``: ``--policies
"shockwave,themis:allocation=shares"`` runs Themis as the repository runs it. ``--policy`` (once
per policy, instead of ``--policies``) takes one such policy whose values may hold commas (a
tuple setting): ``--policy "shockwave:log_approx=chord;log_points=0,0.2,0.4,0.6,0.8,1"``.

Per policy, means over the seeds of the run-wide finish-time fairness (``worst_ftf_run``,
``unfair_fraction_run``: rho = JCT / (isolated duration x max(1, jobs / GPUs)), the figure of the
repository's ``Scheduler.get_finish_time_fairness``), then the same with the repository's
isolated durations, the mean rho of the unfair jobs (how late they are, over all seeds' unfair
jobs), then the unfair share by isolated-duration quartile.

The repository's isolated duration of a job is the sum of its profiled epoch times
(``utils.get_accordion_bs_pattern``): an Accordion job keeps its initial batch for the first 30%
of its epochs there, while its simulated run (``Scheduler._simulate_accordion``) leaves the small
batch after its model's own first critical regime (10-40 epochs). So its Accordion jobs run
faster than the duration their rho divides by. Column "repo denominator" re-computes rho with
that duration: our Accordion job's first critical regime widened to 30% of the work, everything
else as is (``repo_isolated``). Every figure is reproducible (no wall-clock figure).

The repository's 120-job trace is lighter than its generator's GPU mix (0.6/0.3/0.09/0.01 of
1/2/4/8 GPUs): it has 92, 20, 8 and 0 jobs. To run with that mix and the same arrivals::

    --set workload.load=0 --set workload.synthetic.arrival_rate_per_hour=90 \
    --set "workload.synthetic.gpu_demand=1:0.7667;2:0.1667;4:0.0666"
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import smoke
from envs.sim import scenarios
from envs.sim.config import ConfigError, parse_sets
from envs.sim.model import JobSpec
from envs.sim.scenarios.dynamic import isolated_factor
from heuristics.registry import make

UNFAIR = 1.05  # the repository's aggregate_result.py: rho > 1.05 is unfair
PROFILE_CRITICAL = 0.3  # the repository's profile: Accordion's first 30% of epochs at the initial batch


def repo_isolated(job: JobSpec) -> float:
    """The job's isolated duration as the repository's profile has it (module docstring). An
    Accordion job is the one whose phases go b0, b_max, b0, ... (GNS phases only grow)."""
    ph = job.speed_phases
    accordion = len(ph) >= 3 and ph[0][1] == 1.0 and ph[1][1] > 1.0 and ph[2][1] == 1.0
    if not accordion or ph[1][0] >= PROFILE_CRITICAL:
        return job.duration
    drawn = job.duration / isolated_factor(ph)
    return drawn * isolated_factor(((0.0, 1.0), (PROFILE_CRITICAL, ph[1][1]), *ph[2:]))


def policy_of(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:KEY=VALUE;KEY=VALUE`` -> (name, settings)."""
    name, _, rest = text.partition(":")
    return name, parse_sets([kv for kv in rest.split(";") if kv]) if rest else {}


def run(policy: str, seed: int, sets: dict[str, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rho over our isolated durations, rho over the repository's, and our isolated durations."""
    sc = scenarios.get("dynamic", sets)
    built = scenarios.build(sc, seed)
    result = scenarios.simulate(sc, make(*policy_of(policy)), seed)
    gpus = sum(s.num_gpus for s in built.servers)
    contention = max(1.0, len(built.jobs) / gpus)
    jct = np.asarray(result.finish) - np.asarray(result.submit)
    ours = np.array([j.duration for j in built.jobs])
    repo = np.array([repo_isolated(j) for j in built.jobs])
    return jct / (ours * contention), jct / (repo * contention), ours


def figures(rhos: list[np.ndarray]) -> str:
    """Worst rho and unfair share, each a mean over the seeds."""
    return f"{np.mean([r.max() for r in rhos]):9.2f} {np.mean([np.mean(r > UNFAIR) for r in rhos]):7.3f}"


def seeds_arg(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", default="shockwave,themis")
    p.add_argument(
        "--policy", dest="policy", action="append", default=[], help="one policy (repeat; replaces --policies)"
    )
    p.add_argument("--seeds", default="0-4", help="a seed or a range lo-hi")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--set", dest="sets", action="append", default=[], help="scenario override key=value")
    args = p.parse_args()
    try:
        policies, seeds, sets = (
            args.policy or args.policies.split(","),
            smoke.seeds(seeds_arg(args.seeds)),
            smoke.sets(parse_sets(args.sets)),
        )
        scenarios.get("dynamic", sets)
        for pol in policies:
            make(*policy_of(pol))
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tasks = [(pol, s, sets) for pol in policies for s in seeds]
    with ProcessPoolExecutor(smoke.count(args.workers, smoke.WORKERS)) as pool:
        runs = dict(zip([t[:2] for t in tasks], pool.map(run, *zip(*tasks, strict=True)), strict=True))
    where = "".join(f", {k}={v}" for k, v in sets.items())
    print(f"dynamic{where}, seeds {args.seeds}: means over seeds; unfair = share of jobs with rho > {UNFAIR}")
    width = max(12, *(len(p) for p in policies))
    print(
        f"{'policy':{width}} {'worst rho':>9} {'unfair':>7} | {'repo denominator':>24} | {'unfair rho':>10} | "
        "unfair by duration quartile"
    )
    for pol in policies:
        ours, repo = ([runs[pol, s][k] for s in seeds] for k in (0, 1))
        rho, dur = np.concatenate(ours), np.concatenate([runs[pol, s][2] for s in seeds])
        quart = np.searchsorted(np.quantile(dur, [0.25, 0.5, 0.75]), dur, side="right")
        by_q = " ".join(f"{np.mean(rho[quart == q] > UNFAIR):.2f}" for q in range(4))
        late = rho[rho > UNFAIR]
        late_rho = late.mean() if late.size else 1.0
        print(f"{pol:{width}} {figures(ours)} | {'':8} {figures(repo)} | {late_rho:10.2f} | {by_q}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
