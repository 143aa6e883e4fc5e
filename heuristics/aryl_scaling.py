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

Implementation (speed only, the decisions are the ones above): a job's sizes and layout are kept
between calls while its allocation stays the same tuples, and its verdict while its stamp and the
placeability of its servers do (the engine tells which stamps changed: ``ClusterView.watch_stamps``,
and a server that changes sides, which jobs it hosts: ``ClusterView.jobs_on``; the room and phase 2
share what they keep, and the flexible GPUs of the candidates per server with the verdicts, so the
virtual map is the free GPUs plus those, with no walk over the jobs; and the candidates per GPU
type, in running order: a job keeps its place while it runs, one that entered running since, which
the queue log tells, goes last); each job's rates are kept in one store, and its other inputs in a
row of its own, rewritten only where its candidate or projection changed, so a GPU type's group is
only the list of its jobs' rows; the remaining works (from each job's ``ClusterView.projection``,
read when its stamp changes), the values (restart costs included), the knapsack and the jobs it
changes are one compiled call (:func:`~heuristics.knapsack.phase2_kernel`), with the same
floating-point operations as ``remaining_work`` and the formula above; placement touches the virtual
map only if some job wants more than it keeps; the room component first replays its plan on the free
totals (a placement succeeds exactly when they hold the demand) and builds its maps only if a job
may need flexible GPUs.

:class:`AfsScaling` replaces the knapsack by AFS's greedy (Hwang et al., NSDI'21, as Aryl compares
to it): one GPU at a time to the job whose throughput grows most per GPU (in single-GPU units of
its own speed), while any does, with no restart cost, planning past each job's max_gpus (unbounded
elasticity, as AFS's model believes) while the job gets at most its max (the rest stays idle).
Where the jobs' range is unbounded too (``benchmarks/reproduce.py``'s AFS setting), each job gets
what AFS plans; Aryl's phase 2 then keeps to its own range (``ArylConfig.max_ratio``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from envs.sim.policy import Action, Alloc, ClusterView, JobStatus, Migrate, Scale
from heuristics.aryl_config import ArylConfig, Phase1Order
from heuristics.aryl_place import ArylPlacement, FreeMap, Key, ServerIndex
from heuristics.common import Size
from heuristics.knapsack import FLOAT_COLUMNS, INT_COLUMNS, UNTIL, WORK, phase2_kernel, refuse, workspace

_RUNNING = JobStatus.RUNNING  # (a module constant: an enum member lookup costs more than the test)


@dataclass(slots=True)
class _Cand:
    """A running elastic job whose flexible workers phase 2 may change."""

    job: int
    gpu_type: str
    base: int  # base GPUs
    base_servers: frozenset[int]
    flex: Alloc  # all its flexible workers now
    flex_ok: Alloc  # its flexible workers on placeable servers
    cur: int  # GPUs of flex_ok
    doomed: bool  # some of its flexible workers sit on a server being taken away
    top: int  # the most extra GPUs it may get
    until: float = math.nan  # its restarting_until (set by movable: it changes with the job's stamp)
    prog: tuple[float, float, float, float] | None = None  # its view.projection (set with until)
    slot: int = -1  # where ArylScaling.rates of the job (x = 0..top) begin in its rate store (-1: not yet)
    row: int = -1  # its job's row in ArylScaling's _Rows
    written: _Rows | None = None  # the _Rows that holds it as it is now (None: none; movable resets it)


class _Layout:
    """What :func:`movable` keeps of one job between calls: its sizes, and its layout while its
    allocation stays the same tuples (only a speed-up)."""

    __slots__ = (
        "base",
        "base_alloc",
        "base_servers",
        "cand",
        "elastic",
        "flex",
        "flex_gpus",
        "flex_servers",
        "max_gpus",
        "min_gpus",
    )

    def __init__(self, elastic: bool, min_gpus: int, max_gpus: int) -> None:
        self.elastic, self.min_gpus, self.max_gpus = elastic, min_gpus, max_gpus
        self.base_alloc: Alloc | None = None
        self.flex: Alloc = ()
        self.base = self.flex_gpus = 0
        self.base_servers: frozenset[int] = frozenset()
        self.flex_servers: frozenset[int] = frozenset()
        self.cand: _Cand | None = None  # while every worker is on a placeable server


