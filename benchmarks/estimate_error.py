#!/usr/bin/env python3
"""How much do the duration-planning policies lose when durations are only estimated? (Aryl §7.5)

    python benchmarks/estimate_error.py [--scenario loaning] [--seeds 0-4] [--workers 2]
        [--policies sjf,aryl,afs,mlfs] [--sigmas 0,0.25,0.5,1,2] [--json PATH]

Runs every policy at ``information.level=clairvoyant`` and at ``estimate`` with each sigma of the
log-normal estimate error (``envs/sim/information.py``), and at ``none`` where the policy acts
there (the others refuse it: their cell says so). Prints each one's mean average JCT over the
seeds and its ratio to the same policy's clairvoyant figure (above 1: slower). Sigma 0 is an
estimate without error, so its ratio must be exactly 1.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import evaluation as ev
from agents import smoke
from envs.sim.config import ConfigError
from heuristics import registry


def settings(sigmas: list[float]) -> list[tuple[str, dict[str, str]]]:
    """(column label, scenario settings) in the order printed."""
    out = [("clairvoyant", {"information.level": "clairvoyant"})]
    out += [(f"sigma {s:g}", {"information.level": "estimate", "information.sigma": f"{s:g}"}) for s in sigmas]
    return [*out, ("none", {"information.level": "none"})]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="loaning")
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--workers", type=int, default=ev.default_workers())
    p.add_argument("--policies", default="sjf,aryl,afs,mlfs")
    p.add_argument("--sigmas", default="0,0.25,0.5,1,2")
    p.add_argument("--json", type=Path, default=None, help="also write the table as JSON")
    args = p.parse_args(argv)
    try:
        seeds = smoke.seeds(ev.parse_seeds(args.seeds))
        policies = ev.parse_names(args.policies, "policies")
        sigmas = [float(x) for x in args.sigmas.split(",") if x.strip()]
        columns = [(label, smoke.sets(sets)) for label, sets in settings(sigmas)]
        tasks, skipped = [], set()
        for label, sets in columns:
            for policy in policies:
                if label == "none" and registry.entry(policy).needs != "none":
                    skipped.add(policy)
                    continue
                tasks += ev.plan([policy], [args.scenario], seeds, [sets])
    except (ConfigError, ValueError) as e:
        print(f"error: {e}")
        return 2
    results = ev.execute(tasks, workers=smoke.count(args.workers, smoke.WORKERS))
    jct: dict[tuple[str, str], list[float]] = {}
    label_of = {json.dumps(s, sort_keys=True): label for label, s in columns}
    for r in results:
        label = label_of[json.dumps(dict(r.task.scenario_sets), sort_keys=True)]
        jct.setdefault((r.task.policy, label), []).append(r.metrics["avg_jct_s"])
    rows = []
    print(
        f"avg JCT (s) on {args.scenario}, mean over seeds {args.seeds}; (x) = ratio to the policy's clairvoyant figure"
    )
    print("policy".ljust(10) + "".join(label.rjust(18) for label, _ in columns))
    for policy in policies:
        ref = math.fsum(jct[(policy, "clairvoyant")]) / len(seeds)
        cells, row = [], {"policy": policy}
        for label, _ in columns:
            if (policy, label) not in jct:
                cells.append("needs durations".rjust(18))
                row[label] = None
                continue
            mean = math.fsum(jct[(policy, label)]) / len(seeds)
            cells.append(f"{mean:,.0f} ({mean / ref:.3f})".rjust(18))
            row[label] = {"avg_jct_s": mean, "ratio": mean / ref}
        print(policy.ljust(10) + "".join(cells))
        rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
