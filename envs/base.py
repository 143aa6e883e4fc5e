"""What the two single-agent envs share: episode seeding, the step's checks and its 5-tuple, and
copies (pickle, deepcopy) that continue exactly where the original is."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from envs.core import Core, CoreConfig
from envs.obs import OBS_VERSION, Encoder


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

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, slots: int, **kwargs: Any) -> None:
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
        if not 0 <= a < len(self._mask) or not self._mask[a]:
            raise InvalidAction(f"action {a} is not allowed now: {self._valid_text()}")
        obs, reward = self._transition(a)
        terminated = self.core.done and not self.core.truncated
        truncated = self.core.done and self.core.truncated
        return obs, reward, terminated, truncated, self._get_info()

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

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
