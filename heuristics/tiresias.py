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

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus, Preempt, Start
from envs.sim.settings import Choice, Each, Num, Settings
from heuristics.common import TRAINING_ONLY, TYPE_ORDERS, RankedQueue, Room, Size, pack, types_for
from heuristics.registry import register

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
        self._due: list[tuple[float, int, float]] = []  # (promotion due, job, queued since)
        self._reclaim = FewestJobsReclaim()

    def _level(self, view: ClusterView, job: int) -> int:
        service = view.attained_service(job) - self._offset.get(job, 0.0)
        return bisect.bisect_right(self._thresholds, service)

    def _key(self, view: ClusterView, job: int) -> Key:
        return (self._level(view, job), view.job(job).submit_time, job)

    def _sync(self, view: ClusterView) -> None:
        """Take in the jobs that entered the queue since the last sync (ranked now)."""
        new, self._cursor = view.entered_since(self._cursor)
        knob = self.config.promote_knob
        for job in new:
            if view.status_of(job) != JobStatus.PENDING:
                continue
            spec = view.job(job)
            self._ranked.add(job, self._key(view, job), (spec.num_gpus, spec.gpu_types))
            if view.attained_service(job) > 0.0:  # it has run (held GPUs) before
                s = view.state(job)
                heapq.heappush(self._due, (s.queued_since + knob * s.run_time, job, s.queued_since))

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self._sync(view)
        if view.round_tick and view.pending:  # with nobody waiting, every running job keeps its GPUs
            yield from self._reprioritise(view)
        room = Room(view, TRAINING_ONLY)
        for key in self._ranked.walk(room.fits):
            job = int(key[-1])
            spec = view.job(job)
            alloc = pack(view, spec, spec.num_gpus, type_order=self.config.type_order)
            assert alloc is not None  # pack places a job exactly when one type it allows has room
            yield Start(job, alloc)
            self._ranked.discard(job)
            room.taken()

    def _promote(self, view: ClusterView) -> None:
        """A job that has waited more than ``promote_knob`` times its executed time goes back to
        the first queue: its service so far is forgiven."""
        now, knob, due = view.now, self.config.promote_knob, self._due
        late: list[tuple[float, int, float]] = []
        while due and due[0][0] <= now + 1e-9 * (1.0 + abs(now)):  # candidates (rounding aside)
            entry = heapq.heappop(due)
            job = entry[1]
            if view.status_of(job) != JobStatus.PENDING:
                continue  # it started since: a later wait gets an entry of its own
            s = view.state(job)
            if s.queued_since != entry[2]:
                continue
            if now - s.queued_since > knob * s.run_time:
                self._offset[job] = s.attained_service
                spec = view.job(job)
                self._ranked.add(job, self._key(view, job), (spec.num_gpus, spec.gpu_types))
            else:
                late.append(entry)
        for entry in late:
            heapq.heappush(due, entry)

    def _reprioritise(self, view: ClusterView) -> Iterator[Action]:
        """Preempt what falls outside the GPU budget in rank order; start what is chosen."""
        self._promote(view)
        # each running job's fresh rank (self._key, inlined: a hot path), type and GPUs
        allocation, service, spec_of, workers = view.allocation, view.attained_service, view.job, view.workers
        offset, thresholds = self._offset, self._thresholds
        running: list[int] = []
        rows: list[tuple[Key, str | None, int]] = []
        for j in view.running:
            status, gpu_type, _, _ = allocation(j)
            if status == JobStatus.RUNNING:
                running.append(j)
                level = bisect.bisect_right(thresholds, service(j) - offset.get(j, 0.0))
                rows.append(((level, spec_of(j).submit_time, j), gpu_type, workers(j)))
        rows.sort()
        chosen = _choose(view, self._ranked, rows, self.config.type_order)
        for job in running:
            if job not in chosen:
                yield Preempt(job)
        for job, gpu_type in chosen.items():
            if view.status_of(job) == JobStatus.PENDING:
                spec = view.job(job)
                alloc = pack(view, spec, spec.num_gpus, gpu_type=gpu_type)
                if alloc is not None:
                    yield Start(job, alloc)
                    self._ranked.discard(job)
        self._sync(view)  # the jobs just preempted, ranked by their fresh level

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def _choose(
    view: ClusterView, ranked: RankedQueue, running: list[tuple[Key, str | None, int]], type_order: str
) -> dict[int, str]:
    """The jobs that fit the per-type GPU budget in rank order, each with the type it runs on
    (in rank order); ``running``: (key, type, GPUs) of the running jobs, sorted.

    A running job keeps its type. A pending one takes the first type it allows (in the order of
    ``type_order``: ``heuristics.common.types_for``) that holds it without displacing any running
    job ranked below it, else the first whose budget still holds it (those running jobs are then
    preempted), else it is not chosen.
    """
    budget: dict[str, int] = {}  # GPUs per training type not yet given to a chosen job
    below: dict[str, int] = {}  # of those, GPUs held by running jobs not yet reached in the ranking
    for t, p in view.pool_types():
        if p in TRAINING_ONLY:
            budget[t] = view.total_free(t, p)
            below[t] = 0
    for _, held, gpus in running:
        if held in budget:
            budget[held] += gpus
            below[held] += gpus

    def fits(size: Size) -> bool:
        gpus, types = size
        return any(gpus <= b for t, b in budget.items() if types is None or t in types)

    chosen: dict[int, str] = {}

    def take_pending(job: int) -> None:
        spec: JobSpec = view.job(job)
        need = spec.num_gpus
        types = [t for t in types_for(view, spec, Pool.TRAINING, need, type_order) if need <= budget.get(t, -1)]
        if types:
            t = next((t for t in types if need <= budget[t] - below[t]), types[0])
            chosen[job] = t
            budget[t] -= need

    # the running jobs (all of them) and the pending ones of the classes that still fit, merged
    pending = ranked.walk(fits)
    head = next(pending, None)
    for key, held, need in running:
        while head is not None and head < key:
            take_pending(int(head[-1]))
            head = next(pending, None)
        if held not in budget:
            continue  # on a type outside the training pool
        below[held] -= need
        if need <= budget[held]:
            chosen[int(key[-1])] = held
            budget[held] -= need
    while head is not None:
        take_pending(int(head[-1]))
        head = next(pending, None)
    return chosen


def tiresias(config: TiresiasConfig | None = None) -> Tiresias:
    return Tiresias(config or TiresiasConfig())


register("tiresias", tiresias, TiresiasConfig, needs="none")
