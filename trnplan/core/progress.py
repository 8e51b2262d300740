"""Progress on a terminal for steps that take over a second (planning, measuring, compiling, precompiling).

A :class:`Progress` block draws one line on standard error, rewritten in place (``\\r``), only when
standard error is a terminal and only once the block has run for :data:`DELAY_S`; in a pipe or a
log it writes nothing, and a block that ends sooner never draws. A ticker thread redraws the
elapsed time while the block runs (an AOT compile or an FFTW plan gives no callback); blocks
nested in a running one (a measurement inside the planning of a problem) only update its note.
The line is erased when the outermost block ends, so output printed after it is not interleaved.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time

#: seconds a step runs before its line appears
DELAY_S = 1.0
#: seconds between redraws
TICK_S = 0.25
_ACTIVE: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("trnplan_progress", default=None)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """A progress line for a block: ``with Progress("planning c2c (4096,) × 64") as p: ... p.update(...)``.

    Parameters
    ----------
    label : str
        What the step does.
    stream : file, optional
        Where to draw (default standard error); nothing is drawn unless it is a terminal.
    enabled : bool, optional
        Force drawing on (True) or off (False); default: whether ``stream`` is a terminal.
    """

    def __init__(self, label: str, *, stream=None, enabled: bool | None = None):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.fraction: float | None = None
        self.note = ""
        self._parent: Progress | None = None
        self._token = None
        self._start = 0.0
        self._drawn = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:  # noqa: PYI034 - typing.Self is Python 3.11+
        self._parent = _ACTIVE.get()
        self._start = time.perf_counter()
        if self._parent is None:
            self._token = _ACTIVE.set(self)
            if self.enabled:
                self._thread = threading.Thread(target=self._tick, name="trnplan-progress", daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._parent is not None:
            self._parent.update(None, "")
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        _ACTIVE.reset(self._token)
        with self._lock:
            if self._drawn:  # erase the line
                self.stream.write("\r" + " " * self._drawn + "\r")
                self.stream.flush()
                self._drawn = 0

    def update(self, fraction: float | None = None, note: str = "") -> None:
        """Set the fraction done (0 to 1, or None: unknown) and a short note; a nested block's
        update goes to the outermost block's line, after its label."""
        if self._parent is not None:
            self._parent.update(fraction, f"{self.label}: {note}" if note else "")
            return
        self.fraction, self.note = fraction, note

    def _tick(self) -> None:
        if self._stop.wait(DELAY_S):
            return
        while True:
            self._draw()
            if self._stop.wait(TICK_S):
                return

    def _draw(self) -> None:
        elapsed = time.perf_counter() - self._start
        if self.fraction is not None:
            done = int(20 * min(max(self.fraction, 0.0), 1.0))
            bar = "[" + "#" * done + "-" * (20 - done) + "] "
        else:
            bar = ""
        line = f"{bar}{self.label}" + (f": {self.note}" if self.note else "") + f" ({elapsed:.1f} s)"
        width = _columns() - 1
        line = line if len(line) <= width else line[: width - 1] + "…"
        with self._lock:
            if self._stop.is_set():
                return
            self.stream.write("\r" + line.ljust(self._drawn))
            self.stream.flush()
            self._drawn = max(self._drawn, len(line))


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


__all__ = ["DELAY_S", "Progress"]