@dataclass
class Movables:
    """What :func:`movable` keeps between calls (one per ``with_flex``; callers may share one)."""

    layouts: dict[int, _Layout] = field(default_factory=dict)
    verdicts: dict[int, _Cand] = field(default_factory=dict)  # running job -> its candidate (none: left out)
    held: list[int] = field(default_factory=list)  # per server, the GPUs of the candidates' flex_ok there
    held_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # the same, as an array
    held_by: dict[Key, int] = field(default_factory=dict)  # the same per (type, pool)
    keys: tuple[Key, ...] = ()  # each server's (type, pool)
    view: ClusterView | None = None  # the view they were made on
    changed: set[int] = field(default_factory=set)  # the jobs whose stamp changed since (view.watch_stamps)
    bad: tuple[int, ...] | None = None  # the unplaceable servers then
    bad_set: frozenset[int] = frozenset()  # the same, as a set
    with_flex: bool | None = None
    max_ratio: float = 0.0  # ArylConfig.max_ratio: the most GPUs of an elastic job, per GPU it asks (0: its max)
    # the candidates per GPU type, by job, in the view's running order (as the verdicts change, a
    # job keeps its place while it stays running; one that entered running since goes last)
    groups: dict[str, dict[int, _Cand]] = field(default_factory=dict)
    reorders: int = 0  # bumped whenever a group gains or loses a job or is made anew (not when a
    # job's new candidate takes its old one's place)
    running: set[int] = field(default_factory=set)  # the running jobs then
    # the GPU types whose group has a candidate made since phase 2 last wrote that group's rows
    # (ArylScaling.allocate: the others have every candidate written)
    unwritten: set[str] = field(default_factory=set)
    cursor: int = 0  # where the view's queue log was read up to then (view.entered_since)

    def max_gpus(self, num_gpus: int, min_gpus: int, max_gpus: int) -> int:
        """The most GPUs phase 2 gives an elastic job: its ``max_gpus``, or fewer under
        ``max_ratio`` (never below its ``min_gpus``)."""
        if not self.max_ratio:
            return max_gpus
        return min(max_gpus, max(min_gpus, math.floor(num_gpus * self.max_ratio)))

    def virtual(self, index: ServerIndex, view: ClusterView) -> FreeMap:
        """The GPUs free now plus those of the candidates' flexible workers on placeable servers
        (:attr:`held`, as of the last :func:`movable` call): the map on which phase 2 and the room
        component plan."""
        free = list(map(operator.add, view.free_list(), self.held))
        return FreeMap(index, free, {k: view.total_free(*k) + n for k, n in self.held_by.items()})

    def forget(self, view: ClusterView) -> None:
        """Forget every verdict (and what they hold)."""
        self.verdicts.clear()
        self.held = [0] * len(view.servers)
        self.held_array = np.zeros(len(view.servers), dtype=np.int64)
        self.keys = tuple((s.gpu_type.name, s.pool) for s in view.servers)
        self.held_by = dict.fromkeys(self.keys, 0)


def movable(view: ClusterView, with_flex: bool = False, memo: Movables | None = None) -> list[_Cand]:
    """Running elastic jobs whose flexible workers phase 2 may change: not checkpointing, and
    with every base worker on a placeable server (a job whose base goes back is preempted).
    ``with_flex``: only those holding more than their minimum (a quick filter). ``memo``: what
    the caller keeps between calls (a speed-up: a job whose stamp did not change keeps its
    verdict unless a server it holds GPUs on became placeable or unplaceable: the verdict reads
    the unplaceable servers among the job's own only; ``memo.held`` follows the verdicts)."""
    verdicts = _refresh(view, with_flex, memo).verdicts
    return [c for c in map(verdicts.get, view.running) if c is not None]


