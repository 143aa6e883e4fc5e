"""Round-based execution shared by ``shockwave``, ``themis`` and ``maxmin``.

At a round boundary a policy hands over its candidates, most wanted first; this module picks the
round's set, places it, and yields the actions that get the cluster there:

1. **Choose** (ours): walk the candidates and take each whose GPUs fit in what is left of the
   budget (all GPUs of the placeable training servers, less those held by jobs checkpointing).
   Taking a later, smaller job when an earlier one does not fit makes the round
   work-conserving.
2. **Place** (ours): a target placement of the whole set, jobs in decreasing size; a job that
   runs now keeps its server when it still has room; any other job goes to the server where it
   displaces the fewest GPUs of running jobs not yet placed, then the tightest fit, then the
   lowest id. With power-of-two jobs of at most one server, decreasing sizes pack perfectly
   (every server's free GPUs stay a multiple of the next size), so a chosen set always fits on
   single servers: no job is spread over servers to squeeze it in. A job that still does not fit
   (other GPU types, odd sizes) is dropped and the rest of the candidates fill what is left.
3. **Act**: preempt the running jobs outside the set (not gracefully); move running jobs whose
   target differs from where they run, by ``Migrate`` when the target is free (no work lost),
   else by preempting and restarting them; start the chosen pending jobs, largest first.

Only training-pool servers are used: these policies never borrow.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from envs.sim.model import GpuType, Pool
from envs.sim.policy import Action, Alloc, ClusterView, JobStatus, Migrate, Preempt, Start


def _servers(view: ClusterView) -> dict[int, int]:
    """GPUs a round may use on each placeable training server: all of them, less what
    checkpointing (graceful preemption) jobs still hold."""
    cap: dict[int, int] = {}
    for s in view.servers:
        if s.pool != Pool.TRAINING or not view.placeable(s.server_id):
            continue
        held = sum(n for j, n in view.jobs_on(s.server_id) if view.status_of(j) == JobStatus.PREEMPTING)
        cap[s.server_id] = s.num_gpus - held
    return cap


def capacity(view: ClusterView) -> int:
    """GPUs a round can hand out."""
    return sum(_servers(view).values())


def _current(view: ClusterView, job: int) -> Alloc:
    st = view.state(job)
    return tuple(sorted(st.base))


def place_round(view: ClusterView, jobs: Sequence[int]) -> tuple[dict[int, Alloc], list[int]]:
    """Target placement of ``jobs`` (module docstring, step 2): (targets, dropped jobs)."""
    cap = _servers(view)
    gtype = {sid: view.servers[sid].gpu_type for sid in cap}
    running = {j for j in jobs if view.status_of(j) == JobStatus.RUNNING}
    where: dict[int, Alloc] = {j: _current(view, j) for j in running}
    waiting_on: dict[int, int] = dict.fromkeys(cap, 0)  # GPUs of running jobs not placed yet
    for j in running:
        for sid, n in where[j]:
            if sid in waiting_on:
                waiting_on[sid] += n
    pos = {j: i for i, j in enumerate(jobs)}
    order = sorted(jobs, key=lambda j: (-view.job(j).num_gpus, j not in running, pos[j]))
    targets: dict[int, Alloc] = {}
    dropped: list[int] = []
    for j in order:
        spec = view.job(j)
        g = spec.num_gpus
        cur = where.get(j, ())
        ok = [sid for sid in cap if spec.allows(gtype[sid])]
        alloc: Alloc | None = None
        if len(cur) == 1 and cur[0][0] in cap and cap[cur[0][0]] >= g and spec.allows(gtype[cur[0][0]]):
            alloc = ((cur[0][0], g),)
        else:
            fits = [sid for sid in ok if cap[sid] >= g]
            if fits:
                sid = min(fits, key=lambda s: (max(0, g - (cap[s] - waiting_on[s])), cap[s], s))
                alloc = ((sid, g),)
            else:
                alloc = _spread(ok, cap, gtype, g)
        for sid, n in cur:
            if sid in waiting_on:
                waiting_on[sid] -= n
        if alloc is None:
            dropped.append(j)
            continue
        for sid, n in alloc:
            cap[sid] -= n
        targets[j] = alloc
    return targets, dropped


def _spread(servers: list[int], cap: dict[int, int], gtype: dict[int, GpuType], g: int) -> Alloc | None:
    """A gang larger than any server's room: servers of one GPU type (the types in the order of
    their first server), those with the most room first."""
    for t in dict.fromkeys(gtype[s] for s in servers):
        order = sorted((s for s in servers if gtype[s] == t and cap[s] > 0), key=lambda s: (-cap[s], s))
        if sum(cap[s] for s in order) < g:
            continue
        out: list[tuple[int, int]] = []
        left = g
        for s in order:
            take = min(cap[s], left)
            out.append((s, take))
            left -= take
            if left == 0:
                return tuple(sorted(out))
    return None


def choose(view: ClusterView, candidates: Sequence[int]) -> tuple[dict[int, Alloc], list[int]]:
    """The round's set and its placement (steps 1 and 2): (targets, chosen in candidate order)."""
    budget = capacity(view)
    chosen: list[int] = []
    rest: list[int] = []
    for j in candidates:
        g = view.job(j).num_gpus
        if g <= budget:
            chosen.append(j)
            budget -= g
        else:
            rest.append(j)
    targets, dropped = place_round(view, chosen)
    if dropped:
        # fill what the dropped jobs left with later candidates, one at a time
        for j in rest:
            trial, miss = place_round(view, [*targets, j])
            if not miss:
                targets = trial
        chosen = [j for j in candidates if j in targets]
    return targets, chosen


