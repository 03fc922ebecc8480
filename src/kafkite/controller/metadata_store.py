"""Where cluster metadata is kept (controller/metadata.py's ClusterMetadata persists through these): a JSON snapshot
next to Kafka's `meta.properties` in the data dir (`FileMetadataStore`) or nothing in memory
(`MemoryMetadataStore`), the producer id block file, and the deferred write's shapes (`DeferredWrites`,
`PendingWrite`)."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..storage.checkpoint_file import write_atomically

class MetadataStore(Protocol):
    def load(self) -> dict | None: ...
    def save(self, snapshot: dict) -> str | None: ...  # -> the snapshot's JSON text, when it made one
    def load_producer_id_block(self) -> int: ...
    def save_producer_id_block(self, first: int, last: int, broker: int) -> None: ...


class MemoryMetadataStore:
    """The snapshot kept as its JSON text (a third of the memory of a copy of its dicts: ~150 bytes a partition, not
    ~450), decoded into fresh objects by each `load` (nothing shared with the caller's, nor between two loads)."""

    def __init__(self) -> None:
        self._json: str | None = None
        self.producer_id_block_end = 0

    @property
    def snapshot(self) -> dict | None:
        return self.load()

    def load(self) -> dict | None:
        return None if self._json is None else json.loads(self._json)

    def save(self, snapshot: dict) -> str:
        self._json = json.dumps(snapshot, separators=(",", ":"))
        return self._json

    def load_producer_id_block(self) -> int:
        """The first producer id after the last block handed out (0 when none was)."""
        return self.producer_id_block_end

    def save_producer_id_block(self, first: int, last: int, broker: int) -> None:
        self.producer_id_block_end = last + 1


class FileMetadataStore:
    """A JSON snapshot next to Kafka's `meta.properties` in the data dir, replaced atomically."""

    FILE = "kafkite-metadata.json"
    PRODUCER_ID_BLOCK_FILE = "latest_producer_id_block"

    def __init__(self, data_dir: Path):
        self.dir = Path(data_dir)
        self.path = self.dir / self.FILE

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        return json.loads(self.path.read_text())

    def save(self, snapshot: dict) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(snapshot, indent=1, sort_keys=True)
        write_atomically(self.path, text, sync=True)
        meta = self.dir / "meta.properties"
        if not meta.exists():
            meta.write_text(
                "#\n#Written by Kafkite\nversion=1\n"
                f"cluster.id={snapshot['cluster_id']}\nnode.id={snapshot.get('node_id', 1)}\n")
        return text

    def load_producer_id_block(self) -> int:
        """The first producer id after the last block handed out, from `latest_producer_id_block`
        (Kafka's ZooKeeper JSON: block_start and block_end inclusive, as strings); 0 when missing."""
        try:
            block = json.loads((self.dir / self.PRODUCER_ID_BLOCK_FILE).read_text())
            return int(block["block_end"]) + 1
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return 0

    def save_producer_id_block(self, first: int, last: int, broker: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.dir / self.PRODUCER_ID_BLOCK_FILE, json.dumps(
            {"version": 1, "broker": broker, "block_start": str(first), "block_end": str(last)}), sync=True)


class DeferredWrites(Protocol):
    """Who writes the snapshot when a `ClusterMetadata` defers its writes (server/metadata_writer.py: a worker
    thread, off the event loop)."""

    def changed(self) -> None:
        """A change waits to be written (soon, elsewhere; its caller waits for it to be durable)."""

    def write_now(self) -> None:
        """Write every change made so far before returning (OSError when it cannot)."""

    def write_soon(self) -> None:
        """A controller's change (an election, an ISR) waits to be written; once it is, the brokers are told (they
        are told only what is on disk: `published_snapshot`)."""


@dataclass(frozen=True)
class PendingWrite:
    """What one write puts on disk: the snapshot of every change up to `version`, and the producer id block
    handed out since the last write (its file is written first)."""
    version: int
    snapshot: dict
    producer_id_block: tuple[int, int, int] | None = None  # (first, last, broker)


def new_cluster_id() -> str:
    """Kafka's cluster ids are 16 random bytes, URL-safe base64 without padding."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
