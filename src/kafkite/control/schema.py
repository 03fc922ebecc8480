"""The control plane's request checks (the subset of JSON schema its route table uses, the 4xx it answers) and the
route table as an OpenAPI document."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_BROKER = {"type": ["integer", "null"], "minimum": 0, "description": "a broker of this process; null: any"}
_OPT_INT = {"type": ["integer", "null"], "minimum": 0}
_OPT_STR = {"type": ["string", "null"]}
_TARGET = {"type": "integer", "minimum": 0, "description": "a broker of this process"}


def _obj(properties: dict, required: tuple = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


@dataclass(frozen=True)
class Route:
    """One method of one path of the control plane's route table (control/routes.py)."""
    summary: str
    action: str                 # the ControlApp method that answers it
    body: dict | None = None    # the JSON schema of its body (None: takes none)
    query: tuple = ()           # (name, schema, description) of its query parameters


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


def openapi(routes: dict) -> dict:
    """The routes as an OpenAPI 3.1 document (its schemas are the ones bodies are validated against)."""
    json_of = (lambda schema: {"application/json": {"schema": schema}})
    error = {"description": "bad input; nothing changed", "content": json_of(
        {"type": "object", "properties": {"error": {"type": "string"}}, "required": [],
         "additionalProperties": False})}
    paths = {}
    for path, methods in routes.items():
        ops = {}
        for method, r in methods.items():
            op = {"operationId": f"{r.action}_{method.lower()}", "summary": r.summary,
                  "responses": {"200": {"description": "the answer (a change answers the controls in force)",
                                        "content": json_of({"type": "object"})}, "4XX": error}}
            if r.body is not None:
                op["requestBody"] = {"required": bool(r.body.get("required")), "content": json_of(r.body)}
            if r.query:
                op["parameters"] = [{"name": n, "in": "query", "required": False, "schema": s, "description": d}
                                    for n, s, d in r.query]
            ops[method.lower()] = op
        paths[path] = ops
    return {"openapi": "3.1.0",
            "info": {"title": "Kafkite control plane", "version": "1",
                     "description": "a broker's test controls: errors, drops, latency, holds, version caps, "
                                    "topology (leaders, leaderless partitions, replication, brokers), the log clock, "
                                    "data (compaction, retention, reset), and its request log"},
            "paths": paths,
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                          "description": "with kafkite serve --control-token"}}}}
