"""Evaluation sweeps: policies x scenarios x seeds -> metrics, results.json / results.csv.

Each (policy, scenario, seed) is one :class:`Task`; :func:`run_task` is a pure function of it
(same task -> same metrics, bar the wall-clock ``decision_ms_*``), so tasks can run in any
order, in a process pool, and results are sorted back into task order.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_write
from envs.sim.metrics import METRICS, summarize
from heuristics import registry

RESULTS_VERSION = 1


@dataclass(frozen=True)
class Task:
    """One run. ``scenario_sets`` are ``--set`` overrides of the scenario, ``policy_sets`` of the
    policy (given on the command line as ``policy.<field>=value``)."""

    policy: str
    scenario: str
    seed: int
    scenario_sets: tuple[tuple[str, str], ...] = ()
    policy_sets: tuple[tuple[str, str], ...] = ()


@dataclass
class TaskResult:
    task: Task
    metrics: dict[str, Any]
    series: dict[str, list[float]] = field(default_factory=dict)


def split_sets(sets: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--set`` pairs -> (scenario overrides, policy overrides: keys without ``policy.``)."""
    scen = {k: v for k, v in sets.items() if not k.startswith("policy.")}
    pol = {k.removeprefix("policy."): v for k, v in sets.items() if k.startswith("policy.")}
    return scen, pol


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` or a mix: ``"0-2,7"``."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1) if not part.startswith("-") else (part, "")
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ConfigError(f"--seeds expects integers like 0,1,2 or 0-4, got '{text}'.") from None
    if not seeds:
        raise ConfigError("--seeds names no seed.")
    return seeds


def validate(tasks: Sequence[Task]) -> None:
    """Raise the user's error (ConfigError / TraceError) before anything runs or is written."""
    checked: set[tuple[Any, ...]] = set()
    for t in tasks:
        key = (t.scenario, t.scenario_sets)
        if key not in checked:
            checked.add(key)
            scenarios.build(scenarios.get(t.scenario, dict(t.scenario_sets)), t.seed)
        pkey = (t.policy, t.policy_sets)
        if pkey not in checked:
            checked.add(pkey)
            registry.make(t.policy, dict(t.policy_sets))


def run_task(task: Task) -> TaskResult:
    scenario = scenarios.get(task.scenario, dict(task.scenario_sets))
    policy = registry.make(task.policy, dict(task.policy_sets))
    result = scenarios.simulate(scenario, policy, task.seed)
    return TaskResult(task, summarize(result), {k: v.tolist() for k, v in result.series.items()})


def run_tasks(
    tasks: Sequence[Task], workers: int = 1, on_done: Callable[[TaskResult], None] | None = None
) -> list[TaskResult]:
    """Run every task (in a process pool when ``workers > 1``); results in task order."""
    results: list[TaskResult | None] = [None] * len(tasks)
    if workers <= 1 or len(tasks) <= 1:
        for i, t in enumerate(tasks):
            results[i] = run_task(t)
            if on_done:
                on_done(results[i])  # type: ignore[arg-type]
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            futures = {pool.submit(run_task, t): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                r = fut.result()
                results[futures[fut]] = r
                if on_done:
                    on_done(r)
    return [r for r in results if r is not None]


def results_document(results: Sequence[TaskResult], command: Sequence[str]) -> dict[str, Any]:
    return {
        "version": RESULTS_VERSION,
        "runs": [
            {
                "policy": r.task.policy,
                "scenario": r.task.scenario,
                "seed": r.task.seed,
                "settings": dict(r.task.scenario_sets) | {f"policy.{k}": v for k, v in r.task.policy_sets},
                "metrics": r.metrics,
            }
            for r in results
        ],
        "metric_units": {k: unit for k, (unit, _) in METRICS.items()},
        "meta": {"command": list(command), "commit": git_commit(), "python": platform.python_version()},
    }


def write_results(out: Path, results: Sequence[TaskResult], command: Sequence[str]) -> None:
    """results.json and results.csv (one row per run), each written atomically."""
    doc = results_document(results, command)
    atomic_write(out / "results.json", json.dumps(doc, indent=2, sort_keys=False) + "\n")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    keys = list(METRICS)
    w.writerow(["policy", "scenario", "seed", "settings", *keys])
    for run in doc["runs"]:
        settings = ";".join(f"{k}={v}" for k, v in run["settings"].items())
        w.writerow([run["policy"], run["scenario"], run["seed"], settings, *(_cell(run["metrics"][k]) for k in keys)])
    atomic_write(out / "results.csv", buf.getvalue())


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def git_commit() -> str:
    """The code's commit (``+dirty`` if the tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def mean_by_policy(
    results: Sequence[TaskResult], keys: Sequence[str]
) -> dict[tuple[str, str], dict[str, float | None]]:
    """(policy, scenario) -> mean of each metric over seeds (None if a metric is None anywhere)."""
    groups: dict[tuple[str, str], list[TaskResult]] = {}
    for r in results:
        groups.setdefault((r.task.policy, r.task.scenario), []).append(r)
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for g, rs in groups.items():
        row: dict[str, float | None] = {}
        for k in keys:
            vals = [r.metrics[k] for r in rs]
            row[k] = None if any(v is None for v in vals) else math.fsum(vals) / len(vals)
        out[g] = row
    return out


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
