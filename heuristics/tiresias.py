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
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus, Preempt, Start
from heuristics.common import TRAINING_ONLY, SortedQueue, free_gpus, pack
from heuristics.registry import register


@dataclass(frozen=True)
class TiresiasConfig:
    """:param thresholds_gpu_h: queue boundaries in GPU-hours of attained service.
    :param round_s: seconds between two preemptive re-prioritisations.
    :param promote_knob: promote a job waiting longer than this times its executed time."""

    thresholds_gpu_h: tuple[float, ...] = (1.0, 10.0)
    round_s: float = 300.0
    promote_knob: float = 8.0


@dataclass
class Tiresias:
    config: TiresiasConfig = field(default_factory=TiresiasConfig)
    name: str = "tiresias"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self._thresholds = [h * 3600.0 for h in self.config.thresholds_gpu_h]
        self._offset: dict[int, float] = {}  # service forgiven by promotions
        self._queue = SortedQueue(self._key)
        self._reclaim = FewestJobsReclaim()

    def _level(self, view: ClusterView, job: int) -> int:
        service = view.attained_service(job) - self._offset.get(job, 0.0)
        return bisect.bisect_right(self._thresholds, service)

    def _key(self, view: ClusterView, job: int) -> tuple[float, ...]:
        return (self._level(view, job), view.job(job).submit_time, job)

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if view.round_tick and view.pending:  # with nobody waiting, every running job keeps its GPUs
            yield from self._reprioritise(view)
        else:
            self._queue.sync(view)
        for job in self._queue.walk(view):
            if free_gpus(view, TRAINING_ONLY) == 0:
                return
            spec = view.job(job)
            alloc = pack(view, spec, spec.num_gpus)
            if alloc is not None:
                yield Start(job, alloc)

    def _reprioritise(self, view: ClusterView) -> Iterator[Action]:
        """Preempt what falls outside the GPU budget in rank order; start what is chosen."""
        for job in view.pending:
            s = view.state(job)
            if s.run_time > 0 and view.now - s.queued_since > self.config.promote_knob * s.run_time:
                self._offset[job] = s.attained_service
        running = [j for j in view.running if view.status_of(j) == JobStatus.RUNNING]
        ranked = sorted([*view.pending, *running], key=lambda j: self._key(view, j))
        chosen = _choose(view, ranked)
        for job in running:
            if job not in chosen:
                yield Preempt(job)
        for job in ranked:
            if job in chosen and view.status_of(job) == JobStatus.PENDING:
                spec = view.job(job)
                alloc = pack(view, spec, spec.num_gpus, gpu_type=chosen[job])
                if alloc is not None:
                    yield Start(job, alloc)
        # every pending job (the ones just preempted included), keyed by its fresh level
        self._queue.rebuild(view)

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def _choose(view: ClusterView, ranked: list[int]) -> dict[int, str]:
    """The jobs that fit the per-type GPU budget in rank order, each with the type it runs on.

    A running job keeps its type. A pending one takes the first type it allows (cluster order)
    that holds it without displacing any running job ranked below it, else the first whose
    budget still holds it (those running jobs are then preempted), else it is not chosen.
    """
    budget: dict[str, int] = {}  # GPUs per training type not yet given to a chosen job
    below: dict[str, int] = {}  # of those, GPUs held by running jobs not yet reached in the ranking
    for t, p in view.pool_types():
        if p in TRAINING_ONLY:
            budget[t] = view.total_free(t, p)
            below[t] = 0
    running: dict[int, str] = {}
    for job in ranked:
        status, held, _, _ = view.allocation(job)
        if status == JobStatus.RUNNING and held in budget:
            assert held is not None
            running[job] = held
            budget[held] += view.workers(job)
            below[held] += view.workers(job)
    chosen: dict[int, str] = {}
    for job in ranked:
        spec = view.job(job)
        need = spec.num_gpus
        here = running.get(job)
        if here is not None:
            below[here] -= need
            if need <= budget[here]:
                chosen[job] = here
                budget[here] -= need
            continue
        types = [t for t in budget if need <= budget[t] and spec.allows(view.gpu_type(t))]
        if types:
            t = next((t for t in types if need <= budget[t] - below[t]), types[0])
            chosen[job] = t
            budget[t] -= need
    return chosen


def tiresias(config: TiresiasConfig | None = None) -> Tiresias:
    return Tiresias(config or TiresiasConfig())


register("tiresias", tiresias, TiresiasConfig)
