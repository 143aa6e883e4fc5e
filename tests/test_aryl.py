"""Aryl: reclaim (greedy vs exhaustive), and hand-built engine scenarios for placement, reclaim,
phase 2 and phase 1's priority over flexible workers."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from envs.sim.engine import Engine, SimConfig
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.model import T4, V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import ComposedScheduler
from heuristics.aryl import ArylOrdering, build
from heuristics.aryl_config import ArylConfig
from heuristics.aryl_place import ArylPlacement, best_fit
from heuristics.aryl_reclaim import (
    ArylReclaim,
    LoanedServer,
    choose_reclaim,
    choose_reclaim_exhaustive,
    reclaim_cost,
)
from heuristics.aryl_scaling import AfsScaling, ArylRoom, ArylScaling
from heuristics.registry import make

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)


class Linear:
    """Perfectly linear scaling: rate = workers / requested x GPU speed."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def job(i, submit, duration, gpus, lo=None, hi=None, **kw) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, lo or gpus, hi or gpus, "m", **kw)


def run(srv, jobs, policy, demand=None, config=NO_OVERHEAD):
    return Engine(srv, jobs, policy, Linear(), demand, config, log=True).run()


def events(r, *kinds):
    return [e for e in r.log if e[1] in kinds]


def loaning(tmp_path, rows, servers=2, notice=120.0):
    p = tmp_path / "demand.csv"
    p.write_text("time_s,utilization\n" + "".join(f"{t},{u}\n" for t, u in rows))
    inf = InferenceConfig(series_csv=str(p), step_s=300.0, headroom=0.0, notice_s=notice)
    return DemandCurve(inf, servers)


# ----------------------------------------------------------------------------- registry
def test_registered_variants_compose_the_components_and_borrow():
    for name in ("aryl", "aryl-basic", "aryl-nogroup", "afs"):
        p = make(name)
        assert isinstance(p, ComposedScheduler) and p.borrows and p.name == name
        assert isinstance(p.ordering, ArylOrdering) and isinstance(p.placement, ArylPlacement)
        assert isinstance(p.reclaimer, ArylReclaim)
    assert isinstance(make("aryl").scaling, ArylScaling) and isinstance(make("aryl").preemption, ArylRoom)
    assert isinstance(make("afs").scaling, AfsScaling)
    assert not make("aryl-basic").placement.elastic
    assert not make("aryl-nogroup").scaling.group_flex and not make("aryl-nogroup").placement.loaned_first
    assert not make("fifo").borrows
    assert make("aryl", {"age_bound_s": "60", "churn_factor": "0"}).ordering.age_bound_s == 60.0


# ----------------------------------------------------------------------------- reclaim
def test_reclaim_takes_empty_then_flex_only_then_fewest_preemptions():
    servers = [
        LoanedServer(0, frozenset({1})),
        LoanedServer(1, frozenset({2, 3})),
        LoanedServer(2, frozenset({2, 3})),
        LoanedServer(3, flex_jobs=frozenset({4, 5}), flex_gpus=4),
        LoanedServer(4),
        LoanedServer(5, flex_jobs=frozenset({6}), flex_gpus=6),
    ]
    assert choose_reclaim(servers, 1) == [4]
    assert choose_reclaim(servers, 3) == [4, 5, 3]
    # two more: servers 1 and 2 share both jobs (2 preemptions) beat server 0 + one of them (3)
    assert choose_reclaim(servers, 5) == [4, 5, 3, 1, 2]
    assert reclaim_cost(servers, choose_reclaim(servers, 5)) == (2, 0.0)
    # one more: server 0 alone costs 1 preemption
    assert choose_reclaim(servers, 4) == [4, 5, 3, 0]


def test_reclaim_ties_go_to_fewest_gpu_hours_lost():
    servers = [LoanedServer(0, frozenset({1})), LoanedServer(1, frozenset({2}))]
    assert choose_reclaim(servers, 1, {1: 5.0, 2: 1.0}) == [1]
    assert choose_reclaim_exhaustive(servers, 1, {1: 5.0, 2: 1.0}) == [1]


