"""Shockwave's planner, estimates and round execution; the ``dynamic`` scenario; themis / maxmin."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.sim.config import ConfigError
from envs.sim.engine import Engine, SimConfig
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Action, ClusterView, Preempt, Start
from envs.sim.scenarios import base, get
from envs.sim.scenarios.dynamic import (
    DynamicConfig,
    accordion_phases,
    adapt_jobs,
    family,
    gns_phases,
    isolated_factor,
)
from heuristics.registry import make
from heuristics.shockwave_estimate import RegimeObserver, dirichlet_estimate, smoothed
from heuristics.shockwave_plan import (
    LOG_POINTS,
    PlanInput,
    chord_lines,
    greedy,
    log_envelope,
    next_round,
    objective,
    pack,
    solve,
)
from heuristics.shockwave_rounds import round_actions

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)


class _Linear:
    """rate = workers / requested (easy to hand-compute)."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type: Any) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def Linear() -> Any:
    return _Linear()


def job(i: int, submit: float, duration: float, gpus: int, model: str = "m", **kw: Any) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, model, **kw)


def log_of(r: Any) -> list[tuple[float, str, int, str]]:
    assert r.log is not None
    return list(r.log)


def servers(n: int, gpus: int = 8) -> list[ServerSpec]:
    return [ServerSpec(i, V100, gpus, Pool.TRAINING) for i in range(n)]


# ----------------------------------------------------------------------------- the planner
def hand_example(rounds: int) -> PlanInput:
    # 2 GPUs; j0: 1 GPU, half done, 240 s left; j1: 1 GPU, new, 480 s; j2: 2 GPUs, 20% done, 600 s
    return PlanInput(
        gpus=np.array([1, 1, 2]),
        remaining=np.array([240.0, 480.0, 600.0]),
        progress=np.array([0.5, 0.0, 0.2]),
        weights=np.ones(3),
        capacity=2,
        rounds=rounds,
        round_s=120.0,
        k=1e-3,
    )


def brute_force(inp: PlanInput) -> list[tuple[float, tuple[int, ...]]]:
    """Every feasible x, best first: (objective, rounds per job)."""
    out = []
    for bits in itertools.product((False, True), repeat=inp.n * inp.rounds):
        x = np.array(bits).reshape(inp.n, inp.rounds)
        if np.any(inp.gpus @ x > inp.capacity) or np.any(x.sum(axis=1) > inp.need()):
            continue
        out.append((objective(inp, x), tuple(int(c) for c in x.sum(axis=1))))
    return sorted(out, reverse=True)


def test_hand_example_two_rounds():
    # Best: each job one round. y = (120, 120, 120): progress 0.75, 0.25, 0.36, remaining 120, 360,
    # 480. Envelope values (tangents at 0.7, 0.2, 0.35): log .7 + .05/.7 = -0.28525,
    # log .2 + .05/.2 = -1.35944, log .35 + .01/.35 = -1.02126; sum / (3 * 2) - 1e-3 * 480.
    # Runner-up: j0, j1 both rounds, j2 none: (0 - 0.69315 - 1.60944) / 6 - 0.6 = -0.98376.
    inp = hand_example(2)
    expected = (-0.28525 - 1.35944 - 1.02126) / 6 - 0.48
    plan = solve(inp)
    assert plan.status == "optimal"
    assert plan.objective == pytest.approx(expected, abs=1e-5)
    assert plan.x.sum(axis=1).tolist() == [1, 1, 1]
    assert np.all(inp.gpus @ plan.x <= 2)
    best = brute_force(inp)
    assert best[0] == (pytest.approx(plan.objective), (1, 1, 1))
    assert best[0][0] - max(v for v, n in best if n != (1, 1, 1)) == pytest.approx(-0.92432 + 0.98376, abs=1e-4)


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_planner_matches_brute_force(rounds):
    inp = hand_example(rounds)
    plan = solve(inp)
    best = brute_force(inp)
    assert plan.objective == pytest.approx(best[0][0], abs=1e-7)
    assert tuple(plan.x.sum(axis=1)) in {n for v, n in best if v == pytest.approx(best[0][0], abs=1e-9)}


