"""FitGpp, LRTP and RAND on hand-built engine scenarios (scores and event logs by hand), the
minimal preemption sets against brute force, invariants over random workloads, and ``te-be``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.engine import Engine, SimConfig
from envs.sim.model import V100, JobClass, JobSpec, Pool, ServerSpec
from heuristics.fitgpp import (
    Candidate,
    FitGppConfig,
    PreemptionConfig,
    fitgpp,
    fitgpp_score,
    lrtp,
    minimal_sets,
    rand,
)
from heuristics.registry import make

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)
TE, BE = JobClass.TE, JobClass.BE


class Linear:
    """rate = workers / requested x GPU speed: a job runs exactly its duration."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def job(i: int, submit: float, duration: float, gpus: int, cls: JobClass, grace: float = 0.0) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, "m", job_class=cls, grace_period=grace)


def servers(n: int, gpus: int = 8) -> list[ServerSpec]:
    return [ServerSpec(i, V100, gpus, Pool.TRAINING) for i in range(n)]


def run(srv, jobs, policy, config=NO_OVERHEAD):
    return Engine(srv, jobs, policy, Linear(), None, config, log=True).run()  # type: ignore[arg-type]


def events(r, *kinds):
    return [e for e in r.log if not kinds or e[1] in kinds]


# Two full 8-GPU servers of BE jobs, placed by the policy itself at t=0 (best fit, lowest id):
#   server 0: b0 (4 GPUs, GP 100 s), b1 (4 GPUs, GP 20 s)
#   server 1: b2 (2 GPUs, GP 300 s), b3 (6 GPUs, GP 10 s)
# A 2-GPU TE job arrives at t=10. GP_max = 300. The minimal sets (each one job) and scores:
#   {b0}: overfreed 2 -> s * 100/300 + (1 - s) * 2/8
#   {b1}: overfreed 2 -> s *  20/300 + (1 - s) * 2/8
#   {b2}: overfreed 0 -> s * 300/300 + (1 - s) * 0/8
#   {b3}: overfreed 4 -> s *  10/300 + (1 - s) * 4/8
# s = 0:   0.25, 0.25, 0, 0.5                     -> {b2}
# s = 0.5: 0.2917, 0.1583, 0.5, 0.2667            -> {b1}
# s = 1:   0.3333, 0.0667, 1, 0.0333              -> {b3}
GRACE = {0: 100.0, 1: 20.0, 2: 300.0, 3: 10.0}
REMAINING = {0: 1000.0, 1: 2000.0, 2: 3000.0, 3: 500.0}  # = durations (no progress lost by t=0)


def two_servers(te_submit: float = 10.0, extra: tuple[JobSpec, ...] = ()) -> list[JobSpec]:
    be = [job(i, 0.0, REMAINING[i], g, BE, GRACE[i]) for i, g in ((0, 4), (1, 4), (2, 2), (3, 6))]
    return [*be, job(4, te_submit, 50.0, 2, TE), *extra]


def hand_score(s: float, grace: float, overfreed: int) -> float:
    return s * grace / 300.0 + (1 - s) * overfreed / 8


@pytest.mark.parametrize("s, victim", [(0.0, 2), (0.5, 1), (1.0, 3)])
def test_fitgpp_preempts_the_set_with_the_lowest_score(s, victim):
    scores = {b: hand_score(s, GRACE[b], over) for b, over in ((0, 2), (1, 2), (2, 0), (3, 4))}
    assert min(scores, key=lambda b: scores[b]) == victim  # the hand computation above
    r = run(servers(2), two_servers(), fitgpp(FitGppConfig(s=s)))
    server = 0 if victim in (0, 1) else 1
    assert [e for e in events(r, "preempt", "start") if e[0] == 10.0 or e[2] == 4][:2] == [
        (10.0, "preempt", victim, "graceful"),
        (10.0 + GRACE[victim], "start", 4, f"s{server}x2"),
    ]
    assert r.preemptions.tolist() == [int(b == victim) for b in range(4)] + [0]
    assert r.finish[4] == 10.0 + GRACE[victim] + 50.0


def test_the_score_function_matches_the_hand_computation():
    c = Candidate(server=0, victims=(1,), freed=4, overfreed=2, max_grace=20.0, capacity=8)
    assert fitgpp_score(c, 0.5, 300.0) == pytest.approx(0.5 * 20 / 300 + 0.5 * 2 / 8)
    assert fitgpp_score(c, 0.5, 0.0) == pytest.approx(0.5 * 2 / 8)  # GP_max 0: the GP term is 0


def test_victim_resumes_after_the_te_job_in_its_old_place():
    # s = 0.5: b1 (GP 20) preempted at 10, TE runs 30..80 on server 0 beside 2 over-freed
    # GPUs; b1 (4 GPUs) is re-queued at 30 and resumes when the TE job frees its 2 at 80.
    r = run(servers(2), two_servers(), fitgpp())
    assert events(r, "preempt", "start", "finish")[4:8] == [
        (10.0, "preempt", 1, "graceful"),
        (30.0, "start", 4, "s0x2"),
        (80.0, "finish", 4, ""),
        (80.0, "start", 1, "s0x4"),
    ]
    # graceful: no work lost; b1 did 10 s, then 1990 s from 80
    assert r.finish[1] == 80.0 + 1990.0
    assert r.lost_work[1] == 0.0