def packed_instance(rng: np.random.Generator, n: int) -> list[LoanedServer]:
    """``n`` loaned 8-GPU servers filled by best fit with Philly-like jobs: half of them elastic
    (base = half the request, flexible workers on other servers), to 30-100% occupancy."""
    free, cap, ids = np.full(n, 8), np.full(n, 8), np.arange(n)
    base, flex, gpus = collections.defaultdict(set), collections.defaultdict(set), collections.defaultdict(int)
    target = rng.uniform(0.3, 1.0) * 8 * n
    for j in range(200):
        if 8 * n - free.sum() >= target:
            break
        g = int(rng.choice([1, 2, 4, 8, 16], p=[0.6, 0.12, 0.12, 0.12, 0.04]))
        elastic = rng.random() < 0.5
        b = max(1, g // 2) if elastic else g
        alloc = best_fit(ids, free, cap, b)
        if alloc is None:
            continue
        for s, k in alloc:
            free[s] -= k
            base[s].add(j)
        x = int(rng.integers(0, 2 * g - b + 1)) if elastic else 0
        if x:
            other = free.copy()
            other[[s for s, _ in alloc]] = 0
            for s, k in best_fit(ids, other, cap, x) or ():
                free[s] -= k
                flex[s].add(j)
                gpus[s] += k
    return [LoanedServer(s, frozenset(base[s]), frozenset(flex[s]), gpus[s]) for s in range(n)]


def test_greedy_reclaim_matches_exhaustive_on_packed_instances():
    rng = np.random.default_rng(2024)
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(150):
        n = int(rng.integers(2, 17))
        servers = packed_instance(rng, n)
        loss = {j: float(rng.random()) for s in servers for j in s.base_jobs}
        for k in range(1, n + 1):
            greedy = reclaim_cost(servers, choose_reclaim(servers, k, loss), loss)[0]
            best = reclaim_cost(servers, choose_reclaim_exhaustive(servers, k, loss), loss)[0]
            assert greedy >= best
            if k < 10:
                assert greedy == best, (servers, k)
            else:
                assert greedy <= 1.19 * best, (servers, k)
            if best:
                ratios[k < 10].append(greedy / best)
    assert len(ratios[True]) > 500 and len(ratios[False]) > 50


def test_greedy_reclaim_within_bounds_on_arbitrary_set_systems():
    # adversarial instances (any job on any servers): the greedy is not always optimal here,
    # but stays within the paper's 19% above 10 servers and within 1/3 below (2 vs 3 jobs)
    rng = np.random.default_rng(5)
    worse = 0
    for _ in range(150):
        n, jobs = int(rng.integers(2, 13)), int(rng.integers(1, 20))
        servers = [
            LoanedServer(s, frozenset(rng.choice(jobs, size=int(rng.integers(0, 4)), replace=True).tolist()))
            for s in range(n)
        ]
        for k in range(1, n + 1):
            g = reclaim_cost(servers, choose_reclaim(servers, k))[0]
            e = reclaim_cost(servers, choose_reclaim_exhaustive(servers, k))[0]
            assert e <= g <= max(e + 1, 4 * e / 3)
            worse += g > e
    assert worse < 60


# ----------------------------------------------------------------------------- engine scenarios
def loan_cluster() -> list[ServerSpec]:
    return [
        ServerSpec(0, V100, 8, Pool.TRAINING),
        ServerSpec(1, T4, 8, Pool.INFERENCE),
        ServerSpec(2, T4, 8, Pool.INFERENCE),
    ]


def test_bfd_puts_elastic_jobs_on_loaned_servers_with_flex_apart_and_reclaim_scales_in(tmp_path):
    # both inference servers are idle until t=600, then one is needed back (notice 120 s).
    demand = loaning(tmp_path, [(0, 0.0), (600, 0.5), (100_000, 0.5)])
    jobs = [
        job(0, 0, 1000, 4, lo=2, hi=8),  # elastic, any type
        job(1, 0, 100, 1),  # inelastic, any type
    ]
    r = run(loan_cluster(), jobs, make("aryl"), demand)
    assert events(r, "start", "scale", "reclaim", "returned", "preempt") == [
        # shortest remaining time first: j1 (100 s) to a training server, j0 (base 2 of 4:
        # 2000 s) to a loaned server (the lowest id among the equally tight)
        (0.0, "start", 1, "s0x1"),
        (0.0, "start", 0, "s1x2"),
        # phase 2: j0's 6 extra GPUs on the other loaned server, never beside its base
        (0.0, "scale", 0, "s1x2 +s2x6"),
        # the reclaim takes the flex-only server; phase 2 scales j0 in at once (no preemption)
        (600.0, "reclaim", 2, "deadline 720"),
        (600.0, "scale", 0, "s1x2"),
        (720.0, "returned", 2, ""),
    ]
    assert r.preemptions.sum() == 0 and r.preemptions_reclaim.sum() == 0
    # T4 = 1/3 of a V100: 8 workers until 600 (400 of 1000 work), then 2 workers (rate 1/6)
    assert r.finish[0] == pytest.approx(600.0 + 600.0 * 6)
    assert r.finish[1] == 100.0


def test_engine_deadline_scales_in_a_flex_only_server_without_preemption(tmp_path):
    # the same cluster without phase 2's early move (the policy never rescales): the engine
    # empties the flex-only server at the deadline by a scale-in, not a preemption
    demand = loaning(tmp_path, [(0, 0.0), (600, 0.5), (100_000, 0.5)])

    class Frozen(ArylScaling):
        first = True

        def scale(self, view):
            if self.first:
                self.first = False
                yield from super().scale(view)

    p = build("aryl")
    p.scaling = Frozen(ArylConfig(), p.placement, p.ordering)
    r = run(loan_cluster(), [job(0, 0, 1000, 4, lo=2, hi=8)], p, demand)
    assert events(r, "scale", "reclaim", "returned", "preempt") == [
        (0.0, "scale", 0, "s1x2 +s2x6"),
        (600.0, "reclaim", 2, "deadline 720"),
        (720.0, "scale", 0, "s1x2"),
        (720.0, "returned", 2, ""),
    ]
    assert r.preemptions_reclaim.sum() == 0


def test_nogroup_places_elastic_jobs_on_training_servers_first(tmp_path):
    demand = loaning(tmp_path, [(0, 0.0)])
    r = run(loan_cluster(), [job(0, 0, 1000, 4, lo=2, hi=8)], make("aryl-nogroup"), demand)
    # base on the training server, and its flex may share that server
    assert events(r, "start", "scale") == [(0.0, "start", 0, "s0x2"), (0.0, "scale", 0, "s0x2 +s0x6")]


def test_basic_runs_elastic_jobs_at_their_request_without_scaling(tmp_path):
    demand = loaning(tmp_path, [(0, 0.0)])
    r = run(loan_cluster(), [job(0, 0, 1000, 4, lo=2, hi=8)], make("aryl-basic"), demand)
    assert events(r, "start", "scale") == [(0.0, "start", 0, "s0x4")]
    assert r.finish[0] == 1000.0


def two_servers_of_4() -> list[ServerSpec]:
    return [ServerSpec(0, V100, 4, Pool.TRAINING), ServerSpec(1, V100, 4, Pool.TRAINING)]


def test_phase2_gives_more_to_the_job_with_the_larger_jct_reduction():
    # Two elastic jobs of 2..6 GPUs (requested 2), A = 600 s, B = 300 s of work at 2 GPUs.
    # Phase 1 puts both bases on server 0 (best fit); phase 2 has server 1's 4 GPUs.
    # T_A(2 + x) = 1200 / (2 + x): reductions 200, 300, 360, 400 for x = 1..4; B's are half.
    # Best use of 4 GPUs: A +3, B +1 (460 s; A +4 gives 400, A +2 B +2 450).
    jobs = [job(0, 0, 600, 2, lo=2, hi=6), job(1, 0, 300, 2, lo=2, hi=6)]
    p = make("aryl", {"churn_factor": "0"})
    r = run(two_servers_of_4(), jobs, p)
    assert events(r, "start", "scale", "finish") == [
        (0.0, "start", 1, "s0x2"),  # B is shorter: first (both 2 GPUs)
        (0.0, "start", 0, "s0x2"),
        (0.0, "scale", 0, "s0x2 +s1x3"),
        (0.0, "scale", 1, "s0x2 +s1x1"),
        # B: 300 work at 3/2 per s -> 200 s; A: 500 of 600 done at 5/2 per s, then all 4 of
        # server 1 (+4, its base server's free GPUs excluded): 100 / 3 s more
        (200.0, "finish", 1, ""),
        (200.0, "scale", 0, "s0x2 +s1x4"),
        (pytest.approx(200.0 + 100.0 / 3), "finish", 0, ""),
    ]


def test_afs_gives_gpus_by_marginal_throughput_ties_to_the_lower_id():
    # linear scaling: every extra GPU adds one GPU of throughput to either job; AFS breaks the
    # tie by job id and gives A all four (no regard for the JCT they save)
    jobs = [job(0, 0, 600, 2, lo=2, hi=6), job(1, 0, 300, 2, lo=2, hi=6)]
    r = run(two_servers_of_4(), jobs, make("afs"))
    assert events(r, "scale")[0] == (0.0, "scale", 0, "s0x2 +s1x4")


def test_afs_plans_past_max_gpus_and_holds_what_the_job_cannot_use():
    # AFS believes in unbounded elasticity: with linear scaling and ties to the lower id its plan
    # gives A all 8 free GPUs, A gets only its max (+2), and B, whose equal gains come second,
    # gets nothing; the other 6 GPUs stay free
    jobs = [job(0, 0, 600, 2, lo=2, hi=4), job(1, 0, 300, 2, lo=2, hi=4)]
    servers = [*two_servers_of_4(), ServerSpec(2, V100, 4, Pool.TRAINING)]
    r = run(servers, jobs, make("afs"))
    assert [e for e in events(r, "scale") if e[0] == 0.0] == [(0.0, "scale", 0, "s0x2 +s1x2")]
    # bounded by max_gpus (Aryl's knapsack), both jobs grow
    r = run(servers, jobs, make("aryl", {"churn_factor": "0"}))
    assert {e[2] for e in events(r, "scale") if e[0] == 0.0} == {0, 1}


def test_max_ratio_keeps_aryl_to_its_range_where_afs_takes_all_it_plans():
    # jobs of 2..10 GPUs (requested 2), 8 free GPUs on servers 1 and 2 after the bases: with
    # max_ratio 1.5 Aryl gives each job at most 3 GPUs (+1); AFS, unbounded as in Aryl's
    # comparison, gives A all 8 (ties to the lower id, linear scaling)
    jobs = [job(0, 0, 600, 2, lo=2, hi=10), job(1, 0, 300, 2, lo=2, hi=10)]
    servers = [*two_servers_of_4(), ServerSpec(2, V100, 4, Pool.TRAINING)]
    r = run(servers, jobs, make("aryl", {"churn_factor": "0", "max_ratio": "1.5"}))
    assert sorted(e for e in events(r, "scale") if e[0] == 0.0) == [
        (0.0, "scale", 0, "s0x2 +s1x1"),
        (0.0, "scale", 1, "s0x2 +s1x1"),
    ]
    r = run(servers, jobs, make("afs"))
    assert [e for e in events(r, "scale") if e[0] == 0.0] == [(0.0, "scale", 0, "s0x2 +s1x4 s2x4")]


def test_phase1_takes_flexible_gpus_back_for_a_pending_job():
    # A (elastic 2..6) runs with 4 flexible GPUs on server 1 when C (4 GPUs, inelastic)
    # arrives: C fits only where A's flexible workers are, so A scales in and C starts there.
    jobs = [job(0, 0, 1000, 2, lo=2, hi=6), job(1, 100, 100, 4)]
    r = run(two_servers_of_4(), jobs, make("aryl"))
    assert events(r, "start", "scale", "finish")[:6] == [
        (0.0, "start", 0, "s0x2"),
        (0.0, "scale", 0, "s0x2 +s1x4"),
        (100.0, "scale", 0, "s0x2"),
        (100.0, "start", 1, "s1x4"),
        (200.0, "finish", 1, ""),
        (200.0, "scale", 0, "s0x2 +s1x4"),
    ]
    assert r.queued[1] == 0.0


def test_age_bound_stops_backfill_past_an_old_job():
    # One 8-GPU server. j0 holds it until 1000; j1 (8 GPUs, long) waits from t=10; 1-GPU jobs of
    # 600 s arrive every 500 s from t=1000 and, being shorter, keep one GPU busy: j1 starves
    # under plain SRTF with backfill. With a 1200 s age bound j1 is aged from 1210: the job
    # arriving at 1500 is held back, and j1 starts when the 1-GPU job of 1000 ends (1600).
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING)]
    jobs = [job(0, 0, 1000, 8), job(1, 10, 5000, 8)] + [job(2 + i, 1000 + 500 * i, 600, 1) for i in range(6)]
    aged = run(srv, jobs, make("aryl", {"age_bound_s": "1200"}))
    assert aged.first_start[1] == 1600.0
    assert aged.first_start[3] == 6600.0  # held behind j1
    plain = run(srv, jobs, make("aryl", {"age_bound_s": "1e9"}))
    assert plain.first_start[1] == 1000 + 500 * 5 + 600  # after the last small job


