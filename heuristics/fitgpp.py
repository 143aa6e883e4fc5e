"""FitGpp (Yabuuchi, Taniwaki, Omura, OpML'19; arXiv 1902.01613) and its comparison policies.

Trial-and-error (TE) jobs are small experiments a user watches and must start fast; best-effort
(BE) jobs are large and tolerate delay. All three policies here share one machinery and differ
only in which BE jobs they preempt (the *victim choice*):

- ``fitgpp``: the minimal preemption set with the lowest score
  ``score(server, P) = s * max_{b in P} GP_b / GP_max + (1 - s) * overfreed(server, P) / capacity``
  (the paper's idea, "preempt the BE jobs that can be resumed without much delay", in the
  normalised form of ALGORITHMS.md; the paper's own scale of ``s`` differs).
- ``lrtp``: the minimal set holding the BE jobs with the longest remaining time (an oracle: it
  reads the remaining work, which FitGpp does not need).
- ``rand``: a minimal set drawn uniformly at random from the policy's own generator.

The shared machinery:

1. **Queue**: TE jobs ahead of BE jobs; first come, first served within a class, by submit time
   (a preempted BE job goes back to its original place: (ours)). Head-of-line blocking as in
   ``fifo``: the first job that can be neither started nor served by preemption stops the walk.
2. **Start**: a job that fits the GPUs no reservation claims starts at once, consolidated like
   ``fifo``'s placement (one server by best fit if it can, else spread, most free first).
3. **Preemption**: a TE job that does not fit, and asks for at most one server's GPUs, looks
   at each placeable server allowing its GPU type. ``uncommitted(server)`` = free GPUs + GPUs
   held by jobs checkpointing there - GPUs reserved there. If some server's uncommitted GPUs
   already cover the job, it waits for them without preempting anything (the best-fitting such
   server, lowest id on ties: (ours)). Otherwise the candidates are the BE jobs running on a
   server (not already checkpointing) preempted fewer than ``max_preemptions`` times, and the
   choices are the *minimal* sets ``P`` of candidates on ONE server that free enough:
   ``uncommitted + sum(GPUs of P there) >= need``, and no proper subset does
   (``overfreed = uncommitted + sum - need``). A job spread over several servers frees only its
   GPUs on this server towards the need (its other GPUs free up for anyone: (ours)).
4. **Reservation** (ours): the TE job reserves ``need`` GPUs on the chosen server and the victims
   are preempted gracefully (each keeps its GPUs for its grace period while it checkpoints, then
   re-queues). Other jobs may use only ``min(free, free + checkpointing - reserved)`` GPUs of
   that server, so the GPUs the victims free go to this TE job. It starts at the first decision
   point at which all its victims have released their GPUs and the server has ``need`` free:
   exactly when the slowest victim's grace period ends.
5. **Starvation bound**: a BE job preempted ``max_preemptions`` times is no longer a candidate.
   TE jobs are never preempted.

Where the paper is silent (ours): ``GP_max`` is the largest grace period among the candidate BE
jobs of this decision, over all servers (a score term is 0 when it is 0); ``capacity`` is the
server's GPU count; ties in score go to fewer victims, then the lower server id, then the lower
victim ids. A TE job asking for more GPUs than any one server has is never served by preemption:
it keeps its place at the head of the queue and waits for free GPUs (``fifo``'s behaviour).
Only training servers are used (the policies do not borrow).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Protocol

import numpy as np

from envs.sim.model import JobClass, JobSpec, Pool
from envs.sim.policy import (
    Action,
    Alloc,
    ClusterView,
    FewestJobsReclaim,
    JobStatus,
    Preempt,
    Start,
)
from envs.sim.settings import Choice, Num, Settings
from heuristics.common import TYPE_ORDERS, SortedQueue, pack, types_for
from heuristics.registry import register

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class PreemptionConfig(Settings):
    """Settings shared by ``fitgpp``, ``lrtp`` and ``rand``.

    :param max_preemptions: a BE job preempted this many times is no longer a candidate
        (FitGpp's starvation bound); 0 turns preemption off (TE jobs then only jump the queue).
    :param type_order: the order of the GPU types a job allows (``heuristics.common.TYPE_ORDERS``).
    """

    max_preemptions: Annotated[int, Num(ge=0)] = 3
    type_order: Annotated[str, Choice(TYPE_ORDERS)] = "fastest"


@dataclass(frozen=True)
class FitGppConfig(PreemptionConfig):
    """Settings of ``fitgpp``.

    :param max_preemptions: a BE job preempted this many times is no longer a candidate.
    :param s: weight of the grace-period term against the over-freed term of the score, in
        [0, 1]: 1 picks the sets that resume fastest, 0 the ones that waste the fewest GPUs.
    """

    s: Annotated[float, Num(ge=0, le=1)] = 0.5


# ----------------------------------------------------------------------------- candidate sets
@dataclass(frozen=True, slots=True)
class Candidate:
    """One way to serve a TE job: preempt ``victims`` (job ids, ascending) on ``server``.

    :param server: the server the TE job will run on.
    :param victims: the BE jobs to preempt.
    :param freed: GPUs the victims hold on ``server``.
    :param overfreed: GPUs freed beyond the need: ``uncommitted + freed - need``.
    :param max_grace: the largest grace period among the victims (how long the TE job waits).
    :param capacity: the server's GPU count.
    """

    server: int
    victims: tuple[int, ...]
    freed: int
    overfreed: int
    max_grace: float
    capacity: int


def minimal_sets(deficit: int, sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """Index sets ``P`` of ``sizes`` with ``sum(P) >= deficit`` of which no proper subset suffices.

    Sizes are positive, so ``P`` is minimal iff dropping its smallest member falls short. The
    sets come in increasing bitmask order (index 0 is the lowest bit). ``[()]`` if
    ``deficit <= 0``. Exhaustive: 2^len(sizes) subsets (at most 256 on an 8-GPU server).
    """
    if deficit <= 0:
        return [()]
    n = len(sizes)
    out: list[tuple[int, ...]] = []
    for mask in range(1, 1 << n):
        members = tuple(i for i in range(n) if mask >> i & 1)
        total = sum(sizes[i] for i in members)
        if total >= deficit and total - min(sizes[i] for i in members) < deficit:
            out.append(members)
    return out


def fitgpp_score(c: Candidate, s: float, gp_max: float) -> float:
    """``s * max GP / GP_max + (1 - s) * overfreed / capacity`` (lower is better)."""
    gp = c.max_grace / gp_max if gp_max > 0.0 else 0.0
    return s * gp + (1.0 - s) * c.overfreed / c.capacity


class VictimChoice(Protocol):
    """Picks one of the candidate sets (the only part in which the three policies differ)."""

    def choose(self, view: ClusterView, candidates: Sequence[Candidate], gp_max: float) -> Candidate: ...


@dataclass
class FitGppChoice:
    """The lowest score; ties: fewer victims, lower server id, lower victim ids."""

    s: float

    def choose(self, view: ClusterView, candidates: Sequence[Candidate], gp_max: float) -> Candidate:
        return min(candidates, key=lambda c: (fitgpp_score(c, self.s, gp_max), len(c.victims), c.server, c.victims))


class LrtpChoice:
    """The set whose victims have the longest remaining times: compared by their remaining times
    sorted longest first, lexicographically (so the set holding the longest-remaining job wins,
    and a set that is a prefix of another wins over it); ties: lower server id, lower ids.
    Remaining time = remaining work, i.e. seconds alone on the requested GPUs."""

    def choose(self, view: ClusterView, candidates: Sequence[Candidate], gp_max: float) -> Candidate:
        remaining: dict[int, float] = {}

        def key(c: Candidate) -> tuple[tuple[float, ...], int, tuple[int, ...]]:
            for b in c.victims:
                if b not in remaining:
                    remaining[b] = view.state(b).remaining_work
            return (tuple(sorted(-remaining[b] for b in c.victims)), c.server, c.victims)

        return min(candidates, key=key)


@dataclass
class RandChoice:
    """A candidate drawn uniformly (``rng.integers``) from the list in its order: by server id,
    then by the bitmask order of :func:`minimal_sets` over the server's candidates sorted by id."""

    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def choose(self, view: ClusterView, candidates: Sequence[Candidate], gp_max: float) -> Candidate:
        return candidates[int(self.rng.integers(len(candidates)))]


# ----------------------------------------------------------------------------- the policy
@dataclass(frozen=True, slots=True)
class Reservation:
    """GPUs promised to a TE job: ``gpus`` on ``server`` once none of ``waits_for`` checkpoints."""

    server: int
    gpus: int
    waits_for: tuple[int, ...]


def _class_then_submit(view: ClusterView, job: int) -> tuple[float, ...]:
    spec = view.job(job)
    return (float(spec.job_class == JobClass.BE), spec.submit_time, job)


class TePreemptive:
    """The shared TE-first, preempt-for-TE scheduler; ``choice`` picks the victims.

    :param name: registry name (``fitgpp``, ``lrtp``, ``rand``).
    :param choice: the victim choice.
    :param max_preemptions: starvation bound (see :class:`PreemptionConfig`).
    """

    borrows = False
    round_s: float | None = None

    def __init__(self, name: str, choice: VictimChoice, max_preemptions: int, type_order: str = "fastest") -> None:
        self.name = name
        self.choice = choice
        self.max_preemptions = max_preemptions
        self.type_order = type_order
        self._queue = SortedQueue(_class_then_submit)
        self._res: dict[int, Reservation] = {}
        self._reclaim = FewestJobsReclaim()

    @property
    def reservations(self) -> dict[int, Reservation]:
        """TE job -> its reservation (a copy)."""
        return dict(self._res)

    def use_rng(self, rng: np.random.Generator) -> None:
        """Hand the run's policy stream to a randomised victim choice."""
        if isinstance(self.choice, RandChoice):
            self.choice.rng = rng

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Iterator[Action]:
        self._queue.sync(view)
        yield from self._start_ready(view)
        for job in self._queue.walk(view):
            if job in self._res:
                continue  # waiting for its victims
            spec = view.job(job)
            alloc = self._fit(view, spec)
            if alloc is not None:
                yield Start(job, alloc)
                continue
            if spec.job_class != JobClass.TE:
                return
            plan = self._plan(view, spec)
            if plan is None:
                return
            self._res[job] = plan[0]
            for victim in plan[1]:
                yield Preempt(victim, graceful=True)
            # a victim with no grace period is re-queued at once, inside this decision; BE keys
            # sort after this TE job, so taking it in does not disturb the walk
            self._queue.sync(view)
            yield from self._start_ready(view, only=job)

    def _start_ready(self, view: ClusterView, only: int | None = None) -> Iterator[Action]:
        """Start the TE jobs whose victims have released their GPUs (TE queue order)."""
        for job in sorted(self._res, key=lambda j: _class_then_submit(view, j)):
            if only is not None and job != only:
                continue
            r = self._res[job]
            if not view.placeable(r.server):
                logger.debug("[t=%.1f] job %d loses its reservation on server %d", view.now, job, r.server)
                del self._res[job]
                continue
            if r.waits_for:
                # forget the victims that have released (one may be preempted again later,
                # for another TE job: that second grace period is not this job's to wait for)
                left = tuple(v for v in r.waits_for if view.status_of(v) == JobStatus.PREEMPTING)
                if left != r.waits_for:
                    r = self._res[job] = dataclasses.replace(r, waits_for=left)
                if left:
                    continue
            if view.free(r.server) >= r.gpus:
                del self._res[job]
                yield Start(job, ((r.server, r.gpus),))

    # ------------------------------------------------------------------ capacity
    def _checkpointing(self, view: ClusterView, server: int) -> list[tuple[int, int]]:
        return [(j, g) for j, g in view.jobs_on(server) if view.status_of(j) == JobStatus.PREEMPTING]

    def _reserved(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for r in self._res.values():
            out[r.server] = out.get(r.server, 0) + r.gpus
        return out

    def _fit(self, view: ClusterView, spec: JobSpec) -> Alloc | None:
        """Where ``spec`` starts now on GPUs no reservation claims (``fifo``'s placement)."""
        reserved = self._reserved()
        if not reserved:
            return pack(view, spec, spec.num_gpus, type_order=self.type_order)
        usable = {}
        for sid, gpus in reserved.items():
            free = view.free(sid)
            held = sum(g for _, g in self._checkpointing(view, sid))
            usable[sid] = max(0, min(free, free + held - gpus))
        return _pack_usable(view, spec, spec.num_gpus, usable, self.type_order)

    def _plan(self, view: ClusterView, spec: JobSpec) -> tuple[Reservation, tuple[int, ...]] | None:
        """The reservation and victims that serve TE job ``spec``, or ``None``."""
        need = spec.num_gpus
        reserved = self._reserved()
        waiting: list[tuple[int, int, tuple[int, ...]]] = []  # (uncommitted, server, checkpointing)
        options: list[tuple[int, int, int, list[tuple[int, int, float]]]] = []
        for sid, srv in enumerate(view.servers):
            if srv.pool != Pool.TRAINING or srv.num_gpus < need or not view.placeable(sid):
                continue
            if not spec.allows(srv.gpu_type):
                continue
            ckpt = self._checkpointing(view, sid)
            uncommitted = view.free(sid) + sum(g for _, g in ckpt) - reserved.get(sid, 0)
            if uncommitted >= need:
                waiting.append((uncommitted, sid, tuple(j for j, _ in ckpt)))
                continue
            cands = [
                (j, g, view.job(j).grace_period)
                for j, g in sorted(view.jobs_on(sid))
                if view.status_of(j) == JobStatus.RUNNING
                and view.job(j).job_class == JobClass.BE
                and view.state(j).preemptions < self.max_preemptions
            ]
            if cands:
                options.append((sid, srv.num_gpus, uncommitted, cands))
        if waiting:
            _, sid, ckpt_jobs = min(waiting)
            return Reservation(sid, need, ckpt_jobs), ()
        candidates: list[Candidate] = []
        gp_max = max((gp for *_, cands in options for _, _, gp in cands), default=0.0)
        for sid, capacity, uncommitted, cands in options:
            for members in minimal_sets(need - uncommitted, [g for _, g, _ in cands]):
                freed = sum(cands[i][1] for i in members)
                candidates.append(
                    Candidate(
                        server=sid,
                        victims=tuple(cands[i][0] for i in members),
                        freed=freed,
                        overfreed=uncommitted + freed - need,
                        max_grace=max(cands[i][2] for i in members),
                        capacity=capacity,
                    )
                )
        if not candidates:
            return None
        c = self.choice.choose(view, candidates, gp_max)
        logger.debug("[t=%.1f] %s preempts %s on server %d", view.now, self.name, c.victims, c.server)
        return Reservation(c.server, need, c.victims), c.victims


def _pack_usable(view: ClusterView, spec: JobSpec, gpus: int, usable: dict[int, int], type_order: str) -> Alloc | None:
    """``heuristics.common.pack`` on training servers, with ``usable`` overriding some servers'
    free GPUs: one server by best fit (fewest usable that suffice, lowest id), else spread over
    the servers with the most usable GPUs, the last one by best fit for the remainder."""
    pool = Pool.TRAINING
    for tname in types_for(view, spec, pool, gpus, type_order):
        frees = [(usable.get(s, view.free(s)), s) for s in view.servers_by_free(tname, pool)]
        frees = sorted(((f, s) for f, s in frees if f > 0), key=lambda x: (-x[0], x[1]))
        if sum(f for f, _ in frees) < gpus:
            continue
        fits = [(f, s) for f, s in frees if f >= gpus]
        if fits:
            return ((min(fits)[1], gpus),)
        out: list[tuple[int, int]] = []
        left = gpus
        for i, (f, s) in enumerate(frees):
            if f >= left:
                # the tightest of the remaining servers that holds the remainder (as ``pack``)
                j = i
                while j + 1 < len(frees) and frees[j + 1][0] >= left:
                    j += 1
                out.append((frees[j][1], left))
                return tuple(out)
            out.append((s, f))
            left -= f
    return None


# ----------------------------------------------------------------------------- factories
def fitgpp(config: FitGppConfig | None = None) -> TePreemptive:
    c = config or FitGppConfig()
    return TePreemptive("fitgpp", FitGppChoice(c.s), c.max_preemptions, c.type_order)


def lrtp(config: PreemptionConfig | None = None) -> TePreemptive:
    c = config or PreemptionConfig()
    return TePreemptive("lrtp", LrtpChoice(), c.max_preemptions, c.type_order)


def rand(config: PreemptionConfig | None = None) -> TePreemptive:
    c = config or PreemptionConfig()
    return TePreemptive("rand", RandChoice(), c.max_preemptions, c.type_order)


register("fitgpp", fitgpp, FitGppConfig, needs="none")
register("lrtp", lrtp, PreemptionConfig)
register("rand", rand, PreemptionConfig, needs="none")

__all__ = [
    "Candidate",
    "FitGppChoice",
    "FitGppConfig",
    "LrtpChoice",
    "PreemptionConfig",
    "RandChoice",
    "Reservation",
    "TePreemptive",
    "VictimChoice",
    "fitgpp",
    "fitgpp_score",
    "lrtp",
    "minimal_sets",
    "rand",
]