def round_actions(view: ClusterView, candidates: Sequence[int]) -> Iterator[Action]:
    """Actions that run the round's set chosen from ``candidates`` (most wanted first)."""
    targets, chosen = choose(view, candidates)
    running = [j for j in view.running if view.status_of(j) == JobStatus.RUNNING]
    for j in running:
        if j not in targets:
            yield Preempt(j)
    moving = [j for j in running if j in targets and _current(view, j) != tuple(sorted(targets[j]))]
    progress = True
    while moving and progress:
        progress = False
        for j in list(moving):
            own = dict(view.state(j).base)
            if all(view.free(sid) + own.get(sid, 0) >= n for sid, n in targets[j]):
                yield Migrate(j, targets[j])
                moving.remove(j)
                progress = True
    for j in moving:
        yield Preempt(j)
    starts = [j for j in chosen if view.status_of(j) == JobStatus.PENDING]
    for j in sorted(starts, key=lambda j: -view.job(j).num_gpus):
        yield Start(j, targets[j])


class Leases:
    """Leases (ours): a started job keeps its GPUs for ``rounds`` consecutive rounds; a job that
    lost work when it was last preempted (its checkpoints are coarser than its stints) gets twice
    its previous lease, so on any checkpoint interval every job eventually runs past a checkpoint.

    Call :meth:`tick` once per round boundary, before choosing the round.
    """

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self._stint: dict[int, int] = {}  # rounds run since the job (re)started
        self._lease: dict[int, int] = {}  # the job's lease, if longer than ``rounds``
        self._work: dict[int, float] = {}  # work done when last seen running

    def tick(self, view: ClusterView) -> None:
        running = [j for j in view.running if view.status_of(j) == JobStatus.RUNNING]
        for j, w in list(self._work.items()):
            if view.status_of(j) == JobStatus.PENDING:
                if view.work_done(j) < w - 1e-9:
                    self._lease[j] = 2 * self._lease.get(j, self.rounds)
                del self._work[j]
            elif view.status_of(j) == JobStatus.DONE:
                del self._work[j]
                self._lease.pop(j, None)
        self._stint = {j: self._stint.get(j, 0) + 1 for j in running}
        for j in running:
            self._work[j] = view.work_done(j)

    def stint(self, job: int) -> int:
        return self._stint.get(job, 0)

    def held(self, jobs: Sequence[int]) -> list[int]:
        """The running ones among ``jobs`` still within their lease, in the given order."""
        return [j for j in jobs if 0 < self._stint.get(j, 0) < self._lease.get(j, self.rounds)]