def test_counts_that_do_not_pack_fall_back_to_the_full_milp():
    # 8 GPUs, 2 rounds: an 8-GPU job for one round and a 4-GPU job for both fill 16 GPU-rounds,
    # but the 4-GPU job cannot share a round with the 8-GPU one
    assert pack(np.array([1, 2]), np.array([8, 4]), 8, 2) is None
    trimmed = pack(np.array([1, 2]), np.array([8, 4]), 8, 2, trim=True)
    assert trimmed is not None and trimmed.astype(int).tolist() == [[1, 0], [0, 1]]
    packed = pack(np.array([1, 1, 1]), np.array([8, 4, 4]), 8, 2)
    assert packed is not None and packed.astype(int).tolist() == [[1, 0], [0, 1], [0, 1]]
    inp = PlanInput(
        np.array([8, 4, 4]),
        np.array([240.0, 240.0, 900.0]),
        np.array([0.9, 0.0, 0.0]),
        np.array([1.0, 50.0, 1.0]),
        8,
        2,
        120.0,
        1e-3,
    )
    plan = solve(inp)
    assert plan.objective == pytest.approx(brute_force(inp)[0][0], abs=1e-9)


def test_three_rounds_give_the_two_gpu_job_two():
    assert solve(hand_example(3)).x.sum(axis=1).tolist() == [1, 1, 2]


@given(st.floats(min_value=1e-4, max_value=1.0))
def test_log_envelope_is_above_log_and_exact_at_its_points(p):
    assert log_envelope(p) >= math.log(p) - 1e-12
    for q in LOG_POINTS:
        assert log_envelope(q) == pytest.approx(math.log(q), abs=1e-12)


def test_chords_interpolate_log_between_shockwave_bases():
    lines = chord_lines((0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
    for b in (0.2, 0.4, 0.6, 0.8, 1.0):
        assert log_envelope(b, lines) == pytest.approx(math.log(b))
    assert log_envelope(0.0, lines) == pytest.approx(math.log(1e-6))
    assert log_envelope(0.3, lines) == pytest.approx((math.log(0.2) + math.log(0.4)) / 2)


def test_fairness_bound_forces_a_job_in():
    # j1's bound: at least 240 s in the window -> two rounds, though the objective prefers one each
    inp = dataclasses.replace(hand_example(2), lower=np.array([0.0, 240.0, 0.0]))
    plan = solve(inp)
    assert plan.x.sum(axis=1)[1] == 2
    assert plan.objective == pytest.approx(max(v for v, n in brute_force(inp) if n[1] == 2))


def test_unmeetable_fairness_bound_is_infeasible():
    # j2 would need 3 rounds of a 2-round window
    plan = solve(dataclasses.replace(hand_example(2), lower=np.array([0.0, 0.0, 360.0])))
    assert plan.status == "infeasible"
    # each bound alone fits, together they need 2 + 2 + 2 * 2 = 8 GPU-rounds of 4
    both = solve(dataclasses.replace(hand_example(2), lower=np.array([240.0, 240.0, 240.0])))
    assert both.status == "infeasible"


plans = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n),
        st.lists(st.floats(10.0, 5000.0), min_size=n, max_size=n),
        st.lists(st.floats(0.1, 20.0), min_size=n, max_size=n),
        st.integers(1, 8),
        st.sampled_from([8, 16]),
    )
)


@given(plans)
@settings(max_examples=60, deadline=None)
def test_greedy_and_next_round_respect_capacity_and_rounds(case):
    gpus, remaining, weights, rounds, cap = case
    inp = PlanInput(
        np.array(gpus), np.array(remaining), np.zeros(len(gpus)), np.array(weights), cap, rounds, 120.0, 1e-3
    )
    x = greedy(inp)
    assert np.all(inp.gpus @ x <= cap)
    assert np.all(x.sum(axis=1) <= inp.need())
    counts = x.sum(axis=1)
    chosen = next_round(counts, rounds, inp.gpus, cap, list(range(inp.n))[::-1])
    assert len(set(chosen)) == len(chosen) and all(counts[j] > 0 for j in chosen)
    assert inp.gpus[chosen].sum() <= cap
    # a job with as many rounds as are left runs (the greedy plan fits, so they all fit)
    assert {j for j in range(inp.n) if counts[j] >= rounds} <= set(chosen)


