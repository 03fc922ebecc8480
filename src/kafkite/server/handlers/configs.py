"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topic, broker and group resources (a group's: KIP-848's
per-group configs, coordinator/group_config.py)."""
from __future__ import annotations

import structlog

from ...config import (BROKER_CONFIGS, NOT_IMPLEMENTED_TOPIC_CONFIGS, TOPIC_CONFIGS, ConfigError, ConfigSource, NotDynamic, check_dynamic_broker_config,
                       ConfigType, message_format_below_v2, validate_topic_configs, _parse)
from ...controller.metadata import MetadataError
from ...coordinator import group_config
from ...wire.errors import E
from ..context import RequestContext
from ..kafka_apis import KafkaApis

log = structlog.get_logger("kafkite.configs")

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32  # ConfigResource.Type.GROUP

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3



def _entry_classes() -> tuple[type, type]:
    """kafka-python's DescribeConfigs entry and synonym classes. (kafka-python's config classes,
    kafka.protocol.admin.configs, are imported on the first request that needs them: not at start,
    wire/lazy_kafka.py.)"""
    from kafka.protocol.admin.configs import DescribeConfigsResponse
    entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return entry, entry.DescribeConfigsSynonym


def topic_config_entries(apis, topic: str, overrides: dict[str, str], keys, *, synonyms: bool,
                         version: int, documentation: bool = False) -> list:
    Entry, Synonym = _entry_classes()
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        syns = []
        if name in overrides:
            value, source = overrides[name], ConfigSource.TOPIC_CONFIG
            syns.append(Synonym(name=name, value=value, source=int(source)))
        else:
            value, source, _ = apis.config.topic_default(name)
        if synonyms:
            for sname, svalue, ssource in apis.config.topic_synonyms(name):
                syns.append(Synonym(name=sname, value=svalue, source=int(ssource)))
            if source == ConfigSource.DEFAULT_CONFIG and not any(s.name == d.synonyms[0] for s in syns):
                syns.append(Synonym(name=d.synonyms[0], value=d.default, source=int(ConfigSource.DEFAULT_CONFIG)))
        out.append(Entry(name=name, value=value, read_only=False, config_source=int(source),
                         is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
                         synonyms=syns if synonyms else [], config_type=int(d.type),
                         documentation=d.doc if documentation else None))
    return out


def broker_config_entries(apis, keys, *, synonyms: bool, documentation: bool) -> list:
    Entry, Synonym = _entry_classes()
    out = []
    for name, d in sorted(BROKER_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        value, source = apis.config.raw(name)
        secret = d.type == ConfigType.PASSWORD  # Kafka never shows a password's value: null, is_sensitive
        if secret:
            value = None
        syns = [Synonym(name=name, value=None if secret else v, source=int(src))
                for v, src in apis.config.layers(name)] if synonyms else []
        out.append(Entry(name=name, value=value, read_only=not d.dynamic, config_source=int(source),
                         is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=d.type == ConfigType.PASSWORD,
                         synonyms=syns, config_type=int(d.type), documentation=None))
    return out


def group_config_entries(apis, group: str, keys, *, synonyms: bool, documentation: bool) -> list:
    """Kafka's ConfigHelper.createGroupConfigEntry: each key's value (the group's, else the broker's
    group.consumer.* value), its source GROUP_CONFIG or DEFAULT_CONFIG, and as its one synonym itself."""
    Entry, Synonym = _entry_classes()
    cfg = apis.group_coordinator.coordinator.cfg
    overrides = cfg.group_configs(group) or {}
    values = group_config.effective(overrides, cfg)
    out = []
    for name in group_config.NAMES:
        if keys is not None and name not in keys:
            continue
        source = ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
        value = str(values[name])
        out.append(Entry(name=name, value=value, read_only=False, config_source=int(source),
                         is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
                         synonyms=[Synonym(name=name, value=value, source=int(source))] if synonyms else [],
                         config_type=int(ConfigType.INT),
                         documentation=group_config.DOCS[name] if documentation else None))
    return out


def _broker_resource_error(apis, name: str) -> str | None:
    if name == "":
        return None
    if name != str(apis.node_id):
        return f"Unexpected broker id, expected {apis.node_id} or empty string, but received {name}"
    return None


def _denied(apis, ctx: RequestContext, op: int, res) -> tuple[int, str] | None:
    """Kafka: a topic's configs need DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, a group's on the group, a broker's
    on the cluster."""
    from ...security.authorizer import ResourceType
    if res.resource_type == TOPIC and not apis.authorized(ctx, op, ResourceType.TOPIC, res.resource_name):
        return int(E.TOPIC_AUTHORIZATION_FAILED), "Authorization failed."
    if res.resource_type == GROUP and not apis.authorized(ctx, op, ResourceType.GROUP, res.resource_name):
        return int(E.GROUP_AUTHORIZATION_FAILED), "Group authorization failed."
    if res.resource_type in (BROKER, BROKER_LOGGER) and not apis.authorized_cluster(ctx, op):
        return int(E.CLUSTER_AUTHORIZATION_FAILED), "Cluster authorization failed."
    return None


async def handle_describe_configs(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.configs import DescribeConfigsResponse
    body = ctx.body
    v = ctx.version
    R = DescribeConfigsResponse.DescribeConfigsResult
    synonyms = bool(body.include_synonyms) if v >= 1 else False
    doc = bool(body.include_documentation) if v >= 3 else False
    results = []
    for res in body.resources:
        keys = set(res.configuration_keys) if res.configuration_keys else None  # null or none listed: all (Kafka)
        if denied := _denied(apis, ctx, 10, res):  # DESCRIBE_CONFIGS
            results.append(R(error_code=denied[0], error_message=denied[1], resource_type=res.resource_type,
                             resource_name=res.resource_name, configs=[]))
            continue
        if res.resource_type == TOPIC:
            t = apis.metadata_cache.topic(res.resource_name)
            if t is None:
                results.append(R(error_code=int(E.UNKNOWN_TOPIC_OR_PARTITION),
                                 error_message=f"Topic {res.resource_name} does not exist",
                                 resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
                continue
            entries = topic_config_entries(apis, t.name, t.configs, keys, synonyms=synonyms, version=v,
                                           documentation=doc)
        elif res.resource_type == BROKER:
            err = _broker_resource_error(apis, res.resource_name)
            if err:
                results.append(R(error_code=int(E.INVALID_REQUEST), error_message=err,
                                 resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
                continue
            entries = broker_config_entries(apis, keys, synonyms=synonyms, documentation=doc)
        elif res.resource_type == GROUP:
            if not res.resource_name:  # any other group id, existing or not, has configs (its defaults at least)
                results.append(R(error_code=int(E.INVALID_REQUEST), error_message="Group name must not be empty",
                                 resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
                continue
            entries = group_config_entries(apis, res.resource_name, keys, synonyms=synonyms, documentation=doc)
        else:
            results.append(R(error_code=int(E.INVALID_REQUEST),
                             error_message=f"Unsupported resource type {res.resource_type}",
                             resource_type=res.resource_type, resource_name=res.resource_name, configs=[]))
            continue
        results.append(R(error_code=0, error_message=None, resource_type=res.resource_type,
                         resource_name=res.resource_name, configs=entries))
    return DescribeConfigsResponse(version=v, throttle_time_ms=0, results=results)


class _Reject(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = int(code)
        self.msg = msg


async def _apply_topic(apis, name: str, new_configs: dict[str, str], validate_only: bool) -> None:
    t = apis.metadata_cache.topic(name)
    if t is None:
        raise _Reject(E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
    try:
        validate_topic_configs(new_configs)
    except ConfigError as exc:
        raise _Reject(E.INVALID_CONFIG, str(exc)) from None
    if not validate_only:
        before = dict(t.configs)
        try:
            await apis.admin.set_topic_configs(name, new_configs)
        except MetadataError as exc:  # e.g. KAFKA_STORAGE_ERROR: the metadata could not be written
            raise _Reject(exc.code, exc.message) from None
        mfv = new_configs.get("message.format.version")
        if mfv is not None and mfv != before.get("message.format.version") and message_format_below_v2(mfv):
            # Kafka 3.x's warning (LogConfig.MessageFormatVersion.topicWarningMessage): stored, shown, ignored
            log.warning("config.ignored", topic=name, key="message.format.version", value=mfv,
                        message=f"Topic configuration message.format.version with value `{mfv}` is ignored for "
                                f"`{name}`: records are always written in format v2 (the configuration is "
                                "deprecated since Kafka 3.0).")


# broker-level defaults of the topic configs Kafkite does not implement (log.preallocate, ...)
_NOT_IMPLEMENTED_SYNONYMS = {syn: name for name in NOT_IMPLEMENTED_TOPIC_CONFIGS for syn in TOPIC_CONFIGS[name].synonyms}


async def _apply_broker(apis, name: str, new_dynamic: dict[str, str], validate_only: bool) -> None:
    """The dynamic configs of one broker (`name` its id) or the cluster-wide default (`name` empty)."""
    err = _broker_resource_error(apis, name)
    if err:
        raise _Reject(E.INVALID_REQUEST, err)
    for k, val in new_dynamic.items():
        try:
            parsed = check_dynamic_broker_config(k, val)
        except NotDynamic as exc:
            raise _Reject(E.INVALID_REQUEST, str(exc)) from None
        except ConfigError as exc:
            raise _Reject(E.INVALID_CONFIG, str(exc)) from None
        d = BROKER_CONFIGS[k]
        topic_key = _NOT_IMPLEMENTED_SYNONYMS.get(k)
        if topic_key is not None and parsed != _parse(d.type, k, d.default or TOPIC_CONFIGS[topic_key].default):
            raise _Reject(E.INVALID_CONFIG, f"Invalid value {val} for configuration {k}: Kafkite does not implement "
                                            f"{k} ({NOT_IMPLEMENTED_TOPIC_CONFIGS[topic_key]})")
    if not validate_only:
        await apis.admin.set_dynamic_broker_configs(name, new_dynamic)


async def _apply_group(apis, name: str, new_configs: dict[str, str], validate_only: bool) -> None:
    """A group's whole new configs, checked as Kafka's controller checks them (ControllerConfigurationValidator,
    GroupConfigManager.validate), then kept in the cluster metadata; the group need not exist."""
    try:
        group_config.validate(name, new_configs, apis.group_coordinator.coordinator.cfg)
    except group_config.GroupConfigError as exc:
        raise _Reject(E.INVALID_REQUEST if exc.invalid_request else E.INVALID_CONFIG, exc.message) from None
    if not validate_only:
        try:
            await apis.admin.set_group_configs({name: new_configs})
        except (MetadataError, OSError) as exc:
            raise _Reject(getattr(exc, "code", E.UNKNOWN_SERVER_ERROR),
                          getattr(exc, "message", "The metadata could not be written")) from None


def _responses(cls, items):
    return [cls(error_code=code, error_message=msg, resource_type=rt, resource_name=rn) for code, msg, rt, rn in items]


async def handle_alter_configs(apis: KafkaApis, ctx: RequestContext):
    """Legacy AlterConfigs: the given set replaces all dynamic configs of the resource."""
    from kafka.protocol.admin.configs import AlterConfigsResponse
    body = ctx.body
    out = []
    for res in body.resources:
        configs = {c.name: c.value for c in res.configs}
        try:
            if denied := _denied(apis, ctx, 11, res):  # ALTER_CONFIGS
                raise _Reject(*denied)
            if any(v is None for v in configs.values()):
                raise _Reject(E.INVALID_REQUEST, "Null value not supported for: "
                              + ",".join(k for k, v in configs.items() if v is None))
            if res.resource_type == TOPIC:
                await _apply_topic(apis, res.resource_name, configs, bool(body.validate_only))
            elif res.resource_type == BROKER:
                await _apply_broker(apis, res.resource_name, configs, bool(body.validate_only))
            elif res.resource_type == GROUP:
                async with apis.topic_configs_lock:
                    await _apply_group(apis, res.resource_name, configs, bool(body.validate_only))
            else:
                raise _Reject(E.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            out.append((0, None, res.resource_type, res.resource_name))
        except _Reject as rej:
            out.append((rej.code, rej.msg, res.resource_type, res.resource_name))
    return AlterConfigsResponse(version=ctx.version, throttle_time_ms=0,
                                responses=_responses(AlterConfigsResponse.AlterConfigsResourceResponse, out))


def _incremental(current: dict[str, str], ops, defaults_of) -> dict[str, str]:
    new = dict(current)
    for op in ops:
        if op.config_operation == SET:
            if op.value is None:
                raise _Reject(E.INVALID_REQUEST, f"Null value not supported for : {op.name}")
            new[op.name] = op.value
        elif op.config_operation == DELETE:
            new.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            kind = defaults_of(op.name)
            if kind != ConfigType.LIST:
                raise _Reject(E.INVALID_CONFIG,
                              f"Config value append is not allowed for config key: {op.name}"
                              if op.config_operation == APPEND else
                              f"Config value subtract is not allowed for config key: {op.name}")
            base = new.get(op.name)
            items = [x for x in (base.split(",") if base else []) if x]
            vals = [x for x in (op.value or "").split(",") if x]
            if op.config_operation == APPEND:
                items += [x for x in vals if x not in items]
            else:
                items = [x for x in items if x not in vals]
            new[op.name] = ",".join(items)
        else:
            raise _Reject(E.INVALID_REQUEST, f"Unknown alter config operation {op.config_operation}")
    return new


async def handle_incremental_alter_configs(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse
    body = ctx.body
    out = []
    for res in body.resources:
        try:
            if denied := _denied(apis, ctx, 11, res):  # ALTER_CONFIGS
                raise _Reject(*denied)
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                raise _Reject(E.INVALID_REQUEST, "Error due to duplicate config keys")
            if res.resource_type == TOPIC:
                async with apis.topic_configs_lock:  # read, change, durable: one at a time
                    t = apis.metadata_cache.topic(res.resource_name)
                    if t is None:
                        raise _Reject(E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                    for c in res.configs:
                        if c.name not in TOPIC_CONFIGS:
                            raise _Reject(E.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                    base = dict(t.configs)
                    for c in res.configs:
                        if c.config_operation in (APPEND, SUBTRACT) and c.name not in base:
                            base[c.name] = apis.config.topic_default(c.name)[0]
                    new = _incremental(base, res.configs, lambda n: TOPIC_CONFIGS[n].type)
                    await _apply_topic(apis, res.resource_name, new, bool(body.validate_only))
            elif res.resource_type == BROKER:
                current = apis.config.dynamic_default if res.resource_name == "" else apis.config.dynamic
                new = _incremental(dict(current), res.configs,
                                   lambda n: BROKER_CONFIGS[n].type if n in BROKER_CONFIGS else None)
                await _apply_broker(apis, res.resource_name, new, bool(body.validate_only))
            elif res.resource_type == GROUP:
                async with apis.topic_configs_lock:  # read (the store's, as the controller's), change, durable
                    nulls = [c.name for c in res.configs if c.config_operation != DELETE and c.value is None]
                    if nulls:  # (Kafka's ConfigAdminManager.preprocess)
                        raise _Reject(E.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
                    for c in res.configs:  # KRaft's ConfigurationControlManager: only LIST keys take these
                        if c.config_operation in (APPEND, SUBTRACT):
                            op = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
                            raise _Reject(E.INVALID_CONFIG, f"Can't {op} to key {c.name} because its type is not LIST.")
                    current = (await apis.admin.group_configs([res.resource_name])).get(res.resource_name, {})
                    new = _incremental(current, res.configs, lambda n: None)
                    await _apply_group(apis, res.resource_name, new, bool(body.validate_only))
            else:
                raise _Reject(E.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            out.append((0, None, res.resource_type, res.resource_name))
        except _Reject as rej:
            out.append((rej.code, rej.msg, res.resource_type, res.resource_name))
    return IncrementalAlterConfigsResponse(
        version=ctx.version, throttle_time_ms=0,
        responses=_responses(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, out))
