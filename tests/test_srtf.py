"""srtf and oracle-srtf: preemptive shortest remaining time first, on hand-built engine
scenarios (event logs worked out by hand), and on a scenario against sjf's invariants."""

from __future__ import annotations

import numpy as np
import pytest

from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.engine import Engine, SimConfig
from envs.sim.information import Knowledge
from envs.sim.model import A100, T4, V100, JobSpec, Pool, ServerSpec
from heuristics.common import STARTS, PackPlacement
from heuristics.registry import check_information, entry, make
from heuristics.srtf import SrsfConfig, SrsfEftConfig, SrtfConfig, srsf, srsf_eft, srtf

NO_OVERHEAD = SimConfig(restart_base_s=0.0, restart_per_gpu_s=0.0, checkpoint_interval_s=0.0, sample_s=0.0)


class Linear:
    """rate = workers / requested x GPU speed: a job runs exactly its duration."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed


def job(i: int, submit: float, duration: float, gpus: int, grace: float = 0.0) -> JobSpec:
    return JobSpec(i, f"j{i}", submit, duration, gpus, gpus, gpus, "m", grace_period=grace)


def run(jobs: list[JobSpec], factory=srtf, **settings: float):
    policy = factory(SrtfConfig(**settings))  # type: ignore[arg-type]
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING)]
    return Engine(srv, jobs, policy, Linear(), None, NO_OVERHEAD, log=True).run()  # type: ignore[arg-type]


def events(r, *kinds: str) -> list[tuple[float, str, int]]:
    return [(t, k, j) for t, k, j, _ in r.log if k in kinds]


def test_a_short_job_preempts_a_long_one_at_the_round_and_nothing_is_lost():
    # j0 holds the server; j1 (1,000 s) arrives at 10 s. At the round (900 s) j0 has 99,100 s
    # left, over 8 x 1,000: preempted gracefully, it checkpoints for 100 s; j1 runs 1,000-2,000;
    # j0 resumes at 2,000 with all its work and ends at 2,000 + 99,100.
    r = run([job(0, 0.0, 100_000.0, 8, grace=100.0), job(1, 10.0, 1_000.0, 4)])
    assert events(r, "preempt", "start", "finish") == [
        (0.0, "start", 0),
        (900.0, "preempt", 0),
        (1_000.0, "start", 1),
        (2_000.0, "finish", 1),
        (2_000.0, "start", 0),
        (101_100.0, "finish", 0),
    ]


def test_no_preemption_where_the_running_job_is_not_factor_times_longer():
    # at 900 s j0 has 4,100 s left, under 8 x 1,000: j1 waits for j0's end
    r = run([job(0, 0.0, 5_000.0, 8, grace=100.0), job(1, 10.0, 1_000.0, 4)])
    assert not events(r, "preempt")
    assert events(r, "start") == [(0.0, "start", 0), (5_000.0, "start", 1)]
    r = run([job(0, 0.0, 5_000.0, 8, grace=100.0), job(1, 10.0, 1_000.0, 4)], factor=4.0)
    assert events(r, "preempt") == [(900.0, "preempt", 0)]


def test_the_gpus_freed_for_a_job_wait_for_it_while_the_other_victims_checkpoint():
    # j2 needs the whole server, held by j0 (checkpoint 50 s) and j1 (300 s). j0 is back in the
    # queue at 950 s and fits its 4 free GPUs, but they are kept for j2, which starts at 1,200 s.
    r = run([job(0, 0.0, 100_000.0, 4, grace=50.0), job(1, 0.0, 100_000.0, 4, grace=300.0), job(2, 10.0, 1_000.0, 8)])
    assert events(r, "preempt") == [(900.0, "preempt", 0), (900.0, "preempt", 1)]
    starts = events(r, "start")
    assert starts[2] == (1_200.0, "start", 2)
    assert all(t >= 2_200.0 for t, _, j in starts[3:])  # j0 and j1 after j2 is done
    assert len(events(r, "finish")) == 3


def test_srsf_ranks_by_remaining_gpu_service_where_srtf_ranks_by_time():
    # j0 holds the server until 500 s; j1 (1,000 s on 8 GPUs: 8,000 GPU-s) and j2 (2,000 s on 2
    # GPUs: 4,000 GPU-s) wait. srtf starts the shorter j1 first, srsf the smaller service j2,
    # and backfills nothing beside it (j1 needs the whole server)
    jobs = [job(0, 0.0, 500.0, 8), job(1, 10.0, 1_000.0, 8), job(2, 20.0, 2_000.0, 2)]
    assert events(run(jobs), "start")[1:] == [(500.0, "start", 1), (1_500.0, "start", 2)]
    assert events(run(jobs, srsf), "start")[1:] == [(500.0, "start", 2), (2_500.0, "start", 1)]


def test_srsf_preempts_by_service():
    # j0 runs 100,000 s on 2 GPUs; j1 needs all 8 GPUs for 10,000 s (80,000 GPU-s). At the round
    # (900 s) j0 has 99,100 s left, 198,200 GPU-s: srtf preempts it (99,100 >= 8 x 10,000 s), srsf
    # does not (198,200 < 8 x 80,000 GPU-s), and with a factor of 2 it does (>= 160,000)
    jobs = [job(0, 0.0, 100_000.0, 2, grace=100.0), job(1, 10.0, 10_000.0, 8)]
    assert events(run(jobs, factor=8.0), "preempt") == [(900.0, "preempt", 0)]
    assert not events(run(jobs, srsf, factor=8.0), "preempt")
    assert events(run(jobs, srsf, factor=2.0), "preempt") == [(900.0, "preempt", 0)]


def test_registered_as_a_duration_policy_and_an_oracle():
    assert entry("srtf").needs == "estimate" and not entry("srtf").oracle
    assert entry("oracle-srtf").oracle and make("oracle-srtf").oracle  # type: ignore[attr-defined]
    assert entry("srsf").needs == "estimate" and not entry("srsf").oracle
    assert entry("oracle-srsf").oracle and make("oracle-srsf").oracle  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="srtf"):
        check_information("srtf", "none")
    check_information("oracle-srtf", "none")


def test_every_job_finishes_on_the_default_scenario_without_losing_work():
    s = scenarios.get("default", {"workload.synthetic.num_jobs": "80"})
    r = scenarios.simulate(s, make("srtf", {"round_s": "300", "factor": "2"}), 3)
    assert not r.truncated and np.isfinite(r.finish).all()
    assert r.preemptions.sum() > 0
    assert r.lost_work.sum() == 0.0  # every preemption is graceful
    assert np.all(r.work_done >= r.work)


def test_an_agent_in_the_ordering_seat_cannot_take_the_gpus_srtf_keeps():
    """With srtf's components in the ordering env, the GPUs freed for a job stay kept for it
    whatever the agent picks: a job they are kept from is masked like one that does not fit (an
    agent that starts the last job it may, the opposite of srtf's order, meets such jobs)."""
    import gymnasium as gym

    import envs  # noqa: F401

    seats = dict(placement="srtf", scaling="srtf", reclaim="srtf", preemption="srtf")
    sets = {"workload.synthetic.num_jobs": "150", "workload.load": "1.5"}
    env = gym.make("loangym/Ordering-v1", scenario="default", overrides=sets, **seats).unwrapped
    env.reset(options={"scenario_seed": 3})
    scheduler, view = env.core.scheduler, env.core.view
    kept = 0
    done = False
    while not done:
        mask = env.action_masks()
        for slot, job in enumerate(view.pending):
            if slot < env.slots and scheduler.preemption.kept_from(view, job) and scheduler.placement.place(view, job):
                kept += 1  # it would fit: only the kept GPUs stop it
                assert not mask[slot], job
        valid = np.flatnonzero(mask[:-1])
        _, _, te, tr, info = env.step(int(valid[-1]) if len(valid) else env.slots)
        done = te or tr
    assert kept > 0  # the episode met jobs that kept GPUs alone held back
    assert info["metrics"]["jobs_unfinished"] == 0


def two_types(jobs: list[JobSpec], name: str = "srsf", **settings: float):
    """One A100 server (twice a V100) and one T4 server (a third of one), 8 GPUs each."""
    policy = make(name, {k: str(v) for k, v in settings.items()})
    srv = [ServerSpec(0, A100, 8, Pool.TRAINING), ServerSpec(1, T4, 8, Pool.TRAINING)]
    return Engine(srv, jobs, policy, Linear(), None, NO_OVERHEAD, log=True).run()  # type: ignore[arg-type]


def test_earliest_finish_waits_for_faster_gpus_only_where_that_ends_the_job_sooner():
    # j0 holds the A100s until 1,000 s (2,000 V100-seconds). j1 (600) would end at 10 + 1,800 s on
    # the T4s and at 1,000 + 300 s after waiting: srsf starts it on the T4s at once, srsf-eft waits.
    # a j1 of 60 ends at 190 s on the T4s and at 1,030 s after waiting: both start it at once
    long = [job(0, 0.0, 2_000.0, 8), job(1, 10.0, 600.0, 8)]
    assert events(two_types(long, factor=100.0), "start") == [(0.0, "start", 0), (10.0, "start", 1)]
    assert events(two_types(long, "srsf-eft", factor=100.0), "start") == [(0.0, "start", 0), (1_000.0, "start", 1)]
    short = [job(0, 0.0, 2_000.0, 8), job(1, 10.0, 60.0, 8)]
    assert events(two_types(short, "srsf-eft", factor=100.0), "start") == [(0.0, "start", 0), (10.0, "start", 1)]
    assert not PackPlacement(start="earliest-finish").monotone and PackPlacement().monotone


def test_earliest_finish_waits_for_one_faster_server_not_for_a_spread_over_several():
    # two 4-GPU A100 servers, busy until 1,000 s, and a free 8-GPU T4 server: j2 (8 GPUs, 600 s)
    # would end at 1,000 + 300 s spread over both A100s, sooner than at 10 + 1,800 s on the T4, but
    # no one A100 server holds it: srsf-eft starts it on the T4 at once
    srv = [
        ServerSpec(0, A100, 4, Pool.TRAINING),
        ServerSpec(1, A100, 4, Pool.TRAINING),
        ServerSpec(2, T4, 8, Pool.TRAINING),
    ]
    jobs = [job(0, 0.0, 2_000.0, 4), job(1, 0.0, 2_000.0, 4), job(2, 10.0, 600.0, 8)]
    policy = srsf_eft(SrsfEftConfig(factor=100.0))
    r = Engine(srv, jobs, policy, Linear(), None, NO_OVERHEAD, log=True).run()  # type: ignore[arg-type]
    assert events(r, "start") == [(0.0, "start", 0), (0.0, "start", 1), (10.0, "start", 2)]


class Spread:
    """Linear, at half the rate on more than one server."""

    def rate(self, spec: JobSpec, workers: int, servers: int, gpu_type) -> float:
        return workers / spec.num_gpus * gpu_type.speed * (1.0 if servers == 1 else 0.5)


def test_earliest_finish_on_one_gpu_type_waits_for_one_server():
    # two 8-GPU V100 servers, j0 (5 GPUs, 100 s) on one and j1 (5 GPUs, 10,000 s) on the other;
    # j2 (6 GPUs, 600 s) arrives at 10 s and fits only spread, 3 + 3, at half speed: it would end
    # at 1,210 s. srsf starts it then; srsf-eft waits for j0's server, free at 100 s, and ends it
    # at 700 s.
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, V100, 8, Pool.TRAINING)]
    jobs = [job(0, 0.0, 100.0, 5), job(1, 0.0, 10_000.0, 5), job(2, 10.0, 600.0, 6)]
    finishes = {}
    for factory, config in ((srsf, SrsfConfig), (srsf_eft, SrsfEftConfig)):
        r = Engine(srv, jobs, factory(config(factor=100.0)), Spread(), None, NO_OVERHEAD, log=True).run()  # type: ignore[arg-type]
        finishes[factory] = r.finish[2]
        assert events(r, "start")[:2] == [(0.0, "start", 0), (0.0, "start", 1)]
        assert events(r, "start")[2] == ((10.0 if factory is srsf else 100.0), "start", 2)
    assert finishes == {srsf: 1_210.0, srsf_eft: 700.0}