def test_next_round_runs_the_must_runs_then_follows_the_order():
    # 3 rounds left, 3 GPUs: job 3 (2 GPUs) has 3 rounds: it must run; then job 1 fits, job 0 not
    assert next_round(np.array([2, 1, 0, 3]), 3, np.array([1, 1, 1, 2]), 3, [1, 0, 3, 2]) == [3, 1]
    # with two rounds left job 0 (2 rounds) must run too, ahead of job 1
    assert next_round(np.array([2, 1, 0, 1]), 2, np.array([1, 1, 1, 2]), 3, [1, 0, 3, 2]) == [0, 1]


# ----------------------------------------------------------------------------- estimates
def test_dirichlet_estimate_hand_values():
    # regimes {1, 2}, nothing seen: half the work expected at each -> W (0.5 + 0.5 / 2)
    assert dirichlet_estimate(1000.0, 0.0, {}, (1.0, 2.0)) == pytest.approx((0.0, 750.0, 0.0))
    # half the work seen at 1: concentrations 1/2 + 1/2 and 1/2, total 3/2 -> shares 2/3, 1/3;
    # left: 2/3 - 1/2 = 1/6 at 1 and 1/3 at 2 (sum 1/2 = the work left) -> W (1/6 + 1/6)
    d, rem, iso = dirichlet_estimate(1000.0, 500.0, {1.0: 500.0}, (1.0, 2.0))
    assert (d, rem, iso) == pytest.approx((0.5, 1000.0 / 3.0, 500.0))
    # a regime seen but not declared joins the set: {1, 2, 4}, 200 seen at 4
    d, rem, iso = dirichlet_estimate(1000.0, 200.0, {4.0: 200.0}, (1.0, 2.0))
    # conc 1/3, 1/3, 1/3 + 1/5, total 6/5 -> shares 5/18, 5/18, 4/9; left 5/18, 5/18, 4/9 - 1/5
    q = np.array([5 / 18, 5 / 18, 4 / 9 - 0.2])
    q *= 0.8 / q.sum()
    assert rem == pytest.approx(1000.0 * (q[0] + q[1] / 2 + q[2] / 4))
    assert iso == pytest.approx(50.0)


def test_smoothed_fair_finish_hand_values():
    # 100 for 10 s then 200 for 20 s: average 500/3; 0.9 * 166.67 + 0.1 * 200
    assert smoothed([(0.0, 100.0), (10.0, 200.0)], 30.0, 0.9) == pytest.approx(170.0)
    assert smoothed([(5.0, 100.0)], 5.0, 0.9) == pytest.approx(100.0)


class Watcher:
    """Starts job 0 at t=0 and records what the observer sees (a round every 120 s)."""

    name = "watcher"
    borrows = False
    round_s: float | None = 120.0

    def __init__(self) -> None:
        self.observer = RegimeObserver()

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self.observer.observe(view)
        if view.now == 0.0:
            yield Start(0, ((0, 1),))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return []


def test_observer_locates_a_speed_change_between_rounds():
    # twice as fast from half the work: W = 1000 (500 + 250 = 750 s); the change at t = 500 falls
    # between the observations at 480 (w = 480) and 600 (w = 700): 20 s more at x1 -> w = 500.
    j = job(0, 0.0, 750.0, 1, speed_phases=((0.0, 1.0), (0.5, 2.0)), speed_regimes=(1.0, 2.0))
    w = Watcher()
    Engine(servers(1), [j], w, Linear(), None, NO_OVERHEAD).run()
    iv = w.observer.belief(0).intervals
    assert [m for _, _, m in iv] == [1.0, 2.0]
    assert iv[0][0] == 0.0 and iv[0][1] == pytest.approx(500.0) and iv[1][0] == pytest.approx(500.0)
    assert w.observer.shares(0, 700.0) == pytest.approx({1.0: 500.0, 2.0: 200.0})


