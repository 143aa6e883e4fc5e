"""Tiresias' compiled kernels (``heuristics.tiresias``): its bookkeeping, the round's promotions
and due level checks, the round's choice, and the backfill's next job.

The state, all numpy arrays that the policy owns and these kernels edit:

- ``ints[job, column]`` and ``floats[job, column]``: a row per job of the engine, a column per
  field (:data:`STATE` ..., :data:`SERVICE` ...). ``ints[:, SLOT]``: the job's place in the
  order of its queue (-1: none), so that a rank orders as (level, place); ``at_slot`` maps a
  place back to its job (an entry is stale once the job has another place). The order is the
  list of Tiresias' simulator: a job takes the place after every other (``meta[BACK]``, counting
  up) when it enters a queue (arrives, is demoted, is promoted), and after every change to the
  running jobs they take the places before every other (``meta[FRONT]``, counting down) in their
  order, so that in each queue the running jobs come first and every job keeps its order among
  the running or the waiting. When either end runs out, every place is given again in the
  middle, in the same order (``_compact``). ``ints[:, LISTED]`` holds the running jobs
  (``meta[RUNS]`` of them) and ``ints[:, LISTED_AT]`` a running job's place there;
  ``ints[:, LATE_JOB]`` and ``floats[:, LATE_SINCE]``, the promotions that fell due but were not
  yet earned (``meta[LATE]``; see ``due_now``).
- ``bits[level]``: the running jobs at ``level``, and ``bits[(c + 1) * levels + level]``: the
  pending jobs of size class ``c`` at ``level``; a bit per place (32 to a word; the last two
  words: bounds on the first and the last place set), and ``counts`` of the same rows: a walk in
  rank order over one class at one level is a search for the next set bit, and a class that
  cannot fit is passed over whole.
- ``heap[:meta[HEAP], (TIME, JOB, HSINCE)]``: a binary min-heap of the promotions due, by
  time (an entry is stale once its job has started again: ``floats[job, SINCE]`` then differs).
- ``classes[(CLASS_GPUS, CLASS_TYPES), c]``: a class's GPUs and the training types it allows (a
  bit per type), ``type_lists[k]``: a job's training types in the policy's order (-1 after).
- ``thresholds``: the queue boundaries in GPU-seconds.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from heuristics.jit import jit

STATE, LEVEL, GPUS, ON, CLASS, TYPES, SLOT, LISTED, LISTED_AT, LATE_JOB = range(10)
INT_ROWS = 10
SERVICE, OFFSET, CHECK, SINCE, RUN, LATE_SINCE = range(6)
FLOAT_ROWS = 6
GONE, PENDING, RUNNING = 0, 1, 2  # the values of ints[:, STATE]
HEAP, RUNS, PENDING_JOBS, LATE, FRONT, BACK, MOVED, COMPACTIONS, BLOCK, ROOM = range(10)  # meta
META = 10
EMPTY = 1 << 62  # a row's first-bit bound when it has none
TIME, JOB, HSINCE = range(3)  # heap columns
CLASS_GPUS, CLASS_TYPES = range(2)
# the fields of an entry and of a start (``enter``'s ``inputs``), and the counts that open them
E_JOB, E_CLASS, E_TYPES, E_SERVICE, E_SINCE, E_RUN = range(6)
S_JOB, S_ON, S_GPUS, S_NOW, S_SERVICE = range(5)
N_FRESH, N_STARTS, N_DONE, N_NEW, N_ENTRIES = range(5)


def _ctz(x: int) -> int:
    """The lowest set bit of ``0 < x < 2**32``."""
    n = 0
    if x & 0xFFFF == 0:
        n += 16
        x >>= 16
    if x & 0xFF == 0:
        n += 8
        x >>= 8
    if x & 0xF == 0:
        n += 4
        x >>= 4
    if x & 0x3 == 0:
        n += 2
        x >>= 2
    if x & 0x1 == 0:
        n += 1
    return n


def _next(bits: np.ndarray, row: int, p: int, end: int) -> int:
    """The first set bit of ``bits[row]`` at ``p`` or after, else (or if none is before ``end``)
    a place at ``end`` or after. Tightens the row's bounds when the search starts below them."""
    words = bits.shape[1] - 2
    lo, hi = bits[row, words], bits[row, words + 1]
    q = p if p > lo else lo
    stop = end if end <= hi + 1 else hi + 1  # no set bit at stop or after (before end)
    if q < stop:
        w = q >> 5
        x = bits[row, w] >> (q & 31)
        if x:
            f = q + _ctz(x)
        else:
            f = end
            for i in range(w + 1, ((stop - 1) >> 5) + 1):
                x = bits[row, i]
                if x:
                    f = i * 32 + _ctz(x)
                    break
        if f < end:
            if p <= lo:
                bits[row, words] = f
            return f
    if p <= lo and stop == hi + 1:  # searched all the row holds: empty
        bits[row, words] = EMPTY
        bits[row, words + 1] = -1
    return end


