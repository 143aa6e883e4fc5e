"""The event loop.

A heap of ``(time, kind, seq, payload)``: ties break by event kind (finishes before arrivals,
so freed GPUs are visible to the jobs that arrive at the same instant) and then by insertion
order, so a run is a pure function of its inputs. All events of one instant are processed
before the policy is asked to decide, once.

Progress is exact. A running job has ``work_done`` and a ``rate`` (work per second); whenever
its allocation or speed changes, progress is settled up to now and its next milestone (finish,
or the next speed phase of a dynamically adapting job) is rescheduled. Stale milestones are
skipped by a per-job version counter. A (re)start, rescale or migration costs a restart overhead
during which the job holds its GPUs but makes no progress. Preemption loses the work since the
job's last periodic checkpoint (checkpoints every ``checkpoint_interval_s`` of work counted from
the point it last resumed from), unless it is graceful: then the job keeps its GPUs for its
grace period while it checkpoints, and loses nothing.

Loaning: every ``step_s`` the inference demand is re-read; servers it does not need are offered
on loan (only to a policy that ``borrows``); when demand returns, the policy's ``reclaim`` picks
which k loaned servers go back, each with a notice period. At the deadline the engine empties
the server itself: flexible workers are scaled in, jobs with base workers there are preempted
(a reclaim preemption). No loaned server is ever held past its deadline.

Livelock guard: a policy that keeps (re)starting a job (Start, Scale, Migrate) while the job's
work done never rises above what it was at an earlier (re)start (it is preempted, rescaled or
moved before its restart overhead ends, or loses to its checkpoint whatever it ran) is stopped
with a :class:`DecisionError` naming the policy and the job once it has done so
:data:`MAX_FUTILE_RESTARTS` times in a row. The engine's own restarts (scale-ins at a reclaim
deadline) neither count nor reset the count.

One GPU type per job: every placement (base and flexible workers alike) lies on servers of one
GPU type the job allows; a placement spread over types is rejected (rule "one GPU type per
job"), so no gang is ever charged for, or sped up by, a mix of types.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
import time as _time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from envs.sim.cluster import Cluster
from envs.sim.inference import DemandCurve
from envs.sim.information import Knowledge
from envs.sim.model import GpuType, JobSpec, Pool, ServerSpec
from envs.sim.policy import (
    PLACEABLE,
    Action,
    Alloc,
    ClusterView,
    JobStatus,
    Migrate,
    Preempt,
    Scale,
    Scheduler,
    ServerStatus,
    Start,
    Stop,
)
from envs.sim.settings import Num, Settings
from envs.sim.throughput import ThroughputModel

logger = logging.getLogger(__name__)

# Enum members bound once for the hot paths: a member lookup (JobStatus.RUNNING) costs ten times
# a global's.
_PENDING, _RUNNING, _PREEMPTING, _DONE = JobStatus.PENDING, JobStatus.RUNNING, JobStatus.PREEMPTING, JobStatus.DONE
_RECLAIMING = ServerStatus.RECLAIMING
_TRAINING = Pool.TRAINING

# Event kinds, in tie-breaking order at equal times.
MILESTONE, GRACE_DONE, DEADLINE, FAIL, REPAIR, DEMAND, ARRIVAL, ROUND, SAMPLE = range(9)
EVENT_NAMES = (
    "milestone",
    "grace_done",
    "deadline",
    "fail",
    "repair",
    "demand",
    "arrival",
    "round",
    "sample",
)


MAX_FUTILE_RESTARTS = 1000
"""(Re)starts of one job in a row without progress that the livelock guard tolerates. Real
policies do restart a job without progress many times in a row and still finish it (round-based
ones that preempt a job before it reaches a checkpoint, again and again), so the bound sits well
above what the shipped policies do on the shipped scenarios; a livelock reaches it anyway, at
one restart per round within simulated days, in far less than a second of run time."""


class DecisionError(RuntimeError):
    """A policy asked for something the cluster cannot do. Names the policy, the job and the rule."""


@dataclass(frozen=True)
class SimConfig(Settings):
    """Mechanics shared by every scenario.

    :param restart_base_s: fixed cost of every (re)start, rescale or migration.
    :param restart_per_gpu_s: extra cost per GPU of the new allocation.
    :param checkpoint_interval_s: work-seconds between periodic checkpoints; 0 = nothing is
        ever lost on preemption.
    :param mtbf_h: mean hours between failures of one server (exponential); 0 = no failures.
    :param repair_h: mean hours to repair a failed server (exponential).
    :param horizon_s: the episode is cut here; jobs not done are reported unfinished.
    :param sample_s: period of the time series (queue, usage, loaned servers).
    :param fluctuation: per-run speed noise: each (re)start draws a log-normal factor with this
        sigma (machines of the public cloud fluctuate; 0 = none).
    :param contention: co-location slowdown: a job runs ``1 / (1 + contention x k)`` times as
        fast while k other jobs share one of its servers (0 = no interference).
    :param stall_s: stop (as truncated) when every job has arrived, none holds GPUs and none has
        started for this long: the policy will never run the ones left.
    """

    restart_base_s: Annotated[float, Num(ge=0)] = 30.0
    restart_per_gpu_s: Annotated[float, Num(ge=0)] = 1.0
    checkpoint_interval_s: Annotated[float, Num(ge=0)] = 1800.0
    mtbf_h: Annotated[float, Num(ge=0)] = 0.0
    repair_h: Annotated[float, Num(gt=0)] = 2.0
    horizon_s: Annotated[float, Num(gt=0)] = math.inf
    sample_s: Annotated[float, Num(ge=0)] = 300.0
    fluctuation: Annotated[float, Num(ge=0)] = 0.0
    contention: Annotated[float, Num(ge=0)] = 0.0
    stall_s: Annotated[float, Num(gt=0)] = 7 * 86400.0


class _Job:
    """Engine-private, mutable record of one job."""

    __slots__ = (
        "attained",
        "base",
        "base_rate",
        "bounds",
        "cap_at_submit",
        "crowd",
        "fair",
        "finish",
        "first_start",
        "flex",
        "futile",
        "gpu_s",
        "gpu_type",
        "held_since",
        "idx",
        "last_settle",
        "lost_gpu_s",
        "lost_work",
        "mark",
        "migrations",
        "mults",
        "noise",
        "nominal",
        "nservers",
        "phase",
        "preempt_reclaim",
        "preemptions",
        "progress_from",
        "queued_since",
        "queued_time",
        "rate",
        "restore",
        "run_time",
        "scales",
        "spec",
        "status",
        "stopped",
        "sys_at_submit",
        "version",
        "work",
        "work_done",
        "workers",
    )

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.idx = spec.job_id
        if spec.speed_phases:
            fracs = [p[0] for p in spec.speed_phases] + [1.0]
            self.mults = [p[1] for p in spec.speed_phases]
            # work such that running alone at the requested allocation takes exactly `duration`
            self.work = spec.duration / sum((fracs[i + 1] - fracs[i]) / m for i, m in enumerate(self.mults))
            self.bounds = [f * self.work for f in fracs[1:]]  # work at which each phase ends
            self.bounds[-1] = self.work
        else:
            self.mults = [1.0]
            self.work = spec.duration
            self.bounds = [spec.duration]
        self.status = JobStatus.FUTURE
        self.base: Alloc = ()
        self.flex: Alloc = ()
        self.gpu_type: GpuType | None = None
        self.workers = 0
        self.nservers = 0
        self.base_rate = 0.0
        self.rate = 0.0
        self.work_done = 0.0
        self.restore = 0.0
        self.progress_from = 0.0
        self.last_settle = 0.0
        self.version = 0
        self.phase = 0
        self.first_start = math.nan
        self.finish = math.nan
        self.queued_since = math.nan
        self.queued_time = 0.0
        self.held_since = math.nan
        self.attained = 0.0
        self.run_time = 0.0
        self.gpu_s: dict[str, float] = {}
        self.preemptions = 0
        self.preempt_reclaim = 0
        self.scales = 0
        self.migrations = 0
        self.lost_work = 0.0
        self.lost_gpu_s = 0.0
        self.sys_at_submit = 0.0
        self.cap_at_submit = 0.0
        self.fair = 1.0
        self.stopped = False  # ended early by a Stop action
        self.noise = 1.0  # this run's speed fluctuation
        self.nominal: tuple[int, GpuType, float] | None = None  # (GPUs, type, throughput rate) on one server
        self.crowd = 1.0  # co-location slowdown
        self.mark = -1.0  # livelock guard: the most work done at any (re)start so far...
        self.futile = 0  # ...and the (re)starts since the one that set it


@dataclass(frozen=True)
class Usage:
    """GPU-second integrals over an interval of ``seconds``."""

    seconds: float
    busy_training_gpu_s: float
    busy_loaned_gpu_s: float
    capacity_training_gpu_s: float
    capacity_loaned_gpu_s: float
    inference_gpu_s: float
    capacity_inference_gpu_s: float


@dataclass
class SimResult:
    """Everything a run produced; ``metrics.summarize`` turns it into the reported figures."""

    policy: str
    jobs: tuple[JobSpec, ...]
    servers: tuple[ServerSpec, ...]
    end_time: float
    truncated: bool
    # per job (index = job_id); nan where it does not apply
    submit: np.ndarray
    finish: np.ndarray
    first_start: np.ndarray
    queued: np.ndarray
    preemptions: np.ndarray
    preemptions_reclaim: np.ndarray
    scale_events: np.ndarray
    migrations: np.ndarray
    lost_gpu_s: np.ndarray
    lost_work: np.ndarray
    stopped: np.ndarray  # bool: ended early by a Stop action (work_done < work)
    work: np.ndarray
    work_done: np.ndarray
    fee: np.ndarray
    gpu_s: np.ndarray
    fair_share: np.ndarray  # max(1, mean jobs in system / mean GPUs) over the job's lifetime
    usage: Usage  # over the whole run, [0, end_time]
    usage_window: Usage  # over the arrival window [0, last submit] (the whole run if that is 0)
    decision_ms: np.ndarray
    series: dict[str, np.ndarray]
    events: int
    log: list[tuple[float, str, int, str]] | None
    stopped_by: str = ""  # why a truncated run stopped: "horizon", "stall guard" or "end of events"
    dropped: int = 0  # jobs of the workload left out before the run as unrunnable (set by the caller)


class Engine:
    """Replays ``jobs`` on ``servers`` under ``scheduler``.

    :param servers: training and inference servers (ids 0..n-1).
    :param jobs: job specs with ids 0..n-1, sorted by submit time.
    :param scheduler: the policy.
    :param throughput: speed model.
    :param demand: the inference side's demand curve, or ``None`` (no loaning at all).
    :param config: mechanics.
    :param rng: stream for failures (only drawn from when ``config.mtbf_h > 0``).
    :param log: keep an event log (tests read it).
    :param knowledge: what the policy may know of durations (default: clairvoyant); an oracle
        policy (``scheduler.oracle``) sees the truth anyway.
    """

    def __init__(
        self,
        servers: Sequence[ServerSpec],
        jobs: Sequence[JobSpec],
        scheduler: Scheduler,
        throughput: ThroughputModel | None = None,
        demand: DemandCurve | None = None,
        config: SimConfig | None = None,
        rng: np.random.Generator | None = None,
        log: bool = False,
        knowledge: Knowledge | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.scheduler = scheduler
        self.throughput = throughput or ThroughputModel()
        self.demand = demand
        self.cluster = Cluster(servers)
        self.specs = tuple(jobs)
        for i, j in enumerate(self.specs):
            if j.job_id != i:
                raise ValueError(f"job ids must be 0..n-1 in submit order; job {i} has id {j.job_id}")
        self._jobs = [_Job(s) for s in self.specs]
        # with contention: per job, the other jobs that hold GPUs on a server it holds GPUs on, and
        # on how many such servers (a job's crowd counts them; kept as jobs join and leave servers)
        self._near: list[dict[int, int]] = [{} for _ in self._jobs] if self.config.contention > 0.0 else []
        rng = rng if rng is not None else np.random.default_rng(0)
        self.rng_fail, self.rng_speed = rng.spawn(2)
        self.now = 0.0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.pending: dict[int, None] = {}
        self.running: dict[int, None] = {}  # RUNNING and PREEMPTING
        self.entered: list[int] = []  # job ids in the order they entered the queue (append-only)
        # sets that readers registered (ClusterView.watch_stamps): each gets every job whose
        # version (stamp) changes; the reader empties its own
        self.stamp_watchers: list[set[int]] = []
        self.finish_log: list[int] = []  # job ids in the order they finished (append-only)
        self.done = 0
        self.round_tick = False
        self.log: list[tuple[float, str, int, str]] | None = [] if log else None
        self._trace = log or logger.isEnabledFor(logging.DEBUG)
        self.view = ClusterView(self, knowledge, bool(getattr(scheduler, "oracle", False)))
        self._decision_s: list[float] = []
        self.gpu_types = {s.gpu_type.name: s.gpu_type for s in self.cluster.servers}
        # running counters and their integrals
        self._t_last = 0.0
        self.busy_training = 0
        self.busy_loaned = 0
        cl = self.cluster
        self.cap_training = sum(s.num_gpus for s in cl.servers if s.pool == Pool.TRAINING)
        self.cap_inference = sum(s.num_gpus for s in cl.servers if s.pool == Pool.INFERENCE)
        self.cap_loaned = 0
        self._on_training = [s.pool == Pool.TRAINING for s in cl.servers]  # per server, for _count_busy
        self._gpu_price = [s.gpu_type.price_per_hour for s in cl.servers]
        self._inference_ids = [s.server_id for s in cl.servers if s.pool == Pool.INFERENCE]
        self._inference_failed = 0  # inference servers down now
        self.cap_inference_up = self.cap_inference  # GPUs of the inference servers that are up
        self.n_loaned = 0  # servers on loan (reclaiming ones included)
        self.in_system = 0
        self.inference_gpus = 0.0  # GPUs the inference cluster needs now
        self.i_busy_training = 0.0
        self.i_busy_loaned = 0.0
        self.i_cap_training = 0.0
        self.i_cap_loaned = 0.0
        self.i_in_system = 0.0
        self.i_inference = 0.0
        # for the RL rewards: sum of 1/duration over jobs in the system, dollars per hour held
        self.in_system_w = 0.0
        self.price_rate = 0.0
        self.i_slowdown = 0.0
        self.i_price = 0.0
        self.deadline_misses = 0
        self._series: list[tuple[float, ...]] = []
        self._window: Usage | None = None
        self._arrived = 0
        self.truncated = False
        self.stopped_by = ""  # why a truncated run stopped: "horizon", "stall guard" or "end of events"
        self.finished = False
        self.events = 0  # processed events (for benchmarks)
        self._last_start = 0.0

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, payload: int = -1, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload, version))

    def _record(self, what: str, who: int, detail: str = "") -> None:
        """Event log (tests) and debug logging; call sites guard with ``self._trace``."""
        if self.log is not None:
            self.log.append((self.now, what, who, detail))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("[t=%.1f] %s %d %s", self.now, what, who, detail)

    def _advance(self, t: float) -> None:
        dt = t - self._t_last
        if dt > 0.0:
            self.i_busy_training += self.busy_training * dt
            self.i_busy_loaned += self.busy_loaned * dt
            self.i_cap_training += self.cap_training * dt
            self.i_cap_loaned += self.cap_loaned * dt
            self.i_in_system += self.in_system * dt
            # it uses what it needs of the GPUs it holds (loaned ones are the training side's)
            self.i_inference += min(self.inference_gpus, self.cap_inference_up - self.cap_loaned) * dt
            self.i_slowdown += self.in_system_w * dt
            self.i_price += self.price_rate * dt
            self._t_last = t
        self.now = t

    def run(self, observe: Callable[[ClusterView], None] | None = None) -> SimResult:
        """Run to the end (all jobs done) or the horizon; return the raw result. ``observe``, if
        given, sees the view after each decision's actions and once more at the end."""
        self.start()
        while self.next_decision():
            self._decide()
            if observe is not None:
                observe(self.view)
        if observe is not None:
            observe(self.view)
        return self.result()

    # The stepping interface (the RL adapters drive the engine through it; run() is built on it):
    # start(); then repeatedly next_decision() -> apply(...)* -> end_decision(); then result().
    def start(self) -> None:
        """Schedule the initial events. Call once, before the first ``next_decision``."""
        c = self.config
        for j in self._jobs:
            self._push(j.spec.submit_time, ARRIVAL, j.idx)
        if self.demand is not None:
            self._push(0.0, DEMAND)
        if self.scheduler.round_s:
            self._push(0.0, ROUND)
        if c.sample_s > 0:
            self._push(0.0, SAMPLE)
        if c.mtbf_h > 0:
            for sid in range(len(self.cluster.servers)):
                self._push(float(self.rng_fail.exponential(c.mtbf_h * 3600.0)), FAIL, sid)
        self._handlers = (
            self._on_milestone,
            self._on_grace_done,
            self._on_deadline,
            self._on_fail,
            self._on_repair,
            self._on_demand,
            self._on_arrival,
            self._on_round,
            self._on_sample,
        )

    def next_decision(self) -> bool:
        """Process events up to the next instant that needs a decision and stop there (True), or
        run out: every job done, the horizon reached or a stall (False; ``finished`` is set)."""
        c, heap, handlers, jobs = self.config, self._heap, self._handlers, self._jobs
        heappop = heapq.heappop
        n = len(jobs)
        self.round_tick = False
        while heap and self.done < n:
            t = heap[0][0]
            if t > c.horizon_s:
                self.truncated, self.stopped_by = True, "horizon"
                break
            if not self.running and self._arrived == n and t - self._last_start > c.stall_s:
                self.truncated, self.stopped_by = True, "stall guard"
                logger.warning(
                    "[t=%.1f] stopping: %d jobs wait and nothing has started for %.0f s",
                    t,
                    n - self.done,
                    c.stall_s,
                )
                break
            self._advance(t)
            dirty = False
            while heap and heap[0][0] == t:
                _, kind, _, payload, version = heappop(heap)
                self.events += 1
                if kind == MILESTONE and version != jobs[payload].version:
                    continue  # stale (the common case; _on_milestone would skip it too)
                dirty |= handlers[kind](payload, version)
            if dirty:
                return True
        if self.done < n:
            self.truncated = True
            self.stopped_by = self.stopped_by or "end of events"
            if math.isfinite(c.horizon_s):
                self._advance(c.horizon_s)
        self.finished = True
        return False

    def redraw(
        self, works: dict[int, float], rng: np.random.Generator, arrivals: dict[int, float] | None = None
    ) -> None:
        """Give unfinished jobs new totals of work (``works``: job -> work, each above the work
        it has done), jobs yet to arrive new submit times (``arrivals``: job -> time, none before
        now), and the speed fluctuations a new stream: a guess at what a run that is not
        clairvoyant cannot see, for a lookahead that samples it on a copy of the engine instead
        of reading the truth. Each job's duration and speed phases scale with its work; a job
        that has arrived keeps the estimate the view shows of it (information ``estimate``: its
        estimate error moves with the new work instead)."""
        specs = list(self.specs)
        errors: dict[int, float] = {}
        for idx, work in works.items():
            j = self._jobs[idx]
            if j.status == _DONE:
                raise ValueError(f"job {idx} has finished: its work is known")
            running = j.status == _RUNNING
            if running:
                self._settle(j)
            if not work > j.work_done:
                raise ValueError(f"job {idx} has done {j.work_done:g} of work, not less than the {work:g} it is given")
            scale = work / j.work
            old = j.spec.duration
            j.spec = specs[idx] = dataclasses.replace(j.spec, duration=old * scale)
            if j.status != JobStatus.FUTURE:
                self.in_system_w += 1.0 / j.spec.duration - 1.0 / old
                errors[idx] = j.work / work
            j.work = work
            j.bounds = [b * scale for b in j.bounds]
            j.bounds[-1] = work
            j.phase = _phase_of(j)
            if running:
                self._set_rate(j)
                self._schedule_milestone(j)
        if arrivals:
            for idx, t in arrivals.items():
                j = self._jobs[idx]
                if j.status != JobStatus.FUTURE or t < self.now:
                    raise ValueError(f"job {idx} cannot arrive at {t:g}: it has arrived, or that is past")
                j.spec = specs[idx] = dataclasses.replace(j.spec, submit_time=t)
            self._heap = [e for e in self._heap if not (e[1] == ARRIVAL and e[3] in arrivals)]
            heapq.heapify(self._heap)
            for idx, t in arrivals.items():
                self._push(t, ARRIVAL, idx)
        self.specs = tuple(specs)
        self.rng_speed = rng
        self.view.reread(errors)

    def result(self) -> SimResult:
        """The raw result (call once ``next_decision`` has returned False)."""
        for j in self.running:
            self._settle(self._jobs[j])
            self._account(self._jobs[j])
        return self._result(self.truncated)

    # ------------------------------------------------------------------ handlers (return: decide after?)
    def _on_arrival(self, idx: int, _v: int) -> bool:
        j = self._jobs[idx]
        j.status = _PENDING
        j.queued_since = self.now
        j.sys_at_submit = self.i_in_system
        j.cap_at_submit = self.i_cap_training + self.i_cap_loaned
        self.in_system += 1
        self.in_system_w += 1.0 / j.spec.duration
        self._arrived += 1
        self.pending[idx] = None
        self.entered.append(idx)
        if self._trace:
            self._record("arrive", idx)
        if idx == len(self._jobs) - 1:
            self._window = self._usage()
        return True

    def _on_milestone(self, idx: int, version: int) -> bool:
        j = self._jobs[idx]
        if version != j.version or j.status != _RUNNING:
            return False
        self._settle(j)
        if j.phase < len(j.bounds) - 1:
            j.work_done = j.bounds[j.phase]
            j.phase += 1
            self._set_rate(j)
            self._schedule_milestone(j)
            if self._trace:
                self._record("phase", idx, f"x{j.mults[j.phase]:g}")
            return False
        j.work_done = j.work
        self._complete(j)
        return True

    def _complete(self, j: _Job) -> None:
        """A running job ends now (its work done, or stopped early)."""
        idx = j.idx
        self._release_all(j)
        j.status = _DONE
        j.finish = self.now
        j.fair = self._fair(j)
        self.finish_log.append(idx)
        del self.running[idx]
        self.in_system -= 1
        self.in_system_w -= 1.0 / j.spec.duration
        if j.spec.deadline is not None and self.now > j.spec.deadline:
            self.deadline_misses += 1
        self.done += 1
        if self._trace:
            self._record("finish", idx, "" if j.work_done >= j.work else f"stopped at {j.work_done / j.work:.6g}")

    def _on_grace_done(self, idx: int, version: int) -> bool:
        j = self._jobs[idx]
        if version != j.version or j.status != _PREEMPTING:
            return False
        self._release_all(j)
        self._requeue(j)
        return True

    def _on_round(self, _p: int, _v: int) -> bool:
        self.round_tick = True
        assert self.scheduler.round_s
        self._push(self.now + self.scheduler.round_s, ROUND)
        return True

    def _on_sample(self, _p: int, _v: int) -> bool:
        self._series.append(
            (
                self.now,
                len(self.pending),
                len(self.running),
                self.busy_training,
                self.busy_loaned,
                self.n_loaned,
                self.inference_gpus,
                self.cap_training,
            )
        )
        self._push(self.now + self.config.sample_s, SAMPLE)
        return False

    def _on_demand(self, _p: int, _v: int) -> bool:
        assert self.demand is not None
        d, cl = self.demand, self.cluster
        u = d.utilization(self.now)
        self._push(self.now + d.config.step_s, DEMAND)
        self.inference_gpus = u * self.cap_inference_up
        n_up = len(self._inference_ids) - self._inference_failed
        if not self.scheduler.borrows:
            return False
        desired = max(0, n_up - d.servers_needed(u))
        if desired == cl.status.count(ServerStatus.LOANED):  # the common case: nothing to loan or reclaim
            return False
        loaned = cl.servers_with(ServerStatus.LOANED)
        changed = False
        if desired > len(loaned):
            for sid in cl.servers_with(ServerStatus.INFERENCE)[: desired - len(loaned)]:
                cl.set_status(sid, ServerStatus.LOANED)
                self.cap_loaned += cl.servers[sid].num_gpus
                self.n_loaned += 1
                if self._trace:
                    self._record("loan", sid)
                changed = True
        elif desired < len(loaned) and not d.config.never_reclaim:
            k = len(loaned) - desired
            chosen = list(self.scheduler.reclaim(self.view, k))
            if len(chosen) != k or len(set(chosen)) != k or any(s not in loaned for s in chosen):
                raise DecisionError(
                    f"policy {self.scheduler.name}: reclaim of {k} servers returned {chosen}, which breaks "
                    f"rule 'k distinct loaned servers' (loaned: {loaned})"
                )
            deadline = self.now + d.config.notice_s
            for sid in chosen:
                cl.set_status(sid, ServerStatus.RECLAIMING, deadline)
                self._push(deadline, DEADLINE, sid)
                if self._trace:
                    self._record("reclaim", sid, f"deadline {deadline:g}")
            changed = True
        return changed

    def _on_deadline(self, sid: int, _v: int) -> bool:
        cl = self.cluster
        if cl.status[sid] != ServerStatus.RECLAIMING or cl.deadline[sid] != self.now:
            return False  # a stale deadline: the server failed (and came back) since that reclaim
        self._vacate(sid, reclaim=True)
        cl.set_status(sid, ServerStatus.INFERENCE)
        self.cap_loaned -= cl.servers[sid].num_gpus
        self.n_loaned -= 1
        if self._trace:
            self._record("returned", sid)
        return True

    def _on_fail(self, sid: int, _v: int) -> bool:
        cl = self.cluster
        was = cl.status[sid]
        self._vacate(sid, reclaim=False)
        if was in (ServerStatus.LOANED, ServerStatus.RECLAIMING):
            self.cap_loaned -= cl.servers[sid].num_gpus
            self.n_loaned -= 1
        elif was == ServerStatus.AVAILABLE:
            self.cap_training -= cl.servers[sid].num_gpus
        cl.set_status(sid, ServerStatus.FAILED)
        if cl.servers[sid].pool == Pool.INFERENCE:
            self._inference_failed += 1
            self.cap_inference_up -= cl.servers[sid].num_gpus
        self._push(self.now + float(self.rng_fail.exponential(self.config.repair_h * 3600.0)), REPAIR, sid)
        if self._trace:
            self._record("fail", sid)
        return True

    def _on_repair(self, sid: int, _v: int) -> bool:
        cl = self.cluster
        s = cl.servers[sid]
        if s.pool == Pool.TRAINING:
            cl.set_status(sid, ServerStatus.AVAILABLE)
            self.cap_training += s.num_gpus
        else:
            cl.set_status(sid, ServerStatus.INFERENCE)
            self._inference_failed -= 1
            self.cap_inference_up += s.num_gpus
        self._push(self.now + float(self.rng_fail.exponential(self.config.mtbf_h * 3600.0)), FAIL, sid)
        if self._trace:
            self._record("repair", sid)
        return True

    def _vacate(self, sid: int, reclaim: bool) -> None:
        """Empty a server now: flexible-only jobs scale in, the others are preempted."""
        for idx in list(self.cluster.hosted[sid]):
            j = self._jobs[idx]
            if j.status == _PREEMPTING:
                self._release_all(j)
                self._requeue(j)
            elif any(s == sid for s, _ in j.base):
                self._preempt(j, graceful=False, reclaim=reclaim)
            else:
                self._rescale(j, tuple(a for a in j.flex if a[0] != sid))

    # ------------------------------------------------------------------ decisions
    def _decide(self) -> None:
        t0 = _time.perf_counter()
        for action in self.scheduler.decide(self.view):
            self.apply(action)
        self._decision_s.append(_time.perf_counter() - t0)

    def apply(self, action: Action) -> None:
        """Validate and carry out one action (the RL adapters call this too)."""
        if isinstance(action, Start):
            j = self._job(action, action.job, _PENDING)
            base, flex = action.base, action.flex
            gtype = self._check(action, j, base, flex, own=False)
            self._place(j, base, flex, gtype)
            now, idx = self.now, j.idx
            j.queued_time += now - j.queued_since  # queued_time_close
            j.queued_since = math.nan
            if j.first_start != j.first_start:  # nan: its first start
                j.first_start = now
            del self.pending[idx]
            self.running[idx] = None
            j.status = _RUNNING
            self._last_start = now
            if j.work_done > j.mark:  # _progress_check's common case
                j.mark = j.work_done
                j.futile = 0
            else:
                self._progress_check(j)
            if self._trace:
                self._record("start", idx, _fmt(base, flex))
        elif isinstance(action, Preempt):
            j = self._job(action, action.job, _RUNNING)
            self._preempt(j, action.graceful, reclaim=self._on_reclaiming(j))
        elif isinstance(action, Scale):
            j = self._job(action, action.job, _RUNNING)
            if not j.spec.elastic:
                self._reject(action, j, "only elastic jobs scale")
            if action.flex != j.flex:
                self._check_scale(action, j)
                self._rescale(j, action.flex)
                self._progress_check(j)
        elif isinstance(action, Migrate):
            j = self._job(action, action.job, _RUNNING)
            gtype = self._check(action, j, action.base, action.flex, own=True)
            self._settle(j)
            self._release_all(j)
            self._place(j, action.base, action.flex, gtype)
            j.migrations += 1
            self._progress_check(j)
            if self._trace:
                self._record("migrate", j.idx, _fmt(action.base, action.flex))
        elif isinstance(action, Stop):
            j = self._job(action, action.job, _RUNNING)
            self._settle(j)
            j.stopped = True
            self._complete(j)
        else:
            raise DecisionError(f"policy {self.scheduler.name}: {action!r} is not an action")

    def _progress_check(self, j: _Job) -> None:
        """The livelock guard, after the policy (re)started ``j`` (its work done is settled)."""
        if j.work_done > j.mark:
            j.mark = j.work_done
            j.futile = 0
            return
        j.futile += 1
        if j.futile >= MAX_FUTILE_RESTARTS:
            raise DecisionError(
                f"policy {self.scheduler.name}: job {j.idx} ({j.spec.name}) restarted {j.futile} times without "
                f"progress (work done stays at {j.work_done:.6g} of {j.work:.6g} s), a livelock the engine stops "
                f"after {MAX_FUTILE_RESTARTS} in a row"
            )

    def _reject(self, action: Action, j: _Job | None, rule: str) -> None:
        who = f"job {j.idx} ({j.spec.name})" if j is not None else "an unknown job"
        raise DecisionError(f"policy {self.scheduler.name}: {action!r} for {who} breaks rule '{rule}'")

    def _job(self, action: Action, idx: int, status: JobStatus) -> _Job:
        jobs = self._jobs
        if type(idx) is int and 0 <= idx < len(jobs):  # the common case, checked on the spot
            j = jobs[idx]
            if j.status is status:
                return j
        if not isinstance(idx, int) or not 0 <= idx < len(jobs):
            self._reject(action, None, f"job id must be in 0..{len(jobs) - 1}")
        j = jobs[idx]
        if j.status != status:
            self._reject(action, j, f"job must be {status.name.lower()}, it is {j.status.name.lower()}")
        return j

    def _check(self, action: Action, j: _Job, base: Alloc, flex: Alloc, own: bool) -> GpuType:
        """Validate a full placement; ``own``: the job's current GPUs count as free."""
        cl, spec = self.cluster, j.spec
        if len(base) == 1 and not flex and not own:  # the common case, accepted on the spot
            sid, n = base[0]
            if (
                type(sid) is int
                and type(n) is int
                and 0 <= sid < len(cl.servers)
                and 1 <= n <= cl.free[sid]
                and (spec.min_gpus <= n <= spec.max_gpus if spec.max_gpus > spec.min_gpus else n == spec.num_gpus)
                and cl.status[sid] in PLACEABLE
            ):
                gtype = cl.servers[sid].gpu_type
                if spec.gpu_types is None or gtype.name in spec.gpu_types:
                    return gtype
            # otherwise the checks below name the rule broken
        nservers = len(cl.servers)
        need: dict[int, int] = {}
        counts = [0, 0]
        for g, part in enumerate((base, flex)):
            if len(part) > 1 and len({s for s, _ in part}) != len(part):
                self._reject(action, j, "each server at most once per group, with >= 1 GPU")
            for sid, n in part:
                if type(sid) is not int or not 0 <= sid < nservers:
                    self._reject(action, j, f"server id must be in 0..{nservers - 1}")
                if type(n) is not int or n < 1:
                    self._reject(action, j, "each server at most once per group, with >= 1 GPU")
                need[sid] = need.get(sid, 0) + n
                counts[g] += n
        nb, nf = counts
        if spec.max_gpus > spec.min_gpus:
            if nb < spec.min_gpus or nb + nf > spec.max_gpus:
                self._reject(action, j, f"elastic job needs {spec.min_gpus} <= base <= base + flex <= {spec.max_gpus}")
        elif nb != spec.num_gpus or nf:
            self._reject(action, j, f"gang: all {spec.num_gpus} GPUs as base workers, no flexible ones")
        servers, status, free, hosted = cl.servers, cl.status, cl.free, cl.hosted
        gtype = servers[next(iter(need))].gpu_type
        for sid, n in need.items():
            st = status[sid]
            mine = hosted[sid].get(j.idx, 0) if own else 0
            if st not in PLACEABLE and not (own and mine and st == ServerStatus.RECLAIMING and n <= mine):
                self._reject(action, j, f"server {sid} is {st.name.lower()}: nothing new may be placed there")
            if n > free[sid] + mine:
                self._reject(action, j, f"capacity: server {sid} has {free[sid] + mine} free GPUs, not {n}")
            if servers[sid].gpu_type is not gtype and servers[sid].gpu_type != gtype:
                self._reject(action, j, "one GPU type per job")
        if spec.gpu_types is not None and gtype.name not in spec.gpu_types:
            self._reject(action, j, f"GPU type: job may run on {sorted(spec.gpu_types or ())}, not {gtype.name}")
        return gtype

    def _check_scale(self, action: Scale, j: _Job) -> None:
        """Validate a rescale of running elastic ``j``. Its base is its own, which passed
        :meth:`_check` when it was placed and stays valid while the job holds it, so the common
        case (no flexible worker on a base server) checks the flexible workers alone; anything
        else goes through :meth:`_check`, which names the rule broken."""
        cl, idx = self.cluster, j.idx
        servers, status, free, hosted = cl.servers, cl.status, cl.free, cl.hosted
        gtype = servers[j.base[0][0]].gpu_type
        seen = {s for s, _ in j.base}
        total = sum(n for _, n in j.base)
        for sid, n in action.flex:
            if not (type(sid) is int and type(n) is int and 0 <= sid < len(servers) and n >= 1 and sid not in seen):
                break
            seen.add(sid)
            total += n
            mine = hosted[sid].get(idx, 0)
            st = status[sid]
            if (st not in PLACEABLE and not (mine and st is _RECLAIMING and n <= mine)) or n > free[sid] + mine:
                break
            if servers[sid].gpu_type is not gtype and servers[sid].gpu_type != gtype:
                break
        else:
            if total <= j.spec.max_gpus:
                return
        self._check(action, j, j.base, action.flex, own=True)

    # ------------------------------------------------------------------ mechanics
    def _settle(self, j: _Job) -> None:
        now = self.now
        start = j.last_settle if j.last_settle > j.progress_from else j.progress_from
        if now > start and j.rate > 0.0:
            # never past the next milestone: a rounding error there would schedule it in the past
            j.work_done = min(j.work_done + j.rate * (now - start), j.bounds[j.phase])
        j.last_settle = now

    def _account(self, j: _Job) -> None:
        """Close the open interval of GPU holding (service, fee)."""
        held = self.now - j.held_since
        if held > 0.0:
            g = held * j.workers
            j.attained += g
            j.run_time += held
            assert j.gpu_type is not None
            j.gpu_s[j.gpu_type.name] = j.gpu_s.get(j.gpu_type.name, 0.0) + g
        j.held_since = self.now

    def _bump(self, j: _Job) -> None:
        """A new version (stamp) of ``j``: its pending events go stale, and every stamp watcher
        hears of it."""
        j.version += 1
        for w in self.stamp_watchers:
            w.add(j.idx)

    def _schedule_milestone(self, j: _Job) -> None:
        self._bump(j)
        rate = j.rate
        if rate <= 0.0:
            return
        now, start = self.now, j.progress_from
        t = (now if now > start else start) + (j.bounds[j.phase] - j.work_done) / rate
        self._seq += 1  # _push, inline: most events are pushed here
        heapq.heappush(self._heap, (t, MILESTONE, self._seq, j.idx, j.version))

    def _speed(self, j: _Job, base: Alloc, flex: Alloc, gtype: GpuType) -> tuple[int, int, float]:
        servers = self.cluster.servers
        if len(base) == 1 and not flex:  # the common case
            sid, workers = base[0]
            memo = j.nominal  # the job's last one-server rate (hashing a GpuType costs a microsecond)
            if memo is not None and memo[0] == workers and memo[1] is gtype:
                rate = memo[2]
            else:
                rate = self.throughput.rate(j.spec, workers, 1, gtype)
                j.nominal = (workers, gtype, rate)
            return workers, 1, rate * servers[sid].speed_factor
        sids = {s for s, _ in base} | {s for s, _ in flex}
        workers = sum(n for _, n in base) + sum(n for _, n in flex)
        rate = self.throughput.rate(j.spec, workers, len(sids), gtype)
        slowest = min(servers[s].speed_factor for s in sids)
        return workers, len(sids), rate * slowest

    def _place(self, j: _Job, base: Alloc, flex: Alloc, gtype: GpuType) -> None:
        """Allocate a validated placement (the job holds nothing) and restart it."""
        allocate, count, idx = self.cluster.allocate, self._count_busy, j.idx
        for sid, n in base:
            allocate(sid, idx, n)
            count(sid, n)
        for sid, n in flex:
            allocate(sid, idx, n)
            count(sid, n)
        j.base, j.flex, j.gpu_type = base, flex, gtype
        j.held_since = self.now
        moved: set[int] = set()
        if self.config.contention > 0.0:
            self._meet(idx, _servers(base, flex), moved, 1)
        self._restart(j, moved)

    def _restart(self, j: _Job, moved: set[int]) -> None:
        """(Re)start ``j`` on its allocation; the jobs whose set of neighbours changed as it was
        put on or taken off servers (``moved``, see :meth:`_meet`) are re-rated for contention."""
        assert j.gpu_type is not None
        c, now = self.config, self.now
        j.workers, j.nservers, j.base_rate = self._speed(j, j.base, j.flex, j.gpu_type)
        if c.fluctuation > 0.0:
            j.noise = math.exp(self.rng_speed.normal(0.0, c.fluctuation))  # not np.exp: see envs/sim/libm.py
            j.base_rate *= j.noise
        if c.contention > 0.0:
            j.crowd = self._crowd(j)
            self._recrowd(moved)
        self._set_rate(j)
        j.progress_from = now + c.restart_base_s + c.restart_per_gpu_s * j.workers
        j.last_settle = now
        self._schedule_milestone(j)

    def _set_rate(self, j: _Job) -> None:
        j.rate = j.base_rate * j.mults[j.phase] * j.crowd

    def _crowd(self, j: _Job) -> float:
        """The co-location slowdown of ``j``: by the other jobs on the servers it holds GPUs on."""
        return 1.0 / (1.0 + self.config.contention * len(self._near[j.idx]))

    def _meet(self, idx: int, servers: Iterable[int], moved: set[int], step: int) -> None:
        """Job ``idx`` now holds GPUs on ``servers`` where it held none (``step`` 1), or holds none
        there any more (``step`` -1): ``_near`` follows. The jobs there that come to share their
        first server with it, or stop sharing their last, go into ``moved``."""
        near, hosted = self._near, self.cluster.hosted
        mine = near[idx]
        for s in servers:
            for k in hosted[s]:
                if k != idx:
                    n = mine.get(k, 0) + step
                    if n:
                        mine[k] = near[k][idx] = n
                    else:
                        del mine[k], near[k][idx]
                    if n == 0 or n == step:
                        moved.add(k)

    def _recrowd(self, moved: set[int]) -> None:
        """Re-rate the running jobs of ``moved`` whose crowd changed. A job not in it keeps its
        crowd: the jobs it shares a server with are the same (a running job's crowd is always
        current: every change of a server's jobs comes here)."""
        jobs = self._jobs
        for idx in sorted(moved):
            k = jobs[idx]
            crowd = self._crowd(k)
            if crowd != k.crowd and k.status == _RUNNING:
                self._settle(k)
                k.crowd = crowd
                self._set_rate(k)
                self._schedule_milestone(k)

    def _rescale(self, j: _Job, flex: Alloc) -> None:
        cl = self.cluster
        self._settle(j)
        self._account(j)
        for sid, n in j.flex:
            cl.release(sid, j.idx, n)
            self._count_busy(sid, -n)
        for sid, n in flex:
            cl.allocate(sid, j.idx, n)
            self._count_busy(sid, n)
        old_flex, j.flex = j.flex, flex
        j.scales += 1
        moved: set[int] = set()
        if self.config.contention > 0.0:  # the servers j joined or left (its base's stay the same)
            kept = {s for s, _ in j.base}
            old, new = {s for s, _ in old_flex} - kept, {s for s, _ in flex} - kept
            self._meet(j.idx, old - new, moved, -1)
            self._meet(j.idx, new - old, moved, 1)
        self._restart(j, moved)
        if self._trace:
            self._record("scale", j.idx, _fmt(j.base, flex))

    def _count_busy(self, sid: int, n: int) -> None:
        if self._on_training[sid]:
            self.busy_training += n
        else:
            self.busy_loaned += n
        self.price_rate += n * self._gpu_price[sid]

    def _release_all(self, j: _Job) -> None:
        release, count, idx = self.cluster.release, self._count_busy, j.idx
        self._account(j)
        for sid, n in j.base:
            release(sid, idx, n)
            count(sid, -n)
        for sid, n in j.flex:
            release(sid, idx, n)
            count(sid, -n)
        moved: set[int] = set()
        if self.config.contention > 0.0:
            self._meet(idx, _servers(j.base, j.flex), moved, -1)
        j.base = j.flex = ()
        j.workers = j.nservers = 0
        j.rate = 0.0
        self._bump(j)
        if moved:
            self._recrowd(moved)

    def _on_reclaiming(self, j: _Job) -> bool:
        st = self.cluster.status
        if len(j.base) == 1:
            return st[j.base[0][0]] == _RECLAIMING
        return any(st[s] == _RECLAIMING for s, _ in j.base)

    def _preempt(self, j: _Job, graceful: bool, reclaim: bool) -> None:
        self._settle(j)
        j.preemptions += 1
        j.preempt_reclaim += int(reclaim)
        if graceful and j.spec.grace_period > 0.0:
            j.restore = j.work_done
            j.status = _PREEMPTING
            j.rate = 0.0
            self._bump(j)
            self._push(self.now + j.spec.grace_period, GRACE_DONE, j.idx, j.version)
            if self._trace:
                self._record("preempt", j.idx, "graceful")
            return
        c = self.config.checkpoint_interval_s
        # a graceful preemption of a job with no grace period checkpoints at once: nothing is lost
        lost = (j.work_done - j.restore) % c if c > 0.0 and not graceful else 0.0
        if lost > 0.0:
            if j.rate > 0.0:
                j.lost_gpu_s += lost / j.rate * j.workers
            j.work_done -= lost
            j.lost_work += lost
        j.restore = j.work_done
        self._release_all(j)
        self._requeue(j)
        if self._trace:
            self._record("preempt", j.idx, f"lost {lost:.6g}" + (" reclaim" if reclaim else ""))

    def _requeue(self, j: _Job) -> None:
        j.status = _PENDING
        j.queued_since = self.now
        j.phase = _phase_of(j)
        del self.running[j.idx]
        self.pending[j.idx] = None
        self.entered.append(j.idx)

    # ------------------------------------------------------------------ results
    def _result(self, truncated: bool) -> SimResult:
        jobs = self._jobs
        now = self.now
        fair = np.array([j.fair if j.status == JobStatus.DONE else self._fair(j) for j in jobs])
        series_arr = np.array(self._series, dtype=float).reshape(-1, 8)
        names = (
            "time",
            "queue",
            "running",
            "busy_training",
            "busy_loaned",
            "loaned_servers",
            "inference_gpus",
            "capacity_training",
        )
        queued = np.array(
            [j.queued_time + (now - j.queued_since if j.status == JobStatus.PENDING else 0.0) for j in jobs]
        )
        return SimResult(
            policy=self.scheduler.name,
            jobs=self.specs,
            servers=self.cluster.servers,
            end_time=now,
            truncated=truncated,
            submit=np.array([j.spec.submit_time for j in jobs]),
            finish=np.array([j.finish for j in jobs]),
            first_start=np.array([j.first_start for j in jobs]),
            queued=queued,
            preemptions=np.array([j.preemptions for j in jobs], dtype=np.int64),
            preemptions_reclaim=np.array([j.preempt_reclaim for j in jobs], dtype=np.int64),
            scale_events=np.array([j.scales for j in jobs], dtype=np.int64),
            migrations=np.array([j.migrations for j in jobs], dtype=np.int64),
            lost_gpu_s=np.array([j.lost_gpu_s for j in jobs]),
            lost_work=np.array([j.lost_work for j in jobs]),
            stopped=np.array([j.stopped for j in jobs], dtype=bool),
            work=np.array([j.work for j in jobs]),
            work_done=np.array([j.work_done for j in jobs]),
            fee=np.array(
                [sum(g * self.gpu_types[t].price_per_hour / 3600.0 for t, g in j.gpu_s.items()) for j in jobs]
            ),
            gpu_s=np.array([sum(j.gpu_s.values()) for j in jobs]),
            fair_share=fair,
            usage=self._usage(),
            usage_window=self._window if self._window is not None and self._window.seconds > 0 else self._usage(),
            decision_ms=np.array(self._decision_s) * 1000.0,
            series={n: series_arr[:, i] for i, n in enumerate(names)},
            events=self.events,
            log=self.log,
            stopped_by=self.stopped_by,
        )

    def _usage(self) -> Usage:
        return Usage(
            self.now,
            self.i_busy_training,
            self.i_busy_loaned,
            self.i_cap_training,
            self.i_cap_loaned,
            self.i_inference,
            self.cap_inference * self.now,
        )

    def _fair(self, j: _Job) -> float:
        """max(1, jobs in system / GPUs for training), both averaged over the job's life so far."""
        if j.status == JobStatus.FUTURE:
            return 1.0
        cap = self.i_cap_training + self.i_cap_loaned - j.cap_at_submit
        jobs = self.i_in_system - j.sys_at_submit
        return max(1.0, jobs / cap) if cap > 0.0 else 1.0


def _phase_of(j: _Job) -> int:
    for i, b in enumerate(j.bounds):
        if j.work_done < b:
            return i
    return len(j.bounds) - 1


def _servers(base: Alloc, flex: Alloc) -> Iterable[int]:
    """The servers of an allocation, each once."""
    if len(base) == 1 and not flex:  # the common case: one server
        return (base[0][0],)
    return {s for s, _ in base} | {s for s, _ in flex}


def _fmt(base: Alloc, flex: Alloc) -> str:
    b = " ".join(f"s{s}x{n}" for s, n in base)
    return b + (" +" + " ".join(f"s{s}x{n}" for s, n in flex) if flex else "")
