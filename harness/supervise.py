"""`veridec check` as a command: a supervising process runs the check in a child process and always ends with a
verdict and a nonzero code when there is none, whatever the candidate does to the child (spec EC8).

The child tells the supervisor, on a pipe, when the candidate's code starts (with its time limit and what it is
running: the import, a factory, a case) and ends, and the exit code its verdict gave. Past a limit plus a grace
period (the candidate swallowed the in-process timeout, replaced its alarm handler, or stalled in native code)
the supervisor stops the child and says so; a child that ends without telling its code (it killed itself, or
crashed in native code) is reported as such. The supervisor's own streams are untouched by the candidate.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

STATUS_FD = "VERIDEC_CHECK_STATUS_FD"  # the child's end of the pipe, set by the supervisor
POLL_SECONDS = 0.5  # how often the supervisor looks at a child that may have ended
REAL_EXIT = os._exit  # taken at import, before any candidate may replace it
STOPPING = (signal.SIGTERM, signal.SIGHUP)  # signals that stop the supervisor, and with it the check


class Stopped(Exception):
    """The supervisor received one of ``STOPPING``."""


def grace_seconds(limit: float) -> float:
    """How long past the candidate's own limit the supervisor waits before it stops the child: the in-process
    timeout gets the first chance (a forward in native code returns before it fires)."""
    return max(3.0, 0.25 * limit)


# ------------------------------------------------------------------------------------------- the child's side
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


def wanted(argv: list[str]) -> bool:
    """Run ``argv`` under a supervisor: the check command, not already the supervised child."""
    return argv[:1] == ["check"] and STATUS_FD not in os.environ


# ------------------------------------------------------------------------------------------ the supervisor
class Armed:
    """What the child last said: the deadline, what the candidate runs, the exit code the verdict gave."""

    def __init__(self):
        self.deadline = self.limit = None
        self.what, self.code, self.exit_code, self.buffer = "", 1, None, b""

    def take(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "arm":
                limit, code, what = rest.split(" ", 2)
                self.limit, self.code, self.what = float(limit), int(code), json.loads(what)
                self.deadline = time.monotonic() + self.limit + grace_seconds(self.limit)
            elif word == "disarm":
                self.deadline = None
            elif word == "exit":
                self.exit_code = int(rest)


def run_supervised(argv: list[str]) -> int:
    """Run ``veridec`` with ``argv`` in a child process and return the exit code its verdict gave; past a
    candidate's limit, or when the child ends without a verdict, one line on stderr and exit 1 (2 where the
    candidate could not be loaded)."""
    read, write = os.pipe()
    lifeline, held = os.pipe()  # the child reads the first; the supervisor holds the second until it ends
    child = subprocess.Popen([sys.executable, "-m", "veridec.harness.cli", *argv], pass_fds=(write, lifeline),
                             env={**os.environ, STATUS_FD: f"{write},{lifeline}"}, start_new_session=True)
    for fd in (write, lifeline):
        os.close(fd)
    previous = {signum: signal.signal(signum, _raise_stopped) for signum in STOPPING}
    try:
        return _follow(child, read, Armed())
    except (KeyboardInterrupt, Stopped) as why:
        _stop(child)
        signum = signal.SIGINT if isinstance(why, KeyboardInterrupt) else why.args[0]
        print(f"veridec: stopped by {signal.Signals(signum).name}: the check ended without a verdict",
              file=sys.stderr)
        return 128 + signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.close(read)
        os.close(held)


def _raise_stopped(signum, frame):
    raise Stopped(signum)


def _follow(child: subprocess.Popen, read: int, armed: Armed) -> int:
    """Read the child's messages until it ends (its code) or a candidate overruns its deadline."""
    listening = True
    while True:
        wait = POLL_SECONDS if armed.deadline is None else min(POLL_SECONDS, armed.deadline - time.monotonic())
        if listening and select.select([read], [], [], max(wait, 0.0))[0]:
            data = os.read(read, 65536)
            if data:
                armed.take(data)
                continue
            listening = False  # every write end closed: the child ended, or the candidate closed its end
        elif not listening:
            time.sleep(max(wait, 0.0))
        if child.poll() is not None:
            _drain(read, armed)
            return _ended(child, armed)
        if armed.deadline is not None and time.monotonic() >= armed.deadline:
            _stop(child)
            waited = armed.limit + grace_seconds(armed.limit)
            verdict = "error: the candidate cannot be loaded" if armed.code == 2 else "FAIL"
            print(f"veridec: {verdict}: it did not give control back {waited:.3g} s into {armed.what} (its limit "
                  f"{armed.limit:.3g} s; it swallowed the timeout, replaced the alarm's handler or stalled in native "
                  "code): the check was stopped", file=sys.stderr)
            return armed.code


def _drain(read: int, armed: Armed) -> None:
    """What the child wrote before it ended and the supervisor has not read yet."""
    while select.select([read], [], [], 0)[0]:
        data = os.read(read, 65536)
        if not data:
            return
        armed.take(data)


def _ended(child: subprocess.Popen, armed: Armed) -> int:
    """The code of a child that ended: the verdict's; its own where it exited before any candidate code ran
    (argparse's usage errors, exit 2); else 1 with a line saying how it ended without a verdict."""
    if armed.exit_code is not None:
        return armed.exit_code
    code = child.returncode
    if code >= 0 and armed.deadline is None and armed.limit is None:
        return code
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    during = f" while the candidate was running {armed.what}" if armed.deadline is not None else ""
    print(f"veridec: FAIL: the check's process ended without a verdict ({how}){during}: a candidate may not end "
          "the check", file=sys.stderr)
    return armed.code if armed.deadline is not None else 1


def _stop(child: subprocess.Popen) -> None:
    """Kill the child and whatever it started in its session."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()
    child.wait()


def main() -> int:
    """The ``veridec`` command's entry point: ``veridec check`` supervised from a process that imports nothing
    heavy; every other command (and the supervised child) runs ``cli.main`` in this process."""
    if wanted(sys.argv[1:]):
        return run_supervised(sys.argv[1:])
    from .cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
