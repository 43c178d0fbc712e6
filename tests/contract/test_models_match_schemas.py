"""Every pydantic wire model agrees with its Avro schema, field by field and type by type."""

from __future__ import annotations

import json
import types
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any, Union, get_args, get_origin
from uuid import UUID

import pytest
from pydantic import AwareDatetime

from schemas.alerts import Alert
from schemas.base import WireModel
from schemas.checkpoint import StateCheckpoint
from schemas.decisions import GateDecision
from schemas.erasures import ErasureRecorded, ReadAudited
from schemas.events import Event
from schemas.registry import bundled_registry

MODELS = {
    "uac.Event": Event,
    "uac.Alert": Alert,
    "uac.GateDecision": GateDecision,
    "uac.StateCheckpoint": StateCheckpoint,
    "uac.ErasureRecorded": ErasureRecorded,
    "uac.ReadAudited": ReadAudited,
}
PRIMITIVES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "double": (float,),
}


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _union_members(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [_strip(member) for member in get_args(annotation)]
    return [annotation]


def mismatches(annotation: Any, avro: Any, named: dict[str, Any], path: str) -> list[str]:
    if isinstance(avro, str) and avro in named:
        avro = named[avro]
    annotation = _strip(annotation)
    if isinstance(avro, list):
        members = _union_members(annotation)
        avro_members = [a for a in avro if a != "null"]
        problems = (
            [] if ("null" in avro) == (type(None) in members) else [f"{path}: nullability differs"]
        )
        members = [m for m in members if m is not type(None)]
        if len(avro_members) == 1:
            inner = members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
            return problems + mismatches(inner, avro_members[0], named, path)
        if len(members) != len(avro_members):
            return [*problems, f"{path}: union of {len(members)} vs {len(avro_members)} branches"]
        for branch in avro_members:
            target = branch if isinstance(branch, str) else branch.get("name", branch.get("type"))
            match = [
                m for m in members if _avro_name(m) == _short(target) or _primitive(m) == target
            ]
            if not match:
                problems.append(f"{path}: no model member for Avro branch {target}")
                continue
            problems += mismatches(match[0], branch, named, f"{path}<{_short(target)}>")
        return problems
    if isinstance(avro, dict):
        if "name" in avro:
            named[avro["name"]] = avro
            named[f"uac.{avro['name']}"] = avro
        kind, logical = avro["type"], avro.get("logicalType")
        if kind == "record":
            return record_mismatches(annotation, avro, named, path)
        if kind == "enum":
            if not (isinstance(annotation, type) and issubclass(annotation, StrEnum)):
                return [f"{path}: Avro enum but model has {annotation}"]
            symbols = [member.value for member in annotation]
            return (
                []
                if symbols == avro["symbols"]
                else [f"{path}: enum symbols {symbols} != {avro['symbols']}"]
            )
        if kind == "array":
            if get_origin(annotation) is not tuple:
                return [f"{path}: Avro array but model has {annotation}"]
            return mismatches(get_args(annotation)[0], avro["items"], named, f"{path}[]")
        if logical == "timestamp-millis":
            return (
                []
                if annotation in (datetime, AwareDatetime)
                else [f"{path}: timestamp but model has {annotation}"]
            )
        if logical == "date":
            return [] if annotation is date else [f"{path}: date but model has {annotation}"]
        if logical == "uuid":
            return [] if annotation in (UUID, str) else [f"{path}: uuid but model has {annotation}"]
        return mismatches(annotation, kind, named, path)
    expected = PRIMITIVES[avro]
    return [] if annotation in expected else [f"{path}: Avro {avro} but model has {annotation}"]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _avro_name(model: Any) -> str | None:
    return model.__name__ if isinstance(model, type) and issubclass(model, WireModel) else None


def _primitive(model: Any) -> str | None:
    return {str: "string", bool: "boolean", int: "long", float: "double"}.get(model)


def record_mismatches(
    model: Any, avro: dict[str, Any], named: dict[str, Any], path: str
) -> list[str]:
    if (
        not (isinstance(model, type) and issubclass(model, WireModel))
        or model.__name__ != avro["name"]
    ):
        return [f"{path}: Avro record {avro['name']} but model {model}"]
    fields = model.model_fields
    avro_fields = {field["name"]: field for field in avro["fields"]}
    problems = []
    if set(fields) != set(avro_fields):
        model_only, avro_only = set(fields) - set(avro_fields), set(avro_fields) - set(fields)
        problems.append(f"{path}: fields differ: model-only {model_only}, avro-only {avro_only}")
    for name in sorted(set(fields) & set(avro_fields)):
        problems += mismatches(
            fields[name].annotation, avro_fields[name]["type"], named, f"{path}.{name}"
        )
    return problems


@pytest.mark.parametrize("subject", sorted(MODELS))
def test_given_the_latest_schema_of_a_subject_then_its_model_matches_field_by_field(
    subject: str,
) -> None:
    schema = json.loads(bundled_registry().latest(subject).schema_json)
    assert mismatches(MODELS[subject], schema, {}, subject) == []


def test_given_a_model_field_the_schema_lacks_then_the_check_reports_it() -> None:
    schema = json.loads(bundled_registry().latest("uac.StateCheckpoint").schema_json)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "erased"]
    assert mismatches(StateCheckpoint, schema, {}, "cp") != []


def test_given_an_enum_symbol_missing_then_the_check_reports_it() -> None:
    schema = json.loads(bundled_registry().latest("uac.Alert").schema_json)
    status = next(f for f in schema["fields"] if f["name"] == "status")
    status["type"]["symbols"] = ["raised", "resolved"]
    assert any("enum symbols" in problem for problem in mismatches(Alert, schema, {}, "alert"))
