"""SCRAM credentials (RFC 5802 / RFC 7677), kept as Kafka keeps them, and the rules of Kafka's
DescribeUserScramCredentials / AlterUserScramCredentials (ZkAdminManager). Sans-IO.

A user's config is Kafka's user entity config (in ZooKeeper `/config/users/<sanitized user>`):
mechanism name -> `salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`
(ScramCredentialUtils.credentialToString), next to any other key (quotas) it may hold.

The keys come from scramp (`make_auth_info`) for a password; AlterUserScramCredentials sends a salted
password instead (the client ran PBKDF2), from which the stored and server keys are two HMACs and a hash
(RFC 5802 section 3, Kafka's ScramFormatter.generateCredential): scramp keeps that step private.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..wire.errors import E

# Kafka's org.apache.kafka.clients.admin.ScramMechanism: the byte AlterUserScramCredentials carries
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_BY_NAME = {v: k for k, v in MECHANISM_TYPES.items()}
MECHANISMS = tuple(MECHANISM_TYPES.values())
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}  # hashlib's names (looked up when used: see
# kafkite/lazy_modules.py, which leaves hashlib unloaded in `kafkite serve` until a SCRAM credential is made)
MIN_ITERATIONS = 4096    # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384   # ZkAdminManager / ScramControlManager's upper bound for AlterUserScramCredentials
DEFAULT_ITERATIONS = 4096  # kafka-configs' default


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> "ScramCredential":
        """Kafka's ScramCredentialUtils.credentialFromString (ValueError when it does not parse)."""
        fields = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"Invalid credential: {exc}") from None


def load_scramp():
    """scramp, imported when first needed (it and asn1crypto cost memory a broker without SCRAM never needs), with
    its 12-byte floor on salts lifted: Kafka takes any salt in AlterUserScramCredentials (ScramControlManager checks
    the name, mechanism and iterations only) and its clients log in with it, so a credential made with a short salt
    (librdkafka's admin test uses 4 bytes) must log in here too."""
    import scramp
    import scramp.core
    scramp.core.Salt.MIN_LENGTH = 0
    return scramp


