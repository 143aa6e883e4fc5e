"""Same seed -> identical results, bit for bit; different seeds -> different results.

Three levels: the CLI (``evaluate.py`` in subprocesses, one worker vs a process pool, different
``PYTHONHASHSEED``s so that any dependence on set/dict-of-str iteration order shows), the
scenarios (``build`` twice), and the engine itself (two runs of a hypothesis-drawn world under
every registered policy compare equal field by field, the event log included).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from invariant_worlds import POLICIES, PROPERTY, World, make_policy, simulate, worlds

from envs.sim import scenarios
from envs.sim.engine import SimResult
from envs.sim.metrics import TIMING_KEYS
from heuristics import registry

ROOT = Path(__file__).resolve().parent.parent
SMALL = "workload.synthetic.num_jobs=60"


def evaluate(out: Path, workers: int, hash_seed: str) -> dict[str, Any]:
    """Run evaluate.py over every registered policy on ``default`` (60 jobs), seeds 0 and 1."""
    cmd = [
        sys.executable, "evaluate.py", "--policies", ",".join(registry.names()), "--scenario", "default",
        "--seeds", "0,1", "--set", SMALL, "--out", str(out), "--workers", str(workers),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "results.json").read_text())  # type: ignore[no-any-return]


def comparable(doc: Any) -> Any:
    """The document less what may differ between two runs of one seed: the wall-clock timings
    (wherever they appear: per run, in aggregates and ratios), the command line (it names the
    output folder and the worker count) and the commit (others may edit the tree meanwhile)."""
    if isinstance(doc, dict):
        return {
            k: comparable(v)
            for k, v in doc.items()
            if k not in TIMING_KEYS and not (k in ("command", "commit") and "python" in doc)
        }
    if isinstance(doc, list):
        return [comparable(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    a = evaluate(tmp_path_factory.mktemp("a"), workers=1, hash_seed="1")
    b = evaluate(tmp_path_factory.mktemp("b"), workers=2, hash_seed="2")
    return a, b


def test_evaluate_is_bit_identical_across_processes_and_hash_seeds(two_sweeps: tuple[dict, dict]) -> None:
    a, b = two_sweeps
    assert [(r["policy"], r["seed"]) for r in a["runs"]] == [(p, s) for p in registry.names() for s in (0, 1)]
    for ra, rb in zip(a["runs"], b["runs"], strict=True):
        diff = {
            k: (v, rb["metrics"][k]) for k, v in ra["metrics"].items() if k not in TIMING_KEYS and rb["metrics"][k] != v
        }
        assert not diff, f"{ra['policy']} seed {ra['seed']}: {diff}"
    assert json.dumps(comparable(a), sort_keys=True) == json.dumps(comparable(b), sort_keys=True)


def test_different_seeds_give_different_results(two_sweeps: tuple[dict, dict]) -> None:
    a, _ = two_sweeps
    by = {(r["policy"], r["seed"]): r["metrics"] for r in a["runs"]}
    for policy in registry.names():
        m0, m1 = by[policy, 0], by[policy, 1]
        assert m0["avg_jct_s"] != m1["avg_jct_s"] and m0["makespan_s"] != m1["makespan_s"], policy


@pytest.mark.parametrize("name", scenarios.names())
def test_scenarios_build_identically_for_one_seed(name: str) -> None:
    scenario = scenarios.get(name)
    first, again, other = scenarios.build(scenario, 7), scenarios.build(scenario, 7), scenarios.build(scenario, 8)
    assert first.jobs == again.jobs and first.servers == again.servers
    assert first.jobs, name
    # the streams handed to the engine and the policy start alike too
    assert first.failure_rng.random() == again.failure_rng.random()
    assert first.policy_rng.random() == again.policy_rng.random()
    if first.demand is not None:
        assert again.demand is not None
        ts = np.arange(0.0, 86400.0, scenario.inference.step_s)
        assert [first.demand.utilization(t) for t in ts] == [again.demand.utilization(t) for t in ts]
    # another seed draws another workload (a trace keeps its rows but samples what it lacks)
    assert first.jobs != other.jobs, name


def same(a: SimResult, b: SimResult) -> None:
    """Every field equal (NaN where NaN), the wall-clock decision times aside."""
    for field in a.__dataclass_fields__:
        if field == "decision_ms":
            continue
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=field)
        elif isinstance(x, dict):
            assert x.keys() == y.keys(), field
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{field}.{k}")
        elif isinstance(x, float) and math.isnan(x):
            assert math.isnan(y), field
        else:
            assert x == y, field


def shorter(world: World) -> World:
    """At most about two days: a livelocked policy does not make the comparison slow."""
    return replace(world, config=replace(world.config, horizon_s=min(world.config.horizon_s, 2e5)))


@pytest.mark.parametrize("name", POLICIES)
@settings(PROPERTY, max_examples=20)
@given(
    world=worlds(max_jobs=15).map(
        lambda w: replace(w, config=replace(w.config, horizon_s=min(w.config.horizon_s, 2e5)))
    )
)
def test_engine_runs_are_reproducible(name: str, world: World) -> None:
    same(simulate(world, make_policy(name, world)), simulate(world, make_policy(name, world)))
