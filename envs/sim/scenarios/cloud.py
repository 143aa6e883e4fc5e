"""``cloud``: the dual-agent scheduler's public-cloud setting (KDD'23). A heterogeneous pool of
16 servers (6 V100, 4 A100, 6 T4, 8 GPUs each; no inference loans) whose machines differ in
speed by a latent factor shared within each of 4 racks / SKU groups (log-normal, sigma 0.15, plus
sigma 0.05 per machine), runs that fluctuate (a log-normal factor, sigma 0.1, drawn at every
(re)start) and co-located jobs that slow each other (each other job on a shared server costs
10%). So a job's duration depends on where it is placed. Every job may use any GPU type; the
fee (GPU-hours x the type's price) is reported beside the JCT. 300 synthetic jobs at 90%
offered load.

Information: ``clairvoyant`` (the dual-agent paper's schedulers know each job's work; its point
is the machines' latent speeds, which no level reveals).
"""

from envs.sim.engine import SimConfig
from envs.sim.information import InformationConfig
from envs.sim.scenarios.base import ClusterConfig, Scenario, WorkloadConfig, register
from envs.sim.workload import AttributeSampler, SyntheticWorkload


@register("cloud")
def cloud() -> Scenario:
    return Scenario(
        name="cloud",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_mix="V100-32GB:6,A100-40GB:4,T4-16GB:6", inference_servers=0, speed_groups=4),
        workload=WorkloadConfig(
            synthetic=SyntheticWorkload(num_jobs=300), load=0.9, attributes=AttributeSampler(any_gpu_fraction=1.0)
        ),
        sim=SimConfig(fluctuation=0.1, contention=0.1),
    )
