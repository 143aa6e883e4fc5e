"""What the two single-agent envs share: episode seeding, the step's checks and its 5-tuple, the
text rendering (``render_mode="ansi"``), what an action outside the mask does (``invalid_action``),
and copies (pickle, deepcopy) that continue exactly where the original is."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from envs.core import Core, CoreConfig
from envs.obs import OBS_VERSION, Encoder
from envs.sim.model import Pool
from envs.sim.policy import ServerStatus

RENDER_MODES = ("ansi",)
"""What ``render_mode`` may be besides None: ``"ansi"``, a text picture (:meth:`CoreEnv.render`)."""
INVALID_ACTIONS = ("raise", "advance")
"""What an action outside the mask does: ``raise`` :class:`InvalidAction` (the default), or
``advance``: the env's fallback action is taken instead (:meth:`CoreEnv._fallback`)."""


class InvalidAction(ValueError):
    """An action the env cannot take: not an integer, or one the mask forbids."""


def action_index(action: Any) -> int:
    """``action`` as an int. Accepted is what ``gymnasium.spaces.Discrete.contains`` accepts: a
    Python int, a numpy integer, a 0-d integer array. Anything else raises :class:`InvalidAction`:
    a float (even 2.0), a bool, an array of another shape or dtype."""
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        return int(action)
    if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
        return int(action)
    what = f"an array of shape {action.shape} and dtype {action.dtype}" if isinstance(action, np.ndarray) else None
    raise InvalidAction(
        f"step() takes an integer action (an int, a numpy integer or a 0-d integer array), "
        f"got {what or f'{action!r} ({type(action).__name__})'}."
    )


class _Walk(Iterator[int]):
    """A ranking being walked over several steps: the lazy generator an ``Ordering`` returns
    reads the simulator as it goes, as ComposedScheduler walks it, and cannot be pickled. A copy
    stands in for it until the env that holds it rebuilds it by replay (:meth:`CoreEnv.__setstate__`);
    used before that, it raises."""

    def __init__(self, ranking: Iterable[int] | None) -> None:
        self._it = iter(ranking) if ranking is not None else None

    def __next__(self) -> int:
        if self._it is None:
            raise RuntimeError("a ranking walked in an env goes on only in a copy of the whole env (which replays)")
        return next(self._it)

    def __reduce__(self) -> tuple[type[_Walk], tuple[None]]:
        return _Walk, (None,)


