"""FIFO and SJF: the non-preemptive baselines.

``fifo``: jobs start in submission order; the head of the queue blocks the others until it fits
(head-of-line blocking). No loaning, no elasticity, no preemption: Aryl's "Baseline" and
FitGpp's FIFO.

``sjf``: shortest job first by the isolated remaining run time (the trace's duration: a perfect
estimate), backfilling: a job that does not fit is skipped, so a shorter one behind it starts.

``sjf-eft``: ``sjf`` with ``start="earliest-finish"`` (``heuristics.common.STARTS``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from envs.sim.model import JobSpec
from envs.sim.policy import ClusterView, ComposedScheduler, JobStatus
from heuristics.common import (
    TRAINING_ONLY,
    PackConfig,
    PackEftConfig,
    PackPlacement,
    RankedQueue,
    Room,
    SortedQueue,
    free_gpus,
)
from heuristics.registry import register

_PENDING = JobStatus.PENDING  # bound once: a member lookup costs ten globals


def by_submit(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.job(job).submit_time, job)


def by_remaining(view: ClusterView, job: int) -> tuple[float, ...]:
    return (view.remaining_work(job), view.job(job).submit_time, job)


def requested(spec: JobSpec) -> int:
    """A job's requested GPUs: the fewest :class:`PackPlacement` starts it on."""
    return spec.num_gpus


def least(spec: JobSpec) -> int:
    """The fewest GPUs a job may run on (``min_gpus``): what any placement starts it on at least."""
    return spec.min_gpus


@dataclass
class QueueOrdering:
    """Pending jobs in the order of ``key`` (fixed when a job enters the queue).

    Blocking: the ranking stops at the first job met while no GPU of ``pools`` is free (the
    placement stops it at the first job that does not fit anyway). Not blocking (backfill): the
    same stop, and a job that the placement cannot start (``gpus(job)`` above the free GPUs of
    every type it allows, in any pool) is passed over without being proposed; the jobs are kept
    by size class, so a walk passes over a whole class that cannot fit at once. Proposing such a
    job would only have the placement say no, so the starts are the same. ``gpus``: the fewest
    GPUs the placement starts a job on (by default ``min_gpus``: no placement starts one on
    fewer; ``num_gpus`` for one that starts every job at its request, as :class:`PackPlacement`
    does, so that an elastic job whose request does not fit is passed over too)."""

    key: Callable[[ClusterView, int], tuple[float, ...]]
    blocking: bool
    pools: tuple = TRAINING_ONLY
    gpus: Callable[[JobSpec], int] = least
    _queue: SortedQueue = field(init=False, repr=False)
    _ranked: RankedQueue = field(init=False, repr=False)
    _cursor: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._queue = SortedQueue(self.key)
        self._ranked = RankedQueue()

    def take_in(self, view: ClusterView) -> None:
        """Key the jobs that entered the queue since the last call (``rank`` does it first; a
        caller whose keys change over time calls it at every decision point, so that a job's key
        is that of the decision point it entered before, whoever ranks)."""
        if self.blocking:
            self._queue.sync(view)
            return
        new, self._cursor = view.entered_since(self._cursor)
        specs = [view.job(job) for job in new if view.status_of(job) == _PENDING]
        gpus = self.gpus
        self._ranked.extend((s.job_id, self.key(view, s.job_id), (gpus(s), s.gpu_types)) for s in specs)

    def rank(self, view: ClusterView) -> Iterator[int]:
        if not self.blocking:
            yield from self._backfill(view)
            return
        self.take_in(view)
        for job in self._queue.walk(view):
            if free_gpus(view, self.pools) == 0:
                return
            yield job

    def _backfill(self, view: ClusterView) -> Iterator[int]:
        self.take_in(view)
        room = Room(view)
        for key in self._ranked.walk(room.fits):
            job = int(key[-1])
            if view.status_of(job) != _PENDING:  # started elsewhere
                self._ranked.discard(job)
                continue
            if free_gpus(view, self.pools) == 0:
                return
            yield job
            if view.status_of(job) != _PENDING:
                self._ranked.discard(job)
                room.taken()


def fifo(config: PackConfig | None = None) -> ComposedScheduler:
    c = config or PackConfig()
    return ComposedScheduler(
        "fifo",
        QueueOrdering(by_submit, blocking=True),
        PackPlacement.of(c),
    )


def sjf(config: PackConfig | None = None, name: str = "sjf") -> ComposedScheduler:
    c = config or PackConfig()
    return ComposedScheduler(
        name,
        QueueOrdering(by_remaining, blocking=False, gpus=requested),
        PackPlacement.of(c),
    )


def sjf_eft(config: PackEftConfig | None = None) -> ComposedScheduler:
    """``sjf`` that starts a job only where that ends it no later than waiting for faster GPUs
    would (``start="earliest-finish"``, ``heuristics.common.STARTS``): a name for it, so that it can
    sit in the agents' seats (components are named policies)."""
    return sjf(config or PackEftConfig(), "sjf-eft")


register("fifo", fifo, PackConfig, needs="none")
register("sjf", sjf, PackConfig)
register("sjf-eft", sjf_eft, PackEftConfig)
