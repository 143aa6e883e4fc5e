"""Oracles: policies that see the truth whatever a run's information level.

An oracle's view is clairvoyant and shows the machines' true speed factors
(``envs/sim/information.py``). Oracles exist to measure a task's headroom (how much knowing more
is worth), never as baselines: their names start with ``oracle-`` and results flag them.

``oracle-sjf``: ``sjf`` ranking by the true remaining run time. ``oracle-aryl``: Aryl, its
phase 1, knapsack and reclaim planned with true durations.
"""

from __future__ import annotations

from heuristics.aryl import aryl
from heuristics.aryl_config import ArylConfig
from heuristics.common import PackConfig
from heuristics.fifo import sjf
from heuristics.registry import register

register("oracle-sjf", sjf, PackConfig, oracle=True)
register("oracle-aryl", aryl, ArylConfig, oracle=True)
