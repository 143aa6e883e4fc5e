"""The oracles' placement by true machine speeds, on a hand-built engine case whose event log is
worked out by hand: two V100 servers, the second twice as fast by a latent speed factor that only
an oracle's view shows."""

from __future__ import annotations

from envs.sim.engine import Engine
from envs.sim.model import V100, JobSpec, Pool, ServerSpec
from envs.sim.policy import reconsiders
from heuristics.oracles import TrueSpeedPlacement
from heuristics.registry import entry, make
from heuristics.srtf import SrsfEftConfig
from tests.test_srtf import NO_OVERHEAD, Linear, events, job


def latent(jobs: list[JobSpec], name: str):
    policy = make(name, {"factor": "100"})  # no preemption in these cases
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, V100, 8, Pool.TRAINING, speed_factor=2.0)]
    return Engine(srv, jobs, policy, Linear(), None, NO_OVERHEAD, log=True).run()  # type: ignore[arg-type]


def test_the_oracle_waits_for_a_truly_faster_machine_only_where_that_ends_the_job_sooner():
    # j0 runs on the fast server (2,000 s of work in 1,000 s). j1 (3,000) would end at 10 + 3,000 s
    # on the slow one and at 1,000 + 1,500 s after waiting: the oracle waits. A j1 of 600 ends at
    # 610 s on the slow one and at 1,300 s after waiting: it starts at once.
    slow = [job(0, 0.0, 2_000.0, 8), job(1, 10.0, 3_000.0, 8)]
    r = latent(slow, "oracle-srsf-eft-speed")
    assert events(r, "start") == [(0.0, "start", 0), (1_000.0, "start", 1)]
    assert r.finish[1] == 2_500.0
    quick = [job(0, 0.0, 2_000.0, 8), job(1, 10.0, 600.0, 8)]
    assert events(latent(quick, "oracle-srsf-eft-speed"), "start") == [(0.0, "start", 0), (10.0, "start", 1)]
    # srsf-eft sees two alike V100 servers: j0 on the lowest id, j1 at once on the (truly fast) other
    assert events(latent(slow, "srsf-eft"), "start") == [(0.0, "start", 0), (10.0, "start", 1)]


def test_registered_as_an_oracle_whose_placement_reconsiders():
    assert entry("oracle-srsf-eft-speed").oracle and entry("oracle-srsf-eft-speed").config is SrsfEftConfig
    policy = make("oracle-srsf-eft-speed")
    assert isinstance(policy.placement, TrueSpeedPlacement) and reconsiders(policy.placement)
    assert not reconsiders(TrueSpeedPlacement())