# ----------------------------------------------------------------------------- round execution
class Once:
    """Runs a script at t=0 and then the candidates list through round_actions at t=100."""

    name = "once"
    borrows = False
    round_s: float | None = 100.0

    def __init__(self, script: list[Action], candidates: list[int]) -> None:
        self.script, self.candidates = script, candidates
        self.actions: list[Action] = []

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if view.now == 0.0:
            yield from self.script
        elif view.now == 100.0:
            self.actions = list(round_actions(view, self.candidates))
            yield from self.actions

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return []


def test_round_actions_preempt_pack_and_start():
    # two 8-GPU servers; A (1 GPU) runs on s0, B (4 GPUs) on s1, C (8 GPUs) waits. Candidates C, A:
    # 9 GPUs of 16, so B (not a candidate) is preempted; C goes to s1, where it displaces no one
    # still wanted (s0 would displace A); A stays.
    jobs = [job(0, 0.0, 1e4, 1), job(1, 0.0, 1e4, 4), job(2, 0.0, 1e4, 8)]
    p = Once([Start(0, ((0, 1),)), Start(1, ((1, 4),))], [2, 0])
    Engine(servers(2), jobs, p, Linear(), None, NO_OVERHEAD).run()
    assert p.actions == [Preempt(1), Start(2, ((1, 8),))]


def test_round_actions_fill_with_later_candidates_that_fit():
    # 8 GPUs: candidates 8-GPU job then two 1-GPU jobs; the 8-GPU one does not fit beside the
    # running 4-GPU job, which is not a candidate and so leaves; then 8 + 1 > 8: the 1-GPU ones wait
    jobs = [job(0, 0.0, 1e4, 4), job(1, 0.0, 1e4, 8), job(2, 0.0, 1e4, 1), job(3, 0.0, 1e4, 1)]
    p = Once([Start(0, ((0, 4),))], [1, 2, 3])
    Engine(servers(1), jobs, p, Linear(), None, NO_OVERHEAD).run()
    assert p.actions == [Preempt(0), Start(1, ((0, 8),))]
    # candidates in the other order: the small ones first, then 4 GPUs of room are left
    p = Once([Start(0, ((0, 4),))], [2, 3, 1, 0])
    Engine(servers(1), jobs, p, Linear(), None, NO_OVERHEAD).run()
    assert p.actions == [Start(2, ((0, 1),)), Start(3, ((0, 1),))]


