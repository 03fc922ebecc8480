"""SASL on a SASL_PLAINTEXT (or SASL_SSL) client listener: Kafka's SaslServerAuthenticator for the PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured validator) mechanisms.

Configuration, with Kafka's names:
- `sasl.enabled.mechanisms` (Kafka's default GSSAPI, which Kafkite does not serve: set PLAIN and/or SCRAM-SHA-256,
  SCRAM-SHA-512), or per listener `listener.name.<listener>.sasl.enabled.mechanisms`;
- SCRAM users: the credentials in the cluster metadata (security/scram.py), looked up at each exchange (a user
  deleted or changed is seen by the next connection); `listener.name.<l>.scram-sha-256.sasl.jaas.config` (the
  broker's own credentials in Kafka) is taken when it names Kafka's ScramLoginModule, and not needed;
- PLAIN users, in the JAAS config of the listener's PLAIN login module:
  `listener.name.<listener>.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule
  required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`
  (each `user_<name>="<password>"` is a user; `sasl.jaas.config` is taken when no listener one is given).

The exchange (KIP-43, KIP-152): before authentication a connection may send ApiVersions (answered as any other)
and SaslHandshake; any other request closes it, as Kafka's authenticator does. SaslHandshake v0 is followed by the
client's tokens as size-prefixed frames with no Kafka header (the v0 framing old clients use), each answered by
one such frame (empty when PLAIN succeeded); v1 by SaslAuthenticate v0-2 requests. A mechanism not enabled answers UNSUPPORTED_SASL_MECHANISM with
the enabled ones; a wrong user or password answers SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid
username or password" (the same whether the user exists or not), is logged, and closes the connection
(`connection.failed.authentication.delay.ms` later, KIP-306: network/connection.py). After
authentication the principal is `User:<name>` and SaslHandshake / SaslAuthenticate answer ILLEGAL_SASL_STATE, unless
the session has an end (KIP-368): `connections.max.reauth.ms` (default 0: none; per listener
`listener.name.<l>.connections.max.reauth.ms`) and an OAUTHBEARER token's expiry bound it, SaslAuthenticate v1+ tells
the client (session_lifetime_ms), a SaslHandshake then re-authenticates (same mechanism and principal, or
SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closed), and any other request after the end
closes the connection (network/connection.py), as Kafka's SocketServer does. OAUTHBEARER: security/oauthbearer.py.

SCRAM (RFC 5802/7677, Kafka's ScramSaslServer) takes two tokens: client-first (answered server-first: the
credential's salt and iterations) and client-final (answered server-final). The messages are parsed as Kafka's
ScramMessages does (usernames escaped =2C / =3D, no channel binding, extensions after the nonce: unknown ones
ignored, `tokenauth` refused: delegation tokens are not served); scramp does the cryptography. Any failure answers
Kafka's generic "Authentication failed during authentication due to invalid credentials with SASL mechanism <m>";
a user without a credential gets a server-first message with a salt derived from a secret of the process, so that
the exchange does not tell whether the user exists (where Kafka refuses the first message at once; the salt differs
between processes and restarts, which a patient prober comparing them could notice).
"""
from __future__ import annotations

import hmac
import re
import secrets
import struct
from dataclasses import dataclass, field
from typing import Callable

import structlog

from ..config import ConfigError
from .sasl_common import AuthenticationFailed, scram_failed_message
from .scram import MIN_ITERATIONS, ScramCredential, load_scramp

