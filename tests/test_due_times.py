"""heuristics.common.DueTimes: times come out in order, each time's items together in push order."""

from __future__ import annotations

import random

from heuristics.common import DueTimes


def test_times_in_order_and_items_of_one_time_in_push_order() -> None:
    rng = random.Random(0)
    due: DueTimes[int] = DueTimes()
    pushed: list[tuple[float, int]] = []
    for i in range(500):
        t = float(rng.randrange(40)) / 4.0  # many ties
        due.push(t, i)
        pushed.append((t, i))
    assert len(due) == len({t for t, _ in pushed})
    out: list[tuple[float, list[int]]] = []
    while due:
        t = due.first()
        out.append((t, due.pop()))
    times = [t for t, _ in out]
    assert times == sorted(set(times))
    for t, items in out:
        assert items == [i for s, i in pushed if s == t]


def test_a_time_pushed_again_after_its_pop_comes_back() -> None:
    due: DueTimes[str] = DueTimes()
    due.push(2.0, "a")
    due.push(1.0, "b")
    assert due.pop() == ["b"]
    due.push(1.0, "c")  # as a reader re-pushes what is not due yet
    due.push(2.0, "d")
    assert (due.first(), due.pop()) == (1.0, ["c"])
    assert (due.first(), due.pop()) == (2.0, ["a", "d"])
    assert not due
