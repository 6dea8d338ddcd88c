"""The supervised child's side of ``veridec check`` (spec EC8): its line to the supervisor (``child_status``: when
the candidate's code starts and ends, the exit code its verdict gave), the streams its verdict is written to
(``saved_streams``), the lifeline that ends it when the supervisor is gone, and its end (``end_check``).
Imports nothing of the harness: the supervisor (``supervise``) and the command (``cli``, ``check_command``) both
import it."""

from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import contextmanager

STATUS_FD = "VERIDEC_CHECK_STATUS_FD"  # the child's end of the pipe, set by the supervisor
REAL_EXIT = os._exit  # taken at import, before any candidate is imported (one may replace os._exit)


class Status:
    """The child's messages to its supervisor (``arm``, ``disarm``, ``exit``); a no-op without one."""

    def __init__(self, fd: int | None):
        self.fd = fd

    @classmethod
    def from_environment(cls) -> "Status":
        """The pipe to the supervisor, and a watch on its lifeline: the child ends when the supervisor does."""
        text = os.environ.pop(STATUS_FD, None)  # not passed on to processes the candidate starts
        if text is None:
            return cls(None)
        fd, lifeline = (int(part) for part in text.split(","))
        for each in (fd, lifeline):
            os.set_inheritable(each, False)
        threading.Thread(target=_end_with_supervisor, args=(lifeline,), daemon=True).start()
        return cls(fd)

    def send(self, *words) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (" ".join(str(w) for w in words) + "\n").encode())
        except OSError:  # the candidate closed it: the supervisor will say the child ended without a verdict
            self.fd = None

    def watch(self, seconds: float | None, what: str, code: int) -> None:
        """A ``guard`` watcher: the candidate's code starts (``seconds`` its limit) or ends (None)."""
        if seconds is None:
            self.send("disarm")
        else:
            self.send("arm", f"{seconds:.6g}", code, json.dumps(what))


@contextmanager
def saved_streams():
    """The verdict reaches the real stdout and stderr whatever the candidate did to them: file descriptors 1 and
    2 copied at the start and put back at the end, ``sys.stdout`` / ``sys.stderr`` reopened there if closed."""
    saved = {}
    for fd in (1, 2):
        try:
            saved[fd] = os.dup(fd)
        except OSError:  # closed before the check began: nothing to keep
            pass
    streams = sys.stdout, sys.stderr
    try:
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        sys.stdout, sys.stderr = (_open(stream, fd) for stream, fd in zip(streams, (1, 2)))


def _open(stream, fd: int):
    """``stream`` if it is still open, else a new text stream on ``fd``."""
    if stream is not None and not stream.closed:
        return stream
    return open(fd, "w", buffering=1, closefd=False)


_CHILD: Status | None = None


def _end_with_supervisor(lifeline: int) -> None:
    """Wait on the lifeline (the supervisor holds its other end): at its end, the supervisor is gone (killed,
    or stopped by a signal), and the check ends too, never left running as an orphan."""
    while os.read(lifeline, 1):
        pass
    REAL_EXIT(1)


def child_status() -> Status:
    """This process's line to its supervisor (read from the environment once)."""
    global _CHILD
    if _CHILD is None:
        _CHILD = Status.from_environment()
    return _CHILD


def end_check(code: int) -> None:
    """Tell the supervisor the verdict's exit code, then end the process with it (``end_process``)."""
    child_status().send("exit", code)
    end_process(code)


def end_process(code: int) -> None:
    """Flush stdout and stderr, then end the process with ``code`` at once (``os._exit``: no atexit handlers, no
    waiting for threads)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken: nothing more can be said there
            pass
    REAL_EXIT(code)
