#!/usr/bin/env python3
"""The benchmark suite's leaderboard: every task of ``agents/tasks.py``, its realistic
heuristics, its oracles and its agents, on the task's held-out test seeds.

    python benchmarks/suite.py [--tasks default,cloud] [--seeds 200000-200009] [--workers 2]
        [--agents ppo:pretrained/cloud,...] [--json PATH] [--markdown PATH] [--check PATH]

Per task it prints each policy's main metric (mean and 95% CI over the seeds), the best
realistic heuristic, the headroom (how much better the best oracle is than it), and for each
agent the paired difference to the best realistic heuristic (mean and 95% CI of the per-seed
difference: the agent beats it where the interval excludes zero on the better side); with two
or more agents (say one recipe trained on several seeds) also the mean over them of both, with
its 95% CI over the runs (``agents over N runs``); ``--json`` also keeps every policy's figure
per seed. Agents
default to ``pretrained/<task>`` where that folder exists. A task is run with the same job set
for every policy (``scenarios.build``), so the per-seed differences are paired.

``--check PATH`` compares every figure of the run, seed by seed, with a leaderboard ``--json``
wrote (``benchmarks/data/suite.json`` is the README's): each figure that differs by more than
1e-9 of itself, or that PATH does not hold, is printed, and the exit status is 1 if any does
(the README's figures are reproduced to the digit where it is 0).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import evaluation as ev
from agents import smoke
from agents import tasks as suite
from agents.deviation import AGENT_FILE
from agents.trained import AGENT_PREFIX, DAGGER_PREFIX
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_write

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    policy: str
    kind: str  # "heuristic", "oracle" or "agent"
    mean: float
    ci95: float | None
    n: int
    diff: float | None = None  # agents: mean per-seed difference to the best heuristic
    diff_ci95: float | None = None


def paired(a: Sequence[float], b: Sequence[float]) -> tuple[float, float | None]:
    """Mean and 95% CI half-width (Student t) of the per-seed differences a - b."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) < 2:
        return float(d.mean()), None
    return _t_interval(d)


def default_agents(task: suite.BenchTask) -> list[str]:
    """``pretrained/<task>`` (or, for a task without training, ``pretrained/contention-none``) where it
    exists, and the deviation agent ``pretrained/<task>-dagger`` where there is one."""
    folder = ROOT / "pretrained" / (task.name if task.trained else "contention-none")
    dagger = ROOT / "pretrained" / f"{task.name}-dagger"
    out = [AGENT_PREFIX + str(folder)] if (folder / "config.yaml").is_file() else []
    return out + ([DAGGER_PREFIX + str(dagger)] if (dagger / AGENT_FILE).is_file() else [])


def run_task(
    task: suite.BenchTask, seeds: Sequence[int], agents: Sequence[str], workers: int, backend: str
) -> tuple[list[Row], dict[str, dict[int, float]]]:
    policies = [*task.heuristics, *task.oracles, *agents]
    plan = ev.plan(policies, [task.scenario], seeds, [smoke.sets(dict(task.sets)) | dict(task.policy_sets)])
    results = ev.execute(plan, backend=backend, workers=smoke.count(workers, smoke.WORKERS))
    per_seed: dict[str, dict[int, float]] = {}
    for r in results:
        value = r.metrics[task.metric]
        if r.metrics["jobs_unfinished"]:
            value = None
        if value is not None:
            per_seed.setdefault(r.task.policy, {})[r.task.seed] = float(value)
    kinds = {p: "heuristic" for p in task.heuristics} | {p: "oracle" for p in task.oracles}
    sign = 1.0 if task.lower_is_better else -1.0
    complete = {p: v for p, v in per_seed.items() if len(v) == len(seeds)}
    best = min((p for p in task.heuristics if p in complete), key=lambda p: sign * np.mean(list(complete[p].values())))
    rows = []
    for r_agg in ev.aggregate(results):
        p = r_agg.policy
        s = r_agg.metrics[task.metric]
        if p not in complete or s.mean is None:
            continue
        kind = kinds.get(p, "agent")
        diff = diff_ci = None
        if kind == "agent":
            diff, diff_ci = paired([complete[p][x] for x in seeds], [complete[best][x] for x in seeds])
        rows.append(Row(p, kind, s.mean, s.ci95, s.n, diff, diff_ci))
    return rows, complete


