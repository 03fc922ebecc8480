"""The server side of an SSL listener (Kafka's SslFactory for a broker): an `ssl.SSLContext` built from Kafka's
`ssl.*` broker configs, with Kafka's names and defaults.

- Keystore: `ssl.keystore.type` PEM -- the private key and its certificate chain in one file at
  `ssl.keystore.location`, or inline in `ssl.keystore.key` and `ssl.keystore.certificate.chain` (Kafka's KIP-651
  PEM keystores); `ssl.key.password` decrypts an encrypted key -- or PKCS12 at `ssl.keystore.location`, opened with
  `ssl.keystore.password` (read by the cryptography package). Kafka's default type, JKS, is refused with one error
  that names what works (PEM, PKCS12), at start.
- Truststore (for client certificates): `ssl.truststore.type` PEM, at `ssl.truststore.location` or inline in
  `ssl.truststore.certificates`, or PKCS12 at `ssl.truststore.location` with `ssl.truststore.password`.
- `ssl.cipher.suites`: Kafka's (IANA) names of the TLS 1.2 suites served (OpenSSL names are taken too); TLS 1.3
  suites cannot be narrowed through Python's ssl and are accepted as they are.
- `ssl.client.auth`: none (default), requested (a certificate is asked for and checked when given), required.
- `ssl.enabled.protocols` (default TLSv1.2,TLSv1.3): the TLS versions served; others are refused at start.
Sans-IO: reading the files is done once, when the broker is made.
"""
from __future__ import annotations

import os
import secrets
import ssl
import tempfile

from ..config import ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


_TYPES = ("PEM", "PKCS12")

# Kafka's ssl.cipher.suites are the IANA (JSSE) names; OpenSSL's names for the TLS 1.2 suites a Python server can
# serve. TLS 1.3 suites cannot be narrowed through Python's ssl module: they are accepted and the TLS 1.3 defaults
# stay (all AEAD suites).
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")


def _store_type(key: str, value: str, what: str) -> str:
    kind = (value or "").upper()
    if kind not in _TYPES:
        raise ConfigError(f"Invalid value {value} for configuration {key}: Kafkite reads {what} of type PEM or "
                          f"PKCS12 (set {key}=PKCS12 and convert a JKS store with keytool -importkeystore "
                          "-deststoretype PKCS12, or use PEM)")
    return kind


def _set_ciphers(ctx: ssl.SSLContext, suites: list[str]) -> None:
    names = []
    for suite in suites:
        if suite in _TLS13_SUITES:
            continue
        names.append(_IANA_TO_OPENSSL.get(suite, suite))  # an OpenSSL name is taken as it is
    if not names:
        return
    try:
        ctx.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise ConfigError(f"Invalid value {','.join(suites)} for configuration ssl.cipher.suites: none of these "
                          "cipher suites is available") from None
    served = {c["name"] for c in ctx.get_ciphers() if c.get("protocol") != "TLSv1.3"}
    unknown = [s for s in suites if s not in _TLS13_SUITES and _IANA_TO_OPENSSL.get(s, s) not in served]
    if unknown:
        raise ConfigError(f"Invalid value {','.join(suites)} for configuration ssl.cipher.suites: unknown or "
                          f"unavailable cipher suites {', '.join(unknown)}")


