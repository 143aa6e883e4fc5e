"""``mlfs-hopeless``: MLFS that demotes the jobs that can no longer meet their deadline (the
``hopeless`` option of ``MlfsConfig``, off in ``mlfs``)."""

from __future__ import annotations

from envs.sim import scenarios
from envs.sim.accuracy import LearningCurve
from envs.sim.engine import Engine, SimConfig
from envs.sim.metrics import summarize
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Preempt, Start
from heuristics.mlfs import MlfsConfig, mlfs, mlfs_hopeless
from heuristics.mlfs_priority import Hopeless, hopeless, job_priorities, ranked
from heuristics.registry import make

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)
# accuracy(f) = 4f / (1 + 4f): 0.75 at f = 0.75
EASY = LearningCurve(iterations=4, f0=0.25, k=1.0, acc0=0.0, acc_max=1.0)
ON = MlfsConfig(hopeless=True)


class Linear:
    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def job(i: int, submit: float, duration: float, gpus: int, **kw) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, "m", **kw)


def engine(jobs: list[JobSpec], policy, servers: int = 1) -> Engine:
    e = Engine(
        [ServerSpec(i, V100, 8, Pool.TRAINING) for i in range(servers)], jobs, policy, Linear(), None, NO_OVERHEAD
    )
    e.start()
    assert e.next_decision() and e.now == 0.0
    return e


def until(e: Engine, t: float) -> None:
    while e.now < t and e.next_decision():
        pass
    assert e.now == t


def test_a_job_is_hopeless_once_its_work_left_at_full_speed_ends_after_its_deadline():
    # j0 runs on the one server from 0 to 4000; j1 (1000 s, deadline 2500) waits: at t = 1000 it
    # could still end at 2000, at t = 2000 (a decision point: j2 arrives) only at 3000.
    jobs = [
        job(0, 0.0, 4000.0, 8),
        job(1, 0.0, 1000.0, 8, deadline=2500.0),
        job(2, 1000.0, 10.0, 8),
        job(3, 2000.0, 10.0, 8),
    ]
    e = engine(jobs, mlfs())
    e.apply(Start(0, ((0, 8),)))
    assert not hopeless(e.view, 1, ON) and not hopeless(e.view, 0, ON)  # no deadline: never hopeless
    until(e, 1000.0)
    assert not hopeless(e.view, 1, ON)
    until(e, 2000.0)
    assert hopeless(e.view, 1, ON)


def test_a_job_that_may_stop_early_is_judged_by_the_work_to_its_required_accuracy():
    # j1 needs accuracy 0.75, reached at 75% of its 1000 s: 750 s of work. At t = 1600 (j2
    # arrives) 1600 + 750 = 2350 <= 2500: not hopeless while early stops are on; with them off
    # the job must do all its work (2600 > 2500).
    jobs = [
        job(0, 0.0, 4000.0, 8),
        job(1, 0.0, 1000.0, 8, deadline=2500.0, curve=EASY, required_accuracy=0.75),
        job(2, 1600.0, 10.0, 8),
    ]
    e = engine(jobs, mlfs())
    e.apply(Start(0, ((0, 8),)))
    until(e, 1600.0)
    assert not hopeless(e.view, 1, ON)
    assert hopeless(e.view, 1, MlfsConfig(hopeless=True, early_stop=False))


def test_hopeless_pending_jobs_rank_after_every_other_one():
    # on a busy server at t = 2000: j1 (deadline 2500, 1000 s) is hopeless, and MLFS's deadline
    # term ranks it first; j2 (deadline 10 h) can still make it.
    jobs = [
        job(0, 0.0, 4000.0, 8),
        job(1, 0.0, 1000.0, 8, deadline=2500.0),
        job(2, 0.0, 1000.0, 8, deadline=36000.0),
        job(3, 2000.0, 10.0, 8),
    ]
    e = engine(jobs, mlfs())
    e.apply(Start(0, ((0, 8),)))
    until(e, 2000.0)
    prio = job_priorities(e.view, [1, 2], ON)
    assert prio[1] > prio[2]
    assert ranked(e.view, [1, 2], ON) == [1, 2]
    assert ranked(e.view, [1, 2], ON, Hopeless(ON)) == [2, 1]


