"""The information model: what the view reveals at each level, and that nothing reads the truth.

The decisive test perturbs the true durations while keeping the estimates fixed: a policy that
reads only what the view reveals then makes the same decisions, event for event, up to the first
completion (when the truths differ, the finishes do, and from then on everything may).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from envs.sim import information, scenarios
from envs.sim.engine import Engine
from envs.sim.information import InformationConfig, Knowledge, estimated_total
from heuristics import registry

SMALL = {"workload.synthetic.num_jobs": "40"}


def _built(name: str = "default", level: str = "estimate", seed: int = 0, **sets: str) -> scenarios.Built:
    return scenarios.build(scenarios.get(name, SMALL | {"information.level": level} | sets), seed)


def _engine(b: scenarios.Built, policy: str, log: bool = False, knowledge: Knowledge | None = None) -> Engine:
    pol = registry.make(policy)
    if hasattr(pol, "use_rng"):
        pol.use_rng(np.random.default_rng(0))
    s = b.scenario
    rng = np.random.default_rng(1)
    return Engine(
        b.servers, b.jobs, pol, scenarios.shared_throughput(), b.demand, s.sim, rng, log, knowledge or b.knowledge
    )


def test_estimates_are_seeded_log_normal_and_per_user_biased():
    cfg = InformationConfig(level="estimate", sigma=0.5, user_sigma=0.0)
    b = _built(seed=3, **{"workload.synthetic.num_jobs": "2000"})
    k = information.draw(cfg, b.jobs, np.random.default_rng(7))
    logs = np.log(k.factor)
    assert abs(logs.mean()) < 0.05 and abs(logs.std() - 0.5) < 0.03
    assert k.factor == information.draw(cfg, b.jobs, np.random.default_rng(7)).factor
    jobs = [dataclasses.replace(j, user=f"u{j.job_id % 2}") for j in b.jobs]
    biased = information.draw(InformationConfig("estimate", 0.0, 1.0), jobs, np.random.default_rng(7))
    assert len({round(f, 12) for f in biased.factor}) == 2  # one shared factor per user
    assert information.draw(InformationConfig("none"), jobs, np.random.default_rng(7)).factor == (1.0,) * len(jobs)


def test_an_estimate_is_doubled_while_the_job_outlives_it():
    assert estimated_total(100.0, 0.0) == 100.0
    assert estimated_total(100.0, 100.0) == 200.0
    assert estimated_total(100.0, 350.0) == 400.0


@pytest.mark.parametrize("level", ["clairvoyant", "estimate", "none"])
def test_what_the_view_reveals_at_each_level(level: str):
    b = _built("cloud", level)
    e = _engine(b, "fifo")
    view = e.view
    e.start()
    e.next_decision()
    job = next(iter(view.pending))
    spec, truth = view.job(job), b.jobs[job]
    st = view.state(job)
    done, total = view.work(job)  # the snapshot's, without it
    assert done == st.work_done and (total == st.work_total or (math.isnan(total) and math.isnan(st.work_total)))
    factor = b.knowledge.factor[job]
    if level == "clairvoyant":
        assert spec is truth and st.work_total == truth.duration and view.remaining_work(job) == truth.duration
    elif level == "estimate":
        assert factor != 1.0 and spec.duration == truth.duration * factor
        assert st.work_total == pytest.approx(truth.duration * factor) and st.remaining_work == st.work_total
        assert view.remaining_work(job) == st.remaining_work
    else:
        assert math.isnan(spec.duration) and math.isnan(st.work_total) and math.isnan(st.remaining_work)
        assert math.isnan(view.remaining_work(job)) and st.work_done == 0.0
    assert {s.speed_factor for s in view.servers} == {1.0}  # never the latent machine speeds
    assert len({s.speed_factor for s in b.servers}) > 1


def test_an_oracle_sees_the_truth_at_any_level():
    b = _built("cloud", "none")
    e = _engine(b, "oracle-sjf")
    e.start()
    e.next_decision()
    job = next(iter(e.view.pending))
    assert e.view.job(job) is b.jobs[job] and e.view.state(job).work_total == b.jobs[job].duration
    assert e.view.servers == tuple(b.servers) and e.view.information == "clairvoyant"


def test_oracle_sjf_at_none_is_sjf_at_clairvoyant():
    s = scenarios.get("default", SMALL)
    blind = dataclasses.replace(s, information=InformationConfig(level="none"))
    a = scenarios.simulate(s, registry.make("sjf"), 0)
    o = scenarios.simulate(blind, registry.make("oracle-sjf"), 0)
    assert np.array_equal(a.finish, o.finish, equal_nan=True)


def _perturbed(b: scenarios.Built, seed: int) -> tuple[list, Knowledge]:
    """The same jobs with other true durations, and the knowledge that keeps every estimate."""
    p = np.exp(np.random.default_rng(seed).normal(0.0, 0.5, len(b.jobs)))
    jobs = [dataclasses.replace(j, duration=j.duration * float(q)) for j, q in zip(b.jobs, p, strict=True)]
    factor = tuple(f * j.duration / k.duration for f, j, k in zip(b.knowledge.factor, b.jobs, jobs, strict=True))
    return jobs, Knowledge("estimate", factor)


def _until_first_finish(log: list[tuple[float, str, int, str]]) -> list[tuple[float, str, int, str]]:
    out = []
    for row in log:
        if row[1] in ("finish", "phase"):
            break
        out.append(row)
    return out


ESTIMATING = [n for n in registry.names() if not registry.entry(n).oracle]


@pytest.mark.parametrize("policy", ESTIMATING)
@pytest.mark.parametrize("level", ["estimate", "none"])
def test_no_policy_reads_the_truth(policy: str, level: str):
    if level == "none" and registry.entry(policy).needs != "none":
        pytest.skip("the policy refuses information=none")
    b = _built(
        "default",
        level,
        **{
            "workload.synthetic.num_jobs": "60",
            "workload.synthetic.min_duration_s": "20000",
            "cluster.training_servers": "16",
        },
    )
    jobs, knowledge = _perturbed(b, 5)
    if level == "none":
        knowledge = b.knowledge
    base = _engine(b, policy, log=True)
    base.run()
    other = _engine(dataclasses.replace(b, jobs=jobs), policy, log=True, knowledge=knowledge)
    other.run()
    first = _until_first_finish(base.log or [])
    second = _until_first_finish(other.log or [])
    n = min(len(first), len(second))
    assert n > 20 and sum(r[1] == "start" for r in first[:n]) > 5
    assert first[:n] == second[:n]
