"""Check a request against botocore's service model: the API's own definition
(botocore/data/<service>/<version>/service-2.json). botocore's ParamValidator checks member names,
types, required members and min; max and enums are checked here by walking the same shapes.
"""

from __future__ import annotations

from typing import Any


def check(service: str, operation: str, params: dict[str, Any]) -> None:
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).input_shape
    validate_parameters(params, shape)
    problems: list[str] = []

    def walk(value: Any, shape: Any, path: str) -> None:
        meta = shape.metadata
        if shape.type_name == "structure":
            for name, member in value.items():
                walk(member, shape.members[name], f"{path}.{name}")
        elif shape.type_name == "list":
            if "max" in meta and len(value) > meta["max"]:
                problems.append(f"{path}: {len(value)} items > {meta['max']}")
            for i, item in enumerate(value):
                walk(item, shape.member, f"{path}[{i}]")
        elif shape.type_name == "map":
            for k, v in value.items():
                walk(v, shape.value, f"{path}[{k}]")
        elif shape.type_name == "string":
            if "max" in meta and len(value) > meta["max"]:
                problems.append(f"{path}: {len(value)} chars > {meta['max']}")
            if getattr(shape, "enum", None) and value not in shape.enum:
                problems.append(f"{path}: {value!r} not in {shape.enum}")
        elif (
            shape.type_name in ("integer", "long", "double", "float")
            and "max" in meta
            and value > meta["max"]
        ):
            problems.append(f"{path}: {value} > {meta['max']}")

    walk(params, shape, operation)
    assert not problems, problems
