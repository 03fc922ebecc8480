"""SASL OAUTHBEARER (RFC 7628) with Kafka's unsecured validator (OAuthBearerSaslServer +
OAuthBearerUnsecuredValidatorCallbackHandler): for tests and development, never for production, as in Kafka.

The client's first message, `n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]*^A`, carries an unsecured JWS:
`base64url(header).base64url(claims).` with header `{"alg":"none"}` and an empty signature (what librdkafka's
`sasl.oauthbearer.config=principal=alice` and Kafka's `unsecuredLoginStringClaim_sub` make). The token is checked as
Kafka checks it: the principal claim (`unsecuredValidatorPrincipalClaimName`, default `sub`) a string, `exp` present
and not passed, `iat` (if any) not in the future and before `exp`, and the required scope
(`unsecuredValidatorRequiredScope`, space separated) within the scope claim (`unsecuredValidatorScopeClaimName`,
default `scope`), with `unsecuredValidatorAllowableClockSkewMs` of tolerance. A token that fails is answered with
Kafka's error JSON (`{"status":"invalid_token"}`, or `{"status":"insufficient_scope", "scope":"[...]"}`); the
client answers `^A` and the exchange fails with that JSON as the error message. The options come from the listener's
JAAS config: `listener.name.<l>.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.
OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";`. The token's expiry bounds the session
(KIP-368, security/sasl.py). Sans-IO: the caller passes now_ms.
"""
from __future__ import annotations

import base64
import binascii
import json
import re

from .sasl_common import AuthenticationFailed, scram_failed_message as failed_message

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.S)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
INVALID_FIRST = "Invalid OAUTHBEARER client first message"


class _Invalid(Exception):
    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _b64(part: str) -> dict:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise _Invalid("Unsecured JWS must have Base64URL-encoded JSON header and claims") from None
    if not isinstance(value, dict):
        raise _Invalid("Unsecured JWS header and claims must be JSON objects")
    return value


class UnsecuredValidator:
    def __init__(self, options: dict[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        try:
            self.skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        except ValueError:
            self.skew_ms = -1
        if self.skew_ms < 0:
            from ..config import ConfigError
            raise ConfigError("Allowable clock skew millis must not be negative: "
                              f"{options.get('unsecuredValidatorAllowableClockSkewMs')}")

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """-> (principal name, expiry in ms since the epoch); _Invalid when refused."""
        if not token.endswith(".") or token.count(".") != 2:
            raise _Invalid("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
                           "values and the third must be empty")
        header_part, claims_part, _ = token.split(".")
        header, claims = _b64(header_part), _b64(claims_part)
        if header.get("alg") != "none":
            raise _Invalid("Unsecured JWS must have 'none' for the alg header")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise _Invalid(f"Required claim missing or not a string: {self.principal_claim}")
        exp, iat = claims.get("exp"), claims.get("iat")
        for name, value in (("exp", exp), ("iat", iat)):
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise _Invalid(f"The claim {name} must be a number")
        if iat is not None and iat * 1000 > now_ms + self.skew_ms:
            raise _Invalid(f'The indicated time is "now"={now_ms}, but the token was issued at {iat * 1000}')
        if exp is None:
            raise _Invalid("No expiration time in JWT")
        if now_ms - self.skew_ms >= exp * 1000:
            raise _Invalid(f'The indicated time is "now"={now_ms}, but the token expired at {exp * 1000}')
        if iat is not None and exp <= iat:
            raise _Invalid(f"The token's expiration time {exp * 1000} is not after its issued-at time {iat * 1000}")
        if self.required_scope:
            scope = claims.get(self.scope_claim)
            have = scope.split() if isinstance(scope, str) else [s for s in scope if isinstance(s, str)] \
                if isinstance(scope, list) else []
            missing = [s for s in self.required_scope if s not in have]
            if missing:
                raise _Invalid(f"The provided scope ({have}) was missing a required scope ({missing[0]}).  All "
                               f"required scope elements: {self.required_scope}",
                               scope="[" + ", ".join(self.required_scope) + "]")
        return principal, int(exp * 1000)


class OAuthBearerExchange:
    """The server side of one OAUTHBEARER exchange: `step(token, now_ms)` -> the answer; AuthenticationFailed when
    refused. Once done: `user` and `expires_ms` (the token's expiry)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: UnsecuredValidator) -> None:
        self.validator = validator
        self.user: str | None = None
        self.expires_ms: int | None = None
        self.done = False
        self._error: str | None = None

    def step(self, token: bytes, now_ms: int) -> bytes:
        generic = failed_message(self.mechanism)
        if token == b"\x01" and self._error is not None:  # the client's answer to our error JSON
            raise AuthenticationFailed(self._error, self._error)
        self._error = None
        try:
            m = _CLIENT_FIRST.fullmatch(token.decode("utf-8"))
        except UnicodeDecodeError:
            m = None
        if m is None:
            raise AuthenticationFailed(generic, INVALID_FIRST)
        pairs = dict(p.split("=", 1) for p in m.group("kvpairs").split("\x01") if p)
        if "auth" not in pairs:
            raise AuthenticationFailed(generic, f"{INVALID_FIRST}: 'auth' not specified")
        auth = _AUTH.fullmatch(pairs["auth"])
        if auth is None:
            raise AuthenticationFailed(generic, f"{INVALID_FIRST}: invalid 'auth' value")
        if auth.group("scheme").lower() != "bearer":
            raise AuthenticationFailed(generic, f"Invalid scheme in OAUTHBEARER client first message: "
                                                f"{auth.group('scheme')}")
        try:
            principal, expires_ms = self.validator.validate(auth.group("token"), now_ms)
        except _Invalid as exc:
            status = "insufficient_scope" if exc.scope is not None else "invalid_token"
            self._error = f'{{"status":"{status}"' + (f', "scope":"{exc.scope}"' if exc.scope else "") + "}"
            self.reason = str(exc)
            return self._error.encode()
        authzid = m.group("authzid")
        if authzid and authzid != principal:
            raise AuthenticationFailed(f"Authentication failed: Client requested an authorization id ({authzid}) "
                                       f"that is different from the token's principal name ({principal})",
                                       "authorization id is not the token's principal")
        self.user, self.expires_ms, self.done = principal, expires_ms, True
        return b""
