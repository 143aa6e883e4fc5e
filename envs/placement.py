"""The placement environment: which servers the next job's workers go to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import CoreEnv
from envs.obs import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES
from envs.sim.policy import Ordering
from envs.sim.scenarios.base import servers_of
from envs.spaces import MaskedDiscrete


class PlacementEnv(CoreEnv):
    """
    ## Description
    The same simulator as the ordering env, the other seat: an ordering component (a heuristic
    by name, or any object with the ``Ordering`` protocol, e.g. a frozen trained ordering agent)
    picks which job starts next, and the agent picks servers for it, one server per step. As many
    of the job's remaining workers as fit go on the chosen server; the job starts once all its
    base workers are placed (its gang size is what the placement heuristic would give, e.g. the
    base demand of an elastic job under Aryl). Steps with a single valid server are taken
    automatically. A copy (``pickle``, ``copy.deepcopy``), after reset or mid-episode, goes on
    exactly as the original does (it replays the episode so far: see ``envs.base.CoreEnv``).

    ## Action Space
    ``Discrete(S)``: a server id (S = servers of the scenario, training and inference).

    ## Observation Space
    ``Box(-1, 1, (S * 13 + 16 + 1 + 12,), float32)``: per server 13 features, then the job's
    16 features (as in the ordering env), the log2(1 + workers still to place) / 6, and the 12
    cluster features.

    | index | feature | meaning |
    |---|---|---|
    | s*13 + 0 | placeable | 1 if new workers may go there |
    | s*13 + 1 | free | free GPUs / its GPUs |
    | s*13 + 2 | inference | 1 for an inference server |
    | s*13 + 3 | reclaiming | 1 if it is being reclaimed |
    | s*13 + 4 | type_speed | training speed of its GPU type / 2 (V100 = 0.5) |
    | s*13 + 5 | speed_est | machine speed factor - 1, estimated from observed job speeds |
    | s*13 + 6 | speed_std | its standard deviation (log speed; envs.obs.SpeedEstimator) |
    | s*13 + 7 | jobs | log1p(jobs hosted) / 3 |
    | s*13 + 8 | allowed | 1 if the job may use its GPU type |
    | s*13 + 9 | chosen | 1 if the job already has workers there |
    | s*13 + 10 | valid | 1 if the next worker may go there (= the mask) |
    | s*13 + 11 | fits_left | 1 if its free GPUs hold all the workers still to place |
    | s*13 + 12 | spare | (free GPUs - workers still to place) / its GPUs, clipped to [-1, 1] |
    | S*13 + 0..15 | job | the ordering env's job features |
    | S*13 + 16 | left | log2(1 + workers still to place) / 6 |
    | S*13 + 17.. | cluster | the ordering env's 12 cluster features |

    ## Action Mask
    ``action_masks()`` and ``info["action_mask"]``: placeable servers with free GPUs of a type
    the job allows; after the first choice, only servers of the same type (one type per job);
    the first choice only among types whose free GPUs hold the whole gang. Never all zero while
    the episode runs. An action outside the mask, or one that is not an integer (``step(0.5)``,
    ``step(True)``), raises ``InvalidAction``.

    ## Rewards
    As in the ordering env (shared objective; ``reward=`` by name).

    ## Episode End
    As in the ordering env; the last ``info["metrics"]`` holds the episode's summary.

    ## Arguments
    ``gymnasium.make("loangym/Placement-v0", ordering="aryl", scenario="default", ...)``: the
    ordering env's arguments (scenario, overrides, trace, seeds, placement, scaling, reclaim,
    preemption, reward) plus ``ordering`` (heuristic name or Ordering object). ``placement``
    names the heuristic whose gang sizes and expert choices the env uses.

    ## Version History
    * v0: initial version (observation layout 2: 16 job features); layout 3 adds the servers'
      ``fits_left`` and ``spare``, so best fit is one comparison per server.
    """

    def __init__(self, ordering: str | Ordering = "aryl", **kwargs: Any) -> None:
        super().__init__(1, **kwargs)
        self.ordering_spec = ordering
        servers = len(servers_of(self.config.scenario_obj().cluster))
        self.num_servers = servers
        self.action_space = MaskedDiscrete(servers, self.action_masks)
        self._obs_size = servers * len(SERVER_FEATURES) + len(JOB_FEATURES) + 1 + len(CLUSTER_FEATURES)
        self.observation_space = spaces.Box(-1.0, 1.0, (self._obs_size,), np.float32)
        self._mask = np.zeros(servers, dtype=bool)

    def _begin(self) -> None:
        spec = self.ordering_spec
        self.ordering = self.core.heuristic(spec).ordering if isinstance(spec, str) else spec
        self._rank: Iterator[int] = self._walk(self.ordering.rank(self.core.view))
        self._placing = False
        self._to_choice()

    def _act(self, server: int) -> None:
        if self.core.place_on(server):
            self._placing = False
        self._to_choice()

    def _observe(self) -> np.ndarray:
        return self.encoder.placement(self.core.placing, self.core.left, self.core.chosen, self._mask)

    def expert_action(self) -> int:
        """The server the placement heuristic would use next for this job."""
        return self.core.expert_server()

    # ------------------------------------------------------------------ internals
    def _to_choice(self) -> None:
        """Run to the next real choice: pick the next job if none is being placed, take forced
        moves (a single valid server), advance time when no job can start."""
        while not self.core.done:
            if not self._placing and not self._next_job():
                self.core.advance()
                self._rank = self._walk(self.ordering.rank(self.core.view))
                continue
            mask = self.core.placement_mask()
            if mask.sum() > 1:
                self._mask = mask
                return
            if self.core.place_on(int(np.flatnonzero(mask)[0])):  # a forced move is no decision
                self._placing = False
        self._mask = np.zeros(self.num_servers, dtype=bool)

    def _next_job(self) -> bool:
        """The next job of the ordering's ranking that can start (one pass per decision point,
        as ComposedScheduler walks it), or False when there is none."""
        for job in self._rank:
            if self.core.can_start(job) is not None:
                self.core.begin_placement(job)
                self._placing = True
                return True
            if self.ordering.blocking:
                return False
        return False
