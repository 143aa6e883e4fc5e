#!/usr/bin/env python3
"""Which seat of a trained pair wins or loses: a run's agents one seat at a time, beside a
heuristic ordering in the ordering seat, all with the run's components, on the same seeds.

    python benchmarks/agent_seats.py runs/default__dual__0__20261129-120000 [--seeds 100000-100009] [--ordering sjf]

Prints the mean avg JCT over the seeds of: agent + agent, agent ordering + the run's placement
heuristic, heuristic ordering + agent placement, heuristic ordering + placement heuristic.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import evaluation as ev
from agents.partners import run_episode
from agents.rundir import load_config
from agents.trained import AGENT_PREFIX, load_agent, load_models
from envs.sim.config import ConfigError


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a train.py run folder")
    p.add_argument("--seeds", default="100000-100009", help="scenario seeds (default: train.py's eval seeds)")
    p.add_argument("--ordering", default="sjf", help="heuristic ordering to compare with")
    args = p.parse_args()
    try:
        agent = load_agent(AGENT_PREFIX + args.run)
        seeds = ev.parse_seeds(args.seeds)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    config = load_config(Path(args.run))
    core = config.core_config()
    ordering, placement = load_models(agent, None)
    print(f"{args.run} on {config.scenario}, seeds {args.seeds}; components: {config.placement} (placement heuristic)")
    for name, o, pl in (
        ("agent ordering + agent placement", ordering, placement),
        ("agent ordering + placement heuristic", ordering, None),
        (f"{args.ordering} ordering + agent placement", args.ordering, placement),
        (f"{args.ordering} ordering + placement heuristic", args.ordering, None),
    ):
        jct = statistics.mean(run_episode(core, s, o, pl, config.max_jobs)["avg_jct_s"] for s in seeds)
        print(f"  {name:48} avg JCT {jct:10,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