def over_runs(rows: Sequence[Row]) -> Row | None:
    """The PPO agents (``ppo:RUN``) of one task as independent training runs (e.g. the recipe
    trained on several seeds): the mean of their means, and of their paired differences to the best
    heuristic, each with its 95% CI over the runs (Student t); None for fewer than two of them."""
    agents = [r for r in rows if r.kind == "agent" and r.policy.startswith(AGENT_PREFIX)]
    if len(agents) < 2:
        return None
    mean, ci = _t_interval([r.mean for r in agents])
    diffs = [r.diff for r in agents if r.diff is not None]
    diff, diff_ci = _t_interval(diffs) if len(diffs) == len(agents) else (None, None)
    return Row(f"agents over {len(agents)} runs", "runs", mean, ci, len(agents), diff, diff_ci)


def _t_interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and 95% CI half-width (Student t) of at least two values."""
    x = np.asarray(values, dtype=float)
    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def best_of(rows: Sequence[Row], kind: str, lower: bool) -> Row | None:
    pick = [r for r in rows if r.kind == kind]
    if not pick:
        return None
    return min(pick, key=lambda r: r.mean if lower else -r.mean)


def headroom(task: suite.BenchTask, rows: Sequence[Row]) -> float | None:
    """How much better the best oracle is than the best realistic heuristic, as a share of the
    heuristic's figure (positive: there is room)."""
    h = best_of(rows, "heuristic", task.lower_is_better)
    o = best_of(rows, "oracle", task.lower_is_better)
    if h is None or o is None or h.mean == 0:
        return None
    gain = (h.mean - o.mean) if task.lower_is_better else (o.mean - h.mean)
    return gain / abs(h.mean)


def _fmt(x: float | None, metric: str) -> str:
    if x is None:
        return "-"
    return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.0f}"


def _settings(task: suite.BenchTask) -> str:
    """The sentence naming the task's heuristic settings (empty if none)."""
    if not task.policy_sets:
        return ""
    return " Heuristic settings tuned to the task: " + ", ".join(f"`{k}={v}`" for k, v in task.policy_sets) + "."


def render(task: suite.BenchTask, rows: Sequence[Row], seeds: Sequence[int]) -> list[str]:
    """The task's leaderboard as markdown lines."""
    better = "lower" if task.lower_is_better else "higher"
    room = headroom(task, rows)
    best = best_of(rows, "heuristic", task.lower_is_better)
    lines = [
        f"### {task.name}: {task.scenario}, information {task.information}, {task.metric} ({better} is better)",
        "",
        f"{task.why}{_settings(task)} Seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); best realistic heuristic: "
        f"{best.policy if best else '-'}; oracle headroom over it: {'-' if room is None else f'{100 * room:.1f}%'}.",
        "",
        "| policy | kind | mean | 95% CI | vs best heuristic (paired) |",
        "|---|---|---:|---:|---:|",
    ]
    order = sorted(rows, key=lambda r: ("heuristic", "oracle", "agent").index(r.kind))
    runs = over_runs(rows)
    for r in order if runs is None else [*order, runs]:
        vs = "" if r.diff is None else f"{_fmt(r.diff, task.metric)} ± {_fmt(r.diff_ci95, task.metric)}"
        lines.append(f"| {r.policy} | {r.kind} | {_fmt(r.mean, task.metric)} | ± {_fmt(r.ci95, task.metric)} | {vs} |")
    return [*lines, ""]


CHECK_REL = 1e-9
"""How far a figure may be from the recorded one under ``--check``: the recorded file's throughput
rates came from a fit whose last bits followed the CPU (moved since by at most 7e-13)."""