@pytest.mark.parametrize("limit, victim", [(1, 3), (3, 1)])
def test_a_be_job_at_its_preemption_limit_is_never_chosen(limit, victim):
    # the first TE job (t=10) preempts b1 as above; b1 is back on server 0 from 80. A second TE
    # job at t=100 meets the same cluster, but b1 has been preempted once: with a limit of 1 it
    # is no longer a candidate and the next best set, {b3} (0.2667 < 0.2917 < 0.5), is chosen.
    second = job(5, 100.0, 50.0, 2, TE)
    r = run(servers(2), two_servers(extra=(second,)), fitgpp(FitGppConfig(max_preemptions=limit)))
    assert [e[2] for e in events(r, "preempt")] == [1, victim]
    assert r.preemptions[1] == (1 if limit == 1 else 2)


def test_no_candidate_left_means_the_te_job_waits_at_the_head_like_fifo():
    # max_preemptions 0: nothing is preempted; the TE job waits until b3 (6 GPUs, 500 s) ends.
    r = run(servers(2), two_servers(), fitgpp(FitGppConfig(max_preemptions=0)))
    assert events(r, "preempt") == []
    assert (500.0, "start", 4, "s1x2") in events(r, "start")


def test_lrtp_preempts_the_longest_remaining_job_and_rand_draws_from_the_candidates():
    r = run(servers(2), two_servers(), lrtp())
    assert events(r, "preempt") == [(10.0, "preempt", 2, "graceful")]  # b2: 3000 s left
    # RAND: candidates in order server 0 {b0}, {b1}, server 1 {b2}, {b3}; one integers(4) draw
    chosen = set()
    for seed in range(12):
        policy = rand()
        policy.use_rng(np.random.default_rng(seed))
        r = run(servers(2), two_servers(), policy)
        expected = int(np.random.default_rng(seed).integers(4))
        assert events(r, "preempt") == [(10.0, "preempt", expected, "graceful")]
        chosen.add(expected)
    assert chosen == {0, 1, 2, 3}


def test_the_te_job_starts_exactly_when_the_slowest_victim_has_checkpointed():
    # one server with four 2-GPU BE jobs (GP 10, 40, 70, 100) and a 2-GPU BE job b4 queued
    # behind them. A 4-GPU TE job at t=5 needs a pair; s = 1 picks the pair with the smallest
    # largest GP: {b0, b1} (max 40). b0 frees its GPUs at 15, but neither b4 nor b0 (re-queued)
    # may take them: they are reserved. The TE job starts at 5 + 40 = 45.
    jobs = [job(i, 0.0, 1000.0, 2, BE, gp) for i, gp in enumerate((10.0, 40.0, 70.0, 100.0))]
    jobs += [job(4, 0.0, 100.0, 2, BE, 0.0), job(5, 5.0, 20.0, 4, TE)]
    r = run(servers(1), jobs, fitgpp(FitGppConfig(s=1.0)))
    assert events(r, "preempt", "start", "finish")[4:9] == [
        (5.0, "preempt", 0, "graceful"),
        (5.0, "preempt", 1, "graceful"),
        (45.0, "start", 5, "s0x4"),
        (65.0, "finish", 5, ""),
        (65.0, "start", 0, "s0x2"),
    ]
    assert r.queued[5] == 40.0


def test_a_te_job_can_wait_for_gpus_already_being_freed_without_preempting_more():
    # b0 (4 GPUs, GP 100) is preempted for TE job t1 (2 GPUs, s = 1 prefers GP 100 over GP 200
    # of b1); that frees 2 GPUs beyond t1's need. A second 2-GPU TE job t2 arriving during the
    # grace period is covered by them: it reserves them and preempts nothing.
    jobs = [job(0, 0.0, 1000.0, 4, BE, 100.0), job(1, 0.0, 1000.0, 4, BE, 200.0)]
    jobs += [job(2, 10.0, 50.0, 2, TE), job(3, 20.0, 50.0, 2, TE)]
    r = run(servers(1), jobs, fitgpp(FitGppConfig(s=1.0)))
    assert events(r, "preempt") == [(10.0, "preempt", 0, "graceful")]
    assert events(r, "start")[2:4] == [(110.0, "start", 2, "s0x2"), (110.0, "start", 3, "s0x2")]


