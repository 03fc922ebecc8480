"""Kafka's CheckpointFile: a text file of a version line (0), an entry count, then one entry a
line (space-separated fields), replaced atomically. `leader-epoch-checkpoint` and
`cleaner-offset-checkpoint` are written in it, and so are the log directory's offset checkpoints
(Kafka's OffsetCheckpointFile, `topic partition offset` lines): `recovery-point-offset-checkpoint`
and `log-start-offset-checkpoint` (log_manager.py)."""
from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path


# (partition.metadata's: here, not in log_loader.py, so that a broker --in-memory need not import the file log's
# modules to name the exception log_lifecycle.py catches)
class InconsistentTopicId(Exception):
    """Kafka's InconsistentTopicIdException: the directory's partition.metadata names another topic
    id than the topic's; its records are not served under this topic."""

    def __init__(self, directory: Path, topic_id: uuid.UUID, found: uuid.UUID):
        super().__init__(f"Tried to assign topic ID {topic_id_to_string(topic_id)} to log for topic partition "
                         f"{directory.name}, but log already contained topic ID {topic_id_to_string(found)}")
        self.directory, self.topic_id, self.found = directory, topic_id, found


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def fsync_dir(directory: Path) -> None:
    """Make a rename or an unlink in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_tmp(path: Path, data: str | bytes, *, sync: bool = False) -> Path:
    """The first half of `write_atomically`: `data` written to `<path>.tmp` (fsynced with sync) -> that path."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    return tmp


def write_atomically(path: Path, data: str | bytes, *, sync: bool = False) -> None:
    """Replace `path` by `data` (a crash leaves the old or the new file, whole); with sync the new
    file and its directory entry are fsynced first, as Kafka's CheckpointFile does."""
    os.replace(write_tmp(path, data, sync=sync), path)
    if sync:
        fsync_dir(path.parent)


def read_checkpoint(path: Path) -> list[list[str]] | None:
    """The entries' fields; None when the file is missing or unreadable."""
    try:
        lines = path.read_text().split("\n")
        n = int(lines[1])
        entries = [ln.split() for ln in lines[2:2 + n]]
    except (FileNotFoundError, ValueError, IndexError):
        return None
    return entries if len(entries) == n else None


def write_checkpoint(path: Path, entries: list[tuple], *, sync: bool = False) -> None:
    write_atomically(path, "0\n%d\n%s" % (len(entries), "".join(" ".join(map(str, e)) + "\n" for e in entries)),
                     sync=sync)


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """An OffsetCheckpointFile: (topic, partition) -> offset; empty when missing or unreadable."""
    try:
        return {(t, int(p)): int(o) for t, p, o in read_checkpoint(path) or []}
    except ValueError:
        return {}


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Write an OffsetCheckpointFile durably (fsynced, then renamed over the old one)."""
    write_checkpoint(path, [(t, p, o) for (t, p), o in sorted(offsets.items())], sync=True)
