"""The multiple-choice knapsack of Aryl's phase 2, solved exactly by dynamic programming.

``solve_mckp(groups, capacity)``: ``groups[g]`` is a list of ``(weight, value)`` options; choose at
most one option per group so that the total weight is at most ``capacity`` and the total value is
as large as possible. Returns the chosen option index per group, ``-1`` for none.
``solve_mckp_dense(values, sizes, capacity)`` is the same for groups whose options weigh 1, 2,
... (the values of every group one after the other, ``sizes[g]`` of them for group ``g``), Aryl's
shape, without the conversion.

Algorithm. ``best_g[c]`` = the largest value from groups ``0..g-1`` with total weight ``<= c``
(``best_0 = 0``). Group ``g`` turns it into
``best_{g+1}[c] = max(best_g[c], max_i best_g[c - w_i] + v_i)``: a max-plus convolution with the
group's option vector. The options of a group become a dense vector over weights ``0..W_g``
(``-inf`` where no option has that weight; weight 0 also holds "take nothing", value 0), so
``best_{g+1}[c] = max_w best_g[c - w] + dense_g[w]`` (terms with ``c - w < 0`` left out):
O(groups x options x capacity) in total. Two exact bounds shrink the work: after ``g`` groups
nothing heavier than the sum of their largest weights is reachable (``best`` is flat beyond it:
a row is written only as far as the next group reads it, and the walk-back reads the flat part at
its start), and capacities below ``capacity`` minus the largest weights still to come can never
lead to the answer (they are left unwritten, and never read). When the capacity does not
bind (the ``W_g`` add up to at most ``capacity``) the second bound leaves one entry per group to
compute. The table of every ``best_g`` is kept; the choices are read back from the last group to
the first. Float64 throughout: the comparisons must be exact.

The recurrence and the walk-back run in one compiled kernel (numba, compiled on the first call
and cached on disk beside this file, or in numba's user-wide cache where that is read-only;
:func:`_dp`; :func:`phase2_kernel` computes Aryl's phase-2 values and solves in one call, a numba
call from Python costing more than small instances' arithmetic); the table
lives in a scratch block reused across calls (fresh pages cost more than the arithmetic on
a large instance).

Ties (several optimal solutions), deterministic: walking back from the last group, each group
takes nothing if that is still optimal, else its lightest option that is, and among options of
equal weight the lowest index. Values are compared exactly (the walk-back repeats the very
floating-point sums of the forward pass), so the solution's value equals the optimum bit for bit.

Handles empty groups, zero and negative values, zero-weight options, capacity 0 and groups whose
every option is heavier than the capacity (those take nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heuristics.jit import compiled, compiled_calling

Option = tuple[int, float]

_NEG = -np.inf


def _check_capacity(capacity: int) -> int:
    if int(capacity) != capacity or capacity < 0:
        raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
    return int(capacity)


def solve_mckp(groups: Sequence[Sequence[Option]], capacity: int) -> list[int]:
    """Exact multiple-choice knapsack: at most one option per group, total weight <= capacity,
    maximum total value. Returns the chosen option index per group (-1 = none).

    :param groups: per group, its options as ``(weight, value)``: integer weight >= 0, finite value.
    :param capacity: integer >= 0.
    :raises ValueError: on a negative or fractional weight or capacity, or a non-finite value.
    """
    capacity = _check_capacity(capacity)
    if not groups:
        return []
    sizes = [len(o) for o in groups]
    flat_w = np.array([w for o in groups for w, _ in o], dtype=float)
    flat_v = np.array([v for o in groups for _, v in o], dtype=float)
    gid = np.repeat(np.arange(len(groups)), sizes)
    bad = (flat_w < 0) | (flat_w != np.floor(flat_w))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"group {gid[i]}: weights must be integers >= 0, got {float(flat_w[i])!r}")
    if not np.isfinite(flat_v).all():
        i = int(np.flatnonzero(~np.isfinite(flat_v))[0])
        raise ValueError(f"group {gid[i]}: values must be finite, got {float(flat_v[i])!r}")
    # dense[g, w]: the best value of group g's usable options (weight <= capacity) of weight w,
    # -inf where none; weight 0 also holds "take nothing" (0)
    use = flat_w <= capacity
    w = flat_w[use].astype(np.int64)
    g = gid[use]
    tops = np.zeros(len(groups), dtype=np.int64)
    np.maximum.at(tops, g, w)
    dense = np.full((len(groups), int(tops.max()) + 1), _NEG)
    dense[:, 0] = 0.0
    np.maximum.at(dense, (g, w), flat_v[use])
    rest = dense[:, 1:][np.arange(dense.shape[1] - 1) < tops[:, None]]  # weights 1..W_g, group by group
    weights = _solve(dense[:, 0].copy(), rest, tops, capacity, False)
    choice = [-1] * len(groups)
    for k, wk in enumerate(weights.tolist()):
        if wk >= 0:
            best = dense[k, wk]
            choice[k] = next(i for i, (wi, vi) in enumerate(groups[k]) if wi == wk and float(vi) == best)
    return choice


def solve_mckp_dense(
    values: Sequence[float] | np.ndarray, sizes: Sequence[int] | np.ndarray, capacity: int
) -> list[int]:
    """:func:`solve_mckp` for ``groups[g] = [(1, v[0]), (2, v[1]), ...]`` where ``v`` is group g's
    slice of ``values`` (the groups' values one after the other, ``sizes[g]`` of them): the same
    choices (option index per group, -1 = none), without building the option lists.

    :param values: every group's values of 1, 2, ... units (finite), group after group.
    :param sizes: how many values each group has.
    :param capacity: integer >= 0.
    :raises ValueError: on a negative or fractional capacity, a non-finite value, or sizes that do
        not add up to the values.
    """
    vals, n = np.asarray(values, dtype=np.float64), np.asarray(sizes, dtype=np.int64)
    weights = dense_weights(np.ascontiguousarray(vals), np.ascontiguousarray(n), _check_capacity(capacity))
    return [w - 1 if w > 0 else -1 for w in weights.tolist()]


def dense_weights(values: np.ndarray, sizes: np.ndarray, capacity: int) -> np.ndarray:
    """:func:`solve_mckp_dense`'s solution as the chosen weight per group (0 or -1: none), for callers
    that already hold contiguous float64 ``values``, int64 ``sizes`` and an int ``capacity >= 0``
    (no conversions; the same checks of the values)."""
    return _solve(np.zeros(len(sizes)), values, sizes, capacity, True)


_workspace = np.empty(0)


def workspace(groups: int, capacity: int) -> np.ndarray:
    """The scratch block for the DP table of ``groups`` groups at ``capacity`` (reused across calls:
    fresh pages cost more than the arithmetic on a large instance; the block is shared, so its
    contents are gone at the next call)."""
    global _workspace
    if _workspace.size < (groups + 1) * (capacity + 1):
        _workspace = np.empty((groups + 1) * (capacity + 1))
    return _workspace


def refuse(code: int, vals: np.ndarray, sizes: np.ndarray) -> None:
    """Raise the ValueError that :func:`_dp`'s return ``code`` stands for (none for -1)."""
    if code == -2:
        raise ValueError(f"sizes add up to {int(np.sum(sizes))} values, got {len(vals)}")
    if code >= 0:
        g = int(np.searchsorted(np.cumsum(sizes), code, side="right"))
        raise ValueError(f"group {g}: values must be finite, got {float(vals[code])!r}")


def _solve(d0: np.ndarray, vals: np.ndarray, sizes: np.ndarray, capacity: int, check: bool) -> np.ndarray:
    """The chosen weight per group (-1 = none; an int64 array). Group ``g``'s dense vector is
    ``d0[g]`` at weight 0 and its ``sizes[g]`` entries of ``vals`` (groups one after the other) at
    weights 1, 2, ...; those above ``capacity`` are left out. ``check``: refuse a non-finite entry
    of ``vals``."""
    out = np.empty(len(sizes), dtype=np.int64)
    refuse(_dp(d0, vals, sizes, capacity, check, workspace(len(sizes), capacity), out), vals, sizes)
    return out


@compiled
def _dp(
    d0: np.ndarray,
    vals: np.ndarray,
    sizes: np.ndarray,
    capacity: int,
    check: bool,
    table: np.ndarray,
    out: np.ndarray,
) -> int:
    """The recurrence and the walk-back (module docstring) for :func:`_solve`'s groups; row ``g``
    of the DP table is ``table[g * (capacity + 1):][: capacity + 1]`` (written only where it is
    read: flat beyond ``reaches[g]``); ``out[g]``: the chosen
    weight (-1 = none). Returns -1, or -2 if the sizes do not add up to ``vals``, or the index of
    the first non-finite entry of ``vals`` when ``check`` (then nothing is solved)."""
    n = sizes.shape[0]
    width = capacity + 1
    starts = np.empty(n, dtype=np.int64)  # vals[starts[g] + w - 1]: group g's value at weight w
    after = 0  # the largest weights still to come
    k = 0
    for g in range(n):
        starts[g] = k
        k += sizes[g]
        after += min(sizes[g], capacity)
    if k != vals.shape[0]:
        return -2
    if check:
        for i in range(k):
            if not np.isfinite(vals[i]):
                return i
    reaches = np.empty(n + 1, dtype=np.int64)  # per row g: best_g is flat beyond reaches[g]
    reach = 0
    top = min(sizes[0], capacity) if n else 0  # group g's largest weight
    for c in range(top + 1):  # (each row is written up to where the next group reads it)
        table[c] = 0.0
    for g in range(n):
        after -= top
        nxt = min(sizes[g + 1], capacity) if g + 1 < n else 0
        prev = table[g * width : (g + 1) * width]  # best_g (row views: loops the compiler vectorises)
        row = table[(g + 1) * width : (g + 2) * width]  # best_{g+1}
        z = d0[g]
        reaches[g] = reach
        if top == 0:
            for c in range(reach + 1):
                row[c] = prev[c] + z
        else:
            s = starts[g] - 1  # vals[s + w]: the value at weight w >= 1
            hi = min(capacity, reach + top)
            lo = min(hi, max(0, capacity - after))
            for c in range(lo, hi + 1):
                row[c] = prev[c] + z
            best = z  # the best of the lighter options (none: weight 0)
            for w in range(1, top + 1):  # weight by weight: the inner loop runs along the row
                v = vals[s + w]
                if not v > best:  # dominated: a lighter option is as good, and no row decreases along c
                    continue
                best = v
                c0 = max(lo, w)
                src = prev[c0 - w : hi + 1 - w]  # best_g[c - w] for c = c0..hi
                dst = row[c0 : hi + 1]
                for i in range(dst.shape[0]):
                    x = src[i] + v
                    m = dst[i]
                    dst[i] = x if x > m else m
            reach = hi
        m = row[reach]
        for c in range(reach + 1, min(capacity, reach + nxt) + 1):
            row[c] = m
        top = nxt
    reaches[n] = reach
    at = capacity
    for g in range(n - 1, -1, -1):
        p = g * width
        r = reaches[g]
        target = table[p + width + min(at, reaches[g + 1])]
        here = table[p + min(at, r)]
        out[g] = -1
        if here == target:
            continue
        s = starts[g] - 1
        pick = 0
        if here + d0[g] != target:
            for w in range(1, min(sizes[g], capacity, at) + 1):
                if table[p + min(at - w, r)] + vals[s + w] == target:
                    pick = w
                    break
        out[g] = pick
        at -= pick
    return -1


def mckp_value(groups: Sequence[Sequence[Option]], choice: Sequence[int]) -> tuple[int, float]:
    """Total (weight, value) of a choice (``-1`` = none)."""
    w = sum(int(groups[g][i][0]) for g, i in enumerate(choice) if i >= 0)
    v = sum(float(groups[g][i][1]) for g, i in enumerate(choice) if i >= 0)
    return w, v


# the columns of phase2_kernel's per-job tables (its ints and floats)
INT_COLUMNS = SLOT, BASE, CUR, TOP, DOOMED = range(5)
FLOAT_COLUMNS = WORK, DONE, SINCE, SPEED, UNTIL = range(5)


@compiled_calling("_dp", "_changing")
def phase2_kernel(
    rows: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
    servers: np.ndarray,
    project: bool,
    rates: np.ndarray,
    free: np.ndarray,
    total: int,
    grouped: bool,
    now: float,
    churn: np.ndarray,
    capacity: int,
    table: np.ndarray,
    values: np.ndarray,
    sizes: np.ndarray,
    out: np.ndarray,
) -> tuple[int, int]:
    """Phase 2 of one GPU type (``heuristics/aryl_scaling.py``): each job's options, their values
    (the knapsack's dense vectors, into ``values``: a scratch block of at least ``len(rows) x
    capacity``), the knapsack on them (:func:`_dp`), then the jobs whose flexible placement may
    change: those whose chosen extra GPUs (0 for none) differ from their current ones, and the
    doomed ones. Returns :func:`_dp`'s code and the number ``m`` of those jobs: the first ``m``
    entries of ``out`` are their new extra GPUs and of ``sizes`` their k, in order (where the code
    is not -1, ``m`` is 0 and the first ``len(rows)`` entries of ``sizes`` hold the sizes
    :func:`refuse` reads); ``sizes`` and ``out`` are scratch blocks of at least ``len(rows)``
    entries (reused: only their first ones are written). Job k's inputs are in
    row ``r = rows[k]`` of the per-job tables ``ints`` (columns :data:`INT_COLUMNS`: where its rates
    on base + 0, 1, ... workers begin in ``rates``, its base GPUs, its current extra GPUs, the most
    extra GPUs it may get, whether it is doomed), ``floats`` (:data:`FLOAT_COLUMNS`: its
    ``view.projection`` (work, done, since, rate), or with ``project`` false its remaining work in
    the first column; its ``until``) and ``servers`` (its base servers, then -1); ``sizes``, ``out``
    and the values go by k until the last step.

    Job k's options are x = 1..``sizes[k]`` extra GPUs (written there; none if it is 0 or less):
    ``sizes[k] = min(top, capacity, room)`` where ``room`` is the type's ``total`` virtual free
    GPUs, less (if ``grouped``) the virtual free GPUs (``free``, per server) of its base servers,
    at least 0. Their values, with remaining work ``rem`` (if ``project``, from the projection at
    ``now``, with the operations of ``view.remaining_work``): ``((T(0) - T(x)) - pen(x)) -
    ((T(0) - T(0)) - pen(0))`` with ``T(x) = rem / rate(x)`` (IEEE: a zero rate gives inf or nan,
    which the knapsack refuses) and the restart cost ``pen(x) = max(0, restart_base +
    restart_per_gpu x (base + x) - left) x churn_factor``, where ``left`` is what is left of a
    restart under way (``until - now``, 0 if none); 0 at x = the job's current extra GPUs, and
    for a doomed job (it restarts at a reclaim deadline anyway). ``churn`` holds restart_base,
    restart_per_gpu and churn_factor. If no job has an option, nothing is solved."""
    n = rows.shape[0]
    anything = False
    for k in range(n):
        r = rows[k]
        room = total
        if grouped:
            for i in range(servers.shape[1]):
                s = servers[r, i]
                if s < 0:
                    break
                room -= free[s]
        top = ints[r, TOP]
        if capacity < top:
            top = capacity
        if room < 0:
            room = 0
        if room < top:
            top = room
        sizes[k] = top
        anything = anything or top > 0
    if not anything:
        for k in range(n):
            out[k] = 0
        return -1, _changing(rows, ints, sizes, out)
    rb, rg, cf = churn[0], churn[1], churn[2]
    j = 0  # where job k's values start
    for k in range(n):
        top = sizes[k]
        if top > 0:
            r = rows[k]
            i = ints[r, SLOT]
            rem = floats[r, WORK]
            if project:
                d = floats[r, DONE]
                since = floats[r, SINCE]
                if now > since:
                    x = d + floats[r, SPEED] * (now - since)
                    d = x if x < rem else rem  # min(work, x)
                rem = rem - d
                rem = rem if rem > 0.0 else 0.0  # max(0.0, rem)
            base, cur, gone = ints[r, BASE], ints[r, CUR], ints[r, DOOMED]
            left = floats[r, UNTIL] - now
            if not left > 0.0:
                left = 0.0
            t0 = rem / rates[i]
            p0 = 0.0
            if not gone and cur != 0:
                a = rb + rg * base - left
                p0 = (a if a > 0.0 else 0.0) * cf
            v0 = (t0 - t0) - p0
            for x in range(1, top + 1):
                p = 0.0
                if not gone and x != cur:
                    a = rb + rg * (base + x) - left
                    p = (a if a > 0.0 else 0.0) * cf
                values[j] = ((t0 - rem / rates[i + x]) - p) - v0
                j += 1
    code = _dp(np.zeros(n), values[:j], sizes[:n], capacity, True, table, out[:n])
    if code != -1:
        return code, 0
    for k in range(n):
        if out[k] < 0:
            out[k] = 0
    return code, _changing(rows, ints, sizes, out)


@compiled
def _changing(rows: np.ndarray, ints: np.ndarray, picks: np.ndarray, out: np.ndarray) -> int:
    """:func:`phase2_kernel`'s last step: the jobs k whose new extra GPUs ``out[k]`` differ from
    their current ones, or that are doomed (``ints`` of their ``rows``), in order: their k into
    ``picks`` and their new extra GPUs into ``out``, from the start. Returns how many."""
    m = 0
    for k in range(rows.shape[0]):
        r = rows[k]
        if out[k] != ints[r, CUR] or ints[r, DOOMED]:
            picks[m] = k
            out[m] = out[k]
            m += 1
    return m


"""The DP kernel itself, for kernels that solve in the same call (``compiled_calling``): arguments
as :func:`_dp`'s; the table is :func:`workspace`'s, a return code other than -1 goes to :func:`refuse`."""