def test_a_victim_without_grace_period_frees_its_gpus_at_once():
    jobs = [job(0, 0.0, 1000.0, 8, BE, 0.0), job(1, 10.0, 50.0, 1, TE)]
    r = run(servers(1), jobs, fitgpp())
    assert events(r, "preempt", "start", "finish") == [
        (0.0, "start", 0, "s0x8"),
        (10.0, "preempt", 0, "lost 0"),
        (10.0, "start", 1, "s0x1"),
        (60.0, "finish", 1, ""),
        (60.0, "start", 0, "s0x8"),
        (1050.0, "finish", 0, ""),
    ]


def test_te_jobs_go_first_and_a_te_job_larger_than_a_server_is_not_served_by_preemption():
    # b0 runs on both servers' GPUs; BE b1 queued at 1, 16-GPU TE t2 at 2: t2 jumps b1 but has
    # no server to preempt on, so it waits for b0's end (100) and b1 after it.
    jobs = [job(0, 0.0, 100.0, 16, BE, 10.0), job(1, 1.0, 10.0, 1, BE), job(2, 2.0, 10.0, 16, TE)]
    r = run(servers(2), jobs, fitgpp())
    assert events(r, "preempt") == []
    assert events(r, "start")[1:] == [(100.0, "start", 2, "s0x8 s1x8"), (110.0, "start", 1, "s0x1")]


def test_minimal_sets_match_brute_force():
    sizes = [1, 2, 2, 4, 1]
    for deficit in range(0, 12):
        brute = []
        for k in range(len(sizes) + 1):
            for p in itertools.combinations(range(len(sizes)), k):
                ok = sum(sizes[i] for i in p) >= deficit
                if ok and not any(
                    sum(sizes[i] for i in q) >= deficit for j in range(len(p)) for q in [p[:j] + p[j + 1 :]]
                ):
                    brute.append(p)
        assert sorted(minimal_sets(deficit, sizes)) == sorted(brute)
    assert minimal_sets(0, [3]) == [()]
    assert minimal_sets(5, [1, 2]) == []


def test_configs_are_validated_and_settable():
    with pytest.raises(ConfigError, match=r"'s=1.5' must be in \[0, 1\]"):
        make("fitgpp", {"s": "1.5"})
    with pytest.raises(ConfigError, match="max_preemptions"):
        make("lrtp", {"max_preemptions": "-1"})
    assert make("fitgpp", {"s": "0.25"}).choice.s == 0.25  # type: ignore[attr-defined]
    assert make("rand", {"max_preemptions": "5"}).max_preemptions == 5  # type: ignore[attr-defined]
    assert FitGppConfig().s == 0.5 and PreemptionConfig().max_preemptions == 3


@st.composite
def workloads(draw):
    n = draw(st.integers(3, 14))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 5.0, 30.0, 200.0]))
        te = draw(st.booleans())
        gpus = draw(st.sampled_from([1, 2] if te else [1, 2, 4, 8]))
        duration = draw(st.sampled_from([20.0, 100.0, 700.0] if te else [100.0, 900.0, 3000.0]))
        grace = draw(st.sampled_from([0.0, 15.0, 60.0, 250.0]))
        jobs.append(job(i, t, duration, gpus, TE if te else BE, grace))
    return jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(["fitgpp", "lrtp", "rand"]), st.integers(0, 3))
def test_invariants_on_random_workloads(jobs, name, limit):
    policy = make(name, {"max_preemptions": str(limit)})
    cfg = SimConfig(restart_base_s=3.0, restart_per_gpu_s=0.5, checkpoint_interval_s=50.0, sample_s=0.0)
    r = run(servers(2), jobs, policy, cfg)
    te = np.array([j.job_class == TE for j in jobs])
    assert not r.truncated and np.isfinite(r.finish).all()  # every job finishes, no deadlock
    assert (r.preemptions[te] == 0).all()  # TE jobs are never preempted
    assert (r.preemptions[~te] <= limit).all()  # the starvation bound
    assert policy.reservations == {}  # type: ignore[attr-defined]
    np.testing.assert_allclose(r.work_done, r.work)


def test_te_be_scenario_shapes():
    b = scenarios.build(scenarios.get("te-be"), 0)
    te = np.array([j.job_class == TE for j in b.jobs])
    gpu_s = np.array([j.num_gpus * j.duration for j in b.jobs])
    assert len(b.jobs) == 4000 and b.demand is None
    assert 0.5 < te.mean() < 0.65  # TE: the majority of arrivals
    assert gpu_s[~te].sum() / gpu_s.sum() > 0.9  # BE: most of the GPU-hours
    assert max(j.num_gpus for j in b.jobs if j.job_class == TE) <= 2
    assert max(j.num_gpus for j in b.jobs) <= 8
    assert all(30.0 <= j.grace_period <= 600.0 for j in b.jobs)


def test_same_seed_same_result():
    s = scenarios.get("te-be", {"workload.synthetic.num_jobs": "120"})
    a = scenarios.simulate(s, make("rand"), 3)
    b = scenarios.simulate(s, make("rand"), 3)
    np.testing.assert_array_equal(a.finish, b.finish)
    np.testing.assert_array_equal(a.preemptions, b.preemptions)