# ----------------------------------------------------------------------------- policies end to end
class Blind:
    """Hands the inner policy a view whose specs hide ``duration`` and ``speed_phases``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.borrows, self.round_s = inner.name, inner.borrows, inner.round_s

    def decide(self, view: ClusterView) -> Iterator[Action]:
        return self.inner.decide(_BlindView(view))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self.inner.reclaim(view, k))


class _BlindView:
    def __init__(self, view: ClusterView) -> None:
        self._v = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._v, name)

    def job(self, j: int) -> JobSpec:
        return dataclasses.replace(self._v.job(j), duration=math.nan, speed_phases=())


def small_dynamic_jobs() -> list[JobSpec]:
    rng = np.random.default_rng(3)
    jobs = []
    for i in range(14):
        g = int(rng.choice([1, 1, 2, 4]))
        model = ["resnet50", "cifar10", "bert", "deepspeech2"][i % 4]
        jobs.append(job(i, 60.0 * i, float(rng.uniform(600, 4000)), g, model=model))
    return adapt_jobs(jobs, DynamicConfig(), np.random.default_rng(4))


@pytest.mark.parametrize(
    ("policy", "sets"),
    [("shockwave", {}), ("themis", {}), ("themis", {"allocation": "shares"}), ("maxmin", {})],
    ids=["shockwave", "themis", "themis-shares", "maxmin"],
)
def test_policies_never_read_the_ground_truth(policy, sets):
    jobs = small_dynamic_jobs()
    cfg = SimConfig(checkpoint_interval_s=0.0, sample_s=0.0)
    seen = Engine(servers(1), jobs, make(policy, sets), None, None, cfg, log=True).run()
    blind = Engine(servers(1), jobs, Blind(make(policy, sets)), None, None, cfg, log=True).run()
    assert seen.log == blind.log
    assert np.isfinite(seen.finish).all()
    assert seen.preemptions.sum() > 0  # the comparison covers preemptions too


def test_shockwave_acts_only_at_round_boundaries_and_finishes_everything():
    jobs = small_dynamic_jobs()
    cfg = SimConfig(checkpoint_interval_s=0.0, sample_s=0.0)
    r = Engine(servers(1), jobs, make("shockwave"), None, None, cfg, log=True).run()
    acts = [t for t, what, _, _ in log_of(r) if what in ("start", "preempt", "migrate")]
    assert acts and all(t % 120.0 == 0.0 for t in acts)
    assert np.isfinite(r.finish).all()


def test_themis_serves_the_worst_finish_time_fairness_first():
    # one GPU; j0 (1,000 s) arrived at 0 and ran; j1 (200 s) arrives at 100. At the round at 360,
    # j0 ran its 3-round lease (360 s done: rho_hat = (360 + 640) / 1000 = 1.0); j1 waited 260 s
    # (rho_hat = (260 + 200) / 200 = 2.3): j1 runs next.
    jobs = [job(0, 0.0, 1000.0, 1), job(1, 100.0, 200.0, 1)]
    r = Engine(servers(1, 1), jobs, make("themis"), Linear(), None, NO_OVERHEAD, log=True).run()
    assert [(t, w, j) for t, w, j, _ in log_of(r) if w in ("start", "preempt", "finish")][:4] == [
        (0.0, "start", 0),
        (360.0, "preempt", 0),
        (360.0, "start", 1),
        (560.0, "finish", 1),
    ]


def test_maxmin_serves_the_least_normalised_throughput_first():
    # one GPU, two 600-s jobs at 0: j0 runs rounds 0-2 (its lease), then j1 (0 done) goes first
    jobs = [job(0, 0.0, 600.0, 1), job(1, 0.0, 600.0, 1)]
    r = Engine(servers(1, 1), jobs, make("maxmin"), Linear(), None, NO_OVERHEAD, log=True).run()
    starts = [(t, j) for t, w, j, _ in log_of(r) if w == "start"]
    assert starts[:3] == [(0.0, 0), (360.0, 1), (720.0, 0)]


# ----------------------------------------------------------------------------- the scenario
def test_batch_families_come_from_the_profiles():
    got = {m: (f.b0, f.b_max, len(f.gns)) for m in ("resnet50", "cifar10", "bert", "deepspeech2") if (f := family(m))}
    assert got == {
        "resnet50": (20, 200, 3),
        "cifar10": (32, 725, 4),
        "bert": (4, 12, 1),
        "deepspeech2": (10, 40, 2),
    }
    for m in got:
        f = family(m)
        assert f is not None and f.gns[0] > 1.0 and list(f.gns) == sorted(f.gns) and f.accordion >= f.gns[-1]
    assert family("gpt2") is None


def test_phase_schedules_and_isolated_durations():
    f = family("bert")
    assert f is not None
    acc = accordion_phases(f, 0.1, DynamicConfig())
    a = f.accordion
    assert acc == ((0.0, 1.0), (0.1, a), (0.5, 1.0), (0.55, a), (0.75, 1.0), (0.8, a))
    assert isolated_factor(acc) == pytest.approx(0.1 + 0.4 / a + 0.05 + 0.2 / a + 0.05 + 0.2 / a)
    assert gns_phases(f) == ((0.0, 1.0), (0.5, f.gns[0]))
    assert isolated_factor(((0.0, 1.0), (0.5, 2.0))) == pytest.approx(0.75)


def test_repository_isolated_duration_widens_accordions_first_critical_regime():
    """benchmarks/shockwave_fairness.py: the repository's profile keeps b0 for 30% of the work."""
    from benchmarks.shockwave_fairness import repo_isolated

    f = family("bert")
    assert f is not None
    a = f.accordion
    drawn = 1000.0
    acc = accordion_phases(f, 0.1, DynamicConfig())
    j = dataclasses.replace(job(0, 0.0, drawn, 1, model="bert"), speed_phases=acc)
    j = dataclasses.replace(j, duration=drawn * isolated_factor(acc))
    assert repo_isolated(j) == pytest.approx(drawn * (0.3 + 0.2 / a + 0.05 + 0.2 / a + 0.05 + 0.2 / a))
    assert repo_isolated(j) > j.duration
    gns = gns_phases(f)
    g = dataclasses.replace(j, speed_phases=gns, duration=drawn * isolated_factor(gns))
    assert repo_isolated(g) == g.duration  # GNS and static jobs: as ours
    assert repo_isolated(dataclasses.replace(j, speed_phases=())) == j.duration