log = structlog.get_logger("kafkite.sasl")
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FAKE_SALT_KEY = secrets.token_bytes(32)  # one per process: the brokers of an in-process cluster answer alike
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
    # (user, mechanism) -> its SCRAM credential or None: the cluster metadata's (set by the broker)
    scram_credentials: Callable[[str, str], "ScramCredential | None"] = lambda user, mechanism: None
    fake_salt_key: bytes = field(default_factory=lambda: _FAKE_SALT_KEY)
    oauthbearer: object = None  # oauthbearer.UnsecuredValidator when OAUTHBEARER is enabled
    max_reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368): 0, no limit


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
                          f"sasl.enabled.mechanisms=PLAIN or SCRAM-SHA-512, ...)")
    out = SaslConfig(listener, mechanisms)
    for mech in (m for m in mechanisms if m.startswith("SCRAM-")):
        key = f"{prefix}{mech.lower()}.sasl.jaas.config"
        if static.get(key):
            module, _ = parse_jaas(static[key])
            if module != SCRAM_LOGIN_MODULE:
                raise ConfigError(f"{key}: the {mech} mechanism needs {SCRAM_LOGIN_MODULE}, got {module}")
    def login_options(mech: str, login_module: str) -> dict[str, str]:
        """The options of the listener's JAAS entry for `mech` (`sasl.jaas.config` when it has none of its own)."""
        key = f"{prefix}{mech.lower()}.sasl.jaas.config"
        jaas = static.get(key) or static.get("sasl.jaas.config")
        if not jaas:
            raise ConfigError(f"Could not find a 'KafkaServer' or '{prefix}KafkaServer' entry in the JAAS "
                              f"configuration: set {key}")
        module, options = parse_jaas(jaas)
        if module != login_module:
            raise ConfigError(f"{key}: the {mech} mechanism needs {login_module}, got {module}")
        return options
    if "PLAIN" in mechanisms:
        options = login_options("PLAIN", PLAIN_LOGIN_MODULE)
        out.plain_users = {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
    if "OAUTHBEARER" in mechanisms:
        from .oauthbearer import OAUTHBEARER_LOGIN_MODULE, UnsecuredValidator
        options = login_options("OAUTHBEARER", OAUTHBEARER_LOGIN_MODULE)
        handler = static.get(prefix + "oauthbearer.sasl.server.callback.handler.class")
        if handler:
            raise ConfigError(f"{prefix}oauthbearer.sasl.server.callback.handler.class={handler}: Kafkite serves "
                              "OAUTHBEARER with Kafka's unsecured validator only (leave the handler unset)")
        out.oauthbearer = UnsecuredValidator(options)
    raw_reauth = static.get(prefix + "connections.max.reauth.ms")
    try:
        out.max_reauth_ms = int(raw_reauth) if raw_reauth is not None else int(cfg.get("connections.max.reauth.ms"))
    except ValueError:
        raise ConfigError(f"Invalid value {raw_reauth} for configuration {prefix}connections.max.reauth.ms") from None
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
    return hmac.compare_digest(a.encode(), b.encode())


_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
# Kafka's ScramMessages.ClientFirstMessage: gs2 header "n,[a=authzid]," (no channel binding), n=, r=, extensions
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<saslname>{_SASLNAME}),"
                           r"r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?P<extensions>(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*))",
                           re.S)


_FINAL_NONCE = re.compile(r"(?:^|,)r=([^,]*)")


def _unescape(saslname: str) -> str:
    """Kafka's ScramFormatter.username: =2C is ',' and =3D is '='."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One SCRAM exchange on the server side: `step(token)` -> the answer; AuthenticationFailed when refused."""

    def __init__(self, config: SaslConfig, mechanism: str) -> None:
        self.config = config
        self.mechanism = mechanism
        self.user: str | None = None
        self.done = False
        self._server = None
        self._client_nonce = ""

    def step(self, token: bytes) -> bytes:
        scramp = load_scramp()
        generic = scram_failed_message(self.mechanism)
        if self._server is None:
            try:
                m = _CLIENT_FIRST.fullmatch(token.decode("utf-8"))
            except UnicodeDecodeError:
                m = None
            if m is None:
                raise AuthenticationFailed(generic, "Invalid SCRAM client first message")
            extensions = dict(e.split("=", 1) for e in m.group("extensions").split(",")[1:])
            if extensions.get("tokenauth", "").lower() == "true":
                raise AuthenticationFailed(generic, "Token Authentication failed: delegation tokens are not served")
            user = _unescape(m.group("saslname"))
            if m.group("authzid") and _unescape(m.group("authzid")) != user:
                raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                           "different from username", "authorization id is not the username")
            cred = self.config.scram_credentials(user, self.mechanism)
            if cred is not None and cred.iterations < MIN_ITERATIONS:
                raise AuthenticationFailed(generic, f"Iterations {cred.iterations} is less than the minimum "
                                                    f"{MIN_ITERATIONS} for {self.mechanism}")
            self.user, known = user, cred is not None
            if cred is None:
                cred = self._fake(user)
            server = scramp.ScramMechanism(self.mechanism).make_server(
                lambda _name: (cred.salt, cred.stored_key, cred.server_key, cred.iterations))
            try:  # scramp reads no extensions: it gets the message without them, and signs the one sent
                server.set_client_first(f"n,,n={m.group('saslname')},r={m.group('nonce')}")
                server.client_first_bare = m.group("bare")
                first = server.get_server_first()
            except scramp.ScramException as exc:
                raise AuthenticationFailed(generic, f"Invalid SCRAM client first message: {exc}") from None
            self._server, self._known, self._client_nonce = server, known, m.group("nonce")
            return first.encode()
        try:
            text = token.decode("utf-8")
            sent = _FINAL_NONCE.search(text)
            if sent is not None and sent.group(1) == self._client_nonce + str(self._server.nonce):
                # librdkafka before 2.6.1 sends its own nonce again in front of the combined one (librdkafka#4895);
                # Kafka 3.8.1-3.9 take it (their nonce check is an endsWith): so does Kafkite, that form only. The
                # proof signs the message as sent, so scramp checks against the nonce the client echoed.
                self._server.nonce = type(self._server.nonce)(sent.group(1))
            self._server.set_client_final(text)
            final = self._server.get_server_final()
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            reason = "Invalid client credentials" if self._known else "Authentication failed: Invalid user credentials"
            raise AuthenticationFailed(generic, f"{reason} ({exc})") from None
        if not self._known:  # not reached: a fake credential's keys match no proof
            raise AuthenticationFailed(generic, "Authentication failed: Invalid user credentials")
        self.done = True
        return final.encode()

    def _fake(self, user: str) -> ScramCredential:
        """A credential no password matches, the same for a user at each attempt (RFC 5802 section 9)."""
        def mac(label: bytes) -> bytes:
            return hmac.new(self.config.fake_salt_key, label + user.encode("utf-8"), "sha512").digest()
        return ScramCredential(mac(b"salt")[:32], mac(b"stored"), mac(b"server"), MIN_ITERATIONS)


