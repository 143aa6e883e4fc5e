"""The ordering environment: which waiting job starts next."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from envs import lookahead
from envs.base import CoreEnv
from envs.obs import CLUSTER, JOB
from envs.sim.policy import ClusterView, Ordering
from envs.spaces import MaskedDiscrete


class OrderingEnv(CoreEnv):
    """
    ## Description
    A training cluster borrows idle servers from an inference cluster (loangym's simulator,
    scenario by name). At every decision point the agent picks which waiting job starts next;
    a heuristic placement component puts it on servers, and heuristic scaling / reclaim
    components handle elastic jobs and the loans (by name, Aryl's by default). Decision points
    where no visible job can start are skipped. A copy (``pickle``, ``copy.deepcopy``) goes on
    exactly as the original does (after ``expert_action`` it replays the episode so far: see
    ``envs.base.CoreEnv``).

    ## Action Space
    ``Discrete(K + 1)``: ``i < K`` starts the job in slot ``i``; ``K`` ("advance") starts nothing
    more now and lets time run to the next decision point.

    ## Observation Space
    ``Box(-1, 1, (K * 17 + 12,), float32)``: K job slots of 17 features, then 12 cluster
    features (observation layout 4; ``envs.obs.JOB`` and ``CLUSTER`` define them by name). Slots
    hold the K longest-waiting jobs in queue order (the rest are counted in ``hidden``); empty
    slots are zeros. Duration features carry what the scenario's ``information.level`` reveals:
    the true remaining work, its estimate, or nothing (0) at ``none``; machine speeds are never
    shown.

    | index | feature | meaning |
    |---|---|---|
    | slot*17 + 0 | present | 1 if the slot holds a job |
    | slot*17 + 1 | gpus | log2(1 + requested GPUs) / 6 |
    | slot*17 + 2 | base_gpus | log2(1 + min GPUs) / 6 |
    | slot*17 + 3 | elastic_range | log2(1 + max - min GPUs) / 6 |
    | slot*17 + 4 | any_type | 1 if it may run on any GPU type (so on loaned inference servers) |
    | slot*17 + 5 | remaining | log1p(remaining run time alone, h) / 5, as revealed (0 at information none) |
    | slot*17 + 6 | waiting | log1p(hours waited so far) / 5 |
    | slot*17 + 7 | te | 1 for a trial-and-error job |
    | slot*17 + 8 | has_deadline | 1 if it has a deadline |
    | slot*17 + 9 | slack | tanh((deadline - now - remaining) / 24 h); 0 without a deadline |
    | slot*17 + 10 | preemptions | min(preemptions, 5) / 5 |
    | slot*17 + 11 | fits | 1 if it can start now (the action mask) |
    | slot*17 + 12 | inference_speed | its speed on the inference GPU type / on the training type (0 if pinned) |
    | slot*17 + 13 | attained | log1p(GPU-hours held so far) / 5 |
    | slot*17 + 14 | remaining_base | log1p(remaining run time at its min GPUs, h) / 5, as remaining |
    | slot*17 + 15 | ahead_gpus | min GPUs of the visible jobs with less remaining_base / GPUs open to training |
    | slot*17 + 16 | predicted | log1p(duration predicted from finished jobs of its user and template, h) / 5 (QSSF) |
    | K*17 + 0 | training_free | free / up GPUs of the training pool |
    | K*17 + 1 | loaned_free | free loaned GPUs / all inference GPUs |
    | K*17 + 2 | loaned | servers on loan / inference servers |
    | K*17 + 3 | reclaiming | servers being reclaimed / inference servers |
    | K*17 + 4 | inference_load | inference demand, share of its GPUs |
    | K*17 + 5 | day_sin | sin of the time of day |
    | K*17 + 6 | day_cos | cos of the time of day |
    | K*17 + 7 | queue | log1p(jobs waiting) / 5 |
    | K*17 + 8 | hidden | log1p(jobs waiting beyond the visible slots) / 5 |
    | K*17 + 9 | running | log1p(jobs holding GPUs) / 5 |
    | K*17 + 10 | to_arrive | share of the episode's jobs not yet submitted |
    | K*17 + 11 | largest_free | largest free block on one training server / its size |

    ## Action Mask
    ``action_masks()`` (what sb3-contrib's MaskablePPO calls) and ``info["action_mask"]``: slot
    ``i`` is valid when it holds a job the placement component can start now; "advance" is
    valid unless the cluster is idle (no job holds GPUs) while a visible job can start: waiting
    there changes nothing until the next arrival, and a deterministic agent that prefers it
    idles until the simulator's stall guard ends the episode with jobs unfinished. An action
    that is not an integer (``step(0.5)``, ``step(True)``) raises ``InvalidAction``; so does one
    outside the mask, unless ``invalid_action="advance"`` (below).

    ## Algorithms without masks
    ``gymnasium.make(ID, invalid_action="advance", invalid_penalty=0.0)``, for DQN, A2C or plain
    PPO: an action outside the mask is carried out as "advance" (as the first valid slot where
    "advance" is masked: the cluster idles while a visible job can start), its reward lowered
    by ``invalid_penalty`` (>= 0), and ``info["invalid_action"]`` says whether it happened. The
    default, ``invalid_action="raise"``, raises ``InvalidAction``.

    ## Deterministic evaluation (the idling trap)
    "Advance" is one fixed action that every state offers, so a policy trained briefly often
    ranks it first everywhere: evaluated with ``deterministic=True`` it then starts a job only
    when the mask leaves no other choice, idling GPUs while jobs wait (sampling hides this). The
    mask's rule above bounds the damage (an idle cluster always starts a job), and evaluate.py
    and train.py evaluate agents deterministic with the mask, so they get that rule; a policy
    evaluated without the mask gets it only through ``invalid_action="advance"``. Compare a
    deterministic evaluation with a sampled one before trusting either.

    ## Rendering
    ``render_mode=None`` (default) or ``"ansi"``: ``env.render()`` returns a text picture of
    now: the clock, the first waiting jobs, every server (pool, GPU type, GPUs in use ``#`` and
    free ``.``, the jobs on it, its loan and reclaim deadline) and the loans. Another mode
    (``"rgb_array"``, ``"human"``) is refused with a TypeError.

    ## Rewards
    By name (``reward=``): ``jct`` (default) is -(jobs in the system x elapsed hours) / jobs
    between decisions, so an episode's return is -(mean JCT in hours) over its jobs;
    ``slowdown`` sums to -(mean slowdown); ``fee`` to -(dollars per job); ``deadline`` is -1 per
    job finishing after its deadline. ``reward_reference="sjf"`` (any heuristic by name that
    acts at the scenario's information level) measures the same figure against that
    heuristic's own run of the same episode (Mao et al.'s input-dependent baseline, ICLR'19):
    between two decisions the reference's change over the same simulated interval is added
    back, and at the end what remains of its run, so the return is minus the gap to the
    reference (``envs.core.CoreConfig``). The reward's meaning per name is unchanged without it.

    ## Episode End
    ``terminated`` when every job of the episode has finished; ``truncated`` when the scenario's
    horizon is reached first (or nothing can ever start again). The last step's
    ``info["metrics"]`` holds the episode's summary (the keys of evaluate.py's results.json).

    ## Arguments
    ``gymnasium.make("loangym/Ordering-v1", scenario="default", overrides=None, trace=None,
    seeds=(0, 10000), max_jobs=32, placement="aryl", scaling="aryl", reclaim="aryl",
    preemption="aryl", reward="jct", reward_reference=None, placer=None, render_mode=None,
    invalid_action="raise", invalid_penalty=0.0)``. ``placement`` names the heuristic that
    decides whether a job fits, its gang size and (unless ``placer`` is given) its servers;
    ``placer`` is a callable ``placer(core)`` that places the job ``core.placing`` worker by
    worker (a frozen placement agent, see ``agents.partners``). Each ``reset`` draws the episode's scenario seed from
    ``[seeds[0], seeds[1])`` with the env's RNG; ``reset(options={"scenario_seed": s})`` picks one.

    ## Version History
    * v1: observation layout 4: features defined by name, durations as the information level
      reveals them, and ``predicted`` (17 job features).
    * v0 (no longer built; ``gymnasium.make`` refuses it naming v1): layouts 1 to 3 (16 job
      features from layout 2 on); "advance" masked while the cluster is idle and a job can start
      (it was always valid).
    """

    def __init__(self, max_jobs: int = 32, placer: Any = None, **kwargs: Any) -> None:
        super().__init__(max_jobs, **kwargs)
        self.placer = placer  # a frozen placement agent: placer(core) places core.placing
        self.slots = max_jobs
        self.action_space = MaskedDiscrete(max_jobs + 1, self.action_masks)
        self._obs_size = max_jobs * len(JOB) + len(CLUSTER)
        self.observation_space = spaces.Box(-1.0, 1.0, (self._obs_size,), np.float32)
        self._visible: list[int] = []
        self._fits: list[bool] = []
        self._mask = np.zeros(max_jobs + 1, dtype=bool)
        self._experts: dict[str, _WalkedOrdering] = {}

    @property
    def visible(self) -> list[int]:
        """The jobs in the slots now, in slot order (the K longest-waiting)."""
        return list(self._visible)

    @property
    def fits(self) -> list[bool]:
        """Whether each job of :attr:`visible` can start now."""
        return list(self._fits)

    def _begin(self) -> None:
        self._experts = {}
        self._to_choice()

    def _act(self, a: int) -> None:
        if a == self.slots:
            self.core.advance()
        elif self.placer is not None:
            self.core.begin_placement(self._visible[a])
            self.placer(self.core)
        else:
            self.core.start(self._visible[a])
        self._to_choice()

    def _to_choice(self) -> None:
        """Advance past decision points where only "advance" is possible."""
        self._visible, self._fits = self.core.next_choice(self.slots)
        self._mask = self.core.ordering_mask(self._fits, self.slots)

    def _observe(self) -> np.ndarray:
        return self.encoder.ordering(self._visible, self._fits)

    def _fallback(self) -> int:
        return self.slots if self._mask[self.slots] else super()._fallback()

    def _valid_text(self) -> str:
        return (
            f"valid actions are {np.flatnonzero(self._mask).tolist()} (slots of jobs that fit, {self.slots} = advance)"
        )

    # ------------------------------------------------------------------ experts
    def expert_action(self, policy: str) -> int:
        """The action component heuristic ``policy`` would take now: the slot of the first visible
        job in its ranking that can start, or "advance" (at once if its ordering blocks at a job
        that cannot start). The expert is this episode's instance of the heuristic, shared with
        the components of the same name. Jobs beyond the K slots are invisible to the expert too,
        so it equals the heuristic exactly while no more than K jobs wait.

        ``oracle-lookahead-BASE`` is the clairvoyant one-step lookahead over heuristic ``BASE``
        (``envs.lookahead``): a teacher that sees the episode's future, for demonstrations only."""
        base = lookahead.base_of(policy)
        job = self.core.expert_job(self._walked_ordering(base or policy), self._visible)
        self._history.append(base or policy)  # its walk may move heuristic state shared with the components
        if base is not None:
            job = lookahead.ordering_choice(self.core, base, job, self._visible, self._fits, self.slots)
        return self.slots if job is None else self._visible.index(job)

    def _walked_ordering(self, policy: str) -> _WalkedOrdering:
        """This episode's ordering of heuristic ``policy``, its rankings walked by :meth:`_walk`
        (one object per name and episode: the core keeps an expert's walk by its identity)."""
        if policy not in self._experts:
            self._experts[policy] = _WalkedOrdering(self.core.heuristic(policy).ordering, self._walk)
        return self._experts[policy]

    def _redo(self, event: Any) -> None:
        if isinstance(event, str):
            self.expert_action(event)
        else:
            super()._redo(event)


@dataclass
class _WalkedOrdering:
    """An ``Ordering`` whose rankings are walked by the env's :meth:`~envs.base.CoreEnv._walk`."""

    ordering: Ordering
    walk: Callable[[Iterable[int]], Iterator[int]]
    blocking: bool = field(init=False)

    def __post_init__(self) -> None:
        self.blocking = self.ordering.blocking

    def rank(self, view: ClusterView) -> Iterator[int]:
        return self.walk(self.ordering.rank(view))
