"""FIFO and SJF: the non-preemptive baselines.

``fifo``: jobs start in submission order; the head of the queue blocks the others until it fits
(head-of-line blocking). No loaning, no elasticity, no preemption: Aryl's "Baseline" and
FitGpp's FIFO.

``sjf``: shortest job first by the isolated remaining run time (the trace's duration: a perfect
estimate), backfilling: a job that does not fit is skipped, so a shorter one behind it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from envs.sim.policy import ClusterView, ComposedScheduler, JobStatus
from heuristics.common import TRAINING_ONLY, PackConfig, PackPlacement, RankedQueue, Room, SortedQueue, free_gpus
from heuristics.registry import register


def by_submit(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.job(job).submit_time, job)


def by_remaining(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.state(job).remaining_work, view.job(job).submit_time, job)


@dataclass
class QueueOrdering:
    """Pending jobs in the order of ``key`` (fixed when a job enters the queue).

    Blocking: the ranking stops at the first job met while no GPU of ``pools`` is free (the
    placement stops it at the first job that does not fit anyway). Not blocking (backfill): the
    same stop, and a job that no placement could start (its ``min_gpus`` above the free GPUs of
    every type it allows, in any pool) is passed over without being proposed; the jobs are kept
    by size class, so a walk passes over a whole class that cannot fit at once. Proposing such a
    job would only have the placement say no, so the starts are the same."""

    key: Callable[[ClusterView, int], tuple[float, ...]]
    blocking: bool
    pools: tuple = TRAINING_ONLY
    _queue: SortedQueue = field(init=False, repr=False)
    _ranked: RankedQueue = field(init=False, repr=False)
    _cursor: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._queue = SortedQueue(self.key)
        self._ranked = RankedQueue()

    def rank(self, view: ClusterView) -> Iterator[int]:
        if not self.blocking:
            yield from self._backfill(view)
            return
        self._queue.sync(view)
        for job in self._queue.walk(view):
            if free_gpus(view, self.pools) == 0:
                return
            yield job

    def _backfill(self, view: ClusterView) -> Iterator[int]:
        new, self._cursor = view.entered_since(self._cursor)
        for job in new:
            if view.status_of(job) == JobStatus.PENDING:
                spec = view.job(job)
                self._ranked.add(job, self.key(view, job), (spec.min_gpus, spec.gpu_types))
        room = Room(view)
        for key in self._ranked.walk(room.fits):
            job = int(key[-1])
            if view.status_of(job) != JobStatus.PENDING:  # started elsewhere
                self._ranked.discard(job)
                continue
            if free_gpus(view, self.pools) == 0:
                return
            yield job
            if view.status_of(job) != JobStatus.PENDING:
                self._ranked.discard(job)
                room.taken()


def fifo(config: PackConfig | None = None) -> ComposedScheduler:
    c = config or PackConfig()
    return ComposedScheduler(
        "fifo", QueueOrdering(by_submit, blocking=True), PackPlacement(type_order=c.type_order, elastic=c.elastic)
    )


def sjf(config: PackConfig | None = None) -> ComposedScheduler:
    c = config or PackConfig()
    return ComposedScheduler(
        "sjf", QueueOrdering(by_remaining, blocking=False), PackPlacement(type_order=c.type_order, elastic=c.elastic)
    )


register("fifo", fifo, PackConfig, needs="none")
register("sjf", sjf, PackConfig)
