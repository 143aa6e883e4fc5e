"""Aryl's reclaim: which ``k`` loaned servers to give back to the inference cluster.

When a server goes back, the engine scales in the jobs that have only flexible workers on it and
preempts the jobs with base workers on it (at the reclaim deadline). The cost of a reclaim is the
number of distinct jobs preempted (Aryl section 4: "server preemption cost, greedily reduced").

:func:`choose_reclaim` (ours, following the paper) takes, in order:

1. servers that host nothing (lowest id first);
2. servers that host only flexible workers: scale-ins, no preemption (fewest jobs scaled in,
   then fewest flexible GPUs, then lowest id);
3. then greedily, one server at a time, the one with the lowest *marginal cost per server
   freed*: its base jobs not yet preempted, divided by the number of servers that this set of
   preemptions frees (every server whose base jobs would then all be preempted: a job spanning
   two servers costs one preemption for both), counting at most the servers still needed. Ties:
   more servers freed, then fewest GPU-hours lost (``loss``), then lowest id. A job already
   preempted costs nothing more, so servers whose base jobs are all preempted go next, free.

:func:`choose_reclaim_exhaustive` tries every set of ``k`` servers that holds all of the servers
with no base worker (adding one never costs anything) and returns the one with the fewest
preempted jobs, then fewest GPU-hours lost, then the lexicographically smallest ids. It is for
small instances (tests; the paper's "optimal" comparison).

:class:`ArylReclaim` is the ``Reclaim`` component: it describes the loaned servers from the view
and calls :func:`choose_reclaim`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envs.sim.policy import ClusterView, JobStatus, ServerStatus


@dataclass(frozen=True, slots=True)
class LoanedServer:
    """What sits on one loaned server.

    :param server_id: the server.
    :param base_jobs: jobs with base workers here (preempted if it goes back).
    :param flex_jobs: jobs with only flexible workers here (scaled in if it goes back).
    :param flex_gpus: GPUs those flexible workers hold.
    """

    server_id: int
    base_jobs: frozenset[int] = frozenset()
    flex_jobs: frozenset[int] = frozenset()
    flex_gpus: int = 0


def reclaim_cost(
    servers: Sequence[LoanedServer], chosen: Sequence[int], loss: Mapping[int, float] | None = None
) -> tuple[int, float]:
    """(jobs preempted, GPU-hours lost) if the servers ``chosen`` go back."""
    loss = loss or {}
    by_id = {s.server_id: s for s in servers}
    jobs: set[int] = set()
    for sid in chosen:
        jobs |= by_id[sid].base_jobs
    return len(jobs), sum(loss.get(j, 0.0) for j in jobs)


def _check(servers: Sequence[LoanedServer], k: int) -> None:
    if not 0 <= k <= len(servers):
        raise ValueError(f"cannot reclaim {k} of {len(servers)} loaned servers")
    if len({s.server_id for s in servers}) != len(servers):
        raise ValueError("server ids must be distinct")


def choose_reclaim(servers: Sequence[LoanedServer], k: int, loss: Mapping[int, float] | None = None) -> list[int]:
    """Aryl's greedy reclaim (see the module docstring): ``k`` server ids, in the order chosen.

    :param servers: the loaned servers that may go back.
    :param k: how many to give back.
    :param loss: GPU-hours a preemption of each job loses (tie-breaker; missing = 0).
    """
    _check(servers, k)
    loss = loss or {}
    empty = sorted(s.server_id for s in servers if not s.base_jobs and not s.flex_jobs)
    flex_only = sorted(
        (s for s in servers if not s.base_jobs and s.flex_jobs),
        key=lambda s: (len(s.flex_jobs), s.flex_gpus, s.server_id),
    )
    chosen = (empty + [s.server_id for s in flex_only])[:k]
    rest = {s.server_id: s for s in servers if s.base_jobs}
    hosts: dict[int, list[int]] = {}  # job -> servers (among `rest`) with its base workers
    for sid, s in rest.items():
        for j in s.base_jobs:
            hosts.setdefault(j, []).append(sid)
    preempted: set[int] = set()
    while len(chosen) < k:
        need = k - len(chosen)
        best: tuple[float, int, float, int] | None = None
        for sid, s in rest.items():
            new = s.base_jobs - preempted
            if not new:
                key = (0.0, -1, 0.0, sid)
            else:
                after = preempted | new
                freed = {x for j in new for x in hosts[j] if rest[x].base_jobs <= after}
                gain = min(len(freed), need)
                key = (len(new) / gain, -gain, sum(loss.get(j, 0.0) for j in new), sid)
            if best is None or key < best:
                best = key
        assert best is not None
        sid = best[3]
        preempted |= rest.pop(sid).base_jobs
        chosen.append(sid)
    return chosen


def choose_reclaim_exhaustive(
    servers: Sequence[LoanedServer], k: int, loss: Mapping[int, float] | None = None
) -> list[int]:
    """The optimal reclaim by enumeration: fewest jobs preempted, then fewest GPU-hours lost,
    then the smallest sorted ids. Exponential: for small instances only."""
    _check(servers, k)
    loss = loss or {}
    free_servers = sorted(
        (s for s in servers if not s.base_jobs), key=lambda s: (len(s.flex_jobs), s.flex_gpus, s.server_id)
    )
    free = [s.server_id for s in free_servers]
    if k <= len(free):  # no preemption; the greedy's order among them
        return sorted(free[:k])
    based = sorted((s for s in servers if s.base_jobs), key=lambda s: s.server_id)
    best: tuple[int, float, tuple[int, ...]] | None = None
    for combo in itertools.combinations(based, k - len(free)):
        jobs = frozenset().union(*(s.base_jobs for s in combo))
        key = (len(jobs), sum(loss.get(j, 0.0) for j in jobs), tuple(s.server_id for s in combo))
        if best is None or key < best:
            best = key
    assert best is not None
    return sorted(free + list(best[2]))


@dataclass
class ArylReclaim:
    """``Reclaim`` component: :func:`choose_reclaim` over the view's loaned servers.

    Jobs whose base workers already sit on a server being reclaimed will be preempted anyway and
    cost nothing more; jobs checkpointing after a graceful preemption cost nothing.
    GPU-hours lost by preempting a job (ours): its GPUs x the seconds it has made progress since
    it last (re)started, at most ``checkpoint_interval_s``.

    :param checkpoint_interval_s: the policy's estimate of the checkpoint interval.
    """

    checkpoint_interval_s: float = 1800.0

    def describe(self, view: ClusterView) -> tuple[list[LoanedServer], dict[int, float]]:
        """The loaned servers and the loss of preempting each job on them."""
        allocation = view.allocation  # (the parts of view.state read here, without the snapshot)
        doomed = {
            j for s in view.reclaiming_servers() for j, _ in view.jobs_on(s) if any(b == s for b, _ in allocation(j)[2])
        }
        out: list[LoanedServer] = []
        loss: dict[int, float] = {}
        for sid in view.loaned_servers():
            base: set[int] = set()
            flex: set[int] = set()
            flex_gpus = 0
            for j, n in view.jobs_on(sid):
                status, _, job_base, _ = allocation(j)
                if status != JobStatus.RUNNING or j in doomed:
                    continue
                if any(b == sid for b, _ in job_base):
                    base.add(j)
                    if j not in loss:
                        ran = max(0.0, view.now - view.restarting_until(j))
                        loss[j] = view.workers(j) * min(ran, self.checkpoint_interval_s) / 3600.0
                else:
                    flex.add(j)
                    flex_gpus += n
            out.append(LoanedServer(sid, frozenset(base), frozenset(flex), flex_gpus))
        return out, loss

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        servers, loss = self.describe(view)
        assert all(view.server_status(s.server_id) == ServerStatus.LOANED for s in servers)
        return choose_reclaim(servers, k, loss)
