"""Regression tests of the bugs the property tests (test_invariants.py) found, each on a
hand-built world that pins the exact failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from invariant_worlds import POLICIES, World, make_policy, simulate

from envs.sim.engine import SimConfig
from envs.sim.inference import InferenceConfig
from envs.sim.metrics import summarize
from envs.sim.model import A100, T4, V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Action, ClusterView, Preempt, Start

ROUND_BASED = [p for p in ("shockwave", "themis", "maxmin") if p in POLICIES]


@pytest.mark.parametrize("name", ROUND_BASED)
def test_round_placement_keeps_one_gpu_type(name: str) -> None:
    """Found by the property test: round placement spread a gang over V100 and A100 servers."""
    # 4 V100 + 4 A100 + 4 V100 GPUs; a 6-GPU job of any type fits only on the two V100 servers
    servers = (
        ServerSpec(0, V100, 4, Pool.TRAINING),
        ServerSpec(1, A100, 4, Pool.TRAINING),
        ServerSpec(2, V100, 4, Pool.TRAINING),
    )
    world = World(servers, (JobSpec(0, "j0", 0.0, 100.0, 6, 6, 6, "resnet50"),), None, SimConfig(sample_s=0.0), 0)
    r = simulate(world, make_policy(name, world))
    assert r.log is not None
    assert [e for e in r.log if e[1] == "start"] == [(0.0, "start", 0, "s0x4 s2x2")]


@pytest.mark.parametrize("name", ROUND_BASED)
def test_time_slicing_lets_two_jobs_finish(name: str) -> None:
    # two 8-GPU jobs of 2000 s on one 8-GPU server, the default mechanics (checkpoints every
    # 1800 s of work, restarts 30 s + 1 s/GPU). Round-based policies used to preempt each job after
    # its lease (maxmin and themis: 3 rounds, 322 s of work, all lost), forever.
    world = World(
        (ServerSpec(0, V100, 8, Pool.TRAINING),),
        tuple(JobSpec(i, f"j{i}", 0.0, 2000.0, 8, 8, 8, "resnet50") for i in range(2)),
        None,
        SimConfig(horizon_s=86400.0, sample_s=0.0),
        0,
    )
    r = simulate(world, make_policy(name, world))
    assert not r.truncated, f"finish {r.finish}, work lost {r.lost_work}"


class _PreemptGracefully:
    name, borrows, round_s = "script", False, 100.0

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if view.now == 0.0:
            yield Start(0, ((0, 1),))
        elif view.now == 500.0:
            yield Preempt(0, graceful=True)
            yield Start(0, ((0, 1),))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return []


def test_a_graceful_preemption_with_no_grace_period_loses_nothing() -> None:
    # 1000 s job, checkpoints every 300 s of work, preempted gracefully at 500 and restarted at once
    world = World(
        (ServerSpec(0, V100, 8, Pool.TRAINING),),
        (JobSpec(0, "j0", 0.0, 1000.0, 1, 1, 1, "m", grace_period=0.0),),
        None,
        SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=300.0, sample_s=0.0),
        0,
    )
    r = simulate(world, _PreemptGracefully())
    assert r.lost_work[0] == 0.0 and r.finish[0] == 1000.0


class _FillEverything:
    name, borrows, round_s = "script", True, None

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if view.now == 0.0:
            yield Start(0, ((0, 8),))
            yield Start(1, ((1, 8),))  # on the server just loaned

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(view.loaned_servers())[:k]


def test_combined_utilization_stays_within_one(tmp_path: Path) -> None:
    # one V100 and one T4 server of 8 GPUs. The T4 server is idle at 0 (loaned, job 1 starts
    # there), fully needed from 100 on but never reclaimed; job 0 fills the V100 server.
    series = tmp_path / "demand.csv"
    series.write_text("time_s,utilization\n0,0\n100,1\n1000000,1\n")
    world = World(
        (ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, T4, 8, Pool.INFERENCE)),
        (JobSpec(0, "j0", 0.0, 3000.0, 8, 8, 8, "m"), JobSpec(1, "j1", 0.0, 1000.0, 8, 8, 8, "m")),
        InferenceConfig(series_csv=str(series), step_s=100.0, headroom=0.0, never_reclaim=True),
        SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, sample_s=0.0, horizon_s=3000.0),
        0,
    )
    r = simulate(world, _FillEverything())
    u = r.usage
    assert (u.busy_training_gpu_s, u.busy_loaned_gpu_s, u.inference_gpu_s) == (24000.0, 24000.0, 0.0)
    assert summarize(r)["utilization"] <= 1.0


def test_simultaneous_finishes_under_contention_keep_time_monotone() -> None:
    # three 1-GPU jobs of 1 s on one server, submitted at 2.8, each slowed by 10% per neighbour:
    # all three finish at 2.8 + 1.2 = 4.0.
    world = World(
        (ServerSpec(0, V100, 8, Pool.TRAINING),),
        tuple(JobSpec(i, f"j{i}", 2.8, 1.0, 1, 1, 1, "m") for i in range(3)),
        None,
        SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, contention=0.1, sample_s=0.0),
        0,
    )
    r = simulate(world, make_policy("fifo", world))
    assert r.log is not None
    times = [t for t, *_ in r.log]
    assert times == sorted(times)
    assert r.finish.tolist() == [4.0, 4.0, 4.0]
