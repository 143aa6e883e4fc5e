"""The placement environment: which servers the next job's workers go to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import CoreEnv
from envs.obs import CLUSTER, JOB, SERVER
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
    ``Box(-1, 1, (S * 13 + 17 + 1 + 12,), float32)``: per server 13 features, then the job's
    17 features (the same row the ordering env shows for it, ``ahead_gpus`` counted among the
    ``max_jobs`` longest-waiting jobs), the workers still to place, and the 12 cluster features
    (observation layout 4; ``envs.obs.SERVER``, ``JOB`` and ``CLUSTER`` define them by name).

    | index | feature | meaning |
    |---|---|---|
    | s*13 + 0 | placeable | 1 if new workers may go there (up; training, or on loan and not reclaimed) |
    | s*13 + 1 | free | free GPUs / its GPUs |
    | s*13 + 2 | inference | 1 for an inference server |
    | s*13 + 3 | reclaiming | 1 if it is being reclaimed |
    | s*13 + 4 | type_speed | training speed of its GPU type / 2 (V100 = 0.5) |
    | s*13 + 5 | speed_est | estimated machine speed factor - 1, learned from observed job speeds |
    | s*13 + 6 | speed_std | the estimate's standard deviation (in log-speed) |
    | s*13 + 7 | jobs | log1p(jobs hosted) / 3 |
    | s*13 + 8 | allowed | 1 if the current job may use its GPU type |
    | s*13 + 9 | chosen | 1 if the current job already has workers there |
    | s*13 + 10 | valid | 1 if a worker of the current job may go there now (the action mask) |
    | s*13 + 11 | fits_left | 1 if its free GPUs hold all the workers still to place |
    | s*13 + 12 | spare | (free GPUs - workers still to place) / its GPUs, clipped to [-1, 1] |
    | S*13 + 0 | present | 1 if the slot holds a job |
    | S*13 + 1 | gpus | log2(1 + requested GPUs) / 6 |
    | S*13 + 2 | base_gpus | log2(1 + min GPUs) / 6 |
    | S*13 + 3 | elastic_range | log2(1 + max - min GPUs) / 6 |
    | S*13 + 4 | any_type | 1 if it may run on any GPU type (so on loaned inference servers) |
    | S*13 + 5 | remaining | log1p(remaining run time alone, h) / 5, as revealed (0 at information none) |
    | S*13 + 6 | waiting | log1p(hours waited so far) / 5 |
    | S*13 + 7 | te | 1 for a trial-and-error job |
    | S*13 + 8 | has_deadline | 1 if it has a deadline |
    | S*13 + 9 | slack | tanh((deadline - now - remaining) / 24 h); 0 without a deadline |
    | S*13 + 10 | preemptions | min(preemptions, 5) / 5 |
    | S*13 + 11 | fits | 1 if it can start now (the action mask) |
    | S*13 + 12 | inference_speed | its speed on the inference GPU type / on the training type (0 if pinned) |
    | S*13 + 13 | attained | log1p(GPU-hours held so far) / 5 |
    | S*13 + 14 | remaining_base | log1p(remaining run time at its min GPUs, h) / 5, as remaining |
    | S*13 + 15 | ahead_gpus | min GPUs of the visible jobs with less remaining_base / GPUs open to training |
    | S*13 + 16 | predicted | log1p(duration predicted from finished jobs of its user and template, h) / 5 (QSSF) |
    | S*13 + 17 | left | log2(1 + workers still to place) / 6 |
    | S*13 + 18 | training_free | free / up GPUs of the training pool |
    | S*13 + 19 | loaned_free | free loaned GPUs / all inference GPUs |
    | S*13 + 20 | loaned | servers on loan / inference servers |
    | S*13 + 21 | reclaiming | servers being reclaimed / inference servers |
    | S*13 + 22 | inference_load | inference demand, share of its GPUs |
    | S*13 + 23 | day_sin | sin of the time of day |
    | S*13 + 24 | day_cos | cos of the time of day |
    | S*13 + 25 | queue | log1p(jobs waiting) / 5 |
    | S*13 + 26 | hidden | log1p(jobs waiting beyond the visible slots) / 5 |
    | S*13 + 27 | running | log1p(jobs holding GPUs) / 5 |
    | S*13 + 28 | to_arrive | share of the episode's jobs not yet submitted |
    | S*13 + 29 | largest_free | largest free block on one training server / its size |

    ## Action Mask
    ``action_masks()`` and ``info["action_mask"]``: placeable servers with free GPUs of a type
    the job allows; after the first choice, only servers of the same type (one type per job);
    the first choice only among types whose free GPUs hold the whole gang. Never all zero while
    the episode runs. An action that is not an integer (``step(0.5)``, ``step(True)``) raises
    ``InvalidAction``; so does one outside the mask, unless ``invalid_action="advance"`` (below).

    ## Algorithms without masks
    ``gymnasium.make(ID, invalid_action="advance", invalid_penalty=0.0)``: an action outside
    the mask is carried out on the first valid server (the lowest id the mask allows: training
    servers come first), its reward lowered by ``invalid_penalty`` (>= 0), and
    ``info["invalid_action"]`` says whether it happened. The default, ``"raise"``, raises.

    ## Rendering
    ``render_mode=None`` (default) or ``"ansi"``: ``env.render()`` returns the ordering env's
    text picture (clock, queue, servers, loans). Other modes are refused with a TypeError.

    ## Rewards
    As in the ordering env (shared objective; ``reward=`` by name).

    ## Episode End
    As in the ordering env; the last ``info["metrics"]`` holds the episode's summary.

    ## Arguments
    ``gymnasium.make("loangym/Placement-v1", ordering="aryl", scenario="default", ...)``: the
    ordering env's arguments (scenario, overrides, trace, seeds, placement, scaling, reclaim,
    preemption, reward, max_jobs, render_mode, invalid_action, invalid_penalty) plus
    ``ordering`` (heuristic name or Ordering object).
    ``placement`` names the heuristic whose gang sizes and expert choices the env uses.

    ## Version History
    * v1: observation layout 4: the job's row is the ordering env's own (``slack``,
      ``preemptions``, ``attained`` and ``ahead_gpus`` were left at 0), durations as the
      information level reveals them, ``predicted`` (17 job features).
    * v0 (no longer built; ``gymnasium.make`` refuses it naming v1): layouts 1 to 3; layout 3
      added the servers' ``fits_left`` and ``spare``, so best fit is one comparison per server.
    """

    def __init__(self, ordering: str | Ordering = "aryl", max_jobs: int = 32, **kwargs: Any) -> None:
        super().__init__(max_jobs, **kwargs)
        self.ordering_spec = ordering
        servers = len(servers_of(self.config.scenario_obj().cluster))
        self.num_servers = servers
        self.action_space = MaskedDiscrete(servers, self.action_masks)
        self._obs_size = servers * len(SERVER) + len(JOB) + 1 + len(CLUSTER)
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
            self._started()
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
                self._started()
        self._mask = np.zeros(self.num_servers, dtype=bool)

    def _started(self) -> None:
        """The job being placed has started: the ranking's walk goes on, or starts again from
        its top where the placement reconsiders (as ComposedScheduler's own loop)."""
        self._placing = False
        if self.core.reconsiders:
            self._rank = self._walk(self.ordering.rank(self.core.view))

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