def credential_from_password(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    scramp = load_scramp()
    salt, stored_key, server_key, i = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt)
    return ScramCredential(salt, stored_key, server_key, i)


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """RFC 5802: ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
    ServerKey = HMAC(SaltedPassword, "Server Key")."""
    h = getattr(hashlib, _HASH[mechanism])
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    return ScramCredential(salt, h(client_key).digest(), hmac.new(salted_password, b"Server Key", h).digest(),
                           iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: what an admin client sends in AlterUserScramCredentials."""
    return hashlib.pbkdf2_hmac(_HASH[mechanism], password.encode("utf-8"), salt, iterations)


def sanitize(user: str) -> str:
    """Kafka's Sanitizer.sanitize (the user's ZooKeeper node name): URL encoding, '*' as %2A, ' ' as %20."""
    return quote(user, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def user_credential(users: dict[str, dict[str, str]], user: str, mechanism: str) -> ScramCredential | None:
    raw = users.get(user, {}).get(mechanism)
    if raw is None:
        return None
    try:
        return ScramCredential.from_string(raw)
    except ValueError:
        return None


def _has_scram(config: dict[str, str]) -> bool:
    return any(m in config for m in MECHANISMS)


# -- DescribeUserScramCredentials (ZkAdminManager.describeUserScramCredentials) --------------------------------
def describe(users: dict[str, dict[str, str]], names: list[str] | None) -> list[dict]:
    """Results in Kafka's order: every user with a credential, sorted, for no names (null or empty); else one per
    distinct name asked, in the order asked."""
    def result(user: str, code: int = 0, message: str | None = None, infos=()) -> dict:
        return {"user": user, "error_code": int(code), "error_message": message, "credential_infos": list(infos)}

    def infos(config: dict[str, str]) -> list[tuple[int, int]]:
        out = []
        for t, m in MECHANISM_TYPES.items():
            if m in config:
                out.append((t, ScramCredential.from_string(config[m]).iterations))
        return out

    def described(user: str, config: dict[str, str]) -> dict:
        try:
            return result(user, infos=infos(config))
        except ValueError:  # bad data in the store: Kafka answers its unknown-server error for that user
            return result(user, E.UNKNOWN_SERVER_ERROR, "Error processing describe user SCRAM credential configs "
                                                        "request")
    if not names:
        return [described(u, users[u]) for u in sorted(users) if _has_scram(users[u])]
    out: dict[str, dict] = {}
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    for n in seen:
        if n == "":
            out[n] = result(n, E.RESOURCE_NOT_FOUND, "Username must not be empty")
        elif seen[n] > 1:
            out[n] = result(n, E.DUPLICATE_RESOURCE,
                            f"Cannot describe SCRAM credentials for the same user twice in a single request: {n}")
        elif _has_scram(users.get(n, {})):
            out[n] = described(n, users[n])
        else:
            out[n] = result(n, E.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {n}")
    return list(out.values())


# -- AlterUserScramCredentials (ZkAdminManager.alterUserScramCredentials) ----------------------------------------
@dataclass
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass
class Deletion:
    name: str
    mechanism: int


def alter(users: dict[str, dict[str, str]], upsertions: list[Upsertion], deletions: list[Deletion]
          ) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """-> (one result per user, in Kafka's order: refused ones first; the users' new configs to write, user -> the
    whole config). Nothing is changed in `users`: the caller writes the new configs, then applies them."""
    results: list[dict] = []

    def res(user: str, code: int = 0, message: str | None = None) -> None:
        results.append({"user": user, "error_code": int(code), "error_message": message})

    illegal: dict[str, str] = {}  # user -> message (a later entry of the same user wins, as Kafka's map)
    for d in deletions:
        if d.name == "":
            illegal[""] = "Username must not be empty"
        elif d.mechanism not in MECHANISM_TYPES:
            illegal[d.name] = "Unknown SCRAM mechanism"
    for u in upsertions:
        if u.name == "":
            illegal[""] = "Username must not be empty"
        elif u.mechanism not in MECHANISM_TYPES:
            illegal[u.name] = "Unknown SCRAM mechanism"
        elif u.iterations < MIN_ITERATIONS:
            illegal[u.name] = "Too few iterations"
        elif u.iterations > MAX_ITERATIONS:
            illegal[u.name] = "Too many iterations"
    for user, message in illegal.items():
        res(user, E.UNSUPPORTED_SASL_MECHANISM if message == "Unknown SCRAM mechanism" else E.UNACCEPTABLE_CREDENTIAL,
            message)
    pairs = [(u.name, u.mechanism) for u in upsertions if u.name not in illegal] + \
            [(d.name, d.mechanism) for d in deletions if d.name not in illegal]
    duplicated = []
    for p in pairs:
        if pairs.count(p) > 1 and p[0] not in duplicated:
            duplicated.append(p[0])
    for user in duplicated:
        res(user, E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    valid = list(dict.fromkeys(name for name, _ in pairs if name not in duplicated))
    missing = list(dict.fromkeys(d.name for d in deletions if d.name in valid
                                 and MECHANISM_TYPES[d.mechanism] not in users.get(d.name, {})))
    for user in missing:
        res(user, E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    changes: dict[str, dict[str, str]] = {}
    for user in valid:
        if user in missing:
            continue
        config = dict(users.get(user, {}))
        for d in deletions:
            if d.name == user:
                config.pop(MECHANISM_TYPES[d.mechanism], None)
        for u in upsertions:
            if u.name == user:
                mech = MECHANISM_TYPES[u.mechanism]
                config[mech] = credential_from_salted_password(mech, bytes(u.salt), bytes(u.salted_password),
                                                               u.iterations).to_string()
        changes[user] = config
        res(user)
    return results, changes


# -- `--add-scram` / `--add-config` values (kafka-storage, kafka-configs) ----------------------------------------
_ENTRY = re.compile(r"\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*", re.S)


def parse_scram_option(text: str, *, need_name: bool) -> tuple[str, str | None, dict[str, str]]:
    """`SCRAM-SHA-512=[name=admin,password=admin-secret]` (kafka-storage --add-scram; kafka-configs --add-config
    takes it without the name) -> (mechanism, name, fields: password, or salt and saltedpassword, iterations).
    ValueError with what is wrong."""
    m = _ENTRY.fullmatch(text)
    if m is None:
        raise ValueError(f"Invalid SCRAM credential {text!r}: expected "
                         "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or SCRAM-SHA-512")
    fields: dict[str, str] = {}
    for part in _split_fields(m.group(2)):
        if "=" not in part:
            raise ValueError(f"Invalid SCRAM credential field {part!r} in {text!r}: expected key=value")
        k, v = part.split("=", 1)
        fields[k.strip().lower()] = v.strip().strip('"')
    name = fields.pop("name", None)
    if need_name and not name:
        raise ValueError(f"You must supply 'name' to add-scram: {text!r}")
    if "password" not in fields and "saltedpassword" not in fields:
        raise ValueError(f"You must supply one of 'password' or 'saltedpassword' to add-scram: {text!r}")
    if "saltedpassword" in fields and "salt" not in fields:
        raise ValueError(f"You must supply 'salt' with 'saltedpassword' to add-scram: {text!r}")
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"The 'iterations' value must be >= {MIN_ITERATIONS} and <= {MAX_ITERATIONS} "
                         f"for add-scram: {iterations}")
    return m.group(1), name, fields


def _split_fields(body: str) -> list[str]:
    """key=value pairs split at commas outside double quotes (a password may hold a comma when quoted)."""
    out, cur, quoted = [], [], False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return [p for p in out if p.strip()]


def credential_from_option(mechanism: str, fields: dict[str, str]) -> ScramCredential:
    iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    if "saltedpassword" in fields:
        return credential_from_salted_password(mechanism, base64.b64decode(fields["salt"]),
                                               base64.b64decode(fields["saltedpassword"]), iterations)
    salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
    return credential_from_password(mechanism, fields["password"], iterations, salt)
