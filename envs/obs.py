"""Observation encoding: fixed-size, normalised float32 vectors (layout version ``OBS_VERSION``).

Every feature is defined once, here, by name (:data:`JOB`, :data:`CLUSTER`, :data:`SERVER`), and
read by name everywhere else; the env docstrings' tables list the same names in the same order
(a test checks them). Every feature lies in [-1, 1] (log-scaled and clipped). One job-row path
(:meth:`Encoder.job_rows`) serves the ordering env's slots and the placement env's current job.

Everything is read through the simulator's :class:`~envs.sim.policy.ClusterView`, so a duration
feature carries what the run's information level reveals (the truth, the estimate, or nothing:
0 at ``none``), and machine speeds only what observed job progress hints at
(:class:`SpeedEstimator`).

Layout history: 1, the first ordering slots; 2, ``attained``, ``remaining_base`` and
``ahead_gpus``; 3, the placement servers' ``fits_left`` and ``spare``; 4, features by name, the
placement env's job row filled like the ordering env's (``slack``, ``preemptions``, ``attained``
and ``ahead_gpus`` were left at 0 there), durations as the information level reveals them, and
``predicted`` (a QSSF prediction from finished jobs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envs.core import Core
from envs.sim import libm
from envs.sim.model import JobClass, Pool
from envs.sim.policy import ClusterView, PoolState, ServerLoads
from envs.sim.throughput import packed_servers
from heuristics.qssf import DurationHistory, template_of

OBS_VERSION = 4


@dataclass(frozen=True)
class Features:
    """An ordered set of named features: ``col[name]`` is a feature's column."""

    items: tuple[tuple[str, str], ...]  # (name, what it holds)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.items)

    @property
    def col(self) -> dict[str, int]:
        return {n: i for i, (n, _) in enumerate(self.items)}

    def __len__(self) -> int:
        return len(self.items)


JOB = Features(
    (
        ("present", "1 if the slot holds a job"),
        ("gpus", "log2(1 + requested GPUs) / 6"),
        ("base_gpus", "log2(1 + min GPUs) / 6"),
        ("elastic_range", "log2(1 + max - min GPUs) / 6"),
        ("any_type", "1 if it may run on any GPU type (so on loaned inference servers)"),
        ("remaining", "log1p(remaining run time alone, h) / 5, as revealed (0 at information none)"),
        ("waiting", "log1p(hours waited so far) / 5"),
        ("te", "1 for a trial-and-error job"),
        ("has_deadline", "1 if it has a deadline"),
        ("slack", "tanh((deadline - now - remaining) / 24 h); 0 without a deadline"),
        ("preemptions", "min(preemptions, 5) / 5"),
        ("fits", "1 if it can start now (the action mask)"),
        ("inference_speed", "its speed on the inference GPU type / on the training type (0 if pinned)"),
        ("attained", "log1p(GPU-hours held so far) / 5"),
        ("remaining_base", "log1p(remaining run time at its min GPUs, h) / 5, as remaining"),
        ("ahead_gpus", "min GPUs of the visible jobs with less remaining_base / GPUs open to training"),
        ("predicted", "log1p(duration predicted from finished jobs of its user and template, h) / 5 (QSSF)"),
    )
)
CLUSTER = Features(
    (
        ("training_free", "free / up GPUs of the training pool"),
        ("loaned_free", "free loaned GPUs / all inference GPUs"),
        ("loaned", "servers on loan / inference servers"),
        ("reclaiming", "servers being reclaimed / inference servers"),
        ("inference_load", "inference demand, share of its GPUs"),
        ("day_sin", "sin of the time of day"),
        ("day_cos", "cos of the time of day"),
        ("queue", "log1p(jobs waiting) / 5"),
        ("hidden", "log1p(jobs waiting beyond the visible slots) / 5"),
        ("running", "log1p(jobs holding GPUs) / 5"),
        ("to_arrive", "share of the episode's jobs not yet submitted"),
        ("largest_free", "largest free block on one training server / its size"),
    )
)
SERVER = Features(
    (
        ("placeable", "1 if new workers may go there (up; training, or on loan and not reclaimed)"),
        ("free", "free GPUs / its GPUs"),
        ("inference", "1 for an inference server"),
        ("reclaiming", "1 if it is being reclaimed"),
        ("type_speed", "training speed of its GPU type / 2 (V100 = 0.5)"),
        ("speed_est", "estimated machine speed factor - 1, learned from observed job speeds"),
        ("speed_std", "the estimate's standard deviation (in log-speed)"),
        ("jobs", "log1p(jobs hosted) / 3"),
        ("allowed", "1 if the current job may use its GPU type"),
        ("chosen", "1 if the current job already has workers there"),
        ("valid", "1 if a worker of the current job may go there now (the action mask)"),
        ("fits_left", "1 if its free GPUs hold all the workers still to place"),
        ("spare", "(free GPUs - workers still to place) / its GPUs, clipped to [-1, 1]"),
    )
)
_J, _C, _S = JOB.col, CLUSTER.col, SERVER.col
_NJ, _NC, _NS = len(JOB), len(CLUSTER), len(SERVER)
_WAITING, _SLACK, _FITS, _AHEAD, _PREDICTED = (_J[n] for n in ("waiting", "slack", "fits", "ahead_gpus", "predicted"))
_REMAINING, _ATTAINED, _REMAINING_BASE, _PREEMPTIONS = (
    _J[n] for n in ("remaining", "attained", "remaining_base", "preemptions")
)
_QT, _QS, _REM, _LB, _MG, _DL = range(6)  # Encoder._inputs' fields: queued time and since, remaining
# (as revealed), remaining at the base demand, min GPUs, deadline