def test_gittins_eft_waits_blind_by_the_finished_jobs_durations():
    # information none, two 8-GPU V100 servers. j0 (6 GPUs, 1,000 s) runs on server 0 and finishes
    # at 1,000 s: the history. j1 (5 GPUs, 10,000 s) holds server 1; j2 (5 GPUs, 100 s) starts on
    # server 0 at 1,010 s. j3 (6 GPUs, 1,000 s, j0's template) arrives at 1,100 s and fits only
    # spread, 3 + 3, at half speed: by the history it would end at 1,100 + 2,000 s there, against
    # j2's expected end (1,000 s less the 90 s it has run, from 1,100 s) plus 1,000 s on server 0:
    # gittins starts it spread, gittins-eft waits, and starts it when j2 ends at 1,110 s.
    srv = [ServerSpec(0, V100, 8, Pool.TRAINING), ServerSpec(1, V100, 8, Pool.TRAINING)]
    jobs = [job(0, 0.0, 1_000.0, 6), job(1, 0.0, 10_000.0, 5), job(2, 1_010.0, 100.0, 5), job(3, 1_100.0, 1_000.0, 6)]
    blind = Knowledge("none", (1.0,) * len(jobs))
    ends = {}
    for name in ("gittins", "gittins-eft"):
        policy = make(name, {"factor": 100.0})
        r = Engine(srv, jobs, policy, Spread(), None, NO_OVERHEAD, log=True, knowledge=blind).run()  # type: ignore[arg-type]
        ends[name] = r.finish[3]
        assert events(r, "start")[3] == ((1_100.0 if name == "gittins" else 1_110.0), "start", 3)
    assert ends == {"gittins": 3_100.0, "gittins-eft": 2_110.0}