class Fixed:
    """Reclaim component that always gives back the given servers."""

    def __init__(self, *servers: int) -> None:
        self.servers = list(servers)

    def reclaim(self, view, k):
        return self.servers[:k]


@pytest.mark.parametrize("rescue", [True, False])
def test_a_job_whose_base_is_reclaimed_is_rebased_on_its_other_workers(tmp_path, rescue):
    # j0 runs its base on server 1 and 6 flexible GPUs on server 2; server 1 is reclaimed.
    # With rescue, j0 moves its base onto the 6 GPUs it keeps (one restart, no preemption);
    # without, the engine preempts it at the deadline.
    demand = loaning(tmp_path, [(0, 0.0), (600, 0.5), (100_000, 0.5)])
    p = make("aryl", {"rescue": str(rescue).lower()})
    p.reclaimer = Fixed(1)
    r = run(loan_cluster(), [job(0, 0, 1000, 4, lo=2, hi=8)], p, demand)
    if rescue:
        assert events(r, "reclaim", "migrate", "preempt", "returned") == [
            (600.0, "reclaim", 1, "deadline 720"),
            (600.0, "migrate", 0, "s2x6"),
            (720.0, "returned", 1, ""),
        ]
        # 400 of 1000 done on 8 T4s by 600, then 6 T4s: 600 / (6 / 4 / 3) s more
        assert r.finish[0] == pytest.approx(1800.0)
        assert r.preemptions_reclaim[0] == 0
    else:
        assert events(r, "preempt")[0] == (720.0, "preempt", 0, "lost 0 reclaim")
        assert r.preemptions_reclaim[0] == 1


