"""The request router: api key -> handler, in one hop (Kafka's KafkaApis.handle).

`SUPPORTED` is what ApiVersions advertises: exactly the (api, min..max) pairs
whose handlers below implement every version in the range, each covered by a
test. Add an API here only together with its handler and its tests.
"""
from __future__ import annotations

from typing import Awaitable, Callable

from kafka.protocol.api_key import ApiKey

from ..log import current_request
from ..security.authorizer import ANONYMOUS
from ..wire import codec
from ..wire.errors import E
from ..wire.fetch_response import FetchResponseData
from .context import RequestContext
from .kafka_apis import KafkaApis
from .handlers import acls, admin, configs, controller_apis, data, groups, metadata, scram, txn

Handler = Callable[[KafkaApis, RequestContext], Awaitable[object | None]]

# api key -> (min version, max version, handler)
ROUTES: dict[int, tuple[int, int, Handler]] = {
    ApiKey.ApiVersions: (0, 4, metadata.handle_api_versions),
    # the SASL exchange itself runs before requests reach here (security/sasl.py); here: ILLEGAL_SASL_STATE
    ApiKey.SaslHandshake: (0, 1, metadata.handle_sasl_handshake),
    ApiKey.SaslAuthenticate: (0, 2, metadata.handle_sasl_authenticate),
    ApiKey.Metadata: (0, 12, metadata.handle_metadata),
    ApiKey.DescribeCluster: (0, 1, metadata.handle_describe_cluster),
    ApiKey.DescribeTopicPartitions: (0, 0, metadata.handle_describe_topic_partitions),
    ApiKey.CreateTopics: (0, 7, admin.handle_create_topics),
    ApiKey.DeleteTopics: (0, 6, admin.handle_delete_topics),
    ApiKey.CreatePartitions: (0, 3, admin.handle_create_partitions),
    ApiKey.DescribeConfigs: (0, 4, configs.handle_describe_configs),
    ApiKey.AlterConfigs: (0, 2, configs.handle_alter_configs),
    ApiKey.IncrementalAlterConfigs: (0, 1, configs.handle_incremental_alter_configs),
    ApiKey.DescribeUserScramCredentials: (0, 0, scram.handle_describe_user_scram_credentials),
    ApiKey.AlterUserScramCredentials: (0, 0, scram.handle_alter_user_scram_credentials),
    ApiKey.CreateAcls: (0, 3, acls.handle_create_acls),
    ApiKey.DescribeAcls: (0, 3, acls.handle_describe_acls),
    ApiKey.DeleteAcls: (0, 3, acls.handle_delete_acls),
    ApiKey.Produce: (3, 11, data.handle_produce),
    ApiKey.Fetch: (4, 16, data.handle_fetch),
    ApiKey.ListOffsets: (0, 8, data.handle_list_offsets),
    ApiKey.OffsetForLeaderEpoch: (2, 4, data.handle_offset_for_leader_epoch),
    ApiKey.InitProducerId: (0, 5, data.handle_init_producer_id),
    ApiKey.DeleteRecords: (0, 2, data.handle_delete_records),
    ApiKey.FindCoordinator: (0, 5, groups.handle_find_coordinator),
    ApiKey.JoinGroup: (0, 9, groups.handle_join_group),
    ApiKey.SyncGroup: (0, 5, groups.handle_sync_group),
    ApiKey.Heartbeat: (0, 4, groups.handle_heartbeat),
    ApiKey.LeaveGroup: (0, 5, groups.handle_leave_group),
    ApiKey.OffsetCommit: (0, 9, groups.handle_offset_commit),
    ApiKey.OffsetFetch: (0, 9, groups.handle_offset_fetch),
    ApiKey.DescribeGroups: (0, 5, groups.handle_describe_groups),
    ApiKey.ListGroups: (0, 5, groups.handle_list_groups),
    ApiKey.DeleteGroups: (0, 2, groups.handle_delete_groups),
    ApiKey.OffsetDelete: (0, 0, groups.handle_offset_delete),
    # KIP-848 consumer groups (group.protocol=consumer)
    ApiKey.ConsumerGroupHeartbeat: (0, 1, groups.handle_consumer_group_heartbeat),
    ApiKey.ConsumerGroupDescribe: (0, 1, groups.handle_consumer_group_describe),
    # transactions: the client forms (AddPartitionsToTxn v4+ is the brokers' batched form, not served)
    ApiKey.AddPartitionsToTxn: (0, 3, txn.handle_add_partitions_to_txn),
    ApiKey.AddOffsetsToTxn: (0, 4, txn.handle_add_offsets_to_txn),
    ApiKey.EndTxn: (0, 4, txn.handle_end_txn),
    ApiKey.TxnOffsetCommit: (0, 4, txn.handle_txn_offset_commit),
    ApiKey.DescribeTransactions: (0, 0, txn.handle_describe_transactions),
    ApiKey.ListTransactions: (0, 1, txn.handle_list_transactions),
    ApiKey.DescribeProducers: (0, 0, txn.handle_describe_producers),
}


