"""SASL on a SASL_PLAINTEXT (or SASL_SSL) client listener: Kafka's SaslServerAuthenticator for the PLAIN mechanism.

Configuration, with Kafka's names:
- `sasl.enabled.mechanisms` (Kafka's default GSSAPI, which Kafkite does not serve: set PLAIN), or per listener
  `listener.name.<listener>.sasl.enabled.mechanisms`;
- the users, in the JAAS config of the listener's PLAIN login module:
  `listener.name.<listener>.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule
  required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`
  (each `user_<name>="<password>"` is a user; `sasl.jaas.config` is taken when no listener one is given).

The exchange (KIP-43, KIP-152): before authentication a connection may send ApiVersions (answered as any other)
and SaslHandshake; any other request closes it, as Kafka's authenticator does. SaslHandshake v0 is followed by the
client's token as a size-prefixed frame with no Kafka header (the v0 framing old clients use), answered by an
empty frame; v1 by SaslAuthenticate v0-2 requests. A mechanism not enabled answers UNSUPPORTED_SASL_MECHANISM with
the enabled ones; a wrong user or password answers SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid
username or password" (the same whether the user exists or not), is logged, and closes the connection. After
authentication the principal is `User:<name>` and SaslHandshake / SaslAuthenticate answer ILLEGAL_SASL_STATE.
Re-authentication (KIP-368) is not served: SaslAuthenticate v1+ answers a session lifetime of 0.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import structlog

from ..config import ConfigError

log = structlog.get_logger("kafkite.sasl")
SERVED_MECHANISMS = ("PLAIN",)
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
AUTH_FAILED_MESSAGE = "Authentication failed: Invalid username or password"
_JAAS = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$', re.S)
_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """A JAAS config entry `<LoginModule> <flag> key="value" ...;` -> (login module, options)."""
    m = _JAAS.fullmatch(text.strip())
    if m is None:
        raise ConfigError(f"Invalid JAAS config: {text[:80]!r}: expected '<LoginModule> required key=\"value\" ...;'")
    options = {k: (q if q is not None else bare).replace('\\"', '"') for k, q, bare in _OPTION.findall(m.group(3))}
    return m.group(1), options


@dataclass
class SaslConfig:
    listener: str
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)


def sasl_config(cfg, listener: str) -> SaslConfig:
    """The SASL settings of client listener `listener` (ConfigError with a clear message when unusable)."""
    static = cfg.static
    prefix = f"listener.name.{listener.lower()}."
    raw = static.get(prefix + "sasl.enabled.mechanisms", static.get("sasl.enabled.mechanisms", "GSSAPI"))
    mechanisms = [m.strip().upper() for m in raw.split(",") if m.strip()]
    unserved = [m for m in mechanisms if m not in SERVED_MECHANISMS]
    if unserved or not mechanisms:
        raise ConfigError(f"Invalid value {raw} for configuration sasl.enabled.mechanisms: Kafkite serves "
                          f"{', '.join(SERVED_MECHANISMS)} (Kafka's default is GSSAPI: set "
                          f"sasl.enabled.mechanisms=PLAIN)")
    out = SaslConfig(listener, mechanisms)
    if "PLAIN" in mechanisms:
        key = prefix + "plain.sasl.jaas.config"
        jaas = static.get(key) or static.get("sasl.jaas.config")
        if not jaas:
            raise ConfigError(f"Could not find a 'KafkaServer' or '{prefix}KafkaServer' entry in the JAAS "
                              f"configuration: set {key}")
        module, options = parse_jaas(jaas)
        if module != PLAIN_LOGIN_MODULE:
            raise ConfigError(f"{key}: the PLAIN mechanism needs {PLAIN_LOGIN_MODULE}, got {module}")
        out.plain_users = {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
    return out


def check_plain(users: dict[str, str], token: bytes) -> str | None:
    """RFC 4616 PLAIN: `authzid NUL authcid NUL password` -> the user's name, or None. An authorization id other
    than the user's own is refused, as Kafka's PlainSaslServer does."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None
    if not user or (authzid and authzid != user):
        return None
    expected = users.get(user)
    return user if expected is not None and _equal(expected, password) else None


