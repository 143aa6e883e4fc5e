"""Atomic file writes: a temporary file in the target's folder, then ``os.replace``.

A reader never sees a half-written results, demo or checkpoint file, and a Ctrl-C or SIGTERM
that arrives during a write is held until the write is over: it leaves the new file whole and no
temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO

#: the signals :func:`signals_held` holds: a Ctrl-C and ``kill PID``
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def signals_held(interrupt: bool = False) -> Iterator[None]:
    """Inside, a SIGINT or SIGTERM waits: it is noted, and handled by the handler it would have met
    once the block is over. Makes a short piece of bookkeeping all-or-nothing with respect to an
    interrupt. ``interrupt``: the first one also ends the block at once, by a KeyboardInterrupt
    that the block's exit swallows (for a wait that only a KeyboardInterrupt can leave, as Ray's:
    it runs Python's handlers inside its C code and turns any other exception into a
    SystemError). Python handles signals in the main thread only: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)
        if interrupt:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, note) for s in STOP_SIGNALS}
    try:
        yield
    except KeyboardInterrupt:
        if not (interrupt and caught):
            raise
    finally:
        for s, h in previous.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
        for signum in dict.fromkeys(caught):  # each once, in the order they came
            signal.raise_signal(signum)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success it replaces ``path`` (keeping its
    permissions). Interrupts are held
    (:func:`signals_held`) from the temporary file's creation to its replacing ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with signals_held():
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            f: IO = os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8", newline="")
            with f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, _mode(target))  # mkstemp makes it 0600
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def _mode(target: Path) -> int:
    """The replaced file's permissions, or a new file's usual ones."""
    with contextlib.suppress(FileNotFoundError):
        return target.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return Path(path)
