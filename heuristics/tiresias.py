"""Tiresias' 2D-LAS (Gu et al., NSDI'19): least attained service first, preemptive, round based.

A job's attained service is the GPU-seconds it has held (GPUs x time: the "2D" of 2D-LAS).
Jobs sit in discretised queues: queue k holds jobs whose service lies between thresholds
k-1 and k; lower queues go first, and within a queue jobs keep their submission order (FIFO,
as in Tiresias' discretised LAS). A job that has waited longer than ``promote_knob`` times its
executed time is promoted back to the first queue (Tiresias' PROMOTE_KNOB against starvation).

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
cost little per decision): the pending jobs are kept sorted by rank in one list per size class
(GPUs and allowed types), so a walk in rank order passes over a whole class once its jobs no
longer fit (the round's budget, or the free GPUs between rounds); a pending job's rank changes
only when it is promoted (its service does not grow while it waits), and the promotions due are
taken from a heap of the times they fall due.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Annotated

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Action, Alloc, ClusterView, FewestJobsReclaim, JobStatus, Preempt, Start
from envs.sim.settings import Choice, Each, Num, Settings
from heuristics.common import (
    TRAINING_ONLY,
    TYPE_ORDERS,
    DueTimes,
    RankedQueue,
    Room,
    Size,
    free_gpus,
    pack,
    types_for,
)
from heuristics.registry import register

_PENDING, _RUNNING = JobStatus.PENDING, JobStatus.RUNNING  # bound once: a member lookup costs ten globals
_TRAINING = Pool.TRAINING

Key = tuple[float, ...]  # (queue level, submit time, job): the rank, smaller first


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


Row = tuple[Key, str | None, int]  # a running job's (rank, GPU type, GPUs)
_gpus = itemgetter(2)  # a row's GPUs


@dataclass
class Tiresias:
    config: TiresiasConfig = field(default_factory=TiresiasConfig)
    name: str = "tiresias"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self._thresholds = [h * 3600.0 for h in self.config.thresholds_gpu_h]
        self._offset: dict[int, float] = {}  # service forgiven by promotions
        self._ranked = RankedQueue()  # the pending jobs, by rank; size class (GPUs, types)
        self._cursor = 0  # position in the engine's queue log
        self._finished = 0  # position in the engine's log of finishes
        self._due: DueTimes[tuple[int, float, float]] = DueTimes()  # at promotion due: (job, queued since, run time)
        self._since: dict[int, float] = {}  # when a job with an entry in _due last entered the queue
        self._rows: list[Row] = []  # the running jobs, sorted by rank (their level as of _checks)
        self._row: dict[int, Row] = {}  # job -> its row
        self._held: dict[str | None, int] = {}  # GPUs of the rows, per type
        self._checks: DueTimes[tuple[int, int]] = DueTimes()  # when a running job may reach its next level: (job, run)
        self._run: dict[int, int] = {}  # job -> its run's number (stale checks are skipped)
        self._runs = 0
        self._type_lists: dict[tuple[frozenset[str] | None, str, int], list[str]] = {}  # see _types
        self._sizes: dict[Size, Size] = {}  # see _size
        self._reclaim = FewestJobsReclaim()

    def _level(self, job: int, service: float) -> int:
        """The queue of a job with this attained service."""
        return bisect_right(self._thresholds, service - self._offset.get(job, 0.0))

    def _sync(self, view: ClusterView) -> None:
        """Take in the jobs that entered the queue (ranked now) and left it for good since the
        last sync."""
        new, self._cursor = view.entered_since(self._cursor)
        done, self._finished = view.finished_since(self._finished)
        row_of = self._row
        for job in done:
            if job in row_of:
                self._drop(job)
        if not new:
            return
        knob, thresholds, offset, since_of, due = (
            self.config.promote_knob,
            self._thresholds,
            self._offset,
            self._since,
            self._due,
        )
        status_of, spec_of, service_of = view.status_of, view.job, view.attained_service
        entries = []
        for job in new:
            if job in row_of:
                self._drop(job)  # preempted by the engine (a failure)
            if status_of(job) is not _PENDING:
                continue
            spec = spec_of(job)
            service = service_of(job)
            level = bisect_right(thresholds, service - offset.get(job, 0.0))  # _level
            entries.append((job, (level, spec.submit_time, job), self._size(view, spec)))
            if service > 0.0:  # it has run (held GPUs) before
                since, run_time = view.queued_since(job), view.run_time(job)
                since_of[job] = since
                due.push(since + knob * run_time, (job, since, run_time))
        self._ranked.extend(entries)

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self._sync(view)
        if view.round_tick and view.pending:  # with nobody waiting, every running job keeps its GPUs
            yield from self._reprioritise(view)
        if not self._ranked or not free_gpus(view, TRAINING_ONLY):
            return  # nothing to start, or no room for any job
        room = Room(view, TRAINING_ONLY)
        for key in self._ranked.walk(room.fits):
            job = int(key[-1])
            spec = view.job(job)
            placed = _place(view, spec, self._types(view, spec))
            assert placed is not None  # pack places a job exactly when one type it allows has room
            yield Start(job, placed[0])
            self._ranked.discard(job)
            self._started(view, job, key, placed[1], spec.num_gpus)
            room.taken()

    def _promote(self, view: ClusterView) -> None:
        """A job that has waited more than ``promote_knob`` times its executed time goes back to
        the first queue: its service so far is forgiven."""
        now, due = view.now, self._due
        limit = now + 1e-9 * (1.0 + abs(now))  # candidates up to here (rounding aside)
        if not due or due.first() > limit:
            return
        late: list[tuple[float, tuple[int, float, float]]] = []
        knob, since_of, status_of = self.config.promote_knob, self._since, view.status_of
        offset, thresholds, add, service_of, spec_of = (
            self._offset,
            self._thresholds,
            self._ranked.add,
            view.attained_service,
            view.job,
        )
        while due and due.first() <= limit:
            t = due.first()
            for entry in due.pop():  # (each job's promotion is its own: any order will do)
                job, since, run_time = entry
                if status_of(job) is not _PENDING or since_of[job] != since:
                    continue  # it started since: a later wait gets an entry of its own
                if now - since > knob * run_time:  # (a wait's run time is fixed)
                    service = offset[job] = service_of(job)
                    spec = spec_of(job)
                    level = bisect_right(thresholds, service - service)  # _level, its service forgiven
                    add(job, (level, spec.submit_time, job), self._size(view, spec))
                else:
                    late.append((t, entry))
        for t, entry in late:
            due.push(t, entry)

    # --- the running jobs' ranks, kept up to date between rounds
    def _key(self, view: ClusterView, job: int, service: float) -> Key:
        """A job's rank with this attained ``service``."""
        return (self._level(job, service), view.job(job).submit_time, job)

    def _started(self, view: ClusterView, job: int, key: Key, gpu_type: str | None, gpus: int) -> None:
        """Track a job that runs on ``gpus`` GPUs of ``gpu_type`` since now, ranked ``key`` (its
        rank while it waited: its service has not grown since): its row, and when its level may
        rise."""
        service = view.attained_service(job)
        row = (key, gpu_type, gpus)
        insort(self._rows, row)
        self._row[job] = row
        held = self._held
        held[gpu_type] = held.get(gpu_type, 0) + gpus
        self._runs += 1
        self._run[job] = self._runs
        self._check_at(view.now, job, row, service)

    def _check_at(self, now: float, job: int, row: Row, service: float) -> None:
        """Schedule the next look at a running job's level (its attained ``service`` now): a
        little before its service, which grows by its GPUs every second it runs (its GPUs are
        fixed: this policy never scales), would reach the next threshold. Until then its level
        cannot change."""
        level = int(row[0][0])
        thresholds = self._thresholds
        if level >= len(thresholds):
            return
        gpus = row[2]
        threshold = thresholds[level]
        left = threshold + self._offset.get(job, 0.0) - service
        t = now + left / gpus
        # rounding in the view's sum is far below this margin (relative 1e-9 against 1e-16)
        margin = 1e-9 * (1.0 + abs(now) + abs(t) + (threshold + abs(left)) / gpus)
        self._checks.push(t - margin, (job, self._run[job]))

    def _drop(self, job: int) -> None:
        row = self._row.pop(job, None)
        if row is not None:
            rows = self._rows
            del rows[bisect_left(rows, (row[0],))]
            self._held[row[1]] -= row[2]

    def _update_levels(self, view: ClusterView) -> None:
        """Bring the running jobs' levels up to now (a running job's level only rises)."""
        now, checks, row_of, run = view.now, self._checks, self._row, self._run
        if not checks or checks.first() > now:
            return
        thresholds, offset, rows, service_of = self._thresholds, self._offset, self._rows, view.attained_service
        later: list[tuple[float, tuple[int, int]]] = []
        while checks and checks.first() <= now:
            t = checks.first()
            for entry in checks.pop():  # (each job's row is its own: any order will do)
                job = entry[0]
                row = row_of.get(job)
                if row is None or run[job] != entry[1]:
                    continue  # it stopped since
                key = row[0]
                service = service_of(job)
                level = bisect_right(thresholds, service - offset.get(job, 0.0))  # _level
                if level == key[0]:
                    later.append((t, entry))  # within the margin of its threshold: look again next round
                    continue
                del rows[bisect_left(rows, (key,))]
                row = ((level, key[1], job), row[1], row[2])
                insort(rows, row)
                row_of[job] = row
                self._check_at(now, job, row, service)
        for t, entry in later:
            checks.push(t, entry)

    def _rebuild(self, view: ClusterView) -> None:
        """Rank every running job afresh (when jobs run that this policy did not start)."""
        self._rows, self._row, self._held, self._checks = [], {}, {}, DueTimes()
        for job in view.running:
            if view.status_of(job) == _RUNNING:
                _, gpu_type, _, _ = view.allocation(job)
                self._started(view, job, self._key(view, job, view.attained_service(job)), gpu_type, view.workers(job))

    def _reprioritise(self, view: ClusterView) -> Iterator[Action]:
        """Preempt what falls outside the GPU budget in rank order; start what is chosen."""
        self._promote(view)
        if len(self._row) != len(view.running):
            self._rebuild(view)
        self._update_levels(view)
        dropped, starts = _choose(view, self._ranked, self._rows, self._held, self._types)
        if dropped:
            for job in tuple(view.running):
                if job in dropped:
                    yield Preempt(job)
                    self._drop(job)
        for key, gpu_type in starts:
            job = int(key[-1])
            spec = view.job(job)
            placed = _place(view, spec, (gpu_type,))
            if placed is not None:
                yield Start(job, placed[0])
                self._ranked.discard(job)
                self._started(view, job, key, gpu_type, spec.num_gpus)
        self._sync(view)  # the jobs just preempted, ranked by their fresh level

    def _size(self, view: ClusterView, spec: JobSpec) -> Size:
        """The job's size class in the ranked queue: its GPUs and the training types it allows
        (None: every one), so that jobs this policy cannot tell apart share a class (fewer
        classes to merge in every walk; whether a job fits depends on nothing else)."""
        size = (spec.num_gpus, spec.gpu_types)
        known = self._sizes.get(size)
        if known is None:
            training = [t for t, p in view.pool_types() if p in TRAINING_ONLY]
            allowed = frozenset(t for t in training if spec.allows(view.gpu_type(t)))
            known = self._sizes[size] = (spec.num_gpus, None if len(allowed) == len(set(training)) else allowed)
        return known

    def _types(self, view: ClusterView, spec: JobSpec) -> list[str]:
        """``types_for`` the training pool at the job's request, kept per (allowed types, model,
        GPUs): all it depends on (the throughput model's rates of that model at those GPUs)."""
        key = (spec.gpu_types, spec.model, spec.num_gpus)
        types = self._type_lists.get(key)
        if types is None:
            types = self._type_lists[key] = types_for(view, spec, Pool.TRAINING, spec.num_gpus, self.config.type_order)
        return types

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


