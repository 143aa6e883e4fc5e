"""Pieces several policies share: consolidated placement and queue bookkeeping."""

from __future__ import annotations

import bisect
import heapq
import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Alloc, ClusterView, JobStatus, Start
from envs.sim.settings import Choice, Settings

_PENDING = JobStatus.PENDING  # bound once: a member lookup costs ten globals

TRAINING_ONLY: tuple[Pool, ...] = (Pool.TRAINING,)
TYPE_ORDERS = ("fastest", "listed")
"""How a placement orders the GPU types a job allows within a pool: ``fastest`` first for that
job (the throughput model's nominal rate of its GPUs on one server of the type: never a
machine's latent speed factor; ties in the cluster's order), or the cluster's ``listed`` order
(what every placement did before; ``--set policy.type_order=listed``)."""


STARTS = ("now", "earliest-finish")
"""When a placement starts a job that fits: ``now``, on the GPUs free now, as every policy of the
papers does; or ``earliest-finish``, only where that ends it no later than waiting for one server
of a faster type it allows would (the minimum-completion-time rule of list scheduling on
heterogeneous machines, as in HEFT): :func:`waits`."""


Remaining = Callable[[ClusterView, int], float]
"""A job's remaining work (``JobState``'s units) as a policy reads it: what the run reveals
(``view.remaining_work``, nan at information ``none``), or the policy's own estimate."""


ELASTIC_STARTS = ("max", "requested")
"""The size at which a placement starts an elastic job: ``max``, its most GPUs where they fit now
(else its requested size), or always its ``requested`` size (what the published FIFO, SJF and
QSSF do; ``--set policy.elastic=requested``). A rigid job starts at its size either way."""


def start_sizes(job: JobSpec, elastic: str = "max") -> tuple[int, ...]:
    """The GPU counts to try for ``job``'s start, in order (:data:`ELASTIC_STARTS`)."""
    if elastic == "max" and job.max_gpus > job.num_gpus:
        return (job.max_gpus, job.num_gpus)
    return (job.num_gpus,)


