"""No livelock, and bursts of jobs queued at one instant (issue 16).

The engine's livelock guard stops a policy that keeps restarting a job without progress; Tiresias
on a mixed-type cluster no longer preempts jobs for a gang that no type can hold; sjf, tiresias
and aryl drain thousands of jobs submitted at t=0 (a watchdog stops a hang: no timed assertion)."""

from __future__ import annotations

import bisect
import random
import signal
from collections.abc import Iterator
from types import FrameType

import numpy as np
import pytest

from benchmarks.sim_speed import burst
from envs.sim import scenarios
from envs.sim.engine import MAX_FUTILE_RESTARTS, DecisionError, Engine, SimConfig
from envs.sim.model import A100, T4, V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import Action, ClusterView, ComposedScheduler, JobStatus, Preempt, Start
from heuristics import _tiresias as kern
from heuristics.common import TRAINING_ONLY, PackPlacement, RankedQueue, SortedKeys, SortedQueue, free_gpus
from heuristics.fifo import by_remaining
from heuristics.registry import make
from heuristics.tiresias import Tiresias

MIXED = "V100-32GB:6,A100-40GB:4"  # 48 V100 GPUs and 32 A100 GPUs


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


def _toy(round_s: float, config: SimConfig, duration: float) -> Engine:
    jobs = [JobSpec(0, "j0", 0.0, duration, 1, 1, 1, "m")]
    return Engine([ServerSpec(0, V100, 8, Pool.TRAINING)], jobs, Restarter(round_s), config=config)


def test_guard_stops_a_job_restarted_within_its_restart_overhead():
    # a round every 10 s, a restart overhead of 31 s: job 0 never runs a second of work
    engine = _toy(10.0, SimConfig(sample_s=0.0), 1000.0)
    with pytest.raises(
        DecisionError,
        match=rf"^policy restarter: job 0 \(j0\) restarted {MAX_FUTILE_RESTARTS} times without progress",
    ):
        engine.run()
    # the first start at t=0 sets the mark; the MAX_FUTILE_RESTARTS-th restart after it is refused
    assert engine.now == 10.0 * MAX_FUTILE_RESTARTS


def test_guard_counts_work_lost_to_the_checkpoint_as_no_progress():
    # 100 s rounds, 31 s overhead: 69 s of work per run, lost each time (checkpoints every 1800 s)
    engine = _toy(100.0, SimConfig(sample_s=0.0, checkpoint_interval_s=1800.0), 1000.0)
    with pytest.raises(DecisionError, match=f"restarted {MAX_FUTILE_RESTARTS} times without progress"):
        engine.run()
    assert engine.view.state(0).work_done == 0.0


def test_guard_lets_a_job_that_progresses_be_restarted_any_number_of_times():
    # the same restarts, nothing lost on preemption: with 1 s of work per round (rounds of 32 s)
    # a job of twice the bound's seconds takes twice the bound's restarts, and finishes
    r = _toy(32.0, SimConfig(sample_s=0.0, checkpoint_interval_s=0.0), 2.0 * MAX_FUTILE_RESTARTS).run()
    assert r.preemptions[0] == 2 * MAX_FUTILE_RESTARTS - 1
    assert np.isfinite(r.finish[0])


def _mixed_trace(tmp_path, big: int) -> scenarios.Scenario:
    rows = ["a,0,20000,32,", "b,0,20000,32,", f"c,10,20000,{big},"]  # an empty gpu_type: any type
    p = tmp_path / "t.csv"
    p.write_text("\n".join(["job_id,submit_time_s,duration_s,num_gpus,gpu_type", *rows]) + "\n")
    return scenarios.get("trace", {"workload.trace": str(p), "cluster.training_mix": MIXED})


def _servers(detail: str) -> set[int]:
    """The servers of a start's log detail ("s0x8 s1x8")."""
    return {int(part[1:].split("x")[0]) for part in detail.split()}


