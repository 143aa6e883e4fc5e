"""What the two single-agent envs share: episode seeding, the step's checks and its 5-tuple."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.core import Core, CoreConfig
from envs.obs import OBS_VERSION, Encoder


class InvalidAction(ValueError):
    """An action the mask forbids."""


class CoreEnv(gym.Env[np.ndarray, np.int64]):
    """A Gymnasium env over one :class:`~envs.core.Core`. Subclasses set ``action_space``,
    ``observation_space`` and ``_mask`` and implement :meth:`_begin`, :meth:`_act` and
    :meth:`_observe`."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, slots: int, **kwargs: Any) -> None:
        self.config = CoreConfig.from_kwargs(**kwargs)
        self.core = Core(self.config)
        self.encoder = Encoder(self.core, slots)
        self.obs_version = OBS_VERSION
        self._obs_size = 0
        self._mask = np.zeros(1, dtype=bool)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Draw the episode's scenario seed from ``config.seeds`` (or take
        ``options["scenario_seed"]``) and run to the first decision."""
        super().reset(seed=seed)
        if options and "scenario_seed" in options:
            scenario_seed = int(options["scenario_seed"])
        else:
            lo, hi = self.config.seeds
            scenario_seed = int(self.np_random.integers(lo, hi))
        self.core.reset(scenario_seed)
        self.encoder.reset()
        self._begin()
        return self._get_obs(), self._get_info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        a = int(action)
        if self.core.done:
            raise RuntimeError("the episode has ended: call reset()")
        if not 0 <= a < len(self._mask) or not self._mask[a]:
            raise InvalidAction(f"action {a} is not allowed now: {self._valid_text()}")
        self._act(a)
        reward = self.core.reward()
        terminated = self.core.done and not self.core.truncated
        truncated = self.core.done and self.core.truncated
        return self._get_obs(), reward, terminated, truncated, self._get_info()

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
