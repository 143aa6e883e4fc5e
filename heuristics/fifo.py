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

from envs.sim.policy import ClusterView, ComposedScheduler
from heuristics.common import TRAINING_ONLY, PackPlacement, SortedQueue, free_gpus
from heuristics.registry import register


def by_submit(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.job(job).submit_time, job)


def by_remaining(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.state(job).remaining_work, view.job(job).submit_time, job)


@dataclass
class QueueOrdering:
    """Pending jobs in the order of ``key`` (fixed when a job enters the queue)."""

    key: Callable[[ClusterView, int], tuple[float, ...]]
    blocking: bool
    pools: tuple = TRAINING_ONLY
    _queue: SortedQueue = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._queue = SortedQueue(self.key)

    def rank(self, view: ClusterView) -> Iterator[int]:
        self._queue.sync(view)
        for job in self._queue.walk(view):
            if free_gpus(view, self.pools) == 0:
                return
            yield job


def fifo() -> ComposedScheduler:
    return ComposedScheduler("fifo", QueueOrdering(by_submit, blocking=True), PackPlacement())


def sjf() -> ComposedScheduler:
    return ComposedScheduler("sjf", QueueOrdering(by_remaining, blocking=False), PackPlacement())


register("fifo", fifo, needs="none")
register("sjf", sjf)