def _running_hopeless_world(policy, live_deadline: float):
    # j0 (deadline 1000, 4000 s of work) runs on the one server: hopeless from the start. At
    # t = 500 j1 (8 GPUs, 1000 s) arrives with a deadline of live_deadline.
    jobs = [job(0, 0.0, 4000.0, 8, deadline=1000.0), job(1, 500.0, 1000.0, 8, deadline=live_deadline)]
    e = engine(jobs, policy)
    e.apply(Start(0, ((0, 8),)))
    until(e, 500.0)
    return e


def test_a_running_hopeless_job_yields_its_gpus_to_a_job_that_can_still_make_it():
    policy = mlfs_hopeless()
    e = _running_hopeless_world(policy, 2000.0)
    assert list(policy.preemption.preempt(e.view)) == [Preempt(0, graceful=True)]


def test_no_demotion_for_a_hopeless_newcomer_nor_in_mlfs():
    policy = mlfs_hopeless()
    e = _running_hopeless_world(policy, 1200.0)  # 500 + 1000 > 1200: j1 is hopeless too
    assert list(policy.preemption.preempt(e.view)) == []
    policy = mlfs()
    e = _running_hopeless_world(policy, 2000.0)
    assert list(policy.preemption.preempt(e.view)) == []


def test_the_demoted_job_still_runs_to_its_end():
    policy = mlfs_hopeless()
    jobs = [job(0, 0.0, 4000.0, 8, deadline=1000.0), job(1, 500.0, 1000.0, 8, deadline=2000.0)]
    r = Engine([ServerSpec(0, V100, 8, Pool.TRAINING)], jobs, policy, Linear(), None, NO_OVERHEAD).run()
    # j1 takes the server at 500 and ends at 1500; j0 resumes with its 500 s done (no work lost)
    assert r.finish.tolist() == [5000.0, 1500.0]
    assert summarize(r)["deadline_hit_ratio"] == 0.5
    r = Engine([ServerSpec(0, V100, 8, Pool.TRAINING)], jobs, mlfs(), Linear(), None, NO_OVERHEAD).run()
    assert r.finish.tolist() == [4000.0, 5000.0]
    assert summarize(r)["deadline_hit_ratio"] == 0.0


def test_the_option_is_off_in_mlfs_and_on_in_mlfs_hopeless():
    assert not make("mlfs").ordering.config.hopeless  # type: ignore[attr-defined]
    assert make("mlfs", {"hopeless": "true"}).ordering.config.hopeless  # type: ignore[attr-defined]
    p = make("mlfs-hopeless")
    assert p.name == "mlfs-hopeless" and p.ordering.config.hopeless  # type: ignore[attr-defined]


def test_the_remembered_answers_are_hopeless_s_at_every_decision():
    sets = {"workload.synthetic.num_jobs": "120", "cluster.training_servers": "4", "workload.load": "2.0"}
    scenario = scenarios.get("deadline", sets)
    policy = mlfs_hopeless()
    lost = policy.ordering.lost  # type: ignore[attr-defined]
    seen = {"hopeless": 0, "live": 0}

    class Check:
        name = policy.name
        borrows = False
        round_s = policy.round_s

        def decide(self, view):
            for j in [*view.pending, *view.running]:
                want = hopeless(view, j, ON)
                assert lost(view, j) == want, (view.now, j)
                seen["hopeless" if want else "live"] += 1
            return policy.decide(view)

        def reclaim(self, view, k):
            return policy.reclaim(view, k)

    scenarios.simulate(scenario, Check(), 1)  # type: ignore[arg-type]
    assert seen["hopeless"] > 0 and seen["live"] > 0
