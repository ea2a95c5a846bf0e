"""Callee agents for the ``agent_call`` tests, on 127.0.0.1: a plain HTTP JSON agent and a
real ``a2a-sdk`` server (Starlette + uvicorn in a thread), each recording what it got."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from starlette.applications import Starlette

from tests.support.loopback import JsonHandler, serving
from tests.support.serve import free_port
from tests.support.waiting import wait_until


@dataclass
class Got:
    """What a callee received: one entry per request."""

    bodies: list[Any] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def http_agent() -> Iterator[tuple[str, Got]]:
    """``POST /echo`` answers ``{run_id, status, output: "echo:<input>", context}``;
    ``/failed`` a failed run, ``/500`` HTTP 500, ``/big`` 5,000 bytes, ``/slow`` waits."""
    got = Got()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got.bodies.append(body)
            got.headers.append(dict(self.headers.items()))
            if self.path == "/failed":
                self.reply({"run_id": "r-9", "status": "failed", "error": "it broke"})
            elif self.path == "/500":
                self.reply({"error": "down"}, status=500)
            elif self.path == "/big":
                self.reply({"output": "x" * 5000})
            elif self.path == "/slow":
                got.release.wait(5)
                self.reply({"output": "late"})
            else:
                self.reply({"run_id": "r-1", "status": "completed",
                            "output": f"echo:{body['input']}",
                            "context": {"seen": body["context"]}})

    with serving(Handler) as url:
        yield url, got
        got.release.set()


class EchoExecutor(AgentExecutor):
    """Answers ``echo:<text>`` as a message; ``fail`` ends the task failed."""

    def __init__(self, got: Got) -> None:
        self.got = got

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        self.got.bodies.append({"text": get_message_text(message),
                                "metadata": MessageToDict(message.metadata)})
        if get_message_text(message) == "fail":
            await event_queue.enqueue_event(Task(
                id=context.task_id, context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_FAILED,
                                  message=new_text_message("the agent broke"))))
            return
        await event_queue.enqueue_event(new_text_message("echo:" + get_message_text(message)))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


@contextmanager
def a2a_agent() -> Iterator[tuple[str, Got]]:
    """A real A2A JSON-RPC server (a2a-sdk) on a free loopback port."""
    got = Got()
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="echo", description="echoes", version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url,
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False),
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        default_input_modes=["text/plain"], default_output_modes=["text/plain"])
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(got),
                                    task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler,
                                                                                     "/")])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=10, what="the A2A server to start")
        yield url, got
    finally:
        server.should_exit = True
        thread.join(timeout=10)
