"""Container environment for a deployment: a KEY=VALUE file, then `--env KEY=VALUE` flags over it.

The same file format as `docker run --env-file` (no quotes, no expansion), so one sample file serves
SageMaker, ECS and plain docker alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from neuronserve.errors import ConfigError

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# SageMaker's CreateModel limits (ContainerDefinition.Environment).
MAX_ENTRY_BYTES = 1024
MAX_TOTAL_BYTES = 32 * 1024


def parse_env_lines(lines: Iterable[str], source: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _KEY.fullmatch(key):
            # The line is not echoed: it may be a secret typed without its `NAME=`.
            raise ConfigError(
                f"{source}:{number}: expected KEY=VALUE (KEY: letters, digits and '_', not starting "
                "with a digit); the line is not shown, it may hold a secret"
            )
        env[key] = value
    return env


def load_env(env_file: str | None, overrides: Iterable[str]) -> dict[str, str]:
    """The file first (if any), then each `KEY=VALUE` flag; checked against SageMaker's size limits."""
    env: dict[str, str] = {}
    if env_file:
        path = Path(env_file)
        if not path.is_file():
            raise ConfigError(f"--env-file {env_file}: no such file")
        env.update(parse_env_lines(path.read_text().splitlines(), env_file))
    env.update(parse_env_lines(overrides, "--env"))
    total = 0
    for key, value in env.items():
        size = len(key.encode()) + len(value.encode())
        if len(key.encode()) > MAX_ENTRY_BYTES or len(value.encode()) > MAX_ENTRY_BYTES:
            raise ConfigError(f"environment {key}: keys and values are limited to {MAX_ENTRY_BYTES} bytes")
        total += size
    if total > MAX_TOTAL_BYTES:
        raise ConfigError(f"environment: {total} bytes in all, SageMaker allows {MAX_TOTAL_BYTES}")
    return env
