"""When a consumer group's regular expressions are resolved again, and where (Kafka 4's
GroupMetadataManager.maybeUpdateRegularExpressions, refreshRegularExpressions and
handleRegularExpressionsResult), sans-IO.

At a heartbeat of a group whose members subscribe with regexes, the group's regexes are all resolved again
when one of them is not resolved yet, when the cluster's set of topic names changed since they were (a topic
created or deleted), or when their last resolution is older than `group.consumer.regex.refresh.interval.ms`
(Kafka 4.1's periodic refresh, KAFKA-18961: 10 minutes by default, at least 10 s; it catches ACL changes).
Each resolution is written as a ConsumerGroupRegularExpression record (topics, topics-metadata version, time),
changed or not, as Kafka writes them; a changed one bumps the group epoch.

Where: as Kafka, never inside the heartbeat. The heartbeat hands the runtime a RegexJob, the runtime resolves
it in a worker thread and gives the result to `GroupCoordinator.complete_regex_refresh`, whose records
(regexes, subscription metadata, group epoch) the members see at their next heartbeat -- as Kafka resolves in
its executor, one job per group at a time and not within REGEX_BATCH_REFRESH_MIN_INTERVAL_MS of the group's
last resolution. Meanwhile the group goes on with its current resolutions (a regex not yet resolved matches
nothing), so a member that subscribes to a new regex and to topic names gets the named topics' partitions in
this answer and the regex's at a later heartbeat (what librdkafka's test 0045 expects of Kafka 4).
INLINE_MAX > 0 resolves small ones (topic names x regexes below it) inside the heartbeat instead: unit tests
use it to look at epochs and records without a worker thread; Kafka has no such mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import structlog

from . import consumer_group_records as CR
from .regex import ResolvedRegularExpression, resolve

log = structlog.get_logger("kafkite.coordinator")

INLINE_MAX = 0  # resolve inside the heartbeat when topic names x regexes < this; 0 (Kafka): never
MIN_INTERVAL_MS = 10_000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (the background resolutions of a group)
DEFAULT_INTERVAL_MS = 600_000  # group.consumer.regex.refresh.interval.ms


@dataclass(eq=False)
class RegexJob:
    """A resolution for a worker thread: the group's regexes against a snapshot of the topic names."""
    group_id: str
    regexes: frozenset[str]
    names: tuple[str, ...]
    version: int  # of the topics metadata the names were read from
    started_ms: int
    describable: Callable[[Iterable[str]], set[str]] | None = None  # the heartbeat's member's DESCRIBE filter

    def run(self) -> dict[str, frozenset[str]]:
        """The resolution itself (pure: what a worker thread runs)."""
        return resolve_all(self.regexes, self.names)


def resolve_all(regexes: Iterable[str], names: Iterable[str]) -> dict[str, frozenset[str]]:
    names = list(names)
    return {rx: resolve(rx, names) for rx in regexes}


def last_refresh_ms(g) -> int | None:
    return max((v.timestamp_ms for v in g.resolved_regexes.values()), default=None)


def at_heartbeat(g, members, topics, now_ms: int, records: list, describable, interval_ms: int,
                 jobs: list) -> dict[str, ResolvedRegularExpression]:
    """The group's regexes as the heartbeat goes on with them: tombstones for the ones no member uses any more,
    the others resolved again when needed: a RegexJob appended to `jobs` (none while one runs, nor within
    MIN_INTERVAL_MS of the last), or here when below INLINE_MAX."""
    in_use = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
    if not in_use and not g.resolved_regexes:
        return {}
    version = getattr(topics, "version", 0)  # a plain lookup function knows no names: regexes match nothing
    all_names = getattr(topics, "names", tuple)
    resolved = {rx: v for rx, v in g.resolved_regexes.items() if rx in in_use}
    for rx in sorted(set(g.resolved_regexes) - in_use):
        records.append(CR.tombstone(CR.REGULAR_EXPRESSION, g.group_id, rx))
        g.regex_checked.pop(rx, None)
    if not in_use:
        return resolved
    oldest = min((v.timestamp_ms for v in resolved.values()), default=None)
    if not (in_use - set(resolved) or any(g.regex_checked.get(rx) != version for rx in resolved)
            or (oldest is not None and now_ms - oldest >= interval_ms)):
        return resolved
    names = tuple(all_names())
    if len(names) * len(in_use) < INLINE_MAX:
        records += apply(g, resolve_all(in_use, names), version, now_ms, describable, resolved)
        return resolved
    job = getattr(g, "regex_job", None)
    last = last_refresh_ms(g)
    if job is None and (last is None or now_ms > last + MIN_INTERVAL_MS):
        g.regex_job = RegexJob(g.group_id, frozenset(in_use), names, version, now_ms, describable)
        jobs.append(g.regex_job)
        log.info("consumer_group.regex_refresh_scheduled", group=g.group_id, regexes=len(in_use),
                 topics=len(names))
    return resolved


def apply(g, found: dict[str, frozenset[str]], version: int, started_ms: int, describable,
          resolved: dict[str, ResolvedRegularExpression]) -> list:
    """Write each resolution (its record; `resolved` updated) -> the records."""
    records = []
    for rx in sorted(found):
        topics = found[rx]
        if describable is not None and topics:
            topics = frozenset(describable(topics))
        prior = resolved.get(rx)
        resolved[rx] = ResolvedRegularExpression(topics, version, started_ms)
        records.append(CR.regular_expression(g.group_id, rx, topics, version, started_ms))
        g.regex_checked[rx] = version
        if prior is None or prior.topics != topics:
            log.info("consumer_group.regex_resolved", group=g.group_id, regex=rx, topics=sorted(topics))
    return records


def changed(before: dict[str, ResolvedRegularExpression], after: dict[str, ResolvedRegularExpression]) -> bool:
    """Does a regex resolve to other topics than before (none before: no topics) -- a new group epoch, as
    Kafka's handleRegularExpressionsResult?"""
    return any((before[rx].topics if rx in before else frozenset()) != v.topics for rx, v in after.items())


def complete(g, job: RegexJob, found: dict[str, frozenset[str]], topics, now_ms: int) -> list:
    """A background resolution back on the loop -> the records: the regexes the group still uses, its
    subscription metadata when it changed, and a new group epoch when either changed."""
    g.regex_job = None
    in_use = {m.subscribed_topic_regex for m in g.members.values() if m.subscribed_topic_regex}
    found = {rx: ts for rx, ts in found.items() if rx in in_use}
    if not found:
        return []
    resolved = dict(g.resolved_regexes)
    records = apply(g, found, job.version, job.started_ms, job.describable, resolved)
    names = g.subscribed_topic_names(resolved=resolved)
    metadata = {n: tm for n in sorted(names) if (tm := topics(n)) is not None}
    bump = changed(g.resolved_regexes, resolved)
    if metadata != g.subscription_metadata:
        records.append(CR.partition_metadata(g.group_id, metadata))
        bump = True
    if bump:
        records.append(CR.group_epoch(g.group_id, g.group_epoch + 1))
    log.info("consumer_group.regex_refreshed", group=g.group_id, regexes=len(found), topics=len(job.names),
             took_ms=now_ms - job.started_ms, new_epoch=bump)
    return records
