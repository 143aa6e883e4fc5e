"""The multiple-choice knapsack of Aryl's phase 2, solved exactly by dynamic programming.

``solve_mckp(groups, capacity)``: ``groups[g]`` is a list of ``(weight, value)`` options; choose at
most one option per group so that the total weight is at most ``capacity`` and the total value is
as large as possible. Returns the chosen option index per group, ``-1`` for none.

Algorithm. ``best_g[c]`` = the largest value from groups ``0..g-1`` with total weight ``<= c``
(``best_0 = 0``). Group ``g`` turns it into
``best_{g+1}[c] = max(best_g[c], max_i best_g[c - w_i] + v_i)``: a max-plus convolution with the
group's option vector, computed for every capacity at once by numpy. The options of a group become
a dense vector over weights ``0..W_g`` (``-inf`` where no option has that weight); the shifted
copies of ``best_g`` are rows of one strided view of the DP table (no copy), so a group
costs one broadcast add and one max-reduce over a ``(W_g + 1) x capacity`` block:
O(groups x options x capacity) in total, with two numpy calls per group. Two exact bounds shrink
the block: after ``g`` groups nothing heavier than the sum of their largest weights is reachable
(``best`` is flat beyond it), and capacities below ``capacity`` minus the largest weights still to
come can never lead to the answer. The table of every ``best_g`` is kept (in a scratch block reused
across calls: fresh pages cost more than the arithmetic on a large instance); the choices are
read back from the last group to the first. Float64 throughout: the comparisons must be exact.

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

Option = tuple[int, float]


def _dense(groups: Sequence[Sequence[Option]], capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the best value at each weight ``0..W_g`` over its usable options (weight <=
    capacity), ``-inf`` where none, weight 0 also holding "take nothing" (value 0); and ``W_g``,
    the heaviest usable weight. Row g of the first array holds the dense vector REVERSED
    (weights W_g..0), ready to add to the window of shifted DP rows."""
    sizes = [len(o) for o in groups]
    flat_w = np.array([w for o in groups for w, _ in o], dtype=float)
    flat_v = np.array([v for o in groups for _, v in o], dtype=float)
    gid = np.repeat(np.arange(len(groups)), sizes)
    bad = (flat_w < 0) | (flat_w != np.floor(flat_w))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"group {gid[i]}: weights must be integers >= 0, got {flat_w[i]!r}")
    if not np.isfinite(flat_v).all():
        i = int(np.flatnonzero(~np.isfinite(flat_v))[0])
        raise ValueError(f"group {gid[i]}: values must be finite, got {flat_v[i]!r}")
    use = flat_w <= capacity
    w = flat_w[use].astype(np.int64)
    g = gid[use]
    tops = np.zeros(len(groups), dtype=np.int64)
    np.maximum.at(tops, g, w)
    pad = int(tops.max(initial=0))
    dense = np.full((len(groups), pad + 1), -np.inf)
    dense[:, 0] = 0.0
    np.maximum.at(dense, (g, w), flat_v[use])
    # reverse each row's first W_g + 1 entries: column k holds weight W_g - k
    cols = tops[:, None] - np.arange(pad + 1)[None, :]
    rev = np.where(cols >= 0, np.take_along_axis(dense, np.maximum(cols, 0), axis=1), -np.inf)
    return rev, tops


_workspace = np.empty(0)


def _table(rows: int, cols: int) -> np.ndarray:
    """A reused scratch block (fresh pages cost more than the DP itself on a large instance)."""
    global _workspace
    if _workspace.size < rows * cols:
        _workspace = np.empty(rows * cols)
    return _workspace[: rows * cols].reshape(rows, cols)


def solve_mckp(groups: Sequence[Sequence[Option]], capacity: int) -> list[int]:
    """Exact multiple-choice knapsack: at most one option per group, total weight <= capacity,
    maximum total value. Returns the chosen option index per group (-1 = none).

    :param groups: per group, its options as ``(weight, value)``: integer weight >= 0, finite value.
    :param capacity: integer >= 0.
    :raises ValueError: on a negative or fractional weight or capacity, or a non-finite value.
    """
    if int(capacity) != capacity or capacity < 0:
        raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
    capacity = int(capacity)
    n = len(groups)
    if n == 0:
        return []
    rev, tops_arr = _dense(groups, capacity)
    tops = tops_arr.tolist()
    pad = rev.shape[1] - 1
    cols = pad + capacity + 1
    # table[g, pad + c] = best_g[c]; the first `pad` columns are -inf (weight above c)
    table = _table(n + 1, cols)
    table[:, :pad] = -np.inf
    table[0, pad:] = 0.0
    after = np.concatenate([np.cumsum(tops_arr[::-1])[::-1], [0]]).tolist()  # sum of tops from g on
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
                row[pad : pad + lo] = -np.inf  # never read
        reach = hi
    return _walk_back(groups, table, rev, tops, pad, capacity)


def _walk_back(
    groups: Sequence[Sequence[Option]], table: np.ndarray, rev: np.ndarray, tops: list[int], pad: int, capacity: int
) -> list[int]:
    """Read the choices back from the last group: nothing if still optimal, else the lightest
    optimal weight, else (same weight) the lowest option index with that best value."""
    n = len(groups)
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
        best = rev[g, top - w]
        choice[g] = next(i for i, (wi, vi) in enumerate(groups[g]) if wi == w and float(vi) == best)
        c -= w
    return choice


def mckp_value(groups: Sequence[Sequence[Option]], choice: Sequence[int]) -> tuple[int, float]:
    """Total (weight, value) of a choice (``-1`` = none)."""
    w = sum(int(groups[g][i][0]) for g, i in enumerate(choice) if i >= 0)
    v = sum(float(groups[g][i][1]) for g, i in enumerate(choice) if i >= 0)
    return w, v
