"""A settings model rendered for the outside: VS Code's ``contributes.configuration.properties``
of ``client-vscode/package.json`` and the README's settings table. It knows no model: the
public names, for the one model, are :func:`accelopt_core.settings.vscode_configuration` and
:func:`accelopt_core.settings.settings_markdown`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["markdown_table", "vscode_properties"]


def _json_type(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _json_type(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        variants = [_json_type(s, defs) for s in schema["anyOf"]]
        types: list[str] = []
        out: dict[str, Any] = {}
        for v in variants:
            t = v.get("type")
            types.extend(t if isinstance(t, list) else [t] if t else [])
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum"):
                if k in v:
                    out[k] = v[k]
        out["type"] = types if len(types) > 1 else types[0]
        return out
    out = {k: schema[k] for k in ("type", "enum", "minimum", "maximum") if k in schema}
    for k in ("exclusiveMinimum", "exclusiveMaximum"):
        if k in schema:
            out[k] = schema[k]
    if schema.get("type") == "object" and "additionalProperties" in schema:
        out["additionalProperties"] = _json_type(schema["additionalProperties"], defs)
        for k, v in list(out["additionalProperties"].items()):
            if k == "properties":
                out["additionalProperties"][k] = v
    if "const" in schema:
        out["enum"] = [schema["const"]]
    if "properties" in schema:
        out["properties"] = {
            k: _json_type(v, defs) | ({"default": v["default"]} if "default" in v else {})
            for k, v in schema["properties"].items()
        }
    return out


def vscode_properties(model: type[BaseModel], section: str) -> dict[str, dict[str, Any]]:
    """The settings ``model`` (its defaults: ``model()``) as VS Code
    ``contributes.configuration.properties`` under ``section``.

    Nested sections become dotted keys (``accelopt.search.beamWidth``), except maps such as
    ``accelopt.llm.prices``, which stay one object-valued setting. Each property carries its
    JSON type, default, bounds, enum and description from the model.
    """
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    props: dict[str, dict[str, Any]] = {}

    def walk(model_schema: dict[str, Any], defaults: dict[str, Any], prefix: str) -> None:
        for name, prop in model_schema.get("properties", {}).items():
            key = f"{prefix}.{name}"
            target = prop
            if "$ref" in prop:
                target = defs[prop["$ref"].split("/")[-1]]
            if (
                target.get("type") == "object"
                and "properties" in target
                and "additionalProperties" not in target
            ):
                walk(target, defaults.get(name, {}) or {}, key)
                continue
            entry = _json_type(prop, defs)
            entry["default"] = defaults.get(name)
            entry["description"] = prop.get("description") or target.get("description", "")
            props[key] = entry

    walk(schema, model().model_dump(by_alias=True), section)
    return props


def markdown_table(props: dict[str, dict[str, Any]]) -> str:
    """A markdown table (key, type, default, description) of :func:`vscode_properties`'
    ``props``, for the README."""
    rows = ["| setting | type | default | description |", "| --- | --- | --- | --- |"]
    for key, prop in props.items():
        kind = prop.get("type", "")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        if "enum" in prop:
            kind = " \\| ".join(f"`{v}`" for v in prop["enum"])
        default = prop.get("default")
        shown = "" if default in (None, {}, "") else f"`{json.dumps(default)}`"
        rows.append(f"| `{key}` | {kind} | {shown} | {prop.get('description', '')} |")
    return "\n".join(rows)