Recorded = dict[tuple[str, str], dict[str, float]]
"""(task, policy) -> seed (as text) -> figure, from a leaderboard written by ``--json``"""


def recorded(path: Path) -> Recorded:
    """The per-seed figures of the leaderboard at ``path`` (``ConfigError`` in one sentence if it
    cannot be read as one)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {
            (str(task["task"]), str(row["policy"])): {str(k): float(v) for k, v in row["per_seed"].items()}
            for task in doc
            for row in task["rows"]
        }
    except OSError as e:
        raise ConfigError(f"--check {path}: cannot read it ({e.strerror}).") from None
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ConfigError(f"--check {path}: not a leaderboard written by suite.py --json.") from None


def differences(task: str, per_seed: dict[str, dict[int, float]], want: Recorded, source: str) -> tuple[list[str], int]:
    """The figures of ``per_seed`` (policy -> seed -> figure, one task's) that ``want`` does not
    hold or holds otherwise (beyond :data:`CHECK_REL`), as lines to print; and how many were
    compared."""
    out, n = [], 0
    for policy, figures in per_seed.items():
        for seed, got in figures.items():
            n += 1
            expected = want.get((task, policy), {}).get(str(seed))
            if expected is None:
                out.append(f"check: {policy} on {task} seed {seed}: {got!r} here, none in {source}")
            elif abs(got - expected) > CHECK_REL * abs(expected):
                out.append(f"check: {policy} on {task} seed {seed}: {got!r} here, {expected!r} in {source}")
    return out, n


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(suite.TASKS), help="tasks to run (default: all)")
    p.add_argument("--seeds", default=None, help="seeds instead of each task's 40 test seeds, e.g. 200000-200004")
    p.add_argument("--agents", default=None, help="agents (ppo:RUN, dagger:FOLDER, ...) instead of pretrained/<task>")
    p.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    p.add_argument("--backend", default="local", choices=("local", "ray"), help="where runs go (default local)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the leaderboard as JSON")
    p.add_argument("--markdown", default=None, metavar="PATH", help="also write it as markdown")
    p.add_argument(
        "--check",
        default=None,
        metavar="PATH",
        help="compare every figure with a leaderboard --json wrote; exit 1 if any differs",
    )
    args = p.parse_args(argv)
    out_md: list[str] = []
    out_json: list[dict[str, object]] = []
    differ: list[str] = []
    compared = 0
    try:
        want = recorded(Path(args.check)) if args.check else None
        chosen = [suite.get(n) for n in ev.parse_names(args.tasks, "task")]
        for task in chosen:
            seeds = smoke.seeds(ev.parse_seeds(args.seeds) if args.seeds else list(task.test_seeds))
            agents = ev.parse_names(args.agents, "agent") if args.agents else default_agents(task)
            rows, per_seed = run_task(task, seeds, agents, args.workers, args.backend)
            lines = render(task, rows, seeds)
            print("\n".join(lines), flush=True)
            if want is not None:
                lines_off, n = differences(task.name, per_seed, want, args.check)
                for line in lines_off:
                    print(line, flush=True)
                differ, compared = differ + lines_off, compared + n
            out_md.extend(lines)
            out_json.append(
                {
                    "task": task.name,
                    "metric": task.metric,
                    "seeds": seeds,
                    "headroom": headroom(task, rows),
                    "rows": [r.__dict__ | {"per_seed": per_seed[r.policy]} for r in rows],
                    "over_runs": None if (runs := over_runs(rows)) is None else runs.__dict__,
                }
            )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.markdown:
        atomic_write(Path(args.markdown), "\n".join(out_md) + "\n")
    if args.json:
        atomic_write(Path(args.json), json.dumps(out_json, indent=1) + "\n")
    if args.check:
        if differ:
            print(f"check: {len(differ)} of {compared} figures differ from {args.check}")
            return 1
        print(f"check: all {compared} figures as in {args.check} (to {CHECK_REL:g} of each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