def _choose(
    view: ClusterView,
    ranked: RankedQueue,
    running: list[Row],
    held: dict[str | None, int],
    types: Callable[[ClusterView, JobSpec], list[str]],
) -> tuple[set[int], list[tuple[Key, str]]]:
    """The jobs that fit the per-type GPU budget in rank order: the running ones not kept (to
    preempt), and the pending ones chosen (their ranks), in rank order, each with the type it is to
    start on;
    ``running``: the rows (rank, type, GPUs) of the running jobs, sorted; ``held``: their GPUs
    per type; ``types``: the training types a job allows, in the order of the policy's
    ``type_order`` (``heuristics.common.types_for``).

    A running job keeps its type. A pending one takes the first type it allows (in that order)
    that holds it without displacing any running job ranked below it, else the first whose
    budget still holds it (those running jobs are then preempted), else it is not chosen.
    """
    budget: dict[str, int] = {}  # GPUs per training type not yet given to a chosen job
    below: dict[str, int] = {}  # of those, GPUs held by running jobs not yet reached in the ranking
    for t, p in view.pool_types():
        if p in TRAINING_ONLY:
            below[t] = held.get(t, 0)
            budget[t] = view.total_free(t, p) + below[t]

    def fits(size: Size) -> bool:
        gpus, types = size
        for t, b in budget.items():  # noqa: SIM110 (a loop: cheaper than any() over a generator, a hot path)
            if gpus <= b and (types is None or t in types):
                return True
        return False

    dropped: set[int] = set()
    starts: list[tuple[Key, str]] = []
    left = sum(budget.values())  # GPUs not yet given, all types

    def take_pending(key: Key) -> None:
        nonlocal left
        spec: JobSpec = view.job(int(key[-1]))
        need = spec.num_gpus
        fallback = None  # the first type whose budget holds it, if none holds it without displacing
        for t in types(view, spec):
            b = budget.get(t, -1)
            if need <= b:
                if need <= b - below[t]:
                    break
                if fallback is None:
                    fallback = t
        else:
            if fallback is None:
                return
            t = fallback
        starts.append((key, t))
        budget[t] -= need
        left -= need

    # the running jobs (all of them) and the pending ones of the classes that still fit, merged:
    # the running rows i..j-1 rank above the next pending job
    on_types = [t for t, gpus in held.items() if gpus]  # the types the rows run on (each holds >= 1 GPU)
    only = on_types[0] if len(on_types) == 1 and on_types[0] in budget else None
    pending = ranked.walk(fits)
    head = next(pending, None)
    i, n = 0, len(running)
    while left:
        j = n if head is None else bisect_left(running, (head,), i)
        if all(budget[t] >= below[t] for t in budget):  # no deficit: each of them is kept
            if only is not None:  # every row on one training type: their GPUs in one sum
                need = sum(map(_gpus, running[i:j]))
                budget[only] -= need
                below[only] -= need
            else:
                for key, on, need in running[i:j]:
                    if on in budget:
                        budget[on] -= need
                        below[on] -= need
                    else:
                        dropped.add(int(key[-1]))  # on a type outside the training pool
            left = sum(budget.values())
            i = j
        else:
            while i < j and left:
                key, on, need = running[i]
                i += 1
                if on not in budget:
                    dropped.add(int(key[-1]))
                    continue
                below[on] -= need
                if need <= budget[on]:
                    budget[on] -= need
                    left -= need
                else:
                    dropped.add(int(key[-1]))
            if i < j:
                break  # every GPU given
        if head is None:
            break
        take_pending(head)
        head = next(pending, None)
    dropped.update(int(key[-1]) for key, _, _ in running[i:])  # not reached: every GPU was given
    return dropped, starts


def tiresias(config: TiresiasConfig | None = None) -> Tiresias:
    return Tiresias(config or TiresiasConfig())


register("tiresias", tiresias, TiresiasConfig, needs="none")
