"""Aryl (Li et al., "Aryl: An Elastic Cluster Scheduler for Deep Learning"): capacity loaning
plus elastic scaling, and the variants the paper evaluates.

Registered policies (all borrow the inference cluster's idle servers):

- ``aryl``: phase 1 (:class:`ArylOrdering` + :class:`~heuristics.aryl_place.ArylPlacement`):
  shortest remaining time first over the inelastic workload (inelastic jobs and elastic jobs'
  base demands), with backfill and an age bound; phase 2
  (:class:`~heuristics.aryl_scaling.ArylScaling`): elastic jobs' flexible workers by a
  multiple-choice knapsack; best-fit-decreasing placement with elastic jobs on loaned servers
  and their flexible workers on servers of their own; reclaim by fewest preempted jobs
  (:class:`~heuristics.aryl_reclaim.ArylReclaim`).
- ``aryl-basic``: the paper's "Basic": loaning without elasticity (every job runs at its
  requested ``num_gpus``; no phase 2).
- ``aryl-nogroup``: the placement ablation (paper Table 6): elastic jobs go to training servers
  first like inelastic ones, and their flexible workers may share servers with their base.
- ``afs``: AFS (Hwang et al., NSDI'21) as Aryl compares to it: the same placement, room and
  reclaim, but jobs admitted by throughput per GPU (:class:`AfsOrdering`) and flexible workers
  given greedily by marginal throughput per GPU (:class:`~heuristics.aryl_scaling.AfsScaling`).

The paper's "Baseline" is ``fifo`` (it never borrows); "Ideal" is any of these with
``--set inference.never_reclaim=true``.

Phase-1 order (ours where the paper is silent). Pending jobs are ranked by remaining run time at
their base demand on the fastest GPU type they accept (remaining work / ``view.rate`` on the base
packed on as few servers as possible; fixed when the job enters the queue), then submit time,
then id, and each is placed if it fits (backfill). A job that has waited (since it last entered
the queue) longer than ``age_bound_s`` is *aged*: aged jobs go first, oldest first, and an aged
job that cannot start blocks every job behind it (no backfill past it; the room component frees
flexible GPUs for it and phase 2 keeps flexible workers from growing on its GPU types), so no job
starves. Jobs are placed in this priority order, not by decreasing size: the order decides who
gets the GPUs when they are short, and it must give the same starts whether they are made in
one pass or one at a time with re-ranking in between (the RL ordering env does the latter;
ComposedScheduler's contract). Best fit *decreasing* applies to each job's own workers (full
servers first) and to phase 2, which places all flexible workers in decreasing order of demand.

Composition: each is a plain :class:`~envs.sim.policy.ComposedScheduler` of components the RL
adapters can also use: ``preemption`` = :class:`~heuristics.aryl_scaling.ArylRoom` (before the
starts, it scales in the flexible workers that phase 1 needs: phase 1 comes "first with all
available resources"), ``ordering`` = :class:`ArylOrdering`, ``placement`` =
:class:`~heuristics.aryl_place.ArylPlacement`, ``scaling`` = phase 2, ``reclaimer`` =
:class:`~heuristics.aryl_reclaim.ArylReclaim`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator

from envs.sim.policy import (
    ClusterView,
    ComposedScheduler,
    JobStatus,
    NoPreemption,
    NoScaling,
    Preemption,
    Scaling,
)
from envs.sim.throughput import packed_servers
from heuristics.aryl_config import ArylConfig
from heuristics.aryl_place import ArylPlacement
from heuristics.aryl_reclaim import ArylReclaim
from heuristics.aryl_scaling import AfsScaling, ArylRoom, ArylScaling
from heuristics.common import RankedQueue, Room, Size
from heuristics.registry import register

_PENDING = JobStatus.PENDING  # (a module constant: an enum member lookup costs more than the test)


def _anything(size: Size) -> bool:
    return True


class ArylOrdering:
    """``Ordering`` component: Aryl's phase 1 (see the module docstring). Not blocking as a
    whole: only an aged job blocks, which :meth:`rank` does itself by stopping.

    Speed only: the pending jobs are kept by rank in one list per size class, and by entry time,
    so that a walk goes only as far as it needs and passes over a whole class that cannot fit
    (thousands of jobs queued at once cost little per decision).

    :param placement: gives each job's base demand and the (type, pool) pairs it accepts.
    :param age_bound_s: seconds of waiting after which a job is aged.
    """

    blocking = False

    def __init__(self, placement: ArylPlacement, age_bound_s: float) -> None:
        self.placement = placement
        self.age_bound_s = age_bound_s
        self._cursor = 0  # position in the engine's queue log
        # the pending jobs (an entry per job, made when it last entered the queue): by rank, in
        # one list per size class (min GPUs, allowed types); and by (entry time, job), lazily
        # cleaned (an item is live while its job is pending with that entry time)
        self._ranked = RankedQueue()
        self._entered: dict[int, float] = {}
        self._by_entry: list[tuple[float, int]] = []
        self._head = 0  # items of _by_entry before it are dead

    def remaining_time(self, view: ClusterView, job: int) -> float:
        """Seconds left at the base demand on the fastest GPU type the job accepts."""
        spec = view.job(job)
        need = self.placement.demand(spec)
        index = self.placement.index(view)
        rate = 0.0
        for t, p in self.placement.keys(view, spec):
            rate = max(rate, view.rate(job, need, packed_servers(need, index.sizes[t, p]), t))
        rem = view.remaining_work(job)
        return rem / rate if rate > 0 else math.inf

    def priority(self, view: ClusterView, job: int) -> float:
        """Smaller goes first: the remaining time (shortest remaining time first)."""
        return self.remaining_time(view, job)

    def _sync(self, view: ClusterView) -> None:
        new, self._cursor = view.entered_since(self._cursor)
        for job in new:
            if view.status_of(job) == _PENDING:
                spec = view.job(job)
                key = (self.priority(view, job), spec.submit_time, job)
                self._ranked.add(job, key, (spec.min_gpus, spec.gpu_types))
                item = (view.queued_since(job), job)
                self._entered[job] = item[0]
                items = self._by_entry
                i = bisect.bisect_left(items, item, lo=self._head)
                if i == len(items) or items[i] != item:
                    items.insert(i, item)
            else:
                self._drop(job)
        if self._head > 64 and self._head * 2 > len(self._by_entry):
            self._by_entry = self._by_entry[self._head :]
            self._head = 0

    def _drop(self, job: int) -> None:
        """Forget a job that left the queue."""
        self._ranked.discard(job)
        self._entered.pop(job, None)

    def _aged(self, view: ClusterView) -> Iterator[int]:
        """The aged pending jobs, oldest first (then by id)."""
        limit = view.now - self.age_bound_s
        items, entered, status_of = self._by_entry, self._entered, view.status_of
        i = self._head
        while i < len(items):
            since, job = items[i]
            if since >= limit:
                return
            if entered.get(job) == since and status_of(job) != _PENDING:
                self._drop(job)
            if entered.get(job) != since:  # dead
                if i == self._head:
                    self._head += 1
                i += 1
                continue
            yield job
            i += 1

    def _rest(self, view: ClusterView, fits: Callable[[Size], bool]) -> Iterator[int]:
        """The pending jobs that are not aged, in rank order, but for the size classes that
        ``fits`` turns down (see :meth:`RankedQueue.walk`)."""
        limit = view.now - self.age_bound_s
        entered, status_of = self._entered, view.status_of
        for key in self._ranked.walk(fits):
            job = int(key[-1])
            if status_of(job) != _PENDING:
                self._drop(job)
                continue
            if entered[job] < limit:
                continue  # aged: it came first
            yield job
            if status_of(job) != _PENDING:
                self._drop(job)

    def oldest_aged(self, view: ClusterView) -> int | None:
        """The first aged job (:meth:`plan_order`'s first), or None."""
        self._sync(view)
        return next(self._aged(view), None)

    def rank(self, view: ClusterView) -> Iterator[int]:
        """Aged jobs first (one that cannot start blocks the rest), then the others in rank
        order; a job no placement could start now (its ``min_gpus`` above the free GPUs of every
        type it allows) is passed over instead of proposed, so the starts are the same."""
        self._sync(view)
        for job in self._aged(view):
            yield job
            if view.status_of(job) == _PENDING:
                return  # an aged job that cannot start blocks every job behind it
        room = Room(view)
        for job in self._rest(view, room.fits):
            yield job
            if view.status_of(job) != _PENDING:
                room.taken()

    def plan_order(self, view: ClusterView, fits: Callable[[Size], bool] = _anything) -> Iterator[tuple[int, bool]]:
        """(job, aged) in the order :meth:`rank` tries them, but for the jobs of the size
        classes (min GPUs, allowed types) that ``fits`` turns down when their turn comes: the
        caller says no only where planning the job would do nothing, and only ever takes room
        away while it walks."""
        self._sync(view)
        for job in self._aged(view):
            yield job, True
        for job in self._rest(view, fits):
            yield job, False


class AfsOrdering(ArylOrdering):
    """AFS's admission (ours, after Aryl's description of AFS: it "greedily prioritizes the jobs
    with the highest throughput per GPU"): pending jobs by decreasing throughput per GPU at their
    base demand (``view.rate`` on the base, packed, divided by the rate on one GPU and by the
    base; the best over the GPU types the job accepts), then submit time. AFS's greedy gives the
    next GPU to the highest marginal throughput per GPU, and a job's first GPUs are worth its
    throughput per GPU, more than most jobs' extra GPUs: so pending jobs come before flexible
    workers (the room component), in this order. The same age bound applies."""

    def priority(self, view: ClusterView, job: int) -> float:
        spec = view.job(job)
        need = self.placement.demand(spec)
        index = self.placement.index(view)
        best = 0.0
        for t, p in self.placement.keys(view, spec):
            one = view.rate(job, 1, 1, t)
            if one > 0:
                best = max(best, view.rate(job, need, packed_servers(need, index.sizes[t, p]), t) / one / need)
        return -best


def build(
    name: str,
    config: ArylConfig | None = None,
    elastic: bool = True,
    grouped: bool = True,
    afs: bool = False,
) -> ComposedScheduler:
    """An Aryl-family scheduler.

    :param elastic: elastic jobs start at their base and phase 2 scales them (off: "Basic").
    :param grouped: elastic jobs prefer loaned servers and keep their flexible workers off the
        servers of their base workers (off: the ``aryl-nogroup`` ablation).
    :param afs: AFS instead of Aryl: admission by throughput per GPU (:class:`AfsOrdering`) and
        phase 2 by AFS's greedy instead of the knapsack.
    """
    cfg = config or ArylConfig()
    placement = ArylPlacement(
        elastic=elastic, loaned_first=grouped and cfg.elastic_loaned_first, type_order=cfg.type_order
    )
    ordering = (AfsOrdering if afs else ArylOrdering)(placement, cfg.age_bound_s)
    scaling: Scaling = NoScaling()
    room: Preemption = NoPreemption()
    if elastic:
        kind = AfsScaling if afs else ArylScaling
        phase2 = kind(cfg, placement, ordering, group_flex=grouped)
        scaling = phase2
        if cfg.make_room or cfg.rescue:
            room = ArylRoom(placement, ordering, cfg.make_room, cfg.rescue, memo=phase2.memo)
    return ComposedScheduler(
        name,
        ordering=ordering,
        placement=placement,
        scaling=scaling,
        preemption=room,
        reclaimer=ArylReclaim(cfg.checkpoint_interval_s),
        borrows=True,
    )


def aryl(config: ArylConfig | None = None) -> ComposedScheduler:
    return build("aryl", config)


def aryl_basic(config: ArylConfig | None = None) -> ComposedScheduler:
    return build("aryl-basic", config, elastic=False)


def aryl_nogroup(config: ArylConfig | None = None) -> ComposedScheduler:
    return build("aryl-nogroup", config, grouped=False)


def afs(config: ArylConfig | None = None) -> ComposedScheduler:
    return build("afs", config, afs=True)


register("aryl", aryl, ArylConfig)
register("aryl-basic", aryl_basic, ArylConfig)
register("aryl-nogroup", aryl_nogroup, ArylConfig)
register("afs", afs, ArylConfig, needs="none")
