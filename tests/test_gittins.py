"""gittins: the inverse Gittins index over finished jobs' durations (and, for gittins-est, weighted by
the likelihood of each job's estimate), by hand, and in a run."""

from __future__ import annotations

import dataclasses
import math

import pytest

from envs.sim import scenarios
from envs.sim.metrics import summarize
from envs.sim.model import JobSpec
from heuristics import registry
from heuristics.gittins import EstimateLikelihood, GittinsCost
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


def _estimated(works: list[float], estimates: list[float], pending: float, attained: float = 0.0) -> _View:
    """Finished jobs of ``works`` whose estimates were ``estimates``, then a job estimated at
    ``pending`` that has done ``attained``."""
    view = _View(works, {len(works): attained})
    for i, e in enumerate([*estimates, pending]):
        view.specs[i] = dataclasses.replace(view.specs[i], duration=e)
    view.done.update({i: w for i, w in enumerate(works)})
    return view


def _brute_cost(tail: list[float], weights: list[float], attained: float) -> float:
    """min over quanta q of E[min(D - a, q)] / P(D - a <= q), D drawn from tail by weights."""
    total = sum(weights)
    best = math.inf
    for q in (d - attained for d in tail):
        expected = sum(w * min(d - attained, q) for d, w in zip(tail, weights, strict=True)) / total
        p = sum(w for d, w in zip(tail, weights, strict=True) if d - attained <= q) / total
        best = min(best, expected / p)
    return best


def test_with_estimates_each_duration_weighs_as_likely_as_the_jobs_estimate_under_it() -> None:
    # errors ln(e / work): +1, -1, 0 -> bias 0, spread sqrt(2/3); a job estimated at 300 s
    works, estimates = [100.0, 200.0, 1000.0], [100.0 * math.e, 200.0 / math.e, 1000.0]
    spread = math.sqrt(2.0 / 3.0)
    for attained in (0.0, 150.0):
        view = _estimated(works, estimates, 300.0, attained)
        tail = [d for d in sorted(works) if d > attained]
        weights = [math.exp(-0.5 * ((math.log(300.0) - math.log(d)) / spread) ** 2) for d in tail]
        cost = GittinsCost(likelihood=EstimateLikelihood()).cost(view, 3)  # type: ignore[arg-type]
        assert cost == pytest.approx(_brute_cost(tail, weights, attained))
        assert cost != pytest.approx(GittinsCost().cost(view, 3))  # type: ignore[arg-type]  # the estimate moved it


def test_the_likelihood_learns_the_estimates_bias_and_its_median_follows() -> None:
    # every estimate was twice the work (bias ln 2, spread at its floor): an estimate of 400 s
    # points at 200 s alone, one of 2,000 s at 1,000 s; without the estimate the median is 200 s
    works = [100.0, 200.0, 1000.0]
    index = GittinsCost(likelihood=EstimateLikelihood())
    view = _estimated(works, [2 * w for w in works], 400.0)
    assert index.cost(view, 3) == pytest.approx(200.0)  # type: ignore[arg-type]
    assert index.residual(view, 3) == pytest.approx(200.0)  # type: ignore[arg-type]
    view = _estimated(works, [2 * w for w in works], 2000.0)
    assert GittinsCost(likelihood=EstimateLikelihood()).residual(view, 3) == pytest.approx(1000.0)  # type: ignore[arg-type]
    assert GittinsCost().residual(view, 3) == pytest.approx(200.0)  # type: ignore[arg-type]


def test_gittins_est_reads_estimates_and_runs_at_that_level() -> None:
    registry.check_information("gittins-est", "estimate")
    with pytest.raises(ValueError):
        registry.check_information("gittins-est", "none")
    sets = {"information.level": "estimate", "workload.load": "4.0", "workload.synthetic.num_jobs": "80"}
    result = scenarios.simulate(scenarios.get("default", sets), registry.make("gittins-est"), 0)
    m = summarize(result)
    assert m["jobs_unfinished"] == 0 and m["preemptions"] > 0
    blind = summarize(scenarios.simulate(scenarios.get("default", sets), registry.make("gittins-eft"), 0))
    assert m["avg_jct_s"] != blind["avg_jct_s"]
