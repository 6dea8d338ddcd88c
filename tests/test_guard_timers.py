"""testing.guard's limits (spec/exactness.md EC8): the import limit lies in (0, one day], and a guarded call inside
someone else's timer gives that timer back what was left of it, not its whole time."""

import signal
import time

import pytest

from testing.guard import IMPORT_TIMEOUT, guarded, import_seconds


@pytest.mark.parametrize("text", ["0", "-1", "86401", "soon"])
def test_the_import_limit_lies_in_0_to_one_day(monkeypatch, text):
    monkeypatch.setenv(IMPORT_TIMEOUT, text)
    with pytest.raises(ValueError, match=f"{IMPORT_TIMEOUT} must be a number of seconds in"):
        import_seconds()


def test_the_import_limit_defaults_and_reads_the_environment(monkeypatch):
    monkeypatch.delenv(IMPORT_TIMEOUT, raising=False)
    assert import_seconds() == 120.0
    monkeypatch.setenv(IMPORT_TIMEOUT, "0.5")
    assert import_seconds() == 0.5


def test_an_outer_timer_gets_back_what_was_left():
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with guarded(5.0):
            time.sleep(0.3)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 20.0 < left < 29.75  # 30 s less the (at least) 0.3 s spent inside, not 30 s again
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
