"""What a policy sees and what it may say.

The engine hands a policy a read-only :class:`ClusterView` at every decision point and applies
the actions the policy returns, one at a time and in order, validating each. ``decide`` may be
a generator: the engine applies every action as it is produced, so a policy that yields lazily
reads the consequences of its earlier actions in the same (live, read-only) view. A policy never
edits simulator state; everything the view returns is immutable (ints, tuples, frozen
dataclasses, read-only numpy arrays).

Components. A scheduler can be written in one piece (implement :class:`Scheduler`) or composed
from the parts the RL adapters also use: an :class:`Ordering` (which pending job next), a
:class:`Placement` (which servers for it), a :class:`Scaling` (elastic jobs' flexible workers)
and a :class:`Reclaim` (which loaned servers to give back). :class:`ComposedScheduler` is the one
loop that joins them; the ordering env runs exactly this loop with an agent in the ordering seat.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Container, Iterable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from envs.sim.information import Knowledge, estimated_total

if TYPE_CHECKING:
    from envs.sim.engine import Engine, _Job
    from envs.sim.model import GpuType, JobSpec, Pool, ServerSpec

# A placement: ((server_id, gpus), ...) with each server at most once.
Alloc = tuple[tuple[int, int], ...]


class JobStatus(enum.IntEnum):
    FUTURE = 0  # not submitted yet (never visible to a policy)
    PENDING = 1  # queued, holds no GPU
    RUNNING = 2  # holds GPUs (possibly still restarting)
    PREEMPTING = 3  # checkpointing during its grace period, holds GPUs, makes no progress
    DONE = 4


class ServerStatus(enum.IntEnum):
    AVAILABLE = 0  # training server, up
    INFERENCE = 1  # inference server in use by (or kept for) the inference cluster
    LOANED = 2  # inference server on loan to training
    RECLAIMING = 3  # on loan, being taken back at its deadline; nothing new may be placed on it
    FAILED = 4  # down until repaired


PLACEABLE = (ServerStatus.AVAILABLE, ServerStatus.LOANED)
_RUNNING = JobStatus.RUNNING  # for the hot accessors (an enum member lookup costs more than the test)
_PENDING = JobStatus.PENDING
_HOLDING = (JobStatus.RUNNING, JobStatus.PREEMPTING)


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class Start:
    """Start (or resume) pending job ``job`` on ``base`` (its gang: all at once) plus optional
    ``flex`` workers for an elastic job. All workers must be on one GPU type the job allows."""

    job: int
    base: Alloc
    flex: Alloc = ()


@dataclass(frozen=True, slots=True)
class Scale:
    """Replace the flexible workers of running elastic job ``job`` by ``flex`` (empty = scale in
    to the base). Costs a restart overhead."""

    job: int
    flex: Alloc


@dataclass(frozen=True, slots=True)
class Migrate:
    """Move running job ``job`` to a new placement. Costs a restart overhead, loses no work."""

    job: int
    base: Alloc
    flex: Alloc = ()


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop running job ``job`` and re-queue it. ``graceful``: it keeps its GPUs for its grace
    period while it checkpoints (no work lost); otherwise its GPUs free at once and the work
    since its last periodic checkpoint is lost."""

    job: int
    graceful: bool = False


@dataclass(frozen=True, slots=True)
class Stop:
    """End running job ``job`` now, before its work is done: it counts as finished (e.g. MLFS
    stops jobs early at their required accuracy when the cluster is overloaded)."""

    job: int


Action = Start | Scale | Migrate | Preempt | Stop


@dataclass(frozen=True, slots=True)
class JobState:
    """A snapshot of one job's progress, made when a policy asks for it.

    Work is measured in seconds of running alone at the job's requested allocation on the
    reference GPU type (so ``work_total`` is its isolated duration when it has no speed phases).
    ``work_total`` is what the run's information level reveals (``envs/sim/information.py``): the
    truth, an estimate, or ``nan``; ``work_done`` is observed progress.
    """

    job_id: int
    status: JobStatus
    base: Alloc
    flex: Alloc
    gpu_type: str | None
    work_done: float
    work_total: float
    rate: float  # work per second at the current allocation (0 while queued)
    restarting_until: float  # no progress before this time
    attained_service: float  # GPU-seconds held so far (Tiresias' 2D-LAS measure)
    run_time: float  # seconds holding GPUs so far
    queued_time: float  # seconds without GPUs so far (up to the last state change)
    queued_since: float  # when it last entered the queue (nan while it holds GPUs)
    first_start: float  # nan until it first starts
    preemptions: int
    workers: int = field(default=0)

    @property
    def remaining_work(self) -> float:
        """``nan`` where the work total is unknown (information level ``none``)."""
        left = self.work_total - self.work_done
        return left if left != left else max(0.0, left)


