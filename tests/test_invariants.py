"""Property-based invariants of the simulator (DESIGN section 2), over every registered policy.

Every policy of ``heuristics.registry.names()`` (new ones are covered automatically) and the
test-only ``Chaos`` policy run on hypothesis-drawn small worlds (``invariant_worlds.py``: small
clusters with loaning inference servers, failures, horizons, and jobs with every ``JobSpec``
feature). Three independent checkers:

- ``check_view``, through the read-only view at every decision point, after every action and at
  every reclaim: no server holds more GPUs than it has; a running job holds all its base workers
  (``num_gpus`` if inelastic, ``min_gpus..max_gpus`` with flex if elastic) on one allowed GPU
  type, anything else holds nothing; inference and failed servers hold nothing; a reclaiming
  server's deadline has not passed; the free-GPU index equals brute force; a job's rate is what
  its placement gives; queued + holding time = time since submission;
- ``replay``: the event log re-played on its own (occupancy per server after every record, each
  job's state machine with exactly one arrival and at most one finish, nothing after it, loans
  and reclaims: a reclaimed server is returned empty exactly at its deadline), against the result;
- ``check_result``: work conserved (``work_done == work`` for a finished job unless it was
  stopped at a required accuracy; lost work >= 0), provable lower bounds on each finished job's
  JCT and GPU-seconds, usage integrals within capacity, and ``summarize`` (finite numbers or None,
  shares in [0, 1]).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, note
from invariant_worlds import (
    HORIZON_CAP,
    MODELS,
    POLICIES,
    PROPERTY,
    TP,
    TYPES,
    World,
    make_policy,
    merged,
    simulate,
    worlds,
)

from envs.sim.accuracy import DEFAULT_CURVE
from envs.sim.engine import SimConfig, SimResult
from envs.sim.inference import InferenceConfig
from envs.sim.metrics import METRICS, summarize
from envs.sim.model import T4, V100, GpuType, JobSpec, Pool, ServerSpec
from envs.sim.policy import PLACEABLE, Action, Alloc, ClusterView, JobStatus, ServerStatus

EPS = 1e-9


def close_le(a: float, b: float, scale: float = 1.0) -> bool:
    """``a <= b`` up to float rounding at magnitude ``scale``."""
    return a <= b + 1e-9 * max(abs(a), abs(b), scale) + 1e-9


# ----------------------------------------------------------------------------- the view checker
def check_gang(spec: JobSpec, base: Alloc, flex: Alloc, types: Sequence[GpuType]) -> None:
    nb, nf = sum(n for _, n in base), sum(n for _, n in flex)
    assert all(n >= 1 for _, n in (*base, *flex)), f"job {spec.job_id}: empty worker group {base} {flex}"
    assert len({s for s, _ in base}) == len(base) and len({s for s, _ in flex}) == len(flex)
    if spec.elastic:
        assert spec.min_gpus <= nb and nb + nf <= spec.max_gpus, f"job {spec.job_id}: {nb}+{nf} out of range"
    else:
        assert nb == spec.num_gpus and nf == 0, f"job {spec.job_id} (inelastic): base {nb}, flex {nf}"
    assert len({t.name for t in types}) == 1, f"job {spec.job_id} spans GPU types {types}"
    assert spec.allows(types[0]), f"job {spec.job_id} runs on {types[0].name}, allowed {spec.gpu_types}"


def check_view(view: ClusterView, config: SimConfig, jobs: Sequence[int] | None = None) -> None:
    """Everything the view shows is consistent: every server, then the free-GPU index and every
    job, or (``jobs`` given: after an action) only those jobs."""
    now = view.now
    servers = view.servers
    held: dict[int, dict[int, int]] = defaultdict(dict)
    free_arr = view.free_gpus()
    for s in servers:
        sid, on, st_ = s.server_id, view.jobs_on(s.server_id), view.server_status(s.server_id)
        used = view.used(sid)
        assert sum(n for _, n in on) == used, f"t={now}: server {sid} hosts {on} but uses {used}"
        assert 0 <= used <= s.num_gpus, f"t={now}: server {sid} holds {used} of {s.num_gpus} GPUs"
        assert view.free(sid) == s.num_gpus - used
        assert all(n >= 1 for _, n in on)
        if s.pool == Pool.TRAINING:
            assert st_ in (ServerStatus.AVAILABLE, ServerStatus.FAILED), f"training server {sid} is {st_.name}"
        else:
            assert st_ != ServerStatus.AVAILABLE, f"inference server {sid} is AVAILABLE"
        if st_ in (ServerStatus.INFERENCE, ServerStatus.FAILED):
            assert not on, f"t={now}: server {sid} is {st_.name} but hosts {on}"
        deadline = view.reclaim_deadline(sid)
        if st_ == ServerStatus.RECLAIMING:
            assert deadline is not None and deadline >= now, f"t={now}: server {sid} held past deadline {deadline}"
        else:
            assert deadline is None, f"server {sid} is {st_.name} with a reclaim deadline {deadline}"
        assert free_arr[sid] == (s.num_gpus - used if st_ in PLACEABLE else 0)
        for job, n in on:
            held[job][sid] = n
    # the cluster's free-GPU index against brute force
    for tname, pool in view.pool_types() if jobs is None else ():
        mine = [s for s in servers if s.gpu_type.name == tname and s.pool == pool]
        frees = {s.server_id: int(free_arr[s.server_id]) for s in mine}
        assert view.total_free(tname, pool) == sum(frees.values())
        assert view.servers_by_free(tname, pool) == sorted((s for s in frees if frees[s]), key=lambda s: (-frees[s], s))
        for need in range(1, max(s.num_gpus for s in mine) + 1):
            fits = [s for s in frees if frees[s] >= need]
            assert view.best_fit(tname, pool, need) == (min(fits, key=lambda s: (frees[s], s)) if fits else None)
    running, pending = set(view.running), set(view.pending)
    assert not running & pending
    for j in range(view.num_jobs) if jobs is None else jobs:
        spec, state, status = view.job(j), view.state(j), view.status_of(j)
        assert (j in running) == (status in (JobStatus.RUNNING, JobStatus.PREEMPTING))
        assert (j in pending) == (status == JobStatus.PENDING)
        assert view.workers(j) == state.workers and view.attained_service(j) == state.attained_service
        assert view.work_done(j) == state.work_done
        assert merged(state.base, state.flex) == held.get(j, {}), f"t={now}: job {j} alloc vs servers"
        assert 0.0 <= state.work_done <= state.work_total * (1 + EPS)
        if status == JobStatus.FUTURE:
            assert spec.submit_time >= now
            continue
        assert spec.submit_time <= now
        if status in (JobStatus.RUNNING, JobStatus.PREEMPTING):
            check_gang(spec, state.base, state.flex, [servers[s].gpu_type for s in held[j]])
            assert state.gpu_type == servers[state.base[0][0]].gpu_type.name
            assert state.workers == sum(held[j].values())
            assert math.isnan(state.queued_since)
            if status == JobStatus.RUNNING:
                assert state.rate > 0.0
                # the rate the placement gives: the speed model, the slowest machine, the phase's
                # multiplier, co-location (every other job on one of its servers; ``contention``)
                slowest = min(servers[s].speed_factor for s in held[j])
                others = {k for s in held[j] for k, _ in view.jobs_on(s)} - {j}
                nominal = view.rate(j, state.workers, len(held[j]), state.gpu_type) * slowest
                nominal /= 1.0 + config.contention * len(others)
                mults = [m for _, m in spec.speed_phases] or [1.0]
                if config.fluctuation == 0.0:  # else a random factor per run
                    assert any(abs(state.rate - nominal * m) <= 1e-9 * state.rate for m in mults), (j, state, nominal)
            else:
                assert state.rate == 0.0
        else:
            assert state.base == state.flex == () and state.workers == 0 and state.rate == 0.0
        if status != JobStatus.DONE:
            # time since submission is exactly split into queued and holding time
            total = state.queued_time + state.run_time
            assert abs(total - (now - spec.submit_time)) <= 1e-9 * max(now, 1.0) + 1e-6, (j, state, now)
        lo, hi = spec.min_gpus * state.run_time, spec.max_gpus * state.run_time
        assert close_le(lo, state.attained_service, hi) and close_le(state.attained_service, hi, hi)


class Checked:
    """Wraps a policy; checks the simulator's true state (an oracle's view of the engine, whatever
    the world's information level) at every decision, after every action and at reclaims."""

    def __init__(self, inner: Any, config: SimConfig) -> None:
        self.inner = inner
        self.config = config
        self.name = inner.name
        self.borrows = inner.borrows
        self.decisions = self.actions = self.reclaims = 0
        self._last = -math.inf
        self.truth: ClusterView | None = None

    def attach(self, engine: Any) -> None:
        """Called by ``invariant_worlds.simulate`` once the engine exists."""
        self.truth = ClusterView(engine, oracle=True)

    @property
    def round_s(self) -> float | None:
        return self.inner.round_s  # type: ignore[no-any-return]

    def _tick(self, view: ClusterView) -> None:
        assert view.now >= self._last, "time went backwards"
        self._last = view.now
        assert self.truth is not None
        check_view(self.truth, self.config)

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self.decisions += 1
        self._tick(view)
        acted = False
        for action in self.inner.decide(view):
            yield action
            self.actions += 1
            acted = True
            assert self.truth is not None
            check_view(self.truth, self.config, (action.job,))  # servers, and the job acted on
        if acted:
            assert self.truth is not None
            check_view(self.truth, self.config)  # everything, once the decision is applied

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        self.reclaims += 1
        self._tick(view)
        loaned = set(view.loaned_servers())
        assert 1 <= k <= len(loaned)
        chosen = [int(s) for s in self.inner.reclaim(view, k)]
        assert len(set(chosen)) == k and set(chosen) <= loaned, f"{self.name}: reclaim({k}) gave {chosen}"
        return chosen


