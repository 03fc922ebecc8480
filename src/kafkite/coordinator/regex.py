"""Regular-expression subscriptions of KIP-848 consumer groups (SubscribedTopicRegex), sans-IO.

Kafka compiles a member's regex with RE2/J (com.google.re2j) and resolves it against the cluster's
topics, internal topics left out, a topic matching when the whole name matches. RE2/J is a port of
RE2's syntax; here google-re2 (the C++ RE2) compiles it. Their error texts differ; a refused regex
is answered with RE2/J's description of the error (Go's regexp/syntax texts, which RE2/J copies),
mapped from RE2's error code, in Kafka's message:
``SubscribedTopicRegex `a(` is not a valid regular expression: missing closing ).``
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable


INVALID_REGULAR_EXPRESSION = 128  # Kafka's error code (kafka-python's table stops before it)

# Kafka's Topic.isInternal: the group and transaction state topics (and the share groups' one)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@lru_cache(maxsize=1)
def _re2():
    """google-re2 and its options, imported at the first regex (not at the broker's start: memory)."""
    import re2
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    return re2, options

# RE2's error text (before its ": argument") -> RE2/J's PatternSyntaxException description
_RE2J_DESCRIPTION = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "unexpected )",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "duplicate capture group name": "duplicate capture group name",
    "trailing \\": "trailing backslash at end of expression",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
}


class InvalidRegularExpression(Exception):
    """A regex RE2 refuses; `str()` is Kafka's message."""


def _description(err: Exception) -> str:
    raw = err.args[0] if err.args else b""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    head = text.split(": ", 1)[0] if not text.startswith("trailing \\") else "trailing \\"
    return _RE2J_DESCRIPTION.get(head, head)


@lru_cache(maxsize=1024)
def compile_regex(regex: str):
    """The compiled pattern, or InvalidRegularExpression with Kafka's message."""
    re2, options = _re2()
    try:
        return re2.compile(regex, options=options)
    except re2.error as exc:
        raise InvalidRegularExpression(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {_description(exc)}.") from None


def check_regex(regex: str) -> None:
    compile_regex(regex)


def resolve(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches `regex`, internal topics left out (as Kafka's
    GroupMetadataManager.refreshRegularExpressions). An invalid regex resolves to nothing."""
    try:
        pattern = compile_regex(regex)
    except InvalidRegularExpression:
        return frozenset()
    return frozenset(n for n in topic_names if n not in INTERNAL_TOPICS and pattern.fullmatch(n) is not None)


@dataclass(frozen=True)
class ResolvedRegularExpression:
    """A regex's topics, the metadata version they were resolved against and when (Kafka's
    ResolvedRegularExpression; the ConsumerGroupRegularExpression record)."""
    topics: frozenset[str]
    version: int
    timestamp_ms: int