def _refresh(view: ClusterView, with_flex: bool, memo: Movables | None) -> Movables:
    """The verdicts of :func:`movable` brought up to date in ``memo`` (or a new one)."""
    unplaceable = view.unplaceable_servers()
    running = view.running
    if memo is None:
        memo = Movables(bad=unplaceable, bad_set=frozenset(unplaceable))
        memo.forget(view)
        fresh: Iterable[int] = running
    elif memo.view is view and memo.with_flex == with_flex:
        fresh = memo.changed  # (those that left running lose their verdict)
        if memo.bad is not unplaceable:
            if memo.bad != unplaceable:  # and the jobs on a server that changed sides
                turned = memo.bad_set.symmetric_difference(unplaceable)
                fresh = fresh.union([j for s in turned for j, _ in view.jobs_on(s)])
                memo.bad_set = frozenset(unplaceable)
            memo.bad = unplaceable  # (the view's tuple: the next test is by identity while it stays)
    else:
        if memo.view is not view:
            memo.view, memo.changed = view, view.watch_stamps()
        fresh = running
        memo.forget(view)
        memo.bad, memo.bad_set, memo.with_flex = unplaceable, frozenset(unplaceable), with_flex
    layouts, verdicts, bad = memo.layouts, memo.verdicts, memo.bad_set
    held, held_array, held_by, keys = memo.held, memo.held_array, memo.held_by, memo.keys
    regroup = fresh is running  # (then the groups are made anew below)
    requeued, memo.cursor = view.entered_since(memo.cursor)  # (a job in it left running if it ran)
    if not fresh and not regroup:
        return memo  # (no verdict to redo)
    was, groups = memo.running, memo.groups
    entrants: set[int] = set()  # the fresh jobs that entered running since the last call
    for job in fresh:  # (each verdict is the job's own: the order does not matter)
        old = verdicts.pop(job, None)
        if job not in running:
            if old is not None:
                for s, n in old.flex_ok:
                    held[s] -= n
                    held_array[s] -= n
                    held_by[keys[s]] -= n
            if not regroup:
                was.discard(job)
                if old is not None:
                    del groups[old.gpu_type][job]
                    memo.reorders += 1
            continue
        lay = layouts.get(job)
        if lay is None:
            spec = view.job(job)
            top = memo.max_gpus(spec.num_gpus, spec.min_gpus, spec.max_gpus)
            lay = layouts[job] = _Layout(spec.elastic, spec.min_gpus, top)
        c = _verdict(view, job, lay, with_flex, bad) if lay.elastic else None
        if c is not old:  # (the same candidate holds the same GPUs)
            if old is not None:
                for s, n in old.flex_ok:
                    held[s] -= n
                    held_array[s] -= n
                    held_by[keys[s]] -= n
            if c is not None:
                for s, n in c.flex_ok:
                    held[s] += n
                    held_array[s] += n
                    held_by[keys[s]] += n
        if c is not None:
            c.until = view.restarting_until(job)
            c.prog = view.projection(job)
            c.written = None
            memo.unwritten.add(c.gpu_type)
            verdicts[job] = c
        if regroup:
            continue
        if job not in was or job in requeued:  # it goes last (below)
            entrants.add(job)
            was.add(job)
            if old is not None:
                del groups[old.gpu_type][job]
                memo.reorders += 1
        elif old is not None and c is not None and c.gpu_type == old.gpu_type:
            groups[c.gpu_type][job] = c  # (its place stays)
        elif old is not None:
            del groups[old.gpu_type][job]
            memo.reorders += 1
            regroup = c is not None  # (it goes to another type's group, somewhere in the middle)
        else:
            regroup = c is not None  # (it joins its group somewhere in the middle)
    memo.changed.clear()
    if entrants and not regroup:  # the last ones in running (those after one entered after it)
        # (view.running is a dict's keys, reversible, though typed as any KeysView)
        tail = list(itertools.islice(reversed(running), len(entrants)))  # type: ignore[call-overload]
        regroup = not entrants.issuperset(tail)
        for job in reversed(tail) if not regroup else ():
            c = verdicts.get(job)
            if c is not None:
                groups.setdefault(c.gpu_type, {})[job] = c
                memo.reorders += 1
    if regroup:
        memo.groups, memo.running = {}, set(running)
        memo.reorders += 1
        for c in map(verdicts.get, running):
            if c is not None:
                memo.groups.setdefault(c.gpu_type, {})[c.job] = c
    return memo


def _verdict(view: ClusterView, job: int, lay: _Layout, with_flex: bool, bad: frozenset[int]) -> _Cand | None:
    """:func:`movable`'s answer for one running elastic job: its candidate, or None."""
    if with_flex and view.workers(job) <= lay.min_gpus:
        return None
    status, gpu_type, base_alloc, flex = view.allocation(job)
    if status != _RUNNING or gpu_type is None:
        return None
    if lay.base_alloc is not base_alloc:
        lay.base_alloc = base_alloc
        lay.base = sum([n for _, n in base_alloc])
        lay.base_servers = frozenset([s for s, _ in base_alloc])
        lay.cand = None
    if lay.flex is not flex:
        lay.flex = flex
        lay.flex_gpus = sum([n for _, n in flex])
        lay.flex_servers = frozenset([s for s, _ in flex])
        lay.cand = None
    if not bad.isdisjoint(lay.base_servers):
        return None
    if bad.isdisjoint(lay.flex_servers):
        if lay.cand is None:
            base = lay.base
            lay.cand = _Cand(
                job, gpu_type, base, lay.base_servers, flex, flex, lay.flex_gpus, False, lay.max_gpus - base
            )
        return lay.cand
    flex_ok = tuple([(s, n) for s, n in flex if s not in bad])
    base = lay.base
    return _Cand(
        job,
        gpu_type,
        base,
        lay.base_servers,
        flex,
        flex_ok,
        sum([n for _, n in flex_ok]),
        len(flex_ok) != len(flex),
        lay.max_gpus - base,
    )


def _allowed(view: ClusterView, types: frozenset[str] | None) -> list[Key]:
    """The (type, pool) pairs of the cluster whose type is in ``types`` (None: any)."""
    return [k for k in view.pool_types() if types is None or k[0] in types]


def _job_of(cn: tuple[_Cand, int]) -> int:
    """The job of a (candidate, extra GPUs) pair (the sort key of phase 2's placement)."""
    return cn[0].job


def _moving(group: list[_Cand], new: list[int]) -> list[tuple[_Cand, int]]:
    """(candidate, its ``new`` extra GPUs) for the candidates of ``group`` whose flexible placement
    may change: given another count than they hold, or doomed (some of their flexible workers must
    go)."""
    return [(c, w) for c, w in zip(group, new, strict=True) if w != c.cur or c.doomed]