def _flip(bits: np.ndarray, counts: np.ndarray, row: int, slot: int, add: bool) -> None:
    if add:
        bits[row, slot >> 5] |= 1 << (slot & 31)
        counts[row] += 1
        words = bits.shape[1] - 2
        if slot < bits[row, words]:
            bits[row, words] = slot
        if slot > bits[row, words + 1]:
            bits[row, words + 1] = slot
    else:
        bits[row, slot >> 5] &= ~(1 << (slot & 31))
        counts[row] -= 1


def _compact(ints: np.ndarray, bits: np.ndarray, at_slot: np.ndarray, meta: np.ndarray, levels: int) -> None:
    """Give every job that holds a place a new one, in the same order, in the middle of the
    places, and set the bit rows again: room at both ends."""
    slot, state, level, cls = ints[:, SLOT], ints[:, STATE], ints[:, LEVEL], ints[:, CLASS]
    width, words = at_slot.shape[0], bits.shape[1] - 2
    held = 0
    for k in range(width):  # the jobs in order, to the start (held <= k: read before written)
        j = at_slot[k]
        if j >= 0 and slot[j] == k:
            at_slot[held] = j
            held += 1
    base = (width - held) // 2
    for i in range(held - 1, -1, -1):  # then to the middle, from the top (base + i >= i)
        at_slot[base + i] = at_slot[i]
    at_slot[:base] = -1
    at_slot[base + held :] = -1
    bits[:, :words] = 0
    bits[:, words] = EMPTY
    bits[:, words + 1] = -1
    for k in range(base, base + held):
        j = at_slot[k]
        slot[j] = k
        if state[j] == RUNNING:
            row = level[j]
        elif state[j] == PENDING:
            row = (cls[j] + 1) * levels + level[j]
        else:
            continue
        bits[row, k >> 5] |= 1 << (k & 31)
        if k < bits[row, words]:
            bits[row, words] = k
        bits[row, words + 1] = k  # (k grows)
    meta[FRONT] = base
    meta[BACK] = base + held
    meta[ROOM] = -1  # (no empty places after the running ones: see _front)
    meta[COMPACTIONS] += 1


def _give(ints: np.ndarray, bits: np.ndarray, at_slot: np.ndarray, meta: np.ndarray, levels: int, j: int) -> None:
    """Give job ``j`` the place after every other (its bit, if any, is off: the caller sets it)."""
    ints[j, SLOT] = -1
    if meta[BACK] >= at_slot.shape[0]:
        _compact(ints, bits, at_slot, meta, levels)
    k = meta[BACK]
    meta[BACK] = k + 1
    ints[j, SLOT] = k
    at_slot[k] = j


