"""Which __consumer_offsets partition a group lives in: Kafka's placement, bit for bit."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)  # every group request asks: a group id's hash is computed once
def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions (Utils.abs is x & 0x7fffffff)."""
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions
