"""Converters from public GPU-cluster trace formats into our trace schema (``workload.py``).

Each adapter returns the converted :class:`~envs.sim.workload.TraceRow` objects, sorted by submit
time with the first kept job rebased to 0, and an :class:`AdapterReport` saying how many jobs it
kept and how many it dropped, by reason. :func:`convert` runs one and writes our CSV.

Field lists: the publishers' READMEs (Philly: msr-fiddle/philly-traces; PAI: alibaba/clusterdata
``cluster-trace-gpu-v2020``; Helios: S-Lab-System-Group/HeliosData; Alibaba GPU 2023:
alibaba/clusterdata ``cluster-trace-gpu-v2023``).

The rule behind every choice: a job that ran is real demand, whatever its final status; its
measured run time is what it held GPUs for, so it is kept with that run time. A job that never
started, is still running (no end, so no run time) or asks for no GPU is dropped and counted.

Reasons a job is dropped (keys of ``AdapterReport.dropped``): ``never_started``,
``missing_times`` (started, but no usable run time), ``still_running``, ``cpu_only`` (no GPU),
``zero_duration``, ``no_submit_time``, ``duplicate_job_id`` (later copies of an id),
``malformed`` (a record with the wrong fields or unreadable values), ``orphan_task_rows`` (PAI).

Philly ``cluster_job_log`` (JSON list of jobs)

======================  =========================================================================
case                    what the adapter does
======================  =========================================================================
Pass                    kept
Killed, Failed          kept if an attempt has both times: run time until the kill / failure
no attempts             dropped: ``never_started``
no attempt with both    dropped: ``missing_times`` (logging errors)
start and end time
last attempt started,   dropped: ``still_running`` (running when the snapshot was taken)
no end time
run time                sum of (end - start) over attempts with both times; others are skipped
GPUs                    the largest total length of the ``gpus`` lists of one attempt (attempts
                        of one job nearly always have the same size; the largest is what the
                        scheduler had to find); 0 -> ``cpu_only``
submit time             ``submitted_time``; None -> ``no_submit_time``
GPU type, model         not in the trace: left to the sampler
user, vc                kept
======================  =========================================================================

Alibaba PAI 2020 (``pai_job_table`` + ``pai_task_table``, header-less CSVs)

======================  =========================================================================
case                    what the adapter does
======================  =========================================================================
Terminated              kept
Failed                  kept if a task started and ended: run time until the failure
Waiting, or no task     dropped: ``never_started`` (also for a job with no task rows)
with a start time
Running, or a task      dropped: ``still_running``
started with no end
run time                latest task ``end_time`` - earliest task ``start_time`` of the job
GPUs                    sum over tasks of ``inst_num x ceil(plan_gpu / 100)``: every instance
                        gets whole GPUs, so fractional shares (plan_gpu < 100) round up to one
                        GPU per instance (the simulator shares no GPU); 0 -> ``cpu_only``
submit time             the job table's ``start_time`` (the publisher: "job submission time")
GPU type                task ``gpu_type`` of the GPU tasks, mapped by :data:`PAI_GPU_TYPES`:
                        V100 -> V100-16GB, V100M32 -> V100-32GB, P100 -> P100-16GB, T4 ->
                        T4-16GB; MISC or empty -> any type; other names kept as they are;
                        union over the job's tasks, any if one task says any
user                    kept (PAI has no vc)
task rows of jobs not   ignored, counted as ``orphan_task_rows`` (rows, not jobs)
in the job table
======================  =========================================================================

Helios ``cluster_log.csv`` (with a header row)

======================  =========================================================================
case                    what the adapter does
======================  =========================================================================
COMPLETED               kept
FAILED, NODE_FAIL,      kept if it started (``start_time`` given) and ran > 0 s: run time until
CANCELLED, TIMEOUT      it ended; cancelled in the queue (no start) -> ``never_started``
RUNNING / COMPLETING,   dropped: ``still_running``
or start, no end and
no duration
PENDING or no start     dropped: ``never_started``
run time                the ``duration`` column; if empty, ``end_time - start_time``
GPUs                    ``gpu_num``; 0 -> ``cpu_only``
submit time             ``submit_time``
GPU type, model         not in the trace: left to the sampler
user, vc                kept
======================  =========================================================================

Alibaba GPU 2023 pod list (``openb_pod_list_*.csv`` with a header row; format ``"alibaba2023"``)

======================  =========================================================================
case                    what the adapter does
======================  =========================================================================
one row = one pod       one job; ``name`` is its id. The list has no user, job-name or vc
                        column (pods are anonymised as ``openb-pod-NNNN``): user and vc are empty
Succeeded, Failed,      kept if scheduled and deleted: run time until the deletion. ``pod_phase``
Running                 is the phase the pod had when it was deleted; a Running pod was stopped
                        (or its service scaled in), it is not still running
Pending, or no          dropped: ``never_started``
``scheduled_time``
no ``deletion_time``    dropped: ``still_running``. Pods alive when the trace was cut carry the
                        cut as deletion time (12,902,960 s in ``openb_pod_list_default.csv``);
                        they are kept, with their run time cut there
submit time             ``creation_time``
run time                ``deletion_time - scheduled_time``: the wait between creation and
                        scheduling was queueing, which the simulator replays itself;
                        <= 0 -> ``zero_duration``
GPUs                    ``num_gpu``; 0 -> ``cpu_only``. A GPU share (``gpu_milli`` < 1000, only
                        with ``num_gpu`` 1) rounds up to the whole GPU (the simulator shares no
                        GPU), so ``gpu_milli`` is not read
GPU type                the ``gpu_spec`` names (``A|B``: any of them) mapped by
                        :data:`ALIBABA2023_GPU_TYPES`; empty -> any type; no ``gpu_spec`` column
                        -> left to the sampler
job class               ``qos`` mapped by :data:`ALIBABA2023_QOS_CLASSES` (LS, Guaranteed -> TE;
                        BE, Burstable -> BE); empty, or no ``qos`` column -> left to the sampler
CPU, memory             ``cpu_milli`` and ``memory_mib`` are not carried (our schema has no column
                        for them)
======================  =========================================================================

The pod list is read strictly, unlike the other formats: the published files are clean, so a
value the adapter cannot read means the file is not what it claims. A row with the wrong number
of fields, an empty ``name``, a time that is not a number, a ``num_gpu`` that is not a whole
number >= 0, or a GPU type or QoS class its map does not hold raises
:class:`~envs.sim.workload.TraceError` naming the file, line, column and value (and the known
names). Names are matched in any case.

Times: Philly and Helios give ``"YYYY-MM-DD HH:MM:SS"`` strings without a time zone; they are
read as UTC (daylight-saving shifts in the original clock, if any, are not corrected). Helios
times that are plain numbers are read as seconds. PAI and Alibaba GPU 2023 times are seconds on a shifted clock.
PAI task rows whose job is not in the job table are ignored and counted as
``orphan_task_rows`` (a count of rows, not jobs). A first row of a PAI table equal to its
column names (as in the published ``.header`` files) is skipped.

A file that cannot be read at all (missing, not JSON, not CSV, missing header columns) raises
:class:`~envs.sim.workload.TraceError`; single bad records are dropped and counted (except in the
Alibaba GPU 2023 pod list, read strictly as said above).
"""

