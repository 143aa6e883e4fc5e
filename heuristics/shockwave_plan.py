"""Shockwave's planner: which job runs in which of the next ``T`` rounds, as a MILP.

Variables: binary ``x[j, t]`` (job ``j`` runs, gang on its ``g_j`` GPUs, in round ``t``);
``y_j >= 0``, the seconds of its remaining run time the window covers; ``u_j``, its linearised
log-progress; ``z``, the largest remaining time after the window. With ``R_j`` the estimated
remaining time at the requested allocation, ``f_j`` the progress so far and ``w_j`` the weights
(1, or the boosts after a relaxation)::

    maximise   (1 / (N T)) sum_j w_j u_j  -  k z
    subject to sum_j g_j x[j, t] <= G                        every round (capacity)
               y_j <= round_s * sum_t x[j, t],  y_j <= R_j     (time the window gives)
               sum_t x[j, t] <= ceil(R_j / round_s)          (no round beyond the job's need; ours)
               p_j = f_j + (1 - f_j) y_j / R_j                 (progress after the window)
               u_j <= log(p_k) + (p_j - p_k) / p_k            every tangent point p_k
               z >= R_j - y_j
               y_j >= L_j                                     (finish-time fairness, optional)

The log is concave and maximised, so the tangent cuts make ``u_j`` the tangent envelope
``min_k [log p_k + (p - p_k)/p_k] >= log p``, exact at each ``p_k`` (ours: geometric points from
0.005 to 1; Shockwave uses an SOS2 interpolation on 0, 0.2, ..., 1 with binaries, which the
concavity makes unnecessary). Progress is mapped linearly onto the remaining time (ours;
Shockwave converts time to epochs with the mean epoch duration seen so far). ``L_j`` comes from
Shockwave's constraint ``T_next + (R_j - y_j) / share <= rho_max F_hat_j``.

Solved by HiGHS (``scipy.optimize.milp``) under a node limit (deterministic: the same problem
gets the same plan on any machine) and a time limit (a safety net): when a limit hits, the best
incumbent is used; without one, :func:`greedy` (ours): jobs by weight then remaining time, each
taking up to its rounds needed in the earliest rounds with room. :func:`solve` first solves the
relaxation over the counts ``n_j`` and keeps it when it packs into rounds (see there).

The MILP's rounds are interchangeable (only ``n_j = sum_t x[j, t]`` enters the objective), so
the policy keeps the counts and picks each round's jobs with :func:`next_round` (ours, in the
spirit of Shockwave's ``rank_in_schedule_jobs``): the jobs that must run now to get their rounds,
then the others in a priority order while the GPUs last.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

logger = logging.getLogger(__name__)

LOG_POINTS: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0)
SHOCKWAVE_BASES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Shockwave's own breakpoints (``log_approximation_bases``), with log(0) read as log(1e-6)."""


