"""The artifact worker: runs one artifact call in its own process (``python -I -B`` on this
file, never ``-m toolkeeper…``: it imports nothing of toolkeeper, only the standard library
and the artifact).

Protocol: one JSON object on stdin ``{"entry", "root", "arguments", "memory_bytes",
"cpu_s"}``; one JSON object on the original stdout: ``{"ok": true, "result": …}`` or
``{"ok": false, "kind": "memory"|"error"|"output", "type": "<exception type>"}``. The
limits are set before the artifact is imported; what the artifact prints goes to stderr.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import resource
import sys
from typing import Any


def _limit(memory_bytes: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run(request: dict[str, Any]) -> dict[str, Any]:
    module, _, name = str(request["entry"]).partition(":")
    sys.path.insert(0, str(request["root"]))
    try:
        fn = getattr(importlib.import_module(module), name)
        result = fn(**request["arguments"])
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except MemoryError:
        return {"ok": False, "kind": "memory", "type": "MemoryError"}
    except BaseException as exc:  # the artifact's own failure, reported by type only
        return {"ok": False, "kind": "error", "type": type(exc).__name__}
    return {"ok": True, "result": result}


async def _awaited(value: Any) -> Any:
    return await value


def main() -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the artifact's prints never mix with the answer
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    _limit(int(request["memory_bytes"]), int(request["cpu_s"]))
    answer = _run(request)
    try:
        text = json.dumps(answer, allow_nan=False)
    except (TypeError, ValueError):
        text = json.dumps({"ok": False, "kind": "output", "type": "not JSON"})
    except MemoryError:
        text = json.dumps({"ok": False, "kind": "memory", "type": "MemoryError"})
    out.write(text)
    out.flush()


if __name__ == "__main__":
    main()
