"""The server side of an SSL listener (Kafka's SslFactory for a broker): an `ssl.SSLContext` built from Kafka's
`ssl.*` broker configs, with Kafka's names and defaults.

- Keystore: `ssl.keystore.type` PEM -- the private key and its certificate chain in one file at
  `ssl.keystore.location`, or inline in `ssl.keystore.key` and `ssl.keystore.certificate.chain` (Kafka's KIP-651
  PEM keystores); `ssl.key.password` decrypts an encrypted key. Kafka's default type, JKS, and PKCS12 are refused
  with one error that names what works (PEM), at start.
- Truststore (for client certificates): `ssl.truststore.type` PEM, at `ssl.truststore.location` or inline in
  `ssl.truststore.certificates`.
- `ssl.client.auth`: none (default), requested (a certificate is asked for and checked when given), required.
- `ssl.enabled.protocols` (default TLSv1.2,TLSv1.3): the TLS versions served; others are refused at start.
Sans-IO: reading the files is done once, when the broker is made.
"""
from __future__ import annotations

import os
import ssl
import tempfile

from ..config import ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _pem_only(key: str, value: str, what: str) -> None:
    if value.upper() != "PEM":
        raise ConfigError(f"Invalid value {value} for configuration {key}: Kafkite reads {what} of type PEM only "
                          f"(set {key}=PEM; convert a JKS or PKCS12 store with keytool -importkeystore and "
                          "openssl pkcs12 -nodes)")


def server_context(cfg) -> ssl.SSLContext:
    """The SSLContext of a broker's SSL listener from its config (ConfigError with Kafka's wording when a value
    cannot be used)."""
    _pem_only("ssl.keystore.type", cfg.get("ssl.keystore.type"), "keystores")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in cfg.get("ssl.enabled.protocols") if v.strip()]
    unknown = [v for v in versions if v not in _VERSIONS]
    if unknown or not versions:
        raise ConfigError(f"Invalid value {','.join(versions)} for configuration ssl.enabled.protocols: "
                          f"Kafkite serves {', '.join(_VERSIONS)}")
    ctx.minimum_version = min(_VERSIONS[v] for v in versions)
    ctx.maximum_version = max(_VERSIONS[v] for v in versions)
    password = cfg.get("ssl.key.password") or None
    location = cfg.get("ssl.keystore.location")
    key, chain = cfg.get("ssl.keystore.key"), cfg.get("ssl.keystore.certificate.chain")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif key and chain:
            _load_inline(ctx, key, chain, password)
        else:
            raise ConfigError("An SSL listener needs a keystore: ssl.keystore.location (a PEM file with the private "
                              "key and its certificate chain), or ssl.keystore.key and ssl.keystore.certificate.chain")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"Failed to load SSL keystore {location or '(inline PEM)'} of type PEM: {exc}") from None
    auth = cfg.get("ssl.client.auth").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: String must be one of: "
                          "required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        _pem_only("ssl.truststore.type", cfg.get("ssl.truststore.type"), "truststores")
        trust_location, trusted = cfg.get("ssl.truststore.location"), cfg.get("ssl.truststore.certificates")
        try:
            if trust_location:
                ctx.load_verify_locations(cafile=trust_location)
            elif trusted:
                ctx.load_verify_locations(cadata=trusted)
            else:
                raise ConfigError(f"ssl.client.auth={auth} needs a truststore: ssl.truststore.location or "
                                  "ssl.truststore.certificates (PEM)")
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"Failed to load SSL truststore {trust_location or '(inline PEM)'}: {exc}") from None
    return ctx


def _load_inline(ctx: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """Python's ssl loads key and chain from files only: a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="kafkite-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)
