"""Engine tests on tiny hand-built scenarios whose event logs and JCTs are computed by hand."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from envs.sim import scenarios
from envs.sim.config import apply_overrides
from envs.sim.engine import DecisionError, Engine, SimConfig
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.metrics import summarize
from envs.sim.model import A100, T4, V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Action, ClusterView, Migrate, Preempt, Scale, Start
from heuristics.registry import make

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)


class Linear:
    """Perfectly linear scaling: rate = workers / requested x GPU speed (easy to hand-compute)."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


class Scripted:
    """Does exactly what the script says at the given times (a round every ``round_s``)."""

    name = "scripted"

    def __init__(self, script: dict[float, list[Action]], round_s: float = 100.0, borrows: bool = False):
        self.script = script
        self.round_s = round_s
        self.borrows = borrows
        self.reclaimed: list[int] = []

    def decide(self, view: ClusterView) -> Iterator[Action]:
        yield from self.script.pop(view.now, [])

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        chosen = list(view.loaned_servers())[-k:]
        self.reclaimed += chosen
        return chosen


def job(
    i: int, submit: float, duration: float, gpus: int, lo: int | None = None, hi: int | None = None, **kw
) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, lo or gpus, hi or gpus, "m", **kw)


def servers(n: int, gpus: int = 8) -> list[ServerSpec]:
    return [ServerSpec(i, V100, gpus, Pool.TRAINING) for i in range(n)]


def run(srv, jobs, policy, config=NO_OVERHEAD, demand=None):
    return Engine(srv, jobs, policy, Linear(), demand, config, log=True).run()


def events(r, *kinds):
    return [e for e in r.log if not kinds or e[1] in kinds]


def test_fifo_head_of_line_blocking_event_log():
    # one 8-GPU server. j0 (4 GPUs, 100 s) at 0; j1 (8 GPUs, 50 s) at 10 must wait for j0;
    # j2 (1 GPU, 10 s) at 20 fits beside j0 but FIFO keeps it behind j1.
    jobs = [job(0, 0, 100, 4), job(1, 10, 50, 8), job(2, 20, 10, 1)]
    r = run(servers(1), jobs, make("fifo"))
    assert events(r, "start", "finish") == [
        (0.0, "start", 0, "s0x4"),
        (100.0, "finish", 0, ""),
        (100.0, "start", 1, "s0x8"),
        (150.0, "finish", 1, ""),
        (150.0, "start", 2, "s0x1"),
        (160.0, "finish", 2, ""),
    ]
    np.testing.assert_array_equal(r.finish - r.submit, [100.0, 140.0, 140.0])
    np.testing.assert_array_equal(r.queued, [0.0, 90.0, 130.0])


def test_sjf_backfills_the_small_job():
    jobs = [job(0, 0, 100, 4), job(1, 10, 50, 8), job(2, 20, 10, 1)]
    r = run(servers(1), jobs, make("sjf"))
    # j2 starts at once beside j0 (backfill), j1 waits for j0
    np.testing.assert_array_equal(r.finish, [100.0, 150.0, 30.0])


def test_restart_overhead_and_spread_gang():
    # 12-GPU job on two 8-GPU servers: overhead 30 + 12 x 1 = 42 s, then 100 s of work
    cfg = SimConfig(restart_base_s=30.0, restart_per_gpu_s=1.0, checkpoint_interval_s=0.0, sample_s=0.0)
    r = run(servers(2), [job(0, 5, 100, 12)], make("fifo"), cfg)
    assert events(r, "start") == [(5.0, "start", 0, "s0x8 s1x4")]
    assert r.finish[0] == 5.0 + 42.0 + 100.0
    assert r.queued[0] == 0.0


def test_preemption_loses_work_since_last_checkpoint():
    # 1 GPU job of 1000 s; preempted at 500 with checkpoints every 300 s of work: 200 s lost.
    # Restarted at once: 700 s left -> finish at 1200.
    cfg = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=300.0, sample_s=0.0)
    script = {0.0: [Start(0, ((0, 1),))], 500.0: [Preempt(0), Start(0, ((0, 1),))]}
    r = run(servers(1), [job(0, 0, 1000, 1)], Scripted(script), cfg)
    assert events(r, "start", "preempt", "finish") == [
        (0.0, "start", 0, "s0x1"),
        (500.0, "preempt", 0, "lost 200"),
        (500.0, "start", 0, "s0x1"),
        (1200.0, "finish", 0, ""),
    ]
    assert r.lost_work[0] == 200.0
    assert r.preemptions[0] == 1
    # work conserved: done + lost = asked + lost
    assert r.work_done[0] == r.work[0] == 1000.0


