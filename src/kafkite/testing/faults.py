"""Fault injection for brokers: the control model (`Faults`, kafkite.control.model: errors, drops, latency, holds,
version caps and the request log, the same behind HTTP and the CLI), and disk faults for a broker running in this
process (`DiskFaults`)."""
from __future__ import annotations

import builtins
import errno
import io
import os

from ..control.model import Faults
from ..control.responses import error_response

__all__ = ["Faults", "DiskFaults", "error_response"]


class DiskFaults:
    """Make this process's writes under `directory` fail as a full disk (ENOSPC, the default) or a
    failing one (EIO) makes them fail, while active: `os.pwrite`, `os.write`, `os.fsync`,
    `os.fdatasync` on files there, `os.mkdir` there and `open()` there for writing raise OSError.
    Reads, renames and truncation still work (they need no space). For brokers in this process
    (BrokerThread, KafkiteCluster): every thread sees the faults.

        with DiskFaults(data_dir) as disk:   # the disk is full from here
            ...
            disk.heal()                      # space returns
    """

    OPS = ("write", "fsync", "open", "mkdir")

    def __init__(self, directory, error: int = errno.ENOSPC, *, ops=OPS, active: bool = True) -> None:
        """`ops`: which calls fail -- "write" (os.pwrite, os.write), "fsync" (os.fsync, os.fdatasync),
        "open" (open() for writing), "mkdir"; e.g. ops=("fsync",) with EIO: data reaches the page cache,
        the fsync fails."""
        unknown = set(ops) - set(self.OPS)
        if unknown:
            raise ValueError(f"unknown disk operations {sorted(unknown)}; known: {self.OPS}")
        self.directory = os.path.realpath(directory)
        self.error = error
        self.ops = frozenset(ops)
        self.active = active
        self.failed_calls = 0
        self._saved: list[tuple[object, str, object]] = []

    def fail(self, error: int | None = None) -> None:
        if error is not None:
            self.error = error
        self.active = True

    def heal(self) -> None:
        self.active = False

    def _mine(self, path) -> str | None:
        """The resolved path of `path` (a path or a file descriptor) when it is under the directory."""
        try:
            p = os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else os.path.realpath(os.fspath(path))
        except (OSError, TypeError):
            return None
        return p if p == self.directory or p.startswith(self.directory + os.sep) else None

    def _raise(self, what: str, path: str) -> None:
        self.failed_calls += 1
        raise OSError(self.error, f"{os.strerror(self.error)} (injected: {what})", path)

    def _by_fd(self, name: str, op: str):
        real = getattr(os, name)

        def fake(fd, *a, **kw):
            path = self.active and op in self.ops and self._mine(fd)
            if path:
                self._raise(name, path)
            return real(fd, *a, **kw)
        return fake

    def __enter__(self) -> "DiskFaults":
        real_open, real_mkdir = builtins.open, os.mkdir

        def fake_open(file, mode="r", *a, **kw):
            path = self.active and "open" in self.ops and any(c in mode for c in "wax+") and self._mine(file)
            if path:
                self._raise("open", path)
            return real_open(file, mode, *a, **kw)

        def fake_mkdir(path, *a, **kw):
            mine = self.active and "mkdir" in self.ops and self._mine(path)
            if mine and not os.path.isdir(mine):
                self._raise("mkdir", mine)
            return real_mkdir(path, *a, **kw)
        patches = [(builtins, "open", fake_open), (io, "open", fake_open), (os, "mkdir", fake_mkdir)]
        patches += [(os, name, self._by_fd(name, op)) for name, op in
                    (("pwrite", "write"), ("write", "write"), ("fsync", "fsync"), ("fdatasync", "fsync"))]
        for mod, name, fake in patches:
            self._saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, fake)
        return self

    def __exit__(self, *exc) -> None:
        while self._saved:
            mod, name, real = self._saved.pop()
            setattr(mod, name, real)
