"""API registry: api key -> kafka-python request and response classes.

Which versions the broker *serves* is not decided here but by the router
(`kafkite.server.router.SUPPORTED`), next to the handlers that implement them.
"""
from __future__ import annotations

import importlib

from kafka.protocol.api_message import ApiMessage


def _all_message_classes() -> dict[int, dict[str, type[ApiMessage]]]:
    import kafka.protocol.admin as admin
    import kafka.protocol.consumer as consumer
    import kafka.protocol.metadata as metadata
    import kafka.protocol.producer as producer

    import kafka.protocol.sasl as sasl  # SaslHandshake, SaslAuthenticate (the module has no __all__)

    from . import consumer_group_api  # KIP-848's ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69)
    from . import interbroker  # controller-to-broker APIs kafka-python lacks (keys 4-7)

    out: dict[int, dict[str, type[ApiMessage]]] = {}
    named = [(mod, name) for mod in (admin, consumer, metadata, producer, interbroker, consumer_group_api)
             for name in getattr(mod, "__all__", ())]
    named += [(sasl, name) for name in ("SaslHandshakeRequest", "SaslHandshakeResponse", "SaslAuthenticateRequest",
                                        "SaslAuthenticateResponse")]
    for mod, name in named:
        cls = getattr(mod, name)
        if isinstance(cls, type) and issubclass(cls, ApiMessage) and getattr(cls, "_json", None):
            kind = "request" if cls.is_request() else "response"
            out.setdefault(cls.API_KEY, {})[kind] = cls
    return out


# The module of each API's request and response classes, imported the first time the API is used (its request decoded
# or its response class asked for), not all at the first request: kafka-python builds every class of a module from
# its JSON spec when the module is imported. tests/unit/test_wire.py checks this against _all_message_classes().
_MODULE_KEYS = {
    "kafka.protocol.producer.produce": (0,),
    "kafka.protocol.consumer.fetch": (1,),
    "kafka.protocol.consumer.offsets": (2, 23),
    "kafka.protocol.metadata.metadata": (3,),
    "kafka.protocol.metadata.find_coordinator": (10,),
    "kafka.protocol.metadata.api_versions": (18,),
    "kafka.protocol.consumer.group": (8, 9, 11, 12, 13, 14, 47),
    "kafka.protocol.admin.groups": (15, 16, 42),
    "kafka.protocol.sasl": (17, 36),
    "kafka.protocol.admin.topics": (19, 20, 21, 37, 43, 45, 46, 75),
    "kafka.protocol.producer.transaction": (22, 24, 25, 26, 27, 28),
    "kafka.protocol.admin.acl": (29, 30, 31),
    "kafka.protocol.admin.configs": (32, 33, 44, 74),
    "kafka.protocol.admin.cluster": (34, 35, 55, 57, 60),
    "kafka.protocol.admin.client_quotas": (48, 49),
    "kafka.protocol.admin.users": (50, 51),
    "kafka.protocol.admin.transactions": (61, 65, 66),
    "kafkite.wire.interbroker": (4, 5, 6, 7, 56),  # controller-to-broker APIs kafka-python lacks
    "kafkite.wire.consumer_group_api": (68, 69),  # KIP-848's ConsumerGroupHeartbeat, ConsumerGroupDescribe
}
_MODULE_OF = {key: module for module, keys in _MODULE_KEYS.items() for key in keys}
_LOADED: dict[int, tuple[type[ApiMessage], type[ApiMessage]]] = {}


def _load(api_key: int) -> tuple[type[ApiMessage], type[ApiMessage]]:
    module = importlib.import_module(_MODULE_OF[api_key])  # (KeyError: an API no module here holds)
    found = {}
    for cls in vars(module).values():
        if (isinstance(cls, type) and issubclass(cls, ApiMessage) and getattr(cls, "_json", None)
                and cls.__module__ == module.__name__ and cls.API_KEY == api_key):
            found["request" if cls.is_request() else "response"] = cls
    got = _LOADED[api_key] = (found["request"], found["response"])
    return got


def classes(api_key: int) -> tuple[type[ApiMessage], type[ApiMessage]]:
    """The request and response classes of an API (KeyError for an API none is known of)."""
    got = _LOADED.get(api_key)
    return got if got is not None else _load(api_key)


def response_class(api_key: int) -> type[ApiMessage]:
    return classes(api_key)[1]


def known_api_keys() -> set[int]:
    return set(_MODULE_OF)