from __future__ import annotations

import calendar
import csv
import io
import json
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.sim.model import JobClass
from envs.sim.workload import ANY_GPU_TYPE, TraceError, TraceRow, _show, write_trace

__all__ = [
    "ALIBABA2023_GPU_TYPES",
    "ALIBABA2023_QOS_CLASSES",
    "FORMATS",
    "PAI_GPU_TYPES",
    "AdapterReport",
    "convert",
    "from_alibaba2023",
    "from_helios",
    "from_pai",
    "from_philly",
]

# Reasons a job is dropped (keys of AdapterReport.dropped).
NEVER_STARTED = "never_started"
MISSING_TIMES = "missing_times"
STILL_RUNNING = "still_running"
CPU_ONLY = "cpu_only"
ZERO_DURATION = "zero_duration"
NO_SUBMIT_TIME = "no_submit_time"
DUPLICATE_JOB_ID = "duplicate_job_id"
MALFORMED = "malformed"
ORPHAN_TASK_ROWS = "orphan_task_rows"

PAI_GPU_TYPES: dict[str, str | None] = {
    "V100": "V100-16GB",
    "V100M32": "V100-32GB",
    "P100": "P100-16GB",
    "T4": "T4-16GB",
    "MISC": None,
    "": None,
}
"""PAI ``gpu_type`` -> our GPU type name; ``None`` means any type. Names not listed are kept (the
trace then names them, and ``--set workload.gpu_type_map`` maps them). The publisher's paper
(Weng et al., NSDI'22) gives V100 16 GB and V100M32 32 GB cards."""

