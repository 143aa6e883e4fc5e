"""``default``: what train.py uses out of the box. ``loaning`` at half the size (8 training and
12 inference servers) with moderate doses of the other scenarios' features: 30% of the small,
short jobs are trial-and-error, 30% of jobs have deadlines (1.1-3x their duration after submit),
runs fluctuate a little (log-normal sigma 0.05 per (re)start) and co-located jobs cost each other 5%.
300 jobs (about 2 days of arrivals) per episode, so an RL episode is a few hundred decisions.

Information: ``clairvoyant``; ``--set information.level=estimate`` (or ``none``) hides the true
durations.
"""

from envs.sim.engine import SimConfig
from envs.sim.information import InformationConfig
from envs.sim.scenarios.base import ClusterConfig, Scenario, WorkloadConfig, register
from envs.sim.workload import AttributeSampler, SyntheticWorkload


@register("default")
def default() -> Scenario:
    return Scenario(
        name="default",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_servers=8, inference_servers=12),
        workload=WorkloadConfig(
            synthetic=SyntheticWorkload(num_jobs=300),
            load=0.9,
            attributes=AttributeSampler(te_fraction=0.3, deadline_fraction=0.3),
        ),
        sim=SimConfig(fluctuation=0.05, contention=0.05),
    )