# ----------------------------------------------------------------------------- the log replay
ALLOC_RE = re.compile(r"s(\d+)x(\d+)")


def parse_alloc(detail: str) -> tuple[Alloc, Alloc]:
    base, _, flex = detail.partition(" +")
    as_alloc = lambda text: tuple((int(s), int(n)) for s, n in ALLOC_RE.findall(text))  # noqa: E731
    return as_alloc(base), as_alloc(flex)


@dataclass
class Replay:
    """What the event log alone says happened."""

    queued: np.ndarray
    first_start: np.ndarray
    counts: dict[str, np.ndarray]
    lost: np.ndarray
    stopped: np.ndarray
    kinds: set[str]


def replay(world: World, r: SimResult) -> Replay:
    """Re-play the event log on its own; assert capacity, gang, state machines, loans, reclaims."""
    assert r.log is not None
    servers, specs, cfg = world.servers, world.jobs, world.config
    n = len(specs)
    state = ["F"] * n  # F future, P pending, R running, G graceful preemption, D done
    hold: list[dict[int, int]] = [{} for _ in range(n)]
    grace_end = [math.inf] * n
    pending_since = [math.nan] * n
    queued = np.zeros(n)
    first_start = np.full(n, math.nan)
    counts = {k: np.zeros(n, dtype=np.int64) for k in ("preempt", "scale", "migrate", "reclaim_preempt")}
    lost = np.zeros(n)
    srv = ["A" if s.pool == Pool.TRAINING else "I" for s in servers]  # A, I, L, C reclaiming, X failed
    deadline = [math.nan] * len(servers)
    occupancy = [0] * len(servers)
    kinds: set[str] = set()
    stopped = np.zeros(n, dtype=bool)

    def release(j: int, t: float) -> None:
        for sid, g in hold[j].items():
            occupancy[sid] -= g
        hold[j] = {}
        if state[j] == "G":
            state[j], pending_since[j] = "P", t

    def take(j: int, t: float, base: Alloc, flex: Alloc, own: dict[int, int]) -> None:
        spec = specs[j]
        check_gang(spec, base, flex, [servers[s].gpu_type for s, _ in (*base, *flex)])
        new = merged(base, flex)
        for sid, g in new.items():
            ok = srv[sid] in ("A", "L") or (srv[sid] == "C" and g <= own.get(sid, 0))
            assert ok, f"t={t}: job {j} placed {g} GPUs on server {sid} in state {srv[sid]} (held {own})"
        for sid, g in own.items():
            occupancy[sid] -= g
        for sid, g in new.items():
            occupancy[sid] += g
            assert occupancy[sid] <= servers[sid].num_gpus, f"t={t}: server {sid} over capacity"
        hold[j] = new

    last_t = 0.0
    for t, what, who, detail in r.log:
        assert t >= last_t, "log out of time order"
        last_t = t
        kinds.add(what)
        for j in range(n):  # grace periods that ended by now (GRACE_DONE is not logged)
            if state[j] == "G" and grace_end[j] <= t:
                release(j, grace_end[j])
        if what in ("arrive", "start", "scale", "migrate", "preempt", "phase", "finish"):
            j, spec = who, specs[who]
            assert state[j] != "D", f"t={t}: {what} of job {j} after its finish"
            if what == "arrive":
                assert state[j] == "F" and t == spec.submit_time
                state[j], pending_since[j] = "P", t
            elif what == "start":
                assert state[j] == "P", f"t={t}: start of job {j} in state {state[j]}"
                take(j, t, *parse_alloc(detail), own={})
                queued[j] += t - pending_since[j]
                if math.isnan(first_start[j]):
                    first_start[j] = t
                state[j] = "R"
            elif what in ("scale", "migrate"):
                assert state[j] == "R", f"t={t}: {what} of job {j} in state {state[j]}"
                base, flex = parse_alloc(detail)
                if what == "scale":
                    assert spec.elastic
                take(j, t, base, flex, own=hold[j])
                counts[what][j] += 1
            elif what == "preempt":
                assert state[j] == "R", f"t={t}: preempt of job {j} in state {state[j]}"
                counts["preempt"][j] += 1
                if detail == "graceful":
                    assert spec.grace_period > 0
                    state[j], grace_end[j] = "G", t + spec.grace_period
                else:
                    amount = float(detail.split()[1])
                    assert amount >= 0.0
                    if cfg.checkpoint_interval_s == 0:
                        assert amount == 0.0
                    else:
                        assert amount < cfg.checkpoint_interval_s * (1 + 1e-5)
                    lost[j] += amount
                    counts["reclaim_preempt"][j] += detail.endswith(" reclaim")
                    release(j, t)
                    state[j], pending_since[j] = "P", t
            elif what == "phase":
                assert state[j] == "R" and spec.speed_phases
            else:  # finish
                assert state[j] == "R", f"t={t}: finish of job {j} in state {state[j]}"
                release(j, t)
                state[j] = "D"
                assert t == r.finish[j]
                if detail:
                    assert detail.startswith("stopped at "), detail
                    stopped[j] = True
                    assert math.isclose(float(detail.split()[2]), r.work_done[j] / r.work[j], rel_tol=1e-5)
        elif what in ("loan", "reclaim", "returned", "fail", "repair"):
            s = servers[who]
            if what == "loan":
                assert s.pool == Pool.INFERENCE and srv[who] == "I"
                srv[who] = "L"
            elif what == "reclaim":
                assert srv[who] == "L" and world.inference is not None and not world.inference.never_reclaim
                d = t + world.inference.notice_s
                assert math.isclose(float(detail.split()[1]), d, rel_tol=1e-5)
                srv[who], deadline[who] = "C", d
            elif what in ("returned", "fail"):
                if what == "returned":
                    assert srv[who] == "C" and t == deadline[who], f"server {who} returned at {t}, due {deadline[who]}"
                # the engine empties the server first; only jobs in their grace period may be left
                for j in range(n):
                    if who in hold[j]:
                        assert state[j] == "G", f"t={t}: job {j} still holds {what} server {who}"
                        release(j, t)
                assert occupancy[who] == 0
                srv[who] = "I" if what == "returned" else "X"
            else:  # repair
                assert srv[who] == "X"
                srv[who] = "A" if s.pool == Pool.TRAINING else "I"
    end = r.end_time
    for j in range(n):
        if state[j] == "G" and grace_end[j] <= end:
            release(j, grace_end[j])
        if state[j] == "P":
            queued[j] += end - pending_since[j]
        assert (state[j] == "D") == np.isfinite(r.finish[j]), f"job {j}: finish logged iff finished"
        assert (state[j] != "F") == (specs[j].submit_time <= end), f"job {j}: arrives iff submitted by the end"
    for sid, st_ in enumerate(srv):
        if st_ == "C":
            assert deadline[sid] > end, f"server {sid}: reclaim deadline {deadline[sid]} passed at end {end}"
    return Replay(queued, first_start, counts, lost, stopped, kinds)