def _front(
    ints: np.ndarray, bits: np.ndarray, counts: np.ndarray, at_slot: np.ndarray, meta: np.ndarray, levels: int
) -> None:
    """The running jobs take the places before every other, in their order (as the simulator
    of Tiresias moves every pending job behind the running ones of its queue).

    Their order, without sorting them all: no place lies below ``meta[FRONT]``, so the running
    jobs in the ``meta[BLOCK]`` places from there (mostly those the last call placed), in the
    order of those places, come before every other running job; those others (the jobs started
    or demoted since, mostly few) follow, sorted by place.

    The places from the end of that block up to ``meta[ROOM]`` are left empty (-1: none, after a
    compaction or once a running job stopped and kept its place in the block), so that the
    others take them, in that order, while they last: then no running job moves. Else every
    running job takes a place again, below ``meta[FRONT]`` (where none lies), with as many
    empty places left after them."""
    meta[MOVED] = 0
    r = meta[RUNS]
    if r == 0:
        meta[BLOCK] = 0
        return
    slot, state, listed = ints[:, SLOT], ints[:, STATE], ints[:r, LISTED]
    lo = meta[FRONT]
    hi = lo + meta[BLOCK]
    if meta[ROOM] >= hi:
        others = _others(slot, listed, lo, hi)
        k = others.shape[0]
        if hi + k <= meta[ROOM]:
            for i in range(k):
                _move(ints, bits, counts, at_slot, others[i], hi + i)
            meta[BLOCK] += k
            return
    if meta[FRONT] < 2 * r:
        _compact(ints, bits, at_slot, meta, levels)
    lo = meta[FRONT]
    hi = lo + meta[BLOCK]
    room = min(r, lo - r)
    ordered = np.empty(r, dtype=np.int64)
    n = 0
    for p in range(lo, hi):
        j = at_slot[p]
        if j >= 0 and slot[j] == p and state[j] == RUNNING:
            ordered[n] = j
            n += 1
    ordered[n:] = _others(slot, listed, lo, hi)
    first = lo - r - room
    for i in range(r):
        _move(ints, bits, counts, at_slot, ordered[i], first + i)
    meta[FRONT] = first
    meta[BLOCK] = r
    meta[ROOM] = first + r + room


