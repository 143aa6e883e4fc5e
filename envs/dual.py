"""Both agents in one PettingZoo AEC environment: "ordering" picks a job, "placement" its servers."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

from envs.base import RENDER_MODES, InvalidAction, action_index, ansi_picture, check_render_mode
from envs.core import Core, CoreConfig
from envs.obs import CLUSTER, JOB, SERVER, Encoder
from envs.sim.scenarios.base import servers_of

ORDERING, PLACEMENT = "ordering", "placement"


class DualEnv(AECEnv):
    """
    ## Description
    The ordering and placement envs joined (the KDD'23 dual-agent setting): agent "ordering"
    acts at each decision point (a job slot, or "advance"); after it picks a job, agent
    "placement" picks servers for it until its gang is placed; then "ordering" again. They share
    the reward. Observations and actions are exactly those of ``loangym/Ordering-v1`` and
    ``loangym/Placement-v1`` (observation layout 4); each agent's observation is a dict ``{"observation": Box,
    "action_mask": int8 array}`` as PettingZoo expects. Decision points where no job can start
    are skipped; forced placements (a single valid server) are not.

    ## Rewards
    Shared, by name (``reward=``), as in the single-agent envs; every agent receives every
    step's reward.

    ## Episode End
    Both agents terminate when every job has finished, or truncate at the horizon;
    ``infos[agent]["metrics"]`` then holds the episode's summary.

    ## Arguments
    ``envs.dual.env(scenario="default", max_jobs=32, seeds=(0, 10000), render_mode=None, ...)`` with
    the ordering env's keyword arguments (``seeds`` is the range of scenario seeds).
    ``render_mode="ansi"``: ``render()`` returns the ordering env's text picture.

    ## Version History
    * v1 (``loangym_dual_v1``): observation layout 4, as ``loangym/Ordering-v1`` and
      ``loangym/Placement-v1``.
    * v0: layouts 1 to 3.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": list(RENDER_MODES),
        "name": "loangym_dual_v1",
        "is_parallelizable": False,
    }

    def __init__(self, max_jobs: int = 32, render_mode: str | None = None, **kwargs: Any) -> None:
        super().__init__()
        check_render_mode(render_mode)
        self.render_mode = render_mode
        self.config = CoreConfig.from_kwargs(**kwargs)
        self.core = Core(self.config)
        self.slots = max_jobs
        self.encoder = Encoder(self.core, max_jobs)
        ns = len(servers_of(self.config.scenario_obj().cluster))
        self.num_servers = ns
        self.possible_agents = [ORDERING, PLACEMENT]
        sizes = {
            ORDERING: (max_jobs * len(JOB) + len(CLUSTER), max_jobs + 1),
            PLACEMENT: (ns * len(SERVER) + len(JOB) + 1 + len(CLUSTER), ns),
        }
        self._sizes = sizes
        self.observation_spaces = {
            a: gymnasium.spaces.Dict(
                {
                    "observation": gymnasium.spaces.Box(-1.0, 1.0, (obs,), np.float32),
                    "action_mask": gymnasium.spaces.Box(0, 1, (act,), np.int8),
                }
            )
            for a, (obs, act) in sizes.items()
        }
        self.action_spaces = {a: gymnasium.spaces.Discrete(act) for a, (_, act) in sizes.items()}
        self._rng = np.random.default_rng()
        self._ordering_mask = np.zeros(max_jobs + 1, dtype=bool)  # the agents' masks now
        self._placement_mask = np.zeros(ns, dtype=bool)

    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if options and "scenario_seed" in options:
            scenario_seed = int(options["scenario_seed"])
        else:
            scenario_seed = int(self._rng.integers(*self.config.seeds))
        self.core.reset(scenario_seed)
        self.encoder.reset()
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = ORDERING
        self._to_ordering_choice()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        if self.core.done:
            obs_size, n_actions = self._sizes[agent]
            return {"observation": np.zeros(obs_size, np.float32), "action_mask": np.zeros(n_actions, np.int8)}
        if agent == ORDERING:
            obs = self.encoder.ordering(self._visible, self._fits)
            mask = self._ordering_mask
        else:
            mask = self._placement_mask if self.agent_selection == PLACEMENT else np.zeros(self.num_servers, bool)
            if self.agent_selection == PLACEMENT:
                obs = self.encoder.placement(self.core.placing, self.core.left, self.core.chosen, mask)
            else:
                obs = np.zeros(self._sizes[PLACEMENT][0], np.float32)
        return {"observation": obs, "action_mask": mask.astype(np.int8)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        a = action_index(action)
        self._cumulative_rewards[agent] = 0.0
        if agent == ORDERING:
            mask = self._ordering_mask
            if not 0 <= a < len(mask) or not mask[a]:
                raise InvalidAction(f"ordering action {a} is not allowed now: valid {np.flatnonzero(mask).tolist()}")
            if a == self.slots:
                self.core.advance()
                self._to_ordering_choice()
            else:
                self.core.begin_placement(self._visible[a])
                self._placement_mask = self.core.placement_mask()
                self.agent_selection = PLACEMENT
        else:
            mask = self._placement_mask
            if not 0 <= a < len(mask) or not mask[a]:
                raise InvalidAction(f"placement action {a} is not allowed now: valid {np.flatnonzero(mask).tolist()}")
            if self.core.place_on(a):
                self.agent_selection = ORDERING
                self._to_ordering_choice()
            else:
                self._placement_mask = self.core.placement_mask()
        r = self.core.reward()
        self.rewards = {x: r for x in self.agents}
        if self.core.done:
            for x in self.agents:
                self.terminations[x] = not self.core.truncated
                self.truncations[x] = self.core.truncated
                self.infos[x] = {"metrics": self.core.metrics}
        self._accumulate_rewards()

    # ------------------------------------------------------------------ internals
    def _to_ordering_choice(self) -> None:
        """Run to the ordering agent's next choice; its mask (kept until the next step: nothing
        changes the simulator while the placement agent places the job it picks)."""
        self._visible, self._fits = self.core.next_choice(self.slots)
        self._ordering_mask = self.core.ordering_mask(self._fits, self.slots)
        if self.core.done:
            self.agent_selection = ORDERING

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the single-agent envs' text picture (:func:`envs.base.ansi_picture`)."""
        return None if self.render_mode is None else ansi_picture(self.core)

    def close(self) -> None:
        return None


def env(**kwargs: Any) -> DualEnv:
    """PettingZoo-style constructor."""
    return DualEnv(**kwargs)
