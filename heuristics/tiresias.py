"""Tiresias' 2D-LAS (Gu et al., NSDI'19): least attained service first, preemptive, round based.

A job's attained service is the GPU-seconds it has held (GPUs x time: the "2D" of 2D-LAS).
Jobs sit in discretised queues: queue k holds jobs whose service lies between thresholds
k-1 and k; lower queues go first. Within a queue the order is that of Tiresias' own simulator
(SymbioticLab/Tiresias, ``simulator/run_sim.py``, ``dlas_sim_jobs``): a job joins the end of a
queue when it enters it (arrives, is demoted, is promoted), and after every scheduling pass the
queue's pending jobs move behind its running ones, each group keeping its order. So a running
job is displaced only by jobs of lower queues, and a preempted job waits first in line. A job
that has waited longer than ``promote_knob`` times its executed time is promoted back to the
first queue (Tiresias' PROMOTE_KNOB against starvation).

Preemption happens at round boundaries (every ``round_s``): the ranking is recomputed over all
jobs in the system, the top of it that fits the GPU budget is chosen, running jobs outside that
set are preempted, and chosen pending jobs start. Between rounds the policy backfills new and
waiting jobs in rank order onto idle GPUs without preempting. It never borrows or scales.

The budget is counted per GPU type (ours: Tiresias assumes one type): a gang runs on one type,
so a job is chosen only if its GPUs fit the budget left on one type it allows (a running job on
its own type; a pending one on the first such type in the cluster's order, where it then
starts). On a one-type training pool this is the plain GPU budget. Counting GPUs over all types
instead would choose a job that no type can hold, preempt others to make room for it, and then
fail to start it, every round: the preempted jobs restart, lose what they ran to their
checkpoint at the next round, and never progress.

Implementation (speed only, the decisions are the ones above, so that thousands of queued jobs
cost little per decision): each job holds a place, a number that orders its queue (taken at
the back on entering a queue; the running jobs take places at the front after every change to
them), so a rank orders as (level, place); the pending jobs sit in bitsets per (size class,
level), the running ones in one per level, and a walk in rank order merges the next set bits (a
class that cannot fit is passed over whole). Promotions come from a heap of the times they fall
due; a running job's level is looked at only when its service may have crossed a threshold
(known from its GPUs). These structures and the walks (the round's choice, the backfill's next
job) are compiled kernels over per-job tables (``heuristics._tiresias``); a pending job's rank
changes only when it is promoted (its service does not grow while it waits). Starts are batched
into the next sync.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Action, Alloc, ClusterView, FewestJobsReclaim, JobStatus, Preempt, Start
from envs.sim.settings import Choice, Each, Num, Settings
from heuristics import _tiresias as kern
from heuristics.common import TRAINING_ONLY, TYPE_ORDERS, Size, pack, types_for
from heuristics.registry import register

_PENDING, _RUNNING = JobStatus.PENDING, JobStatus.RUNNING  # bound once: a member lookup costs ten globals
_TRAINING = Pool.TRAINING
_INF, _NAN = float("inf"), float("nan")


@dataclass(frozen=True)
class TiresiasConfig(Settings):
    """:param thresholds_gpu_h: queue boundaries in GPU-hours of attained service.
    :param round_s: seconds between two preemptive re-prioritisations.
    :param promote_knob: promote a job waiting longer than this times its executed time.
    :param type_order: the order of the GPU types a job allows (``heuristics.common.TYPE_ORDERS``)."""

    thresholds_gpu_h: Annotated[tuple[float, ...], Each(Num(gt=0))] = (1.0, 10.0)
    round_s: Annotated[float, Num(ge=1)] = 300.0
    promote_knob: Annotated[float, Num(ge=0)] = 8.0
    type_order: Annotated[str, Choice(TYPE_ORDERS)] = "fastest"


@dataclass
class Tiresias:
    """The round's choice: the jobs that fit the per-type GPU budget in rank order, running and
    pending alike; the running ones not chosen are preempted, the pending ones chosen start. A
    running job keeps its type. A pending job takes the first type it allows (in the order of
    ``type_order``, ``heuristics.common.types_for``) that holds it without displacing any running
    job ranked below it, else the first whose budget still holds it (those running jobs are then
    preempted), else it is not chosen."""

    config: TiresiasConfig = field(default_factory=TiresiasConfig)
    name: str = "tiresias"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self._thresholds = [h * 3600.0 for h in self.config.thresholds_gpu_h]
        self._levels = len(self._thresholds) + 1
        self._cursor = 0  # position in the engine's queue log
        self._finished = 0  # position in the engine's log of finishes
        self._sizes: dict[Size, Size] = {}  # see _size
        self._reclaim = FewestJobsReclaim()
        self._jobs = -1  # the tables' width (the engine's jobs) once made, see _tables
        self._batch: list[float] = []  # starts not yet in the tables (their S_* fields, one after the other)
        self._kinds: dict[int, tuple[int, int]] = {}  # job -> its class and type list (see _kind)
        self._kind_of: dict[tuple[int, frozenset[str] | None, str], tuple[int, int]] = {}  # the same by _kind's key
        self._preempts: dict[int, Preempt] = {}
        self._pending = 0  # pending jobs in the tables, less the starts since
        self._running = 0  # jobs tracked as running, with the starts since

    def _tables(self, view: ClusterView) -> None:
        """Make the state (``heuristics._tiresias``) for the engine's jobs."""
        self._k = kern.kernels()
        n = self._jobs = view.num_jobs
        self._ints = np.zeros((n, kern.INT_ROWS), dtype=np.int64)
        self._floats = np.zeros((n, kern.FLOAT_ROWS), dtype=np.float64)
        self._ints[:, kern.SLOT] = -1
        self._floats[:, kern.CHECK] = _INF
        self._bounds = np.array(self._thresholds, dtype=np.float64)
        places = self._places = 4 * n + 64  # room at both ends for 1.5 n places between two _compact
        self._at_slot = np.full(places, -1, dtype=np.int64)
        self._given = bytearray(n)  # whether a job has been seen (and so has a place, or had one)
        self._fresh: list[int] = []  # jobs seen, not yet given a place (the next _apply does)
        self._meta = np.zeros(kern.META, dtype=np.int64)  # kern.HEAP ...
        self._meta[kern.FRONT] = self._meta[kern.BACK] = places // 2
        self._meta[kern.ROOM] = -1
        self._heap = np.zeros((1024, 3), dtype=np.float64)
        self._out = np.zeros(n, dtype=np.int64)  # kernel outputs
        self._chosen = np.zeros((2, n), dtype=np.int64)
        names = []
        for t, p in view.pool_types():
            if p in TRAINING_ONLY and t not in names:
                names.append(t)
        self._training = names  # the training types, in the cluster's order
        self._type_index = {t: i for i, t in enumerate(names)}
        self._free = np.zeros(len(names), dtype=np.int64)
        self._class_of: dict[Size, int] = {}
        self._classes = np.zeros((2, 0), dtype=np.int64)
        self._bits = np.zeros((0, (places + 31) // 32 + 3), dtype=np.int64)  # 2 more: see kern._next
        self._counts = np.zeros(0, dtype=np.int64)
        self._add_rows()  # the running jobs' rows
        self._list_of: dict[tuple[str, ...], int] = {}
        self._names: list[tuple[str, ...]] = []  # the type lists by row, as type names
        self._type_lists = np.full((0, max(1, len(names))), -1, dtype=np.int64)

    def _list(self, view: ClusterView, jobs: Sequence[int]) -> None:
        """The ``jobs`` seen for the first time take the places after every other (the next
        ``_apply``), by (submit time, job id)."""
        spec_of, given, fresh = view.job, self._given, self._fresh
        start = len(fresh)
        for job in jobs:
            if not given[job]:
                given[job] = 1
                fresh.append(job)
        if len(fresh) - start > 1:
            fresh[start:] = sorted(fresh[start:], key=lambda job: (spec_of(job).submit_time, job))

    def _sync(self, view: ClusterView) -> None:
        """Take in the starts since the last sync, and the jobs that entered the queue (ranked
        now) and left it for good since."""
        if self._jobs < 0:
            self._tables(view)
        new, self._cursor = view.entered_since(self._cursor)
        done, self._finished = view.finished_since(self._finished)
        if not (new or done or self._batch or self._meta[kern.MOVED]):
            return  # (MOVED: a demotion, after which the running jobs take the front places)
        entries: list[float] = []  # their E_* fields, one after the other
        if new:
            self._list(view, new)
            kinds, status_of, service_of = self._kinds, view.status_of, view.attained_service
            for job in new:
                if status_of(job) is not _PENDING:
                    continue
                kind = kinds.get(job)
                if kind is None:
                    kind = kinds[job] = self._kind(view, view.job(job))
                service = service_of(job)
                if service > 0.0:  # it has run (held GPUs) before: its promotion falls due
                    entries += (job, *kind, service, view.queued_since(job), view.run_time(job))
                else:
                    entries += (job, *kind, service, 0.0, 0.0)
        self._apply(done, new, entries)

    def _apply(self, done: Sequence[int], new: Sequence[int], entries: list[float]) -> None:
        """``kernels().enter``: the batched starts, then these."""
        heap = self._heap
        if self._meta[kern.HEAP] + len(entries) > heap.shape[0]:
            self._heap = np.concatenate([heap, np.zeros_like(heap)])
        batch, self._batch = self._batch, []
        fresh, self._fresh = self._fresh, []
        inputs: list[float] = [len(fresh), len(batch) // 5, len(done), len(new), len(entries) // 6]  # kern.N_*
        inputs += (*fresh, *batch, *done, *new, *entries)
        stopped, self._pending = self._k.enter(
            self._ints,
            self._floats,
            self._bits,
            self._counts,
            self._heap,
            self._meta,
            self._classes,
            self._bounds,
            self.config.promote_knob,
            self._at_slot,
            np.array(inputs, dtype=np.float64),
        )
        self._running -= stopped

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self._sync(view)
        if view.round_tick and view.pending:  # with nobody waiting, every running job keeps its GPUs
            yield from self._reprioritise(view)
        if not self._pending or not self._free_now(view):
            return  # nothing to start, or no room for any job
        free, places, next_fit, levels = self._free, self._places, self._k.next_fit, self._levels
        at = 0
        while True:  # the backfill: the pending jobs in rank order that fit now
            at = next_fit(self._ints, self._bits, self._counts, self._at_slot, self._classes, levels, free, at)
            if at < 0:
                return
            job = int(self._at_slot[at % places])
            spec = view.job(job)
            placed = _place(view, spec, self._names[self._kinds[job][1]])
            assert placed is not None  # pack places a job exactly when one type it allows has room
            yield Start(job, placed[0])
            self._started(view, job, self._type_index[placed[1]], spec.num_gpus)
            if not self._pending or not self._free_now(view):
                return  # as above (every class asks for a GPU at least)
            at += 1

    def _free_now(self, view: ClusterView) -> int:
        """Free GPUs per training type (on placeable servers) into ``_free``; their sum."""
        free, total = self._free, 0
        for i, t in enumerate(self._training):
            free[i] = n = view.total_free(t, _TRAINING)
            total += n
        return total

    def _started(self, view: ClusterView, job: int, on: int, gpus: int, service: float = _NAN) -> None:
        """Track a job that runs on ``gpus`` GPUs of training type ``on`` (its index; -1:
        another) since now: a pending one at its level (its service has not grown since it
        entered), another (``_rebuild``) at the level of its attained ``service``. A batched
        start: the next ``_apply`` takes it in."""
        self._batch += (job, on, gpus, view.now, service)
        self._running += 1
        self._pending -= 1  # (a rebuild's count is set right after, by its _apply)

    def _rebuild(self, view: ClusterView) -> None:
        """Rank every running job afresh (when jobs run that this policy did not start)."""
        self._apply((), self._ints[: self._meta[kern.RUNS], kern.LISTED].tolist(), [])  # none runs
        self._list(view, tuple(view.running))
        for job in view.running:
            if view.status_of(job) == _RUNNING:
                _, gpu_type, _, _ = view.allocation(job)
                on = -1 if gpu_type is None else self._type_index.get(gpu_type, -1)
                self._started(view, job, on, view.workers(job), view.attained_service(job))
        self._apply((), (), [])

    def _up_to_date(self, view: ClusterView) -> None:
        """Promote the jobs due; bring the running jobs' levels up to now (a running job's
        level only rises)."""
        if self._running != len(view.running):
            self._rebuild(view)
        now, out = view.now, self._out
        limit = now + 1e-9 * (1.0 + abs(now))  # promotions up to here (rounding aside)
        checks = self._k.due_now(
            self._ints, self._floats, self._bits, self._counts, self._heap, self._meta, self._at_slot, self._levels,
            now, limit, self.config.promote_knob, out,
        )  # fmt: skip
        if checks:
            jobs = out[:checks].copy()
            services = np.array([view.attained_service(job) for job in jobs.tolist()], dtype=np.float64)
            self._k.relevel(
                self._ints, self._floats, self._bits, self._counts, self._meta, self._at_slot, self._bounds, now, jobs,
                services,
            )  # fmt: skip

    def _reprioritise(self, view: ClusterView) -> Iterator[Action]:
        """Bring the ranks up to date; preempt what falls outside the GPU budget in rank order;
        start what is chosen."""
        self._up_to_date(view)
        k, ints, out, levels = self._k, self._ints, self._out, self._levels
        chosen = self._chosen
        self._free_now(view)
        starts, drops = k.choose(
            ints, self._bits, self._counts, self._meta, self._at_slot, self._classes, self._type_lists, levels,
            self._free, chosen, out,
        )  # fmt: skip
        if drops:
            dropped = set(out[:drops].tolist())
            preempts = self._preempts
            for job in tuple(view.running):
                if job in dropped:
                    action = preempts.get(job)
                    if action is None:
                        action = preempts[job] = Preempt(job)  # (frozen: one will do for every time)
                    yield action  # (it re-enters the queue: the next sync takes it off the running)
        training = self._training
        for job, t in zip(chosen[0, :starts].tolist(), chosen[1, :starts].tolist(), strict=True):
            spec = view.job(job)
            placed = _place(view, spec, (training[t],))
            if placed is not None:
                yield Start(job, placed[0])
                self._started(view, job, t, spec.num_gpus)
        self._sync(view)  # the jobs just preempted, ranked by their fresh level

    def _size(self, view: ClusterView, spec: JobSpec) -> Size:
        """The job's size class: its GPUs and the training types it allows (None: every one), so
        that jobs this policy cannot tell apart share a class (whether a job fits depends on
        nothing else)."""
        size = (spec.num_gpus, spec.gpu_types)
        known = self._sizes.get(size)
        if known is None:
            training = [t for t, p in view.pool_types() if p in TRAINING_ONLY]
            allowed = frozenset(t for t in training if spec.allows(view.gpu_type(t)))
            known = self._sizes[size] = (spec.num_gpus, None if len(allowed) == len(set(training)) else allowed)
        return known

    def _kind(self, view: ClusterView, spec: JobSpec) -> tuple[int, int]:
        """The job's size class and type list (``_size_class``, ``_type_list``): all they read of a
        job is its GPUs, the types it allows and its model (``types_for`` orders by the model's
        rate)."""
        key = (spec.num_gpus, spec.gpu_types, spec.model)
        kind = self._kind_of.get(key)
        if kind is None:
            kind = self._kind_of[key] = (self._size_class(view, spec), self._type_list(view, spec))
        return kind

    def _size_class(self, view: ClusterView, spec: JobSpec) -> int:
        """The column of the job's size class (``_size``) in the class table."""
        size = self._size(view, spec)
        c = self._class_of.get(size)
        if c is None:
            c = self._class_of[size] = len(self._class_of)
            gpus, allowed = size
            bits = sum(1 << i for i, t in enumerate(self._training) if allowed is None or t in allowed)
            self._classes = np.concatenate([self._classes, np.array([[gpus], [bits]], dtype=np.int64)], axis=1)
            self._add_rows()
        return c

    def _add_rows(self) -> None:
        """A row of bits per level (empty), for a class or the running jobs."""
        rows = np.zeros((self._levels, self._bits.shape[1]), dtype=np.int64)
        rows[:, -2:] = kern.EMPTY, -1  # bounds on the first and the last slot set: none
        self._bits = np.concatenate([self._bits, rows])
        self._counts = np.concatenate([self._counts, np.zeros(self._levels, dtype=np.int64)])

    def _type_list(self, view: ClusterView, spec: JobSpec) -> int:
        """The row of the job's ``types_for`` the training pool at its request (as training type
        indices) in the type-list table."""
        names = types_for(view, spec, Pool.TRAINING, spec.num_gpus, self.config.type_order)
        row = self._list_of.get(names)
        if row is None:
            row = self._list_of[names] = len(self._list_of)
            self._names.append(names)
            line = np.full((1, self._type_lists.shape[1]), -1, dtype=np.int64)
            line[0, : len(names)] = [self._type_index[t] for t in names]
            self._type_lists = np.concatenate([self._type_lists, line])
        return row

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def _place(view: ClusterView, spec: JobSpec, types: Sequence[str]) -> tuple[Alloc, str] | None:
    """``pack`` of the job at its size on the first of ``types`` (training types it allows, in
    the policy's order) where it fits, and that type; one server by best fit without pack's
    checks (the common case), else pack itself on that type."""
    gpus = spec.num_gpus
    for t in types:
        sid = view.best_fit(t, _TRAINING, gpus)
        if sid is not None:
            return ((sid, gpus),), t
        alloc = pack(view, spec, gpus, gpu_type=t)
        if alloc is not None:
            return alloc, t
    return None


def tiresias(config: TiresiasConfig | None = None) -> Tiresias:
    return Tiresias(config or TiresiasConfig())


register("tiresias", tiresias, TiresiasConfig, needs="none")
