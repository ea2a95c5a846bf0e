"""The app the REST benchmark serves: ``uvicorn --factory toolkeeper.bench.rest_app:app``.

Reads the database URL from ``TOOLKEEPER_BENCH_URL`` (a store the benchmark prepared).
"""

from __future__ import annotations

import gc
import os

from fastapi import FastAPI

from toolkeeper.api import create_app
from toolkeeper.bench.tools import add, record
from toolkeeper.gateway import Gateway


def app() -> FastAPI:
    gw = Gateway.open(os.environ["TOOLKEEPER_BENCH_URL"],
                      natives={"toolkeeper.bench.tools:add": add,
                               "toolkeeper.bench.tools:record": record})
    app = create_app(gw)
    gc.freeze()  # as toolkeeper serve does after building its app
    return app