FORMATS: dict[str, int] = {"philly": 1, "pai": 2, "helios": 1, "alibaba2023": 1}
"""Formats :func:`convert` knows, and how many input files each takes."""


@dataclass(frozen=True)
class AdapterReport:
    """What an adapter kept and dropped.

    :param kept: jobs converted.
    :param dropped: reason -> number of jobs dropped for it (``orphan_task_rows`` counts rows).
    """

    kept: int
    dropped: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for a log or a CLI, e.g. ``"kept 7 jobs; dropped 3 (cpu_only 1, never_started 2)"``."""
        total = sum(self.dropped.values())
        if not total:
            return f"kept {self.kept} jobs; dropped none"
        parts = ", ".join(f"{reason} {count}" for reason, count in sorted(self.dropped.items()))
        return f"kept {self.kept} jobs; dropped {total} ({parts})"


class _Malformed(Exception):
    """A record that cannot be read; the job is dropped as ``malformed``."""


def _missing(value: object) -> bool:
    return value is None or (
        isinstance(value, str) and value.strip() in ("", "None", "none", "null", "NULL", "nan", "NaN")
    )


def _timestamp(value: object) -> float | None:
    """A ``"YYYY-MM-DD HH:MM:SS"`` string (read as UTC) or a number of seconds; ``None`` if missing."""
    if _missing(value):
        return None
    if isinstance(value, bool):
        raise _Malformed
    if isinstance(value, int | float):
        result = float(value)
    else:
        text = str(value).strip()
        try:
            result = float(text)
        except ValueError:
            try:
                result = float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))
            except ValueError:
                raise _Malformed from None
    if not math.isfinite(result):
        raise _Malformed
    return result


def _number(value: object) -> float | None:
    if _missing(value):
        return None
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _Malformed from None
    if not math.isfinite(result):
        raise _Malformed
    return result


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass
class _Job:
    """A job an adapter accepted, before rebasing."""

    name: str
    submit: float
    duration: float
    num_gpus: int
    gpu_types: frozenset[str] | None = None
    job_class: JobClass | None = None
    user: str | None = None
    vc: str | None = None


def _finish(jobs: list[_Job], dropped: Counter[str]) -> tuple[list[TraceRow], AdapterReport]:
    """Sort stably by submit time, rebase the first to 0, build rows and the report."""
    jobs.sort(key=lambda job: job.submit)
    origin = jobs[0].submit if jobs else 0.0
    rows = [
        TraceRow(
            name=job.name,
            submit_time=job.submit - origin,
            duration=job.duration,
            num_gpus=job.num_gpus,
            gpu_types=job.gpu_types,
            job_class=job.job_class,
            user=job.user,
            vc=job.vc,
        )
        for job in jobs
    ]
    return rows, AdapterReport(kept=len(rows), dropped=dict(sorted(dropped.items())))


def _tally(parse: Callable[[Any], _Job | str], records: Iterable[Any]) -> tuple[list[TraceRow], AdapterReport]:
    """Parse every record into :func:`_finish`'s rows and report: a record ``parse`` rejects (with
    a reason, or as malformed) or a job whose id was seen before is dropped and counted."""
    jobs: list[_Job] = []
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    for record in records:
        try:
            outcome = parse(record)
        except _Malformed:
            outcome = MALFORMED
        if isinstance(outcome, str):
            dropped[outcome] += 1
        elif outcome.name in seen:
            dropped[DUPLICATE_JOB_ID] += 1
        else:
            seen.add(outcome.name)
            jobs.append(outcome)
    return _finish(jobs, dropped)


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    file = os.fspath(path)
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{file}: no such file.") from None
    except IsADirectoryError:
        raise TraceError(f"{file}: is a directory, not a trace file.") from None
    except OSError as exc:
        raise TraceError(f"{file}: cannot be read ({exc.strerror or exc}).") from None


def _read_text(path: str | os.PathLike[str]) -> str:
    file = os.fspath(path)
    data = _read_bytes(path)
    if b"\x00" in data:
        raise TraceError(f"{file}: contains a NUL byte, so it is a binary file, not a trace.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(f"{file}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}).") from None


def _csv_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank CSV record."""
    file = os.fspath(path)
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(f"{file}, line {reader.line_num}: not valid CSV ({exc}).") from None
        if record and any(cell.strip() for cell in record):
            yield reader.line_num, record


