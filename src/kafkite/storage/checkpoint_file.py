"""Kafka's CheckpointFile: a text file of a version line (0), an entry count, then one entry a
line (space-separated fields), replaced atomically. `leader-epoch-checkpoint` and
`cleaner-offset-checkpoint` are written in it."""
from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_checkpoint(path: Path) -> list[list[str]] | None:
    """The entries' fields; None when the file is missing or unreadable."""
    try:
        lines = path.read_text().split("\n")
        n = int(lines[1])
        entries = [ln.split() for ln in lines[2:2 + n]]
    except (FileNotFoundError, ValueError, IndexError):
        return None
    return entries if len(entries) == n else None


def write_checkpoint(path: Path, entries: list[tuple]) -> None:
    write_atomically(path, "0\n%d\n%s" % (len(entries), "".join(" ".join(map(str, e)) + "\n" for e in entries)))
