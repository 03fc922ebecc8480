"""API registry: api key -> kafka-python request and response classes.

Which versions the broker *serves* is not decided here but by the router
(`kafkite.server.router.SUPPORTED`), next to the handlers that implement them.
"""
from __future__ import annotations

import functools

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


@functools.cache
def _table() -> dict[int, dict[str, type[ApiMessage]]]:
    return _all_message_classes()


def classes(api_key: int) -> tuple[type[ApiMessage], type[ApiMessage]]:
    entry = _table()[api_key]
    return entry["request"], entry["response"]


def response_class(api_key: int) -> type[ApiMessage]:
    return _table()[api_key]["response"]


def known_api_keys() -> set[int]:
    return {k for k, v in _table().items() if "request" in v and "response" in v}
