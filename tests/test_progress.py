"""Progress lines: drawn on a terminal for steps over a second, never in a pipe, erased at the end."""

from __future__ import annotations

import io
import threading
import time

import pytest

from trnplan.core import progress
from trnplan.core.progress import Progress


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.setattr(progress, "TICK_S", 0.01)


def _wait_for(predicate, timeout=5.0):
    end = time.perf_counter() + timeout
    while not predicate() and time.perf_counter() < end:
        time.sleep(0.01)


def test_a_terminal_gets_a_line_redrawn_in_place_and_erased(fast):
    tty = Terminal()
    with Progress("planning c2c:4096@64", stream=tty) as bar:
        bar.update(0.5, "3 of 6 candidates prepared")
        _wait_for(lambda: "3 of 6" in tty.getvalue())
    out = tty.getvalue()
    assert out.startswith("\r[##########----------] planning c2c:4096@64: 3 of 6 candidates prepared (")
    last = out.rsplit("\r", 2)
    assert last[-1] == "" and set(last[-2]) == {" "}  # the line is blanked out, the cursor back at its start


def test_a_pipe_gets_nothing(fast):
    pipe = io.StringIO()
    with Progress("planning", stream=pipe) as bar:
        bar.update(0.5, "busy")
        time.sleep(0.2)
    assert pipe.getvalue() == ""


def test_a_step_under_the_delay_draws_nothing(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 10.0)
    tty = Terminal()
    with Progress("planning", stream=tty) as bar:
        bar.update(0.9, "nearly")
    assert tty.getvalue() == ""


def test_nested_blocks_update_the_outer_line(fast):
    tty = Terminal()
    with Progress("precompile: 2 plan(s)", stream=tty) as outer:
        outer.update(0.5, "1/2 ok")
        with Progress("measuring", stream=tty) as inner:
            assert inner._thread is None  # one ticker: the outermost block's
            inner.update(0.25, "2 of 8 candidates prepared")
            _wait_for(lambda: "measuring: 2 of 8" in tty.getvalue())
    assert "precompile: 2 plan(s): measuring: 2 of 8 candidates prepared" in tty.getvalue()
    assert not any(t.name == "trnplan-progress" for t in threading.enumerate())


def test_disabled_outer_block_silences_nested_ones(fast):
    tty = Terminal()
    with Progress("worker", enabled=False), Progress("planning", stream=tty) as inner:
        inner.update(0.5, "busy")
        time.sleep(0.2)
    assert tty.getvalue() == ""
