"""Record real streaming bodies for test_stream.py: `python tests/deploy/record_stream.py URL`.

URL is a running neuronserve or vLLM OpenAI server (e.g. http://127.0.0.1:8080). The raw bytes of each
streamed `/invocations` answer are saved unchanged under tests/deploy/data/.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

BODIES = {
    "chat.stream": {
        "messages": [{"role": "user", "content": "caf\u00e9? \u2603"}],
        "max_tokens": 24,
        "stream": True,
    },
    "completion.stream": {"prompt": "the capital of france is", "max_tokens": 24, "stream": True},
}


def main(url: str) -> None:
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for name, body in BODIES.items():
        with httpx.stream("POST", f"{url}/invocations", json=body, timeout=70) as response:
            response.raise_for_status()
            raw = b"".join(response.iter_raw())
        (out / name).write_bytes(raw)
        print(f"{name}: {len(raw)} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
