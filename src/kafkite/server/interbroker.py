"""The broker's own client side between brokers: which listener the brokers talk to each other on, and how a
broker connects to it (Kafka's inter-broker channel builder).

Configuration, with Kafka's names and rules (KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol):
- `inter.broker.listener.name` names a listener of `listener.security.protocol.map` (any protocol), or
  `security.inter.broker.protocol` names a protocol whose listener has that name; setting both is refused ("Only
  one of inter.broker.listener.name and security.inter.broker.protocol should be set."). Neither: the INTERNAL
  listener, PLAINTEXT, bound where `listeners` says or on a free port of the client listener's host (a Kafkite
  default: Kafka's is the PLAINTEXT listener). A secured inter-broker listener must be one of `listeners`.
- `sasl.mechanism.inter.broker.protocol` (a SASL_* listener): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, one of the
  listener's enabled mechanisms; Kafka's default GSSAPI is refused at start with a message naming what works.
  The broker logs in with `username` / `password` of the login module in
  `listener.name.<listener>.<mechanism>.sasl.jaas.config` (else `sasl.jaas.config`).
- TLS (SSL, SASL_SSL): the listener's truststore verifies the other broker's certificate (the system CAs when it
  has none), its keystore is offered as the client certificate (for `ssl.client.auth`), and the host name is
  checked unless `ssl.endpoint.identification.algorithm` is empty (Kafka's default https checks it).

Every broker-to-broker connection is made by `InterBrokerSecurity.connect`: the replica fetchers, AlterPartition,
the controller's LeaderAndIsr / UpdateMetadata / StopReplica, ControlledShutdown, WriteTxnMarkers and
AddPartitionsToTxn v4 verification. A refused login raises InterBrokerAuthenticationError with the other broker's
answer, which the caller logs (and retries after its backoff).
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

import trio

from ..config import ConfigError
from ..wire.frame import FrameReader
from ..network.listeners import DEFAULT_INTER_BROKER_LISTENER as DEFAULT_LISTENER, inter_broker_listener_name

INTER_BROKER_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class InterBrokerAuthenticationError(ConnectionError):
    """The other broker refused this broker's SASL login (or TLS handshake)."""


@dataclass
class InterBrokerSecurity:
    listener: str = DEFAULT_LISTENER
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def secured(self) -> bool:
        return self.protocol != "PLAINTEXT"

    async def connect(self, host: str, port: int, client_id: str = "kafkite") -> trio.abc.Stream:
        """A connection to another broker's inter-broker listener, TLS-wrapped and SASL-authenticated as its
        protocol asks (raises OSError / trio errors / InterBrokerAuthenticationError)."""
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        try:
            if self.ssl_context is not None:
                tls = trio.SSLStream(stream, self.ssl_context, server_hostname=host)
                try:
                    await tls.do_handshake()
                except trio.BrokenResourceError as exc:
                    cause = exc.__cause__ or exc
                    raise InterBrokerAuthenticationError(
                        f"SSL handshake with broker {host}:{port} (listener {self.listener}) failed: {cause}") from None
                stream = tls
            if self.mechanism is not None:
                await self._authenticate(stream, host, port, client_id)
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return stream

    async def _authenticate(self, stream, host: str, port: int, client_id: str) -> None:
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
        from .controller_channel import exchange
        from ..wire.errors import E
        reader = FrameReader()
        where = f"broker {host}:{port} (listener {self.listener}, SASL mechanism {self.mechanism})"
        resp = await exchange(stream, reader, SaslHandshakeRequest(version=1, mechanism=self.mechanism), 1, client_id)
        if resp.error_code:
            raise InterBrokerAuthenticationError(
                f"SaslHandshake refused by {where}: {E(resp.error_code).name} (enabled: {resp.mechanisms})")
        correlation = 1

        async def step(token: bytes) -> bytes:
            nonlocal correlation
            correlation += 1
            r = await exchange(stream, reader, SaslAuthenticateRequest(version=1, auth_bytes=token), correlation,
                               client_id)
            if r.error_code:
                raise InterBrokerAuthenticationError(
                    f"Authentication of {self.username!r} failed at {where}: {E(r.error_code).name}: "
                    f"{r.error_message}")
            return bytes(r.auth_bytes or b"")

        if self.mechanism == "PLAIN":
            await step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        from ..security.scram import load_scramp
        scramp = load_scramp()
        client = scramp.ScramClient([self.mechanism], self.username.replace("=", "=3D").replace(",", "=2C"),
                                    self.password)
        server_first = await step(client.get_client_first().encode())
        try:
            client.set_server_first(server_first.decode())
            server_final = await step(client.get_client_final().encode())
            client.set_server_final(server_final.decode())
        except scramp.ScramException as exc:
            raise InterBrokerAuthenticationError(f"SCRAM exchange with {where} failed: {exc}") from None


