"""Frozen agents in the other seat, and agent-driven episodes.

* :class:`AgentPlacer`: a trained placement policy placing the ordering env's chosen job.
* :class:`AgentOrdering`: a trained ordering policy as the placement env's ordering component
  (it follows the ``Ordering`` protocol: ``rank`` yields its successive choices).
* :func:`run_episode`: both seats filled (agents, or heuristics by name) on one scenario seed,
  through the same :class:`~envs.core.Core` the envs use; returns the episode's metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from envs.core import Core, CoreConfig
from envs.obs import Encoder
from envs.sim.policy import ClusterView

Predictor = Any
"""A trained policy: anything with SB3's ``predict(obs, deterministic=..., action_masks=...)``."""


def _act(model: Predictor, obs: np.ndarray, mask: np.ndarray) -> int:
    action, _ = model.predict(obs, deterministic=True, action_masks=mask)
    return int(action)


class AgentPlacer:
    """Places ``core.placing`` with a trained placement policy (deterministic)."""

    def __init__(self, model: Predictor) -> None:
        self.model = model
        self._encoder: Encoder | None = None

    def __call__(self, core: Core) -> None:
        enc = self._encoder
        if enc is None or enc.core is not core:
            enc = self._encoder = Encoder(core, slots=1)
        if enc.episode is not core.engine:
            enc.reset()
        while True:
            mask = core.placement_mask()
            valid = np.flatnonzero(mask)
            server = (
                int(valid[0])
                if len(valid) == 1
                else _act(self.model, enc.placement(core.placing, core.left, core.chosen, mask), mask)
            )
            if core.place_on(server):
                return


class AgentOrdering:
    """A trained ordering policy as an ``Ordering`` component of ``core`` (its env's core)."""

    blocking = True  # it stops when the agent says "advance"

    def __init__(self, model: Predictor, core: Core, slots: int) -> None:
        self.model, self.core, self.slots = model, core, slots
        self.encoder = Encoder(core, slots)

    def rank(self, view: ClusterView) -> Iterator[int]:
        if self.encoder.episode is not self.core.engine:
            self.encoder.reset()
        while True:
            visible, fits = self.core.choices(self.slots)
            if not any(fits):
                return
            a = _act(self.model, self.encoder.ordering(visible, fits), self.core.ordering_mask(fits, self.slots))
            if a == self.slots:
                return
            yield visible[a]


def play_episode(
    config: CoreConfig,
    seed: int,
    ordering: Predictor | str,
    placement: Predictor | None = None,
    slots: int = 32,
) -> Core:
    """One episode with the ordering seat taken by a policy (or heuristic ``ordering`` by name)
    and the placement seat by a policy (or the config's placement heuristic); the finished core
    (its ``result`` and ``metrics``)."""
    core = Core(config)
    core.reset(seed)
    enc = Encoder(core, slots)
    enc.reset()
    placer = AgentPlacer(placement) if placement is not None else None
    heuristic = core.heuristic(ordering).ordering if isinstance(ordering, str) else None
    while True:
        visible, fits = core.next_choice(slots)
        if core.done:
            break
        job: int | None
        if heuristic is not None:
            job = core.expert_job(heuristic, visible)
        else:
            a = _act(ordering, enc.ordering(visible, fits), core.ordering_mask(fits, slots))
            job = visible[a] if a < slots else None
        if job is None:
            core.advance()
        elif placer is not None:
            core.begin_placement(job)
            placer(core)
        else:
            core.start(job)
    return core


def run_episode(
    config: CoreConfig,
    seed: int,
    ordering: Predictor | str,
    placement: Predictor | None = None,
    slots: int = 32,
) -> dict[str, Any]:
    """The metrics of :func:`play_episode`."""
    metrics = play_episode(config, seed, ordering, placement, slots).metrics
    assert metrics is not None
    return metrics