def test_earliest_finish_is_the_policy_itself_where_it_cannot_tell_a_sooner_end():
    # no duration revealed (information none)
    blind = scenarios.get("cloud", {"workload.synthetic.num_jobs": "40", "information.level": "none"})
    runs = [scenarios.simulate(blind, make("fifo", {"start": start}), 1).finish for start in STARTS]
    assert np.array_equal(*runs)
    cloud = scenarios.get("cloud", {"workload.synthetic.num_jobs": "40"})
    runs = [scenarios.simulate(cloud, make("fifo", {"start": start}), 1).finish for start in STARTS]
    assert not np.array_equal(*runs)


def test_sjf_eft_is_sjf_with_the_earliest_finish_start():
    cloud = scenarios.get("cloud", {"workload.synthetic.num_jobs": "40"})
    named, set_ = (scenarios.simulate(cloud, p, 1).finish for p in (make("sjf-eft"), make("sjf", {"start": STARTS[1]})))
    assert np.array_equal(named, set_) and make("sjf-eft").name == "sjf-eft"
    assert not np.array_equal(named, scenarios.simulate(cloud, make("sjf"), 1).finish)


@pytest.mark.parametrize("name", ["sjf-eft", "srsf-eft", "gittins-eft"])
def test_an_eft_policy_takes_a_start_set_by_the_user(name: str) -> None:
    # the start is the setting's default, not forced over it: start=now is the policy without the wait
    cloud = scenarios.get("cloud", {"workload.synthetic.num_jobs": "40"})
    assert make(name).placement.start == "earliest-finish"  # type: ignore[attr-defined]
    now = make(name, {"start": "now"})
    assert now.placement.start == "now" and now.name == name  # type: ignore[attr-defined]
    if name != "gittins-eft":  # the same policy with the other start (gittins-eft's own settings differ)
        plain = make(name.removesuffix("-eft"))
        assert np.array_equal(scenarios.simulate(cloud, now, 1).finish, scenarios.simulate(cloud, plain, 1).finish)