# ----------------------------------------------------------------------------- speed-ups keep the answers
def _fields(c):
    return (c.job, c.gpu_type, c.base, c.base_servers, c.flex, c.flex_ok, c.cur, c.doomed, c.top, c.until, c.prog)


@pytest.mark.parametrize("scenario", ["loaning", "default"])
def test_movable_with_its_memo_answers_as_a_fresh_call_at_every_decision(scenario):
    """movable() keeps each job's verdict while its stamp and the placeability of its servers
    hold: at every phase-2 decision of a run with loans, reclaims and server failures, it returns
    (holds per server, and groups by type) what a call with no memo returns."""
    from envs.sim import scenarios
    from envs.sim.scenarios.base import simulate
    from heuristics.aryl_scaling import Movables, _refresh, movable

    seen = collections.Counter()
    memos = {False: Movables(), True: Movables()}

    class Checking(ArylScaling):
        def scale(self, view):
            for with_flex, memo in memos.items():
                want = [_fields(c) for c in movable(view, with_flex)]
                fresh = _refresh(view, with_flex, None)
                assert [_fields(c) for c in movable(view, with_flex, memo)] == want
                assert (memo.held, memo.held_by) == (fresh.held, fresh.held_by)
                by_type = collections.defaultdict(list)
                for f in want:
                    by_type[f[1]].append(f[0])
                assert {t: list(g) for t, g in memo.groups.items() if g} == by_type
                seen["candidates"] += len(want)
                seen["doomed"] += sum(f[7] for f in want)
            seen["unplaceable"] += bool(view.unplaceable_servers())
            yield from super().scale(view)

    policy = make("aryl")
    policy.scaling = Checking(ArylConfig(), policy.placement, policy.ordering)
    s = scenarios.get(scenario, {"workload.synthetic.num_jobs": "120", "sim.mtbf_h": "200"})
    simulate(s, policy, 0)
    assert seen["candidates"] > 100 and seen["unplaceable"] > 0 and seen["doomed"] > 0, seen


