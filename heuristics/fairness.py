"""Fair-sharing comparators of Shockwave: ``themis`` and ``maxmin``. Both are round based and
preemptive, act only at round boundaries, and run a round with the same machinery as
``shockwave`` (:mod:`heuristics.shockwave_rounds`: candidates most wanted first, a
work-conserving set, consolidated placement, non-graceful preemption of the rest).

``themis`` (Themis, Mahajan et al., NSDI'20, finish-time fairness; ours, simplified): Themis
auctions GPUs at lease expiry among the jobs whose finish-time fairness
``rho = T_shared / T_isolated`` is worst, with partial allocations. Ours: every round the jobs
are ranked by their current estimate, worst first, and take GPUs in that order::

    rho_hat_j = (now - submit_j + rem_j) / (T_iso_j * max(1, N / G))

with ``rem_j`` and ``T_iso_j`` the remaining and whole run time at the job's *current* speed
(work left and total work over the multiplier last seen; 1 before it first runs), ``N`` jobs in
the system and ``G`` GPUs. Like Themis, it reacts to a speed change only once it is seen and
assumes the current speed lasts.

``maxmin`` (Gavel's max-min fairness over normalised throughput, Narayanan et al., OSDI'20;
realised as time slicing, ours): every round the jobs with the least normalised throughput so
far run: ``work_done_j / (now - submit_j)``, the work done (in seconds at the job's initial
batch on its requested GPUs) per second in the system; ties (e.g. new jobs at 0) by submit time.
Gavel, unaware of dynamic adaptation, measures throughput at the profiled batch: a job in a
larger-batch regime does more work per round and so looks better served.

``themis --set policy.allocation=shares`` is Themis as Shockwave's repository runs it (Gavel's
``FinishTimeFairnessPolicyWithPerf``, realised by Gavel's round priorities; :class:`Themis`):
time shares for all jobs, recomputed only when jobs arrive or finish, instead of the worst job
first every round. ``benchmarks/reproduce.py`` runs both on Shockwave's reference mix.

What each policy knows (the audit of issue 20; ``dynamic`` runs at ``information.level=clairvoyant``,
as Shockwave's simulator, and a policy reads only what the view reveals at that level):

==========  ==========================================  ==========================================
policy      ours                                        Shockwave's repository
==========  ==========================================  ==========================================
themis      remaining work: exact (``remaining_work``,  remaining work: exact (``num_steps_
            needs ``estimate``: an estimate at that     remaining``); throughput: the profiled one
            level); future throughput: none, the speed  at the job's current batch, assumed to
            last seen is assumed to last; lease costs:  last; isolated time at an equal share;
            none in its estimate (leases of            lease costs: none in its objective (the
            ``min_run_rounds``; each restart pays the   simulator charges 20 s per resume)
            engine's overhead)
maxmin      remaining work: none (needs ``none``:       Gavel's max-min fairness over profiled
            work done and age only); throughput: work   throughput at the initial batch, unaware
            at the initial batch (unaware of            of adaptation; no remaining work
            adaptation); lease costs: none
shockwave   remaining work: Dirichlet estimate over     the same estimate (``JobMetaData``, as
            batch-size regimes from observed progress   ``heuristics/shockwave_estimate.py``
            (never the phases); lease costs: leases,    documents it)
            not in the plan
==========  ==========================================  ==========================================

So ours and the repository's know the same; what differs is ``themis``'s default allocation.

Both keep a started job for ``min_run_rounds`` rounds (a lease, ours, as Themis' leases and as
``shockwave``'s): without it time slicing restarts jobs every round, and in our engine each start
costs the restart overhead. Neither reads ``JobSpec.duration`` or ``JobSpec.speed_phases``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus
from envs.sim.settings import Choice, Num, Settings
from heuristics.registry import register
from heuristics.shockwave_estimate import RegimeObserver
from heuristics.shockwave_rounds import Leases, capacity, round_actions


@dataclass(frozen=True)
class FairConfig(Settings):
    """:param round_s: seconds per round (Shockwave's simulator: 120 s for every policy).
    :param min_run_rounds: a started job keeps its GPUs for at least this many consecutive rounds
        (a lease, as Themis' and as ``shockwave``'s; ours: each start pays the restart overhead;
        doubled for a job each time a preemption cost it work, see ``shockwave_rounds.Leases``)."""

    round_s: Annotated[float, Num(ge=1)] = 120.0
    min_run_rounds: Annotated[int, Num(ge=1)] = 3


@dataclass(frozen=True)
class ThemisConfig(FairConfig):
    """:param allocation: how ``themis`` shares the GPUs: ``rank`` (every round, the worst
    current estimate first) or ``shares`` (the repository's ``FinishTimeFairness`` policy
    realised as Gavel rounds: see :class:`Themis`)."""

    allocation: Annotated[str, Choice(("rank", "shares"))] = "rank"


def _leased_first(leases: Leases, ranked: list[int]) -> list[int]:
    held = leases.held(ranked)
    taken = set(held)
    return held + [j for j in ranked if j not in taken]


def _active(view: ClusterView) -> list[int]:
    return [*view.pending, *(j for j in view.running if view.status_of(j) == JobStatus.RUNNING)]


@dataclass
class Themis:
    """``allocation=rank``: the module docstring's ranking, every round.

    ``allocation=shares`` (as Shockwave's repository runs Themis: Gavel's
    ``FinishTimeFairnessPolicyWithPerf`` and Gavel's round mechanism). When the set of active jobs
    changes (an arrival or a finish), each job gets a time share ``x_j`` in (0, 1] that minimises
    the largest predicted ``(t_j + rem_j / x_j) / (C_j + rem_j / iso_j)``, subject to
    ``sum_j g_j x_j <= G``: ``t_j`` the time since submit, ``rem_j`` the remaining time at the
    current speed, ``iso_j = min(1, G / (N g_j))`` the equal share of the isolated run and ``C_j``
    its isolated time so far (the work done, divided by that share, summed since submit). The
    minimum is found by bisection on the ratio (each ``x_j`` follows from it in closed form).
    Each round the jobs run in the order of Gavel's priority: share over the share of the rounds
    since the allocation that the job ran (both counts start at half a round, as Gavel's), so
    that over time each job runs its share. Leases and the work-conserving round are as for ``rank``."""

    config: ThemisConfig = field(default_factory=ThemisConfig)
    name: str = "themis"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self.observer = RegimeObserver()
        self._leases = Leases(self.config.min_run_rounds)
        self._reclaim = FewestJobsReclaim()
        self._shares: dict[int, float] = {}
        self._since = 0  # rounds since the shares were computed
        self._ran: dict[int, int] = {}  # rounds each job ran since then
        self._iso_done: dict[int, float] = {}  # C_j: isolated seconds of the work done so far
        self._seen_work: dict[int, float] = {}
        self._iso_share: dict[int, float] = {}

    def rho_hat(self, view: ClusterView, job: int, contention: float) -> float:
        st = view.state(job)
        m = self.observer.belief(job).mult
        rem = st.remaining_work / m
        iso = max(st.work_total / m, 1e-9)
        return (view.now - view.job(job).submit_time + rem) / (iso * contention)

    def decide(self, view: ClusterView) -> Iterator[Action]:
        self.observer.observe(view)
        if not view.round_tick:
            return
        self._leases.tick(view)
        active = _active(view)
        if not active:
            return
        if self.config.allocation == "shares":
            ranked = self._by_share(view, active)
        else:
            contention = max(1.0, len(active) / max(1, capacity(view)))
            rho = {j: self.rho_hat(view, j, contention) for j in active}
            ranked = sorted(active, key=lambda j: (-rho[j], view.job(j).submit_time, j))
        yield from round_actions(view, _leased_first(self._leases, ranked))

    def _by_share(self, view: ClusterView, active: list[int]) -> list[int]:
        gpus = max(1, capacity(view))
        for j in active:  # C_j: the work done since last seen, at the isolated share then
            done = view.work_done(j)
            before = self._seen_work.get(j, 0.0)
            if j in self._iso_share and done > before:
                self._iso_done[j] = self._iso_done.get(j, 0.0) + (done - before) / self._iso_share[j]
            self._seen_work[j] = done
        if set(active) != set(self._shares):
            self._shares = self.shares(view, active, gpus)
            self._since, self._ran = 0, {}
        for j in active:
            self._iso_share[j] = min(1.0, gpus / (len(active) * view.job(j).num_gpus))
        self._since += 1
        running = {j for j in active if view.status_of(j) == JobStatus.RUNNING}
        for j in running:
            self._ran[j] = self._ran.get(j, 0) + 1

        def priority(j: int) -> float:  # Gavel: every count starts at half a round
            return self._shares[j] * (self._since + 0.5) / (self._ran.get(j, 0) + 0.5)

        return sorted(active, key=lambda j: (-priority(j), view.job(j).submit_time, j))

    def shares(self, view: ClusterView, active: list[int], gpus: int) -> dict[int, float]:
        """The time shares that minimise the largest predicted finish-time fairness (class docstring)."""
        n = len(active)
        t, rem, iso, g = {}, {}, {}, {}
        for j in active:
            st = view.state(j)
            m = self.observer.belief(j).mult
            g[j] = view.job(j).num_gpus
            t[j] = view.now - view.job(j).submit_time
            rem[j] = max(st.remaining_work / m, 1e-9)
            share = min(1.0, gpus / (n * g[j]))
            iso[j] = self._iso_done.get(j, 0.0) + rem[j] / share

        def x(rho: float) -> dict[int, float]:
            return {j: min(1.0, rem[j] / max(rho * iso[j] - t[j], 1e-12)) for j in active}

        lo = max((t[j] + rem[j]) / iso[j] for j in active)  # every share 1 at most
        if sum(g[j] * v for j, v in x(lo).items()) <= gpus:
            return x(lo)
        hi = 2.0 * lo
        while sum(g[j] * v for j, v in x(hi).items()) > gpus:
            hi *= 2.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if sum(g[j] * v for j, v in x(mid).items()) <= gpus else (mid, hi)
        return x(hi)

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


@dataclass
class MaxMin:
    config: FairConfig = field(default_factory=FairConfig)
    name: str = "maxmin"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self._leases = Leases(self.config.min_run_rounds)
        self._reclaim = FewestJobsReclaim()

    @staticmethod
    def normalised_throughput(view: ClusterView, job: int) -> float:
        age = view.now - view.job(job).submit_time
        return view.work_done(job) / age if age > 0.0 else 0.0

    def decide(self, view: ClusterView) -> Iterator[Action]:
        if not view.round_tick:
            return
        self._leases.tick(view)
        active = _active(view)
        tput = {j: self.normalised_throughput(view, j) for j in active}
        ranked = sorted(active, key=lambda j: (tput[j], view.job(j).submit_time, j))
        yield from round_actions(view, _leased_first(self._leases, ranked))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def themis(config: ThemisConfig | None = None) -> Themis:
    return Themis(config or ThemisConfig())


def maxmin(config: FairConfig | None = None) -> MaxMin:
    return MaxMin(config or FairConfig())


register("themis", themis, ThemisConfig)
register("maxmin", maxmin, FairConfig, needs="none")
