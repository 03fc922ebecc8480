"""The control plane's request checks: the subset of JSON schema its route table uses, and the 4xx it answers."""
from __future__ import annotations

from typing import Any


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict, "null": type(None)}


def validate(schema: dict, value: Any, where: str = "the body") -> None:
    """`value` against the subset of JSON schema the table uses (type, minimum, maximum, items, minItems,
    maxItems, properties, required, additionalProperties: false)."""
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types or []
    if types and not any(type(value) is _TYPES[t] for t in types):  # noqa: E721 (bool is not an integer here)
        raise BadRequest(400, f"{where} must be {' or '.join(types)}, got {_short(value)}")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise BadRequest(400, f"{where} must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            raise BadRequest(400, f"{where} must be <= {schema['maximum']}, got {value}")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            raise BadRequest(400, f"{where} must have {schema.get('minItems', 0)}..{schema['maxItems']} items")
        for i, item in enumerate(value):
            validate(schema.get("items", {}), item, f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        unknown = [k for k in value if k not in props]
        if unknown and schema.get("additionalProperties", True) is False:
            raise BadRequest(400, f"{where} takes {sorted(props)}, not {_short(unknown[0])}")
        for k in schema.get("required", ()):
            if k not in value:
                raise BadRequest(400, f"{where} needs {k!r}")
        for k, v in value.items():
            if k in props:
                validate(props[k], v, k)


def _short(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 80 else r[:77] + "..."
