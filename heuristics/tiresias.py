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
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus, Preempt, Start
from envs.sim.settings import Each, Num, Settings
from heuristics.common import TRAINING_ONLY, SortedQueue, free_gpus, pack
from heuristics.registry import register


@dataclass(frozen=True)
class TiresiasConfig(Settings):
    """:param thresholds_gpu_h: queue boundaries in GPU-hours of attained service.
    :param round_s: seconds between two preemptive re-prioritisations.
    :param promote_knob: promote a job waiting longer than this times its executed time."""

    thresholds_gpu_h: Annotated[tuple[float, ...], Each(Num(gt=0))] = (1.0, 10.0)
    round_s: Annotated[float, Num(ge=1)] = 300.0
    promote_knob: Annotated[float, Num(ge=0)] = 8.0


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
        budget = free_gpus(view, TRAINING_ONLY) + sum(view.workers(j) for j in running)
        chosen = set()
        for job in ranked:
            need = view.job(job).num_gpus
            if need <= budget:
                chosen.add(job)
                budget -= need
        for job in running:
            if job not in chosen:
                yield Preempt(job)
        for job in ranked:
            if job in chosen and view.status_of(job) == JobStatus.PENDING:
                spec = view.job(job)
                alloc = pack(view, spec, spec.num_gpus)
                if alloc is not None:
                    yield Start(job, alloc)
        # every pending job (the ones just preempted included), keyed by its fresh level
        self._queue.rebuild(view)

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def tiresias(config: TiresiasConfig | None = None) -> Tiresias:
    return Tiresias(config or TiresiasConfig())


register("tiresias", tiresias, TiresiasConfig, needs="none")
