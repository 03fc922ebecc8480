"""KIP-951 (Kafka 3.7+): a Produce (v10+) partition answered NOT_LEADER_OR_FOLLOWER, and a Fetch (v16+) partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, carry the partition's current leader and leader epoch
(CurrentLeader), and the response the leaders' endpoints on the request's listener (NodeEndpoints), so a client
moves to the new leader without waiting for a Metadata refresh. As Kafka's KafkaApis.getCurrentLeader: the leader
and epoch this broker knows (-1, -1 for a partition it does not know: left out), the endpoint only of a live
leader with that listener. Errors injected by the control plane (control/responses.py) carry none, as the
librdkafka mock's injected errors.

Also the preferred read replica a test sets (`follow`, control/model.py's set_follower: librdkafka's mock
partition_set_follower): the leader sends consumers to that replica."""
from __future__ import annotations

from ...wire.errors import E
from .metadata import broker_entries, node_endpoint

PRODUCE_SINCE, FETCH_SINCE = 10, 16
_FETCH_ERRORS = (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH)


def _leader(apis, topic: str | None, partition: int, nodes: dict, listener: str | None) -> tuple[int, int]:
    """(leader id, leader epoch), the leader's (host, port, rack) added to `nodes` when it is live here."""
    p = None if topic is None else apis.metadata_cache.partition(topic, partition)
    if p is None:
        return -1, -1
    if p.leader >= 0 and p.leader not in nodes:
        info = next((x for x in broker_entries(apis) if x.node_id == p.leader), None)
        ep = None if info is None else node_endpoint(info, listener)
        if ep is not None:
            nodes[p.leader] = (ep[0], ep[1], info.rack)
    return p.leader, p.leader_epoch


def fill_produce(apis, version: int, response, listener: str | None) -> None:
    """A ProduceResponse (kafka-python's classes) before it is sent."""
    if version < PRODUCE_SINCE or response is None:
        return
    nodes: dict = {}
    for t in response.responses:
        for p in t.partition_responses:
            if p.error_code == E.NOT_LEADER_OR_FOLLOWER:
                leader, epoch = _leader(apis, t.name, p.index, nodes, listener)
                if (leader, epoch) != (-1, -1):
                    p.current_leader = type(p).LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
    if nodes:
        response.node_endpoints = [type(response).NodeEndpoint(node_id=n, host=h, port=port, rack=rack)
                                   for n, (h, port, rack) in sorted(nodes.items())]


def fill_fetch(apis, version: int, response, listener: str | None) -> None:
    """A wire.fetch_response.FetchResponseData before it is encoded."""
    if version < FETCH_SINCE:
        return
    nodes: dict = {}
    for t in response.responses:
        for p in t.partitions:
            if p.error_code in _FETCH_ERRORS:
                p.current_leader = _leader(apis, t.topic, p.partition_index, nodes, listener)
    response.node_endpoints = [(n, h, port, rack) for n, (h, port, rack) in sorted(nodes.items())]


def follow(apis, version: int, replica_id: int, topic: str, p) -> None:
    """A consumer's Fetch (v11+) of a partition this broker leads, answered without error: when a test set the
    partition's follower (another broker), the answer names it the preferred read replica and carries no records,
    as Kafka's leader answers when its replica selector picks another replica."""
    faults = apis.faults
    if faults is None or version < 11 or replica_id >= 0 or p.error_code:
        return
    follower = faults.preferred_follower(topic, p.partition_index)
    if follower is None or follower == apis.node_id:
        return
    info = apis.metadata_cache.partition(topic, p.partition_index)
    if info is not None and info.leader == apis.node_id:
        p.preferred_read_replica, p.records = follower, ()
