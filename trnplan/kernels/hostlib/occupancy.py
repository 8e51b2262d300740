"""Whether the machine's cores are free for more threads now: the kernel's count of runnable
threads, less this process's own.

An adaptive library leaf (:class:`~trnplan.kernels.hostlib.threads.AdaptiveThreads`) judged a
two-thread call by its time alone; a call's time cannot tell a process holding the other core
from a quiet machine's hiccup (another thread pool waking, a page-fault burst), and after a
back-off only a probe at its end, at up to 1 s once doubled, could find that the load had gone.
The kernel knows: ``/proc/loadavg``'s fourth field is
``running/total``, the number of runnable threads on the machine *now* (``nr_running``, not an
average; proc(5)). This process's own runnable threads (``R`` in ``/proc/self/task/*/stat``:
this thread, and OpenMP workers spinning after a parallel region — GNU OpenMP's spin here
lasted 10-40 ms) are taken off, leaving the threads of others.

Measured on this 2-vCPU machine (torch 2.13.0, a 512×1024 c2c at two threads, 2026-11-27):
others counted 0 after 97 % of quiet calls (1 after 3 %) and 0 when idle; with one spinning
process, 1 after 99 % of calls and 1 when idle. A check (:meth:`Occupancy.others`) costs
~20-40 µs (a read per thread of this process), so the leaf asks only at its decisions — a slow
call, the end of a back-off — never per call.

Two readers: the adaptive leaf, at a slow call and every 10 ms of a back-off
(:meth:`Occupancy.room`), and measured planning, after each round of its timing (:func:`trnplan.planner.measure.watch_rounds`:
a record measured with a core held is measured again by the next process that reuses it).

Where the count does not describe the cores this process runs on, :func:`occupancy` gives None
and both keep their time-only rules: not Linux, ``/proc`` unreadable, a CPU affinity narrower
than the machine (others may run on cores this process cannot use), a cgroup CPU quota (the
process can be throttled while cores stand idle), or ``TRNPLAN_RUN_QUEUE=0``. Kernel threads
count as others too (a kworker, khugepaged after large allocations): a moment's one can make a
hiccup wait for the next call's verdict or keep a back-off from ending early, no more (a big stall
with another thread runnable is judged by the time-only rules, not taken as a stall at once: such
a thread stayed runnable through three readings after 24 of 124 hiccups on a quiet machine).
"""

from __future__ import annotations

import os

from trnplan.core import config

#: cgroup CPU quota files (v2, then v1): a quota means throttling the run queue does not show
_CPU_MAX = ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")


class Occupancy:
    """The machine's runnable threads that are not this process's (Linux ``/proc``).

    Parameters
    ----------
    cpus : int
        The machine's online CPUs (``os.cpu_count()``).
    loadavg : str
        The kernel's load file (tests pass a fake one).
    tasks : str
        This process's thread directory.
    """

    def __init__(self, cpus: int, loadavg: str = "/proc/loadavg", tasks: str = "/proc/self/task"):
        self.cpus, self.tasks = cpus, tasks
        self._fd = os.open(loadavg, os.O_RDONLY)  # the machine's, so valid in a forked child too

    def others(self) -> int:
        """Runnable threads on the machine now that are not this process's (≥ 0).

        Raises
        ------
        OSError
            Where ``/proc`` cannot be read.
        """
        before = self._running()
        own = self.own()
        # the fewer of two readings around the scan: a kernel worker's or a timer's thread runnable
        # for a moment is no process holding a core (single readings here counted one such in
        # 1-12 % of idle samples), and a worker of ours that stops spinning during the scan leaves
        # the second reading
        return max(0, min(before, self._running()) - own)

    def _running(self) -> int:
        # pread at offset 0 re-reads the file (seq_file): no lock, no seek
        return int(os.pread(self._fd, 128, 0).split()[3].split(b"/")[0])

    def own(self) -> int:
        """This process's threads in state ``R`` (running or runnable), this one included."""
        n = 0
        for tid in os.listdir(self.tasks):
            try:
                with open(f"{self.tasks}/{tid}/stat", "rb", buffering=0) as f:
                    stat = f.read(512)
            except OSError:  # the thread ended
                continue
            # "pid (comm) S …": comm may hold spaces and parentheses; the state follows the last ")"
            end = stat.rfind(b")")
            n += stat[end + 2: end + 3] == b"R"
        return n

    def room(self, threads: int) -> bool:
        """Whether ``threads`` threads of a call would each find a core: the CPUs less the other
        processes' runnable threads (this process's own, such as OpenMP workers spinning after a
        parallel region, are not counted: see :func:`~trnplan.kernels.hostlib.threads.adaptive`)."""
        return self.cpus - self.others() >= threads


def _quota() -> bool:
    """Whether a cgroup CPU quota applies (v2 ``cpu.max`` not ``max``; v1 quota not -1)."""
    for path in _CPU_MAX:
        try:
            with open(path, encoding="ascii") as f:
                first = f.read().split()[0]
        except (OSError, IndexError):
            continue
        return first not in ("max", "-1")
    return False


_OCCUPANCY: list = []  # [Occupancy or None] once probed


def occupancy() -> Occupancy | None:
    """This machine's :class:`Occupancy`, or None where its count would not describe this
    process's cores (see the module's notes) or ``TRNPLAN_RUN_QUEUE=0``. Probed once per process."""
    if not config.run_queue():
        return None
    if not _OCCUPANCY:
        _OCCUPANCY.append(_probe())
    return _OCCUPANCY[0]


def _probe() -> Occupancy | None:
    cpus = os.cpu_count() or 0
    try:
        if cpus < 2 or len(os.sched_getaffinity(0)) < cpus or _quota():
            return None
        occ = Occupancy(cpus)
        occ.others()
    except (OSError, AttributeError, ValueError, IndexError):  # no /proc, no sched_getaffinity
        return None
    return occ