def test_graceful_preemption_keeps_gpus_for_the_grace_period_and_loses_nothing():
    cfg = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=300.0, sample_s=0.0)
    script = {0.0: [Start(0, ((0, 8),))], 500.0: [Preempt(0, graceful=True)], 600.0: [Start(0, ((0, 8),))]}
    r = run(servers(1), [job(0, 0, 1000, 8, grace_period=50.0)], Scripted(script), cfg)
    assert events(r, "start", "preempt", "finish") == [
        (0.0, "start", 0, "s0x8"),
        (500.0, "preempt", 0, "graceful"),
        (600.0, "start", 0, "s0x8"),
        (1100.0, "finish", 0, ""),
    ]
    assert r.lost_work[0] == 0.0
    # queued from the end of the grace period (550) to the restart (600)
    assert r.queued[0] == 50.0


def test_graceful_preemption_holds_the_gpus_until_the_grace_period_ends():
    script = {0.0: [Start(0, ((0, 8),))], 100.0: [Preempt(0, graceful=True), Start(1, ((0, 8),))]}
    with pytest.raises(DecisionError, match=r"policy scripted: .*job 1 .*capacity: server 0 has 0 free GPUs"):
        run(servers(1), [job(0, 0, 1000, 8, grace_period=50.0), job(1, 0, 10, 8)], Scripted(script))


def test_elastic_scale_out_changes_the_rate_exactly():
    # requested 2, range 1..4. Base 1 worker: rate 0.5. At 100 (50 work done) scale to 1 + 3 = 4
    # workers: rate 2 -> 950 / 2 = 475 s more -> finish at 575.
    script = {0.0: [Start(0, ((0, 1),))], 100.0: [Scale(0, ((1, 3),))]}
    r = run(servers(2), [job(0, 0, 1000, 2, lo=1, hi=4)], Scripted(script))
    assert r.finish[0] == 575.0
    assert r.scale_events[0] == 1
    assert events(r, "scale") == [(100.0, "scale", 0, "s0x1 +s1x3")]


def test_speed_phases_make_the_isolated_run_take_its_duration():
    # twice as fast from half the work on: work W with W/2 + W/4 = 750 -> W = 1000;
    # phase change at t=500, finish at 750 (the duration).
    j = job(0, 0, 750, 1, speed_phases=((0.0, 1.0), (0.5, 2.0)))
    r = run(servers(1), [j], make("fifo"))
    assert events(r, "phase", "finish") == [(500.0, "phase", 0, "x2"), (750.0, "finish", 0, "")]
    assert r.work[0] == 1000.0


def test_migration_costs_the_overhead_but_no_work():
    cfg = SimConfig(restart_base_s=10.0, restart_per_gpu_s=0.0, checkpoint_interval_s=300.0, sample_s=0.0)
    script = {0.0: [Start(0, ((0, 1),))], 500.0: [Migrate(0, ((1, 1),))]}
    r = run(servers(2), [job(0, 0, 1000, 1)], Scripted(script), cfg)
    # 10 s overhead at start, 490 s of work by t=500, 10 s overhead again, 510 s left -> 1020
    assert r.finish[0] == 1020.0
    assert r.migrations[0] == 1
    assert r.lost_work[0] == 0.0


@pytest.mark.parametrize(
    "action, rule",
    [
        (Start(0, ((0, 4),)), "gang: all 8 GPUs"),
        (Start(0, ((0, 4), (0, 4))), "each server at most once"),
        (Start(0, ((5, 8),)), "server id must be in 0..1"),
        (Start(0, ((0.0, 8),)), "server id must be in 0..1"),  # type: ignore[arg-type]
        (Start(0, ((0, 8.0),)), "each server at most once per group, with >= 1 GPU"),  # type: ignore[arg-type]
        (Start(0, ((1, 8),)), "GPU type: job may run on \\['T4-16GB'\\]"),
        (Start(1, ((0, 1),)), "job must be pending, it is future"),
        (Preempt(0), "job must be running, it is pending"),
        (Scale(0, ()), "job must be running"),
    ],
)
def test_invalid_decisions_name_policy_job_and_rule(action, rule):
    srv = servers(2)
    jobs = [job(0, 0, 10, 8, gpu_types=frozenset({"T4-16GB"})), job(1, 50, 10, 1)]
    srv[0] = ServerSpec(0, T4, 8, Pool.TRAINING)
    with pytest.raises(
        DecisionError, match=rf"policy scripted: .*job {action.job} \(j{action.job}\) breaks rule '{rule}"
    ):
        run(srv, jobs, Scripted({0.0: [action]}))


def _series_csv(tmp_path, rows):
    p = tmp_path / "demand.csv"
    p.write_text("time_s,utilization\n" + "".join(f"{t},{u}\n" for t, u in rows))
    return str(p)


