"""The multiple-choice knapsack of Aryl's phase 2: exact against brute force, edge cases, ties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heuristics import knapsack
from heuristics.jit import compiled_calling
from heuristics.knapsack import mckp_value, solve_mckp, solve_mckp_dense


def brute_force(groups, capacity):
    """Best total value over every choice (-1 = none per group) within the capacity."""
    best = -math.inf
    for choice in itertools.product(*[range(-1, len(g)) for g in groups]):
        w, v = mckp_value(groups, choice)
        if w <= capacity:
            best = max(best, v)
    return best


def reference_dp(groups, capacity):
    """Textbook O(groups x options x capacity) DP in plain Python (for larger instances)."""
    best = [0.0] * (capacity + 1)
    for g in groups:
        new = best[:]
        for w, v in g:
            for c in range(w, capacity + 1):
                new[c] = max(new[c], best[c - w] + v)
        best = new
    return best[capacity]


values = st.one_of(
    st.just(0.0),
    st.integers(-5, 10).map(float),
    st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False),
)
option = st.tuples(st.integers(0, 9), values)
groups_st = st.lists(st.lists(option, max_size=4), max_size=5)


@settings(max_examples=400, deadline=None)
@given(groups=groups_st, capacity=st.integers(0, 14))
def test_equals_brute_force(groups, capacity):
    choice = solve_mckp(groups, capacity)
    assert len(choice) == len(groups)
    assert all(-1 <= i < len(g) for i, g in zip(choice, groups, strict=True))
    w, v = mckp_value(groups, choice)
    assert w <= capacity
    assert v == pytest.approx(brute_force(groups, capacity), abs=1e-9)


def test_equals_reference_dp_on_larger_instances():
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        groups = []
        for _ in range(n):
            k = int(rng.integers(0, 8))
            groups.append([(int(rng.integers(0, 12)), float(rng.normal(10, 20))) for _ in range(k)])
        capacity = int(rng.integers(0, 80))
        choice = solve_mckp(groups, capacity)
        w, v = mckp_value(groups, choice)
        assert w <= capacity
        assert v == pytest.approx(reference_dp(groups, capacity), abs=1e-9)


def test_capacity_zero_takes_only_weightless_positive_options():
    groups = [[(1, 5.0), (0, 2.0)], [(0, -1.0)], [(3, 9.0)], [(0, 0.0)]]
    assert solve_mckp(groups, 0) == [1, -1, -1, -1]


def test_groups_whose_every_option_is_too_heavy_take_nothing():
    groups = [[(5, 100.0), (6, 200.0)], [(2, 1.0)]]
    assert solve_mckp(groups, 4) == [-1, 0]


def test_empty_groups_and_no_groups():
    assert solve_mckp([], 10) == []
    assert solve_mckp([[], [(1, 3.0)], []], 1) == [-1, 0, -1]


def test_zero_and_negative_values_are_not_taken():
    # taking nothing is worth 0: an option worth 0 or less is never needed
    assert solve_mckp([[(1, 0.0), (2, -3.0)], [(0, 0.0)]], 5) == [-1, -1]


def test_ties_prefer_nothing_then_lighter_then_lower_index_from_the_last_group():
    # same value at weights 1 and 2: the lighter
    assert solve_mckp([[(2, 5.0), (1, 5.0)]], 2) == [1]
    # two options of equal weight and value: the lower index
    assert solve_mckp([[(1, 4.0), (1, 4.0)]], 1) == [0]
    # one GPU, two equal jobs: walking back, the last group takes nothing while that stays optimal
    assert solve_mckp([[(1, 3.0)], [(1, 3.0)]], 1) == [0, -1]


def test_hand_computed_two_job_example():
    # Aryl's phase 2 on two elastic jobs (see tests/test_aryl.py): A's options are worth
    # 200, 300, 360, 400 for 1..4 extra GPUs, B's half of that; 4 GPUs: A takes 3, B 1 (460).
    a = [(1, 200.0), (2, 300.0), (3, 360.0), (4, 400.0)]
    b = [(1, 100.0), (2, 150.0), (3, 180.0), (4, 200.0)]
    assert solve_mckp([a, b], 4) == [2, 0]
    assert mckp_value([a, b], [2, 0]) == (4, 460.0)


@pytest.mark.parametrize(
    "groups, capacity, match",
    [
        ([[(-1, 1.0)]], 3, "weights must be integers >= 0"),
        ([[(1.5, 1.0)]], 3, "weights must be integers >= 0"),
        ([[(1, math.nan)]], 3, "values must be finite"),
        ([[(1, math.inf)]], 3, "values must be finite"),
        ([[(1, 1.0)]], -1, "capacity must be an integer >= 0"),
    ],
)
def test_bad_input_is_a_value_error(groups, capacity, match):
    with pytest.raises(ValueError, match=match):
        solve_mckp(groups, capacity)


def test_large_instance_is_consistent_with_the_greedy_bound():
    # concave values with unit weights: the greedy by marginal value is optimal, so the DP
    # must reach exactly the sum of the `capacity` largest marginal gains
    rng = np.random.default_rng(3)
    marg = -np.sort(-rng.random((200, 16)), axis=1)  # decreasing marginal gains per group
    groups = [[(x + 1, float(marg[g, : x + 1].sum())) for x in range(16)] for g in range(200)]
    capacity = 700
    choice = solve_mckp(groups, capacity)
    w, v = mckp_value(groups, choice)
    best = float(np.sort(marg.ravel())[::-1][:capacity].sum())
    assert w == capacity
    assert v == pytest.approx(best, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.lists(st.integers(-3, 6).map(float) | st.floats(-50.0, 50.0), max_size=7), max_size=8),
    capacity=st.integers(0, 20),
)
def test_dense_form_makes_the_same_choices_as_the_option_lists(values, capacity):
    # ties included (small integer values): the dense form must break them the same way
    groups = [[(i + 1, v) for i, v in enumerate(vals)] for vals in values]
    flat = np.array([v for vals in values for v in vals], dtype=float)
    assert solve_mckp_dense(flat, [len(v) for v in values], capacity) == solve_mckp(groups, capacity)


def test_dense_form_refuses_bad_input_naming_the_group():
    with pytest.raises(ValueError, match="group 1: values must be finite, got nan"):
        solve_mckp_dense(np.array([1.0, math.nan]), [1, 1], 2)
    with pytest.raises(ValueError, match="sizes add up to 3 values, got 2"):
        solve_mckp_dense(np.array([1.0, 2.0]), [1, 2], 2)
    with pytest.raises(ValueError, match="capacity must be an integer >= 0"):
        solve_mckp_dense(np.array([1.0]), [1], -1)


_dp = knapsack._dp  # a kernel of another file, imported as a caller would


def _caller(x):
    return _dp(x)


def test_a_kernel_calling_a_kernel_of_another_file_is_refused():
    """numba's disk cache would not see the callee change (compiled_calling's docstring)."""
    call = compiled_calling("_dp")(_caller)
    with pytest.raises(TypeError, match=r"_caller calls the kernel _dp of heuristics\.knapsack: .* define it in"):
        call(1)