@dataclass(frozen=True, slots=True)
class PoolState:
    """The cluster's counters now (GPUs of servers that are up)."""

    training_gpus: int  # GPUs of the training servers
    training_busy: int  # ... held by jobs
    loaned_gpus: int  # GPUs on loan to training (servers being reclaimed included)
    loaned_busy: int  # ... held by jobs
    inference_gpus: int  # GPUs of the whole inference pool (up or not)
    inference_servers: int
    loaned_servers: int  # servers on loan (reclaiming ones included)
    reclaiming_servers: int
    inference_demand: float  # GPUs the inference side needs now
    arrived: int  # jobs submitted so far
    jobs: int  # jobs of the episode


@dataclass(frozen=True, slots=True)
class Progress:
    """Per-job reads for a batch of jobs (arrays in the order asked): what the observation encoder
    needs, in one call. ``remaining`` is remaining work as the run reveals it (estimate or nan)."""

    remaining: np.ndarray
    waited: np.ndarray  # seconds without GPUs so far, all waits included
    attained: np.ndarray  # GPU-seconds held so far
    preemptions: np.ndarray


@dataclass(frozen=True, slots=True)
class Waits:
    """Per-job reads for a batch of pending jobs that stay fixed while each waits (they change
    only once it leaves the queue): the observation encoder reads them once per wait, a few jobs
    at a time (plain floats: they cost less than arrays there). A pending job's
    ``Progress.waited`` is ``(queued_time + now) - queued_since``."""

    remaining: list[float]  # as :class:`Progress` reveals it
    queued_time: list[float]  # seconds without GPUs before this wait
    queued_since: list[float]  # when this wait began
    attained: list[float]
    preemptions: list[float]


@dataclass(frozen=True, slots=True)
class ServerLoads:
    """Per-server reads (read-only arrays in server id order): what the placement observation
    needs, in one call. The same object is returned while the cluster has not changed."""

    free: np.ndarray  # free GPUs (whether or not anything may be placed there)
    placeable: np.ndarray  # bool: new workers may go there (``PLACEABLE``)
    reclaiming: np.ndarray  # bool: being reclaimed
    hosted: np.ndarray  # jobs hosted


@dataclass(frozen=True, slots=True)
class SpeedSample:
    """One run of a job (between two (re)starts): the speed it is observed to make and the speed
    the public models predict for it (the throughput profile at its GPUs, type and spread, its
    current batch-size regime, which its framework knows, and the co-location slowdown). Their
    ratio is all a policy learns of the latent machine speed and the run's fluctuation."""

    job: int
    run: int  # the job's (re)starts so far: one sample per run
    observed: float  # work per second
    nominal: float
    servers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Integrals:
    """Integrals over the run so far (what the RL rewards difference between decisions)."""

    job_seconds: float  # jobs in the system x time (sums to the total JCT)
    slowdown: float  # sum over jobs in the system of 1 / duration, x time (sums to the total slowdown)
    fee_hours: float  # dollars per hour held x time in seconds
    deadline_misses: int  # jobs that finished after their deadline