def tangent_lines(points: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """(slope, intercept) of log's tangents at ``points``: an envelope above log, exact there."""
    return tuple((1.0 / p, math.log(p) - 1.0) for p in points)


def chord_lines(bases: Sequence[float], origin: float = 1e-6) -> tuple[tuple[float, float], ...]:
    """(slope, intercept) of the chords of log between consecutive ``bases`` (0 read as
    ``origin``): their minimum is Shockwave's piecewise-linear interpolation (below log)."""
    xs = list(bases)
    ys = [math.log(max(b, origin)) for b in xs]
    out = []
    for i in range(len(xs) - 1):
        (x0, y0), (x1, y1) = (xs[i], ys[i]), (xs[i + 1], ys[i + 1])
        a = (y1 - y0) / (x1 - x0)
        out.append((a, y0 - a * x0))
    return tuple(out)


TANGENTS = tangent_lines(LOG_POINTS)


@dataclass(frozen=True)
class PlanInput:
    """One planning problem (arrays indexed by the jobs in the plan).

    :param gpus: GPUs of each job (its gang).
    :param remaining: estimated remaining seconds at the requested allocation, > 0.
    :param progress: fraction of the work done, in [0, 1).
    :param weights: weight of each job's log-progress (1 unless boosted).
    :param capacity: GPUs per round.
    :param rounds: rounds in the window (``T``).
    :param round_s: seconds per round.
    :param k: weight of the largest remaining time, per second.
    :param lower: fairness lower bounds ``L_j`` on ``y_j`` in seconds, or ``None``.
    :param lines: ``(slope, intercept)`` of the cuts whose minimum approximates log (concave).
    """

    gpus: np.ndarray
    remaining: np.ndarray
    progress: np.ndarray
    weights: np.ndarray
    capacity: int
    rounds: int
    round_s: float
    k: float
    lower: np.ndarray | None = None
    lines: tuple[tuple[float, float], ...] = TANGENTS

    @property
    def n(self) -> int:
        return len(self.gpus)

    def need(self) -> np.ndarray:
        """Rounds each job can use: ``ceil(R_j / round_s)``, at most ``T``."""
        return np.minimum(np.ceil(self.remaining / self.round_s - 1e-9), self.rounds).astype(np.int64)


@dataclass(frozen=True)
class Plan:
    """:param x: ``(N, T)`` booleans, job j runs in round t.
    :param status: ``optimal``, ``incumbent`` (a limit hit, best found), ``trimmed`` (the counts,
        trimmed to pack), ``greedy`` (fallback) or
        ``infeasible`` (the fairness bounds cannot hold; ``x`` is empty).
    :param objective: the approximated objective of ``x`` (:func:`objective`).
    :param seconds: wall-clock time of the solve."""

    x: np.ndarray
    status: str
    objective: float
    seconds: float


def log_envelope(p: np.ndarray | float, lines: Sequence[tuple[float, float]] = TANGENTS) -> np.ndarray:
    """``min_k a_k p + b_k``: the piecewise-linear log of the MILP (tangents by default)."""
    a = np.array([ln[0] for ln in lines])
    b = np.array([ln[1] for ln in lines])
    p = np.asarray(p, dtype=float)
    return np.min(a * p[..., None] + b, axis=-1)


def objective(inp: PlanInput, x: np.ndarray) -> float:
    """The MILP's objective for a plan ``x``, with the best ``y`` for it."""
    n_rounds = x.sum(axis=1)
    y = np.minimum(inp.remaining, inp.round_s * n_rounds)
    p = inp.progress + (1.0 - inp.progress) * y / inp.remaining
    u = log_envelope(p, inp.lines)
    return float(np.sum(inp.weights * u) / (inp.n * inp.rounds) - inp.k * np.max(inp.remaining - y))


def feasible_bounds(inp: PlanInput) -> bool:
    """Whether the fairness bounds can hold job by job and in total GPU-rounds."""
    if inp.lower is None:
        return True
    need = inp.need()
    if np.any(inp.lower > np.minimum(inp.remaining, inp.round_s * need) + 1e-6):
        return False
    rounds = np.ceil(np.maximum(inp.lower, 0.0) / inp.round_s - 1e-9)
    return bool(np.sum(inp.gpus * rounds) <= inp.capacity * inp.rounds)


@dataclass(frozen=True)
class SolverLimits:
    """:param time_limit: seconds per HiGHS call (a safety net: a plan cut by it depends on the
        machine's speed, and the run is then not reproducible; it is logged).
    :param node_limit: branch-and-bound nodes per HiGHS call: the deterministic budget.
    :param gap: relative optimality gap.
    :param max_binaries: largest full MILP (jobs x rounds) :func:`solve` falls back to; beyond,
        the counts that do not pack are trimmed (ours: a 900-job full MILP runs into the time
        limit, and the run would not be reproducible)."""

    time_limit: float = 10.0
    node_limit: int = 2000
    gap: float = 1e-3
    max_binaries: int = 4000


def solve(inp: PlanInput, limits: SolverLimits | None = None) -> Plan:
    """Solve the planning MILP (module docstring).

    Its objective depends on ``x`` only through the counts ``n_j = sum_t x[j, t]``. So (ours) the
    MILP over the counts under the total capacity ``sum_j g_j n_j <= G T``, a relaxation, is
    solved first; if :func:`pack` lays its counts into rounds, that ``x`` is optimal for the full
    MILP too. Otherwise the full MILP over ``x`` is solved (with the counts as integer variables,
    on which branching is cheap; branching on the interchangeable rounds is not), or, beyond
    ``max_binaries``, the counts are packed with the jobs that do not fit trimmed (``trimmed``).
    """
    lim = limits or SolverLimits()
    t0 = time.perf_counter()
    n, t_n = inp.n, inp.rounds
    if n == 0:
        return Plan(np.zeros((0, t_n), dtype=bool), "optimal", 0.0, 0.0)
    if not feasible_bounds(inp):
        return Plan(np.zeros((n, t_n), dtype=bool), "infeasible", math.nan, time.perf_counter() - t0)
    counts, status = _milp(inp, lim, rounds=False)
    if counts is not None:
        x = pack(counts, inp.gpus, inp.capacity, t_n)
        if x is not None and _valid(inp, x):
            return Plan(x, status, objective(inp, x), time.perf_counter() - t0)
    elif status == "infeasible":
        return Plan(np.zeros((n, t_n), dtype=bool), "infeasible", math.nan, time.perf_counter() - t0)
    if n * t_n > lim.max_binaries:
        x = pack(counts if counts is not None else np.zeros(n, dtype=np.int64), inp.gpus, inp.capacity, t_n, trim=True)
        if x is not None and counts is not None and _valid(inp, x):
            return Plan(x, "trimmed", objective(inp, x), time.perf_counter() - t0)
        x_full, status = None, "none"
    else:
        x_full, status = _milp(inp, lim, rounds=True)
    if x_full is not None and _valid(inp, x_full):
        return Plan(x_full, status, objective(inp, x_full), time.perf_counter() - t0)
    if status == "infeasible":
        return Plan(np.zeros((n, t_n), dtype=bool), "infeasible", math.nan, time.perf_counter() - t0)
    logger.info("planner: no incumbent; greedy plan for %d jobs", n)
    x = greedy(inp)
    return Plan(x, "greedy", objective(inp, x), time.perf_counter() - t0)


def _milp(inp: PlanInput, lim: SolverLimits, rounds: bool) -> tuple[np.ndarray | None, str]:
    """One HiGHS call. ``rounds``: the full MILP (returns ``x``), else the counts relaxation
    (returns ``n``). Status: ``optimal``, ``incumbent`` (a limit hit), ``infeasible``, ``none``."""
    n, t_n = inp.n, inp.rounds
    nx = n * t_n if rounds else 0
    i_n, iy, iu, iz = nx, nx + n, nx + 2 * n, nx + 3 * n
    nv = iz + 1
    slope = np.array([ln[0] for ln in inp.lines])
    icpt = np.array([ln[1] for ln in inp.lines])
    kk = len(inp.lines)
    need = inp.need()
    jobs = np.arange(n)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        rows.append(r)
        cols.append(c)
        vals.append(v)

    r = 0
    if rounds:
        jx = np.arange(nx) // t_n
        add(np.arange(nx) % t_n, np.arange(nx), inp.gpus[jx].astype(float))  # capacity per round
        lo.append(np.full(t_n, -np.inf))
        hi.append(np.full(t_n, float(inp.capacity)))
        r += t_n
        add(r + jx, np.arange(nx), -np.ones(nx))  # n_j = sum_t x[j, t]
        add(r + jobs, i_n + jobs, np.ones(n))
        lo.append(np.zeros(n))
        hi.append(np.zeros(n))
        r += n
    else:
        add(np.zeros(n, dtype=np.int64), i_n + jobs, inp.gpus.astype(float))  # total capacity
        lo.append(np.array([-np.inf]))
        hi.append(np.array([float(inp.capacity * t_n)]))
        r += 1
    add(r + jobs, iy + jobs, np.ones(n))  # y_j <= round_s n_j
    add(r + jobs, i_n + jobs, np.full(n, -inp.round_s))
    lo.append(np.full(n, -np.inf))
    hi.append(np.zeros(n))
    r += n
    a = (1.0 - inp.progress) / inp.remaining  # cuts: u_j - s_k a_j y_j <= c_k + s_k f_j
    jj = np.repeat(jobs, kk)
    sk = np.tile(slope, n)
    rr = r + np.arange(n * kk)
    add(rr, iu + jj, np.ones(n * kk))
    add(rr, iy + jj, -a[jj] * sk)
    lo.append(np.full(n * kk, -np.inf))
    hi.append(np.tile(icpt, n) + sk * inp.progress[jj])
    r += n * kk
    add(r + jobs, np.full(n, iz), -np.ones(n))  # z >= R_j - y_j
    add(r + jobs, iy + jobs, -np.ones(n))
    lo.append(np.full(n, -np.inf))
    hi.append(-inp.remaining)
    r += n
    a_mat = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv))
    c = np.zeros(nv)
    c[iu:iz] = -inp.weights / (n * t_n)
    c[iz] = inp.k
    lb = np.zeros(nv)
    ub = np.ones(nv)
    ub[i_n:iy] = need
    y_hi = np.minimum(inp.remaining, inp.round_s * need)
    lb[iy:iu] = 0.0 if inp.lower is None else np.clip(inp.lower, 0.0, y_hi)
    ub[iy:iu] = y_hi
    lb[iu:iz] = -np.inf
    ub[iu:iz] = np.inf
    ub[iz] = np.inf
    integrality = np.zeros(nv)
    integrality[:iy] = 1
    res = milp(
        c,
        constraints=LinearConstraint(a_mat.tocsr(), np.concatenate(lo), np.concatenate(hi)),
        integrality=integrality,
        bounds=Bounds(lb, ub),
        options={"time_limit": lim.time_limit, "node_limit": lim.node_limit, "mip_rel_gap": lim.gap},
    )
    if res.status == 2:
        return None, "infeasible"
    if res.x is None:
        return None, "none"
    if res.status != 0 and "time" in str(res.message).lower():
        logger.warning("planner: HiGHS hit the %.1f s time limit: this plan is not reproducible", lim.time_limit)
    status = "optimal" if res.status == 0 else "incumbent"
    if rounds:
        return res.x[:nx].reshape(n, t_n) > 0.5, status
    return np.round(res.x[i_n:iy]).astype(np.int64), status


