"""Where ``heuristics.common.pack`` puts a gang on a cluster of several GPU types (``cloud``)."""

from __future__ import annotations

import pytest

from envs.sim import scenarios
from envs.sim.model import Pool
from heuristics import common, registry


def _placements(monkeypatch: pytest.MonkeyPatch, type_order: str) -> list[tuple[object, ...]]:
    """(alloc, whether one server of an allowed type held the gang, whether one of the fastest
    allowed type with room did) for every start of sjf's run of a cloud episode."""
    seen: list[tuple[object, ...]] = []
    pack = common.pack

    def spy(view, job, gpus, pools=common.TRAINING_ONLY, exclude=frozenset(), gpu_type=None, type_order="fastest"):
        alloc = pack(view, job, gpus, pools, exclude, gpu_type, type_order)
        types = common.types_for(view, job, Pool.TRAINING, gpus, type_order)
        room = [t for t in types if view.total_free(t, Pool.TRAINING) >= gpus]
        holders = [t for t in room if view.best_fit(t, Pool.TRAINING, gpus) is not None]
        seen.append((alloc, bool(holders), bool(room) and room[0] in holders))
        return alloc

    monkeypatch.setattr(common, "pack", spy)
    scenario = scenarios.get("cloud", {"workload.synthetic.num_jobs": "150"})
    scenarios.simulate(scenario, registry.make("sjf", {"type_order": type_order}), 0)
    return seen


def test_one_server_of_any_allowed_type_comes_before_a_spread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _placements(monkeypatch, "fastest")
    assert all(len(alloc) == 1 for alloc, holds, _ in seen if alloc is not None and holds)
    # and it mattered: a gang went to one server of a slower type, where the fastest type with
    # room could hold it only spread
    assert any(alloc is not None and len(alloc) == 1 and not first for alloc, _, first in seen)


def test_listed_keeps_the_first_type_with_room(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _placements(monkeypatch, "listed")
    assert any(alloc is not None and len(alloc) > 1 and holds for alloc, holds, _ in seen)


@pytest.mark.parametrize("scenario", ["cloud", "default"])
def test_the_refusals_a_pack_placement_keeps_are_those_pack_gives_afresh(monkeypatch: pytest.MonkeyPatch, scenario):
    """``PackPlacement`` answers a job of a (num_gpus, gpu_types) it refused since room last grew
    without packing: every answer of a heuristic's run equals that of a placement with nothing
    kept, and some answers were kept ones."""
    kept = [0]
    place = common.PackPlacement.place

    def checked(self, view, job):
        fresh = common.PackPlacement(self.pools, self.type_order, self.elastic)  # (nothing kept)
        spec = view.job(job)
        memo_view, grown, refused = self._refused
        if memo_view is view and grown == view.room_grown() and (spec.num_gpus, spec.gpu_types) in refused:
            kept[0] += 1
        answer = place(self, view, job)
        assert answer == place(fresh, view, job)
        return answer

    monkeypatch.setattr(common.PackPlacement, "place", checked)
    sc = scenarios.get(scenario, {"workload.synthetic.num_jobs": "150"})
    for policy in ("fifo", "sjf"):
        scenarios.simulate(sc, registry.make(policy), 0)
    assert kept[0] > 0