# ----------------------------------------------------------------------------- the view
class ClusterView:
    """Read-only window on the simulator, handed to policies: the one door into its state.

    Live: it always shows the state as of the last applied action. Everything it returns is
    immutable. ``pending`` and ``running`` are live key views: copy them (``tuple(...)``)
    before yielding actions while iterating, since a start changes them.

    What it reveals of durations follows the run's :class:`~envs.sim.information.Knowledge`: at
    ``estimate`` and ``none`` a job's ``duration`` (from :meth:`job`), work totals and remaining
    work are the estimate or ``nan``, and its ``speed_phases`` are hidden. Machine speed factors
    are never shown (the servers' ``speed_factor`` reads 1). An ``oracle`` view shows the truth.
    """

    __slots__ = (
        "__weakref__",  # a policy may keep what it derives from a view's fixed data per view
        "_cache",
        "_e",
        "_factor",
        "_level",
        "_loads",
        "_servers",
        "_specs",
        "_statuses",
        "_unplaceable",
    )

    def __init__(self, engine: Engine, knowledge: Knowledge | None = None, oracle: bool = False) -> None:
        self._e = engine
        self._cache: tuple[int, np.ndarray] | None = None
        self._loads: tuple[int, ServerLoads] | None = None
        self._unplaceable: tuple[list[ServerStatus], tuple[int, ...]] | None = None  # (statuses, answer)
        # (statuses, server_loads' placeable and reclaiming arrays of them)
        self._statuses: tuple[list[ServerStatus], np.ndarray, np.ndarray] | None = None
        know = knowledge if knowledge is not None else Knowledge()
        self._level = "clairvoyant" if oracle else know.level
        self._factor = know.factor
        self._specs = self._shown(engine.specs)
        servers = engine.cluster.servers
        self._servers = (
            servers
            if oracle
            else tuple(s if s.speed_factor == 1.0 else dataclasses.replace(s, speed_factor=1.0) for s in servers)
        )

    def _shown(self, specs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
        """The specs as this view shows them (durations as its level reveals them)."""
        if self._level == "clairvoyant":
            return specs
        return tuple(
            dataclasses.replace(
                s,
                duration=s.duration * self._factor[i] if self._level == "estimate" else math.nan,
                speed_phases=(),
            )
            for i, s in enumerate(specs)
        )

    def reread(self, errors: Mapping[int, float] | None = None) -> None:
        """Show the engine's specs again, after :meth:`Engine.redraw` changed some; ``errors``
        (job -> a factor, information ``estimate`` only): multiply those jobs' estimate errors by
        it (so that an estimate stays as shown while the work beneath it is drawn anew, or
        becomes another)."""
        if errors:
            factor = list(self._factor)
            for idx, f in errors.items():
                factor[idx] *= f
            self._factor = tuple(factor)
        self._specs = self._shown(self._e.specs)

    # --- what the run reveals
    @property
    def information(self) -> str:
        """The information level this view serves (``clairvoyant`` for an oracle)."""
        return self._level

    def _done(self, j: _Job) -> float:
        done = j.work_done
        if j.status == _RUNNING:
            now = self._e.now
            start = max(j.last_settle, j.progress_from)
            if now > start:
                done = min(j.work, done + j.rate * (now - start))
        return done

    def _total(self, j: _Job, done: float) -> float:
        if self._level == "clairvoyant":
            return j.work
        if self._level == "none":
            return math.nan
        return estimated_total(j.work * self._factor[j.idx], done)

    # --- time and queues
    @property
    def now(self) -> float:
        return float(self._e.now)

    @property
    def round_tick(self) -> bool:
        """Whether this decision point is (also) the policy's periodic round."""
        return bool(self._e.round_tick)

    @property
    def pending(self) -> KeysView[int]:
        """Queued job ids, in the order they (re-)entered the queue (a live, read-only view)."""
        return self._e.pending.keys()

    @property
    def running(self) -> KeysView[int]:
        """Job ids holding GPUs (running or checkpointing after a graceful preemption)."""
        return self._e.running.keys()

    def running_stamps(self) -> list[tuple[int, int]]:
        """(job, stamp) for every job in ``running``, in its order. A job's stamp changes whenever
        its allocation (base, flexible workers, GPU type), status or rate changes, and may change
        at other times too: a reader may keep what it derived from a job's allocation while its
        stamp stays the same."""
        records = self._e._jobs
        return [(idx, records[idx].version) for idx in self._e.running]

    def entered_since(self, cursor: int) -> tuple[tuple[int, ...], int]:
        """Jobs that entered the queue (arrived, or re-queued after a preemption) since position
        ``cursor`` of the engine's append-only queue log, and the new cursor. Each reader keeps
        its own cursor (start at 0)."""
        log = self._e.entered
        return tuple(log[cursor:]), len(log)

    def finished_since(self, cursor: int) -> tuple[tuple[int, ...], int]:
        """Jobs that finished since position ``cursor`` of the engine's append-only log of
        finishes, and the new cursor (a finished job's ``work_done`` is its whole work:
        completion reveals it, at every information level)."""
        log = self._e.finish_log
        return tuple(log[cursor:]), len(log)

    @property
    def num_jobs(self) -> int:
        return len(self._e.specs)

    def job(self, job: int) -> JobSpec:
        """The job as submitted, its duration as the run's information level reveals it."""
        return self._specs[job]

    def state(self, job: int) -> JobState:
        """A snapshot of one job's progress (settled to now)."""
        j = self._e._jobs[job]
        now = self._e.now
        done = self._done(j)
        held = now - j.held_since if j.status in _HOLDING else 0.0
        queued = j.queued_time + (now - j.queued_since if j.status == _PENDING else 0.0)
        return JobState(
            job_id=job,
            status=j.status,
            base=j.base,
            flex=j.flex,
            gpu_type=j.gpu_type.name if j.gpu_type is not None else None,
            work_done=done,
            work_total=self._total(j, done),
            rate=j.rate,
            restarting_until=j.progress_from if j.status == _RUNNING else float("nan"),
            attained_service=j.attained + held * j.workers,
            run_time=j.run_time + held,
            queued_time=queued,
            queued_since=j.queued_since,
            first_start=j.first_start,
            preemptions=j.preemptions,
            workers=j.workers,
        )

    def work_done(self, job: int) -> float:
        """``state(job).work_done`` (settled to now), without the snapshot."""
        return self._done(self._e._jobs[job])

    def work(self, job: int) -> tuple[float, float]:
        """``(state(job).work_done, state(job).work_total)`` (settled to now; the total as the
        information level reveals it), without the snapshot."""
        j = self._e._jobs[job]
        done = self._done(j)
        return done, self._total(j, done)

    def attained_service(self, job: int) -> float:
        """GPU-seconds held so far (cheaper than ``state(job).attained_service``)."""
        j = self._e._jobs[job]
        if j.status in _HOLDING:
            return float(j.attained + (self._e.now - j.held_since) * j.workers)
        return float(j.attained)

    def run_time(self, job: int) -> float:
        """``state(job).run_time``: seconds holding GPUs so far, without the snapshot."""
        j = self._e._jobs[job]
        if j.status in _HOLDING:
            return float(j.run_time + (self._e.now - j.held_since))
        return float(j.run_time)

    def queued_since(self, job: int) -> float:
        """``state(job).queued_since``: when it last entered the queue (nan while it holds GPUs)."""
        return float(self._e._jobs[job].queued_since)

    def workers(self, job: int) -> int:
        """GPUs the job holds now."""
        return self._e._jobs[job].workers

    def status_of(self, job: int) -> JobStatus:
        return self._e._jobs[job].status

    def allocation(self, job: int) -> tuple[JobStatus, str | None, Alloc, Alloc]:
        """(status, GPU type name or None, base workers, flexible workers) of the job now: the
        ``status``, ``gpu_type``, ``base`` and ``flex`` of ``state(job)``, without the snapshot."""
        j = self._e._jobs[job]
        return j.status, (j.gpu_type.name if j.gpu_type is not None else None), j.base, j.flex

    def remaining_work(self, job: int) -> float:
        """``state(job).remaining_work`` (settled to now), without the snapshot."""
        j = self._e._jobs[job]
        done = self._done(j)
        if self._level == "clairvoyant":
            return max(0.0, j.work - done)
        return self._total(j, done) - done  # nan at "none"; an estimate stays above what is done

    def remaining_works(self, jobs: Iterable[int]) -> list[float]:
        """:meth:`remaining_work` of each of ``jobs``, in one batch read (the same numbers)."""
        e = self._e
        now, records = e.now, e._jobs
        clairvoyant = self._level == "clairvoyant"
        out = []
        for idx in jobs:
            j = records[idx]
            done = j.work_done
            if j.status == _RUNNING:  # as _done
                start = max(j.last_settle, j.progress_from)
                if now > start:
                    done = min(j.work, done + j.rate * (now - start))
            out.append(max(0.0, j.work - done) if clairvoyant else self._total(j, done) - done)
        return out

    def projection(self, job: int) -> tuple[float, float, float, float] | None:
        """At the clairvoyant level, (work, done, since, rate) of running ``job``: while its stamp
        stays the same (:meth:`running_stamps`), its :meth:`remaining_work` at time ``t`` is
        ``max(0, work - d)`` with ``d = min(work, done + rate x (t - since))`` if ``t > since``,
        else ``d = done`` (the same numbers). None at the other levels or if it is not running."""
        j = self._e._jobs[job]
        if self._level != "clairvoyant" or j.status != _RUNNING:
            return None
        return j.work, j.work_done, max(j.last_settle, j.progress_from), j.rate

    def restarting_until(self, job: int) -> float:
        """``state(job).restarting_until``: no progress before this time (nan unless running)."""
        j = self._e._jobs[job]
        return j.progress_from if j.status == _RUNNING else math.nan

    def rate(self, job: int, workers: int, servers: int, gpu_type: str) -> float:
        """Work per second ``job`` would make with ``workers`` GPUs of ``gpu_type`` over
        ``servers`` servers (machine speed factors and speed phases not included)."""
        e = self._e
        return float(e.throughput.rate(e.specs[job], workers, servers, e.gpu_types[gpu_type]))

    # --- servers
    @property
    def servers(self) -> tuple[ServerSpec, ...]:
        """The servers, each at nominal speed (``speed_factor`` 1) unless the view is an oracle's."""
        return self._servers

    def gpu_type(self, name: str) -> GpuType:
        return self._e.gpu_types[name]

    def free(self, server: int) -> int:
        """Free GPUs on a server (whether or not anything may be placed there)."""
        return self._e.cluster.free[server]

    def used(self, server: int) -> int:
        cl = self._e.cluster
        return cl.servers[server].num_gpus - cl.free[server]

    def server_status(self, server: int) -> ServerStatus:
        return self._e.cluster.status[server]

    def placeable(self, server: int) -> bool:
        return self._e.cluster.status[server] in PLACEABLE

    def free_gpus(self) -> np.ndarray:
        """Free GPUs per server, 0 where nothing may be placed (read-only array)."""
        cl = self._e.cluster
        if self._cache is None or self._cache[0] != cl.version:
            a = cl.placeable_free()
            a.flags.writeable = False
            self._cache = (cl.version, a)
        return self._cache[1]

    def free_list(self) -> list[int]:
        """``free_gpus()`` as a new plain list (the caller may edit it; cheaper than the array)."""
        return self._e.cluster.room.copy()

    def server_loads(self) -> ServerLoads:
        """Free GPUs, placeability, reclaim state and jobs hosted of every server (one batch
        read; the same object while the cluster has not changed; the same placeable and reclaiming
        arrays while no server's status has)."""
        cl = self._e.cluster
        if self._loads is None or self._loads[0] != cl.version:
            status = cl.status
            held = self._statuses
            if held is None or held[0] != status:
                placeable = np.array([st in PLACEABLE for st in status], dtype=bool)
                reclaiming = np.array([st == ServerStatus.RECLAIMING for st in status], dtype=bool)
                placeable.flags.writeable = reclaiming.flags.writeable = False
                held = self._statuses = (list(status), placeable, reclaiming)
            free = np.array(cl.free, dtype=np.int64)
            hosted = np.array([len(h) for h in cl.hosted], dtype=np.int64)
            free.flags.writeable = hosted.flags.writeable = False
            self._loads = (cl.version, ServerLoads(free, held[1], held[2], hosted))
        return self._loads[1]

    def room_grown(self) -> int:
        """A count that goes up whenever GPUs are freed on a placeable server or a server becomes
        placeable (and at no other time): while it stays the same, the placeable free GPUs of
        every server have only gone down."""
        return self._e.cluster.grown

    def pool_types(self) -> tuple[tuple[str, Pool], ...]:
        """The (GPU type name, pool) pairs the cluster has."""
        return self._e.cluster.pool_types

    def total_free(self, gpu_type: str, pool: Pool) -> int:
        """Free GPUs on placeable servers of this type and pool."""
        return self._e.cluster.total_free((gpu_type, pool))

    def best_fit(self, gpu_type: str, pool: Pool, need: int) -> int | None:
        """The placeable server of this type and pool with the fewest free GPUs >= ``need``."""
        return self._e.cluster.best_fit((gpu_type, pool), need)

    def servers_by_free(self, gpu_type: str, pool: Pool) -> list[int]:
        """Placeable servers of this type and pool with free GPUs, most free first."""
        return self._e.cluster.by_free((gpu_type, pool))

    def jobs_on(self, server: int) -> tuple[tuple[int, int], ...]:
        """(job, GPUs) pairs hosted on a server."""
        return tuple(self._e.cluster.hosted[server].items())

    def reclaim_deadline(self, server: int) -> float | None:
        d = self._e.cluster.deadline[server]
        return None if d != d else float(d)

    def loaned_servers(self) -> tuple[int, ...]:
        """Servers on loan that are not being reclaimed."""
        return tuple(self._e.cluster.servers_with(ServerStatus.LOANED))

    def reclaiming_servers(self) -> tuple[int, ...]:
        return tuple(self._e.cluster.servers_with(ServerStatus.RECLAIMING))

    def unplaceable_servers(self) -> tuple[int, ...]:
        """Servers where nothing may be placed now (``not placeable(s)``), in id order."""
        status = self._e.cluster.status
        held = self._unplaceable
        if held is None or held[0] != status:
            held = self._unplaceable = (list(status), tuple(i for i, st in enumerate(status) if st not in PLACEABLE))
        return held[1]

    def largest_free(self, gpu_type: str, pool: Pool) -> int:
        """The most free GPUs on one placeable server of this type and pool (0 if none)."""
        return self._e.cluster.max_free((gpu_type, pool))

    def hosted(self, server: int) -> int:
        """How many jobs a server hosts."""
        return len(self._e.cluster.hosted[server])

    # --- batch reads (the observation encoder's, the rewards')
    def pools(self) -> PoolState:
        e = self._e
        return PoolState(
            e.cap_training,
            e.busy_training,
            e.cap_loaned,
            e.busy_loaned,
            e.cap_inference,
            len(e._inference_ids),
            e.n_loaned,
            e.cluster.status.count(ServerStatus.RECLAIMING),
            e.inference_gpus,
            e._arrived,
            len(e.specs),
        )

    def progress(self, jobs: Sequence[int]) -> Progress:
        """Remaining work (as revealed), time waited, attained service and preemptions of ``jobs``."""
        e = self._e
        now, records = e.now, e._jobs
        out = np.empty((4, len(jobs)))
        for i, idx in enumerate(jobs):
            j = records[idx]
            status = j.status
            if status == _PENDING:  # the common case: settled, holding nothing
                out[0, i] = self.remaining_work(idx) if self._level != "clairvoyant" else max(0.0, j.work - j.work_done)
                out[1, i] = j.queued_time + now - j.queued_since
                out[2, i] = j.attained
            else:
                out[0, i] = self.remaining_work(idx)
                out[1, i] = j.queued_time
                out[2, i] = j.attained + ((now - j.held_since) * j.workers if status in _HOLDING else 0.0)
            out[3, i] = j.preemptions
        return Progress(out[0], out[1], out[2], out[3])

    def waits(self, jobs: Sequence[int]) -> Waits:
        """Remaining work (as revealed), time waited before this wait, when it began, attained
        service and preemptions of pending ``jobs`` (:class:`Waits`)."""
        records = self._e._jobs
        out: tuple[list[float], ...] = ([], [], [], [], [])
        remaining, queued_time, queued_since, attained, preemptions = out
        for idx in jobs:
            j = records[idx]
            if j.status != _PENDING:
                raise ValueError(f"job {idx} is not pending: waits() reads pending jobs only")
            left = self.remaining_work(idx) if self._level != "clairvoyant" else max(0.0, j.work - j.work_done)
            remaining.append(float(left))
            queued_time.append(float(j.queued_time))
            queued_since.append(float(j.queued_since))
            attained.append(float(j.attained))
            preemptions.append(float(j.preemptions))
        return Waits(*out)

    def speed_samples(
        self, seen: Container[tuple[int, int]] = (), among: Container[int] | None = None
    ) -> list[SpeedSample]:
        """A sample of every running job that makes progress (see :class:`SpeedSample`), in the
        order of ``running``, except those whose ``(job, run)`` is in ``seen`` (an observer's
        samples taken in already: they are not built); only of the jobs in ``among`` if given
        (an observer's jobs whose stamp changed since it last looked: a run it has not seen
        changes its job's stamp)."""
        e = self._e
        out = []
        for idx in e.running if among is None else [i for i in e.running if i in among]:
            j = e._jobs[idx]
            if j.rate <= 0.0 or j.gpu_type is None:
                continue
            run = j.preemptions + j.scales + j.migrations
            if (idx, run) in seen:
                continue
            nominal = e.throughput.rate(j.spec, j.workers, j.nservers, j.gpu_type) * j.mults[j.phase] * j.crowd
            servers = tuple(dict.fromkeys(s for s, _ in (*j.base, *j.flex)))
            out.append(SpeedSample(idx, run, j.rate, nominal, servers))
        return out

    def integrals(self) -> Integrals:
        e = self._e
        return Integrals(e.i_in_system, e.i_slowdown, e.i_price, e.deadline_misses)

    def watch_stamps(self) -> set[int]:
        """A new set into which the engine puts every job whose stamp (``running_stamps``) changes
        from now on; the reader takes what it needs and empties it (``clear``), and reads the
        stamps of the jobs in it only. One set per reader; it lives as long as the engine."""
        watched: set[int] = set()
        self._e.stamp_watchers.append(watched)
        return watched


# ----------------------------------------------------------------------------- protocols
@runtime_checkable
class Scheduler(Protocol):
    """One scheduling policy.

    :ivar name: registry name, used in error messages and results.
    :ivar borrows: whether the policy opts into servers loaned by the inference cluster; a
        policy that does not never sees a loan offer (and so never a reclaim).
    :ivar round_s: period of an extra decision point (round-based policies), or ``None``.

    A policy with an attribute ``oracle`` set to true sees the truth whatever the run's
    information level (``envs/sim/information.py``); the engine reads it with ``getattr``.
    """

    name: str
    borrows: bool
    round_s: float | None

    def decide(self, view: ClusterView) -> Iterable[Action]:
        """The actions to take now, applied in order as they are produced."""
        ...

    def reclaim(self, view: ClusterView, k: int) -> Sequence[int]:
        """Choose ``k`` distinct loaned (not already reclaiming) servers to give back."""
        ...


class Ordering(Protocol):
    """Which pending jobs to start, in priority order."""

    #: stop at the first job that does not fit (FIFO's head-of-line blocking) or skip it (backfill)
    blocking: bool

    def rank(self, view: ClusterView) -> Iterable[int]:
        """Pending job ids, most urgent first. May be lazy; it is consumed while jobs start."""
        ...


class Placement(Protocol):
    def place(self, view: ClusterView, job: int) -> Start | None:
        """Where to start pending ``job`` now, or ``None`` if it does not fit."""
        ...


def monotone(placement: Placement) -> bool:
    """Whether ``placement`` declares (a ``monotone`` attribute that is true) that its answer
    reads only the job and the placeable free GPUs of the servers, and that a job it refuses it
    refuses again while those only go down (``ClusterView.room_grown`` unchanged): the RL
    adapters' core then keeps such refusals from one decision point to the next."""
    return bool(getattr(placement, "monotone", False))


def reconsiders(placement: Placement) -> bool:
    """Whether ``placement`` declares (a ``reconsiders`` attribute that is true) that a job it
    refused may fit after another job has started at the same decision point (one that holds
    jobs back for faster GPUs: a start moves the wait it foresees). ``ComposedScheduler`` then walks
    its ranking again from the top after each start, and the RL adapters ask every job again."""
    return bool(getattr(placement, "reconsiders", False))


class Preemption(Protocol):
    def preempt(self, view: ClusterView) -> Iterable[Action]:
        """Preempt actions taken at the start of a decision, before any job starts."""
        ...


class Keeper(Protocol):
    """A preemption component that keeps the GPUs it freed for the jobs it preempted for (srtf's).
    At the start of a decision's starts, after ``preempt``, :meth:`keeping` is called once; then a
    pending job for which :meth:`kept_from` is true is passed over (as one that does not fit).
    :class:`ComposedScheduler` and the RL adapters' core (``envs/core.py``) honour it alike, so an
    agent in the ordering seat cannot give those GPUs to another job."""

    def keeping(self, view: ClusterView) -> None:
        """A decision's starts begin: forget the jobs kept for that are no longer pending."""
        ...

    def kept_from(self, view: ClusterView, job: int) -> bool:
        """Whether pending ``job`` must wait now: it would take GPUs kept for another job."""
        ...


def keeper(preemption: Preemption) -> Keeper | None:
    """``preemption`` as a :class:`Keeper`, if it is one."""
    return preemption if hasattr(preemption, "kept_from") else None  # type: ignore[return-value]


class Scaling(Protocol):
    def scale(self, view: ClusterView) -> Iterable[Action]:
        """Scale / preempt actions for running jobs, after the new starts of this decision."""
        ...


class Reclaim(Protocol):
    def reclaim(self, view: ClusterView, k: int) -> Sequence[int]: ...


class FewestJobsReclaim:
    """Default reclaim: empty servers first, then those hosting the fewest GPUs, lowest id first."""

    def reclaim(self, view: ClusterView, k: int) -> Sequence[int]:
        loaned = view.loaned_servers()
        return sorted(loaned, key=lambda s: (view.used(s), s))[:k]


class NoScaling:
    def scale(self, view: ClusterView) -> Iterable[Action]:
        return ()


class NoPreemption:
    def preempt(self, view: ClusterView) -> Iterable[Action]:
        return ()


@dataclass
class ComposedScheduler:
    """The standard decision loop over components.

    First the preemption component acts (e.g. a round-based policy's evictions). Then walk the
    ordering's ranking once; start each job the placement can place; at the first one
    it cannot, stop if the ordering is blocking, else skip it (backfill); a job that a
    :class:`Keeper` keeps GPUs from is skipped. Starts only consume
    GPUs, so a job skipped earlier cannot fit later in the same decision: one pass equals
    re-ranking after every start. Then the scaling component acts.
    """

    name: str
    ordering: Ordering
    placement: Placement
    scaling: Scaling = field(default_factory=NoScaling)
    preemption: Preemption = field(default_factory=NoPreemption)
    reclaimer: Reclaim = field(default_factory=FewestJobsReclaim)
    borrows: bool = False
    round_s: float | None = None
    oracle: bool = False  # sees the truth whatever the run's information level (heuristics/oracles.py)

    def decide(self, view: ClusterView) -> Iterable[Action]:
        if not view.pending and isinstance(self.scaling, NoScaling) and isinstance(self.preemption, NoPreemption):
            return ()  # nothing to do: skip building the generators (a hot path)
        return self._decide(view)

    def _decide(self, view: ClusterView) -> Iterator[Action]:
        yield from self.preemption.preempt(view)
        yield from self.starts(view)
        yield from self.scaling.scale(view)

    def starts(self, view: ClusterView) -> Iterator[Action]:
        """The ranking's jobs that can start, in its order, each start applied before the next job
        is asked; with a placement that :func:`reconsiders`, the ranking is walked again from its
        top after each start."""
        keeps = keeper(self.preemption)
        if keeps is not None:
            keeps.keeping(view)
        again = reconsiders(self.placement)
        while True:
            for job in self.ordering.rank(view):
                if keeps is not None and keeps.kept_from(view, job):
                    continue
                start = self.placement.place(view, job)
                if start is None:
                    if self.ordering.blocking:
                        return
                    continue
                yield start
                if again:
                    break
            else:
                return

    def next_start(self, view: ClusterView) -> Start | None:
        """The first start :meth:`starts` would make now (the expert's ordering action)."""
        for action in self.starts(view):
            assert isinstance(action, Start)
            return action
        return None

    def reclaim(self, view: ClusterView, k: int) -> Sequence[int]:
        return self.reclaimer.reclaim(view, k)