def _csv_table(
    path: str | os.PathLike[str], required: Sequence[str], family: str, expected: str
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The lower-cased column names of a CSV with a header row, and its (line, fields) records.

    :param required: columns the header must name.
    :param family: the format's name for the error, e.g. ``"Helios"``.
    :param expected: what the file should be, e.g. ``"a Helios cluster_log.csv"``.
    :raises TraceError: if the file is empty or its header lacks a required column.
    """
    file = os.fspath(path)
    records = _csv_rows(path)
    first = next(records, None)
    if first is None:
        raise TraceError(f"{file}: the file is empty; expected {expected} with a header row.")
    header_line, header = first
    columns = [name.strip().lower() for name in header]
    missing = [name for name in required if name not in columns]
    if missing:
        raise TraceError(f"{file}, line {header_line}: the header lacks the {family} column(s) {', '.join(missing)}.")
    return columns, records


# --------------------------------------------------------------------------------------------
# Philly
# --------------------------------------------------------------------------------------------


def _attempt_gpus(attempt: dict[str, Any]) -> int:
    detail = attempt.get("detail") or []
    if not isinstance(detail, list):
        raise _Malformed
    total = 0
    for part in detail:
        if not isinstance(part, dict):
            raise _Malformed
        gpus = part.get("gpus") or []
        if not isinstance(gpus, list):
            raise _Malformed
        total += len(gpus)
    return total


def _philly_job(record: object) -> _Job | str:
    """The job, or the reason to drop it."""
    if not isinstance(record, dict):
        raise _Malformed
    name = _text(record.get("jobid"))
    if name is None:
        raise _Malformed
    attempts = record.get("attempts") or []
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        raise _Malformed
    if not attempts:
        return NEVER_STARTED
    last = attempts[-1]
    if _timestamp(last.get("start_time")) is not None and _timestamp(last.get("end_time")) is None:
        return STILL_RUNNING
    run_time = 0.0
    complete = 0
    for attempt in attempts:
        start, end = _timestamp(attempt.get("start_time")), _timestamp(attempt.get("end_time"))
        if start is not None and end is not None and end >= start:
            run_time += end - start
            complete += 1
    if not complete:
        return MISSING_TIMES
    gpus = max(_attempt_gpus(attempt) for attempt in attempts)
    if gpus == 0:
        return CPU_ONLY
    if run_time <= 0:
        return ZERO_DURATION
    submit = _timestamp(record.get("submitted_time"))
    if submit is None:
        return NO_SUBMIT_TIME
    return _Job(
        name=name,
        submit=submit,
        duration=run_time,
        num_gpus=gpus,
        user=_text(record.get("user")),
        vc=_text(record.get("vc")),
    )


def from_philly(path: str | os.PathLike[str]) -> tuple[list[TraceRow], AdapterReport]:
    """Convert a Philly ``cluster_job_log`` (one JSON list of jobs); see the module table.

    :param path: the JSON file.
    :return: rows sorted by submit time (first at 0) and what was dropped.
    :raises TraceError: if the file is missing, not JSON, or not a list.
    """
    file = os.fspath(path)
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise TraceError(f"{file}, line {exc.lineno}: not valid JSON ({exc.msg}).") from None
    if not isinstance(data, list):
        raise TraceError(f"{file}: expected a JSON list of jobs, got a JSON {type(data).__name__}.")
    return _tally(_philly_job, data)


# --------------------------------------------------------------------------------------------
# Alibaba PAI
# --------------------------------------------------------------------------------------------

_PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
_PAI_TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)


def _pai_table(path: str | os.PathLike[str], columns: tuple[str, ...]) -> Iterator[tuple[list[str], bool]]:
    """(stripped cells, whether the record has the table's number of fields) of a PAI table."""
    first = True
    for _, record in _csv_rows(path):
        cells = [cell.strip() for cell in record]
        if first and tuple(cell.lower() for cell in cells) == columns:
            first = False
            continue
        first = False
        yield cells, len(cells) == len(columns)


@dataclass
class _PaiTasks:
    rows: int = 0
    gpus: int = 0
    start: float | None = None
    end: float | None = None
    started_without_end: bool = False
    running: bool = False
    types: set[str | None] = field(default_factory=set)


def from_pai(
    job_table: str | os.PathLike[str], task_table: str | os.PathLike[str]
) -> tuple[list[TraceRow], AdapterReport]:
    """Convert Alibaba PAI 2020 ``pai_job_table`` + ``pai_task_table`` (header-less CSVs).

    :param job_table: the job table (job_name, inst_id, user, status, start_time, end_time).
    :param task_table: the task table (job_name, task_name, inst_num, status, start_time,
        end_time, plan_cpu, plan_mem, plan_gpu, gpu_type).
    :return: rows sorted by submit time (first at 0) and what was dropped; see the module table.
    :raises TraceError: if a file is missing or not CSV text.
    """
    dropped: Counter[str] = Counter()
    tasks: dict[str, _PaiTasks] = {}
    broken_jobs: set[str] = set()
    for cells, complete in _pai_table(task_table, _PAI_TASK_COLUMNS):
        if not complete:
            # The job cannot be trusted without this task; its name is the first field.
            tasks.setdefault(cells[0], _PaiTasks()).rows += 1
            broken_jobs.add(cells[0])
            continue
        job_name, _task, inst_num_s, status, start_s, end_s, _cpu, _mem, plan_gpu_s, gpu_type = cells
        agg = tasks.setdefault(job_name, _PaiTasks())
        agg.rows += 1
        try:
            inst_num = _number(inst_num_s)
            plan_gpu = _number(plan_gpu_s)
            start, end = _timestamp(start_s), _timestamp(end_s)
        except _Malformed:
            broken_jobs.add(job_name)
            continue
        instances = max(0, round(inst_num)) if inst_num is not None else 1
        gpus_each = math.ceil(plan_gpu / 100.0 - 1e-9) if plan_gpu is not None and plan_gpu > 0 else 0
        agg.gpus += instances * gpus_each
        if gpus_each:
            agg.types.add(gpu_type)
        if status.lower() == "running":
            agg.running = True
        if start is not None:
            agg.start = start if agg.start is None else min(agg.start, start)
            if end is None:
                agg.started_without_end = True
        if end is not None:
            agg.end = end if agg.end is None else max(agg.end, end)

    jobs: list[_Job] = []
    seen: set[str] = set()
    known: set[str] = set()
    for cells, complete in _pai_table(job_table, _PAI_JOB_COLUMNS):
        if not complete:
            dropped[MALFORMED] += 1
            continue
        job_name, _inst_id, user, status, submit_s, _end = cells
        if job_name in seen:
            dropped[DUPLICATE_JOB_ID] += 1
            continue
        seen.add(job_name)
        known.add(job_name)
        job_tasks = tasks.get(job_name)
        try:
            submit = _timestamp(submit_s)
        except _Malformed:
            dropped[MALFORMED] += 1
            continue
        state = status.lower()
        if job_name in broken_jobs or not job_name:
            dropped[MALFORMED] += 1
        elif state == "running" or (job_tasks is not None and (job_tasks.running or job_tasks.started_without_end)):
            dropped[STILL_RUNNING] += 1
        elif state == "waiting" or job_tasks is None or job_tasks.start is None:
            dropped[NEVER_STARTED] += 1
        elif job_tasks.end is None:
            dropped[MISSING_TIMES] += 1
        elif job_tasks.gpus == 0:
            dropped[CPU_ONLY] += 1
        elif job_tasks.end - job_tasks.start <= 0:
            dropped[ZERO_DURATION] += 1
        elif submit is None:
            dropped[NO_SUBMIT_TIME] += 1
        else:
            mapped = {PAI_GPU_TYPES.get((t or "").upper(), t) for t in job_tasks.types}
            gpu_types = ANY_GPU_TYPE if None in mapped else frozenset(t for t in mapped if t is not None)
            jobs.append(
                _Job(
                    name=job_name,
                    submit=submit,
                    duration=job_tasks.end - job_tasks.start,
                    num_gpus=job_tasks.gpus,
                    gpu_types=gpu_types,
                    user=user or None,
                )
            )
    orphans = sum(agg.rows for name, agg in tasks.items() if name not in known)
    if orphans:
        dropped[ORPHAN_TASK_ROWS] += orphans
    return _finish(jobs, dropped)


# --------------------------------------------------------------------------------------------
# Helios
# --------------------------------------------------------------------------------------------

_HELIOS_REQUIRED = ("job_id", "gpu_num", "submit_time", "start_time", "end_time", "duration")


def _helios_job(cell: dict[str, str]) -> _Job | str:
    name = cell["job_id"]
    if not name:
        raise _Malformed
    state = cell.get("state", "").upper()
    gpus_f = _number(cell["gpu_num"])
    if gpus_f is None or gpus_f < 0 or not float(gpus_f).is_integer():
        raise _Malformed
    submit = _timestamp(cell["submit_time"])
    start = _timestamp(cell["start_time"])
    end = _timestamp(cell["end_time"])
    duration = _number(cell["duration"])
    if state in ("RUNNING", "COMPLETING") or (start is not None and end is None and duration is None):
        return STILL_RUNNING
    if state == "PENDING" or start is None:
        return NEVER_STARTED
    if duration is None:
        if end is None:
            return MISSING_TIMES
        duration = end - start
    if gpus_f == 0:
        return CPU_ONLY
    if duration <= 0:
        return ZERO_DURATION
    if submit is None:
        return NO_SUBMIT_TIME
    return _Job(
        name=name,
        submit=submit,
        duration=duration,
        num_gpus=int(gpus_f),
        user=cell.get("user") or None,
        vc=cell.get("vc") or None,
    )


def from_helios(path: str | os.PathLike[str]) -> tuple[list[TraceRow], AdapterReport]:
    """Convert a Helios ``cluster_log.csv`` (with a header row); see the module table.

    :param path: the CSV file.
    :return: rows sorted by submit time (first at 0) and what was dropped.
    :raises TraceError: if the file is missing, not CSV text, or lacks a needed column.
    """
    columns, records = _csv_table(path, _HELIOS_REQUIRED, "Helios", "a Helios cluster_log.csv")

    def parse(record: list[str]) -> _Job | str:
        if len(record) != len(columns):
            return MALFORMED
        return _helios_job({name: value.strip() for name, value in zip(columns, record, strict=True)})

    return _tally(parse, (record for _, record in records))


# --------------------------------------------------------------------------------------------
# Alibaba GPU 2023
# --------------------------------------------------------------------------------------------

ALIBABA2023_GPU_TYPES: dict[str, str] = {
    "A10": "A10-24GB",
    "G1": "V100-32GB",
    "G2": "V100-32GB",
    "G3": "A100-40GB",
    "P100": "P100-16GB",
    "T4": "T4-16GB",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
}
"""Pod-list GPU type (``gpu_spec`` part, any case) -> our type name (``model.GPU_TYPES``).

These are all the names the publisher's node list and README use. T4, P100, A10 and the V100s
(M16 / M32: 16 or 32 GB) map to our types of the same chip and memory. G1, G2 and G3 are, in
Alibaba's words, "undisclosed internal GPU codes", and we found no public source that says what
they are, so their map is an assumption: G1 and G2 are taken as V100-class, i.e. the reference
type V100-32GB (G2 holds most of the fleet's GPUs, in 8-GPU hosts of 96 cores and 384 GiB); G3,
on the fleet's largest hosts (8 GPUs with 128 cores and 768 GiB), as the newest type we model,
A100-40GB. G1 appears in no published node row. :func:`from_alibaba2023` takes another map.
"""

ALIBABA2023_QOS_CLASSES: dict[str, JobClass] = {
    "LS": JobClass.TE,
    "Guaranteed": JobClass.TE,
    "BE": JobClass.BE,
    "Burstable": JobClass.BE,
}
"""Pod-list ``qos`` (any case) -> our job class.

Our classes are FitGpp's: a TE job is one its user waits on, so it should start at once and
may preempt BE work; a BE job runs on what is left and may be preempted. LS (latency-sensitive:
Alibaba's online, interactive class) and Guaranteed (Kubernetes: requests equal limits, the last
pods evicted under pressure) are capacity their owners are promised: TE. BE (best effort, the
first pods evicted) and Burstable (Kubernetes: evicted before Guaranteed; in this trace the
class of the 8-GPU pods, batch work) may yield: BE.
"""

_ALIBABA2023_QOS_UPPER = {key.upper(): value for key, value in ALIBABA2023_QOS_CLASSES.items()}
_ALIBABA2023_REQUIRED = ("name", "num_gpu", "creation_time", "deletion_time", "scheduled_time")


def _alibaba2023_job(
    file: str,
    line: int,
    cell: dict[str, str],
    type_map: Mapping[str, str],
) -> _Job | str:
    """The job, or the reason to drop it; a value it cannot read raises :class:`TraceError`.

    :param type_map: upper-case trace GPU name -> our type name.
    """

    def bad(column: str, problem: str) -> TraceError:
        return TraceError(f"{file}, line {line}, column {column}: {problem}.")

    def seconds(column: str) -> float | None:
        try:
            return _number(cell[column])
        except _Malformed:
            raise bad(column, f"expected a time in seconds, got {_show(cell[column])}") from None

    name = cell["name"]
    if not name:
        raise bad("name", "the pod name is empty")
    try:
        gpus = _number(cell["num_gpu"])
    except _Malformed:
        gpus = None
    if gpus is None or gpus < 0 or not gpus.is_integer():
        raise bad("num_gpu", f"expected a whole number of GPUs >= 0, got {_show(cell['num_gpu'])}")

    gpu_types: frozenset[str] | None = None
    if "gpu_spec" in cell:
        spec = cell["gpu_spec"]
        parts = [] if _missing(spec) else [part.strip() for part in spec.split("|") if part.strip()]
        for part in parts:
            if part.upper() not in type_map:
                known = ", ".join(sorted(type_map))
                raise bad("gpu_spec", f"unknown GPU type {_show(part)} (known: {known})")
        gpu_types = frozenset(type_map[part.upper()] for part in parts) if parts else ANY_GPU_TYPE

    job_class: JobClass | None = None
    qos = cell.get("qos", "")
    if not _missing(qos):
        if qos.upper() not in _ALIBABA2023_QOS_UPPER:
            known = ", ".join(sorted(ALIBABA2023_QOS_CLASSES))
            raise bad("qos", f"unknown QoS class {_show(qos)} (known: {known})")
        job_class = _ALIBABA2023_QOS_UPPER[qos.upper()]

    created, deleted, scheduled = seconds("creation_time"), seconds("deletion_time"), seconds("scheduled_time")
    if cell.get("pod_phase", "").lower() == "pending" or scheduled is None:
        return NEVER_STARTED
    if deleted is None:
        return STILL_RUNNING
    if gpus == 0:
        return CPU_ONLY
    if deleted - scheduled <= 0:
        return ZERO_DURATION
    if created is None:
        return NO_SUBMIT_TIME
    return _Job(
        name=name,
        submit=created,
        duration=deleted - scheduled,
        num_gpus=int(gpus),
        gpu_types=gpu_types,
        job_class=job_class,
    )


def from_alibaba2023(
    path: str | os.PathLike[str], type_map: Mapping[str, str] | None = None
) -> tuple[list[TraceRow], AdapterReport]:
    """Convert an Alibaba GPU 2023 pod list (``openb_pod_list_*.csv``); see the module table.

    :param path: the CSV file (with its header row).
    :param type_map: trace GPU name -> our type name, replacing :data:`ALIBABA2023_GPU_TYPES`
        (e.g. to choose another type for the undisclosed G2 / G3).
    :return: rows sorted by submit time (first at 0) and what was dropped.
    :raises TraceError: if the file is missing, not CSV text, lacks a needed column, or holds a
        value it cannot read (one sentence naming the file, line, column and value).
    """
    file = os.fspath(path)
    names = ALIBABA2023_GPU_TYPES if type_map is None else type_map
    upper = {key.upper(): value for key, value in names.items()}
    columns, records = _csv_table(
        path, _ALIBABA2023_REQUIRED, "Alibaba GPU 2023 pod-list", "an Alibaba GPU 2023 openb_pod_list_*.csv"
    )

    def parse(item: tuple[int, list[str]]) -> _Job | str:
        line, record = item
        if len(record) != len(columns):
            raise TraceError(
                f"{file}, line {line}: the row has {len(record)} fields but the header has {len(columns)}."
            )
        cell = {name: value.strip() for name, value in zip(columns, record, strict=True)}
        return _alibaba2023_job(file, line, cell, upper)

    return _tally(parse, records)


# --------------------------------------------------------------------------------------------
# convert
# --------------------------------------------------------------------------------------------


def convert(fmt: str, inputs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> AdapterReport:
    """Convert a public trace into our CSV schema and write it atomically.

    :param fmt: ``"philly"``, ``"pai"``, ``"helios"`` or ``"alibaba2023"`` (any case).
    :param inputs: the input files: one for philly, helios and alibaba2023; the job table then the
        task table for pai.
    :param out: the CSV file to write.
    :return: what was kept and dropped.
    :raises ValueError: for an unknown format or the wrong number of inputs.
    :raises TraceError: if an input cannot be read, or no job is left to write.
    """
    name = fmt.strip().lower()
    if name not in FORMATS:
        raise ValueError(f"unknown trace format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if len(inputs) != FORMATS[name]:
        what = "a job table and a task table" if name == "pai" else "one file"
        raise ValueError(f"the {name} format takes {what}, got {len(inputs)} input file(s)")
    if name == "philly":
        rows, report = from_philly(inputs[0])
    elif name == "pai":
        rows, report = from_pai(inputs[0], inputs[1])
    elif name == "helios":
        rows, report = from_helios(inputs[0])
    else:
        rows, report = from_alibaba2023(inputs[0])
    if not rows:
        sources = ", ".join(os.fspath(p) for p in inputs)
        raise TraceError(f"{sources}: no job left to convert ({report.describe()}).")
    write_trace(rows, out)
    return report
