"""QSSF (Helios, SC'21): predicted GPU service from finished jobs' history, by hand."""

from __future__ import annotations

import math

import numpy as np

from envs.sim.engine import Engine
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from heuristics import registry
from heuristics.qssf import DurationHistory, template_of


class _View:
    """What DurationHistory reads: finishes, specs, and the finished jobs' work."""

    def __init__(self, jobs: list[JobSpec]) -> None:
        self.jobs = jobs
        self.log: list[int] = []

    def finished_since(self, cursor: int) -> tuple[tuple[int, ...], int]:
        return tuple(self.log[cursor:]), len(self.log)

    def job(self, job: int) -> JobSpec:
        return self.jobs[job]

    def work_done(self, job: int) -> float:
        return self.jobs[job].duration


def _job(i: int, user: str, duration: float, template: str = "", gpus: int = 1, submit: float = 0.0) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, "resnet50", user=user, template=template)


def test_the_prediction_falls_back_from_template_to_user_to_all_jobs():
    jobs = [_job(0, "u", 100.0, "t"), _job(1, "u", 300.0, "t"), _job(2, "u", 1000.0, "s"), _job(3, "v", 50.0, "t")]
    view, h = _View(jobs), DurationHistory(window=20)
    assert h.predict(jobs[0]) is None
    view.log = [0, 1, 2, 3]
    h.sync(view)  # type: ignore[arg-type]
    assert h.predict(_job(9, "u", 0.0, "t")) == 200.0  # median of u/t: 100, 300
    assert h.predict(_job(9, "u", 0.0, "new")) == 300.0  # u's: 100, 300, 1000
    assert h.predict(_job(9, "w", 0.0, "t")) == 200.0  # all four: 50, 100, 300, 1000
    assert template_of(_job(9, "w", 0.0, "", gpus=4)) == "resnet50/4"


def test_the_residual_is_the_median_above_the_work_done_in_the_first_group_that_has_one():
    jobs = [_job(0, "u", 100.0, "t"), _job(1, "u", 300.0, "t"), _job(2, "u", 1000.0, "s"), _job(3, "v", 50.0, "t")]
    view, h = _View(jobs), DurationHistory(window=20)
    assert math.isnan(h.residual(jobs[0], 0.0))  # no finish yet
    view.log = [0, 1, 2, 3]
    h.sync(view)  # type: ignore[arg-type]
    ut = _job(9, "u", 0.0, "t")
    assert h.residual(ut, 0.0) == 200.0  # u/t: median of 100, 300
    assert h.residual(ut, 150.0) == 150.0  # u/t above 150: 300
    assert h.residual(ut, 400.0) == 600.0  # none of u/t above: u's 1000
    assert h.residual(_job(9, "w", 0.0, "t"), 60.0) == 240.0  # all jobs above 60: 100, 300, 1000
    assert h.residual(ut, 2_000.0) == 2_000.0  # longer than every finished job: as long again


def test_only_the_last_window_of_finishes_counts():
    jobs = [_job(i, "u", float(d), "t") for i, d in enumerate([1000, 10, 20, 30])]
    view, h = _View(jobs), DurationHistory(window=3)
    view.log = [0, 1, 2, 3]
    h.sync(view)  # type: ignore[arg-type]
    assert h.predict(jobs[0]) == 20.0


def test_qssf_ranks_by_predicted_gpu_service_once_history_exists():
    """One 4-GPU server. Job 0 (user a) runs 1,000 s alone and finishes; then at t=2,000 two jobs
    queue behind a long one: b's 1-GPU job with no history of its own (predicted 1,000 s from all
    jobs: 1,000 GPU-s) and a's 4-GPU job (a's history: 1,000 s, so 4,000 GPU-s). b's goes first
    though it arrived later."""
    jobs = [
        _job(0, "a", 1000.0, "t", gpus=4),
        _job(1, "c", 5000.0, "x", gpus=4, submit=1500.0),
        _job(2, "a", 800.0, "t", gpus=4, submit=2000.0),
        _job(3, "b", 9000.0, "y", gpus=1, submit=2001.0),
    ]
    e = Engine(
        [ServerSpec(0, V100, 4, Pool.TRAINING)], jobs, registry.make("qssf"), rng=np.random.default_rng(0), log=True
    )
    r = e.run()
    starts = [who for _, what, who, _ in e.log or [] if what == "start"]
    assert starts == [0, 1, 3, 2]
    assert np.isfinite(r.finish).all()


def test_the_sorted_window_gives_statistics_median_bit_for_bit():
    import math
    import random
    import statistics
    from collections import deque

    from heuristics.qssf import MedianWindow

    rng = random.Random(0)
    for _ in range(300):
        size = rng.randint(1, 12)
        window, past = MedianWindow(size), deque[float](maxlen=size)
        for _ in range(rng.randint(1, 40)):
            value = rng.choice([0.0, -0.0, 1.0, 3.0, 1e308, rng.uniform(0.0, 1e6), float(rng.randint(0, 5))])
            past.append(value)
            got, want = window.add(value), float(statistics.median(past))
            assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
