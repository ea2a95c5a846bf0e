"""The app the REST benchmark serves: ``uvicorn --factory toolkeeper.bench.rest_app:app``.

Reads the database URL from ``TOOLKEEPER_BENCH_URL`` (a store the benchmark prepared) and
``TOOLKEEPER_REST_FAST_PATH`` as ``toolkeeper serve`` does.
"""

from __future__ import annotations

import gc
import os

from fastapi import FastAPI

from toolkeeper.api import ApiSettings, create_app
from toolkeeper.bench.tools import add, record
from toolkeeper.gateway import Gateway


def app() -> FastAPI:
    gc.freeze()  # as toolkeeper serve does before opening its gateway…
    gw = Gateway.open(os.environ["TOOLKEEPER_BENCH_URL"],
                      natives={"toolkeeper.bench.tools:add": add,
                               "toolkeeper.bench.tools:record": record})
    # the lean REST path as serve has it (TOOLKEEPER_REST_FAST_PATH=false: the route only)
    lean = os.environ.get("TOOLKEEPER_REST_FAST_PATH", "true").lower() not in ("false", "0")
    app = create_app(gw, ApiSettings(rest_fast_path=lean))
    gc.freeze()  # …and after building its app
    return app