# Served on a ZooKeeper-mode broker's inter-broker listener only, never advertised: the versions Kafkite's
# controller sends (Kafka 3.9's ZooKeeper controller sends the same ones).
INTER_BROKER_ROUTES: dict[int, tuple[int, int, Handler]] = {
    ApiKey.LeaderAndIsr: (7, 7, controller_apis.handle_leader_and_isr),
    ApiKey.StopReplica: (4, 4, controller_apis.handle_stop_replica),
    ApiKey.UpdateMetadata: (8, 8, controller_apis.handle_update_metadata),
    # v0-2 for older brokers (v0 with request header v0, no broker epoch before v2), v3 what Kafkite and Kafka 3.9 send
    ApiKey.ControlledShutdown: (0, 3, controller_apis.handle_controlled_shutdown),
    ApiKey.AlterPartition: (0, 1, controller_apis.handle_alter_partition),
    ApiKey.WriteTxnMarkers: (1, 1, txn.handle_write_txn_markers),
    # the clients' 0-3 and the brokers' v4 (KIP-890 part 1's verification), which only brokers send
    ApiKey.AddPartitionsToTxn: (0, 4, txn.handle_add_partitions_to_txn),
}

_SUPPORTED = {k: (lo, hi) for k, (lo, hi, _) in ROUTES.items()}
_INTER_BROKER = {**_SUPPORTED, **{k: (lo, hi) for k, (lo, hi, _) in INTER_BROKER_ROUTES.items()}}
# an in-process cluster's inter-broker listener: its controller's commands are calls, a leader's AlterPartition
# comes over the network as between processes
_IN_PROCESS_INTER_BROKER = {**_SUPPORTED, **{k: _INTER_BROKER[k] for k in (ApiKey.AlterPartition,
                                                                             ApiKey.WriteTxnMarkers,
                                                                             ApiKey.AddPartitionsToTxn)}}


def supported() -> dict[int, tuple[int, int]]:
    return _SUPPORTED


class CloseConnection(Exception):
    pass


class Router:
    """Decodes a frame, calls its API's handler with the request handler object (kafka_apis.py) and the request's
    context, encodes the answer."""

    def __init__(self, broker, apis: KafkaApis):
        self.broker = broker
        self.apis = apis
        apis.api_versions = _SUPPORTED
        # the inter-broker listener serves the controller's requests only where they come over the network
        self._inter_broker = _INTER_BROKER if apis.admin.controller_requests_over_network else _IN_PROCESS_INTER_BROKER

    @staticmethod
    def supported() -> dict[int, tuple[int, int]]:
        return _SUPPORTED

    async def dispatch(self, frame: bytes, peer: str, log, *, inter_broker: bool = False, principal: str | None = None,
                       listener: str | None = None) -> tuple[bytes | list | None, list]:
        """Handle one request frame: (the response frame -- bytes, or for Fetch a list of buffers
        that concatenate to it, or a function that encodes it once the waits are over; None when
        there is no response, e.g. acks=0 --, the waits that must end before it may be sent, e.g. a
        Produce's fsync). The connection awaits those and sends
        the responses in request order. `listener`: the client listener the request came on (RequestContext's).
        """
        try:
            req = codec.decode_request(frame, self._inter_broker if inter_broker else _SUPPORTED)
        except (codec.UnknownApi, codec.UnsupportedVersion) as exc:
            if exc.api_key == ApiKey.ApiVersions:
                # KIP-511: answer an ApiVersions we can't parse with v0 + UNSUPPORTED_VERSION + our list.
                log.info("request.unsupported_api_versions", version=exc.api_version)
                return codec.encode_response(
                    metadata.api_versions_response(0, supported(), E.UNSUPPORTED_VERSION), 0, exc.correlation_id), []
            raise CloseConnection(str(exc)) from None
        except codec.MalformedRequest as exc:
            raise CloseConnection(str(exc)) from None

        route = ROUTES.get(req.api_key) or INTER_BROKER_ROUTES[req.api_key]
        # the request's logger is bound only if a handler logs (RequestContext.log); lines logged anywhere while it
        # is handled carry its api and correlation id (kafkite.log.add_request)
        # (positional: a class called with keywords builds a dict of them) broker, request, peer, log (bound on first
        # use), now_ms (read now), principal, inter_broker, conn_log, listener
        ctx = RequestContext(self.broker, req, peer, None, None, ANONYMOUS if principal is None else principal,
                             inter_broker, log, listener)
        token = current_request.set(req)
        try:
            faults = None if inter_broker else self.apis.faults  # faults are the clients' (not replication's)
            if faults is not None:  # control/model.py: version caps, holds, latency, drops, injected errors
                early = await faults.before(ctx)
                if early == "close":
                    raise CloseConnection("control plane: closed before handling (a drop, a version cap)")
                if early is not None:
                    return codec.encode_response(early[0], early[1], req.correlation_id), []
            response = await route[2](self.apis, ctx)
            if faults is not None:
                response = faults.after(ctx, response)
                if faults.should_drop(ctx):
                    raise CloseConnection("control plane: response dropped after processing")
        finally:
            current_request.reset(token)
        waits = ctx.before_send
        if waits:
            # a wait is a closure of the handler's, which may hold the context: the context lets go of it, so that
            # no reference cycle keeps the request and its answer alive after they are sent (they go with their last
            # reference, not at the next full garbage collection)
            ctx.before_send = []
        if response is None:  # e.g. Produce with acks=0
            return None, waits
        if type(response) is FetchResponseData:  # Fetch: a list of buffers, records not copied
            return response.encode_frames(req.api_version, req.correlation_id), waits
        if waits:  # encoded once the waits are over (a failed write changes the answer)
            return (lambda: codec.encode_response(response, req.api_version, req.correlation_id)), waits
        return codec.encode_response(response, req.api_version, req.correlation_id), waits