def pack(counts: np.ndarray, gpus: np.ndarray, capacity: int, rounds: int, trim: bool = False) -> np.ndarray | None:
    """Lay ``counts[j]`` rounds of each job into ``rounds`` rounds, largest jobs first, each into
    its least loaded rounds (ties: earliest); ``None`` if some job does not fit, or with ``trim``
    that job gets the rounds that still have room for it."""
    x = np.zeros((len(counts), rounds), dtype=bool)
    load = np.zeros(rounds, dtype=np.int64)
    for j in sorted(range(len(counts)), key=lambda j: (-int(gpus[j]), -int(counts[j]), j)):
        c, g = int(counts[j]), int(gpus[j])
        if c == 0:
            continue
        ok = np.flatnonzero(load + g <= capacity)
        if len(ok) < c:
            if not trim:
                return None
            c = len(ok)
        pick = ok[np.argsort(load[ok], kind="stable")[:c]]
        x[j, pick] = True
        load[pick] += g
    return x


def _valid(inp: PlanInput, x: np.ndarray) -> bool:
    if np.any(inp.gpus @ x > inp.capacity) or np.any(x.sum(axis=1) > inp.need()):
        return False
    if inp.lower is None:
        return True
    y = np.minimum(inp.remaining, inp.round_s * x.sum(axis=1))
    return bool(np.all(y >= inp.lower - 1e-6))