def server_context(cfg) -> ssl.SSLContext:
    """The SSLContext of a broker's SSL listener from its config (ConfigError with Kafka's wording when a value
    cannot be used). `cfg.get(key)`: the listener's value (network/listeners.ListenerConfig)."""
    kind = _store_type("ssl.keystore.type", cfg.get("ssl.keystore.type"), "keystores")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in cfg.get("ssl.enabled.protocols") if v.strip()]
    unknown = [v for v in versions if v not in _VERSIONS]
    if unknown or not versions:
        raise ConfigError(f"Invalid value {','.join(versions)} for configuration ssl.enabled.protocols: "
                          f"Kafkite serves {', '.join(_VERSIONS)}")
    ctx.minimum_version = min(_VERSIONS[v] for v in versions)
    ctx.maximum_version = max(_VERSIONS[v] for v in versions)
    _set_ciphers(ctx, [c.strip() for c in cfg.get("ssl.cipher.suites") or [] if c.strip()])
    password = cfg.get("ssl.key.password") or None
    location = cfg.get("ssl.keystore.location")
    key, chain = cfg.get("ssl.keystore.key"), cfg.get("ssl.keystore.certificate.chain")
    try:
        if kind == "PKCS12":
            if not location:
                raise ConfigError("A PKCS12 keystore needs ssl.keystore.location")
            _load_pkcs12_keystore(ctx, location, cfg.get("ssl.keystore.password") or "", password)
        elif location:
            ctx.load_cert_chain(location, password=password)
        elif key and chain:
            _load_inline(ctx, key, chain, password)
        else:
            raise ConfigError("An SSL listener needs a keystore: ssl.keystore.location (a PEM file with the private "
                              "key and its certificate chain, or a PKCS12 file), or ssl.keystore.key and "
                              "ssl.keystore.certificate.chain")
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"Failed to load SSL keystore {location or '(inline PEM)'} of type {kind}: {exc}") from None
    auth = cfg.get("ssl.client.auth").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: String must be one of: "
                          "required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        trust_kind = _store_type("ssl.truststore.type", cfg.get("ssl.truststore.type"), "truststores")
        trust_location, trusted = cfg.get("ssl.truststore.location"), cfg.get("ssl.truststore.certificates")
        try:
            if trust_kind == "PKCS12" and trust_location:
                ctx.load_verify_locations(cadata=_pkcs12_certificates(trust_location,
                                                                      cfg.get("ssl.truststore.password") or ""))
            elif trust_location:
                ctx.load_verify_locations(cafile=trust_location)
            elif trusted:
                ctx.load_verify_locations(cadata=trusted)
            else:
                raise ConfigError(f"ssl.client.auth={auth} needs a truststore: ssl.truststore.location (PEM or "
                                  "PKCS12) or ssl.truststore.certificates (PEM)")
        except (OSError, ssl.SSLError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"Failed to load SSL truststore {trust_location or '(inline PEM)'} of type "
                              f"{trust_kind}: {exc}") from None
    return ctx


def _read_pkcs12(location: str, store_password: str):
    from cryptography.hazmat.primitives.serialization import pkcs12
    with open(location, "rb") as f:
        data = f.read()
    return pkcs12.load_key_and_certificates(data, store_password.encode() if store_password else None)


def _load_pkcs12_keystore(ctx: ssl.SSLContext, location: str, store_password: str, key_password: str | None) -> None:
    """A PKCS12 keystore (ssl.keystore.password opens it; Java's keytool gives the key the store's password, which
    ssl.key.password names too): its key and chain, handed to ssl through a private temporary file with the key
    encrypted by a one-time password."""
    from cryptography.hazmat.primitives import serialization
    try:
        key, cert, extra = _read_pkcs12(location, store_password)
    except ValueError:
        if not key_password or key_password == store_password:
            raise
        key, cert, extra = _read_pkcs12(location, key_password)
    if key is None or cert is None:
        raise ValueError("the PKCS12 keystore holds no private key with its certificate")
    one_time = secrets.token_hex(16)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.BestAvailableEncryption(one_time.encode())).decode()
    chain = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in [cert, *(extra or [])])
    _load_inline(ctx, key_pem, chain, one_time)


def _pkcs12_certificates(location: str, store_password: str) -> str:
    """The certificates of a PKCS12 truststore, as PEM."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    with open(location, "rb") as f:
        data = f.read()
    store = pkcs12.load_pkcs12(data, store_password.encode() if store_password else None)
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ValueError("the PKCS12 truststore holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_inline(ctx: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """Python's ssl loads key and chain from files only: a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="kafkite-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