class SaslServerAuthenticator:
    """One connection's SASL exchange (states: handshake -> token (v0) or SaslAuthenticate (v1) -> complete), and
    its re-authentications (KIP-368): once complete, the session lasts `session_expires_ms` (connections.max.reauth.ms,
    and an OAUTHBEARER token's expiry: the shorter), told to the client in SaslAuthenticate v1+'s
    session_lifetime_ms. A SaslHandshake on an authenticated connection whose session has an end starts a
    re-authentication (`begin_reauthentication`, at most one a second, as Kafka's KafkaChannel), which must keep the
    mechanism and the principal."""

    def __init__(self, config: SaslConfig, peer: str) -> None:
        self.config = config
        self.peer = peer
        self.state = "handshake"   # handshake | token | authenticate | complete
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramExchange | None = None
        self._oauth = None
        self.session_expires_ms: int | None = None  # wall clock; None: the session has no end
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._bad_mechanism: str | None = None
        self._last_reauth_ms = 0
        self.now_ms = 0

    @property
    def done(self) -> bool:
        return self.state == "complete"

    def expired(self, now_ms: int) -> bool:
        """Kafka's serverAuthenticationSessionExpired: the session has an end, and it has passed."""
        return self.done and self.session_expires_ms is not None and now_ms > self.session_expires_ms

    def begin_reauthentication(self, now_ms: int) -> bool:
        """A SaslHandshake came on the authenticated connection: re-authenticate (True), or not (False: the request
        handler answers it ILLEGAL_SASL_STATE) when the session has no end or the last one began within a second."""
        if not self.done or self.session_expires_ms is None:
            return False
        if self._last_reauth_ms and now_ms - self._last_reauth_ms < 1000:
            return False
        self._last_reauth_ms = now_ms
        self._previous = (self.mechanism, self.principal)
        self.state, self._scram, self._oauth, self._bad_mechanism = "handshake", None, None, None
        return True

    def handle(self, frame: bytes, clog, now_ms: int = 0) -> tuple[object, bool]:
        """One frame before authentication completed -> (what to send: a response message, raw bytes, or None for
        "dispatch it as usual" (ApiVersions), close the connection afterwards)."""
        from ..wire import codec
        self.now_ms = now_ms
        if self.state == "token":  # SaslHandshake v0: a bare token
            return self._raw_token(bytes(frame), clog)
        try:
            return self._handle(frame, clog)
        except codec.RequestError as exc:  # a SaslHandshake / SaslAuthenticate that does not decode
            clog.warning("sasl.malformed_request", error=str(exc))
            return None, True

    def _session_lifetime_ms(self) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the shorter of connections.max.reauth.ms (when
        > 0) and the credential's remaining life (an OAUTHBEARER token); 0 when neither bounds the session."""
        max_reauth = self.config.max_reauth_ms if self.config.max_reauth_ms > 0 else None
        credential = self._oauth.expires_ms if self._oauth is not None else None
        if credential is None and max_reauth is None:
            self.session_expires_ms = None
            return 0
        left = credential - self.now_ms if credential is not None else None
        lifetime = max(0, min(x for x in (left, max_reauth) if x is not None))
        self.session_expires_ms = self.now_ms + lifetime
        return lifetime

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
            if self._previous is not None and mech != self._previous[0]:  # Kafka's REAUTH_BAD_MECHANISM
                self._bad_mechanism = (f"SASL mechanism '{mech}' requested by client is not supported for "
                                       f"re-authentication of mechanism '{self._previous[0]}'")
            self.mechanism = mech
            if mech.startswith("SCRAM-"):
                self._scram = ScramExchange(self.config, mech)
            elif mech == "OAUTHBEARER":
                from .oauthbearer import OAuthBearerExchange
                self._oauth = OAuthBearerExchange(self.config.oauthbearer)
            self.state = "token" if version == 0 else "authenticate"
            return (req, SaslHandshakeResponse(version=version, error_code=0, mechanisms=self.config.mechanisms)), False
        if self.state == "authenticate" and api_key == SASL_AUTHENTICATE:
            req = codec.decode_request(frame, {SASL_AUTHENTICATE: (0, 2)})
            try:
                if self._bad_mechanism is not None:
                    raise AuthenticationFailed(self._bad_mechanism, self._bad_mechanism)
                answer = self._step(bytes(req.body.auth_bytes or b""), clog)
            except AuthenticationFailed as exc:
                return (req, SaslAuthenticateResponse(version=version, error_code=int(E.SASL_AUTHENTICATION_FAILED),
                                                      error_message=exc.message, auth_bytes=b"",
                                                      session_lifetime_ms=0)), True
            lifetime = self._session_lifetime_ms() if self.done else 0
            return (req, SaslAuthenticateResponse(version=version, error_code=0, error_message=None,
                                                  auth_bytes=answer, session_lifetime_ms=lifetime)), False
        clog.warning("sasl.unexpected_request", api_key=api_key, version=version, state=self.state,
                     message=f"Unexpected Kafka request of type {api_key} during SASL handshake.")
        return None, True

    def _step(self, token: bytes, clog) -> bytes:
        """One token of the mechanism -> its answer (the state is complete after the last); AuthenticationFailed
        (logged) when refused."""
        try:
            if self._scram is not None:
                answer = self._scram.step(token)
                user = self._scram.user if self._scram.done else None
            elif self._oauth is not None:
                answer = self._oauth.step(token, self.now_ms)
                user = self._oauth.user if self._oauth.done else None
                if answer:
                    clog.warning("sasl.oauthbearer_token_refused", peer=self.peer, reason=self._oauth.reason,
                                 answer=answer.decode())
            else:
                user = check_plain(self.config.plain_users, token)
                if user is None:
                    raise AuthenticationFailed(AUTH_FAILED_MESSAGE, AUTH_FAILED_MESSAGE)
                answer = b""
        except AuthenticationFailed as exc:
            clog.warning("sasl.authentication_failed", mechanism=self.mechanism, peer=self.peer, reason=exc.reason,
                         message=f"Failed authentication with /{self.peer} ({exc.message})")
            raise
        if user is not None:
            principal = f"User:{user}"
            if self._previous is not None and principal != self._previous[1]:
                old = self._previous[1].split(":", 1)
                message = (f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: "
                           f"User.{user}")
                clog.warning("sasl.authentication_failed", mechanism=self.mechanism, peer=self.peer, reason=message,
                             message=f"Failed re-authentication with /{self.peer} ({message})")
                raise AuthenticationFailed(message, message)
            self.principal = principal
            self.state = "complete"
            clog.info("sasl.reauthenticated" if self._previous is not None else "sasl.authenticated",
                      mechanism=self.mechanism, principal=self.principal)
            self._previous = None
        return answer

    def _raw_token(self, token: bytes, clog) -> tuple[object, bool]:
        """v0: each token's answer goes back as a size-prefixed frame with no header (an empty one once PLAIN
        succeeded); a refused token closes the connection."""
        try:
            answer = self._step(token, clog)
        except AuthenticationFailed:
            return None, True
        if self.done:
            self._session_lifetime_ms()  # the session's end holds without SaslAuthenticate to tell it
        return struct.pack(">i", len(answer)) + answer, False