def greedy(inp: PlanInput) -> np.ndarray:
    """Fallback plan: jobs by weight, then remaining time (both descending), each taking up to
    its rounds needed in the earliest rounds with room."""
    order = sorted(range(inp.n), key=lambda j: (-inp.weights[j], -inp.remaining[j], j))
    x = np.zeros((inp.n, inp.rounds), dtype=bool)
    room = np.full(inp.rounds, inp.capacity, dtype=np.int64)
    need = inp.need()
    for j in order:
        g = int(inp.gpus[j])
        for t in range(inp.rounds):
            if x[j].sum() >= need[j]:
                break
            if room[t] >= g:
                x[j, t] = True
                room[t] -= g
    return x


def next_round(
    counts: np.ndarray, rounds_left: int, gpus: np.ndarray, capacity: int, order: Sequence[int]
) -> list[int]:
    """The jobs of the next round of a plan given as counts (ours).

    ``counts[j]``: rounds job ``j`` still has in the plan's ``rounds_left`` rounds. Jobs with as
    many rounds as are left must run (in ``order``); then the other jobs with rounds left join in
    ``order`` while the GPUs last. Filling this round leaves the least work for the later ones.
    Returns the jobs in the order they joined (must-run jobs beyond the GPUs are left out).
    """
    c = np.asarray(counts, dtype=np.int64)
    g = np.asarray(gpus, dtype=np.int64)
    chosen: list[int] = []
    room = capacity
    for must in (True, False):
        for j in order:
            if c[j] <= 0 or (c[j] >= rounds_left) != must or g[j] > room:
                continue
            chosen.append(j)
            room -= int(g[j])
    return chosen