def _log(x: float, scale: float) -> float:
    return min(1.0, math.log1p(max(0.0, x)) / scale)


def _logs(x: np.ndarray, scale: float) -> np.ndarray:
    return np.minimum(1.0, libm.log1p(np.maximum(x, 0.0)) / scale)


def _hours(seconds: float) -> float:
    """``min(log1p(hours) / 5, 1)`` of ``seconds`` >= 0 (nan stays nan)."""
    value = math.log1p(seconds / 3600.0) / 5.0
    return 1.0 if value > 1.0 else value


class SpeedEstimator:
    """Each machine's speed factor, learned from the speeds its jobs are observed to run at (ours,
    in the spirit of the dual-agent paper's random-walk Gaussian process over machine similarity).

    Every run of a job gives one observation ``y = log(observed rate / nominal rate)``
    (:class:`~envs.sim.policy.SpeedSample`: the nominal rate holds the throughput profile, the
    job's batch regime and the scenario's known contention model, so ``y`` holds the machine
    factor and the run's fluctuation), credited to each server it runs on (the slowest one sets a
    gang's pace, so the others' estimates are biased low: ours, accepted for one-server jobs being
    the common case). Model: ``log factor = group effect + machine effect``, group effects
    ~ N(0, 0.15^2) shared by the machines of one rack / SKU group (the similarity), machine effects
    ~ N(0, 0.05^2), observation noise ~ N(0, 0.1^2). The group effect's posterior pools all its
    machines' observations; each machine's posterior then adds its own. Conjugate normal updates,
    exact for this model given the variances; cheap enough for every placement step.
    """

    GROUP_VAR, MACHINE_VAR, NOISE_VAR = 0.15**2, 0.05**2, 0.1**2

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.group = np.array([s.group for s in view.servers])
        self.sum = np.zeros(len(self.group))
        self.count = np.zeros(len(self.group))
        self._seen: set[tuple[int, int]] = set()  # (job, run) already counted
        groups = np.unique(self.group)
        # each group's machines (all of them: a slice, the same elements in the same order)
        self._groups: list[np.ndarray | slice] = (
            [slice(None)] if len(groups) == 1 else [self.group == g for g in groups]
        )
        self._estimate: tuple[np.ndarray, np.ndarray] | None = None  # while nothing new is seen
        # the jobs whose stamp changed since the last look: a run not seen yet changes its job's
        # stamp (a start, rescale or migration, or a rate that turns positive), so while no stamp
        # changed there is nothing new to look for
        self._changed = view.watch_stamps()
        self._looked = False

    def observe(self) -> bool:
        """Take in the runs not seen yet; whether there was any."""
        if self._looked and not self._changed:
            return False
        new = self.view.speed_samples(self._seen, self._changed if self._looked else None)
        self._looked = True
        self._changed.clear()
        for s in new:
            self._seen.add((s.job, s.run))
            y = math.log(s.observed / s.nominal)
            for sid in s.servers:
                self.sum[sid] += y
                self.count[sid] += 1
        if new:
            self._estimate = None
        return bool(new)

    def estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """(posterior mean, posterior std) of every machine's log speed factor (read-only arrays,
        recomputed only after a new observation)."""
        self.observe()
        if self._estimate is None:
            per_obs = self.MACHINE_VAR + self.NOISE_VAR  # an observation seen from the group's side
            g_mean = np.zeros(len(self.group))
            g_var = np.zeros(len(self.group))
            for m in self._groups:
                prec = 1.0 / self.GROUP_VAR + self.count[m].sum() / per_obs
                g_mean[m] = self.sum[m].sum() / per_obs / prec
                g_var[m] = 1.0 / prec
            prior_var = g_var + self.MACHINE_VAR
            prec = 1.0 / prior_var + self.count / self.NOISE_VAR
            mean = (g_mean / prior_var + self.sum / self.NOISE_VAR) / prec
            std = np.sqrt(1.0 / prec)
            mean.flags.writeable = std.flags.writeable = False
            self._estimate = (mean, std)
        return self._estimate


