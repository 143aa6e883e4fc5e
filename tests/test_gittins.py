"""gittins: the inverse Gittins index over finished jobs' durations, by hand, and in a run."""

from __future__ import annotations

import dataclasses

import pytest

from envs.sim import scenarios
from envs.sim.metrics import summarize
from envs.sim.model import JobSpec
from heuristics import registry
from heuristics.gittins import GittinsCost
from heuristics.qssf import DurationHistory


class _View:
    """What GittinsCost reads: finishes, specs and work done."""

    def __init__(self, durations: list[float], done: dict[int, float], gpus: int = 1) -> None:
        self.specs = [
            JobSpec(i, f"j{i}", 0.0, d, gpus, gpus, gpus, "resnet50") for i, d in enumerate([*durations, 1e9, 1e9])
        ]
        self.log = list(range(len(durations)))
        self.done = done

    def finished_since(self, cursor: int) -> tuple[tuple[int, ...], int]:
        return tuple(self.log[cursor:]), len(self.log)

    def work_done(self, job: int) -> float:
        return self.done.get(job, self.specs[job].duration)

    def job(self, job: int) -> JobSpec:
        return self.specs[job]


@pytest.mark.parametrize(
    ("attained", "cost"),
    [
        # finished 100, 200, 1000: quanta to 100 (p 1/3), 200 (2/3), 1000 (1): expected work per
        # completion 300, 250, 433.3 -> 250
        (0.0, 250.0),
        # above 150: 200 and 1000 remain: quanta 50 (p 1/2: (50 + 50) / 1) and 850 (900 / 2)
        (150.0, 100.0),
        (500.0, 500.0),  # only 1000 remains
        (2000.0, 2000.0),  # longer than every finished job: as long again
    ],
)
def test_the_cost_is_the_best_quantums_expected_work_per_completion(attained: float, cost: float) -> None:
    view = _View([1000.0, 100.0, 200.0], {3: attained})
    assert GittinsCost().cost(view, 3) == pytest.approx(cost)  # type: ignore[arg-type]
    view4 = _View([1000.0, 100.0, 200.0], {3: attained}, gpus=4)
    assert GittinsCost().cost(view4, 3) == pytest.approx(4 * cost)  # type: ignore[arg-type]


def test_no_finish_yet_costs_nothing_and_the_window_keeps_the_last() -> None:
    view = _View([], {0: 50.0})
    assert GittinsCost().cost(view, 0) == 0.0  # type: ignore[arg-type]
    view = _View([1000.0, 100.0, 200.0], {3: 0.0})
    assert GittinsCost(window=2).cost(view, 3) == pytest.approx(150.0)  # type: ignore[arg-type]  # 100, 200


def test_with_groups_the_cost_reads_the_jobs_own_group_while_it_has_a_longer_finish() -> None:
    # user u's jobs finished at 100 and 300 s; user v's at 1000 and 2000 s. A u job that has done
    # nothing costs as over u's (quanta 100 (p 1/2: (100 + 100) / 1 = 200) and 300 (400 / 2)): 200;
    # one that has done 400 s, past every u finish, as over all four above 400 (1000: p 1/2,
    # (600 + 600) / 1; 2000: (600 + 1600) / 2 = 1100): 1100. Without groups, over all four: 400.
    view = _View([100.0, 300.0, 1000.0, 2000.0], {4: 0.0})
    for i, user in enumerate(["u", "u", "v", "v", "u"]):
        view.specs[i] = dataclasses.replace(view.specs[i], user=user)
    assert GittinsCost(groups=DurationHistory()).cost(view, 4) == pytest.approx(200.0)  # type: ignore[arg-type]
    assert GittinsCost().cost(view, 4) == pytest.approx(400.0)  # type: ignore[arg-type]
    view.done[4] = 400.0
    assert GittinsCost(groups=DurationHistory()).cost(view, 4) == pytest.approx(1100.0)  # type: ignore[arg-type]


def test_it_runs_blind_and_preempts_on_contention_nones_setting() -> None:
    """At information level none, load 4.0 (contention-none's), 80 jobs: every job finishes and
    the rule preempts some (costly running jobs for cheap waiting ones)."""
    registry.check_information("gittins", "none")
    sets = {"information.level": "none", "workload.load": "4.0", "workload.synthetic.num_jobs": "80"}
    result = scenarios.simulate(scenarios.get("default", sets), registry.make("gittins"), 0)
    m = summarize(result)
    assert m["jobs_unfinished"] == 0 and m["preemptions"] > 0