def _changed(c: _Cand, mine: dict[int, int]) -> Alloc | None:
    """The flexible placement ``mine`` as an allocation (sorted), if it differs from the job's;
    else None."""
    new = tuple(sorted(mine.items()))
    return new if new != tuple(sorted(c.flex)) else None


def _div(a: float, b: float) -> float:
    """``a / b`` with numpy's float semantics for ``b == 0`` (inf, or nan for ``0 / 0``)."""
    if b:
        return a / b
    return math.nan if a == 0 or a != a else math.copysign(math.inf, a)


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
    :param memo: what :func:`movable` keeps between calls (without ``with_flex``), shared with
        the scheduler's phase 2 (:attr:`ArylScaling.memo`) so that each stamp change is read once.
    """

    placement: ArylPlacement
    ordering: Phase1Order
    make_room: bool = True
    rescue: bool = True
    memo: Movables = field(default_factory=Movables, repr=False)
    # whether some server is being reclaimed, as of the view's unplaceable servers then (the view
    # gives the same tuple while no server's status changes)
    _reclaims: tuple[tuple[int, ...] | None, bool] = field(default=(None, False), init=False, repr=False)

    def preempt(self, view: ClusterView) -> Iterator[Action]:
        if self.rescue:
            bad = view.unplaceable_servers()
            if self._reclaims[0] is not bad:
                self._reclaims = (bad, bool(view.reclaiming_servers()))
            if self._reclaims[1]:
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
        fit = _Fitter(self.placement, view, _refresh(view, False, self.memo))
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
        memo = _refresh(view, False, self.memo)
        if not any(memo.held_by.values()) or not self._may_displace(view):
            return  # (no movable job has flexible workers on placeable servers, or none is needed)
        fit = _Fitter(self.placement, view, memo)

        def fits(size: Size) -> bool:  # else fit.place fails: no (type, pool) holds even min_gpus
            gpus, types = size
            return any(fit.virt.total(k) >= gpus for k in _allowed(view, types))

        for job, aged in self.ordering.plan_order(view, fits):
            need, keys = self.placement.start_plan(view, job)
            if fit.place(keys, need) is None and aged:
                break
        yield from fit.scale_ins()

    def _may_displace(self, view: ClusterView) -> bool:
        """:meth:`_room`'s plan on the free totals alone, up to the first job that would go to
        flexible GPUs: a placement on the free GPUs of a (type, pool) succeeds exactly when they
        add up to the demand (best fit always finds one then), and takes the demand from both
        maps; so if no job gets that far, the plan scales nothing in."""
        real: dict[Key, int] = {}
        extra = self.memo.held_by  # flexible GPUs per (type, pool)
        start_plan = self.placement.start_plan

        def fits(size: Size) -> bool:  # else the loop does nothing for the job: no key holds min_gpus
            gpus, types = size
            for key in _allowed(view, types):
                have = real[key] if key in real else view.total_free(*key)
                if have + extra[key] >= gpus:
                    return True
            return False

        for job, aged in self.ordering.plan_order(view, fits):
            need, keys = start_plan(view, job)
            for key in keys:
                have = real[key] if key in real else view.total_free(*key)
                if have >= need:
                    real[key] = have - need
                    break
                if have + extra[key] >= need:
                    return True
            else:
                if aged:
                    return False
        return False


class _Fitter:
    """Plans placements on the GPUs that are free, or else held by the flexible workers of the
    movable jobs (``memo``'s verdicts, up to date; they then give way): the free GPUs of a (type,
    pool) are used first; if they do not hold the demand, best fit over free plus flexible GPUs,
    and the flexible workers on the GPUs taken are scaled in, from the job with the most flexible
    GPUs on that server first."""

    def __init__(self, placement: ArylPlacement, view: ClusterView, memo: Movables) -> None:
        index = placement.index(view)
        self.view, self.memo = view, memo
        self.real = FreeMap.now(index, view)
        self.virt = memo.virtual(index, view)
        self.displaced: dict[int, int] = {}

    def place(self, keys: list[Key], need: int) -> Alloc | None:
        for key in keys:
            alloc = self.real.fit(key, need) if self.real.total(key) >= need else None
            if alloc is None and self.virt.total(key) >= need:
                alloc = self.virt.fit(key, need)
            if alloc is not None:
                for s, n in alloc:
                    mine = min(n, self.real.free[s])
                    self.real.take(((s, mine),))
                    if n > mine:
                        self.displaced[s] = self.displaced.get(s, 0) + n - mine
                self.virt.take(alloc)
                return alloc
        return None

    def scale_ins(self) -> Iterator[Action]:
        if not self.displaced:
            return
        # the movable jobs with flexible workers on placeable servers, among those on the
        # displaced servers (the verdicts, brought up to date, follow the jobs' allocations)
        view, displaced = self.view, self.displaced
        verdicts = _refresh(view, False, self.memo).verdicts
        held: dict[int, dict[int, int]] = {}  # server -> job -> flexible GPUs there
        seen: set[int] = set()
        for d in displaced:
            for job, _ in view.jobs_on(d):
                c = verdicts.get(job)
                if c is None or not c.cur or job in seen:
                    continue
                seen.add(job)
                for s, n in c.flex_ok:
                    if s in displaced:
                        held.setdefault(s, {})[job] = n
        cut: dict[int, dict[int, int]] = {}  # job -> server -> GPUs to give up
        for s, n in sorted(self.displaced.items()):
            for job, has in sorted(held[s].items(), key=lambda jh: (-jh[1], jh[0])):
                m = min(n, has)
                cut.setdefault(job, {})[s] = m
                n -= m
                if n == 0:
                    break
        for job in view.running if len(cut) > 1 else cut:  # in the view's running order
            if job in cut:
                gone, c = cut[job], verdicts[job]
                yield Scale(job, tuple((s, n - gone.get(s, 0)) for s, n in c.flex if n > gone.get(s, 0)))


class _Rows:
    """The per-job inputs of :func:`~heuristics.knapsack.phase2_kernel`, a row per job (given at
    its first sight; the arrays grow by doubling), so that a GPU type's group is only the array
    of its jobs' rows. A row holds where the job's rates begin in the rate store (``_Cand.slot``),
    its base servers, base and current extra GPUs, the most extra GPUs it may get, whether it is
    doomed and, where the view gives projections, its projection and ``until``: all written from
    its candidate when that is not the one written last (``_Cand.written``: a candidate stays the
    same object while its allocation does, and :func:`movable` marks it unwritten when it reads
    its stamp's projection again), only the projection and ``until`` when it is (the other fields
    of a candidate stay the same), the base servers only when they are another set."""

    def __init__(self) -> None:
        self.of: dict[int, int] = {}  # job -> row
        self.owners: list[_Cand | None] = []  # per row: the candidate written there last
        self.base_servers: list[frozenset[int]] = []  # per row: the base servers written there (a job's
        # candidates share the set while its base stays the same)
        n = 64
        self.ints = np.zeros((n, len(INT_COLUMNS)), dtype=np.int64)  # per row: slot, base, cur, top, doomed
        self.floats = np.zeros((n, len(FLOAT_COLUMNS)))  # per row: its projection (or remaining work), until
        self.servers = np.full((n, 1), -1, dtype=np.int64)  # per row: its base servers (then -1)

    def _new(self, job: int) -> int:
        r = self.of[job] = len(self.owners)
        self.owners.append(None)
        self.base_servers.append(frozenset())
        if r == len(self.ints):
            self.ints, self.floats = (np.concatenate([a, np.zeros_like(a)]) for a in (self.ints, self.floats))
            self.servers = np.concatenate([self.servers, np.full_like(self.servers, -1)])
        return r

    def write(self, c: _Cand) -> None:
        """Write candidate ``c`` (its ``slot`` set) in its job's row."""
        r = self.of.get(c.job)
        if r is None:
            r = self._new(c.job)
        old = self.owners[r]
        if old is not c:  # (else only its projection and until changed)
            if old is not None:
                old.written = None
            self.owners[r] = c
            self.ints[r] = (c.slot, c.base, c.cur, c.top, c.doomed)
            if self.base_servers[r] is not c.base_servers:
                self.base_servers[r] = c.base_servers
                width = self.servers.shape[1]
                nb = len(c.base_servers)
                if nb > width:
                    pad = np.full((len(self.servers), nb - width), -1, dtype=np.int64)
                    self.servers, width = np.concatenate([self.servers, pad], axis=1), nb
                self.servers[r] = (*sorted(c.base_servers), *(-1,) * (width - nb))
        if c.prog is not None:
            self.floats[r] = (*c.prog, c.until)
        c.row, c.written = r, self

    def remaining(self, rows: np.ndarray, rems: list[float], group: list[_Cand]) -> None:
        """Write the remaining works ``rems`` and the ``until`` of ``group`` (no projections) in
        their rows."""
        self.floats[rows, WORK] = rems
        self.floats[rows, UNTIL] = [c.until for c in group]


