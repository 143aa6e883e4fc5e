"""MLFS: hand-computed priorities, learning curves, the ideal-virtual-host placement, migration,
early stops, the ``deadline`` scenario's samplers and the accuracy metrics."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.sim import scenarios
from envs.sim.accuracy import LearningCurve, ModelTask, ResourceDemand
from envs.sim.engine import Engine, SimConfig
from envs.sim.metrics import TIMING_KEYS, summarize
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Migrate, Start, Stop
from envs.sim.scenarios.deadline import MlFeatures, add_features
from envs.sim.workload import AttributeSampler, SyntheticWorkload, build_jobs, generate
from heuristics.mlfs import MlfsConfig, mlfs, mlfs_noctl
from heuristics.mlfs_load import Accounting, MlfsLoadControl, MlfsPlacement, distance_to_host
from heuristics.mlfs_priority import PriorityInputs, inputs_of, priorities, task_priorities
from heuristics.registry import make

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)
H = 3600.0
# loss(i) = 1 / (1 + i): iterations 4, f0 = 1/4, k = 1; accuracy(f) = 4f / (1 + 4f)
EASY = LearningCurve(iterations=4, f0=0.25, k=1.0, acc0=0.0, acc_max=1.0)


class Linear:
    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def job(i: int, submit: float, duration: float, gpus: int, **kw) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, "m", **kw)


def cluster(n: int) -> list[ServerSpec]:
    return [ServerSpec(i, V100, 8, Pool.TRAINING) for i in range(n)]


def applied(e: Engine, actions) -> list:
    """Apply the actions as the engine does (one by one, as they are produced); return them."""
    out = []
    for a in actions:
        e.apply(a)
        out.append(a)
    return out


def cpu(per_gpu: float) -> ResourceDemand:
    return ResourceDemand(cpus_per_gpu=per_gpu, mem_gb_per_gpu=0.0)


# ----------------------------------------------------------------------------- priority
def test_three_job_priorities_equal_the_hand_computation():
    cfg = MlfsConfig()  # alpha 0.3, g_d 0.3, g_r 0.3, g_w 0.35, gamma 0.8, hours
    a = PriorityInputs(2.0, 1, 1.0, (1.0,), (-1,), 2 * H, 1 * H, 0.5 * H)  # data-parallel
    b = PriorityInputs(3.0, 1, 1.0, (0.5, 0.3, 0.2), (-1, 0, 0), 4 * H, 2 * H, 1 * H)  # root + 2 children
    c = PriorityInputs(1.0, 5, 0.1, (1.0,), (-1,), -100.0, 30.0, 2 * H)  # past deadline, r floored
    # P'_ML: A 2*1*1*1 = 2; B 3*(0.5, 0.3, 0.2) = (1.5, 0.9, 0.6); C 1 * 1/5 * 0.1 = 0.02
    # P'_C: A 0.3/2 + 0.3/1 + 0.35*0.5 = 0.625; B 0.3/4 + 0.3/2 + 0.35*1 = 0.575;
    #       C 0 (past deadline) + 0.3/(60/3600) + 0.35*2 = 18 + 0.7 = 18.7
    m_ml, m_c = 2.0, 18.7
    pa = 0.3 * 2.0 / m_ml + 0.7 * 0.625 / m_c
    pb = [0.3 * v / m_ml + 0.7 * 0.575 / m_c for v in (1.5, 0.9, 0.6)]
    pb_root = pb[0] + 0.8 * (pb[1] + pb[2])
    pc = 0.3 * 0.02 / m_ml + 0.7 * 18.7 / m_c
    got = priorities([a, b, c], cfg)
    np.testing.assert_allclose(got, [pa, pb_root, pc], rtol=0, atol=1e-9)
    # the numbers themselves, written out
    np.testing.assert_allclose(got, [0.3233957219, 0.4609625668, 0.703], rtol=0, atol=1e-9)
    tasks = task_priorities([a, b, c], cfg)[1]
    np.testing.assert_allclose(tasks, [pb_root, pb[1], pb[2]], rtol=0, atol=1e-12)


def test_a_chain_adds_its_descendants_recursively_and_alpha_is_configurable():
    cfg = MlfsConfig(alpha=1.0, gamma=0.5)
    x = PriorityInputs(1.0, 1, 1.0, (0.25, 0.25, 0.5), (-1, 0, 1), None, H, 0.0)
    # alpha 1: only P_ML, normalised by the largest task (0.5): (0.5, 0.5, 1.0)
    # task 2: 1.0; task 1: 0.5 + 0.5*1.0 = 1.0; task 0: 0.5 + 0.5*1.0 = 1.0
    assert task_priorities([x], cfg)[0] == [1.0, 1.0, 1.0]
    cfg = MlfsConfig(alpha=0.0)
    # alpha 0: only P_C, normalised over the one job: 1 per task; root = 1 + 0.8 (1 + 0.8 * 1)
    assert priorities([x], cfg) == [pytest.approx(1.0 + 0.8 * 1.8, abs=1e-12)]


def test_zero_maxima_and_guards_give_finite_priorities():
    cfg = MlfsConfig()
    x = PriorityInputs(0.0, 1, 1.0, (1.0,), (-1,), 0.0, 0.0, 0.0)  # urgency 0, deadline now, r = 0
    (p,) = priorities([x], cfg)
    assert math.isfinite(p) and p == pytest.approx(0.7)  # P_ML max is 0: term 0; P_C / itself = 1


def test_inputs_are_read_from_the_view():
    # j0: 8 GPUs, 4000 s, curve EASY, deadline 5000, needs accuracy 0.75 (reached at f = 0.75);
    # at t = 2000 (j1 arrives) it is half done: iteration 3, last share 1/4, remaining to the stop 1000 s
    j0 = job(0, 0.0, 4000.0, 8, deadline=5000.0, curve=EASY, required_accuracy=0.75, urgency=2.0)
    j1 = job(1, 2000.0, 100.0, 8)
    e = Engine(cluster(1), [j0, j1], mlfs(), Linear(), None, NO_OVERHEAD)
    e.start()
    assert e.next_decision() and e.now == 0.0
    e.apply(Start(0, ((0, 8),)))
    while e.next_decision() and e.now < 2000.0:
        pass
    assert e.now == 2000.0
    x = inputs_of(e.view, 0, MlfsConfig())
    assert (x.urgency, x.iteration, x.shares, x.parents) == (2.0, 3, (1.0,), (-1,))
    assert x.last_share == pytest.approx(0.25, abs=1e-15)
    assert (x.to_deadline_s, x.remaining_s, x.waiting_s) == (3000.0, 1000.0, 0.0)
    assert inputs_of(e.view, 0, MlfsConfig(early_stop=False)).remaining_s == 2000.0
    y = inputs_of(e.view, 1, MlfsConfig())
    assert (y.iteration, y.last_share, y.to_deadline_s, y.remaining_s) == (1, 1.0, None, 100.0)


# ----------------------------------------------------------------------------- learning curves
def test_learning_curve_by_hand():
    assert [EASY.loss(i) for i in range(5)] == [1.0, 0.5, pytest.approx(1 / 3), 0.25, 0.2]
    assert EASY.iteration(0.0) == 1 and EASY.iteration(0.5) == 3 and EASY.iteration(1.0) == 4
    # I = 3: the last iteration cut 1/2 - 1/3 = 1/6 of the 2/3 cut so far
    assert EASY.last_share(3) == pytest.approx(0.25, abs=1e-15)
    assert EASY.last_share(1) == 1.0 and EASY.last_share(2) == pytest.approx(1.0)
    assert EASY.accuracy(0.75) == 0.75 and EASY.fraction_for(0.75) == pytest.approx(0.75)
    assert EASY.fraction_for(0.9) == math.inf  # accuracy(1) = 0.8
    assert EASY.fraction_for(-1.0) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    f0=st.floats(0.005, 1.0),
    k=st.floats(0.2, 3.0),
    f=st.floats(0.0, 1.0),
)
def test_fraction_for_inverts_accuracy_and_accuracy_increases(f0, k, f):
    c = LearningCurve(1000, f0, k, 0.1, 0.9)
    a = c.accuracy(f)
    assert c.fraction_for(a) == pytest.approx(f, abs=1e-6)
    assert c.accuracy(min(1.0, f + 0.01)) >= a
    assert 0.0 < c.last_share(c.iteration(f)) <= 1.0


# ----------------------------------------------------------------------------- placement
def _engine_with(jobs, placed, policy=None, n_servers=3, config=NO_OVERHEAD):
    e = Engine(cluster(n_servers), jobs, policy or mlfs(), Linear(), None, config)
    e.start()
    assert e.next_decision() and e.now == 0.0
    for j, alloc in placed:
        e.apply(Start(j, alloc))
    return e


def test_placement_picks_the_server_closest_to_the_ideal_virtual_host_below_90_percent():
    # s0: a (4 GPUs x 12 cores = 48/64 = 0.75 CPU); s1: b (6 GPUs x 2 = 12 cores = 0.1875); s2 empty.
    # x (2 GPUs x 8 cores = 0.25 CPU): on s0 CPU 1.0 > 0.9 (excluded, though it is the best fit:
    # distance sqrt(0.25^2 + 0.1^2 + 2 * 0.9^2)); s1 -> GPU 1.0, CPU 0.4375; s2 -> GPU 0.25, CPU 0.25.
    jobs = [job(0, 0, 1000, 4, demand=cpu(12)), job(1, 0, 1000, 6, demand=cpu(2)), job(2, 0, 1000, 2, demand=cpu(8))]
    e = _engine_with(jobs, [(0, ((0, 4),)), (1, ((1, 6),))])
    cfg = MlfsConfig()
    place = MlfsPlacement(cfg, Accounting(cfg))
    d0 = math.sqrt(0.25**2 + 0.1**2 + 2 * 0.81)
    d1 = math.sqrt(0.0 + (0.4375 - 0.9) ** 2 + 2 * 0.81)
    d2 = math.sqrt(0.75**2 + 0.65**2 + 2 * 0.81)
    assert d0 < d1 < d2
    assert distance_to_host(np.array([1.0, 0.4375, 0.0, 0.0]), 0.9) == pytest.approx(d1, abs=1e-12)
    assert place.place(e.view, 2) == Start(2, ((1, 2),))
    # a looser threshold lets s0 in, and it is the closest
    loose = MlfsConfig(threshold=1.0)
    assert MlfsPlacement(loose, Accounting(loose)).place(e.view, 2) == Start(2, ((0, 2),))


def test_a_job_too_big_for_one_server_is_spread_most_free_first():
    # s0 has 6 free, s1 8, s2 3; a 12-GPU job takes s1 (8) then the closest holder of 4: s0
    # (s2 cannot hold 4); servers are listed in the order the placement env fills them.
    jobs = [job(0, 0, 1000, 2), job(1, 0, 1000, 5), job(2, 0, 1000, 12)]
    e = _engine_with(jobs, [(0, ((0, 2),)), (1, ((2, 5),))])
    cfg = MlfsConfig()
    assert MlfsPlacement(cfg, Accounting(cfg)).place(e.view, 2) == Start(2, ((1, 8), (0, 4)))


def test_a_job_alone_above_the_threshold_still_runs_on_an_empty_server():
    jobs = [job(0, 0, 1000, 8, demand=cpu(7.5)), job(1, 0, 1000, 1, demand=cpu(1))]  # 60/64 cores alone
    e = _engine_with(jobs, [(1, ((0, 1),))], n_servers=2)
    cfg = MlfsConfig()
    assert MlfsPlacement(cfg, Accounting(cfg)).place(e.view, 0) == Start(0, ((1, 8),))


# ----------------------------------------------------------------------------- migration
def _overloaded_world(lowest_share: float):
    # s0: p (2 GPUs x 16 cores = 0.5, urgency 1) + q (2 GPUs x 14 cores = 0.4375, urgency 3): 0.9375
    # s2: z (4 GPUs x 4 cores = 0.25). p is the lowest priority; q is closest to the excess 0.0375.
    jobs = [
        job(0, 0, 1000, 2, demand=cpu(16), urgency=1.0),
        job(1, 0, 1000, 2, demand=cpu(14), urgency=3.0),
        job(2, 0, 1000, 4, demand=cpu(4)),
    ]
    cfg = MlfsConfig(lowest_share=lowest_share, early_stop=False)
    policy = mlfs(cfg)
    e = _engine_with(jobs, [(0, ((0, 2),)), (1, ((0, 2),)), (2, ((2, 4),))], policy=policy)
    assert e.view.round_tick
    return e, policy


def test_an_overloaded_server_moves_its_lowest_priority_task_to_the_best_host():
    e, policy = _overloaded_world(0.1)
    # p moves; s1 -> GPU 0.25, CPU 0.5; s2 -> GPU 0.75, CPU 0.75: s2 is closer to (1, .9, .9, .9)
    assert applied(e, policy.preemption.preempt(e.view)) == [Migrate(0, ((2, 2),))]


def test_among_the_candidates_the_task_closest_to_the_ideal_virtual_task_moves():
    e, policy = _overloaded_world(1.0)  # both are candidates: q's 0.4375 is closer to 0.0375
    assert applied(e, policy.preemption.preempt(e.view)) == [Migrate(1, ((2, 2),))]


def test_no_migration_without_an_overloaded_server_or_with_load_control_off():
    jobs = [job(0, 0, 1000, 2, demand=cpu(16)), job(1, 0, 1000, 2, demand=cpu(12))]  # 56/64 = 0.875
    e = _engine_with(jobs, [(0, ((0, 2),)), (1, ((0, 2),))])
    assert list(MlfsLoadControl(MlfsConfig(), Accounting(MlfsConfig()), None).preempt(e.view)) == []  # type: ignore[arg-type]
    e, _ = _overloaded_world(0.1)
    assert list(mlfs_noctl().preemption.preempt(e.view)) == []


def test_usage_swings_with_the_training_phase():
    d = ResourceDemand(cpus_per_gpu=2.0, mem_gb_per_gpu=10.0, cpus_per_task=1.0, mem_gb_per_task=4.0, swing=0.2)
    assert d.cpus(3, 0.0) == 7.0 and d.mem_gb(3, 0.0) == 34.0
    assert d.cpus(3, 0.25) == pytest.approx(7.0 * 1.2) and d.cpus(3, 0.75) == pytest.approx(7.0 * 0.8)


# ----------------------------------------------------------------------------- early stop
def _stop_world(with_queue: bool, policy):
    # j0 (8 GPUs, 4000 s) needs accuracy 0.75, reached at f = 0.75, t = 3000 (a round tick);
    # with the queue, j1 (8 GPUs, 500 s) arrives at 1000 and waits on the one server: the system
    # is overloaded. Without it, j0 has two servers to itself: mean load (1 + 0) / 2 = 0.5.
    jobs = [job(0, 0.0, 4000.0, 8, curve=EASY, required_accuracy=0.75, deadline=3500.0)]
    if with_queue:
        jobs.append(job(1, 1000.0, 500.0, 8, curve=EASY, deadline=3600.0))
    return Engine(cluster(1 if with_queue else 2), jobs, policy, Linear(), None, NO_OVERHEAD, log=True).run()


def test_an_overloaded_system_stops_a_job_at_its_required_accuracy():
    r = _stop_world(True, mlfs())
    assert [e for e in r.log if e[1] in ("start", "finish")] == [
        (0.0, "start", 0, "s0x8"),
        (3000.0, "finish", 0, "stopped at 0.75"),
        (3000.0, "start", 1, "s0x8"),
        (3500.0, "finish", 1, ""),
    ]
    m = summarize(r)
    # j0: accuracy 0.75 by its deadline -> hit; final accuracies 0.75 and accuracy(1) = 0.8
    assert m["stopped_early"] == 1 and m["accuracy_hit_ratio"] == 1.0
    assert m["avg_final_accuracy"] == pytest.approx((0.75 + 0.8) / 2)
    assert m["deadline_hit_ratio"] == 1.0


def test_no_stop_when_nothing_waits_or_with_load_control_off():
    r = _stop_world(False, mlfs())
    assert r.finish.tolist() == [4000.0] and not r.stopped.any()
    m = summarize(r)
    assert m["accuracy_hit_ratio"] == 0.0  # it ended after its deadline (3500)
    r = _stop_world(True, mlfs_noctl())
    assert r.finish.tolist() == [4000.0, 4500.0] and not r.stopped.any()
    assert summarize(r)["stopped_early"] == 0


def test_stop_actions_come_from_the_load_control_component():
    jobs = [job(0, 0.0, 4000.0, 8, curve=EASY, required_accuracy=0.5), job(1, 0.0, 100.0, 8)]
    policy = mlfs()
    e = _engine_with(jobs, [(0, ((0, 8),))], policy=policy, n_servers=1)
    while e.next_decision() and e.now < 300.0:
        pass
    assert list(policy.preemption.preempt(e.view)) == []  # f = 0.075: accuracy 0.23 < 0.5
    while e.next_decision() and e.now < 1200.0:
        pass
    assert e.now == 1200.0  # f = 0.3: accuracy 1.2 / 2.2 = 0.545 >= 0.5, and j1 waits
    assert applied(e, policy.preemption.preempt(e.view)) == [Stop(0)]


# ----------------------------------------------------------------------------- the scenario
def _rows(n: int = 400, seed: int = 3):
    rng = np.random.default_rng(seed)
    rows = generate(SyntheticWorkload(num_jobs=n), rng)
    return build_jobs(rows, AttributeSampler(elastic_fraction=0.0), rng, max_gpus_per_job=80)


def test_features_follow_the_samplers():
    base = _rows()
    cfg = MlFeatures()
    jobs = add_features(base, cfg, np.random.default_rng(7))
    assert jobs == add_features(base, cfg, np.random.default_rng(7))
    for b, j in zip(base, jobs, strict=True):
        assert (j.submit_time, j.duration, j.num_gpus) == (b.submit_time, b.duration, b.num_gpus)
        slack = j.deadline - j.submit_time
        assert slack >= 1.1 * j.duration - 1e-6 and slack >= 0.5 * H - 1e-6
        assert slack <= max(1.1 * j.duration, 24 * H) + 1e-6
        assert j.urgency in (1.0, 2.0, 3.0) and j.curve is not None and j.demand is not None
        if j.required_accuracy is not None:
            assert j.curve.fraction_for(j.required_accuracy) <= 1.0
        if j.tasks:
            assert j.num_gpus >= 2 and len(j.tasks) == min(j.num_gpus, 8)
            assert j.tasks[0].parent == -1 and all(0 <= t.parent < k for k, t in enumerate(j.tasks) if k)
            assert sum(t.share for t in j.tasks) == pytest.approx(1.0)
            assert 0.784 <= j.comm_gb <= 1.037
        else:
            assert 0.97 <= j.comm_gb <= 3.168
    multi = [j for j in jobs if j.num_gpus >= 2]
    assert 0.3 < sum(bool(j.tasks) for j in multi) / len(multi) < 0.7
    assert 0.6 < sum(j.required_accuracy is not None for j in jobs) / len(jobs) < 0.8
    assert any(j.tasks and any(t.parent != k - 1 for k, t in enumerate(j.tasks) if k) for j in jobs)  # a tree


def test_the_scenario_is_registered_and_builds():
    s = scenarios.get("deadline")
    assert s.cluster.training_servers * s.cluster.gpus_per_server == 80 and s.workload.synthetic.num_jobs == 1860
    assert s.sim.contention > 0.0
    jobs = s.make_jobs(_rows(50), np.random.default_rng(0))  # type: ignore[attr-defined]
    assert all(j.curve is not None for j in jobs)


def test_the_policies_are_registered_and_configurable():
    p = make("mlfs", {"alpha": "0.5", "gamma": "0.7"})
    assert p.ordering.config.alpha == 0.5 and p.ordering.config.gamma == 0.7  # type: ignore[attr-defined]
    assert make("mlfs-noctl").name == "mlfs-noctl"


@pytest.mark.parametrize(
    ("name", "load"), [("mlfs", None), ("mlfs-noctl", None), ("mlfs-hopeless", "0.9"), ("mlfs-hopeless", "2.0")]
)
def test_the_ordering_expert_reproduces_mlfs_on_the_deadline_scenario(name, load):
    sets = {"workload.synthetic.num_jobs": "150", "cluster.training_servers": "4"}
    if load is not None:
        sets["workload.load"] = load
    kw = dict(placement=name, scaling=name, reclaim=name, preemption=name, max_jobs=400)
    env = gym.make("loangym/Ordering-v1", scenario="deadline", overrides=sets, **kw).unwrapped
    env.reset(options={"scenario_seed": 2})
    done = False
    while not done:
        _, _, te, tr, info = env.step(env.expert_action(name))
        done = te or tr
    direct = summarize(scenarios.simulate(scenarios.get("deadline", sets), make(name), 2))
    if name == "mlfs-hopeless":
        assert direct["preemptions"] > 0  # the demotions are exercised
    for k, v in direct.items():
        if k not in TIMING_KEYS:
            assert info["metrics"][k] == v, k


def test_model_task_is_a_frozen_value():
    t = ModelTask(0.5, -1)
    with pytest.raises(AttributeError):
        t.share = 0.4  # type: ignore[misc]
