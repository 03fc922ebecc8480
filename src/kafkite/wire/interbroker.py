"""Controller-to-broker messages of a ZooKeeper-mode cluster, which kafka-python lacks.

LeaderAndIsr (api key 4, v0-7), StopReplica (5, v0-4), UpdateMetadata (6, v0-8) and
ControlledShutdown (7, v0-3), and AlterPartition (56, v0-1: a partition leader to the controller),
requests and responses. Their specs are in Kafka's JSON
form under ``kafkite/wire/schemas`` and are loaded by kafka-python's own machinery, so
the classes behave like kafka-python's (``encode``/``decode``, headers, versioned
``Cls[v]``, nested data classes as attributes: ``LeaderAndIsrRequest.LeaderAndIsrTopicState``).

Where kafka-python's machinery needed adapting:

* A top-level field named ``Type`` (LeaderAndIsr v5+, UpdateMetadata v8+) would become the
  attribute ``type``, which shadows kafka-python's ``ApiMessage.type`` ('request' or
  'response') and breaks header handling. ``json_patch`` renames it ``UpdateType``
  (attribute ``update_type``), the name Kafka's request builders give it. Kafka's
  ``isKRaftController`` becomes ``is_kraft_controller`` (rather than ``is_k_raft_controller``).
  Field names are not on the wire; the spec files keep Kafka's names.
* ControlledShutdown v0 uses request header v0 (api key, api version, correlation id, no
  client id: Kafka's one exception), which kafka-python's RequestHeader (v1-2) cannot
  express; ``ControlledShutdownRequest`` writes and reads that header itself.
* ``mapKey`` (LeaderAndIsrResponse, ControlledShutdownResponse) only shapes Kafka's Java
  collections; kafka-python records it and the wire form is a plain array either way.
* ``commonStructs`` are resolved by kafka-python's loader; a common struct used at two depths
  gets one data class per use: v0-1 ``LeaderAndIsrRequest.LeaderAndIsrPartitionState`` and
  v2+ ``LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState`` (same for
  UpdateMetadataPartitionState). They encode alike; equality compares the class.

None of these is advertised in ApiVersions or routed to a handler here: a client never sends
them; only brokers on inter-broker connections do.
"""
from __future__ import annotations

import struct

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage

from . import schemas

_RENAMES = {"Type": "UpdateType", "isKRaftController": "IsKraftController"}


def _rename_top_level(json: dict) -> dict:
    for field in json["fields"]:
        field["name"] = _RENAMES.get(field["name"], field["name"])
    return json


class LeaderAndIsrRequest(ApiMessage, load_json=schemas):
    @classmethod
    def json_patch(cls, json):
        return _rename_top_level(json)


class LeaderAndIsrResponse(ApiMessage, load_json=schemas):
    pass


class StopReplicaRequest(ApiMessage, load_json=schemas):
    @classmethod
    def json_patch(cls, json):
        return _rename_top_level(json)


class StopReplicaResponse(ApiMessage, load_json=schemas):
    pass


class UpdateMetadataRequest(ApiMessage, load_json=schemas):
    @classmethod
    def json_patch(cls, json):
        return _rename_top_level(json)


class UpdateMetadataResponse(ApiMessage, load_json=schemas):
    pass


_HEADER_V0 = struct.Struct(">hhi")


class ControlledShutdownRequest(ApiMessage, load_json=schemas):
    """v0 travels with request header v0: api key, api version, correlation id, no client id."""

    def encode_header(self, flexible=False):
        if self.API_VERSION == 0:
            h = self._header
            return _HEADER_V0.pack(h.request_api_key, h.request_api_version, h.correlation_id)
        return super().encode_header(flexible=flexible)

    @classmethod
    def parse_header(cls, data, version=None):
        version = cls._class_version if version is None else version
        if version == 0:
            raw = data.read(_HEADER_V0.size)
            if len(raw) < _HEADER_V0.size:
                raise ValueError("request header v0 needs 8 bytes, got %d" % len(raw))
            api_key, api_version, correlation_id = _HEADER_V0.unpack(raw)
            # Kafka reads no client id from header v0 and reports it as ""
            return RequestHeader(request_api_key=api_key, request_api_version=api_version,
                                 correlation_id=correlation_id, client_id="")
        return super().parse_header(data, version=version)


class ControlledShutdownResponse(ApiMessage, load_json=schemas):
    pass


class AlterPartitionRequest(ApiMessage, load_json=schemas):
    """A partition leader asking the controller for a new ISR (v0-1: topic names)."""


class AlterPartitionResponse(ApiMessage, load_json=schemas):
    pass


__all__ = [
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
    "ControlledShutdownRequest", "ControlledShutdownResponse",
    "AlterPartitionRequest", "AlterPartitionResponse",
]
