"""For random clusters (mixes of GPU types and pools) and random traces (known and unknown type
names, sizes up to and beyond what the cluster holds), every registered policy either refuses the
run with the user's error (what the CLIs turn into one sentence on exit 2), or finishes every job.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agents import evaluation as ev
from envs.sim.config import ConfigError
from envs.sim.inference import InferenceConfigError
from envs.sim.model import GPU_TYPES
from envs.sim.workload import TraceError
from heuristics import registry

TYPES = sorted(GPU_TYPES)
USER_ERRORS = (ConfigError, TraceError, InferenceConfigError)
WATCHDOG_S = 120  # one world, every policy: a hang fails the test instead of stalling the suite


@st.composite
def worlds(draw: Any) -> tuple[dict[str, str], str]:
    """(scenario settings of the trace scenario, trace CSV text)."""
    mix = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
    counts = [draw(st.integers(1, 3)) for _ in mix]
    per_server = draw(st.sampled_from([4, 8]))
    inference = draw(st.integers(0, 4))
    sets = {
        "cluster.training_mix": ";".join(f"{t}:{n}" for t, n in zip(mix, counts, strict=True)),
        "cluster.gpus_per_server": str(per_server),
        "cluster.inference_servers": str(inference),
        "cluster.inference_gpu": draw(st.sampled_from(TYPES)),
        "inference.headroom": "0.0",
        "inference.step_s": "1800",
        "workload.unrunnable": draw(st.sampled_from(["error", "drop"])),
    }
    most = per_server * max(max(counts), inference)
    rows = ["job_id,submit_time_s,duration_s,num_gpus,gpu_type"]
    for i in range(draw(st.integers(1, 8))):
        gpus = draw(st.integers(1, per_server) | st.integers(1, most + 4))
        kind = draw(st.sampled_from(["any"] * 4 + ["one"] * 4 + ["two"] * 3 + ["unknown"]))
        if kind == "any":
            cell = ""
        elif kind == "unknown":
            cell = draw(st.sampled_from(["G2", "V100", "H100"]))
        else:
            cell = "|".join(draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=1 if kind == "one" else 2)))
        submit = draw(st.integers(0, 20_000))
        duration = draw(st.integers(600, 12_000))
        rows.append(f"j{i},{submit},{duration},{gpus},{cell}")
    return sets, "\n".join(rows) + "\n"


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"a world ran past the {WATCHDOG_S} s watchdog")


# a world hypothesis found: its only job needs the inference GPU type, so the policies that never
# borrow drop it and have nothing left to run (refused when planned, not when run)
_BORROW_ONLY = (
    {
        "cluster.training_mix": "A10-24GB:1",
        "cluster.gpus_per_server": "4",
        "cluster.inference_servers": "2",
        "cluster.inference_gpu": "V100-16GB",
        "inference.headroom": "0.0",
        "inference.step_s": "1800",
        "workload.unrunnable": "drop",
    },
    "job_id,submit_time_s,duration_s,num_gpus,gpu_type\nj0,0,600,1,V100-16GB\n",
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=worlds())
@example(world=_BORROW_ONLY)
def test_every_policy_refuses_or_finishes_every_job(world: tuple[dict[str, str], str], tmp_path: Path) -> None:
    sets, text = world
    trace = tmp_path / "world.csv"
    trace.write_text(text)
    sets = sets | {"workload.trace": str(trace)}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WATCHDOG_S)
    try:
        for policy in registry.names():
            try:
                tasks = ev.plan([policy], ["trace"], [0], [sets])
            except USER_ERRORS:
                continue
            (result,) = ev.execute(tasks)
            m = result.metrics
            assert m["jobs_unfinished"] == 0 and m["jobs_finished"] == m["jobs_total"], (policy, sets, text, m)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
