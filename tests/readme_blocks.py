"""What the README tests share: the README's sections, code blocks and shell commands, a copy of
the repository to run them in, and the one way to run a command there as written."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLES = ("Add a policy", "Add a scenario")
"""sections whose commands need their example file saved first: tests/test_readme_examples.py"""
PROGRAMS = (".venv/bin/", "python ", "make ", "tensorboard ")
"""how a command begins; an inline code span that begins so is a command too"""


def text() -> str:
    return README.read_text(encoding="utf-8")


def section(title: str) -> str:
    """The README's section under ``## title``, up to the next one."""
    t = text()
    start = t.index(f"\n## {title}\n")
    end = t.find("\n## ", start + 1)
    return t[start : end if end >= 0 else len(t)]


def sections() -> list[tuple[str, str]]:
    """(title, body) of every ``## `` section, in order."""
    parts = re.split(r"^## (.+)$", text(), flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def blocks(body: str, lang: str) -> list[str]:
    """The fenced code blocks of ``lang`` in ``body``."""
    return re.findall(rf"```{lang}\n(.*?)```", body, flags=re.S)


def shell_lines(block: str) -> list[str]:
    """The commands of a shell block: one a line, a line ending in ``\\`` continued on the next."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def inline_commands(body: str) -> list[str]:
    """The inline code spans of ``body`` (outside its fenced blocks) that are commands."""
    prose = re.sub(r"```.*?```", "", body, flags=re.S)
    return [s for s in re.findall(r"`([^`\n]+)`", prose) if s.startswith(PROGRAMS)]


@functools.cache
def warm_kernels() -> None:
    """Compiles the numba kernels (heuristics/jit.py) into the working tree's cache, once a
    process: Aryl's knapsack and Tiresias' kernels, by a small run of each."""
    from envs.sim import scenarios
    from heuristics import registry

    s = scenarios.get("loaning", {"workload.synthetic.num_jobs": "40"})
    for name in ("aryl", "tiresias"):
        scenarios.simulate(s, registry.make(name), 0)


def copy_repo(dest: Path) -> Path:
    """The repository's tracked files, as they are in the working tree, in ``dest``, with a
    ``.venv`` that is this interpreter's environment (its ``.installed`` fresh, so that ``make``
    sets nothing up), and the working tree's numba cache (``__pycache__/*.nbi``, ``*.nbc``: what a
    checkout holds after its first run, :func:`warm_kernels`). A command runs in the copy as in a
    checkout that has run before: without the cache each copy would compile the kernels anew, about
    16 s of every command that runs Aryl or Tiresias (the first run of a fresh checkout, which CI's
    first tests are)."""
    warm_kernels()
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    for cached in [*ROOT.glob("*/__pycache__/*.nb[ic]"), *ROOT.glob("*/*/__pycache__/*.nb[ic]")]:
        target = dest / cached.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, target)  # the stamps numba checks are the sources' mtimes, kept by copy2
    venv, prefix = dest / ".venv", Path(sys.prefix)
    (venv / "bin").mkdir(parents=True)
    if (prefix / "pyvenv.cfg").is_file():  # the copy's python finds the environment's packages
        shutil.copy2(prefix / "pyvenv.cfg", venv / "pyvenv.cfg")
        for lib in ("lib", "lib64"):
            if (prefix / lib).exists():
                (venv / lib).symlink_to(prefix / lib)
    for tool in Path(sys.executable).parent.iterdir():
        (venv / "bin" / tool.name).symlink_to(tool)
    if not (venv / "bin" / "python").exists():
        (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".installed").touch()
    return dest


def environ(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a command in ``repo``: its ``.venv/bin`` first on the PATH (``python``
    and ``tensorboard`` are the environment's, as in an activated venv)."""
    own = ("PYTHONPATH", "VIRTUAL_ENV", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")  # not a user's: make test's own
    env = {k: v for k, v in os.environ.items() if k not in own}
    env["PATH"] = f"{repo / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return env | dict(extra or {})


def run(
    line: str, repo: Path, extra: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``line`` run by bash in ``repo``, as a user would type it there (``extra``: more
    environment variables)."""
    return subprocess.run(
        ["bash", "-c", line], cwd=repo, env=environ(repo, extra), capture_output=True, text=True, timeout=timeout
    )
