"""numba, lazily: kernels compiled on their first call, so that most runs never import numba.

Every kernel compiles nopython with IEEE division (``x / 0`` is inf or nan, no exception) and is
cached on disk beside its file, or in numba's user-wide cache where that is read-only, or not at
all where both are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def jit(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled by numba now (the module docstring's options)."""
    import numba

    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
    except RuntimeError:  # no writable cache location (read-only tree and home): compile anew
        return numba.njit(nogil=True, error_model="numpy")(fn)


def compiled(fn: F) -> F:
    """``fn`` compiled by numba on its first call (the module docstring's options).
    ``compiled_calling`` for a kernel that calls other kernels."""
    return compiled_calling()(fn)


def compiled_calling(*kernels: str) -> Callable[[F], F]:
    """:func:`compiled`, for a function that calls the compiled kernels named ``kernels`` (globals
    of its module, made by :func:`compiled`): when it is compiled, their numba functions take their
    place there (numba calls those directly, with no Python in between).

    The kernels must be defined in the same file as ``fn``: numba's disk cache keeps the callees'
    code inside the caller's and checks only the caller's file for changes, so a callee changed in
    another file would leave the caller's cached code stale (numba's documented limitation,
    numba/numba#1833). A kernel from another module is a ``TypeError`` when ``fn`` compiles."""

    def wrap(fn: F) -> F:
        jitted: Any = None

        def dispatcher() -> Any:
            nonlocal jitted
            if jitted is None:
                for name in kernels:
                    kernel = fn.__globals__[name]
                    if not hasattr(kernel, "dispatcher"):  # already numba's: another kernel calls it too
                        continue
                    if kernel.__module__ != fn.__module__:
                        raise TypeError(
                            f"{fn.__qualname__} calls the kernel {name} of {kernel.__module__}: numba's cache would "
                            f"not see it change; define it in {fn.__module__}"
                        )
                    fn.__globals__[name] = kernel.dispatcher()
                jitted = jit(fn)
            return jitted

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            return (jitted or dispatcher())(*args)

        call.dispatcher = dispatcher  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap
