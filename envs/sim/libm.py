"""The C library's ``exp``, ``log``, ``log1p`` and ``expm1`` over arrays: the same bits on every CPU.

numpy picks its loops by CPU: on a CPU with AVX-512 its ``exp``, ``log``, ``log1p``, ``expm1``
(and ``log10``, ``arctan``) run AVX-512 code whose last bits differ from the C library's, which
numpy's other loops and Python's ``math`` call. One bit of a server's speed or a job's duration
can turn a later decision, so a run's numbers would follow the CPU it ran on. These functions
apply ``math``'s function to each element instead (``np.exp(x)`` and ``exp(x)`` are equal on a
CPU without AVX-512). numpy's ``tanh`` has a loop of its own from AVX2 on, the same bits with and
without AVX-512 (a CPU without AVX2 differs), so it stays numpy's: the observations' deadline
slack uses it, and ``math.tanh`` would move them everywhere."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike


def _each(fn: Callable[[float], float], x: ArrayLike) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(fn, a.ravel().tolist()), np.float64, a.size).reshape(a.shape)


def exp(x: ArrayLike) -> np.ndarray:
    """``np.exp(x)``, elementwise by ``math.exp``."""
    return _each(math.exp, x)


def log(x: ArrayLike) -> np.ndarray:
    """``np.log(x)`` for ``x > 0``, elementwise by ``math.log``."""
    return _each(math.log, x)


def log1p(x: ArrayLike) -> np.ndarray:
    """``np.log1p(x)`` for ``x > -1``, elementwise by ``math.log1p``."""
    return _each(math.log1p, x)


def expm1(x: ArrayLike) -> np.ndarray:
    """``np.expm1(x)``, elementwise by ``math.expm1``."""
    return _each(math.expm1, x)
