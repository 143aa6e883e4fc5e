"""The multiple-choice knapsack of Aryl's phase 2, solved exactly by dynamic programming.

``solve_mckp(groups, capacity)``: ``groups[g]`` is a list of ``(weight, value)`` options; choose at
most one option per group so that the total weight is at most ``capacity`` and the total value is
as large as possible. Returns the chosen option index per group, ``-1`` for none.
``solve_mckp_dense(values, capacity)`` is the same for groups whose options weigh 1, 2, ...
(``values[g][i]`` is the value of option ``i``, of weight ``i + 1``), Aryl's shape, without the
conversion.

Algorithm. ``best_g[c]`` = the largest value from groups ``0..g-1`` with total weight ``<= c``
(``best_0 = 0``). Group ``g`` turns it into
``best_{g+1}[c] = max(best_g[c], max_i best_g[c - w_i] + v_i)``: a max-plus convolution with the
group's option vector. The options of a group become a dense vector over weights ``0..W_g``
(``-inf`` where no option has that weight; weight 0 also holds "take nothing", value 0), so
``best_{g+1}[c] = max_w best_g[c - w] + dense_g[w]`` (``-inf`` for ``c - w < 0``): O(groups x
options x capacity) in total. Two exact bounds shrink the work: after ``g`` groups nothing heavier
than the sum of their largest weights is reachable (``best`` is flat beyond it), and capacities
below ``capacity`` minus the largest weights still to come can never lead to the answer (they are
set to ``-inf``). The table of every ``best_g`` is kept; the choices are read back from the last
group to the first. Float64 throughout: the comparisons must be exact.

Three evaluations of that one recurrence, which compute the very same floating-point numbers
(every entry is the same sums, ``best_g[c - w] + dense_g[w]``, and ``max`` is exact), so they
return the same choices:

- *no binding capacity* (the sum of the ``W_g`` is at most ``capacity``): every entry the
  walk-back reads lies in the flat part, ``best_g[c] = S_g`` with
  ``S_{g+1} = max_w S_g + dense_g[w]``, so only those ``S_g`` are computed (O(options));
- *small instances*: plain Python lists, one ``max`` over the window of shifted entries per
  capacity (no numpy call overhead);
- *large instances*: numpy, computed for every capacity at once: the shifted copies of
  ``best_g`` are rows of one strided view of the DP table (no copy), so a group costs one
  broadcast add and one max-reduce over a ``(W_g + 1) x capacity`` block; the table lives in a
  scratch block reused across calls (fresh pages cost more than the arithmetic on a large
  instance).

Ties (several optimal solutions), deterministic: walking back from the last group, each group
takes nothing if that is still optimal, else its lightest option that is, and among options of
equal weight the lowest index. Values are compared exactly (the walk-back repeats the very
floating-point sums of the forward pass), so the solution's value equals the optimum bit for bit.

Handles empty groups, zero and negative values, zero-weight options, capacity 0 and groups whose
every option is heavier than the capacity (those take nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat
from operator import add

import numpy as np

Option = tuple[int, float]

_NEG = -math.inf
#: instances with more cells than this (groups x (largest W_g + 1) x (capacity + 1), a bound on
#: the window cells computed) go to the numpy evaluation; below it plain Python is faster
_SMALL = 20000
#: :func:`solve_mckp` inputs with more options than this are converted by numpy
_MANY_OPTIONS = 1000


def _check_capacity(capacity: int) -> int:
    if int(capacity) != capacity or capacity < 0:
        raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
    return int(capacity)


def _dense_lists(groups: Sequence[Sequence[Option]], capacity: int) -> list[list[float]]:
    """Per group, the best value at each weight ``0..W_g`` over its usable options (weight <=
    capacity), ``-inf`` where none, weight 0 also holding "take nothing" (value 0); ``W_g`` is the
    heaviest usable weight."""
    for g, opts in enumerate(groups):
        for w, _ in opts:
            fw = float(w)
            if fw < 0 or math.isnan(fw) or (math.isfinite(fw) and fw != math.floor(fw)):
                raise ValueError(f"group {g}: weights must be integers >= 0, got {fw!r}")
    for g, opts in enumerate(groups):
        for _, v in opts:
            if not math.isfinite(v):
                raise ValueError(f"group {g}: values must be finite, got {float(v)!r}")
    out: list[list[float]] = []
    for opts in groups:
        use = [(int(w), float(v)) for w, v in opts if w <= capacity]
        top = max((w for w, _ in use), default=0)
        d = [0.0] + [_NEG] * top
        for w, v in use:
            if v > d[w]:
                d[w] = v
        out.append(d)
    return out


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
    if sum(len(o) for o in groups) > _MANY_OPTIONS:
        rev, tops_arr = _dense_numpy(groups, capacity)
        tops = tops_arr.tolist()
        weights = _solve_numpy(rev, tops, capacity)
        best_at = [rev[g, tops[g] - w] if w >= 0 else 0.0 for g, w in enumerate(weights)]
    else:
        dense = _dense_lists(groups, capacity)
        weights = _solve(dense, capacity)
        best_at = [dense[g][w] if w >= 0 else 0.0 for g, w in enumerate(weights)]
    choice = [-1] * len(groups)
    for g, w in enumerate(weights):
        if w >= 0:
            best = best_at[g]
            choice[g] = next(i for i, (wi, vi) in enumerate(groups[g]) if wi == w and float(vi) == best)
    return choice


def solve_mckp_dense(values: Sequence[Sequence[float]], capacity: int) -> list[int]:
    """:func:`solve_mckp` for ``groups[g] = [(1, values[g][0]), (2, values[g][1]), ...]``: the
    same choices (option index per group, -1 = none), without building the option lists.

    :param values: per group, the values of 1, 2, ... units (finite).
    :param capacity: integer >= 0.
    :raises ValueError: on a negative or fractional capacity, or a non-finite value.
    """
    capacity = _check_capacity(capacity)
    dense: list[list[float]] = []
    for g, vals in enumerate(values):
        if not all(map(math.isfinite, vals)):
            bad = next(v for v in vals if not math.isfinite(v))
            raise ValueError(f"group {g}: values must be finite, got {float(bad)!r}")
        dense.append([0.0, *map(float, vals if len(vals) <= capacity else vals[:capacity])])
    weights = _solve(dense, capacity)
    return [w - 1 if w > 0 else -1 for w in weights]


def _solve(dense: list[list[float]], capacity: int) -> list[int]:
    """The chosen weight per group (-1 = none) for the dense vectors ``dense`` (see the module
    docstring); every weight is at most ``capacity``."""
    tops = [len(d) - 1 for d in dense]
    total = sum(tops)
    if total <= capacity:
        return _solve_unbound(dense)
    if len(dense) * (max(tops) + 1) * (capacity + 1) > _SMALL:  # a bound on the window cells
        pad = max(tops)
        rev = np.full((len(dense), pad + 1), _NEG)  # rev[g, k] = dense_g[W_g - k], -inf beyond
        for g, d in enumerate(dense):
            rev[g, : len(d)] = d[::-1]
        return _solve_numpy(rev, tops, capacity)
    after = [total]  # sum of tops from g on
    for top in tops:
        after.append(after[-1] - top)
    return _solve_lists(dense, tops, after, capacity)


def _solve_unbound(dense: list[list[float]]) -> list[int]:
    """The capacity never binds: ``best_g`` is flat, ``S_g``, wherever the walk-back reads it."""
    s = [0.0]
    for d in dense:
        cur = s[-1]
        s.append(max([cur + x for x in d]))
    choice = [-1] * len(dense)
    for g in range(len(dense) - 1, -1, -1):
        cur, target = s[g], s[g + 1]
        if cur == target:
            continue
        for w, x in enumerate(dense[g]):
            if cur + x == target:
                choice[g] = w
                break
        else:
            choice[g] = 0
    return choice


def _solve_lists(dense: list[list[float]], tops: list[int], after: list[int], capacity: int) -> list[int]:
    """The recurrence on Python lists: row ``g`` holds ``pad`` entries of ``-inf`` (weights above
    ``c``), then ``best_g[0..capacity]``. Rows are never edited once made (a group with only
    "nothing" at weight 0 shares its row with the previous one)."""
    pad = max(tops)
    blank = [_NEG] * (pad + capacity + 1)
    rows = [blank[:pad] + [0.0] * (capacity + 1)]
    reach = 0
    for g, d in enumerate(dense):
        top = tops[g]
        prev = rows[g]
        if top == 0:
            d0 = d[0]
            rows.append(prev if d0 == 0.0 else blank[:pad] + [x + d0 for x in prev[pad:]])
            continue
        hi = reach + top
        if hi > capacity:
            hi = capacity
        lo = capacity - after[g + 1]
        if lo < 0:
            lo = 0
        elif lo > hi:
            lo = hi
        a, b = pad + lo, pad + hi + 1
        if top <= 3:  # weight by weight over the window (cheaper for few options)
            m = b - a
            cols = [prev[a:b] if d[0] == 0.0 else list(map(add, prev[a:b], repeat(d[0], m)))]
            cols.extend([list(map(add, prev[a - w : b - w], repeat(d[w], m))) for w in range(1, top + 1)])
            mid = list(map(max, *cols))
        else:  # capacity by capacity: the window of shifted entries plus the reversed options
            rev = d[::-1]
            base = pad - top
            mid = [max(map(add, prev[base + c : base + c + top + 1], rev)) for c in range(lo, hi + 1)]
        row = blank[:a]
        row += mid
        if hi < capacity:
            row += repeat(mid[-1], capacity - hi)
        rows.append(row)
        reach = hi
    choice = [-1] * len(dense)
    at = pad + capacity
    for g in range(len(dense) - 1, -1, -1):
        prev = rows[g]
        target = rows[g + 1][at]
        if prev[at] == target:
            continue
        choice[g] = w = _first(prev, at, dense[g], target)
        at -= w
    return choice


def _first(prev: list[float], at: int, d: list[float], target: float) -> int:
    """The lightest weight ``w`` with ``prev[at - w] + d[w] == target`` (0 if none)."""
    for w, x in enumerate(d):
        if prev[at - w] + x == target:
            return w
    return 0


_workspace = np.empty(0)


def _table(rows: int, cols: int) -> np.ndarray:
    """A reused scratch block (fresh pages cost more than the DP itself on a large instance)."""
    global _workspace
    if _workspace.size < rows * cols:
        _workspace = np.empty(rows * cols)
    return _workspace[: rows * cols].reshape(rows, cols)


def _dense_numpy(groups: Sequence[Sequence[Option]], capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_dense_lists` for many options, by numpy: row g holds the dense vector REVERSED
    (weights W_g..0, then -inf), ready to add to the window of shifted DP rows; and the W_g."""
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
    use = flat_w <= capacity
    w = flat_w[use].astype(np.int64)
    g = gid[use]
    tops = np.zeros(len(groups), dtype=np.int64)
    np.maximum.at(tops, g, w)
    pad = int(tops.max(initial=0))
    dense = np.full((len(groups), pad + 1), _NEG)
    dense[:, 0] = 0.0
    np.maximum.at(dense, (g, w), flat_v[use])
    cols = tops[:, None] - np.arange(pad + 1)[None, :]
    rev = np.where(cols >= 0, np.take_along_axis(dense, np.maximum(cols, 0), axis=1), _NEG)
    return rev, tops


