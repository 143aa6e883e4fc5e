"""Gittins: a Gittins-index ordering and preemption over the durations of finished jobs.

Non-clairvoyant scheduling is optimal for mean response time in the M/G/1 queue when it serves
the job of highest Gittins index (Gittins; Aalto, Ayesta and Righter, Queueing Systems 2009), and
Tiresias (Gu et al., NSDI'19) uses such an index on attained GPU service where the distribution of
job durations is known. Here the distribution is that of the last ``window`` finished jobs' work
(a finish reveals a job's whole work at every information level, as qssf's history); a job's
attained work is what it has run. For a job that has run ``a`` seconds of work, among the
finished durations ``d_1 <= ... <= d_n`` above ``a``, serving it ``q = d_k - a`` more completes
it with probability ``k / n`` at an expected cost of ``E[min(D - a, q)]``; its index's inverse
is the least ``E[min(D - a, q)] / P(D - a <= q)`` over ``k``: the expected work per completion
of its best quantum. A job that has run longer than every finished one costs its own attained
work (it may run as long again); with no finish yet every job costs 0 (arrival order first).
Costs are weighted by the job's requested GPUs (GPU-seconds, as qssf's predicted service).

Pending jobs are ranked by cost, fixed when a job (re-)enters the queue, with backfill; every
``round_s`` the preemption rule of ``srtf`` acts on costs instead of revealed remaining times:
a pending job that does not fit takes the GPUs of running jobs on a type it allows, the costliest
first, each costing at least ``factor`` times it. It never reads a pending or running job's
duration, so it acts at every information level, ``none`` included: its ``earliest-finish``
start (``heuristics.common.STARTS``) reads a job's expected remaining work from the finished jobs'
durations (:class:`~heuristics.qssf.Residual`: the median of those of its user and template, or
user, or all, above its work done), for the job and for the running jobs it would wait on.

``gittins-eft``: ``gittins`` with ``start="earliest-finish"``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.policy import ClusterView, ComposedScheduler
from envs.sim.settings import Choice, Flag, Num
from heuristics.common import STARTS
from heuristics.qssf import DurationHistory, MedianWindow, Residual
from heuristics.registry import register
from heuristics.srtf import ShortestRemainingFirst, SrtfConfig, preemptive


@dataclass
class GittinsCost:
    """The inverse Gittins index of a job (see the module docstring), in GPU-seconds. ``groups``:
    over the durations of the first of the job's groups in that history ((user, template), then
    user) with one above its attained work, else over all jobs' last ``window``."""

    window: int = 200
    groups: DurationHistory | None = None
    _history: MedianWindow = field(init=False, repr=False)
    _cursor: int = field(default=0, init=False, repr=False)
    # per-GPU cost by (group, attained work), until the next finish changes the distributions:
    # most of a long queue has attained nothing, and a round asks again for every pending job
    _known: dict[tuple[tuple[str, ...], float], float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._history = MedianWindow(self.window)

    def _sync(self, view: ClusterView) -> None:
        done, self._cursor = view.finished_since(self._cursor)
        for job in done:
            self._history.add(view.work_done(job))
        if done:
            self._known.clear()

    def cost(self, view: ClusterView, job: int) -> float:
        self._sync(view)
        spec, attained = view.job(job), view.work_done(job)
        key: tuple[str, ...] = ()
        durations = self._history.ranked
        if self.groups is not None:
            self.groups.sync(view)
            for k, ranked in self.groups.windows(spec):
                if k and ranked[-1] > attained:
                    key, durations = k, ranked
                    break
        if not durations:
            return 0.0
        best = self._known.get((key, attained))
        if best is None:
            best = self._known[(key, attained)] = _per_gpu(durations, attained)
        return best * spec.num_gpus

    def key(self, view: ClusterView, job: int) -> tuple[float, ...]:
        return (self.cost(view, job), view.job(job).submit_time, job)


def _per_gpu(durations: list[float], attained: float) -> float:
    """The least expected work per completion over the quanta ending at ``durations`` (sorted)
    longer than ``attained``; ``attained`` itself (at least 1 s) when none is longer."""
    tail = durations[bisect.bisect_right(durations, attained) :]
    if not tail:
        return max(attained, 1.0)
    n, spent, best = len(tail), 0.0, float("inf")
    for k, d in enumerate(tail, start=1):  # the quantum that ends at the k-th longer duration
        q = d - attained
        spent += q
        per = (spent + (n - k) * q) / k
        if per < best:
            best = per
    return best


@dataclass(frozen=True)
class GittinsConfig(SrtfConfig):
    """Settings of ``gittins``: ``srtf``'s (``type_order``, ``elastic``, ``round_s``, ``factor``, a
    running job preempted for a pending one only if it costs at least ``factor`` times as much:
    2 was the best of 1.5, 2, 4 and no preemption on contention-none's training seeds 0-9), and

    :param window: finished jobs whose durations make the distribution.
    :param groups: the distribution of a job's own user and template where that group has a
        finished duration above its attained work (else its user's; QSSF's groups, the last 20
        finishes of each), else all jobs' (:class:`GittinsCost`)."""

    factor: Annotated[float, Num(gt=1)] = 2.0
    window: Annotated[int, Num(ge=1)] = 200
    groups: Annotated[bool, Flag()] = False


@dataclass(frozen=True)
class GittinsEftConfig(GittinsConfig):
    """Settings of ``gittins-eft``: ``gittins``', with the index over the job's own groups, a round
    of 1200 s and a ``factor`` of 1.25: the best of rounds of 600-2400 s and factors 1.1-2 on
    contention-none's training seeds 0-39 at its load (the figures: the README)."""

    round_s: Annotated[float, Num(ge=1)] = 1200.0
    factor: Annotated[float, Num(gt=1)] = 1.25
    groups: Annotated[bool, Flag()] = True
    start: Annotated[str, Choice(STARTS)] = "earliest-finish"


def gittins(config: GittinsConfig | None = None, name: str = "gittins") -> ComposedScheduler:
    c = config or GittinsConfig()
    history = DurationHistory()
    index = GittinsCost(c.window, history if c.groups else None)
    ordering = ShortestRemainingFirst(key=index.key, factor=c.factor, elastic=c.elastic, remaining=index.cost)
    return preemptive(name, ordering, c, Residual(history))


def gittins_eft(config: GittinsEftConfig | None = None) -> ComposedScheduler:
    """``gittins`` that starts a job only where that ends it no later, by the finished jobs'
    durations, than waiting for one server that runs it faster would."""
    return gittins(config or GittinsEftConfig(), "gittins-eft")


register("gittins", gittins, GittinsConfig, needs="none")
register("gittins-eft", gittins_eft, GittinsEftConfig, needs="none")
