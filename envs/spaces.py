"""A Discrete action space whose ``sample()`` respects the env's current action mask.

Generic tools (Gymnasium's and SB3's env checkers, random baselines) call
``env.action_space.sample()`` without a mask; with this space they draw a valid action instead
of tripping the env's invalid-action error. An explicit ``mask=`` still wins. The link to the env
is a weak method reference and is dropped when the space is pickled (e.g. by SubprocVecEnv), so
a copy samples like a plain ``Discrete``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces


class MaskedDiscrete(spaces.Discrete):
    def __init__(self, n: int, mask_fn: Callable[[], np.ndarray] | None = None) -> None:
        super().__init__(n)
        self._mask_ref = weakref.WeakMethod(mask_fn) if mask_fn is not None else None  # type: ignore[arg-type]

    def sample(self, mask: Any = None, probability: Any = None) -> np.int64:
        if mask is None and probability is None and self._mask_ref is not None:
            fn = self._mask_ref()
            if fn is not None:
                mask = np.asarray(fn(), dtype=np.int8)
        return super().sample(mask=mask, probability=probability)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_mask_ref"] = None
        return state