def _solve_numpy(rev: np.ndarray, tops: list[int], capacity: int) -> list[int]:
    """The recurrence in numpy, every capacity of a group at once (module docstring); ``rev[g]``
    is group g's dense vector reversed (weights W_g..0, then -inf)."""
    n = len(tops)
    pad = max(tops)
    after = [sum(tops)]  # sum of tops from g on
    for top in tops:
        after.append(after[-1] - top)
    cols = pad + capacity + 1
    # table[g, pad + c] = best_g[c]; the first `pad` columns are -inf (weight above c)
    table = _table(n + 1, cols)
    table[:, :pad] = _NEG
    table[0, pad:] = 0.0
    buf = np.empty((pad + 1) * (capacity + 1))
    item = table.itemsize
    reach = 0
    for g in range(n):
        top = tops[g]
        prev, row = table[g], table[g + 1]
        hi = min(capacity, reach + top)  # best_{g+1} is flat beyond hi
        lo = min(hi, max(0, capacity - after[g + 1]))  # below lo nothing leads to the answer
        if top == 0:
            np.add(prev[pad:], rev[g, 0], out=row[pad:])
        else:
            m = hi - lo + 1
            # row k of the window is prev[c - (top - k)] for c = lo..hi (a strided view, no copy)
            win = np.ndarray(
                (top + 1, m), buffer=table, offset=(g * cols + pad + lo - top) * item, strides=(item, item)
            )
            block = buf[: (top + 1) * m].reshape(top + 1, m)
            np.add(win, rev[g, : top + 1, None], out=block)
            np.maximum.reduce(block, axis=0, out=row[pad + lo : pad + hi + 1])
            if hi < capacity:
                row[pad + hi + 1 :] = row[pad + hi]
            if lo:
                row[pad : pad + lo] = _NEG  # never read
        reach = hi
    choice = [-1] * n
    c = capacity
    for g in range(n - 1, -1, -1):
        prev, target = table[g], table[g + 1, pad + c]
        if prev[pad + c] == target:
            continue
        top = tops[g]
        # weights w = 0..top: prev[c - w] + best value at w, as in the forward pass
        seg = table[g, pad + c - top : pad + c + 1][::-1] + rev[g, : top + 1][::-1]
        w = int(np.argmax(seg == target))
        choice[g] = w
        c -= w
    return choice


def mckp_value(groups: Sequence[Sequence[Option]], choice: Sequence[int]) -> tuple[int, float]:
    """Total (weight, value) of a choice (``-1`` = none)."""
    w = sum(int(groups[g][i][0]) for g, i in enumerate(choice) if i >= 0)
    v = sum(float(groups[g][i][1]) for g, i in enumerate(choice) if i >= 0)
    return w, v