@dataclass
class ArylScaling:
    """``Scaling`` component: Aryl's phase 2 (see the module docstring).

    :param config: the policy's settings.
    :param placement: the phase-1 placement (base sizes and pool preferences).
    :param ordering: the phase-1 ordering (an aged job it still has waiting keeps flexible
        workers from growing on its GPU types); ``None``: no such rule.
    :param group_flex: flexible workers never on a server with the job's base workers.
    :param memo: what :func:`movable` keeps between calls (see :class:`ArylRoom`).
    """

    config: ArylConfig
    placement: ArylPlacement
    ordering: Phase1Order | None = None
    group_flex: bool = True
    memo: Movables = field(default_factory=Movables, repr=False)
    _rates: dict[tuple[int, str, int], list[float]] = field(default_factory=dict, init=False, repr=False)
    # the rates the knapsack reads, each candidate's x = 0..top in one slot of a flat store (append
    # only), by (job, type, base servers, top)
    _store: np.ndarray = field(default_factory=lambda: np.zeros(1024), init=False, repr=False)
    _stored: int = field(default=0, init=False, repr=False)
    _slots: dict[tuple[int, str, int, int], int] = field(default_factory=dict, init=False, repr=False)
    _rows: _Rows = field(default_factory=_Rows, init=False, repr=False)
    _scratch: np.ndarray = field(default_factory=lambda: np.empty(1024), init=False, repr=False)
    _picks: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64)), init=False, repr=False
    )
    _kernel: Callable[..., tuple[int, int]] | None = field(default=None, init=False, repr=False)
    _churn: np.ndarray = field(init=False, repr=False)
    # per GPU type, the rows of its group as of (memo.reorders, _rows): kept while the same
    _group_rows: dict[str, tuple[int, _Rows, np.ndarray]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        cfg = self.config
        self.memo.max_ratio = cfg.max_ratio
        self._churn = np.array([cfg.restart_base_s, cfg.restart_per_gpu_s, cfg.churn_factor])

    # ------------------------------------------------------------------ the plan
    def scale(self, view: ClusterView) -> Iterator[Action]:
        index = self.placement.index(view)
        # movable(view)'s candidates, grouped by type (in its order)
        memo = _refresh(view, False, self.memo)
        cands = {t: list(g.values()) for t, g in memo.groups.items() if g}
        totals: dict[str, int] = {}  # per GPU type, the virtual free GPUs (their flexible GPUs given back)
        for (t, p), n in memo.held_by.items():
            totals[t] = totals.get(t, 0) + view.total_free(t, p) + n
        if len(self._rows.of) > 4 * sum(map(len, cands.values())) + 1024:  # forget the jobs that left
            self._rows = _Rows()
            self.memo.unwritten.update(cands)
        blocked: set[str] = set()
        if self.ordering is not None:  # an aged job still waiting: phase 1 is blocked
            head = self.ordering.oldest_aged(view)
            if head is not None:
                blocked = {t for t, _ in self.placement.keys(view, view.job(head))}
        moving: list[tuple[_Cand, int]] = []
        free: np.ndarray | None = None  # the virtual free GPUs per server, made once for every group
        for t, group in cands.items():
            total = totals[t]
            cap = min(total, sum(c.cur for c in group)) if t in blocked else total
            if cap == 0:  # every option above 0 weighs more than the capacity (the kernel's answer, cheaper)
                moving += _moving(group, [0] * len(group))
                continue
            if free is None:
                free = view.free_gpus() + memo.held_array
            moving += self.allocate(view, group, cap, index, free, total)
        yield from self._emit(view, self._place(view, moving, index))

    # ------------------------------------------------------------------ phase 2 proper
    def _servers(self, c: _Cand, x: int, size: int) -> int:
        nb = len(c.base_servers)
        if self.group_flex:
            return nb + (-(-x // size) if x > 0 else 0)
        return max(nb, -(-(c.base + x) // size))

    def rates(self, view: ClusterView, c: _Cand, size: int) -> list[float]:
        """``view.rate`` on base + x workers, x = 0..top."""
        return self._cached(view, c, size, c.top)[: c.top + 1]

    def _slot(self, view: ClusterView, c: _Cand, size: int) -> int:
        """Where :meth:`rates` of ``c`` begin in the rate store (written there at the first ask)."""
        key = (c.job, c.gpu_type, len(c.base_servers), c.top)
        at = self._slots.get(key)
        if at is None:
            r = self.rates(view, c, size)
            at, end = self._stored, self._stored + len(r)
            if end > len(self._store):
                self._store = np.concatenate([self._store[:at], np.zeros(max(end, 2 * len(self._store)) - at)])
            self._store[at:end] = r
            self._stored = end
            self._slots[key] = at
        return at

    def _cached(self, view: ClusterView, c: _Cand, size: int, top: int) -> list[float]:
        """The cached ``view.rate`` on base + x workers, x = 0..top at least (it depends on the
        job's base layout only)."""
        key = (c.job, c.gpu_type, len(c.base_servers))
        r = self._rates.get(key)
        if r is None:
            r = self._rates[key] = []
        for x in range(len(r), top + 1):
            r.append(view.rate(c.job, c.base + x, self._servers(c, x, size), c.gpu_type))
        return r

    def allocate(
        self, view: ClusterView, group: list[_Cand], cap: int, index: ServerIndex, free: np.ndarray, total: int
    ) -> list[tuple[_Cand, int]]:
        """The extra GPUs of the memo's group of one GPU type (in its order), by the knapsack on
        the module docstring's values (:func:`~heuristics.knapsack.phase2_kernel`), for the jobs
        whose flexible placement may change: those given another count than they hold, and the
        doomed ones. ``cap``: at least 1. ``free``: the virtual free GPUs per server
        (:meth:`Movables.virtual`'s, as an int64 array); ``total``: those of the type. The group's
        rows array is kept while ``memo.reorders`` stays the same, and its candidates are read for
        writing only while the type is in ``memo.unwritten``."""
        a = self._rows
        t = group[0].gpu_type
        if t in self.memo.unwritten:
            stale = [c for c in group if c.written is not a]
            if stale:
                size = index.type_size[t]
                for c in stale:
                    if c.slot < 0:
                        c.slot = self._slot(view, c, size)
                    a.write(c)
            self.memo.unwritten.discard(t)
        kept = self._group_rows.get(t)
        if kept is not None and kept[0] == self.memo.reorders and kept[1] is a:
            rows = kept[2]
        else:
            rows = np.array([c.row for c in group], dtype=np.int64)
            self._group_rows[t] = (self.memo.reorders, a, rows)
        # with projections (clairvoyant: every candidate, running, has one) the kernel computes
        # the remaining works
        project = view.information == "clairvoyant"
        if not project:
            a.remaining(rows, view.remaining_works([c.job for c in group]), group)
        n = len(group)
        values, sizes, out = self._scratch_for(n, cap)
        kernel = self._kernel
        if kernel is None:  # numba's own, compiled now (without the wrapper that compiles it lazily)
            kernel = self._kernel = phase2_kernel.dispatcher()  # type: ignore[attr-defined]
        code, m = kernel(
            *(rows, a.ints, a.floats, a.servers, project, self._store),
            *(free, total, self.group_flex, view.now, self._churn, cap),
            *(workspace(n, cap), values, sizes, out),
        )
        if code != -1:
            refuse(code, values, sizes[:n])
        if not m:
            return []
        return [(group[k], w) for k, w in zip(sizes[:m].tolist(), out[:m].tolist(), strict=True)]

    def _scratch_for(self, groups: int, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scratch blocks for the kernel (reused): at least ``groups x cap`` floats for the
        knapsack's values, and two of at least ``groups`` integers (its ``sizes`` and ``out``)."""
        if len(self._scratch) < groups * cap:
            self._scratch = np.empty(max(groups * cap, 2 * len(self._scratch)))
        if len(self._picks[0]) < groups:
            n = max(groups, 2 * len(self._picks[0]))
            self._picks = (np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
        return self._scratch, *self._picks

    def _rooms(self, group: list[_Cand], fm: FreeMap) -> list[int]:
        """Per job of one GPU type, the virtual free GPUs of its type it could use (not on its
        base servers if grouped)."""
        total = fm.type_total(group[0].gpu_type)
        if not self.group_flex:
            return [max(0, total)] * len(group)
        free = fm.free
        out = []
        for c in group:
            room = total
            for s in c.base_servers:
                room -= free[s]
            out.append(room if room > 0 else 0)
        return out

    # ------------------------------------------------------------------ placement and actions
    def _place(
        self, view: ClusterView, moving: list[tuple[_Cand, int]], index: ServerIndex
    ) -> list[tuple[_Cand, Alloc]]:
        """New flexible placements (where they changed): keep first, then best fit, on a virtual
        map of the GPUs free now.

        Keeping never runs short: each job's own flexible GPUs are on the virtual map and the
        other jobs keep only theirs, so the map is only updated (and read) if some job wants
        more than it keeps: then it is the GPUs free now plus the flexible ones of the jobs
        whose placement may change, less what they keep (integers: only what the shrinking jobs
        give up is added).

        :param moving: the jobs whose placement may change, with their new extra GPUs (the others
            keep exactly what they have)."""
        moving.sort(key=_job_of)
        kept: list[tuple[_Cand, dict[int, int], int]] = []
        shrunk: list[tuple[_Cand, dict[int, int]]] = []  # the jobs that keep less than they hold
        wants = False
        for c, new in moving:  # each job keeps what it has first, up to its new count
            if new >= c.cur:
                left = new - c.cur
                kept.append((c, dict(c.flex_ok), left))
                wants = wants or left > 0
            else:
                part: dict[int, int] = {}
                left = new
                for s, n in sorted(c.flex_ok, key=lambda a: (-a[1], a[0])) if left > 0 else ():
                    m = min(n, left)
                    if m > 0:
                        part[s] = m
                        left -= m
                kept.append((c, part, left))
                shrunk.append((c, part))
        if not wants:
            return [(c, alloc) for c, got, _ in kept if (alloc := _changed(c, got)) is not None]
        fm = FreeMap.now(index, view)  # plus what the shrinking jobs give up (the others keep all theirs)
        fm.give([(s, n - part.get(s, 0)) for c, part in shrunk for s, n in c.flex_ok])
        kept.sort(key=lambda k: (-k[2], k[0].job))  # best fit decreasing
        free, key_of = fm.free, index.key_of
        out: list[tuple[_Cand, Alloc]] = []
        for c, mine, left in kept:
            exclude = c.base_servers if self.group_flex else frozenset()
            for key in self.placement.keys(view, view.job(c.job), c.gpu_type) if left else ():
                ex = [s for s in exclude if key_of[s] == key]
                avail = fm.total(key) - sum([free[s] for s in ex])
                m = min(left, avail)
                if m <= 0:
                    continue
                alloc = fm.fit(key, m, ex)  # (plan's: the key's total holds m)
                assert alloc is not None, "the free GPUs were counted"
                fm.take(alloc)
                for s, n in alloc:
                    mine[s] = mine.get(s, 0) + n
                left -= m
                if left == 0:
                    break
            changed = _changed(c, mine)
            if changed is not None:
                out.append((c, changed))
        return out

    def _emit(self, view: ClusterView, changes: list[tuple[_Cand, Alloc]]) -> Iterator[Action]:
        # the changes that grow somewhere, with the job's flexible GPUs now per server
        todo: list[tuple[_Cand, Alloc, dict[int, int]]] = []
        for c, new in changes:
            old = dict(c.flex)
            for s, n in new:
                if n > old.get(s, 0):
                    todo.append((c, new, old))
                    break
            else:  # (it grows nowhere)
                yield Scale(c.job, new)
        free = view.free
        while todo:
            ready: list[tuple[_Cand, Alloc, dict[int, int]]] = []
            waiting: list[tuple[_Cand, Alloc, dict[int, int]]] = []
            for ch in todo:  # (before any of them is yielded)
                _, new, old = ch
                (ready if all(n <= free(s) + old.get(s, 0) for s, n in new) else waiting).append(ch)
            if not ready:  # circular wait (rare): shrink each to what it keeps, then grow all
                for c, new, old in todo:
                    yield Scale(c.job, tuple((s, min(n, old[s])) for s, n in new if s in old))
                for c, new, _ in todo:
                    yield Scale(c.job, new)
                return
            for c, new, _ in ready:
                yield Scale(c.job, new)
            todo = waiting


@dataclass
class AfsScaling(ArylScaling):
    """AFS: greedy, one GPU at a time to the highest marginal throughput per GPU (see the module
    docstring). Throughput of a job on w workers, in units of one GPU of its own:
    ``view.rate(w) / view.rate(1 worker, 1 server)`` on its type.

    Unbounded elasticity (Aryl section 7.4: "AFS assumes unbounded elasticity and shows a higher
    resource usage"; Aryl "considering limited elasticity" is what it gains by): AFS's model
    believes a job scales past ``max_gpus``, so its greedy plans past it, limited only by the
    job's room; the job gets ``min(plan, max)`` and the GPUs planned beyond are held by the plan,
    left unallocated to the other jobs' flexible demand (phase 1 may still take them). Jobs whose
    ``max_gpus`` is the whole pool get all AFS plans (as in Aryl's comparison, where AFS "shows a
    higher resource usage")."""

    def allocate(
        self, view: ClusterView, group: list[_Cand], cap: int, index: ServerIndex, *_: object
    ) -> list[tuple[_Cand, int]]:
        # (what ArylScaling.allocate's further arguments save the knapsack, the greedy does not read)
        gpu_type = group[0].gpu_type
        size = index.type_size[gpu_type]
        fm = self.memo.virtual(index, view)  # the candidates' flexible GPUs given back
        heap: list[tuple[float, int, int]] = []  # (-marginal gain, job, i): the next GPU of each job
        ones: dict[int, float] = {}
        rates: dict[int, list[float]] = {}  # the cache's list, extended as plans grow
        plans: dict[int, int] = {}  # (the jobs not in it get none)
        tops: dict[int, int] = {}

        def thr(i: int, x: int) -> float:
            r = rates[i]
            if len(r) <= x:
                self._cached(view, group[i], size, x)
            return _div(r[x], ones[i])

        for i, (c, room) in enumerate(zip(group, self._rooms(group, fm), strict=True)):
            if c.top <= 0 or room <= 0:
                continue
            ones[i] = view.rate(c.job, 1, 1, gpu_type)
            rates[i] = self._cached(view, c, size, 1)
            tops[i] = min(room, cap)
            plans[i] = 0
            heap.append((-(thr(i, 1) - thr(i, 0)), c.job, i))
        heapq.heapify(heap)
        left = cap
        while left > 0 and heap:
            gain, job, i = heap[0]
            if -gain <= 0.0:
                break
            plans[i] = x = plans[i] + 1
            left -= 1
            if x < tops[i]:  # this job's next GPU, unless another job's comes first
                heapq.heapreplace(heap, (-(thr(i, x + 1) - thr(i, x)), job, i))
            else:
                heapq.heappop(heap)
        return _moving(group, [min(plans[i], c.top) if i in plans else 0 for i, c in enumerate(group)])