def _phase2_by_hand(scaling, view, group, cap, fm):
    """Phase 2 of one GPU type as the module docstring states it, in plain Python: each job's
    options (up to its room), values ``(T(0) - T(x)) - pen(x)`` less those at x = 0, solved by
    solve_mckp_dense; the jobs given another count than they hold, and the doomed ones."""
    from heuristics.aryl_scaling import _moving
    from heuristics.knapsack import solve_mckp_dense

    cfg = scaling.config
    size = fm.index.type_size[group[0].gpu_type]
    values, sizes = [], []
    for c, room in zip(group, scaling._rooms(group, fm), strict=True):
        rates = scaling.rates(view, c, size)
        rem = view.remaining_work(c.job)
        left = view.restarting_until(c.job) - view.now
        left = left if left > 0.0 else 0.0

        def pen(x, c=c, left=left):
            if c.doomed or x == c.cur:
                return 0.0
            a = cfg.restart_base_s + cfg.restart_per_gpu_s * (c.base + x) - left
            return (a if a > 0.0 else 0.0) * cfg.churn_factor

        t0 = rem / rates[0]
        v0 = (t0 - t0) - pen(0)
        top = min(c.top, cap, room)
        sizes.append(max(top, 0))
        values += [((t0 - rem / rates[x]) - pen(x)) - v0 for x in range(1, top + 1)]
    picks = solve_mckp_dense(values, sizes, cap) if any(sizes) else [-1] * len(group)
    return _moving(group, [p + 1 for p in picks])


