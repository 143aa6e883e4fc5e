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

Both keep a started job for ``min_run_rounds`` rounds (a lease, ours, as Themis' leases and as
``shockwave``'s): without it time slicing restarts jobs every round, and in our engine each start
costs the restart overhead. Neither reads ``JobSpec.duration`` or ``JobSpec.speed_phases``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus
from envs.sim.settings import Num, Settings
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


def _leased_first(leases: Leases, ranked: list[int]) -> list[int]:
    held = leases.held(ranked)
    taken = set(held)
    return held + [j for j in ranked if j not in taken]


def _active(view: ClusterView) -> list[int]:
    return [*view.pending, *(j for j in view.running if view.status_of(j) == JobStatus.RUNNING)]


@dataclass
class Themis:
    config: FairConfig = field(default_factory=FairConfig)
    name: str = "themis"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self.observer = RegimeObserver()
        self._leases = Leases(self.config.min_run_rounds)
        self._reclaim = FewestJobsReclaim()

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
        contention = max(1.0, len(active) / max(1, capacity(view)))
        rho = {j: self.rho_hat(view, j, contention) for j in active}
        ranked = sorted(active, key=lambda j: (-rho[j], view.job(j).submit_time, j))
        yield from round_actions(view, _leased_first(self._leases, ranked))

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
        return view.state(job).work_done / age if age > 0.0 else 0.0

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


def themis(config: FairConfig | None = None) -> Themis:
    return Themis(config or FairConfig())


def maxmin(config: FairConfig | None = None) -> MaxMin:
    return MaxMin(config or FairConfig())


register("themis", themis, FairConfig)
register("maxmin", maxmin, FairConfig, needs="none")
