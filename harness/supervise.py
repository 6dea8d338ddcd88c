"""`veridec check` as a command: a supervising process runs the check in a child process and always ends with a
verdict and a nonzero code when there is none, whatever the candidate does to the child (spec EC8).

The child tells the supervisor, on a pipe, when the candidate's code starts (with its time limit and what it is
running: the import, a factory, a case) and ends, and the exit code its verdict gave. Past a limit plus a grace
period (the candidate swallowed the in-process timeout, replaced its alarm handler, or stalled in native code)
the supervisor stops the child and says so; a child that ends without telling its code (it killed itself, or
crashed in native code) is reported as such. The supervisor's own streams are untouched by the candidate.

This module is the console script's entry point (``main``) and the one place that decides whether a run is
supervised (``supervised``); the child's side of the pipe is ``child``. It imports ``cli`` only to run an
unsupervised command, and nothing of the harness imports it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from .child import STATUS_FD

POLL_SECONDS = 0.5  # how often the supervisor looks at a child that may have ended
STOPPING = (signal.SIGTERM, signal.SIGHUP)  # signals that stop the supervisor, and with it the check


class Stopped(Exception):
    """The supervisor received one of ``STOPPING``."""


def grace_seconds(limit: float) -> float:
    """How long past the candidate's own limit the supervisor waits before it stops the child: the in-process
    timeout gets the first chance (a forward in native code returns before it fires)."""
    return max(3.0, 0.25 * limit)


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


def supervised(argv: list[str]) -> bool:
    """Whether the command line ``argv`` runs under a supervisor (the one place that decides): the check command,
    not already the supervised child."""
    return argv[:1] == ["check"] and STATUS_FD not in os.environ


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
    heavy (``supervised`` decides); every other command runs ``cli.main`` in this process."""
    if supervised(sys.argv[1:]):
        return run_supervised(sys.argv[1:])
    from .cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
