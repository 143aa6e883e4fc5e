"""Aryl's placement (section 5.3): best fit over servers, with pool preferences.

A job's gang of ``need`` GPUs (all of one GPU type, on one pool: ours) is packed by
:func:`best_fit`: if one server holds it, the server whose free GPUs fit it most tightly (a
non-empty server before an empty one, lowest id among equals); otherwise whole empty servers for
each full server's worth and the tightest fit for the remainder; if the free GPUs are too
fragmented for that, the servers with the most free GPUs, the last one chosen by best fit for
the remainder (fewest servers). The same function runs on the live view (phase 1 starts) and on
the virtual free maps (:class:`FreeMap`) on which the room component and phase 2 plan, so they
decide alike. Phase 2 places the flexible workers of all jobs in decreasing order of demand (best
fit decreasing); phase 1 places jobs in its priority order (see ``heuristics/aryl.py``).

Pools (Aryl section 5.3): an inelastic job tries training servers first, then loaned inference
servers (if it accepts their GPU type); an elastic job the other way round, so that its workers
sit where a reclaim can scale them in. With ``group_flex`` an elastic job's flexible workers never
share a server with its base workers, so the servers holding only flexible workers can go back
without a preemption.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Alloc, ClusterView, Start
from heuristics.common import types_for

Key = tuple[str, Pool]


def best_fit(ids: Sequence[int], free: Sequence[int], cap: Sequence[int], need: int) -> Alloc | None:
    """Pack ``need`` GPUs on the servers ``ids`` (ascending) with ``free`` GPUs out of ``cap``
    (sequences or numpy arrays).

    Returns ``((server, gpus), ...)`` or ``None`` if the free GPUs do not add up to ``need``.
    """
    return fit_lists([int(i) for i in ids], [int(f) for f in free], max((int(n) for n in cap), default=0), need)


def fit_lists(ids: Sequence[int], free: Sequence[int], size: int, need: int) -> Alloc | None:
    """:func:`best_fit` on plain lists or tuples, ``size`` = the largest server's GPUs (the hot
    path: small lists cost less in plain Python than in numpy calls)."""
    if need <= 0 or sum(free) < need:
        return None
    for f in range(need, max(free) + 1):  # the tightest single server, lowest id among equals
        if f in free:
            return ((ids[free.index(f)], need),)
    full, rest = divmod(need, size)
    empty = [i for i, f in enumerate(free) if f == size]
    if len(empty) >= full:
        out = [(ids[i], size) for i in empty[:full]]
        if rest == 0:
            return tuple(out)
        taken = set(empty[:full])
        best = -1
        for i, f in enumerate(free):
            if i not in taken and f >= rest and (best < 0 or f < free[best]):
                best = i
        if best >= 0:
            return (*out, (ids[best], rest))
    return _spread(ids, free, need)


def _spread(ids: Sequence[int], free: Sequence[int], need: int) -> Alloc:
    """Most free first (lowest id among equals); the last server is the tightest that holds the
    remainder. The caller checked that the free GPUs add up to ``need``.

    The servers are walked by free GPUs, from the most down, each level's in id order (``count``
    and ``index`` find them, so only the servers taken cost a step); the tightest server that
    holds the remainder is one of a lower level than the one being walked (none of which is taken:
    the lowest id of the lowest level that holds it), or else the one being walked."""
    out: list[tuple[int, int]] = []
    left = need
    for f in range(max(free), 0, -1):
        i = -1
        for _ in range(free.count(f)):
            i = free.index(f, i + 1)
            if f >= left:
                for g in range(left, f):
                    if g in free:
                        i = free.index(g)
                        break
                out.append((ids[i], left))
                return tuple(out)
            out.append((ids[i], f))
            left -= f
    raise AssertionError("best_fit checked the total")


@dataclass(frozen=True)
class ServerIndex:
    """The static server layout, per (GPU type, pool): ids (ascending) and GPUs per server, as
    numpy arrays (``ids``, ``cap``) and as lists (``id_lists``, ``sizes``: the largest server's
    GPUs per key); ``type_size``: the largest server's GPUs per GPU type; ``pick``: per key, a
    function from a per-server list to the tuple of its entries at the key's ids (in C: cheaper
    than a list comprehension); ``at``: a server's position among its key's ids."""

    ids: dict[Key, np.ndarray]
    cap: dict[Key, np.ndarray]
    key_of: tuple[Key, ...]
    id_lists: dict[Key, list[int]] = field(default_factory=dict)
    sizes: dict[Key, int] = field(default_factory=dict)
    type_size: dict[str, int] = field(default_factory=dict)
    pick: dict[Key, Callable[[Sequence[int]], tuple[int, ...]]] = field(default_factory=dict)
    at: tuple[int, ...] = ()

    @classmethod
    def of(cls, view: ClusterView) -> ServerIndex:
        ids: dict[Key, list[int]] = {}
        for s in view.servers:
            ids.setdefault((s.gpu_type.name, s.pool), []).append(s.server_id)
        arr = {k: np.array(v, dtype=np.int64) for k, v in ids.items()}
        caps = {k: np.array([view.servers[i].num_gpus for i in v], dtype=np.int64) for k, v in ids.items()}
        key_of = tuple((s.gpu_type.name, s.pool) for s in view.servers)
        sizes = {k: max(view.servers[i].num_gpus for i in v) for k, v in ids.items()}
        type_size: dict[str, int] = {}
        for (t, _), n in sizes.items():
            type_size[t] = max(type_size.get(t, 0), n)
        at = [0] * len(view.servers)
        for v in ids.values():
            for i, sid in enumerate(v):
                at[sid] = i
        pick = {k: _picker(v) for k, v in ids.items()}
        return cls(arr, caps, key_of, ids, sizes, type_size, pick, tuple(at))


def _picker(ids: list[int]) -> Callable[[Sequence[int]], tuple[int, ...]]:
    """``lambda free: tuple(free[i] for i in ids)``, in C (``itemgetter`` of one id gives no tuple)."""
    if len(ids) == 1:
        one = ids[0]
        return lambda free: (free[one],)
    return operator.itemgetter(*ids)


def pool_order(
    view: ClusterView, spec: JobSpec, loaned_first: bool, gpu_type: str | None = None, type_order: str = "fastest"
) -> list[Key]:
    """The (type, pool) pairs ``spec`` may use, in order of preference: loaned inference servers
    first if ``loaned_first``, else training servers first; within a pool the types in the order
    of ``type_order`` (``heuristics.common.types_for``, at the job's requested GPUs). ``gpu_type``
    restricts to one type (flexible workers follow their base's type)."""
    first = Pool.INFERENCE if loaned_first else Pool.TRAINING
    second = Pool.TRAINING if loaned_first else Pool.INFERENCE
    return [
        (t, p)
        for p in (first, second)
        for t in types_for(view, spec, p, spec.num_gpus, type_order)
        if gpu_type is None or t == gpu_type
    ]


class FreeMap:
    """Virtual free GPUs per server (phase 2 plans on it before any action is taken), with the
    total per (type, pool) kept up to date. ``free`` is a plain list (cheap to read and edit one
    server at a time); ``totals``: the totals per (type, pool) (a caller that edits ``free``
    itself, as :meth:`give` does, keeps them up to date)."""

    def __init__(self, index: ServerIndex, free: list[int], totals: dict[Key, int] | None = None) -> None:
        self.index = index
        self.free = free  # per server id; 0 where nothing may be placed
        self.totals = (
            totals if totals is not None else {k: sum([free[i] for i in ids]) for k, ids in index.id_lists.items()}
        )

    @classmethod
    def now(cls, index: ServerIndex, view: ClusterView) -> FreeMap:
        """The GPUs free now (the totals are the view's own per (type, pool))."""
        return cls(index, view.free_list(), {k: view.total_free(*k) for k in index.id_lists})

    def copy(self) -> FreeMap:
        return FreeMap(self.index, self.free.copy(), self.totals.copy())

    def total(self, key: Key) -> int:
        return self.totals.get(key, 0)

    def type_total(self, gpu_type: str) -> int:
        """Free GPUs of one type over its pools."""
        return sum(n for (t, _), n in self.totals.items() if t == gpu_type)

    def fit(self, key: Key, need: int, exclude: Iterable[int] = ()) -> Alloc | None:
        index = self.index
        free: Sequence[int] = index.pick[key](self.free)
        if exclude:
            key_of = index.key_of
            ex = [i for i in exclude if key_of[i] == key]
            if ex:
                free = list(free)
                for i in ex:
                    free[index.at[i]] = 0
        return fit_lists(index.id_lists[key], free, index.sizes[key], need)

    def take(self, alloc: Iterable[tuple[int, int]]) -> None:
        free, total, key_of = self.free, self.totals, self.index.key_of
        for s, n in alloc:
            free[s] -= n
            total[key_of[s]] -= n
            assert free[s] >= 0, "virtual placement over capacity"

    def give(self, alloc: Iterable[tuple[int, int]]) -> None:
        free, total, key_of = self.free, self.totals, self.index.key_of
        for s, n in alloc:
            free[s] += n
            total[key_of[s]] += n


def base_size(spec: JobSpec, elastic: bool) -> int:
    """Phase 1's demand: an elastic job's base (``min_gpus``) when elasticity is on, else the
    requested ``num_gpus``."""
    return spec.min_gpus if elastic and spec.elastic else spec.num_gpus


@dataclass
class ArylPlacement:
    """Placement component (``envs.sim.policy.Placement``): start a pending job at its base
    demand by best fit, on the first (type, pool) of its preference order that holds it.
    Caches the server layout and each job's preferences: one instance per run.

    :param elastic: start elastic jobs at ``min_gpus`` (Aryl) or at ``num_gpus`` (Basic).
    :param loaned_first: elastic jobs prefer loaned inference servers (Aryl; off in the
        placement ablation ``aryl-nogroup``).
    :param type_order: the order of a pool's GPU types (``heuristics.common.TYPE_ORDERS``).
    """

    elastic: bool = True
    loaned_first: bool = True
    type_order: str = "fastest"
    _index: ServerIndex | None = field(default=None, init=False, repr=False)
    _keys: dict[tuple[int, str | None], list[Key]] = field(default_factory=dict, init=False, repr=False)
    # pool_order's answers by all they depend on (those of types_for, and the pool order)
    _orders: dict[tuple[object, ...], list[Key]] = field(default_factory=dict, init=False, repr=False)
    _starts: dict[int, tuple[int, list[Key]]] = field(default_factory=dict, init=False, repr=False)

    def index(self, view: ClusterView) -> ServerIndex:
        if self._index is None:
            self._index = ServerIndex.of(view)
        return self._index

    def keys(self, view: ClusterView, spec: JobSpec, gpu_type: str | None = None) -> list[Key]:
        """The (type, pool) pairs the job may use, most preferred first (cached per job)."""
        k = (spec.job_id, gpu_type)
        keys = self._keys.get(k)
        if keys is None:
            loaned_first = self.loaned_first and self.elastic and spec.elastic
            alike = (loaned_first, gpu_type, spec.gpu_types, spec.model, spec.num_gpus)
            keys = self._orders.get(alike)
            if keys is None:
                keys = self._orders[alike] = pool_order(view, spec, loaned_first, gpu_type, self.type_order)
            self._keys[k] = keys
        return keys

    def demand(self, spec: JobSpec) -> int:
        return base_size(spec, self.elastic)

    def start_plan(self, view: ClusterView, job: int) -> tuple[int, list[Key]]:
        """(:meth:`demand`, :meth:`keys`) of a job (cached per job)."""
        plan = self._starts.get(job)
        if plan is None:
            spec = view.job(job)
            plan = self._starts[job] = (self.demand(spec), self.keys(view, spec))
        return plan

    def place(self, view: ClusterView, job: int) -> Start | None:
        need, keys = self.start_plan(view, job)
        for t, p in keys:
            if view.total_free(t, p) < need:
                continue
            sid = view.best_fit(t, p, need)
            if sid is not None:
                return Start(job, ((sid, need),))
            index = self.index(view)
            alloc = fit_lists(index.id_lists[t, p], index.pick[t, p](view.free_list()), index.sizes[t, p], need)
            if alloc is not None:
                return Start(job, alloc)
        return None