def _equal(a: str, b: str) -> bool:
    import hmac
    return hmac.compare_digest(a.encode(), b.encode())


class SaslServerAuthenticator:
    """One connection's SASL exchange (states: handshake -> token (v0) or SaslAuthenticate (v1) -> complete)."""

    def __init__(self, config: SaslConfig, peer: str) -> None:
        self.config = config
        self.peer = peer
        self.state = "handshake"   # handshake | token | authenticate | complete
        self.mechanism: str | None = None
        self.principal: str | None = None

    @property
    def done(self) -> bool:
        return self.state == "complete"

    def handle(self, frame: bytes, clog) -> tuple[object, bool]:
        """One frame before authentication completed -> (what to send: a response message, raw bytes, or None for
        "dispatch it as usual" (ApiVersions), close the connection afterwards)."""
        from ..wire import codec
        if self.state == "token":  # SaslHandshake v0: a bare token
            return self._authenticated(bytes(frame), clog)
        try:
            return self._handle(frame, clog)
        except codec.RequestError as exc:  # a SaslHandshake / SaslAuthenticate that does not decode
            clog.warning("sasl.malformed_request", error=str(exc))
            return None, True

    def _handle(self, frame: bytes, clog) -> tuple[object, bool]:
        from kafka.protocol.sasl import (SaslAuthenticateResponse, SaslHandshakeResponse)
        from ..wire import codec
        from ..wire.errors import E
        if len(frame) < 8:
            return None, True
        api_key, version, _corr = struct.unpack_from(">hhi", frame, 0)
        if api_key == API_VERSIONS:
            return "dispatch", False
        if self.state == "handshake" and api_key == SASL_HANDSHAKE:
            req = codec.decode_request(frame, {SASL_HANDSHAKE: (0, 1)})
            mech = req.body.mechanism.upper()
            if mech not in self.config.mechanisms:
                clog.warning("sasl.unsupported_mechanism", mechanism=req.body.mechanism,
                             enabled=self.config.mechanisms)
                return (req, SaslHandshakeResponse(version=version, error_code=int(E.UNSUPPORTED_SASL_MECHANISM),
                                                   mechanisms=self.config.mechanisms)), True
            self.mechanism = mech
            self.state = "token" if version == 0 else "authenticate"
            return (req, SaslHandshakeResponse(version=version, error_code=0, mechanisms=self.config.mechanisms)), False
        if self.state == "authenticate" and api_key == SASL_AUTHENTICATE:
            req = codec.decode_request(frame, {SASL_AUTHENTICATE: (0, 2)})
            user_ok, _ = self._check(bytes(req.body.auth_bytes or b""), clog)
            if not user_ok:
                return (req, SaslAuthenticateResponse(version=version, error_code=int(E.SASL_AUTHENTICATION_FAILED),
                                                      error_message=AUTH_FAILED_MESSAGE, auth_bytes=b"",
                                                      session_lifetime_ms=0)), True
            return (req, SaslAuthenticateResponse(version=version, error_code=0, error_message=None, auth_bytes=b"",
                                                  session_lifetime_ms=0)), False
        clog.warning("sasl.unexpected_request", api_key=api_key, version=version, state=self.state,
                     message=f"Unexpected Kafka request of type {api_key} during SASL handshake.")
        return None, True

    def _check(self, token: bytes, clog) -> tuple[bool, bool]:
        user = check_plain(self.config.plain_users, token)
        if user is None:
            clog.warning("sasl.authentication_failed", mechanism=self.mechanism, peer=self.peer,
                         message=f"Failed authentication with /{self.peer} ({AUTH_FAILED_MESSAGE})")
            return False, True
        self.principal = f"User:{user}"
        self.state = "complete"
        clog.info("sasl.authenticated", mechanism=self.mechanism, principal=self.principal)
        return True, False

    def _authenticated(self, token: bytes, clog) -> tuple[object, bool]:
        """v0: the answer to a good token is an empty size-prefixed frame; a bad one closes the connection."""
        ok, close = self._check(token, clog)
        return (b"\x00\x00\x00\x00" if ok else None), close