def inter_broker_security(config) -> InterBrokerSecurity:
    """The inter-broker listener and this broker's credentials for it, checked at start (ConfigError)."""
    from ..network.listeners import ListenerConfig
    name, proto = inter_broker_listener_name(config)
    out = InterBrokerSecurity(name, proto or "PLAINTEXT")
    if not out.secured:
        return out
    cfg = ListenerConfig(config, name)
    if proto in ("SSL", "SASL_SSL"):
        out.ssl_context = client_context(cfg)
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        mech = (config.static.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
        if mech not in INTER_BROKER_MECHANISMS:
            raise ConfigError(f"Invalid value {mech} for configuration sasl.mechanism.inter.broker.protocol: Kafkite's "
                              f"brokers authenticate to each other with {', '.join(INTER_BROKER_MECHANISMS)} "
                              "(Kafka's default is GSSAPI: set sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512 or "
                              "PLAIN)")
        from ..security.sasl import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas, sasl_config
        if mech not in sasl_config(config, name).mechanisms:
            raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
                              "SASL is used for inter-broker communication")
        key = f"listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config"
        jaas = config.static.get(key) or config.static.get("sasl.jaas.config")
        if not jaas:
            raise ConfigError(f"The inter-broker listener {name} uses SASL {mech}: set {key} with the broker's own "
                              "username and password")
        module, options = parse_jaas(jaas)
        want = PLAIN_LOGIN_MODULE if mech == "PLAIN" else SCRAM_LOGIN_MODULE
        if module != want or "username" not in options or "password" not in options:
            raise ConfigError(f"{key}: the inter-broker login needs {want} with username and password")
        out.mechanism, out.username, out.password = mech, options["username"], options["password"]
    return out


def client_context(cfg) -> ssl.SSLContext:
    """The TLS client context of the broker's own connections: the listener's truststore (the system CAs without
    one), its keystore as the client certificate, ssl.enabled.protocols, host name check as
    ssl.endpoint.identification.algorithm says."""
    from ..security import ssl_context as s
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # certificates verified; the truststore's only, when given
    versions = [v.strip() for v in cfg.get("ssl.enabled.protocols") if v.strip() in s._VERSIONS]
    if versions:
        ctx.minimum_version = min(s._VERSIONS[v] for v in versions)
        ctx.maximum_version = max(s._VERSIONS[v] for v in versions)
    algorithm = cfg.raw("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https").strip().lower() == "https"
    location, trusted = cfg.get("ssl.truststore.location"), cfg.get("ssl.truststore.certificates")
    try:
        if location and (cfg.get("ssl.truststore.type") or "").upper() == "PKCS12":
            ctx.load_verify_locations(cadata=s._pkcs12_certificates(location, cfg.get("ssl.truststore.password") or ""))
        elif location:
            ctx.load_verify_locations(cafile=location)
        elif trusted:
            ctx.load_verify_locations(cadata=trusted)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        key_location = cfg.get("ssl.keystore.location")
        password = cfg.get("ssl.key.password") or None
        if key_location and (cfg.get("ssl.keystore.type") or "").upper() == "PKCS12":
            s._load_pkcs12_keystore(ctx, key_location, cfg.get("ssl.keystore.password") or "", password)
        elif key_location:
            ctx.load_cert_chain(key_location, password=password)
        elif cfg.get("ssl.keystore.key") and cfg.get("ssl.keystore.certificate.chain"):
            s._load_inline(ctx, cfg.get("ssl.keystore.key"), cfg.get("ssl.keystore.certificate.chain"), password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"The inter-broker listener's TLS client side cannot be set up: {exc}") from None
    return ctx
