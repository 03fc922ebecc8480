"""A broker's listeners as Kafka's KafkaConfig reads them: `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, and the per-listener `listener.name.<listener>.<key>` overrides of the ssl.* and
sasl.* keys (Kafka's ListenerName / EndPoint / config prefix rules).

- `listeners=ADMIN://127.0.0.1:9092,SECURE://127.0.0.1:9093`: each entry a listener name and where it binds; names
  and (non-zero) ports must differ ("Each listener must have a different name, listeners: ..."); a name absent from
  `listener.security.protocol.map` is refused ("No security protocol defined for listener ADMIN"), as Kafka does.
- `advertised.listeners`: what clients are told, by listener name; a name not among `listeners` is refused with
  Kafka's message; a listener not advertised is advertised as it binds (a wildcard host: 127.0.0.1 here, where
  Kafka would take the machine's name).
- The inter-broker listener (`inter.broker.listener.name` or `security.inter.broker.protocol`, default INTERNAL here;
  any protocol: server/interbroker.py) is served only between the brokers of a replicated cluster
  (server/broker.py); every other entry is a client listener.
- A client connection knows the listener it came in on (`Connection.listener`, network/connection.py), and each of its
  requests carries it (`RequestContext.listener`); Metadata, DescribeCluster and FindCoordinator answer with each
  broker's endpoint of that listener (server/handlers).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import BROKER_CONFIGS, ConfigError, _parse

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class EndPoint:
    listener: str  # ListenerName: upper case
    protocol: str
    host: str
    port: int


DEFAULT_INTER_BROKER_LISTENER = "INTERNAL"

def parse_endpoints(value: str, protocols: dict[str, str], key: str = "listeners") -> list[EndPoint]:
    """'NAME://host:port,...' -> endpoints (Kafka's EndPoint.createEndPoint; a bare 'host:port' is PLAINTEXT)."""
    out = []
    for item in (x.strip() for x in (value or "").split(",")):
        if not item:
            continue
        if "://" in item:
            name, rest = item.split("://", 1)
        else:
            name, rest = "PLAINTEXT", item
        host, sep, port = rest.rpartition(":")
        try:
            port_no = int(port)
        except ValueError:
            port_no = -1
        if not sep or not name or not 0 <= port_no <= 65535:
            raise ConfigError(f"Invalid value {value} for configuration {key}: Unable to parse {item} to a broker "
                              "endpoint")
        name = name.upper()
        if name not in protocols:
            raise ConfigError(f"Invalid value {value} for configuration {key}: No security protocol defined for "
                              f"listener {name}")
        out.append(EndPoint(name, protocols[name], host.strip("[]"), port_no))
    return out


def protocol_map(config) -> dict[str, str]:
    raw = config.get("listener.security.protocol.map") or ""
    out = {}
    for entry in (x.strip() for x in raw.split(",")):
        if not entry:
            continue
        name, sep, proto = entry.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in PROTOCOLS:
            raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: Map entry "
                              f"'{entry}' is invalid: the security protocol must be one of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def inter_broker_listener_name(config) -> tuple[str, str | None]:
    """(listener name, its protocol or None when the default INTERNAL listener is not in the map), with Kafka's
    rules and messages (ConfigError)."""
    static = config.static
    name = (static.get("inter.broker.listener.name") or "").strip()
    proto = (static.get("security.inter.broker.protocol") or "").strip()
    if name and proto:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    protocols = protocol_map(config)
    if proto:
        if proto.upper() not in PROTOCOLS:
            raise ConfigError(f"Invalid value {proto} for configuration security.inter.broker.protocol: "
                              f"{proto} is not a valid security protocol (one of {', '.join(PROTOCOLS)})")
        return proto.upper(), proto.upper()
    if name:
        if name.upper() not in protocols:
            raise ConfigError(f"Listener with name {name.upper()} defined in inter.broker.listener.name not found in "
                              "listener.security.protocol.map.")
        return name.upper(), protocols[name.upper()]
    return DEFAULT_INTER_BROKER_LISTENER, protocols.get(DEFAULT_INTER_BROKER_LISTENER)


def inter_broker_name(config) -> str:
    """The inter-broker listener's name (inter.broker.listener.name or security.inter.broker.protocol, Kafka's rules;
    INTERNAL by default); its security is server/interbroker.py's."""
    return inter_broker_listener_name(config)[0]


@dataclass
class Listeners:
    """The client listeners (first one first: the broker's "primary" endpoint of BrokerInfo.host/port), where each
    is advertised, and the inter-broker endpoint if `listeners` names one."""
    client: list[EndPoint]
    advertised: dict[str, tuple[str, int]] = field(default_factory=dict)  # port 0: the bound port
    inter_broker: EndPoint | None = None


def listeners_of(config) -> Listeners:
    """Validate and split `listeners` / `advertised.listeners` (ConfigError with Kafka's wording)."""
    protocols = protocol_map(config)
    raw = config.get("listeners")
    eps = parse_endpoints(raw, protocols)
    if not eps:
        raise ConfigError(f"Invalid value {raw} for configuration listeners: no listener")
    names = [e.listener for e in eps]
    if len(set(names)) != len(names):
        raise ConfigError(f"requirement failed: Each listener must have a different name, listeners: {raw}")
    ports = [e.port for e in eps if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"requirement failed: Each listener must have a different port, listeners: {raw}")
    internal = inter_broker_name(config)
    inter = next((e for e in eps if e.listener == internal), None)
    if inter is None and internal in protocols and protocols[internal] != "PLAINTEXT":
        raise ConfigError("requirement failed: inter.broker.listener.name must be a listener name defined in "
                          "advertised.listeners. The valid options based on currently configured listeners are "
                          f"{','.join(names)}")
    client = [e for e in eps if e is not inter] or eps
    adv_raw = config.get("advertised.listeners")
    advertised = {}
    if adv_raw:
        adv = parse_endpoints(adv_raw, protocols, "advertised.listeners")
        unknown = [a.listener for a in adv if a.listener not in names]
        if unknown:
            raise ConfigError("requirement failed: advertised.listeners listener names must be equal to or a subset "
                              f"of the ones defined in listeners. Found {','.join(a.listener for a in adv)}. The "
                              f"valid options based on currently configured listeners are {','.join(names)}")
        advertised = {a.listener: (a.host, a.port) for a in adv}
    return Listeners(client, advertised, inter)


class ListenerConfig:
    """The config a listener's ssl.* / sasl.* settings are read from: `listener.name.<listener>.<key>` first (Kafka's
    per-listener prefix, listener name in lower case), then `<key>`."""

    def __init__(self, config, listener: str) -> None:
        self.config = config
        self.listener = listener
        self.prefix = f"listener.name.{listener.lower()}."
        self.static = config.static

    def get(self, key: str) -> Any:
        raw = self.config.static.get(self.prefix + key)
        if raw is None:
            return self.config.get(key)
        d = BROKER_CONFIGS.get(key)
        return raw if d is None else _parse(d.type, self.prefix + key, raw)

    def raw(self, key: str) -> str | None:
        return self.config.static.get(self.prefix + key, self.config.static.get(key))


@dataclass(eq=False)
class Connection:
    """What the request path knows of a client connection: its listener, security protocol, peer, and the
    principal ("User:ANONYMOUS" until SASL or a TLS client certificate says otherwise)."""
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    peer: str = ""
    principal: str = "User:ANONYMOUS"
    inter_broker: bool = False
    requests: int = 0  # requests taken (after authentication and the session checks)


def endpoint_for(broker_info, listener: str | None, primary: str | None = None) -> tuple[str, int] | None:
    """A broker's (host, port) on `listener` (None when it has none: Kafka leaves it out of Metadata). Its primary
    client listener (BrokerInfo.listener) is BrokerInfo.host/port, the others are in BrokerInfo.listeners by name;
    `listener` None: the primary."""
    if listener is None or listener == getattr(broker_info, "listener", primary):
        return broker_info.host, broker_info.port
    for name, host, port in broker_info.listeners:
        if name == listener:
            return host, int(port)
    return None


@dataclass
class ServedListener:
    """A client listener as a broker serves it: its endpoint, where it is advertised, its TLS context (SSL,
    SASL_SSL), principal mapper (SSL) and SASL settings (SASL_*)."""
    endpoint: EndPoint
    advertised_host: str | None = None
    advertised_port: int = 0
    ssl_context: Any = None
    principal_mapper: Any = None
    sasl_config: Any = None
    bound_port: int | None = None

    @property
    def name(self) -> str:
        return self.endpoint.listener


def serve_listener(ep: EndPoint, advertised: dict, config, scram_credentials) -> ServedListener:
    """A client listener ready to serve: its TLS context (security/ssl_context.py) and principal mapper (SSL), its
    SASL settings (security/sasl.py; SCRAM credentials through `scram_credentials(user, mechanism)`), built at start
    so that a bad keystore or JAAS config stops it (ConfigError)."""
    cfg = ListenerConfig(config, ep.listener)
    served = ServedListener(ep, *advertised.get(ep.listener, (None, 0)))
    if ep.protocol in ("SSL", "SASL_SSL"):
        from ..security.principal import principal_mapper
        from ..security.ssl_context import server_context
        served.ssl_context = server_context(cfg)
        served.principal_mapper = principal_mapper(cfg.get("ssl.principal.mapping.rules"))
    if ep.protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from ..security.sasl import sasl_config
        served.sasl_config = sasl_config(config, ep.listener)
        served.sasl_config.scram_credentials = scram_credentials
    return served