_TYPE_ORDERS: weakref.WeakKeyDictionary[ClusterView, dict[tuple[object, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)
""":func:`types_for`'s answers, kept per view (dropped with it)."""


class _LastMemo:
    """The view :func:`types_for` last served (a weak reference) and its memo: nearly every call
    asks about the same view, and calling a weak reference costs less than a weak-keyed lookup."""

    __slots__ = ("memo", "view")

    def __init__(self) -> None:
        self.view: weakref.ref[ClusterView] | None = None
        self.memo: dict[tuple[object, ...], tuple[str, ...]] = {}


_LAST_MEMO = _LastMemo()


def types_for(view: ClusterView, job: JobSpec, pool: Pool, gpus: int, order: str = "fastest") -> tuple[str, ...]:
    """The GPU types of ``pool`` that ``job`` allows, in the preference of ``order`` (:data:`TYPE_ORDERS`).

    Computed once per view and (allowed types, model, requested GPUs, pool, ``gpus``, order): all
    it depends on (the cluster's types and the throughput model's nominal rates stay fixed)."""
    last = _LAST_MEMO
    if last.view is not None and last.view() is view:
        memo = last.memo
    else:
        memo = _TYPE_ORDERS.setdefault(view, {})
        last.view, last.memo = weakref.ref(view), memo
    key = (job.gpu_types, job.model, job.num_gpus, pool, gpus, order)
    held = memo.get(key)
    if held is not None:
        return held
    names = [t for t, p in view.pool_types() if p == pool and job.allows(view.gpu_type(t))]
    if order == "fastest" and len(names) > 1:
        speed = {t: view.rate(job.job_id, gpus, 1, t) for t in names}
        names.sort(key=lambda t: -speed[t])  # stable: equals keep the cluster's order
    memo[key] = answer = tuple(names)
    return answer


def pack(
    view: ClusterView,
    job: JobSpec,
    gpus: int,
    pools: Sequence[Pool] = TRAINING_ONLY,
    exclude: frozenset[int] = frozenset(),
    gpu_type: str | None = None,
    type_order: str = "fastest",
) -> Alloc | None:
    """Place ``gpus`` workers of ``job`` on as few servers as possible.

    Tries the pools in the given order and, within a pool, the GPU types the job allows in the
    order of ``type_order`` (:func:`types_for`; only ``gpu_type`` if given). One server if any
    fits (best fit: the fewest free GPUs that suffice, lowest id among equals); otherwise the
    servers with the most free GPUs, the last one chosen by best fit for the remainder. With
    ``fastest``, one server of any type the job allows comes before a spread over several of a
    faster one (consolidated first: on ``cloud`` that costs each such job speed and still gives
    the lower JCT, README); with ``listed``, the first type with room decides.
    ``exclude``: servers not to use. ``None`` if it does not fit.
    """
    for pool in pools:
        if gpu_type is None:
            names = types_for(view, job, pool, gpus, type_order)
        else:
            names = (gpu_type,) if job.allows(view.gpu_type(gpu_type)) else ()
        room: list[str] = []  # (fastest) the types with room, to spread over if no one server holds it
        for tname in names:
            if view.total_free(tname, pool) < gpus:
                continue
            if not exclude:
                sid = view.best_fit(tname, pool, gpus)
                if sid is not None:
                    return ((sid, gpus),)
            if type_order == "fastest":
                room.append(tname)
                continue
            alloc = _spread_over(view, tname, pool, exclude, gpus)
            if alloc is not None:
                return alloc
        for tname in room:
            alloc = _spread_over(view, tname, pool, exclude, gpus)
            if alloc is not None:
                return alloc
    return None


def _spread_over(view: ClusterView, gpu_type: str, pool: Pool, exclude: frozenset[int], gpus: int) -> Alloc | None:
    return _spread([s for s in view.servers_by_free(gpu_type, pool) if s not in exclude], view, gpus)


def _spread(servers: list[int], view: ClusterView, gpus: int) -> Alloc | None:
    """``servers`` sorted by free GPUs, most first."""
    frees = [view.free(s) for s in servers]
    out: list[tuple[int, int]] = []
    left = gpus
    i = 0
    while left > 0 and i < len(servers):
        if frees[i] >= left:
            # the tightest of the remaining servers that holds the remainder
            j = i
            while j + 1 < len(servers) and frees[j + 1] >= left:
                j += 1
            out.append((servers[j], left))
            return tuple(out)
        out.append((servers[i], frees[i]))
        left -= frees[i]
        i += 1
    return None


@dataclass
class PackPlacement:
    """Start a pending job consolidated (``pack``) in ``pools``, all its workers as its gang: an
    elastic job at the size ``elastic`` gives (:func:`start_sizes`), never rescaled after.

    Speed only: ``pack`` refuses a job exactly when no GPU type it allows has as many placeable
    free GPUs in one of ``pools`` as its smallest start size (its ``num_gpus``). So once a job
    is refused, every job of the same (``num_gpus``, ``gpu_types``) is refused too, until
    ``view.room_grown()`` changes (until then free GPUs have only gone down): those answers are
    kept."""

    pools: tuple[Pool, ...] = TRAINING_ONLY
    type_order: str = "fastest"
    elastic: str = "max"
    start: str = "now"
    remaining: Remaining | None = None  # what ``earliest-finish`` reads of remaining works (None: the run's)
    # the refused (num_gpus, gpu_types) as of (view, its room_grown then)
    _refused: tuple[object, int, set[tuple[int, frozenset[str] | None]]] = field(
        default_factory=lambda: (None, -1, set()), init=False, repr=False, compare=False
    )
    _released: ReleaseMemo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._released = ReleaseMemo(self.remaining)

    @classmethod
    def of(cls, config: PackConfig, remaining: Remaining | None = None) -> PackPlacement:
        """The placement a policy's :class:`PackConfig` (or a subclass's) sets; ``remaining``: an
        estimate the ``earliest-finish`` start reads in place of what the run reveals."""
        return cls(type_order=config.type_order, elastic=config.elastic, start=config.start, remaining=remaining)

    @property
    def monotone(self) -> bool:
        """With ``start="now"``, pack reads the job and the placeable free GPUs only: see
        ``policy.monotone``. A job that waits for faster GPUs may start later on fewer."""
        return self.start == "now"

    @property
    def reconsiders(self) -> bool:
        """With ``start="earliest-finish"``, a job held back may start once another has taken the
        faster GPUs it waited for: see ``policy.reconsiders``."""
        return self.start != "now"

    def place(self, view: ClusterView, job: int) -> Start | None:
        spec = view.job(job)
        seen, grown, refused = self._refused
        now = view.room_grown()
        if seen is not view or grown != now:
            refused = set()
            self._refused = (view, now, refused)
        size = (spec.num_gpus, spec.gpu_types)
        if size in refused:
            return None
        for n in start_sizes(spec, self.elastic):
            alloc = pack(view, spec, n, self.pools, type_order=self.type_order)
            if alloc is not None:
                if self.start != "now" and waits(
                    view, spec, alloc, self.pools, self._released, remaining=self.remaining
                ):
                    return None
                return Start(job, alloc)
        refused.add(size)
        return None


Releases = dict[int, list[tuple[float, int]]]
"""Per server id: (when, GPUs) each running job frees there, soonest first."""


def waits(
    view: ClusterView,
    job: JobSpec,
    alloc: Alloc,
    pools: Sequence[Pool],
    released: Callable[[ClusterView], Releases],
    factors: Sequence[float] | None = None,
    remaining: Remaining | None = None,
) -> bool:
    """Whether ``job`` would end sooner by waiting for one server that runs it faster (of a GPU
    type it allows, in ``pools``) to hold as many free GPUs than by starting on ``alloc`` now: a
    server's wait is when the jobs running on it, ending in order of their remaining work over
    their rate now, have freed enough of its GPUs (the jobs queued meanwhile, and its placeability
    then, left out); a run time is the job's remaining work over its nominal rate on the type,
    times the server's speed factor in ``factors`` where given (an oracle's true ones; else 1).
    Never where the remaining work is not known: not revealed (information ``none``) and no
    ``remaining`` estimate given (which ``released`` should read too). ``released``:
    :func:`releases` (or a :class:`ReleaseMemo`)."""
    left = view.remaining_work(job.job_id) if remaining is None else remaining(view, job.job_id)
    if not left > 0:
        return False
    n = sum(k for _, k in alloc)
    servers = view.servers
    here = servers[alloc[0][0]].gpu_type.name
    slowest = 1.0 if factors is None else min(factors[s] for s, _ in alloc)
    end_now = left / (view.rate(job.job_id, n, len(alloc), here) * slowest)
    frees: Releases | None = None
    for pool in pools:
        for t in types_for(view, job, pool, n):
            rate = view.rate(job.job_id, n, 1, t)
            if factors is None and left / rate >= end_now:
                continue  # (no server of the type is faster)
            for sid in servers_of(view, t, pool):
                end = left / (rate if factors is None else rate * factors[sid])
                have = view.free(sid)
                if end >= end_now or have >= n or servers[sid].num_gpus < n or not view.placeable(sid):
                    continue  # (one with room now: the placement chose another)
                if frees is None:
                    frees = released(view)
                for at, k in frees.get(sid, ()):
                    have += k
                    if have >= n:
                        if at - view.now + end < end_now:
                            return True
                        break
    return False


def releases(view: ClusterView, remaining: Remaining | None = None) -> Releases:
    """When the running jobs free their GPUs, per server, by their remaining work (as revealed,
    or the estimate ``remaining``) over their rate now (a job checkpointing after a preemption,
    or not progressing, or of unknown remaining work: left out)."""
    out: Releases = {}
    for j in view.running:
        st = view.state(j)
        left = st.remaining_work if remaining is None else remaining(view, j)
        if st.status != JobStatus.RUNNING or not st.rate > 0 or not left >= 0:
            continue
        at = max(view.now, st.restarting_until) + left / st.rate
        for s, k in (*st.base, *st.flex):
            out.setdefault(s, []).append((at, k))
    for v in out.values():
        v.sort()
    return out


@dataclass
class ReleaseMemo:
    """:func:`releases` (with the estimate ``remaining``, if given), computed again only when the
    view, the time or a running job's stamp changed (a decision point asks for every pending job
    it walks; an estimate may change only with a finish, which changes the running jobs)."""

    remaining: Remaining | None = None
    _held: tuple[object, float, list[tuple[int, int]], Releases] = field(
        default=(None, math.nan, [], {}), init=False, repr=False, compare=False
    )

    def __call__(self, view: ClusterView) -> Releases:
        seen, at, stamps, out = self._held
        now = view.running_stamps()
        if seen is not view or at != view.now or stamps != now:
            out = releases(view, self.remaining)
            self._held = (view, view.now, now, out)
        return out


_SERVERS: weakref.WeakKeyDictionary[ClusterView, dict[tuple[str, Pool], tuple[int, ...]]] = weakref.WeakKeyDictionary()
""":func:`servers_of`'s answers, kept per view (dropped with it)."""


def servers_of(view: ClusterView, gpu_type: str, pool: Pool) -> tuple[int, ...]:
    """Every server of ``gpu_type`` in ``pool``, in id order (placeable now or not, full or not)."""
    memo = _SERVERS.get(view)
    if memo is None:
        memo = _SERVERS[view] = {}
        for sid, server in enumerate(view.servers):
            key = (server.gpu_type.name, server.pool)
            memo[key] = (*memo.get(key, ()), sid)
    return memo.get((gpu_type, pool), ())


@dataclass(frozen=True)
class PackConfig(Settings):
    """Settings of the policies that place with :func:`pack` alone (``fifo``, ``sjf``, ``qssf``).

    :param type_order: ``fastest`` or ``listed`` (:data:`TYPE_ORDERS`).
    :param elastic: ``max`` or ``requested`` (:data:`ELASTIC_STARTS`).
    :param start: ``now`` or ``earliest-finish`` (:data:`STARTS`)."""

    type_order: Annotated[str, Choice(TYPE_ORDERS)] = "fastest"
    elastic: Annotated[str, Choice(ELASTIC_STARTS)] = "max"
    start: Annotated[str, Choice(STARTS)] = "now"


@dataclass(frozen=True)
class PackEftConfig(PackConfig):
    """Settings of ``sjf-eft``: ``PackConfig``'s, starting by ``earliest-finish``."""

    start: Annotated[str, Choice(STARTS)] = "earliest-finish"


class SortedQueue:
    """The pending jobs a policy tracks, kept sorted by a key fixed when a job (re-)enters.

    ``sync`` takes in the jobs that entered the queue since the previous sync; ``walk`` yields
    the pending jobs in key order and drops the ones that left the queue (started) on the way.
    """

    def __init__(self, key: Callable[[ClusterView, int], tuple[float, ...]]) -> None:
        self._key = key
        self._items: list[tuple[tuple[float, ...], int]] = []
        self._cursor = 0

    def sync(self, view: ClusterView) -> None:
        jobs, self._cursor = view.entered_since(self._cursor)
        self.add(view, jobs)

    def rebuild(self, view: ClusterView) -> None:
        """Forget everything and take in every pending job (keys recomputed now)."""
        self._items = []
        self._cursor = view.entered_since(0)[1]
        self.add(view, view.pending)

    def add(self, view: ClusterView, jobs: Iterable[int]) -> None:
        new = [(self._key(view, job), job) for job in tuple(jobs)]
        if len(new) > 32:  # a burst: one sort (stable, so the same order as inserting one by one)
            self._items.extend(new)
            self._items.sort()
        else:
            for item in new:
                bisect.insort(self._items, item)

    def walk(self, view: ClusterView) -> Iterator[int]:
        items = self._items
        i = 0
        while i < len(items):
            job = items[i][1]
            if view.status_of(job) != _PENDING:
                del items[i]
                continue
            yield job
            if i < len(items) and items[i][1] == job and view.status_of(job) != _PENDING:
                del items[i]
            else:
                i += 1

    def __len__(self) -> int:
        return len(self._items)


Size = tuple[int, frozenset[str] | None]
"""A size class: (GPUs, the GPU types allowed; None = any)."""


class SortedKeys:
    """Unique keys in order, in blocks of at most ``2 * BLOCK``: adding or removing one moves at
    most a block's items, not the whole list (a queue of 100,000 jobs stays cheap to edit)."""

    BLOCK = 512

    def __init__(self) -> None:
        self._blocks: list[list[tuple[float, ...]]] = []
        self._maxes: list[tuple[float, ...]] = []  # each block's last key
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, key: tuple[float, ...]) -> None:
        blocks, maxes = self._blocks, self._maxes
        self._n += 1
        if not blocks:
            blocks.append([key])
            maxes.append(key)
            return
        b = bisect.bisect_left(maxes, key)
        if b == len(maxes):
            b -= 1
            blocks[b].append(key)
            maxes[b] = key
        else:
            bisect.insort(blocks[b], key)
        block = blocks[b]
        if len(block) > 2 * self.BLOCK:
            blocks.insert(b + 1, block[self.BLOCK :])
            del block[self.BLOCK :]
            maxes.insert(b, block[-1])

    def extend(self, keys: Iterable[tuple[float, ...]]) -> None:
        """Add many keys (one sort when they are many beside those already here)."""
        keys = list(keys)
        if 8 * len(keys) < self._n:
            for key in keys:
                self.add(key)
            return
        items = [k for block in self._blocks for k in block]
        items.extend(keys)
        items.sort()
        step = self.BLOCK
        self._blocks = [items[i : i + step] for i in range(0, len(items), step)]
        self._maxes = [block[-1] for block in self._blocks]
        self._n = len(items)

    def remove(self, key: tuple[float, ...]) -> None:
        """Remove ``key`` (it must be there)."""
        blocks, maxes = self._blocks, self._maxes
        b = bisect.bisect_left(maxes, key)
        block = blocks[b]
        i = bisect.bisect_left(block, key)
        assert block[i] == key
        del block[i]
        self._n -= 1
        if not block:
            del blocks[b]
            del maxes[b]
        elif i == len(block):
            maxes[b] = block[-1]

    def first(self) -> tuple[float, ...]:
        """The smallest key (there must be one)."""
        return self._blocks[0][0]

    def after(self, key: tuple[float, ...]) -> tuple[float, ...] | None:
        """The smallest key above ``key`` (which need not be there), or None."""
        b = bisect.bisect_right(self._maxes, key)
        if b == len(self._maxes):
            return None
        block = self._blocks[b]
        return block[bisect.bisect_right(block, key)]

    def __iter__(self) -> Iterator[tuple[float, ...]]:
        for block in self._blocks:
            yield from block


class RankedQueue:
    """Pending jobs in the order of a key (keys are unique: they end with the job id), one sorted
    list per size class, so that a walk passes over a whole class that cannot fit in one step.
    A job has at most one entry: adding it again moves it."""

    def __init__(self) -> None:
        self._lists: dict[Size, SortedKeys] = {}
        self._key: dict[int, tuple[float, ...]] = {}
        self._size: dict[int, Size] = {}

    def __len__(self) -> int:
        return len(self._key)

    def add(self, job: int, key: tuple[float, ...], size: Size) -> None:
        self.discard(job)
        self._key[job] = key
        self._size[job] = size
        items = self._lists.get(size)
        if items is None:
            items = self._lists[size] = SortedKeys()
        items.add(key)

    def extend(self, entries: Iterable[tuple[int, tuple[float, ...], Size]]) -> None:
        """``add`` each (job, key, size) of ``entries`` (a job listed twice keeps its last
        entry); a burst is sorted in once per class instead of inserted one by one."""
        last = {job: (key, size) for job, key, size in entries}
        if len(last) <= 32:
            for job, (key, size) in last.items():
                self.add(job, key, size)
            return
        for job in last:
            self.discard(job)
        new: dict[Size, list[tuple[float, ...]]] = {}
        for job, (key, size) in last.items():
            self._key[job] = key
            self._size[job] = size
            new.setdefault(size, []).append(key)
        for size, keys in new.items():
            items = self._lists.get(size)
            if items is None:
                items = self._lists[size] = SortedKeys()
            items.extend(keys)

    def discard(self, job: int) -> None:
        key = self._key.pop(job, None)
        if key is not None:
            size = self._size.pop(job)
            items = self._lists[size]
            items.remove(key)
            if not len(items):  # (only classes with jobs are kept)
                del self._lists[size]

    def walk(self, fits: Callable[[Size], bool]) -> Iterator[tuple[float, ...]]:
        """The keys in order, of the size classes that ``fits``: asked when a class's next key
        comes up; once it says no, the rest of the class is passed over (so the caller must only
        ever take room away during a walk, as starts do). The caller may discard the key just
        yielded."""
        lists = list(self._lists.values())
        sizes = list(self._lists)
        heap = [(items.first(), c) for c, items in enumerate(lists)]
        heapq.heapify(heap)
        while heap:
            key, c = heap[0]
            if not fits(sizes[c]):
                heapq.heappop(heap)
                continue
            yield key
            following = lists[c].after(key)
            if following is not None:
                heapq.heapreplace(heap, (following, c))
            else:
                heapq.heappop(heap)


class Room:
    """Free GPUs per type on the placeable servers of ``pools`` (all pools if None), counted when
    first asked and again after :meth:`taken`; :meth:`fits`: whether a job of a size class could
    start on them (its GPUs on one type it allows: no placement can do with less)."""

    def __init__(self, view: ClusterView, pools: Sequence[Pool] | None = None) -> None:
        self.view = view
        self.pools = pools
        self._free: dict[str, int] | None = None
        self._fits: dict[Size, bool] = {}

    def taken(self) -> None:
        """GPUs may have been taken since: count again."""
        self._free = None

    def fits(self, size: Size) -> bool:
        free = self._free
        if free is None:
            free = self._free = {}
            for t, p in self.view.pool_types():
                if self.pools is None or p in self.pools:
                    free[t] = free.get(t, 0) + self.view.total_free(t, p)
            self._fits = {}
        ok = self._fits.get(size)
        if ok is None:
            gpus, types = size
            ok = self._fits[size] = any(f >= gpus for t, f in free.items() if types is None or t in types)
        return ok


Victim = tuple[float, int, int]  # (a sort key, job, GPUs): a running job that may yield its GPUs


def take_room(
    rows: list[Victim], free: dict[str, int], gpu_type: str, need: int, key_floor: float = -math.inf
) -> list[int] | None:
    """The jobs to preempt so that ``need`` GPUs of ``gpu_type`` are free: the first of ``rows``
    (in their order, up to the first whose key is below ``key_floor``) whose GPUs, with the
    ``free`` ones, reach ``need``. Those rows leave ``rows`` and ``free[gpu_type]`` keeps what is
    left over; ``None`` (nothing changed) if they cannot reach it."""
    taken, gpus = [], free[gpu_type]
    for row in rows:
        if gpus >= need or row[0] < key_floor:
            break
        taken.append(row)
        gpus += row[2]
    if gpus < need:
        return None
    for row in taken:
        rows.remove(row)
    free[gpu_type] = gpus - need
    return [row[1] for row in taken]


def free_gpus(view: ClusterView, pools: Sequence[Pool]) -> int:
    """Free GPUs on placeable servers of the given pools, all types."""
    return sum(view.total_free(t, p) for t, p in view.pool_types() if p in pools)