# ----------------------------------------------------------------------------- the result checker
def rate_bounds(world: World, spec: JobSpec) -> tuple[float, float]:
    """Upper bounds on the job's progress per second and per GPU-second, over every allocation
    the cluster could give it (workers in its range, 1..min(workers, servers of the type))."""
    best_rate = best_eff = 0.0
    by_type: dict[str, list[ServerSpec]] = defaultdict(list)
    for s in world.servers:
        if spec.allows(s.gpu_type):
            by_type[s.gpu_type.name].append(s)
    for tname, group in by_type.items():
        fastest = max(s.speed_factor for s in group)  # co-location only slows a job down
        for w in range(spec.min_gpus, min(spec.max_gpus, sum(s.num_gpus for s in group)) + 1):
            for k in range(1, min(w, len(group)) + 1):
                rate = TP.rate(spec, w, k, TYPES[tname]) * fastest
                best_rate, best_eff = max(best_rate, rate), max(best_eff, rate / w)
    return best_rate, best_eff


def check_result(world: World, r: SimResult, rp: Replay) -> None:
    cfg, specs = world.config, world.jobs
    end = r.end_time
    done = np.isfinite(r.finish)
    assert end <= cfg.horizon_s
    assert r.truncated == (not done.all()), "truncated iff some job is unfinished"
    if not r.truncated:
        assert end == r.finish.max()
    np.testing.assert_array_equal(r.preemptions, rp.counts["preempt"])
    np.testing.assert_array_equal(r.scale_events, rp.counts["scale"])
    np.testing.assert_array_equal(r.migrations, rp.counts["migrate"])
    assert (r.preemptions_reclaim >= rp.counts["reclaim_preempt"]).all()
    assert (r.preemptions_reclaim <= r.preemptions).all()
    np.testing.assert_allclose(r.lost_work, rp.lost, rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(r.first_start, rp.first_start)
    assert (r.stopped >= rp.stopped).all()
    np.testing.assert_allclose(r.queued, rp.queued, rtol=1e-9, atol=1e-6)
    prices = [s.gpu_type.price_per_hour / 3600.0 for s in world.servers]
    for j, spec in enumerate(specs):
        arrived = spec.submit_time <= end
        assert r.lost_work[j] >= 0.0 and r.lost_gpu_s[j] >= 0.0 and r.queued[j] >= 0.0
        if cfg.checkpoint_interval_s == 0:
            assert r.lost_work[j] == 0.0
        if r.stopped[j]:
            # only a job that allows it (it has a required accuracy) is ended early (JobSpec)
            assert done[j] and spec.required_accuracy is not None and spec.curve is not None, f"job {j} stopped"
        if done[j] and not r.stopped[j]:
            assert r.work_done[j] == r.work[j], f"job {j}: finished with {r.work_done[j]} of {r.work[j]}"
        else:
            assert 0.0 <= r.work_done[j] <= r.work[j] * (1 + EPS)
        if not arrived:
            assert r.gpu_s[j] == 0.0 and r.queued[j] == 0.0 and np.isnan(r.first_start[j])
            continue
        jct = (r.finish[j] if done[j] else end) - spec.submit_time
        held = jct - r.queued[j]
        assert close_le(0.0, held, jct) and close_le(r.queued[j], jct, jct)
        if not np.isnan(r.first_start[j]):
            assert close_le(r.first_start[j] - spec.submit_time, r.queued[j], jct)
        else:
            assert r.gpu_s[j] == 0.0
        # GPU-seconds: every holding interval has min_gpus..max_gpus workers
        assert close_le(spec.min_gpus * held, r.gpu_s[j], r.gpu_s[j]), (j, held, r.gpu_s[j])
        assert close_le(r.gpu_s[j], spec.max_gpus * held, r.gpu_s[j]), (j, held, r.gpu_s[j])
        assert close_le(min(prices) * r.gpu_s[j], r.fee[j]) and close_le(r.fee[j], max(prices) * r.gpu_s[j])
        if done[j] and not r.stopped[j] and cfg.fluctuation == 0.0:  # (a fluctuating run has no speed limit)
            # progress needs one restart overhead first, then duration / (best rate) at least
            # (work is defined so that the phases take `duration` at rate 1); and per GPU-second
            # no allocation makes more than the best efficiency
            best_rate, best_eff = rate_bounds(world, spec)
            overhead = cfg.restart_base_s + cfg.restart_per_gpu_s * spec.min_gpus
            assert close_le(overhead + spec.duration / best_rate, held, jct), (j, held, best_rate)
            assert close_le(spec.duration / best_eff, r.gpu_s[j], r.gpu_s[j]), (j, r.gpu_s[j], best_eff)
            assert r.finish[j] > spec.submit_time
    # usage integrals
    inf_gpus = sum(s.num_gpus for s in world.servers if s.pool == Pool.INFERENCE)
    train_gpus = sum(s.num_gpus for s in world.servers if s.pool == Pool.TRAINING)
    for u in (r.usage, r.usage_window):
        assert 0.0 <= u.seconds <= end
        assert close_le(0.0, u.busy_training_gpu_s) and close_le(u.busy_training_gpu_s, u.capacity_training_gpu_s)
        assert close_le(0.0, u.busy_loaned_gpu_s) and close_le(u.busy_loaned_gpu_s, u.capacity_loaned_gpu_s)
        assert close_le(u.capacity_training_gpu_s, train_gpus * u.seconds)
        assert close_le(u.capacity_loaned_gpu_s, inf_gpus * u.seconds)
        assert close_le(0.0, u.inference_gpu_s) and close_le(u.inference_gpu_s, u.capacity_inference_gpu_s)
        assert math.isclose(u.capacity_inference_gpu_s, inf_gpus * u.seconds, rel_tol=1e-9)
    if not world.failures:
        assert math.isclose(r.usage.capacity_training_gpu_s, train_gpus * end, rel_tol=1e-9)
    ts = r.series
    if len(ts["time"]):
        assert (np.diff(ts["time"]) > 0).all() and (ts["queue"] >= 0).all() and (ts["running"] >= 0).all()
        assert (ts["busy_training"] <= ts["capacity_training"]).all() and (ts["busy_loaned"] >= 0).all()
        assert (ts["loaned_servers"] <= sum(s.pool == Pool.INFERENCE for s in world.servers)).all()
    # the reported figures
    m = summarize(r)
    assert list(m) == list(METRICS)
    for k, v in m.items():
        assert v is None or (isinstance(v, int | float) and math.isfinite(v)), f"{k} = {v!r}"
    assert m["jobs_finished"] == int(done.sum()) and m["jobs_unfinished"] == len(specs) - int(done.sum())
    shares = ("utilization", "utilization_training", "utilization_loaned", "unfair_fraction", "deadline_hit_ratio")
    for k in (*shares, "accuracy_hit_ratio", "avg_final_accuracy"):
        v = m.get(k)
        assert v is None or 0.0 <= v <= 1.0 + EPS, f"{k} = {v} outside [0, 1]"
    for k in ("avg_queue_s", "p50_queue_s", "p99_queue_s", "avg_jct_s", "makespan_s", "fee", "gpu_hours_lost"):
        v = m[k]
        assert v is None or v >= 0.0, f"{k} = {v}"
    if "stopped_early" in m:
        assert m["stopped_early"] == int(r.stopped.sum())


def run_checked(world: World, name: str) -> tuple[SimResult, Replay, Checked]:
    policy = Checked(make_policy(name, world), world.config)
    r = simulate(world, policy)
    rp = replay(world, r)
    check_result(world, r, rp)
    return r, rp, policy


# ----------------------------------------------------------------------------- tests
def check_policy(name: str, world: World) -> None:
    r, rp, policy = run_checked(world, name)
    note(f"decisions={policy.decisions} actions={policy.actions} reclaims={policy.reclaims} kinds={sorted(rp.kinds)}")
    for kind in sorted(rp.kinds - {"arrive", "start", "finish"}):
        event(f"logged {kind}")
    event(f"truncated={r.truncated}")
    if r.stopped.any():
        event("stopped early")
    if rp.counts["reclaim_preempt"].any():
        event("preempted by a reclaim")
    if name != "chaos" and not world.failures and world.config.horizon_s == HORIZON_CAP:
        # liveness: every job fits a type it allows, nothing breaks, the horizon is a month
        assert not r.truncated, f"{name} left {int(np.isnan(r.finish).sum())} feasible jobs unfinished"


@pytest.mark.parametrize("name", POLICIES)
@PROPERTY
@given(world=worlds())
def test_invariants_hold_for_every_policy(name: str, world: World) -> None:
    check_policy(name, world)


def test_chaos_worlds_exercise_every_mechanism() -> None:
    """The checks above have something to check: on a fixed busy world, the chaos policy's runs
    loan, reclaim, return, fail, repair, scale, migrate, preempt (gracefully, and by reclaim) and
    stop jobs at their required accuracy."""
    servers = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, V100, 4, Pool.TRAINING)]
    servers += [ServerSpec(2 + i, T4, 8, Pool.INFERENCE) for i in range(3)]
    jobs = tuple(
        JobSpec(
            i,
            f"j{i}",
            200.0 * i,
            1500.0 + 100 * (i % 7),
            1 + i % 8,
            1 + i % 4 if i % 3 else 1 + i % 8,
            2 * (1 + i % 8) if i % 3 else 1 + i % 8,
            MODELS[i % len(MODELS)],
            gpu_types=None if i % 2 else frozenset({V100.name}),
            grace_period=60.0 * (i % 2),
            speed_phases=((0.0, 1.0), (0.5, 2.0)) if i % 5 == 0 else (),
            curve=DEFAULT_CURVE if i % 4 == 0 else None,
            required_accuracy=0.5 if i % 4 == 0 else None,
        )
        for i in range(24)
    )
    inference = InferenceConfig(step_s=120.0, noise=0.5, notice_s=60.0, headroom=0.0)
    config = SimConfig(restart_base_s=5.0, checkpoint_interval_s=100.0, mtbf_h=2.0, repair_h=0.2, horizon_s=80000.0)
    kinds: set[str] = set()
    for seed in range(6):
        r, rp, _ = run_checked(World(tuple(servers), jobs, inference, config, seed), "chaos")
        assert r.log is not None
        kinds |= rp.kinds
        kinds |= {f"{what} {d.split()[-1]}" for _, what, _, d in r.log if what == "preempt"}
        kinds |= {"finish stopped" for _, what, _, d in r.log if what == "finish" and d.startswith("stopped")}
    expected = {"loan", "reclaim", "returned", "fail", "repair", "scale", "migrate", "phase", "finish"}
    assert expected | {"preempt graceful", "preempt reclaim", "finish stopped"} <= kinds, kinds


def test_replay_catches_an_over_allocation() -> None:
    """The log checker has teeth: a forged start on a full server is caught."""
    world = World(
        (ServerSpec(0, V100, 4, Pool.TRAINING),),
        (JobSpec(0, "j0", 0.0, 10.0, 4, 4, 4, "m"), JobSpec(1, "j1", 0.0, 10.0, 4, 4, 4, "m")),
        None,
        SimConfig(sample_s=0.0),
        0,
    )
    r = simulate(world, make_policy("fifo", world))
    assert r.log is not None
    replay(world, r)
    forged = [*r.log]
    forged.insert(forged.index((0.0, "start", 0, "s0x4")) + 1, (0.0, "start", 1, "s0x4"))
    with pytest.raises(AssertionError, match="over capacity"):
        replay(world, replace(r, log=forged))
