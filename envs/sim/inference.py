"""The inference cluster's demand: how many of its servers it needs at time t.

Default curve (Aryl, section 2 and Figure 1): a daily cycle whose peak lasts about four hours at
night and whose trough comes before dawn, with peak-to-trough ratio 2.2 and mean utilisation
0.65. Shape ``s(h)`` over the hour of day ``h``: 0 at the trough (05:00), rising linearly to 1
at the start of the peak (20:00), 1 for ``peak_hours``, falling linearly back to 0 at the next
trough. Utilisation ``u = u_min + (u_max - u_min) s`` with ``u_max = ratio * u_min`` and
``u_min`` solved from the mean: ``mean(u) = u_min (1 + (ratio - 1) mean(s))``.

The curve is sampled every ``step_s`` seconds (the paper's 5-minute series); optional seeded
log-normal noise perturbs each step. A CSV series (``time_s,utilization``) replaces the
synthetic curve and repeats with its own period when the episode runs past its end.

Servers needed = ceil(u * N + headroom * N), capped at N; the others may be loaned.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np

from envs.sim.settings import Flag, Num, Settings, Text


class InferenceConfigError(ValueError):
    """An inference curve that cannot exist (e.g. a peak above 100%) or a bad series file."""


HOUR = Num(ge=0, lt=24)


@dataclass(frozen=True)
class InferenceConfig(Settings):
    """The inference cluster and its load.

    :param peak_to_trough: ratio of the busiest to the quietest utilisation of a day (Aryl: 2.2).
    :param mean_utilization: daily mean share of inference GPUs in use (Aryl: about 0.65).
    :param trough_hour: hour of day of the lowest demand (before dawn).
    :param peak_start_hour: hour of day the peak plateau begins (night).
    :param peak_hours: length of the peak plateau (Aryl: about four hours).
    :param start_hour: hour of day at simulated time 0.
    :param step_s: seconds between two re-evaluations of demand (at least 1 s).
    :param noise: standard deviation of the per-step log-normal noise on utilisation (0 = none).
    :param headroom: share of inference servers always kept for latency SLAs (never loaned).
    :param notice_s: seconds between a reclaim notice and the deadline by which the server must
        be empty.
    :param never_reclaim: Aryl's "Ideal": loaned servers are never taken back (an upper bound).
    :param series_csv: path of a ``time_s,utilization`` series that replaces the synthetic curve.
    """

    peak_to_trough: Annotated[float, Num(ge=1)] = 2.2
    mean_utilization: Annotated[float, Num(ge=0, le=1)] = 0.65
    trough_hour: Annotated[float, HOUR] = 5.0
    peak_start_hour: Annotated[float, HOUR] = 20.0
    peak_hours: Annotated[float, HOUR] = 4.0
    start_hour: Annotated[float, HOUR] = 0.0
    step_s: Annotated[float, Num(ge=1)] = 300.0
    noise: Annotated[float, Num(ge=0)] = 0.0
    headroom: Annotated[float, Num(ge=0, le=1)] = 0.05
    notice_s: Annotated[float, Num(ge=0)] = 120.0
    never_reclaim: Annotated[bool, Flag()] = False
    series_csv: Annotated[str | None, Text("a CSV the loader checks")] = None


def _shape(hour: float, c: InferenceConfig) -> float:
    """Daily shape in [0, 1]: trough at ``trough_hour``, plateau from ``peak_start_hour``."""
    rise = (c.peak_start_hour - c.trough_hour) % 24.0
    fall_start = rise + c.peak_hours
    x = (hour - c.trough_hour) % 24.0  # hours since the trough
    if x < rise:
        return x / rise
    if x < fall_start:
        return 1.0
    return max(0.0, 1.0 - (x - fall_start) / (24.0 - fall_start))


class DemandCurve:
    """Inference demand over time, one value per step, drawn in step order (deterministic)."""

    def __init__(self, config: InferenceConfig, servers: int, rng: np.random.Generator | None = None) -> None:
        self.config = config
        self.servers = servers
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._series: tuple[np.ndarray, np.ndarray] | None
        if config.series_csv:
            self._series = _read_series(Path(config.series_csv))
        else:
            self._series = None
            rise = (config.peak_start_hour - config.trough_hour) % 24.0
            if not 0.0 < rise < 24.0 - config.peak_hours:
                raise InferenceConfigError(
                    "inference curve: the peak must start after the trough and end before the next one."
                )
            mean_s = _mean_shape(config)
            self.u_min = config.mean_utilization / (1.0 + (config.peak_to_trough - 1.0) * mean_s)
            self.u_max = self.u_min * config.peak_to_trough
            if self.u_max > 1.0:
                raise InferenceConfigError(
                    f"inference curve: mean utilisation {config.mean_utilization} with peak-to-trough "
                    f"{config.peak_to_trough} needs a peak of {self.u_max:.2f}, above 1."
                )

    def utilization(self, t: float) -> float:
        """Utilisation at step start time ``t`` (noise included); call in increasing t."""
        c = self.config
        if self._series is not None:
            times, values = self._series
            period = times[-1] + c.step_s
            i = int(np.searchsorted(times, t % period, side="right")) - 1
            u = float(values[max(i, 0)])
        else:
            hour = (c.start_hour + t / 3600.0) % 24.0
            u = self.u_min + (self.u_max - self.u_min) * _shape(hour, c)
        if c.noise > 0.0:
            u *= math.exp(self._rng.normal(0.0, c.noise))
        return min(1.0, max(0.0, u))

    def lowest_utilization(self) -> float:
        """The lowest utilisation of the curve without its noise (of the series, if one is read)."""
        if self._series is not None:
            return float(np.min(self._series[1]))
        return min(1.0, self.u_min)

    def servers_needed(self, u: float) -> int:
        n = self.servers
        return min(n, math.ceil(u * n + self.config.headroom * n - 1e-9))


@functools.lru_cache(maxsize=64)
def _mean_shape(c: InferenceConfig) -> float:
    """Daily mean of the shape, on a one-minute grid."""
    return float(np.mean([_shape(h, c) for h in np.arange(0.0, 24.0, 1.0 / 60.0)]))


def _read_series(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise InferenceConfigError(f"{path}: cannot read the inference series ({e}).") from None
    if not rows or not {"time_s", "utilization"} <= set(rows[0]):
        raise InferenceConfigError(f"{path}: an inference series needs columns time_s and utilization.")
    times, values = [], []
    for i, r in enumerate(rows, start=2):
        try:
            t, u = float(r["time_s"]), float(r["utilization"])
        except (TypeError, ValueError):
            raise InferenceConfigError(f"{path}, line {i}: time_s and utilization must be numbers.") from None
        if not (0.0 <= u <= 1.0) or not math.isfinite(t):
            raise InferenceConfigError(f"{path}, line {i}, column utilization: must lie in [0, 1].")
        times.append(t)
        values.append(u)
    order = np.argsort(times, kind="stable")
    return np.asarray(times)[order], np.asarray(values)[order]