def test_fairness_benchmark_takes_a_policys_settings():
    """benchmarks/shockwave_fairness.py --policies NAME:KEY=VALUE;KEY=VALUE."""
    from benchmarks.shockwave_fairness import policy_of

    assert policy_of("themis") == ("themis", {})
    assert policy_of("themis:allocation=shares") == ("themis", {"allocation": "shares"})
    assert policy_of("themis:allocation=shares;round_s=60") == ("themis", {"allocation": "shares", "round_s": "60"})
    with pytest.raises(ConfigError):
        policy_of("themis:allocation")


def test_chords_need_two_breakpoints_a_users_error():
    from heuristics.registry import make

    make("shockwave", {"log_approx": "chord", "log_points": "0;0.5;1"})
    with pytest.raises(ConfigError, match="at least 2 breakpoints"):
        make("shockwave", {"log_approx": "chord", "log_points": "0.5"})


def test_adapt_jobs_modes_durations_and_regimes():
    jobs = [job(i, 0.0, 1000.0, 1, model="cifar10") for i in range(3)] + [job(3, 0.0, 1000.0, 1, model="gpt2")]
    fam = family("cifar10")
    assert fam is not None
    gns = adapt_jobs(jobs, DynamicConfig(mode_mix=(0.0, 0.0, 1.0)), np.random.default_rng(0))
    assert gns[0].speed_phases == gns_phases(fam)
    assert gns[0].duration == pytest.approx(1000.0 * isolated_factor(gns_phases(fam)))
    assert gns[0].speed_regimes == fam.regimes
    assert gns[3] == jobs[3]  # an unprofiled model stays static
    static = adapt_jobs(jobs, DynamicConfig(mode_mix=(1.0, 0.0, 0.0)), np.random.default_rng(0))
    assert static[0].speed_phases == () and static[0].duration == 1000.0 and static[0].speed_regimes == fam.regimes
    a = adapt_jobs(jobs, DynamicConfig(), np.random.default_rng(7))
    assert a == adapt_jobs(jobs, DynamicConfig(), np.random.default_rng(7))


def test_dynamic_scenario_builds_shockwave_jobs():
    b = base.build(get("dynamic"), 0)
    assert len(b.jobs) == 120
    assert sum(s.num_gpus for s in b.servers) == 32 and all(s.pool == Pool.TRAINING for s in b.servers)
    assert {j.num_gpus for j in b.jobs} <= {1, 2, 4, 8}
    assert all(j.speed_phases and j.speed_regimes for j in b.jobs)
    assert all(j.duration < 18000.0 for j in b.jobs)
    # 90 arrivals per hour: 120 jobs in about 80 minutes
    assert 0.9 < b.jobs[-1].submit_time / 3600.0 < 1.9
    big = base.build(get("dynamic", {"workload.synthetic.num_jobs": "900", "cluster.training_servers": "32"}), 0)
    assert len(big.jobs) == 900 and big.jobs[-1].submit_time < 2.0 * b.jobs[-1].submit_time


def test_lag_from_start_is_lag_from_submit_when_every_job_arrives_at_zero():
    # rho_hat measured from submission (ours) or from time 0 (the repository's absolute
    # timestamps) differ only by each job's submit time: with all jobs at 0 the runs are the same,
    # with arrivals spread they need not be
    def runs(submits: list[float]) -> list[list[tuple[float, str, int, str]]]:
        jobs = [job(i, s, 900.0 + 300.0 * i, 4) for i, s in enumerate(submits)]
        return [
            log_of(
                Engine(
                    servers(1), jobs, make("shockwave", {"lag_from": lag}), Linear(), None, NO_OVERHEAD, log=True
                ).run()
            )
            for lag in ("submit", "start")
        ]

    same = runs([0.0] * 6)
    assert same[0] == same[1]
    spread = runs([0.0, 0.0, 600.0, 1200.0, 1800.0, 2400.0])
    assert spread[0] != spread[1]
