"""The blind lookahead (envs/lookahead.py ``redrawn``, ``best_sampled``) and the engine's
``redraw`` beneath it: a guess at the hidden work replaces it on a copy, and a choice made over
such guesses cannot depend on the truth."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from envs import lookahead
from envs.core import Components, Core, CoreConfig
from envs.sim.policy import ClusterView, JobStatus

CONFIG = CoreConfig.from_kwargs(
    scenario="default",
    overrides={"workload.synthetic.num_jobs": "40", "workload.load": "3.0", "information.level": "none"},
    components=Components("gittins", "gittins", "gittins", "gittins"),
)
SLOTS = 32


def _at(level: str) -> CoreConfig:
    return dataclasses.replace(CONFIG, overrides=(*CONFIG.overrides, ("information.level", level)))


def _after_finishes(finishes: int, seed: int = 0, config: CoreConfig = CONFIG) -> Core:
    """An episode played by gittins up to the decision after its first ``finishes`` finishes."""
    core = Core(config)
    core.reset(seed)
    ranking = core.heuristic("gittins").ordering
    while True:
        visible, _ = core.next_choice(SLOTS)
        assert not core.done
        if len(core.view.finished_since(0)[0]) >= finishes and core.view.running and core.view.pending:
            return core
        job = core.expert_job(ranking, visible)
        core.advance() if job is None else core.start(job)


def _unfinished(core: Core) -> list[int]:
    return [j for j in range(core.num_jobs) if core.view.status_of(j) != JobStatus.DONE]


def _truth(core: Core, jobs: list[int]) -> dict[int, float]:
    """The jobs' whole work, as an oracle's view shows it."""
    assert core.engine is not None
    truth = ClusterView(core.engine, oracle=True)
    return {j: truth.state(j).work_total for j in jobs}


def test_redrawing_the_true_work_changes_nothing() -> None:
    """Only the last bits may move: a running job's progress is settled to now first."""
    core = _after_finishes(3)
    assert core.engine is not None
    same = core.copy()
    assert same.engine is not None
    same.engine.redraw(_truth(core, _unfinished(core)), copy.deepcopy(core.engine.rng_speed))
    a = lookahead.play(core.copy(), "gittins", SLOTS).metrics
    b = lookahead.play(same, "gittins", SLOTS).metrics
    assert a is not None and b is not None and a.keys() == b.keys()
    for key, value in a.items():
        assert b[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key


def test_redrawn_work_moves_the_episode_and_the_copy_alone() -> None:
    core = _after_finishes(3)
    before = lookahead.value(lookahead.play(core.copy(), "gittins", SLOTS), "avg_jct_s")
    trial = lookahead.redrawn(core, np.random.default_rng(1))
    assert trial is not None and trial.engine is not None
    done = {j: core.view.state(j).work_done for j in _unfinished(core)}
    finished = sorted(core.view.state(j).work_done for j in core.view.finished_since(0)[0])
    works = _truth(trial, list(done))
    for j, d in done.items():
        work = works[j]
        assert work > d
        assert work in finished or work == 2.0 * max(d, 1.0)
    assert lookahead.value(lookahead.play(trial, "gittins", SLOTS), "avg_jct_s") != before
    assert lookahead.value(lookahead.play(core.copy(), "gittins", SLOTS), "avg_jct_s") == before


def test_nothing_is_redrawn_before_a_finish_and_a_bad_guess_is_refused() -> None:
    fresh = Core(CONFIG)
    fresh.reset(0)
    fresh.next_choice(SLOTS)
    assert lookahead.redrawn(fresh, np.random.default_rng(0)) is None
    core = _after_finishes(1)
    assert core.engine is not None
    gone = core.view.finished_since(0)[0][0]
    with pytest.raises(ValueError, match=f"job {gone} has finished"):
        core.engine.redraw({gone: 5000.0}, np.random.default_rng(0))
    running = next(iter(core.view.running))
    with pytest.raises(ValueError, match=f"job {running} has done"):
        core.engine.redraw({running: core.view.state(running).work_done}, np.random.default_rng(0))


def _picks(cores: tuple[Core, ...], blind: bool) -> list[int | None]:
    """Each core's lookahead choice at its decision: blind (3 draws, one stream) or clairvoyant."""
    picks = []
    for c in cores:
        visible, fits = c.next_choice(SLOTS)
        mine = c.expert_job(c.heuristic("gittins").ordering, visible)
        jobs = lookahead.ordering_jobs(c, mine, visible, fits, SLOTS)
        options = [lookahead.start(j) for j in jobs]
        assert len(options) >= 2
        if blind:
            i = lookahead.best_sampled(c, options, "gittins", SLOTS, "avg_jct_s", True, np.random.default_rng(5), 3)
        else:
            i = lookahead.best(c, options, "gittins", SLOTS, "avg_jct_s", True)
        picks.append(jobs[i])
    return picks


def test_the_blind_lookahead_chooses_the_same_whatever_the_hidden_work() -> None:
    """Two episodes alike in all a blind run sees, apart in the work of the jobs not finished
    (0.3 of it, where that is more than done) and in when the jobs to come arrive (10 minutes
    later): with the same stream their redrawn copies play out alike to the last bit, and the
    clairvoyant lookahead picks differently, the sampled one alike."""
    core = _after_finishes(6)
    assert core.engine is not None
    other = core.copy()
    assert other.engine is not None
    truth = _truth(core, _unfinished(core))
    works = {j: w * 0.3 if w * 0.3 > core.view.state(j).work_done else w for j, w in truth.items()}
    later = {j: core.engine.specs[j].submit_time + 600.0 for j in truth if core.view.status_of(j) == JobStatus.FUTURE}
    assert later
    other.engine.redraw(works, copy.deepcopy(core.engine.rng_speed), later)
    guesses = [lookahead.redrawn(c, np.random.default_rng(7)) for c in (core, other)]
    metrics = [lookahead.play(g, "gittins", SLOTS).metrics for g in guesses if g is not None]
    assert len(metrics) == 2 and metrics[0] == metrics[1]
    clairvoyant = _picks((core.copy(), other.copy()), blind=False)
    assert clairvoyant[0] != clairvoyant[1]
    blind = _picks((core, other), blind=True)
    assert blind[0] == blind[1]


def test_where_durations_are_known_only_the_jobs_to_come_are_redrawn() -> None:
    """At ``clairvoyant`` the copy keeps the true work of every job that has arrived and redraws
    the jobs to come: their work from the arrived jobs', and when they arrive (after now, in
    their order)."""
    core = Core(_at("clairvoyant"))
    core.reset(0)
    while core.view.now <= 0.0 or not core.view.running:
        visible, _ = core.next_choice(SLOTS)
        job = core.expert_job(core.heuristic("gittins").ordering, visible)
        core.advance() if job is None else core.start(job)
    assert core.engine is not None
    trial = lookahead.redrawn(core, np.random.default_rng(3))
    assert trial is not None and trial.engine is not None
    future = [j for j in range(core.num_jobs) if core.view.status_of(j) == JobStatus.FUTURE]
    assert future
    arrived = [j for j in range(core.num_jobs) if j not in future]
    assert _truth(trial, arrived) == _truth(core, arrived)
    drawn = _truth(trial, future)
    assert set(drawn.values()) <= set(_truth(core, arrived).values())
    assert drawn != _truth(core, future)
    times = [trial.engine.specs[j].submit_time for j in future]
    assert times == sorted(times) and times[0] >= core.view.now
    assert times != [core.engine.specs[j].submit_time for j in future]


def test_where_durations_are_estimates_the_work_beneath_them_is_redrawn() -> None:
    """At ``estimate`` the copy draws the work of every job not finished, each above its work
    done, and its view shows the run's estimates; two episodes apart only in the work beneath
    the estimates give copies that play out alike."""
    core = _after_finishes(4, config=_at("estimate"))
    assert core.engine is not None
    view = core.view
    trial = lookahead.redrawn(core, np.random.default_rng(2))
    assert trial is not None
    arrived = [j for j in _unfinished(core) if view.status_of(j) != JobStatus.FUTURE]
    truth, drawn = _truth(core, arrived), _truth(trial, arrived)
    assert all(view.state(j).work_done < drawn[j] != truth[j] for j in arrived)
    assert [trial.view.state(j).work_total for j in arrived] == pytest.approx(
        [view.state(j).work_total for j in arrived]
    )
    assert [trial.view.job(j).duration for j in arrived] == pytest.approx([view.job(j).duration for j in arrived])
    other = core.copy()
    assert other.engine is not None
    works = {j: w * 0.3 if w * 0.3 > view.state(j).work_done else w * 1.5 for j, w in truth.items()}
    other.engine.redraw(works, copy.deepcopy(core.engine.rng_speed))
    assert _truth(other, arrived) != truth
    guesses = [lookahead.redrawn(c, np.random.default_rng(7)) for c in (core, other)]
    metrics = [lookahead.play(g, "gittins", SLOTS).metrics for g in guesses if g is not None]
    assert len(metrics) == 2 and metrics[0]["avg_jct_s"] == pytest.approx(metrics[1]["avg_jct_s"], rel=1e-9)


def test_a_draw_above_the_work_done_has_the_estimate_for_median() -> None:
    """Log-normal about the estimate, with the error model's spread, conditioned on the work done."""
    rng = np.random.default_rng(0)
    free = np.array([lookahead._above(100.0, 0.0, 1.0, rng) for _ in range(4000)])
    assert 0.47 < np.mean(free < 100.0) < 0.53
    assert np.std(np.log(free)) == pytest.approx(1.0, abs=0.05)
    late = [lookahead._above(100.0, 90.0, 1.0, rng) for _ in range(1000)]
    # P(W < 100 | W > 90) for a median of 100: (0.5 - Phi(ln 0.9)) / (1 - Phi(ln 0.9)) = 0.078
    assert min(late) > 90.0 and 0.05 < np.mean(np.array(late) < 100.0) < 0.11
    assert lookahead._above(100.0, 30.0, 0.0, rng) == 100.0