def check_render_mode(render_mode: str | None) -> None:
    """Refuse a render mode other than None and ``"ansi"`` with a TypeError naming them (the
    error ``gymnasium.make`` and SB3's ``make_vec_env`` expect from an env lacking a mode)."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise TypeError(
            f"render_mode {render_mode!r} is not supported: loangym's envs render None or 'ansi' "
            "(a text picture of the queue, the servers and the loans: print(env.render()))."
        )


def ansi_picture(core: Core, shown: int = 8) -> str:
    """A text picture of ``core`` now: the clock and the first ``shown`` waiting jobs, every
    server (its pool, GPU type, GPUs in use as ``#`` and free as ``.``, the jobs on it, its loan
    and reclaim deadline), and the loans (what ``render()`` returns with ``render_mode="ansi"``)."""
    if core.engine is None:
        return "not started: call reset()\n"
    view = core.view
    now = view.now
    pending = list(view.pending)
    lines = [
        f"t = {now / 3600:,.2f} h, scenario seed {core.seed}: {len(pending)} waiting, "
        f"{len(view.running)} running, {core.num_jobs} jobs in the episode" + (" (episode over)" if core.done else "")
    ]
    queue = []
    for j in pending[:shown]:
        spec = view.job(j)
        gpus = f"{spec.min_gpus}-{spec.max_gpus}" if spec.max_gpus > spec.min_gpus else f"{spec.num_gpus}"
        queue.append(f"job {j} ({gpus} GPU, waited {(now - spec.submit_time) / 3600:.1f} h)")
    more = f" ... and {len(pending) - shown} more" if len(pending) > shown else ""
    lines.append("queue: " + (", ".join(queue) + more if queue else "empty"))
    for s in view.servers:
        status = view.server_status(s.server_id)
        used = view.used(s.server_id)
        bar = "#" * used + "." * (s.num_gpus - used)
        pool = "training " if s.pool == Pool.TRAINING else "inference"
        state = {
            ServerStatus.AVAILABLE: "",
            ServerStatus.INFERENCE: "serving inference",
            ServerStatus.LOANED: "on loan",
            ServerStatus.RECLAIMING: "on loan, reclaimed",
            ServerStatus.FAILED: "down",
        }[status]
        deadline = view.reclaim_deadline(s.server_id)
        if deadline is not None:
            state += f" by t = {deadline / 3600:,.2f} h"
        jobs = ", ".join(f"job {j} x{n}" for j, n in view.jobs_on(s.server_id))
        lines.append(f"{pool} {s.server_id:>3} {s.gpu_type.name:<10} [{bar}] {state:<28} {jobs}".rstrip())
    inference = sum(1 for s in view.servers if s.pool == Pool.INFERENCE)
    reclaiming = len(view.reclaiming_servers())
    lines.append(
        f"loans: {len(view.loaned_servers()) + reclaiming} of {inference} inference servers on loan, "
        f"{reclaiming} of them being reclaimed"
    )
    return "\n".join(lines) + "\n"


class CoreEnv(gym.Env[np.ndarray, np.int64]):
    """A Gymnasium env over one :class:`~envs.core.Core`. Subclasses set ``action_space``,
    ``observation_space`` and ``_mask`` and implement :meth:`_begin`, :meth:`_act` and
    :meth:`_observe`.

    A copy (``pickle``, ``copy.deepcopy``) continues exactly as the original would. Where the env
    walks a ranking over several steps (:meth:`_walk`), the copy rebuilds its episode: the same
    scenario seed and the same calls in the same order (``_history``: the actions, and whatever
    else changes the episode, e.g. an ordering expert's walk), which the simulator's determinism
    makes bit for bit. That costs a replay of the episode so far; without a walk the copy is a
    plain one. An ``Ordering`` object given to the env must then rank from what the view shows
    (and its own per-episode state), as the heuristics and agents here do."""

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]
        """``render_modes``: ``"ansi"`` (and None, the default). An instance property, as
        Gymnasium's wrappers expose theirs, so that ``gymnasium.make`` leaves a mode the env
        lacks to the constructor, which refuses it with a TypeError naming the modes; SB3's
        ``make_vec_env``, which asks for ``"rgb_array"`` and retries without it on a TypeError,
        then builds these envs without a warning."""
        return {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(
        self,
        slots: int,
        render_mode: str | None = None,
        invalid_action: str = "raise",
        invalid_penalty: float = 0.0,
        **kwargs: Any,
    ) -> None:
        check_render_mode(render_mode)
        if invalid_action not in INVALID_ACTIONS:
            raise ValueError(f"invalid_action must be one of {', '.join(INVALID_ACTIONS)}, got {invalid_action!r}.")
        penalty = float(invalid_penalty)
        if not math.isfinite(penalty) or penalty < 0:
            raise ValueError(f"invalid_penalty must be a finite number >= 0, got {invalid_penalty!r}.")
        self.render_mode = render_mode
        self.invalid_action = invalid_action
        self.invalid_penalty = penalty
        self.config = CoreConfig.from_kwargs(**kwargs)
        self.core = Core(self.config)
        self.encoder = Encoder(self.core, slots)
        self.obs_version = OBS_VERSION
        self._obs_size = 0
        self._mask = np.zeros(1, dtype=bool)
        self._history: list[Any] = []  # this episode's calls, in order, for a copy to replay
        self._walked = False  # whether this episode walked a ranking (then a copy replays)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Draw the episode's scenario seed from ``config.seeds`` (or take
        ``options["scenario_seed"]``) and run to the first decision."""
        super().reset(seed=seed)
        if options and "scenario_seed" in options:
            scenario_seed = int(options["scenario_seed"])
        else:
            lo, hi = self.config.seeds
            scenario_seed = int(self.np_random.integers(lo, hi))
        self._start(scenario_seed)
        return self._get_obs(), self._get_info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        a = action_index(action)
        if self.core.done:
            raise RuntimeError("the episode has ended: call reset()")
        invalid = not 0 <= a < len(self._mask) or not self._mask[a]
        if invalid:
            if self.invalid_action == "raise":
                raise InvalidAction(f"action {a} is not allowed now: {self._valid_text()}")
            a = self._fallback()
        obs, reward = self._transition(a)
        if invalid:
            reward -= self.invalid_penalty
        terminated = self.core.done and not self.core.truncated
        truncated = self.core.done and self.core.truncated
        info = self._get_info()
        if self.invalid_action != "raise":
            info["invalid_action"] = invalid
        return obs, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    def render(self) -> str | None:  # type: ignore[override]
        """With ``render_mode="ansi"``: a text picture of now: the clock and the queue (the first
        waiting jobs, whether each fits now), every server (its pool, GPU type, GPUs in use as
        ``#`` and free as ``.``, the jobs on it, its loan and reclaim deadline), and the loans.
        None without a render mode."""
        if self.render_mode is None:
            return None
        return ansi_picture(self.core)

    def _get_obs(self) -> np.ndarray:
        if self.core.done:
            return np.zeros(self._obs_size, dtype=np.float32)
        return self._observe()

    def _get_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"action_mask": self._mask.copy(), "scenario_seed": self.core.seed}
        if self.core.done:
            info["metrics"] = self.core.metrics
        return info

    # ------------------------------------------------------------------ episode and its replay
    def _start(self, scenario_seed: int) -> None:
        self.core.reset(scenario_seed)
        self.encoder.reset()
        self._history = []
        self._walked = False
        self._begin()

    def _transition(self, action: int) -> tuple[np.ndarray, float]:
        """A valid action carried out: the next observation and the reward."""
        self._history.append(action)
        self._act(action)
        reward = self.core.reward()
        return self._get_obs(), reward

    def _walk(self, ranking: Iterable[int]) -> Iterator[int]:
        """``ranking`` to walk over several steps (see :class:`_Walk`); a copy of the env replays."""
        self._walked = True
        return _Walk(ranking)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.core.engine is not None and not self.core.done and self._walked:
            history = self._history
            self._start(self.core.seed)
            self._get_obs()
            for event in history:
                self._redo(event)

    def _redo(self, event: Any) -> None:
        """Replay one entry of ``_history`` (an action; subclasses add their own kinds)."""
        self._transition(event)

    # ------------------------------------------------------------------ for subclasses
    def _begin(self) -> None:
        """Run from the episode's start to the first decision; set ``_mask``."""
        raise NotImplementedError

    def _act(self, action: int) -> None:
        """Carry out a valid action and run to the next decision; set ``_mask``."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        raise NotImplementedError

    def _valid_text(self) -> str:
        return f"valid actions are {np.flatnonzero(self._mask).tolist()}"

    def _fallback(self) -> int:
        """The action taken instead of one outside the mask (``invalid_action="advance"``): here
        the first valid one (the mask is never all zero while the episode runs); the ordering
        env takes "advance" where the mask allows it."""
        return int(np.flatnonzero(self._mask)[0])
