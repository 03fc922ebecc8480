"""Snapshots of a coordinator shard's in-memory state, one per written offset (Kafka's SnapshotRegistry and
timeline collections, in the role SnapshottableCoordinator gives them), sans-IO.

Kafka keeps each shard's state in timeline maps: the runtime takes a snapshot at every offset it writes, a
write that fails reverts the state to the snapshot at the offset it was to be written at, and the snapshots
below the committed offset (the high watermark) are dropped. Here the state stays in plain dicts and objects;
the replay changes them through a `SnapshotRegistry`, which keeps an undo log while a snapshot is open:

    reg.snapshot(10)                       # the offset the next write starts at (the last written offset)
    reg.set_item(group.offsets, tp, e)     # every change of the replay: the old value is logged
    reg.revert_to(10)                      # the write failed: undo back to offset 10, newest change first
    reg.delete_up_to(11)                   # or offset 10 is committed: the snapshots below 11 are dropped

With no snapshot open (a partition being loaded, or every write committed) nothing is logged: a change costs
one check. An object is restored in place (the dict or the group is the same object), so references held
elsewhere stay valid.
"""
from __future__ import annotations

from typing import Any

_MISSING = object()


class SnapshotRegistry:
    def __init__(self) -> None:
        self._undo: list[tuple] = []  # (container, key, old value or _MISSING, is an attribute)
        self._base = 0  # the absolute position of _undo[0] (entries below every snapshot are dropped)
        self._snapshots: list[tuple[int, int]] = []  # (offset, absolute position in the undo log), ascending

    # -- snapshots ------------------------------------------------------------------------------------
    @property
    def tracking(self) -> bool:
        """Whether changes are logged (a snapshot is open)."""
        return bool(self._snapshots)

    def offsets(self) -> list[int]:
        return [o for o, _ in self._snapshots]

    def snapshot(self, offset: int) -> None:
        """Open a snapshot at `offset` (idempotent for the newest one). Offsets only grow."""
        if self._snapshots:
            last = self._snapshots[-1][0]
            if offset == last:
                return
            if offset < last:
                raise ValueError(f"snapshot at {offset} below the newest one at {last}")
        self._snapshots.append((offset, self._base + len(self._undo)))

    def revert_to(self, offset: int) -> bool:
        """Undo every change made since the snapshot at `offset`, which stays open; newer snapshots are dropped.
        False (nothing undone) when there is no snapshot at `offset`: it was committed, or never taken."""
        for i, (o, pos) in enumerate(self._snapshots):
            if o == offset:
                break
        else:
            return False
        keep = pos - self._base
        for container, key, old, attr in reversed(self._undo[keep:]):
            if attr:
                setattr(container, key, old)
            elif old is _MISSING:
                container.pop(key, None)
            else:
                container[key] = old
        del self._undo[keep:]
        del self._snapshots[i + 1:]
        return True

    def delete_up_to(self, offset: int) -> None:
        """The records below `offset` are committed: the snapshots below it are dropped, and the changes
        older than the oldest one left."""
        snapshots = self._snapshots
        if not snapshots or snapshots[-1][0] < offset:  # every one (a write committed with none open after it)
            snapshots.clear()
            self._base += len(self._undo)
            self._undo.clear()
            return
        while snapshots[0][0] < offset:  # (the newest one stays)
            snapshots.pop(0)
        drop = snapshots[0][1] - self._base
        if drop > 0:
            del self._undo[:drop]
            self._base += drop

    def clear(self) -> None:
        self.delete_up_to(1 << 63)

    # -- changes --------------------------------------------------------------------------------------
    def set_item(self, d: dict, key: Any, value: Any) -> None:
        if self._snapshots:
            self._undo.append((d, key, d.get(key, _MISSING), False))
        d[key] = value

    def pop_item(self, d: dict, key: Any, default: Any = None) -> Any:
        if key not in d:
            return default
        if self._snapshots:
            self._undo.append((d, key, d[key], False))
        return d.pop(key)

    def setdefault(self, d: dict, key: Any, factory) -> Any:
        """d[key], made with `factory()` (and logged) when missing."""
        if key in d:
            return d[key]
        value = factory()
        self.set_item(d, key, value)
        return value

    def set_attr(self, obj: Any, name: str, value: Any) -> None:
        if self._snapshots:
            self._undo.append((obj, name, getattr(obj, name), True))
        setattr(obj, name, value)

    def save_vars(self, obj: Any) -> None:
        """Before changing many fields of `obj` at once (a classic group rebuilt from its record): each field is
        logged, and each dict or set among them is replaced by a copy that takes the changes, so that a revert
        puts the original back untouched."""
        if not self._snapshots:
            return
        for name, value in list(vars(obj).items()):
            self._undo.append((obj, name, value, True))
            if isinstance(value, (dict, set)):
                setattr(obj, name, value.copy())