def test_tiresias_never_preempts_for_a_gang_that_no_gpu_type_holds(tmp_path):
    # c asks 60 GPUs: 80 in all, but one type holds at most 48. Counting GPUs over both types,
    # Tiresias chose c every round, preempted b for it, could not start it, restarted b: a
    # livelock (the guard stopped it). Now a and b run through, and c is left for the stall guard.
    # (evaluate.py refuses this trace for tiresias, which never borrows: c fits only the loans of
    # a policy that does. borrowing=True keeps c, to drive Tiresias into the old trap.)
    r = scenarios.simulate(_mixed_trace(tmp_path, 60), make("tiresias"), 0, borrowing=True)
    assert np.isfinite(r.finish[:2]).all() and not np.isfinite(r.finish[2])
    assert r.preemptions.sum() == 0
    assert (r.work_done[:2] == r.work[:2]).all()


def test_tiresias_on_a_mixed_cluster_preempts_only_to_start_another_job(tmp_path):
    # c (40 GPUs) fits the V100s only. Counting GPUs over both types, Tiresias preempted b (on
    # the A100s) for c, which could not start there, and restarted b: 66 futile preemptions.
    # Now every preemption frees GPUs that another job starts on at the same instant.
    r = scenarios.simulate(_mixed_trace(tmp_path, 40), make("tiresias"), 0, log=True)
    assert np.isfinite(r.finish).all()
    assert r.log is not None
    held: dict[int, set[int]] = {}
    preempts = 0
    for t, what, who, detail in r.log:
        if what == "start":
            held[who] = _servers(detail)
        elif what == "preempt":
            preempts += 1
            taken = [_servers(d) for (t2, k, w, d) in r.log if t2 == t and k == "start" and w != who]
            assert any(held[who] & servers for servers in taken), f"job {who} preempted for nothing at t={t}"
    assert preempts > 0  # LAS does preempt here: the test is not vacuous


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


