"""envs.sim.fileio: atomic writes, and an interrupt during one waits for it to end."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from envs.sim.fileio import atomic_open, atomic_write, signals_held


@pytest.fixture
def raising_sigint():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_during_a_write_waits_until_the_file_is_whole(tmp_path: Path, raising_sigint) -> None:
    target = tmp_path / "r.json"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), atomic_open(target) as f:
        f.write("new ")
        os.kill(os.getpid(), signal.SIGINT)  # held: not raised here
        f.write("and whole\n")
    assert target.read_text() == "new and whole\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old\n")
    with pytest.raises(ValueError), atomic_open(target) as f:
        f.write("half")
        raise ValueError("the caller failed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    target.write_text("old\n")
    target.chmod(0o600)
    atomic_write(target, "new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    fresh = atomic_write(tmp_path / "new.csv", b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_signals_held_restores_the_handlers(raising_sigint) -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), signals_held():
        with signals_held():  # nested: the inner exit keeps the outer hold
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert signal.getsignal(signal.SIGINT) is before
