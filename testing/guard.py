"""A candidate call that cannot end or stall the check: ``os._exit`` (and ``posix._exit``, the same function
under its module's name) raises instead of ending the process, and a wall-clock limit (SIGALRM, in the main
thread of a Unix process) interrupts a call that runs past it, whether it calls the model or loops without it.
Both become the candidate's failure on its case (spec EC8). ``exits_refused`` keeps ``os._exit`` refused for a
whole check, from before the candidate's file is imported, so that a binding taken at import
(``from os import _exit``) is the refusing one too.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

TIMEOUT_FACTOR, TIMEOUT_FLOOR = 20.0, 10.0  # the default limit: 20x the target's own time on the case + 10 s
UNTIMED_SECONDS = 60.0  # the limit where the target did not run on the case (samples against an exact law)
MAX_CASE_TIMEOUT = 86_400.0  # --case-timeout's upper bound: one day (setitimer overflows far beyond it)
EXIT_MODULES = ("os", "posix", "nt")  # where ``_exit`` lives: os, and the C module os takes it from
IMPORT_TIMEOUT, IMPORT_SECONDS = "VERIDEC_IMPORT_TIMEOUT", 120.0  # the limit on an import or model factory
WATCHERS: list = []  # callables (seconds | None, what, code) told when a candidate's code starts and ends


class CandidateExited(BaseException):
    """The candidate called ``os._exit`` (a BaseException, like SystemExit: its ``except Exception`` cannot
    swallow it)."""


class CandidateTimedOut(BaseException):
    """The candidate ran past its wall-clock limit on a case (a BaseException, like KeyboardInterrupt)."""


def candidate_limit(case_timeout: float | None, target_seconds: float | None) -> float:
    """Seconds one candidate call may take: ``case_timeout`` when given, else 20x the target's own seconds on the
    case plus 10 s (``UNTIMED_SECONDS`` where the target did not run)."""
    if case_timeout is not None:
        return case_timeout
    return UNTIMED_SECONDS if target_seconds is None else TIMEOUT_FACTOR * target_seconds + TIMEOUT_FLOOR


def import_seconds() -> float:
    """Seconds importing the candidate or calling its model factory may take (VERIDEC_IMPORT_TIMEOUT, default
    120)."""
    text = os.environ.get(IMPORT_TIMEOUT, str(IMPORT_SECONDS))
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_CASE_TIMEOUT:
        raise ValueError(f"environment variable {IMPORT_TIMEOUT} must be a number of seconds in (0, "
                         f"{MAX_CASE_TIMEOUT:g}], got {text!r}")
    return value


def can_time_out() -> bool:
    """Whether a limit can interrupt the call: SIGALRM exists (Unix) and this is the main thread."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def refuse_exit(code=0):
    """``os._exit`` while a candidate may run: raises ``CandidateExited`` instead of ending the process."""
    raise CandidateExited(f"os._exit({code})")


@contextmanager
def exits_refused():
    """Run the block with ``os._exit`` and ``posix._exit`` (``nt._exit``) raising ``CandidateExited``; restored
    after. A module imported inside keeps the refusing function where it bound ``_exit`` itself."""
    modules = [sys.modules[name] for name in EXIT_MODULES if hasattr(sys.modules.get(name), "_exit")]
    real = [module._exit for module in modules]
    for module in modules:
        module._exit = refuse_exit
    try:
        yield
    finally:
        for module, function in zip(modules, real):
            module._exit = function


@contextmanager
def watched(seconds: float, what: str, code: int = 1):
    """Tell each of ``WATCHERS`` that the candidate's code runs ``what`` within ``seconds`` (``code``: the exit
    code if it never gives control back), then that it ended (``veridec check``'s supervisor, spec EC8)."""
    for watcher in WATCHERS:
        watcher(seconds, what, code)
    try:
        yield
    finally:
        for watcher in WATCHERS:
            watcher(None, what, code)


@contextmanager
def guarded(seconds: float, what: str = "a case", code: int = 1):
    """Run the block with ``os._exit`` raising ``CandidateExited`` (``exits_refused``) and, where
    ``can_time_out``, a limit of ``seconds`` raising ``CandidateTimedOut``; both restored after (an outer timer
    is re-armed with its rest). ``watched`` as ``what`` (``code``) meanwhile."""
    with watched(seconds, what, code), _limited(seconds):
        yield


@contextmanager
def _limited(seconds: float):
    timed = can_time_out()
    if timed:
        previous = signal.signal(signal.SIGALRM, _raise_timeout(seconds))
        outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
        started = time.monotonic()
    try:
        with exits_refused():
            yield
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer:  # someone else's timer was running: it gets what was left of it
                signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


def _raise_timeout(seconds: float):
    def handler(signum, frame):
        raise CandidateTimedOut(f"{seconds:.3g} s")
    return handler
