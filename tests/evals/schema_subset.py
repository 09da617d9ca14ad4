"""A small JSON Schema (draft 2020-12) validator for the keywords docs/eval-case.schema.json uses.

No new dependency for one schema: type, const, enum, required, properties,
additionalProperties, propertyNames, items, minLength, minimum, maximum, pattern, anyOf,
local $ref, and format date-time. An unknown keyword fails loudly, so the schema cannot
grow past what this checks without the test noticing.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

KNOWN = {
    "$schema", "$id", "$defs", "title", "description", "type", "const", "enum", "required", "properties",
    "additionalProperties", "propertyNames", "items", "minLength", "minimum", "maximum", "pattern", "anyOf",
    "$ref", "format",
}  # fmt: skip
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(value: Any, schema: dict, root: dict | None = None, path: str = "$") -> list[str]:
    """Every way `value` breaks `schema`, as "path: problem" strings ([] when valid)."""
    root = root or schema
    unknown = set(schema) - KNOWN
    assert not unknown, f"schema keyword(s) this validator does not know: {unknown}"
    found: list[str] = []
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        found += errors(value, target, root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[name](value) for name in types):
            return [f"{path}: {value!r} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "anyOf" in schema and all(errors(value, option, root, path) for option in schema["anyOf"]):
        found.append(f"{path}: {value!r} matches none of anyOf")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            found.append(f"{path}: shorter than {schema['minLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if schema.get("format") == "date-time":
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                found.append(f"{path}: {value!r} is not a date-time")
    if TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += errors(item, schema["items"], root, f"{path}[{index}]")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                found.append(f"{path}: missing {name!r}")
        properties = schema.get("properties", {})
        for name, item in value.items():
            if "propertyNames" in schema:
                found += errors(name, schema["propertyNames"], root, f"{path} key {name!r}")
            if name in properties:
                found += errors(item, properties[name], root, f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{path}: unexpected key {name!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                found += errors(item, schema["additionalProperties"], root, f"{path}.{name}")
    return found