@pytest.mark.parametrize("level", ["clairvoyant", "estimate"])
def test_phase2_kernel_answers_as_the_knapsack_by_hand_at_every_decision(level):
    """The compiled phase 2 (values, knapsack, the jobs whose placement may change) gives, at
    every phase-2 decision of a run with loans, reclaims and failures, the answer of the module
    docstring's formula solved by solve_mckp_dense, bit for bit."""
    from envs.sim import scenarios
    from envs.sim.scenarios.base import simulate

    seen = collections.Counter()

    class Checking(ArylScaling):
        def allocate(self, view, group, cap, index, free, total):
            got = super().allocate(view, group, cap, index, free, total)
            fm = self.memo.virtual(index, view)
            assert free.tolist() == fm.free and total == fm.type_total(group[0].gpu_type)
            if cap:  # every candidate's row is written, the scan for unwritten ones skipped or not
                assert all(c.written is self._rows for c in group)
            want = _phase2_by_hand(self, view, group, cap, fm)
            assert [(c.job, w) for c, w in got] == [(c.job, w) for c, w in want]
            seen["groups"] += 1
            seen["moving"] += len(got)
            return got

    policy = make("aryl")
    policy.scaling = Checking(ArylConfig(), policy.placement, policy.ordering)
    sets = {"workload.synthetic.num_jobs": "120", "sim.mtbf_h": "200", "information.level": level}
    s = scenarios.get("loaning", sets)
    simulate(s, policy, 0)
    assert seen["groups"] > 100 and seen["moving"] > 20, seen


def _spread_by_sorting(ids, free, need):
    """The spread of best_fit as first written: every server sorted by free GPUs (most first, ids
    ascending among equals), whole servers until one holds the rest, then the tightest of those
    left that does."""
    order = sorted(range(len(ids)), key=free.__getitem__, reverse=True)
    out, left = [], need
    for pos, i in enumerate(order):
        if free[i] >= left:
            j = min(order[pos:], key=lambda k: free[k] if free[k] >= left else float("inf"))
            return (*out, (ids[j], left))
        out.append((ids[i], free[i]))
        left -= free[i]
    raise AssertionError


def test_spread_walks_the_servers_as_a_sort_by_free_gpus_would():
    from heuristics.aryl_place import _spread

    rng = np.random.default_rng(0)
    for _ in range(3000):
        n = int(rng.integers(1, 40))
        free = [int(f) for f in rng.integers(0, 9, n) * (rng.random(n) < 0.7)]
        ids = sorted(int(i) for i in rng.choice(200, n, replace=False))
        if not sum(free):
            continue
        need = int(rng.integers(1, sum(free) + 1))
        for f in (free, tuple(free)):
            assert _spread(ids, f, need) == _spread_by_sorting(ids, free, need), (ids, free, need)