def _others(slot: np.ndarray, listed: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The running jobs (``listed``) whose places lie outside ``lo`` .. ``hi``, by place."""
    rest = np.empty(listed.shape[0], dtype=np.int64)
    keys = np.empty(listed.shape[0], dtype=np.int64)
    k = 0
    for i in range(listed.shape[0]):
        j = listed[i]
        if not lo <= slot[j] < hi:
            rest[k] = j
            keys[k] = slot[j]
            k += 1
    return rest[:k][np.argsort(keys[:k])]


def _move(ints: np.ndarray, bits: np.ndarray, counts: np.ndarray, at_slot: np.ndarray, j: int, p: int) -> None:
    """Running job ``j`` takes place ``p``."""
    row = ints[j, LEVEL]
    _flip(bits, counts, row, ints[j, SLOT], False)
    ints[j, SLOT] = p
    at_slot[p] = j
    _flip(bits, counts, row, p, True)


def _push(heap: np.ndarray, meta: np.ndarray, t: float, job: int, since: float) -> None:
    i = meta[HEAP]
    meta[HEAP] = i + 1
    while i > 0:
        up = (i - 1) >> 1
        if heap[up, TIME] <= t:
            break
        for r in range(3):
            heap[i, r] = heap[up, r]
        i = up
    heap[i, TIME] = t
    heap[i, JOB] = job
    heap[i, HSINCE] = since


def _pop(heap: np.ndarray, meta: np.ndarray) -> None:
    """Drop the heap's top (read it first)."""
    n = meta[HEAP] - 1
    meta[HEAP] = n
    if n == 0:
        return
    t = heap[n, TIME]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and heap[c + 1, TIME] < heap[c, TIME]:
            c += 1
        if heap[c, TIME] >= t:
            break
        for r in range(3):
            heap[i, r] = heap[c, r]
        i = c
    for r in range(3):
        heap[i, r] = heap[n, r]


def _level(thresholds: np.ndarray, service: float) -> int:
    """The queue of a job with this attained service (less its offset): ``bisect_right``."""
    lo, hi = 0, thresholds.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if service < thresholds[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_time(thresholds: np.ndarray, level: int, offset: float, now: float, gpus: int, service: float) -> float:
    """When to look next at the level of a running job (at ``level``, its attained ``service``
    now): a little before its service, which grows by its GPUs every second it runs (its GPUs
    are fixed: this policy never scales), would reach the next threshold. Until then its level
    cannot change."""
    if level >= thresholds.shape[0]:
        return np.inf
    threshold = thresholds[level]
    left = threshold + offset - service
    t = now + left / gpus
    # rounding in the view's sum is far below this margin (relative 1e-9 against 1e-16)
    margin = 1e-9 * (1.0 + abs(now) + abs(t) + (threshold + abs(left)) / gpus)
    return t - margin


def enter(
    ints: np.ndarray,
    floats: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    heap: np.ndarray,
    meta: np.ndarray,
    classes: np.ndarray,
    thresholds: np.ndarray,
    knob: float,
    at_slot: np.ndarray,
    inputs: np.ndarray,
) -> tuple[int, int]:
    """Apply, in this order: the jobs seen for the first time (``fresh``: each takes the place
    after every other, in this order), the ``starts`` (fields S_*: a job runs since ``S_NOW`` on
    ``S_GPUS`` GPUs of training type ``S_ON`` (-1: another); a pending one at its level and
    service, another at the level of its attained ``S_SERVICE``), the jobs ``done`` (finished),
    the jobs ``new`` to the queue (one that runs stops), and the ``entries`` (fields E_*: pending
    jobs, with their service and, if it is above 0, their wait's start and their run time: their
    promotion falls due at ``since + knob * run time``; one whose level changed takes the place
    after every other). Then, if the running jobs changed (a start, a stop other than a finish, a
    demotion), they take the places before every other (``_front``). Returns how many running
    jobs stopped, and how many jobs are pending now.

    ``inputs``: all five as one float array (one conversion and one argument each call, where
    most calls bring a job or two): their counts (N_*), then ``fresh``, the starts' fields, ``done``,
    ``new`` and the entries' fields, one after the other (job ids are exact as floats)."""
    levels = thresholds.shape[0] + 1
    state, level, cls, slot = ints[:, STATE], ints[:, LEVEL], ints[:, CLASS], ints[:, SLOT]
    listed, listed_at = ints[:, LISTED], ints[:, LISTED_AT]
    fresh = N_ENTRIES + 1
    starts = fresh + int(inputs[N_FRESH])
    done = starts + 5 * int(inputs[N_STARTS])
    new = done + int(inputs[N_DONE])
    entries = new + int(inputs[N_NEW])
    for i in range(fresh, starts):
        _give(ints, bits, at_slot, meta, levels, int(inputs[i]))
    if done > starts:
        meta[MOVED] = 1
    for at in range(starts, done, 5):
        j = int(inputs[at + S_JOB])
        service = inputs[at + S_SERVICE]
        if state[j] == PENDING:
            _flip(bits, counts, (cls[j] + 1) * levels + level[j], slot[j], False)
            meta[PENDING_JOBS] -= 1
            service = floats[j, SERVICE]  # its service has not grown since it entered
        else:
            if state[j] == RUNNING:
                _flip(bits, counts, level[j], slot[j], False)
            level[j] = _level(thresholds, service - floats[j, OFFSET])
        _flip(bits, counts, level[j], slot[j], True)
        if state[j] != RUNNING:
            r = meta[RUNS]
            listed[r] = j
            listed_at[j] = r
            meta[RUNS] = r + 1
        state[j] = RUNNING
        gpus = int(inputs[at + S_GPUS])
        ints[j, ON] = int(inputs[at + S_ON])
        ints[j, GPUS] = gpus
        floats[j, CHECK] = _check_time(thresholds, level[j], floats[j, OFFSET], inputs[at + S_NOW], gpus, service)
    stopped = 0
    for i in range(done, new):
        j = int(inputs[i])
        stopped += _stop(ints, bits, counts, meta, j)
        slot[j] = -1  # (its place is free)
    for i in range(new, entries):
        if _stop(ints, bits, counts, meta, int(inputs[i])):
            stopped += 1
            meta[MOVED] = 1
            meta[ROOM] = -1  # (it may keep its place in the running jobs' block: see _front)
    for at in range(entries, entries + 6 * int(inputs[N_ENTRIES]), 6):
        j = int(inputs[at + E_JOB])
        was_pending = state[j] == PENDING
        if was_pending:
            _flip(bits, counts, (cls[j] + 1) * levels + level[j], slot[j], False)
        else:
            meta[PENDING_JOBS] += 1
        state[j] = PENDING
        service = inputs[at + E_SERVICE]
        c = int(inputs[at + E_CLASS])
        was = level[j]
        level[j] = _level(thresholds, service - floats[j, OFFSET])
        if level[j] != was:
            _give(ints, bits, at_slot, meta, levels, j)
        cls[j] = c
        ints[j, TYPES] = int(inputs[at + E_TYPES])
        ints[j, GPUS] = classes[CLASS_GPUS, c]
        _flip(bits, counts, (c + 1) * levels + level[j], slot[j], True)
        floats[j, SERVICE] = service
        if service > 0.0:  # it has run (held GPUs) before
            since, run = inputs[at + E_SINCE], inputs[at + E_RUN]
            if not (was_pending and floats[j, SINCE] == since):  # (else it has this entry: one will do)
                floats[j, SINCE] = since
                floats[j, RUN] = run
                _push(heap, meta, since + knob * run, j, since)
    if meta[MOVED]:
        _front(ints, bits, counts, at_slot, meta, levels)
    return stopped, meta[PENDING_JOBS]


def relevel(
    ints: np.ndarray,
    floats: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    meta: np.ndarray,
    at_slot: np.ndarray,
    thresholds: np.ndarray,
    now: float,
    jobs: np.ndarray,
    services: np.ndarray,
) -> None:
    """The running ``jobs`` whose level check fell due, with their attained ``services`` now: a
    new level (demoted: the place after every other), and a new check then (else, within the
    margin of a threshold, the same check: looked at again next round)."""
    level = ints[:, LEVEL]
    levels = thresholds.shape[0] + 1
    for i in range(jobs.shape[0]):
        j = jobs[i]
        new = _level(thresholds, services[i] - floats[j, OFFSET])
        if new != level[j]:
            _flip(bits, counts, level[j], ints[j, SLOT], False)
            level[j] = new
            _give(ints, bits, at_slot, meta, levels, j)
            _flip(bits, counts, new, ints[j, SLOT], True)
            meta[MOVED] = 1
            floats[j, CHECK] = _check_time(thresholds, new, floats[j, OFFSET], now, ints[j, GPUS], services[i])


def _stop(ints: np.ndarray, bits: np.ndarray, counts: np.ndarray, meta: np.ndarray, j: int) -> int:
    """Stop tracking job ``j`` as running, if it is: 1 if it was."""
    if ints[j, STATE] != RUNNING:
        return 0
    _flip(bits, counts, ints[j, LEVEL], ints[j, SLOT], False)
    listed, listed_at = ints[:, LISTED], ints[:, LISTED_AT]
    r = meta[RUNS] - 1
    last = listed[r]
    listed[listed_at[j]] = last
    listed_at[last] = listed_at[j]
    meta[RUNS] = r
    ints[j, STATE] = GONE
    return 1


def due_now(
    ints: np.ndarray,
    floats: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    heap: np.ndarray,
    meta: np.ndarray,
    at_slot: np.ndarray,
    levels: int,
    now: float,
    limit: float,
    knob: float,
    out: np.ndarray,
) -> int:
    """Promote the pending jobs whose promotion falls due by ``limit`` and that have waited more
    than ``knob`` times their run time: queue 0 (the place after every other, unless already
    there), their service so far forgiven (the others stay in the heap). Then list in ``out``
    the running jobs whose level check is due by ``now``; returns how many."""
    state = ints[:, STATE]
    late_job, late_since = ints[:, LATE_JOB], floats[:, LATE_SINCE]
    late = 0
    for i in range(meta[LATE]):  # due at an earlier round (so by now too), not yet earned then
        j, since = late_job[i], late_since[i]
        if state[j] != PENDING or floats[j, SINCE] != since:
            continue  # it started since: a later wait has an entry of its own
        if not _promote(ints, floats, bits, counts, meta, at_slot, levels, j, now, knob):
            late_job[late], late_since[late] = j, since
            late += 1
    while meta[HEAP] > 0 and heap[0, TIME] <= limit:
        j, since = int(heap[0, JOB]), heap[0, HSINCE]
        _pop(heap, meta)
        if state[j] != PENDING or floats[j, SINCE] != since:
            continue
        if not _promote(ints, floats, bits, counts, meta, at_slot, levels, j, now, knob):
            late_job[late], late_since[late] = j, since
            late += 1
    meta[LATE] = late
    k = 0
    listed, check = ints[:, LISTED], floats[:, CHECK]
    for i in range(meta[RUNS]):
        j = listed[i]
        if check[j] <= now:
            out[k] = j
            k += 1
    return k


def _promote(
    ints: np.ndarray,
    floats: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    meta: np.ndarray,
    at_slot: np.ndarray,
    levels: int,
    j: int,
    now: float,
    knob: float,
) -> bool:
    """Promote pending job ``j`` if its wait is longer than ``knob`` times its run time (a wait's
    run time is fixed): whether it was."""
    if not now - floats[j, SINCE] > knob * floats[j, RUN]:
        return False
    floats[j, OFFSET] = floats[j, SERVICE]
    level, row = ints[j, LEVEL], (ints[j, CLASS] + 1) * levels
    if level != 0:
        _flip(bits, counts, row + level, ints[j, SLOT], False)
        ints[j, LEVEL] = 0
        _give(ints, bits, at_slot, meta, levels, j)
        _flip(bits, counts, row, ints[j, SLOT], True)
    return True


def _fits(classes: np.ndarray, c: int, budget: np.ndarray) -> bool:
    gpus, types = classes[CLASS_GPUS, c], classes[CLASS_TYPES, c]
    for t in range(budget.shape[0]):  # noqa: SIM110 (numba: no generators)
        if (types >> t) & 1 and gpus <= budget[t]:
            return True
    return False


def choose(
    ints: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    meta: np.ndarray,
    at_slot: np.ndarray,
    classes: np.ndarray,
    type_lists: np.ndarray,
    levels: int,
    free: np.ndarray,
    starts: np.ndarray,
    dropped: np.ndarray,
) -> tuple[int, int]:
    """The round's choice (``heuristics.tiresias.Tiresias`` states the rule), in rank order
    until every GPU is given: a running job is kept if its type's budget still holds it; a
    pending job takes the first type of its list that holds it without displacing a running job
    ranked below it, else the first whose budget holds it, else it is not chosen (a class none
    of whose jobs can fit is passed over). ``free``: free GPUs per training type. Writes the
    chosen pending jobs (rank order) into ``starts[0]``, their types into ``starts[1]``, the
    running jobs not kept into ``dropped``; returns how many of each."""
    gpus, on, types = ints[:, GPUS], ints[:, ON], ints[:, TYPES]
    listed = ints[:, LISTED]
    end = at_slot.shape[0]  # no place
    budget = free.copy()
    below = np.zeros_like(free)  # GPUs held by running jobs not yet reached, per type
    for i in range(meta[RUNS]):
        j = listed[i]
        if on[j] >= 0:
            below[on[j]] += gpus[j]
    budget += below
    nd = 0
    left = budget.sum()
    ns = 0
    width = type_lists.shape[1]
    n_classes = classes.shape[1]
    heads = np.empty(n_classes, dtype=np.int64)
    lv = 0
    rs = _next(bits, 0, 0, end) if counts[0] > 0 else end  # the next running job's slot at level lv
    while lv < levels and left > 0:
        for c in range(n_classes):
            row = (c + 1) * levels + lv
            heads[c] = _next(bits, row, 0, end) if counts[row] > 0 else end
        while left > 0:
            ps = end
            pc = -1
            for c in range(n_classes):
                if heads[c] < ps:
                    if _fits(classes, c, budget):
                        ps = heads[c]
                        pc = c
                    else:
                        heads[c] = end  # the class cannot fit: passed over
            if rs == end and ps == end:
                break
            if rs < ps:
                j = at_slot[rs]
                rs = _next(bits, lv, rs + 1, end)
                t = on[j]
                if t >= 0:  # (else on a type outside the training pool: dropped)
                    need = gpus[j]
                    below[t] -= need
                    if need <= budget[t]:
                        budget[t] -= need
                        left -= need
                        continue
                dropped[nd] = j
                nd += 1
                continue
            j = at_slot[ps]
            heads[pc] = _next(bits, (pc + 1) * levels + lv, ps + 1, end)
            need = gpus[j]
            row = types[j]
            chosen = -1
            fallback = -1
            for q in range(width):
                t = type_lists[row, q]
                if t < 0:
                    break
                b = budget[t]
                if need <= b:
                    if need <= b - below[t]:
                        chosen = t
                        break
                    if fallback < 0:
                        fallback = t
            if chosen < 0:
                chosen = fallback
            if chosen >= 0:
                starts[0, ns] = j
                starts[1, ns] = chosen
                ns += 1
                budget[chosen] -= need
                left -= need
        if left > 0:
            lv += 1
            if lv < levels:
                rs = _next(bits, lv, 0, end) if counts[lv] > 0 else end
    while lv < levels:  # every GPU given: the running jobs not reached are dropped
        while rs < end:
            dropped[nd] = at_slot[rs]
            nd += 1
            rs = _next(bits, lv, rs + 1, end)
        lv += 1
        if lv < levels:
            rs = _next(bits, lv, 0, end) if counts[lv] > 0 else end
    return ns, nd


def next_fit(
    ints: np.ndarray,
    bits: np.ndarray,
    counts: np.ndarray,
    at_slot: np.ndarray,
    classes: np.ndarray,
    levels: int,
    free: np.ndarray,
    at: int,
) -> int:
    """The first pending job in rank order from ``at`` (level x places + place) on whose GPUs fit
    ``free`` (per training type) on one type its class allows: ``at`` of its place, or -1."""
    end = at_slot.shape[0]
    n_classes = classes.shape[1]
    fits = np.zeros(n_classes, dtype=np.bool_)
    some = False
    for c in range(n_classes):
        if _fits(classes, c, free):
            for lv in range(levels):
                if counts[(c + 1) * levels + lv] > 0:
                    fits[c] = True
                    some = True
                    break
    if not some:
        return -1
    first = at // end
    for lv in range(first, levels):
        p = at - first * end if lv == first else 0
        best = end
        for c in range(n_classes):
            row = (c + 1) * levels + lv
            if fits[c] and counts[row] > 0:
                s = _next(bits, row, p, best)
                if s < best:
                    best = s
        if best < end:
            return lv * end + best
    return -1


_KERNELS: Any = None


def kernels() -> Any:
    """The kernels above compiled by numba (:func:`heuristics.jit.jit`), on first use: the
    helpers first, as the kernels call them."""
    global _KERNELS
    if _KERNELS is None:
        g = globals()
        helpers = (
            "_ctz",
            "_next",
            "_flip",
            "_compact",
            "_give",
            "_others",
            "_move",
            "_front",
            "_push",
            "_pop",
            "_fits",
            "_stop",
            "_level",
        )
        for name in (*helpers, "_check_time", "_promote"):
            g[name] = jit(g[name])
        _KERNELS = SimpleNamespace(**{f.__name__: jit(f) for f in (enter, relevel, due_now, choose, next_fit)})
    return _KERNELS
