"""The request handler (Kafka's KafkaApis): the managers a request needs, set once when the broker is built.

The router (router.py) decodes a frame, finds the API's handler in its table and calls it with this object and the
request's context: `handler(apis, ctx)`. A handler takes what it needs from these fields -- the replica manager for
the partitions' logs, the metadata cache, the group and transaction coordinators, the admin manager for the
cluster's metadata (in-process or ZooKeeper: the difference is behind it, admin_manager.py), the authorizer -- and
never from the broker object. Handler modules stay modules (server/handlers/*.py), one per family of APIs.

Authorization has one call site (Kafka's AuthHelper): `authorized` and its companions below, on the request's
principal and host; no authorizer configured, or the inter-broker listener, allows everything.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..controller.metadata import INTERNAL_TOPICS, MetadataError, validate_topic_name
from ..security.authorizer import CLUSTER_NAME, SUPPORTED_OPS, Op, ResourceType
from ..wire.errors import E

if TYPE_CHECKING:
    from .broker import Broker
    from .context import RequestContext


class KafkaApis:
    __slots__ = ("broker", "node_id", "config", "replica_manager", "metadata_cache", "group_coordinator",
                 "txn_coordinator", "admin", "authorizer", "fetch_manager", "faults", "brokers",
                 "topic_configs_lock", "api_versions")

    def __init__(self, broker: "Broker"):
        # this broker's identity as handlers need it: its broker epoch (a ZooKeeper registration's, set when it
        # registers) and the listener a Metadata answer names; nothing else of it is read through here
        self.broker = broker
        self.node_id: int = broker.node_id
        self.config = broker.config
        self.replica_manager = broker.replicas  # the partitions this broker hosts (replica_manager.py)
        self.metadata_cache = broker.cache  # this broker's view of the cluster, fed by the controller
        self.group_coordinator = broker.groups  # group_coordinator_service.py
        self.txn_coordinator = broker.transactions  # transaction_coordinator_service.py
        self.admin = broker.admin  # admin requests against the cluster's metadata (admin_manager.py)
        self.authorizer = broker.state.authorizer  # None: no authorizer configured, everything allowed
        self.fetch_manager = broker.fetch_sessions  # KIP-227 fetch sessions (fetch_session.py)
        self.faults = None  # the control plane (control/model.py) when it is on; Broker.faults sets it
        # every broker of the process by id (an in-process cluster's; one in a process of a ZooKeeper cluster):
        # Metadata marks the replicas on an offline log dir
        self.brokers = broker.state.brokers
        self.topic_configs_lock = broker.state.topic_configs_lock  # IncrementalAlterConfigs: read, change, write
        self.api_versions: dict[int, tuple[int, int]] = {}  # what ApiVersions advertises: set by the router's table

    # -- Kafka's AutoTopicCreationManager ----------------------------------------------------------------------
    async def maybe_auto_create_topic(self, name: str, allowed: bool = True) -> tuple[int, Any]:
        """For Metadata and Produce: an unknown topic is created when auto.create.topics.enable (and the request)
        allow it -> (error, the topic)."""
        try:
            validate_topic_name(name)
        except MetadataError:
            return int(E.INVALID_TOPIC_EXCEPTION), None
        if not allowed or name in INTERNAL_TOPICS or not self.config.get("auto.create.topics.enable"):
            return int(E.UNKNOWN_TOPIC_OR_PARTITION), None
        return await self.admin.auto_create_topic(name)

    # -- Kafka's AuthHelper: the one authorization call site ---------------------------------------------------
    def authorizing(self, ctx: "RequestContext") -> bool:
        """Whether this request is authorized at all (an authorizer is configured, not the inter-broker listener):
        lets a handler skip work that only feeds an authorization."""
        return self.authorizer is not None and not ctx.inter_broker

    def authorized(self, ctx: "RequestContext", operation: int, resource_type: int, name: str,
                   log_denied: bool = True) -> bool:
        """May this request's principal perform the operation on the resource? True when no authorizer is
        configured (Kafka's AuthHelper.authorize)."""
        auth = self.authorizer
        if auth is None or ctx.inter_broker:
            return True
        host = ctx.client_host
        ok = auth.authorize(ctx.principal, host, operation, resource_type, name)
        if not ok and log_denied and ctx.log is not None:
            ctx.log.info("authorizer.denied", principal=ctx.principal, host=host, operation=Op(operation).name,
                         resource_type=ResourceType(resource_type).name, name=name)
        return ok

    def authorize(self, ctx: "RequestContext", operation: int, resource_type: int, names,
                  log_denied: bool = True) -> set:
        """The names among `names` this request may perform the operation on (Kafka's filterByAuthorized)."""
        if self.authorizer is None or ctx.inter_broker:
            return set(names)
        return {n for n in set(names) if self.authorized(ctx, operation, resource_type, n, log_denied)}

    def authorized_cluster(self, ctx: "RequestContext", operation: int, log_denied: bool = True) -> bool:
        return self.authorized(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied)

    def authorize_any(self, ctx: "RequestContext", operation: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType (e.g. idempotent producers without a cluster IDEMPOTENT_WRITE ACL)."""
        auth = self.authorizer
        if auth is None or ctx.inter_broker:
            return True
        return auth.authorize_any(ctx.principal, ctx.client_host, operation, resource_type)

    def authorized_operations(self, ctx: "RequestContext", resource_type: int, name: str) -> set[int]:
        """KIP-430's field: every supported operation without an authorizer, else those allowed."""
        auth = self.authorizer
        if auth is None or ctx.inter_broker:
            return set(SUPPORTED_OPS.get(resource_type, ()))
        return auth.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)
