"""How fifo, sjf and qssf start an elastic job (``heuristics.common.start_sizes``): at its max
size where that fits now, else at its requested size; ``elastic=requested`` keeps the published
policies' requested size."""

from __future__ import annotations

import dataclasses

from envs.core import Components, Core, CoreConfig
from heuristics import registry
from heuristics.common import PackPlacement, start_sizes


def _first_decision() -> Core:
    config = CoreConfig.from_kwargs(
        scenario="default",
        overrides={"workload.synthetic.num_jobs": "40"},
        components=Components("sjf", "sjf", "sjf", "sjf"),
    )
    core = Core(config)
    core.reset(0)
    return core


def test_an_elastic_job_starts_at_its_max_where_it_fits_else_at_its_request() -> None:
    core = _first_decision()
    view = core.view
    elastic = [j for j in range(core.num_jobs) if view.job(j).max_gpus > view.job(j).num_gpus]
    assert elastic, "the default scenario has elastic jobs"
    job = elastic[0]
    spec = view.job(job)
    assert start_sizes(spec) == (spec.max_gpus, spec.num_gpus)
    assert start_sizes(spec, "requested") == (spec.num_gpus,)
    for placement, size in ((PackPlacement(), spec.max_gpus), (PackPlacement(elastic="requested"), spec.num_gpus)):
        start = placement.place(view, job)
        assert start is not None and sum(n for _, n in start.base) == size and start.flex == ()
    rigid = dataclasses.replace(spec, max_gpus=spec.num_gpus, min_gpus=spec.num_gpus)
    assert start_sizes(rigid) == (spec.num_gpus,)


def test_the_setting_reaches_every_pack_policy() -> None:
    for name in ("fifo", "sjf", "qssf", "oracle-sjf"):
        assert registry.make(name).placement.elastic == "max"
        old = registry.make(name, {"elastic": "requested"})
        assert old.placement.elastic == "requested"
