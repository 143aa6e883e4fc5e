"""``trace``: replay of a CSV trace (by default the shipped ITP sample: 2,000 real jobs over 4.9
days, 52,174 GPU-hours, about 444 GPUs busy on average) on 64 V100 training servers (512 GPUs:
an offered load near 0.87) beside 48 T4 inference servers. ``--set workload.trace=PATH`` (or
evaluate.py's ``--trace``) replays any CSV of our schema; what it lacks is sampled as in
``loaning``.

Information: ``clairvoyant`` (the trace's recorded durations); ``--set
information.level=estimate`` replays it with estimates.
"""

from envs.sim.information import InformationConfig
from envs.sim.scenarios.base import ITP_TRACE, ClusterConfig, Scenario, WorkloadConfig, register


@register("trace")
def trace() -> Scenario:
    return Scenario(
        name="trace",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_servers=64, inference_servers=48),
        workload=WorkloadConfig(trace=ITP_TRACE),
    )
