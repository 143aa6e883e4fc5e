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

``gittins-est``: ``gittins-eft`` where durations are estimated (information ``estimate``): each
finished duration ``d`` of a job's distribution is weighted by how likely the job's estimate ``e``
is were its work ``d`` (:class:`EstimateLikelihood`: ``ln e - ln d`` normal, its mean and spread
those of the finished jobs' own errors), so the index is over the job's posterior; its
``earliest-finish`` start reads the posterior's median above the work done. This is the Gittins
policy with per-job priors from size estimates (Scully, Grosof and Mitzenmacher, "Uniform bounds
for scheduling with job size estimates", ITCS 2022).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.model import JobSpec
from envs.sim.policy import ClusterView, ComposedScheduler
from envs.sim.settings import Choice, Flag, Num
from heuristics.common import STARTS
from heuristics.qssf import DurationHistory, MedianWindow, Residual
from heuristics.registry import register
from heuristics.srtf import ShortestRemainingFirst, SrtfConfig, preemptive


@dataclass
class EstimateLikelihood:
    """How likely a job's estimate is for each work it may have. The error ``ln(estimate / work)``
    is taken as normal, with the mean and standard deviation (at least ``floor``) of the last
    ``window`` finished jobs' errors: a finish reveals a job's work at every information level, and
    its estimate was shown from its arrival. With no finished job's error yet, every work is as
    likely (the index is gittins')."""

    window: int = 200
    floor: float = 0.05
    _errors: deque[float] = field(init=False, repr=False)
    _bias: float = field(default=0.0, init=False, repr=False)
    _spread: float = field(default=math.inf, init=False, repr=False)

    def __post_init__(self) -> None:
        self._errors = deque(maxlen=self.window)

    def learn(self, view: ClusterView, done: tuple[int, ...]) -> None:
        """Take in the errors of the jobs ``done`` (finished since the last call)."""
        for job in done:
            estimate, work = view.job(job).duration, view.work_done(job)
            if estimate > 0.0 and work > 0.0:  # False for nan (information none)
                self._errors.append(math.log(estimate / work))
        if done and self._errors:
            n = len(self._errors)
            self._bias = sum(self._errors) / n
            var = sum((x - self._bias) ** 2 for x in self._errors) / n
            self._spread = max(math.sqrt(var), self.floor)

    def weights(self, estimate: float, works: list[float]) -> list[float] | None:
        """The relative likelihood of ``estimate`` under each of ``works`` (the largest is 1), or
        None where it tells nothing (no estimate, or no error learned yet)."""
        if not works or not (estimate > 0.0) or math.isinf(self._spread):
            return None
        centre = math.log(estimate) - self._bias
        z = [((centre - math.log(w)) / self._spread) ** 2 for w in works]
        least = min(z)
        return [math.exp(-0.5 * (x - least)) for x in z]


@dataclass
class GittinsCost:
    """The inverse Gittins index of a job (see the module docstring), in GPU-seconds. ``groups``:
    over the durations of the first of the job's groups in that history ((user, template), then
    user) with one above its attained work, else over all jobs' last ``window``. ``likelihood``:
    each duration weighted by how likely the job's estimate is under it (``gittins-est``)."""

    window: int = 200
    groups: DurationHistory | None = None
    likelihood: EstimateLikelihood | None = None
    _history: MedianWindow = field(init=False, repr=False)
    _cursor: int = field(default=0, init=False, repr=False)
    # per-GPU cost by (group, attained work[, estimate]), until the next finish changes the distributions:
    # most of a long queue has attained nothing, and a round asks again for every pending job
    _known: dict[tuple[object, ...], float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._history = MedianWindow(self.window)

    def _sync(self, view: ClusterView) -> None:
        done, self._cursor = view.finished_since(self._cursor)
        for job in done:
            self._history.add(view.work_done(job))
        if done:
            self._known.clear()
            if self.likelihood is not None:
                self.likelihood.learn(view, done)

    def _distribution(self, view: ClusterView, spec: JobSpec, attained: float) -> tuple[tuple[str, ...], list[float]]:
        """The group the job's distribution is read from (``()``: all jobs) and its durations, sorted."""
        self._sync(view)
        if self.groups is not None:
            self.groups.sync(view)
            for k, ranked in self.groups.windows(spec):
                if k and ranked[-1] > attained:
                    return k, ranked
        return (), self._history.ranked

    def _weights(self, spec: JobSpec, tail: list[float]) -> list[float] | None:
        return None if self.likelihood is None else self.likelihood.weights(spec.duration, tail)

    def cost(self, view: ClusterView, job: int) -> float:
        spec, attained = view.job(job), view.work_done(job)
        key, durations = self._distribution(view, spec, attained)
        if not durations:
            return 0.0
        memo = (key, attained) if self.likelihood is None else (key, attained, spec.duration)
        best = self._known.get(memo)
        if best is None:
            tail = durations[bisect.bisect_right(durations, attained) :]
            best = self._known[memo] = _per_gpu(tail, attained, self._weights(spec, tail))
        return best * spec.num_gpus

    def residual(self, view: ClusterView, job: int) -> float:
        """The expected remaining work of ``job`` (``earliest-finish`` reads it): the weighted
        median of its distribution's durations above its work done, less that work; its work done
        (at least 1 s) where none is longer (it may run as long again); nan with no finish yet."""
        spec, attained = view.job(job), view.work_done(job)
        _, durations = self._distribution(view, spec, attained)
        if not durations:
            return math.nan
        tail = durations[bisect.bisect_right(durations, attained) :]
        if not tail:
            return max(attained, 1.0)
        weights = self._weights(spec, tail) or [1.0] * len(tail)
        half, acc = sum(weights) / 2.0, 0.0
        for d, w in zip(tail, weights, strict=True):
            acc += w
            if acc >= half:
                return d - attained
        return tail[-1] - attained

    def key(self, view: ClusterView, job: int) -> tuple[float, ...]:
        return (self.cost(view, job), view.job(job).submit_time, job)


def _per_gpu(tail: list[float], attained: float, weights: list[float] | None = None) -> float:
    """The least expected work per completion over the quanta ending at ``tail``, the durations
    (sorted) longer than ``attained``, each as likely as its weight (all alike if None);
    ``attained`` itself (at least 1 s) when none is longer."""
    if not tail:
        return max(attained, 1.0)
    if weights is None:
        weights = [1.0] * len(tail)
    total, done, spent, best = sum(weights), 0.0, 0.0, float("inf")
    for d, w in zip(tail, weights, strict=True):  # the quantum that ends at each longer duration
        q = d - attained
        done += w
        spent += w * q
        if done == 0.0:  # a weight too small to hold (the estimate is far from it)
            continue
        per = (spent + (total - done) * q) / done
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
        finishes of each), else all jobs' (:class:`GittinsCost`).
    :param estimates: weight each duration by how likely the job's estimate is under it
        (:class:`EstimateLikelihood`), and start by the median of that posterior
        (:meth:`GittinsCost.residual`)."""

    factor: Annotated[float, Num(gt=1)] = 2.0
    window: Annotated[int, Num(ge=1)] = 200
    groups: Annotated[bool, Flag()] = False
    estimates: Annotated[bool, Flag()] = False


@dataclass(frozen=True)
class GittinsEftConfig(GittinsConfig):
    """Settings of ``gittins-eft``: ``gittins``', with the index over the job's own groups, a round
    of 1200 s and a ``factor`` of 1.25: the best of rounds of 600-2400 s and factors 1.1-2 on
    contention-none's training seeds 0-39 at its load (the figures: the README)."""

    round_s: Annotated[float, Num(ge=1)] = 1200.0
    factor: Annotated[float, Num(gt=1)] = 1.25
    groups: Annotated[bool, Flag()] = True
    start: Annotated[str, Choice(STARTS)] = "earliest-finish"


@dataclass(frozen=True)
class GittinsEstConfig(GittinsEftConfig):
    """Settings of ``gittins-est``: ``gittins-eft``'s, reading the estimates, over all jobs' finished
    durations (no groups) and with a round of 3600 s: the best of groups on and off, factors
    1.25-3 and rounds of 600-3600 s on default-estimate's training seeds 0-39 (the figures: the
    README)."""

    round_s: Annotated[float, Num(ge=1)] = 3600.0
    groups: Annotated[bool, Flag()] = False
    estimates: Annotated[bool, Flag()] = True


def gittins(config: GittinsConfig | None = None, name: str = "gittins") -> ComposedScheduler:
    c = config or GittinsConfig()
    history = DurationHistory()
    likelihood = EstimateLikelihood(c.window) if c.estimates else None
    index = GittinsCost(c.window, history if c.groups else None, likelihood)
    ordering = ShortestRemainingFirst(key=index.key, factor=c.factor, elastic=c.elastic, remaining=index.cost)
    return preemptive(name, ordering, c, index.residual if c.estimates else Residual(history))


def gittins_eft(config: GittinsEftConfig | None = None) -> ComposedScheduler:
    """``gittins`` that starts a job only where that ends it no later, by the finished jobs'
    durations, than waiting for one server that runs it faster would."""
    return gittins(config or GittinsEftConfig(), "gittins-eft")


def gittins_est(config: GittinsEstConfig | None = None) -> ComposedScheduler:
    """``gittins-eft`` over each job's posterior given its estimate (the module docstring)."""
    return gittins(config or GittinsEstConfig(), "gittins-est")


register("gittins", gittins, GittinsConfig, needs="none")
register("gittins-eft", gittins_eft, GittinsEftConfig, needs="none")
register("gittins-est", gittins_est, GittinsEstConfig)
