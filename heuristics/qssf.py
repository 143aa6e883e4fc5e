"""QSSF: quasi-shortest-service-first with a duration predictor learned from history (Helios, SC'21).

The strong baseline where durations are unknown or only estimated (ALGORITHMS.md, "Strong
baselines under partial information"). Pending jobs are ranked by their predicted GPU service,
``num_gpus x predicted duration``, fixed when a job enters the queue; non-preemptive, with
backfill (a job that does not fit is skipped). The prediction (:class:`DurationHistory`) comes
from the durations of earlier *finished* jobs only (a finish reveals a job's whole work at every
information level): the median of the last ``window`` finished jobs of the same user and
template (the trace's job name, or the model and GPU count where there is none), falling back to
the same user's, then to all jobs' (ours: Helios predicts from the user's and the job name's
history). A job that enters before any job has finished has no prediction and keeps its arrival
order ahead of the predicted ones. It never reads a pending or running job's duration, so it acts
at every information level, ``none`` included.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from envs.sim.model import JobSpec
from envs.sim.policy import ClusterView, ComposedScheduler
from heuristics.common import PackConfig, PackPlacement
from heuristics.fifo import QueueOrdering
from heuristics.registry import register


def template_of(spec: JobSpec) -> str:
    """What a job recurs as: its job name, or its model and GPU count where it has none."""
    return spec.template or f"{spec.model}/{spec.num_gpus}"


class MedianWindow:
    """The last ``size`` values and the same values sorted (equal ones oldest first, as
    ``sorted`` leaves them), so the median is read off instead of sorted per finish: the very
    float :func:`statistics.median` gives (the middle value, or ``(a + b) / 2`` of the two middle
    ones). A NaN makes the order undefined: from then on the window asks ``statistics.median``."""

    __slots__ = ("nan", "order", "ranked", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.order: deque[float] = deque()
        self.ranked: list[float] = []
        self.nan = False

    def add(self, value: float) -> float:
        """Take in ``value`` (dropping the oldest beyond ``size``); the median after."""
        order, ranked = self.order, self.ranked
        if len(order) == self.size:
            old = order.popleft()
            if not self.nan:
                del ranked[bisect.bisect_left(ranked, old)]
        order.append(value)
        if value != value:
            self.nan = True
        if self.nan:
            return float(statistics.median(order))
        bisect.insort(ranked, value)
        n = len(ranked)
        i = n // 2
        if n % 2 == 1:
            return float(ranked[i])
        return float((ranked[i - 1] + ranked[i]) / 2)


@dataclass
class DurationHistory:
    """Durations of finished jobs by (user, template), by user and overall: the last ``window``
    of each. ``sync`` takes in the jobs finished since the last call."""

    window: int = 20
    _cursor: int = 0
    _by: dict[tuple[str, ...], MedianWindow] = field(default_factory=dict)
    _median: dict[tuple[str, ...], float] = field(default_factory=dict)
    # the keys whose median the last sync that took in a finish changed (or made)
    changed: set[tuple[str, ...]] = field(default_factory=set, repr=False, compare=False)

    def sync(self, view: ClusterView) -> int:
        """Take in the jobs finished since the last call; how many there were (predictions may
        have changed only if any, and only those read from a key in :attr:`changed`)."""
        done, self._cursor = view.finished_since(self._cursor)
        if done:
            self.changed = set()
        for job in done:
            spec = view.job(job)
            work = view.work_done(job)
            for key in ((spec.user, template_of(spec)), (spec.user,), ()):
                past = self._by.get(key)
                if past is None:
                    past = self._by[key] = MedianWindow(self.window)
                self._median[key] = past.add(work)
                self.changed.add(key)
        return len(done)

    def source(self, user: str, template: str) -> tuple[tuple[str, ...], float | None]:
        """What :meth:`predict` reads for a job of ``user`` and ``template``: the key (the pair's
        own, the user's, or ``()``: all jobs') and its median there (None with no history yet)."""
        median = self._median
        for key in ((user, template), (user,), ()):
            if key in median:
                return key, median[key]
        return (), None

    def predict(self, spec: JobSpec) -> float | None:
        """The predicted duration (seconds on its requested GPUs), or None with no history yet."""
        return self.source(spec.user, template_of(spec))[1]

    def windows(self, spec: JobSpec) -> Iterator[tuple[tuple[str, ...], list[float]]]:
        """The groups of ``spec`` that have finished jobs, in :meth:`predict`'s order ((user,
        template), user, all): each key and its window's durations, sorted."""
        for key in ((spec.user, template_of(spec)), (spec.user,), ()):
            past = self._by.get(key)
            if past is not None:
                yield key, past.ranked

    def residual(self, spec: JobSpec, attained: float) -> float:
        """The expected remaining work of a job of ``spec`` that has done ``attained``: the
        median of the finished durations above ``attained`` in the first of its groups (as
        :meth:`predict`'s) that has one, less ``attained``; ``attained`` itself (at least 1 s)
        where none has (it may run as long again); nan with no history yet."""
        if not self._median:
            return math.nan
        for _, ranked in self.windows(spec):
            above = ranked[bisect.bisect_right(ranked, attained) :]
            if above:
                return float(statistics.median(above)) - attained
        return max(attained, 1.0)


@dataclass
class Residual:
    """A job's expected remaining work from the finished jobs' durations alone
    (:meth:`DurationHistory.residual` on its work done): the estimate a blind policy's
    ``earliest-finish`` start reads (``heuristics.common.Remaining``)."""

    history: DurationHistory = field(default_factory=DurationHistory)

    def __call__(self, view: ClusterView, job: int) -> float:
        self.history.sync(view)
        return self.history.residual(view.job(job), view.work_done(job))


@dataclass
class QssfOrdering:
    """Pending jobs by predicted GPU service (``num_gpus x`` :meth:`DurationHistory.predict`)."""

    history: DurationHistory = field(default_factory=DurationHistory)
    blocking: bool = False

    def __post_init__(self) -> None:
        self._queue = QueueOrdering(self._service, blocking=False)

    def _service(self, view: ClusterView, job: int) -> tuple[float, ...]:
        spec = view.job(job)
        predicted = self.history.predict(spec)
        return (0.0 if predicted is None else spec.num_gpus * predicted, spec.submit_time, job)

    def rank(self, view: ClusterView) -> Iterator[int]:
        self.history.sync(view)
        return self._queue.rank(view)


def qssf(config: PackConfig | None = None) -> ComposedScheduler:
    c = config or PackConfig()
    return ComposedScheduler("qssf", QssfOrdering(), PackPlacement.of(c))


register("qssf", qssf, PackConfig, needs="none")