class Encoder:
    """Builds the observations of one episode; ``reset`` after every ``Core.reset``."""

    def __init__(self, core: Core, slots: int) -> None:
        self.core = core
        self.slots = slots
        self.episode: object = None  # the engine this encoder was last reset for

    def reset(self) -> None:
        core = self.core
        self.episode = core.engine
        view = self.view = core.view
        servers = view.servers
        types = {(s.gpu_type.name, s.pool) for s in servers}
        training = next((s.gpu_type.name for s in servers if s.pool == Pool.TRAINING), None)
        inference = next((s.gpu_type.name for s in servers if s.pool == Pool.INFERENCE), None)
        n = view.num_jobs
        specs = [view.job(j) for j in range(n)]
        static = np.zeros((n, len(JOB)), dtype=np.float32)
        base_slow = [1.0] * n
        static[:, _J["present"]] = 1.0
        static[:, _J["gpus"]] = [math.log2(1 + s.num_gpus) / 6 for s in specs]
        static[:, _J["base_gpus"]] = [math.log2(1 + s.min_gpus) / 6 for s in specs]
        static[:, _J["elastic_range"]] = [math.log2(1 + s.max_gpus - s.min_gpus) / 6 for s in specs]
        static[:, _J["any_type"]] = [1.0 if s.gpu_types is None else 0.0 for s in specs]
        static[:, _J["te"]] = [1.0 if s.job_class == JobClass.TE else 0.0 for s in specs]
        static[:, _J["has_deadline"]] = [0.0 if s.deadline is None else 1.0 for s in specs]
        if training is not None:
            col = _J["inference_speed"]
            for j, s in enumerate(specs):
                if s.gpu_types is None and inference is not None:
                    speed = view.rate(j, s.min_gpus, 1, inference) / view.rate(j, s.min_gpus, 1, training)
                    static[j, col] = min(1.0, speed)
                # remaining time at the base demand = remaining work / rate(min GPUs, packed)
                base_slow[j] = 1.0 / view.rate(j, s.min_gpus, packed_servers(s.min_gpus), training)
        self._base_slow = base_slow
        # per job, the inputs of the time-dependent features (fields _QT.._DL, plain floats: a few
        # rows cost less in Python than in numpy): what stays fixed while it waits (Waits), filled
        # in when it enters the queue, and its min GPUs and deadline (nan if none)
        self._inputs = [
            [0.0, 0.0, 0.0, 0.0, float(s.min_gpus), math.nan if s.deadline is None else float(s.deadline)]
            for s in specs
        ]
        self._rows = static  # the static features, then the ones fixed during a wait
        self._counts = [_log(i, 5.0) for i in range(n + 1)]  # _log(c, 5.0) of a count of jobs c
        self._day: tuple[float, tuple[float, float]] = (math.nan, (0.0, 0.0))  # (now, core.time_of_day())
        self._cursor = 0  # position in the view's queue log
        # the ``predicted`` feature by (user, template), each until a finish changes the history
        # key it is read from (_sources: the pairs read from each key)
        self._predicted: dict[tuple[str, str], float] = {}
        self._sources: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        self._template: list[tuple[str, str] | None] = [None] * n  # per job, its (user, template)
        self._training_keys = sorted(k for k in types if k[1] == Pool.TRAINING)
        self._size = max(s.num_gpus for s in servers)
        self._server_gpus = np.array([s.num_gpus for s in servers], dtype=np.float32)
        # the ``jobs`` feature of a server hosting 0, 1, ... jobs (each holds a GPU at least)
        self._hosting = _logs(np.arange(self._size + 1, dtype=np.float64), 3.0)
        self._server_static = np.zeros((len(servers), len(SERVER)), dtype=np.float32)
        for i, server in enumerate(servers):
            self._server_static[i, _S["inference"]] = 1.0 if server.pool == Pool.INFERENCE else 0.0
            self._server_static[i, _S["type_speed"]] = min(1.0, server.gpu_type.speed / 2.0)
        self._server_types = [s.gpu_type.name for s in servers]
        self._allowed: dict[frozenset[str] | None, np.ndarray] = {}  # the "allowed" column by GPU types
        self._loads: ServerLoads | None = None  # the cluster state _server_now holds
        self._server_now = self._server_static
        self.speeds = SpeedEstimator(view)
        # the speed columns of the last estimate: (that estimate, speed_est, speed_std)
        self._speed_cols: tuple[object, np.ndarray, np.ndarray] = (None, np.zeros(0), np.zeros(0))
        self.history = DurationHistory()

    def _sync_waits(self) -> None:
        """Take in the jobs that entered the queue since the last call and wait still: their
        features that stay fixed while they wait (:class:`~envs.sim.policy.Waits`)."""
        view = self.view
        new, self._cursor = view.entered_since(self._cursor)
        if not new:
            return
        pending = view.pending
        jobs = [j for j in dict.fromkeys(new) if j in pending]
        if not jobs:
            return
        w = view.waits(jobs)
        known = view.information != "none"
        reads = (w.remaining, w.attained, w.preemptions, w.queued_time, w.queued_since)
        for j, remaining, attained, preemptions, queued_time, queued_since in zip(jobs, *reads, strict=True):
            remaining = remaining if known else 0.0
            left_base = remaining * self._base_slow[j]
            row = self._rows[j]
            row[_REMAINING] = _hours(remaining)
            row[_ATTAINED] = _hours(attained)
            row[_REMAINING_BASE] = _hours(left_base)
            row[_PREEMPTIONS] = min(preemptions, 5.0) / 5.0
            self._inputs[j][:4] = queued_time, queued_since, remaining, left_base

    def _predictions(self, jobs: Sequence[int]) -> list[float]:
        """The ``predicted`` feature of ``jobs``: ``history.predict`` of each, which reads only
        the job's user and template, computed once per (user, template) and kept until a finish
        changes the history key it reads from (:meth:`DurationHistory.source`)."""
        history, cache, sources = self.history, self._predicted, self._sources
        if history.sync(self.view):
            for key in history.changed:
                for gone in sources.pop(key, ()):
                    del cache[gone]
        templates = self._template
        out = []
        for j in jobs:
            pair = templates[j]
            if pair is None:
                spec = self.view.job(j)
                pair = templates[j] = (spec.user, template_of(spec))
            value = cache.get(pair)
            if value is None:
                key, median = history.source(*pair)
                value = cache[pair] = _hours(median or 0.0)
                sources.setdefault(key, []).append(pair)
            out.append(value)
        return out

    # ------------------------------------------------------------------ job rows (both envs)
    def job_rows(
        self, visible: Sequence[int], fits: Sequence[bool], extra: int | None = None, pools: PoolState | None = None
    ) -> np.ndarray:
        """The rows of the ``visible`` jobs (the ordering env's slots; each may start now where
        ``fits``), and of ``extra`` after them if given and not among them (which fits).
        ``ahead_gpus`` counts the jobs of these rows. Every job must be pending. ``pools``:
        ``view.pools()`` if the caller has it already.

        Incremental: what stays fixed while a job waits is computed once per wait
        (:meth:`_sync_waits`), ``predicted`` once per job and finish; only the time-dependent
        features and those that depend on the set of rows are computed here."""
        jobs = list(visible) if extra is None or extra in visible else [*visible, extra]
        return self._job_rows(jobs, range(len(jobs)), fits, pools)

    def job_row(self, job: int, visible: Sequence[int], pools: PoolState | None = None) -> np.ndarray:
        """The row of pending ``job``, which fits, ``ahead_gpus`` counted among the ``visible``
        jobs and it (the placement env's job): the row of ``job`` in ``job_rows(visible, fits,
        extra=job)``, built alone."""
        jobs = list(visible) if job in visible else [*visible, job]
        return self._job_rows(jobs, [jobs.index(job)], [True], pools)[0]

    def _job_rows(
        self, jobs: list[int], shown: Sequence[int], fits: Sequence[bool], pools: PoolState | None
    ) -> np.ndarray:
        """The rows of ``jobs[i]`` for ``i`` in ``shown``, the ``k``-th of them fitting where
        ``fits[k]`` (and where ``k`` is past ``fits``); ``ahead_gpus`` counts all ``jobs``."""
        view = self.view
        if not jobs:
            return self._rows[:0].copy()
        self._sync_waits()
        pending = view.pending
        if not all(map(pending.__contains__, jobs)):
            j = next(j for j in jobs if j not in pending)
            raise ValueError(f"job {j} is not pending: job rows show waiting jobs only")
        inputs = [self._inputs[j] for j in jobs]
        # shortest-remaining-first: the base GPUs of the jobs ahead of each would go first (a
        # stable sort, as numpy's stable argsort: remaining_base is never nan; sums of whole
        # numbers, exact in any order)
        left_base = [x[_LB] for x in inputs]
        ahead = [0.0] * len(jobs)
        total = 0.0
        for i in sorted(range(len(jobs)), key=left_base.__getitem__):
            ahead[i] = total
            total += inputs[i][_MG]
        p = pools if pools is not None else view.pools()
        room = max(1, p.training_gpus + p.loaned_gpus)
        now = view.now
        picked = [jobs[i] for i in shown]
        rows = self._rows.take(picked, axis=0)  # (indexing by a list costs 20 times more)
        for k, (i, predicted) in enumerate(zip(shown, self._predictions(picked), strict=True)):
            queued_time, queued_since, remaining, _, _, deadline = inputs[i]
            row = rows[k]
            row[_WAITING] = _hours((queued_time + now) - queued_since)
            if deadline == deadline:
                row[_SLACK] = float(np.tanh((deadline - now - remaining) / 86400.0))
            row[_FITS] = fits[k] if k < len(fits) else True
            row[_AHEAD] = min(1.0, ahead[i] / room)
            row[_PREDICTED] = predicted
        return rows

    # ------------------------------------------------------------------ ordering
    def ordering(self, visible: list[int], fits: list[bool]) -> np.ndarray:
        k = self.slots
        out = np.zeros(k * _NJ + _NC, dtype=np.float32)
        n = len(visible)
        pools = self.view.pools()
        if n:
            out[: n * _NJ] = self._job_rows(visible, range(n), fits, pools).ravel()
        out[k * _NJ :] = self._cluster(pools)
        return out

    def cluster(self, pools: PoolState | None = None) -> np.ndarray:
        """The cluster's features (``hidden``: jobs waiting beyond the ``slots`` longest-waiting).
        ``pools``: ``view.pools()`` if the caller has it already."""
        return np.array(self._cluster(pools if pools is not None else self.view.pools()), dtype=np.float32)

    def _cluster(self, p: PoolState) -> tuple[float, ...]:
        """:meth:`cluster`'s values, in ``CLUSTER``'s order (each rounds to float32 where it is
        written: an array of them is the same)."""
        view = self.view
        training_free = (p.training_gpus - p.training_busy) / p.training_gpus if p.training_gpus else 0.0
        if p.inference_gpus:
            loaned_free = (p.loaned_gpus - p.loaned_busy) / p.inference_gpus
            loaned = p.loaned_servers / p.inference_servers
            reclaiming = p.reclaiming_servers / p.inference_servers
            load = p.inference_demand / p.inference_gpus
        else:
            loaned_free = loaned = reclaiming = load = 0.0
        now = view.now
        if self._day[0] != now:
            self._day = (now, self.core.time_of_day())
        day_sin, day_cos = self._day[1]
        waiting = len(view.pending)
        largest = 0.0  # the max over the training keys (all >= 0)
        for t, q in self._training_keys:
            free = view.largest_free(t, q) / self._size
            if free > largest:
                largest = free
        counts = self._counts
        return (  # in CLUSTER's order (the digests of tests/test_obs_identity.py fail on any other)
            training_free,
            loaned_free,
            loaned,
            reclaiming,
            load,
            day_sin,
            day_cos,
            counts[waiting],
            counts[max(0, waiting - self.slots)],
            counts[len(view.running)],
            1.0 - p.arrived / p.jobs,
            largest,
        )

    # ------------------------------------------------------------------ placement
    def _servers_now(self) -> tuple[np.ndarray, ServerLoads]:
        """The server features that depend on the cluster's state only (``placeable``, ``free``,
        ``reclaiming``, ``jobs``) over the static ones, recomputed only when the cluster changed;
        and the reads they come from."""
        loads = self.view.server_loads()
        if self._loads is not loads:
            srv = self._server_static.copy()
            srv[:, _S["placeable"]] = loads.placeable
            srv[:, _S["free"]] = loads.free.astype(np.float32) / self._server_gpus
            srv[:, _S["reclaiming"]] = loads.reclaiming
            srv[:, _S["jobs"]] = self._hosting[loads.hosted]
            self._loads, self._server_now = loads, srv
        return self._server_now, loads

    def placement(self, job: int, left: int, chosen: dict[int, int], valid: np.ndarray) -> np.ndarray:
        """Per-server features for placing the next worker of ``job`` (``left`` still to place,
        ``chosen``: server -> workers already given), then the job's row, then the cluster."""
        view = self.view
        spec = view.job(job)
        ns = len(self._server_gpus)
        g = _NS
        out = np.zeros(ns * g + _NJ + 1 + _NC, dtype=np.float32)
        srv = out[: ns * g].reshape(ns, g)
        srv[:], loads = self._servers_now()
        types = spec.gpu_types
        allowed = self._allowed.get(types)
        if allowed is None:
            allowed = self._allowed[types] = np.array(
                [True] * ns if types is None else [t in types for t in self._server_types], dtype=np.float32
            )
        srv[:, _S["allowed"]] = allowed
        for sid in chosen:
            srv[sid, _S["chosen"]] = 1.0
        estimate = self.speeds.estimate()
        if self._speed_cols[0] is not estimate:  # (the same tuple while nothing new is seen)
            mean, std = estimate
            # (np.minimum(np.maximum()) is np.clip, without its Python wrappers)
            self._speed_cols = (
                estimate,
                np.minimum(np.maximum(libm.expm1(mean), -1.0), 1.0),
                np.minimum(np.maximum(std, 0.0), 1.0),
            )
        srv[:, _S["speed_est"]] = self._speed_cols[1]
        srv[:, _S["speed_std"]] = self._speed_cols[2]
        srv[:, _S["valid"]] = valid
        spare = (loads.free.astype(np.float32) - left) / self._server_gpus
        srv[:, _S["fits_left"]] = spare >= 0.0
        srv[:, _S["spare"]] = np.minimum(np.maximum(spare, -1.0), 1.0)
        off = ns * g
        visible = list(itertools.islice(view.pending, self.slots))
        pools = view.pools()
        out[off : off + _NJ] = self.job_row(job, visible, pools)
        out[off + _NJ] = math.log2(1 + left) / 6
        out[off + _NJ + 1 :] = self._cluster(pools)
        return out
