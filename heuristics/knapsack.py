"""The multiple-choice knapsack of Aryl's phase 2, solved exactly by dynamic programming.

``solve_mckp(groups, capacity)``: ``groups[g]`` is a list of ``(weight, value)`` options; choose at
most one option per group so that the total weight is at most ``capacity`` and the total value is
as large as possible. Returns the chosen option index per group, ``-1`` for none.

Algorithm. ``best_g[c]`` = the largest value from groups ``0..g-1`` with total weight ``<= c``
(``best_0 = 0``). Group ``g`` turns it into
``best_{g+1}[c] = max(best_g[c], max_i best_g[c - w_i] + v_i)``: a max-plus convolution with the
group's option vector, computed for every capacity at once by numpy. The options of a group become
a dense vector over weights ``0..W_g`` (``-inf`` where no option has that weight); the shifted
copies of ``best_g`` are rows of one strided view (``sliding_window_view``, no copy), so a group
costs one broadcast add and one max-reduce over a ``(W_g + 1) x capacity`` block:
O(groups x options x capacity) in total, with two numpy calls per group. Two exact bounds shrink
the block: after ``g`` groups nothing heavier than the sum of their largest weights is reachable
(``best`` is flat beyond it), and capacities below ``capacity`` minus the largest weights still to
come can never lead to the answer. The table of every ``best_g`` is kept; the choices are read
back from the last group to the first.

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

import numpy as np

Option = tuple[int, float]


def _dense(options: Sequence[Option], capacity: int, g: int) -> np.ndarray:
    """Best value per weight ``0..W`` over the usable options (``-inf`` where none), W the
    heaviest usable weight; weight 0 also holds "take nothing" (value 0). Checks the options."""
    top = 0
    for w, v in options:
        if int(w) != w or w < 0:
            raise ValueError(f"group {g}: weights must be integers >= 0, got {w!r}")
        if not math.isfinite(v):
            raise ValueError(f"group {g}: values must be finite, got {v!r}")
        if top < w <= capacity:
            top = int(w)
    d = np.full(top + 1, -np.inf)
    d[0] = 0.0
    for w, v in options:
        if w <= capacity and v > d[int(w)]:
            d[int(w)] = v
    return d


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
    dense = [_dense(options, capacity, g) for g, options in enumerate(groups)]
    tops = [len(d) - 1 for d in dense]
    pad = max(tops)
    cols = pad + capacity + 1
    # table[g, pad + c] = best_g[c]; the first `pad` columns are -inf (weight above c)
    table = _table(n + 1, cols)
    table[:, :pad] = -np.inf
    table[0, pad:] = 0.0
    after = np.concatenate([np.cumsum(tops[::-1])[::-1], [0]]).tolist()  # sum of tops from g on
    buf = np.empty((pad + 1) * (capacity + 1))
    item = table.itemsize
    reach = 0
    for g, d in enumerate(dense):
        top = tops[g]
        prev, row = table[g], table[g + 1]
        hi = min(capacity, reach + top)  # best_{g+1} is flat beyond hi
        lo = min(hi, max(0, capacity - after[g + 1]))  # below lo nothing leads to the answer
        if top == 0:
            np.add(prev[pad:], max(0.0, float(d[0])), out=row[pad:])
        else:
            m = hi - lo + 1
            # row k of the window is prev[c - (top - k)] for c = lo..hi (a strided view, no copy)
            win = np.ndarray(
                (top + 1, m), buffer=table, offset=((g * cols) + pad + lo - top) * item, strides=(item, item)
            )
            block = buf[: (top + 1) * m].reshape(top + 1, m)
            np.add(win, d[::-1, None], out=block)
            np.maximum.reduce(block, axis=0, out=row[pad + lo : pad + hi + 1])
            row[pad + hi + 1 :] = row[pad + hi]
            row[pad : pad + lo] = -np.inf  # never read
        reach = hi
    return _walk_back(groups, table, pad, capacity)


def _walk_back(groups: Sequence[Sequence[Option]], table: np.ndarray, pad: int, capacity: int) -> list[int]:
    n = len(groups)
    choice = [-1] * n
    c = capacity
    for g in range(n - 1, -1, -1):
        prev, target = table[g], table[g + 1, pad + c]
        if prev[pad + c] == target:
            continue
        order = sorted(range(len(groups[g])), key=lambda i: (groups[g][i][0], i))
        for i in order:
            w, v = groups[g][i]
            w = int(w)
            if w <= c and prev[pad + c - w] + float(v) == target:
                choice[g] = i
                c -= w
                break
        else:  # unreachable: the forward pass took its value from one of these
            raise AssertionError(f"knapsack walk-back found no option for group {g}")
    return choice


def mckp_value(groups: Sequence[Sequence[Option]], choice: Sequence[int]) -> tuple[int, float]:
    """Total (weight, value) of a choice (``-1`` = none)."""
    w = sum(int(groups[g][i][0]) for g, i in enumerate(choice) if i >= 0)
    v = sum(float(groups[g][i][1]) for g, i in enumerate(choice) if i >= 0)
    return w, v
