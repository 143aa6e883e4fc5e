"""ClusterView.watch_stamps: the engine tells a reader which jobs' stamps changed (issue 21: phase 2
reads only those instead of every running job's stamp at every decision)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.sim import scenarios
from envs.sim.policy import ClusterView, ComposedScheduler, JobStatus
from envs.sim.scenarios.base import simulate
from heuristics.aryl import ArylOrdering
from heuristics.aryl_config import ArylConfig
from heuristics.aryl_place import ArylPlacement
from heuristics.aryl_scaling import ArylScaling
from heuristics.registry import make


def _aryl_with(scaling: type[ArylScaling]) -> ComposedScheduler:
    """``aryl`` with phase 2 by ``scaling`` (a subclass that checks what it reads)."""
    policy = make("aryl")
    assert isinstance(policy, ComposedScheduler)
    assert isinstance(policy.placement, ArylPlacement) and isinstance(policy.ordering, ArylOrdering)
    policy.scaling = scaling(ArylConfig(), policy.placement, policy.ordering)
    return policy


def test_watched_set_holds_exactly_the_running_jobs_whose_stamp_changed():
    """At every phase-2 decision of a run with loans, reclaims and failures, the running jobs in
    the watched set are the running jobs whose (job, stamp) pair is new since the last decision."""
    seen: collections.Counter[str] = collections.Counter()
    state: dict[str, object] = {}

    class Checking(ArylScaling):
        def scale(self, view: ClusterView):  # type: ignore[no-untyped-def]
            stamps = dict(view.running_stamps())
            if "watched" not in state:
                state["watched"] = view.watch_stamps()
            else:
                before = state["stamps"]
                assert isinstance(before, dict)
                changed = {j for j, v in stamps.items() if before.get(j) != v}
                watched = state["watched"]
                assert isinstance(watched, set)
                assert {j for j in watched if j in stamps} == changed
                seen["changed"] += len(changed)
                seen["unchanged"] += len(stamps) - len(changed)
                watched.clear()
            state["stamps"] = stamps
            yield from super().scale(view)

    policy = _aryl_with(Checking)
    s = scenarios.get("loaning", {"workload.synthetic.num_jobs": "120", "sim.mtbf_h": "200"})
    simulate(s, policy, 0)
    assert seen["changed"] > 100 and seen["unchanged"] > 100, seen


def test_projection_stays_the_same_while_the_stamp_does_and_gives_the_remaining_work():
    """ClusterView.projection (phase 2 computes remaining works from it, kept by stamp): at every
    phase-2 decision of a run with contention, loans, reclaims and failures, a running job whose
    stamp is the one it had at the last decision has the same projection, and the projection's
    formula gives ``remaining_work`` bit for bit."""
    seen: collections.Counter[str] = collections.Counter()
    last: dict[int, tuple[int, object]] = {}

    class Checking(ArylScaling):
        def scale(self, view: ClusterView):  # type: ignore[no-untyped-def]
            now = view.now
            for job, stamp in view.running_stamps():
                p = view.projection(job)
                if view.status_of(job) != JobStatus.RUNNING:
                    assert p is None
                    continue
                assert p is not None
                work, done, since, rate = p
                if now > since:
                    done = min(work, done + rate * (now - since))
                assert max(0.0, work - done) == view.remaining_work(job)
                if job in last and last[job][0] == stamp:
                    assert last[job][1] == p
                    seen["kept"] += 1
                else:
                    seen["new"] += 1
                last[job] = (stamp, p)
            yield from super().scale(view)

    policy = _aryl_with(Checking)
    s = scenarios.get("loaning", {"workload.synthetic.num_jobs": "120", "sim.mtbf_h": "200", "sim.contention": "0.1"})
    simulate(s, policy, 0)
    assert seen["kept"] > 100 and seen["new"] > 100, seen


def test_no_projection_below_the_clairvoyant_level():
    s = scenarios.get("loaning", {"workload.synthetic.num_jobs": "30", "information.level": "estimate"})
    got: list[tuple[float, float, float, float] | None] = []

    class Checking(ArylScaling):
        def scale(self, view: ClusterView):  # type: ignore[no-untyped-def]
            got.extend(view.projection(job) for job in view.running)
            yield from super().scale(view)

    policy = _aryl_with(Checking)
    simulate(s, policy, 0)
    assert got and all(p is None for p in got)
