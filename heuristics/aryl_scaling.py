"""Aryl's phase 2 (the flexible demand of elastic jobs as a multiple-choice knapsack) and the
room phase 1 takes back from it.

Flexible workers are second-class: the inelastic workload (inelastic jobs and elastic jobs'
base demands) is scheduled "first with all available resources" (Aryl section 5.1), and the
flexible demand gets what is left. Two components implement that around phase 1's starts:

:class:`ArylRoom` (the ``Preemption`` slot of :class:`~envs.sim.policy.ComposedScheduler`, which
acts before the starts; ours) does two things. First, an elastic job whose base workers sit on a
server being reclaimed is re-based onto the workers it keeps elsewhere (a ``Migrate``: one
restart, no work lost) instead of being preempted at the deadline: Aryl's "scaling-in ... reduces
the need of completely preempting the jobs" (section 2). Second, it plans phase 1 on a virtual
map where every flexible worker on a placeable server is lifted off, in phase 1's own order
(:class:`~heuristics.aryl.ArylOrdering`) and pool preferences. A job that fits the GPUs that are
really free takes those; one that fits its pool only with flexible GPUs takes them, and those
flexible workers are scaled in now (from the job with the most flexible GPUs on that server
first), so the starts that follow put it in its preferred pool instead of a less preferred one
(a T4 on loan rather than a V100 held by flexible workers). An aged job that does not fit even
so stops the plan (no room for the jobs behind it). A re-based job short of its base demand
takes free GPUs, or else flexible ones, the same way.

:class:`ArylScaling` (the ``Scaling`` slot, after the starts) re-plans the flexible workers of
every running elastic job on a virtual free map with all of them lifted off:

1. **The knapsack**, one per GPU type (a job's workers are all of one type: engine rule), over
   the elastic jobs whose base is on that type: capacity = the type's virtual free GPUs; job j is
   a group with options x = 1..(max_j - base_j) extra workers (x = 0 is "none"), weight x,
   value ``T_j(base) - T_j(base + x)`` where ``T_j(w)`` = remaining work / ``view.rate`` on w
   workers (Aryl section 5.2), minus the restart a change costs (ours, against churn: every
   option other than the job's current one loses ``churn_factor x`` the restart overhead the
   job would pay, ``restart_base_s + restart_per_gpu_s x workers`` less any restart still under
   way; a job whose flexible workers sit on a server being reclaimed pays nothing extra, it
   restarts at the deadline anyway). So an allocation changes only where the JCT gained is worth
   more than the restarts. Values are relative to x = 0. Solved exactly by
   :func:`~heuristics.knapsack.solve_mckp`. While an aged job waits (phase 1 blocked), flexible
   workers on the GPU types it accepts may move but not grow, so freed GPUs wait for it.
2. **Placement** of the flexible workers: each job first keeps what it has (up to its new
   count); the rest goes by best fit in decreasing order of the extra GPUs each job needs, on the
   job's GPU type, loaned servers first, never on a server that holds the job's base
   (``group_flex``), so a reclaim can take a flexible group without a preemption. The knapsack
   sees a type's GPUs as one pool; if placement falls short (fragmentation, the base servers'
   own free GPUs), the job gets what fits.
3. **Actions**: a ``Scale`` only for jobs whose flexible placement changed; shrinking ones first,
   then growing ones as soon as their GPUs are free (a circular wait, rare, is broken by a shrink
   to the kept part first).

The number of servers behind an option, for ``view.rate`` (ours): the base's servers plus
``ceil(x / GPUs per server)`` (``group_flex``), or ``ceil((base + x) / GPUs per server)`` at least
the base's servers otherwise.

:class:`AfsScaling` replaces the knapsack by AFS's greedy (Hwang et al., NSDI'21, as Aryl compares
to it): one GPU at a time to the job whose throughput grows most per GPU (in single-GPU units of
its own speed), while any does, with unbounded elasticity within min..max and no restart cost.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from envs.sim.policy import Action, Alloc, ClusterView, JobState, JobStatus, Migrate, Scale
from heuristics.aryl_place import ArylPlacement, FreeMap, Key, plan
from heuristics.knapsack import solve_mckp

if TYPE_CHECKING:
    from heuristics.aryl import ArylConfig, ArylOrdering


@dataclass
class _Cand:
    """A running elastic job whose flexible workers phase 2 may change."""

    job: int
    state: JobState
    gpu_type: str
    base: int  # base GPUs
    base_servers: frozenset[int]
    flex_ok: Alloc  # its flexible workers on placeable servers
    cur: int  # GPUs of flex_ok
    doomed: bool  # some of its flexible workers sit on a server being taken away
    top: int  # the most extra GPUs it may get
    new: int = 0  # extra GPUs chosen by phase 2


def movable(view: ClusterView, with_flex: bool = False) -> list[_Cand]:
    """Running elastic jobs whose flexible workers phase 2 may change: not checkpointing, and
    with every base worker on a placeable server (a job whose base goes back is preempted).
    ``with_flex``: only those holding more than their minimum (a quick filter)."""
    out: list[_Cand] = []
    for job in tuple(view.running):
        spec = view.job(job)
        if not spec.elastic or (with_flex and view.workers(job) <= spec.min_gpus):
            continue
        st = view.state(job)
        if st.status != JobStatus.RUNNING or st.gpu_type is None:
            continue
        if not all(view.placeable(s) for s, _ in st.base):
            continue
        flex_ok = tuple((s, n) for s, n in st.flex if view.placeable(s))
        base = sum(n for _, n in st.base)
        out.append(
            _Cand(
                job,
                st,
                st.gpu_type,
                base,
                frozenset(s for s, _ in st.base),
                flex_ok,
                sum(n for _, n in flex_ok),
                len(flex_ok) != len(st.flex),
                spec.max_gpus - base,
            )
        )
    return out


@dataclass
class ArylRoom:
    """``Preemption`` component, before phase 1's starts (module docstring). Never preempts:

    1. ``rescue`` (ours): an elastic job with base workers on a server being reclaimed is
       preempted at the deadline, even if its other workers cover its minimum. Aryl scales such
       jobs in instead ("the scaling-in operation reduces the need of completely preempting the
       jobs", section 2): at once, the job is re-based (``Migrate``, one restart, no work lost)
       onto the workers it keeps elsewhere, topped up from free (or else other jobs' flexible)
       GPUs of its type if they fall short of its base demand; its largest holdings become the
       base (whole servers, so base and flexible workers stay on separate servers), the rest
       flexible. If even that is short, the engine preempts it at the deadline.
    2. ``make_room``: scale in the flexible workers that phase 1 needs.

    :param placement: phase 1's placement (demands, pool preferences).
    :param ordering: phase 1's ordering (which pending jobs, in which order).
    :param make_room: do step 2.
    :param rescue: do step 1.
    """

    placement: ArylPlacement
    ordering: ArylOrdering
    make_room: bool = True
    rescue: bool = True

    def preempt(self, view: ClusterView) -> Iterator[Action]:
        if self.rescue and view.reclaiming_servers():
            yield from self._rescue(view)
        if self.make_room:
            yield from self._room(view)

    def _rescue(self, view: ClusterView) -> Iterator[Action]:
        doomed = set(view.reclaiming_servers())
        jobs = []
        for job in sorted({j for s in doomed for j, _ in view.jobs_on(s)}):
            st = view.state(job)
            if view.job(job).elastic and st.status == JobStatus.RUNNING and any(s in doomed for s, _ in st.base):
                jobs.append((job, st))
        if not jobs:
            return
        fit = _Fitter(self.placement, view, [c for c in movable(view, with_flex=True) if c.cur])
        moves: list[Migrate] = []
        for job, st in jobs:
            spec = view.job(job)
            keep: dict[int, int] = {}
            for s, n in (*st.base, *st.flex):
                if view.placeable(s):
                    keep[s] = keep.get(s, 0) + n
            need = self.placement.demand(spec)
            if sum(keep.values()) < need:
                assert st.gpu_type is not None
                extra = fit.place(self.placement.keys(view, spec, st.gpu_type), need - sum(keep.values()))
                if extra is None:
                    continue  # preempted at the deadline
                for s, n in extra:
                    keep[s] = keep.get(s, 0) + n
            base: list[tuple[int, int]] = []
            flex: list[tuple[int, int]] = []
            for s, n in sorted(keep.items(), key=lambda sn: (-sn[1], sn[0])):
                (base if sum(b for _, b in base) < need else flex).append((s, n))
            moves.append(Migrate(job, tuple(sorted(base)), tuple(sorted(flex))))
        yield from fit.scale_ins()
        yield from moves

    def _room(self, view: ClusterView) -> Iterator[Action]:
        if not view.pending:
            return
        cands = [c for c in movable(view, with_flex=True) if c.cur]
        if not cands:
            return
        fit = _Fitter(self.placement, view, cands)
        for job, aged in self.ordering.plan_order(view):
            spec = view.job(job)
            if fit.place(self.placement.keys(view, spec), self.placement.demand(spec)) is None and aged:
                break
        yield from fit.scale_ins()


class _Fitter:
    """Plans placements on the GPUs that are free, or else held by the flexible workers of
    ``cands`` (which then give way): the free GPUs of a (type, pool) are used first; if they do
    not hold the demand, best fit over free plus flexible GPUs, and the flexible workers on the
    GPUs taken are scaled in, from the job with the most flexible GPUs on that server first."""

    def __init__(self, placement: ArylPlacement, view: ClusterView, cands: list[_Cand]) -> None:
        index = placement.index(view)
        self.real = FreeMap(index, view.free_gpus().copy())
        self.virt = FreeMap(index, self.real.free.copy())
        self.cands = cands
        self.held: dict[int, dict[int, int]] = {}  # server -> job -> flexible GPUs there
        for c in cands:
            self.virt.give(c.flex_ok)
            for s, n in c.flex_ok:
                self.held.setdefault(s, {})[c.job] = n
        self.displaced: dict[int, int] = {}

    def place(self, keys: list[Key], need: int) -> Alloc | None:
        for key in keys:
            alloc = self.real.fit(key, need) if self.real.total(key) >= need else None
            if alloc is None and self.virt.total(key) >= need:
                alloc = self.virt.fit(key, need)
            if alloc is not None:
                for s, n in alloc:
                    mine = min(n, int(self.real.free[s]))
                    self.real.take(((s, mine),))
                    if n > mine:
                        self.displaced[s] = self.displaced.get(s, 0) + n - mine
                self.virt.take(alloc)
                return alloc
        return None

    def scale_ins(self) -> Iterator[Action]:
        cut: dict[int, dict[int, int]] = {}  # job -> server -> GPUs to give up
        for s, n in sorted(self.displaced.items()):
            for job, has in sorted(self.held[s].items(), key=lambda jh: (-jh[1], jh[0])):
                m = min(n, has)
                cut.setdefault(job, {})[s] = m
                n -= m
                if n == 0:
                    break
        for c in self.cands:
            if c.job in cut:
                gone = cut[c.job]
                yield Scale(c.job, tuple((s, n - gone.get(s, 0)) for s, n in c.state.flex if n > gone.get(s, 0)))


@dataclass
class ArylScaling:
    """``Scaling`` component: Aryl's phase 2 (see the module docstring).

    :param config: the policy's settings.
    :param placement: the phase-1 placement (base sizes and pool preferences).
    :param ordering: the phase-1 ordering (an aged job it still has waiting keeps flexible
        workers from growing on its GPU types); ``None``: no such rule.
    :param group_flex: flexible workers never on a server with the job's base workers.
    """

    config: ArylConfig
    placement: ArylPlacement
    ordering: ArylOrdering | None = None
    group_flex: bool = True
    _rates: dict[tuple[int, str, int], np.ndarray] = field(default_factory=dict, init=False, repr=False)

    # ------------------------------------------------------------------ the plan
    def scale(self, view: ClusterView) -> Iterator[Action]:
        index = self.placement.index(view)
        fm = FreeMap(index, view.free_gpus().copy())
        cands: dict[str, list[_Cand]] = {}
        for c in movable(view):
            fm.give(c.flex_ok)
            cands.setdefault(c.gpu_type, []).append(c)
        blocked: set[str] = set()
        if self.ordering is not None:  # an aged job still waiting: phase 1 is blocked
            aged, _ = self.ordering.pending_ranked(view)
            if aged:
                blocked = {t for t, _ in self.placement.keys(view, view.job(aged[0]))}
        for t, group in cands.items():
            cap = fm.type_total(t)
            if t in blocked:
                cap = min(cap, sum(c.cur for c in group))
            self.allocate(view, group, cap, fm)
        yield from self._emit(view, self._place(view, cands, fm))

    # ------------------------------------------------------------------ phase 2 proper
    def _servers(self, c: _Cand, x: np.ndarray, size: int) -> np.ndarray:
        nb = len(c.base_servers)
        if self.group_flex:
            return nb + np.where(x > 0, -(-x // size), 0)
        return np.maximum(nb, -(-(c.base + x) // size))

    def rates(self, view: ClusterView, c: _Cand, size: int) -> np.ndarray:
        """``view.rate`` on base + x workers, x = 0..top (cached: it depends on the job's base
        layout only)."""
        key = (c.job, c.gpu_type, len(c.base_servers))
        r = self._rates.get(key)
        if r is None or len(r) < c.top + 1:
            x = np.arange(c.top + 1)
            k = self._servers(c, x, size)
            r = np.array([view.rate(c.job, c.base + int(i), int(n), c.gpu_type) for i, n in zip(x, k, strict=True)])
            self._rates[key] = r
        return r[: c.top + 1]

    def allocate(self, view: ClusterView, group: list[_Cand], cap: int, fm: FreeMap) -> None:
        """Set ``new`` (extra GPUs) of every job of one GPU type: the knapsack."""
        cfg = self.config
        size = _size(fm, group[0].gpu_type)
        tops = [min(c.top, cap, self._room_for(c, fm)) for c in group]
        width = max(tops) + 1
        if width == 1:
            for c in group:
                c.new = 0
            return
        rates = np.ones((len(group), width))
        for i, c in enumerate(group):
            if tops[i] > 0:
                rates[i, : tops[i] + 1] = self.rates(view, c, size)[: tops[i] + 1]
        rem = np.array([c.state.remaining_work for c in group])
        left = np.array([max(0.0, c.state.restarting_until - view.now) for c in group])
        workers = np.array([c.base for c in group])[:, None] + np.arange(width)
        t = rem[:, None] / rates  # remaining time on base + x workers
        pen = np.maximum(0.0, cfg.restart_base_s + cfg.restart_per_gpu_s * workers - left[:, None])
        pen *= cfg.churn_factor
        for i, c in enumerate(group):
            if c.doomed:
                pen[i] = 0.0  # it restarts at the reclaim deadline anyway
            elif c.cur <= tops[i]:
                pen[i, c.cur] = 0.0  # keeping what it has costs nothing
        value = (t[:, :1] - t) - pen
        value = value[:, 1:] - value[:, :1]  # relative to x = 0
        options = [
            list(zip(range(1, top + 1), value[i, :top].tolist(), strict=True)) if top > 0 else []
            for i, top in enumerate(tops)
        ]
        choice = solve_mckp(options, cap)
        for c, i in zip(group, choice, strict=True):
            c.new = i + 1 if i >= 0 else 0

    def _room_for(self, c: _Cand, fm: FreeMap) -> int:
        """Virtual free GPUs of its type it could use (not on its base servers if grouped)."""
        total = fm.type_total(c.gpu_type)
        if self.group_flex:
            total -= sum(int(fm.free[s]) for s in c.base_servers)
        return max(0, total)

    # ------------------------------------------------------------------ placement and actions
    def _place(self, view: ClusterView, cands: dict[str, list[_Cand]], fm: FreeMap) -> list[tuple[_Cand, Alloc]]:
        """New flexible placements (where they changed): keep first, then best fit."""
        every = sorted((c for g in cands.values() for c in g), key=lambda c: c.job)
        got: dict[int, dict[int, int]] = {}
        want: dict[int, int] = {}
        for c in every:  # each job keeps what it has first, up to its new count
            got[c.job], left = {}, c.new
            for s, n in sorted(c.flex_ok, key=lambda a: (-a[1], a[0])):
                m = min(n, left, int(fm.free[s]))
                if m > 0:
                    got[c.job][s] = m
                    fm.take(((s, m),))
                    left -= m
            want[c.job] = left
        out: list[tuple[_Cand, Alloc]] = []
        for c in sorted(every, key=lambda c: (-want[c.job], c.job)):  # best fit decreasing
            mine, left = got[c.job], want[c.job]
            exclude = c.base_servers if self.group_flex else frozenset()
            for key in self.placement.keys(view, view.job(c.job), c.gpu_type) if left else ():
                avail = fm.total(key) - sum(int(fm.free[s]) for s in exclude if fm.index.key_of[s] == key)
                m = min(left, avail)
                if m <= 0:
                    continue
                alloc = plan(fm, [key], m, exclude)
                assert alloc is not None, "the free GPUs were counted"
                fm.take(alloc)
                for s, n in alloc:
                    mine[s] = mine.get(s, 0) + n
                left -= m
                if left == 0:
                    break
            new = tuple(sorted(mine.items()))
            if new != tuple(sorted(c.state.flex)):
                out.append((c, new))
        return out

    def _emit(self, view: ClusterView, changes: list[tuple[_Cand, Alloc]]) -> Iterator[Action]:
        def fits(c: _Cand, new: Alloc) -> bool:
            old = dict(c.state.flex)
            return all(n <= view.free(s) + old.get(s, 0) for s, n in new)

        def shrink(c: _Cand, new: Alloc) -> bool:
            old = dict(c.state.flex)
            return all(n <= old.get(s, 0) for s, n in new)

        todo = [ch for ch in changes if not shrink(*ch)]
        for c, new in changes:
            if shrink(c, new):
                yield Scale(c.job, new)
        while todo:
            ready = [ch for ch in todo if fits(*ch)]
            if not ready:  # circular wait (rare): shrink each to what it keeps, then grow all
                for c, new in todo:
                    old = dict(c.state.flex)
                    yield Scale(c.job, tuple((s, min(n, old[s])) for s, n in new if s in old))
                for c, new in todo:
                    yield Scale(c.job, new)
                return
            for c, new in ready:
                yield Scale(c.job, new)
            todo = [ch for ch in todo if ch not in ready]


def _size(fm: FreeMap, gpu_type: str) -> int:
    return max(int(fm.index.cap[k].max()) for k in fm.index.cap if k[0] == gpu_type)


@dataclass
class AfsScaling(ArylScaling):
    """AFS: greedy, one GPU at a time to the highest marginal throughput per GPU (see the module
    docstring). Throughput of a job on w workers, in units of one GPU of its own:
    ``view.rate(w) / view.rate(1 worker, 1 server)`` on its type."""

    def allocate(self, view: ClusterView, group: list[_Cand], cap: int, fm: FreeMap) -> None:
        size = _size(fm, group[0].gpu_type)
        heap: list[tuple[float, int, int]] = []
        thr: dict[int, np.ndarray] = {}
        for i, c in enumerate(group):
            c.new = 0
            top = min(c.top, self._room_for(c, fm))
            if top <= 0:
                continue
            one = view.rate(c.job, 1, 1, c.gpu_type)
            thr[i] = self.rates(view, c, size)[: top + 1] / one
            heapq.heappush(heap, (-(thr[i][1] - thr[i][0]), c.job, i))
        left = cap
        while heap and left > 0:
            gain, _, i = heapq.heappop(heap)
            if -gain <= 0.0:
                break
            c = group[i]
            c.new += 1
            left -= 1
            if c.new + 1 < len(thr[i]):
                heapq.heappush(heap, (-(thr[i][c.new + 1] - thr[i][c.new]), c.job, i))
