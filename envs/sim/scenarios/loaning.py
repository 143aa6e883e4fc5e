"""``loaning``: Aryl's setting. A V100 training cluster borrows idle T4 servers from an inference
cluster whose load follows the daily curve of Aryl's Figure 1 (peak-to-trough 2.2, mean 65%,
a four-hour peak at night). Synthetic Philly/ITP-like jobs at 90% offered load on the training
pool (Aryl: 82% average training utilisation with queues of more than 3,000 s); jobs of models
that scale well (resnet50, vgg16, bert) are elastic between half and twice their request; 21% of
jobs accept any GPU type. 1,000 jobs, about 3.7 days of arrivals.

Information: ``clairvoyant``: Aryl relies on jobs' running times, which "can be predicted with
profiling and ML methods" (its section 4); ``benchmarks/estimate_error.py`` measures what
prediction error costs (its section 7.5).
"""

from envs.sim.information import InformationConfig
from envs.sim.scenarios.base import ClusterConfig, Scenario, WorkloadConfig, register
from envs.sim.workload import SyntheticWorkload


@register("loaning")
def loaning() -> Scenario:
    return Scenario(
        name="loaning",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_servers=16, inference_servers=24),
        workload=WorkloadConfig(synthetic=SyntheticWorkload(num_jobs=1000), load=0.9),
    )
