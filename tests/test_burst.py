"""No livelock (issue 16): the engine's guard stops a policy that keeps restarting a job
without progress."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from envs.sim.engine import MAX_FUTILE_RESTARTS, DecisionError, Engine, SimConfig
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Action, ClusterView, JobStatus, Preempt, Start


class Restarter:
    """A livelocking toy: every round it preempts job 0 if it runs, and (re)starts it."""

    name = "restarter"
    borrows = False

    def __init__(self, round_s: float) -> None:
        self.round_s = round_s

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if view.status_of(0) == JobStatus.RUNNING and view.round_tick:
            yield Preempt(0)
        if view.status_of(0) == JobStatus.PENDING:
            yield Start(0, ((0, 1),))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return []


def _toy(round_s: float, config: SimConfig) -> Engine:
    jobs = [JobSpec(0, "j0", 0.0, 1000.0, 1, 1, 1, "m")]
    return Engine([ServerSpec(0, V100, 8, Pool.TRAINING)], jobs, Restarter(round_s), config=config)


def test_guard_stops_a_job_restarted_within_its_restart_overhead():
    # a round every 10 s, a restart overhead of 31 s: job 0 never runs a second of work
    engine = _toy(10.0, SimConfig(sample_s=0.0))
    with pytest.raises(
        DecisionError,
        match=rf"^policy restarter: job 0 \(j0\) restarted {MAX_FUTILE_RESTARTS} times without progress",
    ):
        engine.run()
    # the first start at t=0 sets the mark; the 50th restart after it is the one refused
    assert engine.now == 10.0 * MAX_FUTILE_RESTARTS


def test_guard_counts_work_lost_to_the_checkpoint_as_no_progress():
    # 100 s rounds, 31 s overhead: 69 s of work per run, lost each time (checkpoints every 1800 s)
    engine = _toy(100.0, SimConfig(sample_s=0.0, checkpoint_interval_s=1800.0))
    with pytest.raises(DecisionError, match="restarted 50 times without progress"):
        engine.run()
    assert engine.jobs[0].work_done == 0.0


def test_guard_lets_a_job_that_progresses_be_restarted_any_number_of_times():
    # the same restarts, nothing lost on preemption: 69 s of work per round, 15 rounds to finish;
    # with 10 s of work per round (rounds of 41 s) it takes 100 restarts, more than the bound
    r = _toy(41.0, SimConfig(sample_s=0.0, checkpoint_interval_s=0.0)).run()
    assert r.preemptions[0] == 99 > MAX_FUTILE_RESTARTS
    assert np.isfinite(r.finish[0])