@pytest.mark.parametrize("policy", ["sjf", "tiresias", "aryl"])
def test_a_burst_of_jobs_at_one_instant_all_finish(policy):
    b = burst(3000)
    assert all(j.submit_time == 0.0 for j in b.jobs)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(120)  # a watchdog against hangs, not a speed test
    try:
        r = b.engine(policy).run()
    except _Hang:
        pytest.fail(f"{policy} did not drain a burst of 3,000 jobs within the watchdog's 120 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not r.truncated
    assert np.isfinite(r.finish).all()
    np.testing.assert_allclose(r.work_done, r.work)


def test_ranked_queue_walks_in_key_order_and_passes_over_classes_that_do_not_fit():
    q = RankedQueue()
    small, big = (1, None), (8, frozenset({"V100-32GB"}))
    for job, size in enumerate([small, big, small, big, small]):
        q.add(job, (float(10 - job), job), size)  # the later, the smaller the key
    assert [int(k[-1]) for k in q.walk(lambda size: True)] == [4, 3, 2, 1, 0]
    assert [int(k[-1]) for k in q.walk(lambda size: size == small)] == [4, 2, 0]
    q.add(4, (99.0, 4), small)  # re-adding moves the job
    seen = []
    for key in q.walk(lambda size: True):
        seen.append(int(key[-1]))
        q.discard(int(key[-1]))  # the consumer may discard what it was just given
    assert seen == [3, 2, 1, 0, 4]
    assert len(q) == 0


class _TryEveryJob:
    """sjf's ranking as it was: every pending job in key order, until no GPU is free."""

    blocking = False

    def __init__(self) -> None:
        self._queue = SortedQueue(by_remaining)

    def rank(self, view: ClusterView) -> Iterator[int]:
        self._queue.sync(view)
        for job in self._queue.walk(view):
            if free_gpus(view, TRAINING_ONLY) == 0:
                return
            yield job


@pytest.mark.parametrize("scenario", ["cloud", "loaning"])
def test_sjf_passing_over_jobs_that_cannot_fit_starts_the_same_jobs(scenario):
    # elastic jobs (min_gpus < num_gpus), several GPU types (cloud) and loaned servers (loaning)
    s = scenarios.get(scenario, {"workload.synthetic.num_jobs": "150"})
    ref = ComposedScheduler("sjf", _TryEveryJob(), PackPlacement())
    a, b = scenarios.simulate(s, make("sjf"), 0), scenarios.simulate(s, ref, 0)
    assert any(j.min_gpus < j.num_gpus for j in a.jobs)
    np.testing.assert_array_equal(a.first_start, b.first_start)
    np.testing.assert_array_equal(a.finish, b.finish)


def test_sorted_keys_stay_in_order_through_adds_removes_and_bursts(monkeypatch):
    monkeypatch.setattr(SortedKeys, "BLOCK", 2)  # blocks of 2-4 keys: every split and merge is reached
    rng = random.Random(0)
    keys, ref = SortedKeys(), set()
    for _ in range(3000):
        r = rng.random()
        if r < 0.45:
            key = (float(rng.randrange(8)), float(rng.randrange(200)))
            if key not in ref:
                keys.add(key)
                ref.add(key)
        elif r < 0.8 and ref:
            key = rng.choice(sorted(ref))
            keys.remove(key)
            ref.discard(key)
        elif r < 0.85:  # a burst: sorted in at once when many beside those there
            new = {(float(rng.randrange(8)), float(rng.randrange(200, 400))) for _ in range(rng.randrange(30))}
            keys.extend(new - ref)
            ref |= new
        else:
            probe = (float(rng.randrange(8)), rng.random() * 400)
            assert keys.after(probe) == min((k for k in ref if k > probe), default=None)
        assert list(keys) == sorted(ref) and len(keys) == len(ref)
        if ref:
            assert keys.first() == min(ref)


def test_ranked_queue_extend_is_add_one_by_one():
    sizes = [(1, None), (2, None), (4, frozenset({"V100-32GB"}))]
    one, burst_of = RankedQueue(), RankedQueue()
    for q in (one, burst_of):
        q.add(7, (5.0, 7), sizes[0])  # moved by the burst below
    entries = [(j, (float(j % 11), j), sizes[j % 3]) for j in range(100)] + [(3, (0.5, 3), sizes[1])]
    for job, key, size in entries:
        one.add(job, key, size)
    burst_of.extend(entries)
    everything = [k for k in one.walk(lambda size: True)]
    assert everything == list(burst_of.walk(lambda size: True)) and len(everything) == len(one) == 100
    assert (0.5, 3) in everything and (3.0, 3) not in everything  # a job listed twice keeps its last entry


def _fresh_level(policy: Tiresias, view: ClusterView, job: int) -> int:
    """The job's queue from its attained service now (less what promotions forgave)."""
    offset = float(policy._floats[job, kern.OFFSET])
    return bisect.bisect_right(policy._thresholds, view.attained_service(job) - offset)


class _CheckedTiresias(Tiresias):
    """Tiresias checking, at every round, the ranks it keeps for the running jobs against a
    ranking of every running job made afresh (what the round did before they were kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds = 0

    def _up_to_date(self, view: ClusterView) -> None:
        super()._up_to_date(view)
        running = [j for j in view.running if view.status_of(j) == JobStatus.RUNNING]
        kept = sorted(self._ints[: self._meta[kern.RUNS], kern.LISTED].tolist())
        assert kept == sorted(running), f"t={view.now}: the jobs kept as running differ from the running ones"
        for j in running:
            assert self._ints[j, kern.STATE] == kern.RUNNING
            assert self._ints[j, kern.LEVEL] == _fresh_level(self, view, j), f"t={view.now}: job {j}'s kept level"
            assert self._ints[j, kern.GPUS] == view.workers(j)
            assert self._training[self._ints[j, kern.ON]] == view.allocation(j)[1]
        self.rounds += 1


@pytest.mark.parametrize(
    "scenario, overrides",
    [("default", {}), ("cloud", {}), ("default", {"sim.mtbf_h": "5"})],  # failures: the engine preempts too
)
def test_tiresias_kept_ranks_are_the_fresh_ranks_at_every_round(scenario, overrides):
    s = scenarios.get(scenario, {"workload.synthetic.num_jobs": "300", **overrides})
    policy = _CheckedTiresias()
    r = scenarios.simulate(s, policy, 0)
    assert policy.rounds > 100 and r.preemptions.sum() > 100


def test_tiresias_takes_over_jobs_it_did_not_start():
    # sjf decides the first 150 decisions, then Tiresias: at its first round it ranks afresh the
    # jobs sjf started (its rebuild), and keeps their ranks right from there on
    s = scenarios.get("default", {"workload.synthetic.num_jobs": "300"})
    b = scenarios.build(s, 0, False)
    policy = _CheckedTiresias()
    engine = Engine(b.servers, b.jobs, policy, scenarios.shared_throughput(), b.demand, s.sim, b.failure_rng)
    first = make("sjf")
    first.round_s = policy.round_s  # the engine's round ticks were set for Tiresias
    engine.scheduler = first
    engine.start()
    decisions = 0
    while engine.next_decision():
        decisions += 1
        if decisions == 150:
            assert len(engine.view.running) > 0
            engine.scheduler = policy
        engine._decide()
    r = engine.result()
    assert policy.rounds > 100 and int(np.isfinite(r.finish).sum()) == 300


class _CheckedStarts(Tiresias):
    """Tiresias checking that every job it starts is ranked by a rank made afresh (the rank it
    waited with is reused: its service does not grow while it waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    def _started(self, view: ClusterView, job: int, on: int, gpus: int, service: float = float("nan")) -> None:
        if service != service:  # a pending job (not a rebuild's)
            level = self._ints[job, kern.LEVEL]
            assert self._ints[job, kern.STATE] == kern.PENDING
            assert level == _fresh_level(self, view, job), f"t={view.now}: job {job} starts at level {level}"
            self.starts += 1
        super()._started(view, job, on, gpus, service)


@pytest.mark.parametrize(
    "scenario, overrides",
    [
        ("default", {}),
        ("cloud", {}),  # several training types
        ("default", {"sim.mtbf_h": "5"}),  # failures: the engine preempts too
        ("default", {"cluster.training_mix": MIXED}),
    ],
)
def test_tiresias_starts_each_job_at_its_fresh_rank(scenario, overrides):
    s = scenarios.get(scenario, {"workload.synthetic.num_jobs": "300", **overrides})
    policy = _CheckedStarts()
    r = scenarios.simulate(s, policy, 0)
    assert policy.starts > int(r.preemptions.sum()) > 100  # a restart after every preemption, and the first starts


def test_tiresias_size_classes_tell_apart_only_what_a_fit_reads():
    # training: V100s and A100s; inference: T4s. A class is the GPUs and the training types a
    # job allows, None for every one of them, whatever the job's own list says.
    servers = [
        ServerSpec(0, V100, 8, Pool.TRAINING),
        ServerSpec(1, A100, 8, Pool.TRAINING),
        ServerSpec(2, V100, 8, Pool.TRAINING),
        ServerSpec(3, T4, 4, Pool.INFERENCE),
    ]
    v, a, t = V100.name, A100.name, T4.name
    cases = {
        None: None,
        frozenset({v, a}): None,
        frozenset({v, a, t}): None,
        frozenset({v}): frozenset({v}),
        frozenset({a, t}): frozenset({a}),
        frozenset({t}): frozenset(),
    }
    for allowed, expected in cases.items():
        spec = JobSpec(0, "j", 0.0, 100.0, 4, 4, 4, "resnet50", gpu_types=allowed)
        view = Engine(servers, [spec], Tiresias()).view
        assert Tiresias()._size(view, spec) == (4, expected), allowed


def _queues(policy: Tiresias) -> dict[int, list[tuple[int, int]]]:
    """Each level's (job, state) in the order of the jobs' places."""
    ints = policy._ints
    held = np.flatnonzero((ints[:, kern.STATE] == kern.PENDING) | (ints[:, kern.STATE] == kern.RUNNING))
    out: dict[int, list[tuple[int, int]]] = {}
    for j in sorted(held.tolist(), key=lambda j: ints[j, kern.SLOT]):
        out.setdefault(int(ints[j, kern.LEVEL]), []).append((j, int(ints[j, kern.STATE])))
    return out


class _CheckedOrder(Tiresias):
    """Tiresias checking, after every change to its tables, each queue's order against the list
    of Tiresias' simulator: the running jobs first; among the jobs waiting (or running) at a
    level before and after, the same order; a job that newly waits there after every job that
    waited there before, unless it ran there just before (preempted: before them); a job that
    newly runs there after every job that ran there before."""

    def __init__(self) -> None:
        super().__init__()
        self.before: dict[int, list[tuple[int, int]]] = {}
        self.seen = {"arrived or moved": 0, "preempted": 0, "started": 0}

    def _apply(self, done, new, entries) -> None:  # type: ignore[no-untyped-def]
        super()._apply(done, new, entries)
        now = _queues(self)
        P, R = kern.PENDING, kern.RUNNING
        for level, line in now.items():
            states = [state for _, state in line]
            assert states == sorted(states, reverse=True), f"level {level}: a pending job before a running one"
            old = self.before.get(level, [])
            for state in (P, R):
                was = [j for j, s in old if s == state]
                still = {j for j, s in line if s == state}
                kept = [j for j in was if j in still]
                assert [j for j, s in line if s == state and j in set(was)] == kept, f"level {level}: order changed"
                place = {j: i for i, (j, _) in enumerate(line)}
                for j, s in line:
                    if s != state or j in set(was):
                        continue
                    if state == P and (j, R) in old:  # preempted: first among those that waited
                        assert all(place[j] < place[k] for k in kept), f"level {level}: preempted job {j}"
                        self.seen["preempted"] += 1
                    else:
                        assert all(place[j] > place[k] for k in kept), f"level {level}: job {j} not last"
                        self.seen["arrived or moved" if state == P else "started"] += 1
        self.before = now


@pytest.mark.parametrize("scenario", ["default", "cloud"])
def test_tiresias_queues_keep_the_order_of_its_own_simulator(scenario):
    s = scenarios.get(scenario, {"workload.synthetic.num_jobs": "300"})
    policy = _CheckedOrder()
    r = scenarios.simulate(s, policy, 0)
    assert int(np.isfinite(r.finish).sum()) == 300
    assert min(policy.seen.values()) > 50, policy.seen
    assert policy._meta[kern.COMPACTIONS] > 0  # places given again in the middle, the order kept


def test_tiresias_a_preempted_job_waits_first_and_a_new_one_last():
    # five jobs wait in queue 0 (in id order); 2 and 4 start; then 2 is preempted, 5 arrives:
    # the walk of the waiting jobs is 2 (it ran), 0, 1, 3, then 5; a compaction keeps it
    servers = [ServerSpec(0, V100, 8, Pool.TRAINING)]
    specs = [JobSpec(j, f"j{j}", 0.0, 100.0, 2, 2, 2, "resnet50") for j in range(6)]
    view = Engine(servers, specs, Tiresias()).view
    policy = Tiresias()
    policy._tables(view)
    kind = (policy._size_class(view, specs[0]), policy._type_list(view, specs[0]))

    def wait(jobs, service=0.0):
        policy._list(view, jobs)
        policy._apply((), (), [x for j in jobs for x in (j, *kind, service, 0.0, 1.0)])

    def walk():
        order, at, places = [], 0, policy._places
        args = (policy._ints, policy._bits, policy._counts, policy._at_slot, policy._classes, 3, np.array([8]))
        while (at := policy._k.next_fit(*args, at)) >= 0:
            order.append(int(policy._at_slot[at % places]))
            at += 1
        return order

    wait([4, 3, 2, 1, 0])
    assert walk() == [0, 1, 2, 3, 4]
    for j in (2, 4):
        policy._started(view, j, 0, 2)
    policy._apply((), (), [])
    assert walk() == [0, 1, 3] and _queues(policy)[0] == [(2, kern.RUNNING), (4, kern.RUNNING)] + [
        (j, kern.PENDING) for j in (0, 1, 3)
    ]
    policy._apply((), [2], [])  # 2 stops (it re-enters the queue), then waits again
    wait([2], 1.0)
    wait([5])
    assert walk() == [2, 0, 1, 3, 5]
    kern._compact(policy._ints, policy._bits, policy._at_slot, policy._meta, 3)
    assert walk() == [2, 0, 1, 3, 5] and _queues(policy)[0][0] == (4, kern.RUNNING)
