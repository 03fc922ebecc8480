"""What the SASL mechanisms share (security/sasl.py, security/oauthbearer.py): the refusal and Kafka's generic
message."""
from __future__ import annotations


def scram_failed_message(mechanism: str) -> str:
    """Kafka's SaslServerAuthenticator answer to a SaslException: names nothing but the mechanism."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class AuthenticationFailed(Exception):
    """`message` is what the client is told; `reason` is logged only."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(reason)
        self.message = message
        self.reason = reason
