"""A broker process's CPU time, found by its listening port (Linux /proc; no psutil needed).

    from proc_cpu import BrokerCpu
    cpu = BrokerCpu("127.0.0.1:9092")   # the process listening on that port
    s0 = cpu.seconds(); ...; used = cpu.seconds() - s0   # user + system CPU of all its threads

CPU per request holds still on a noisy shared machine where rates swing 2-3x: the benchmarks print
it next to their rates, for every broker of the same run (Kafkite, Tansu, the null broker).
"""
from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def listener_pid(port: int) -> int:
    """The pid of the process holding the TCP socket listening on port (any address)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            for fd in (d / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(d.name)
        except OSError:
            continue
    raise LookupError(f"no process listens on port {port}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (every thread), from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": fields 14 and 15 of proc(5)
    return (int(fields[11]) + int(fields[12])) / _TICKS


class BrokerCpu:
    def __init__(self, bootstrap: str):
        self.pid = listener_pid(int(bootstrap.rsplit(":", 1)[1]))

    def seconds(self) -> float:
        return cpu_seconds(self.pid)