def test_reclaim_preempts_at_the_deadline_and_returns_the_server(tmp_path):
    # two inference servers, idle until t=600, then fully busy. Notice 120 s.
    series = _series_csv(tmp_path, [(0, 0.0), (600, 1.0), (100_000, 1.0)])
    inf = InferenceConfig(series_csv=series, step_s=300.0, headroom=0.0, notice_s=120.0)
    srv = [*servers(1), ServerSpec(1, T4, 8, Pool.INFERENCE), ServerSpec(2, T4, 8, Pool.INFERENCE)]
    # j0 any-type 8-GPU job placed on loaned server 2 at t=0 (T4: 1/3 speed, 3000 s of work)
    script = {0.0: [Start(0, ((2, 8),))]}
    policy = Scripted(script, round_s=1e9, borrows=True)
    cfg = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, horizon_s=2000.0)
    r = run(srv, [job(0, 0, 1000, 8)], policy, cfg, demand=DemandCurve(inf, 2))
    log = events(r, "loan", "reclaim", "preempt", "returned")
    assert log == [
        (0.0, "loan", 1, ""),
        (0.0, "loan", 2, ""),
        (600.0, "reclaim", 1, "deadline 720"),
        (600.0, "reclaim", 2, "deadline 720"),
        (720.0, "returned", 1, ""),
        (720.0, "preempt", 0, "lost 0 reclaim"),
        (720.0, "returned", 2, ""),
    ]
    assert r.preemptions_reclaim[0] == 1
    assert np.isnan(r.finish[0]) and r.truncated
    assert r.end_time == 2000.0
    # loaned GPU-seconds: two 8-GPU servers from 0 to 720
    assert r.usage.capacity_loaned_gpu_s == 2 * 8 * 720.0
    # busy on loan: 8 GPUs from 0 to 720
    assert r.usage.busy_loaned_gpu_s == 8 * 720.0


def test_non_borrowing_policy_is_never_offered_a_loan(tmp_path):
    series = _series_csv(tmp_path, [(0, 0.0)])
    inf = InferenceConfig(series_csv=series, headroom=0.0)
    srv = [*servers(1), ServerSpec(1, T4, 8, Pool.INFERENCE)]
    r = run(srv, [job(0, 0, 100, 1)], make("fifo"), demand=DemandCurve(inf, 1))
    assert events(r, "loan") == []
    assert r.usage.capacity_loaned_gpu_s == 0.0


def test_contention_slows_co_located_jobs_and_lifts_when_they_leave():
    # contention 0.5: with k others on a shared server a job runs at 1 / (1 + 0.5 k).
    # A, B (300 s each) share server 0 from t=0: rate 2/3 each. C joins at 150: all at 1/2.
    # By 150 A and B did 100; 200 left at 1/2 -> finish at 550. C did 200 by 550, then alone:
    # 100 left at rate 1 -> 650.
    cfg = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0, contention=0.5)
    script = {0.0: [Start(0, ((0, 1),)), Start(1, ((0, 1),))], 150.0: [Start(2, ((0, 1),))]}
    jobs = [job(0, 0, 300, 1), job(1, 0, 300, 1), job(2, 150, 300, 1)]
    r = run(servers(1), jobs, Scripted(script), cfg)
    np.testing.assert_allclose(r.finish, [550.0, 550.0, 650.0], rtol=1e-12)


@pytest.mark.parametrize(("scenario", "policy"), [("default", "aryl"), ("cloud", "mlfs"), ("deadline", "fitgpp")])
def test_contention_bookkeeping_matches_a_recount(scenario, policy):
    """The engine keeps each job's co-located jobs as jobs join and leave servers (``_near``):
    at every decision they equal a recount from the servers' hosted jobs, and every running
    job's rate carries the slowdown of that many others."""
    s = apply_overrides(scenarios.get(scenario), {"workload.synthetic.num_jobs": "80"})
    seen = []

    def observe(view: ClusterView) -> None:
        e = view._e
        hosted, c = e.cluster.hosted, e.config.contention
        for j in e._jobs:
            want: dict[int, int] = {}
            for sid in {sid for sid, _ in (*j.base, *j.flex)}:
                for k in hosted[sid]:
                    if k != j.idx:
                        want[k] = want.get(k, 0) + 1
            assert e._near[j.idx] == want, (j.idx, e._near[j.idx], want)
            if j.idx in e.running:
                assert j.crowd == 1.0 / (1.0 + c * len(want)), j.idx
        seen.append(sum(map(len, e._near)))

    assert s.sim.contention > 0.0
    scenarios.simulate(s, make(policy), 0, observe=observe)
    assert len(seen) > 50 and max(seen) > 0  # co-location happened and was checked


