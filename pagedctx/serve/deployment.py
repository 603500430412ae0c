"""The chat app on Ray Serve: a FastAPI-ingress deployment, and `serve_forever` for the CLI.

Each replica is a Ray actor holding one `ChatService` (built from the settings and the
configuration the driver resolved: store URL and paths are absolute, so a replica whose working
folder is elsewhere reaches the same store). Replicas keep nothing between requests: the store
holds every session, so Serve may restart or add replicas at any time. The proxy listens on the
settings' host and port; the app takes the route prefix "/" (a GPU profile's model app sits at
"/llm" on the same proxy, docs/serve.md).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from ray import serve

from pagedctx.config import Config
from pagedctx.serve.app import create_app, install
from pagedctx.serve.service import ChatService
from pagedctx.serve.settings import ServeSettings

__all__ = ["APP_NAME", "ChatDeployment", "serve_forever", "start"]

APP_NAME = "pagedctx-chat"
app = create_app()


@serve.deployment(
    ray_actor_options={"num_cpus": 0},
    max_ongoing_requests=32,
    health_check_period_s=2,
    health_check_timeout_s=30,
    graceful_shutdown_timeout_s=5,
)
@serve.ingress(app)
class ChatDeployment:
    """One replica: the app with its own service (sessions are in the store, not here)."""

    def __init__(self, settings_json: str, config_json: str) -> None:
        settings = ServeSettings.model_validate_json(settings_json)
        install(ChatService(settings, Config.model_validate_json(config_json)))


def start(settings: ServeSettings, config: Config) -> Any:
    """Start the Serve proxy on the settings' host/port and run the app; returns its handle."""
    from pagedctx.engine import Engine
    from pagedctx.serve.http import PROXY_CALLBACK

    # the proxy (a Ray worker) inherits this from the cluster this process starts: parse errors in JSON
    os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", PROXY_CALLBACK)
    Engine.start_ray()
    serve.start(http_options={"host": settings.host, "port": settings.port})
    deployment: Any = ChatDeployment  # a serve.Deployment once decorated (mypy sees the class)
    bound = deployment.options(num_replicas=settings.replicas).bind(
        settings.model_dump_json(), config.model_dump_json()
    )
    return serve.run(bound, name=APP_NAME, route_prefix="/")


def serve_forever(settings: ServeSettings, config: Config, ready: Callable[[], None]) -> None:
    """Run the app until SIGINT or SIGTERM, then take it down (the store keeps every session)."""
    from pagedctx.engine import Engine

    stop = threading.Event()
    start(settings, config)
    for sig in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which installs its own handlers
        signal.signal(sig, lambda *_: stop.set())
    ready()
    try:
        stop.wait()
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        Engine.stop_ray()  # a cluster started here ends with every process of it (actors/local_ray.py)
