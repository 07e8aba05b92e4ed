"""LMI's serving.properties: the `key=value` settings file a model directory may carry."""

from __future__ import annotations

import os

from neuronserve.errors import ConfigError


def read_serving_properties(model_dir: str) -> dict[str, str]:
    """LMI's serving.properties (`key=value` lines) in the model directory, if there is one."""
    out: dict[str, str] = {}
    path = os.path.join(model_dir, "serving.properties")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err}): write it as key=value lines", ()) from None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            # silently skipping it would drop a setting the user believes is applied
            raise ConfigError(
                f"{path} line {number}: {stripped[:80]!r} is not key=value "
                "(e.g. option.tensor_parallel_degree=2)",
                (),
            )
        out[key.strip()] = value.strip()
    return out