def test_per_run_fluctuation_is_seeded():
    cfg = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, sample_s=0.0, fluctuation=0.2)
    jobs = [job(i, 10.0 * i, 1000, 1) for i in range(5)]

    def finishes(seed):
        e = Engine(servers(1), jobs, make("fifo"), Linear(), None, cfg, np.random.default_rng(seed))
        return e.run().finish

    a, b, c = finishes(1), finishes(1), finishes(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.allclose(a - np.array([10.0 * i for i in range(5)]), 1000.0)


def test_stop_ends_a_job_early_and_frees_its_gpus():
    from envs.sim.policy import Stop

    # j0 (1000 s) stopped at 400 (40% done); j1 waits for the whole server and starts then.
    script = {0.0: [Start(0, ((0, 8),))], 400.0: [Stop(0), Start(1, ((0, 8),))]}
    r = run(servers(1), [job(0, 0, 1000, 8), job(1, 0, 100, 8)], Scripted(script))
    assert events(r, "finish") == [(400.0, "finish", 0, "stopped at 0.4"), (500.0, "finish", 1, "")]
    assert r.stopped.tolist() == [True, False]
    assert r.work_done[0] == 400.0


def test_a_stale_reclaim_deadline_does_not_return_a_server_early(tmp_path):
    """Reclaimed at 300 (deadline 1300), failed at 400, repaired at 500, loaned at 600, reclaimed
    again at 900 (deadline 1900): the old deadline at 1300 must not return it."""

    class Clock:  # the failure stream: server 1 fails at 400 and is repaired 100 s later
        def __init__(self):
            self.calls = 0

        def spawn(self, n):
            return [self, self]

        def exponential(self, scale):
            self.calls += 1
            return {1: 1e9, 2: 400.0, 3: 100.0}.get(self.calls, 1e9)

    series = _series_csv(tmp_path, [(0, 0.0), (300, 1.0), (600, 0.0), (900, 1.0), (100_000, 1.0)])
    inf = InferenceConfig(series_csv=series, step_s=300.0, headroom=0.0, notice_s=1000.0)
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, T4, 8, Pool.INFERENCE)]
    cfg = SimConfig(mtbf_h=1.0, repair_h=1.0, sample_s=0.0, horizon_s=3000.0)
    policy = Scripted({}, round_s=1e9, borrows=True)
    r = Engine(srv, [job(0, 0, 5000, 1)], policy, Linear(), DemandCurve(inf, 1), cfg, Clock(), log=True).run()
    assert events(r, "loan", "reclaim", "returned", "fail", "repair") == [
        (0.0, "loan", 1, ""),
        (300.0, "reclaim", 1, "deadline 1300"),
        (400.0, "fail", 1, ""),
        (500.0, "repair", 1, ""),
        (600.0, "loan", 1, ""),
        (900.0, "reclaim", 1, "deadline 1900"),
        (1900.0, "returned", 1, ""),
    ]


def test_finish_time_fairness_over_each_life_and_over_the_run():
    # 2 GPUs, four 1-GPU jobs of 100 s at t=0; FIFO: j0, j1 run 0-100, j2, j3 100-200.
    # Over each life: j0, j1 see 4 jobs (factor 2, rho 0.5); j2, j3 see 4 then 2 (mean 3, factor
    # 1.5, rho 200 / 150). Over the run: 4 jobs / 2 GPUs for everyone, rho 0.5 and 1.0.
    r = run(servers(1, gpus=2), [job(i, 0, 100, 1) for i in range(4)], make("fifo"))
    m = summarize(r)
    assert m["worst_ftf"] == pytest.approx(200 / 150)
    assert m["unfair_fraction"] == 0.5
    assert m["worst_ftf_run"] == pytest.approx(1.0)
    assert m["unfair_fraction_run"] == 0.0


def test_a_gang_is_never_spread_over_gpu_types():
    # one V100 and one A100 server: a 16-GPU job allowed on both types still fits only as 8 + 8
    # over the two types, which the engine refuses (so nothing is charged for a mix of types)
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, A100, 8, Pool.TRAINING)]
    with pytest.raises(DecisionError, match=r"job 0 \(j0\) breaks rule 'one GPU type per job'"):
        run(srv, [job(0, 0, 10, 16)], Scripted({0.0: [Start(0, ((0, 8), (1, 8)))]}))
    # an elastic job's flexible workers too
    jobs = [job(0, 0, 10, 8, 8, 16)]
    with pytest.raises(DecisionError, match="one GPU type per job"):
        run(srv, jobs, Scripted({0.0: [Start(0, ((0, 8),), ((1, 8),))]}))
