"""A small real repository for selection and session tests: a Python app server (settings, the
server loop, five variants of `get`) and a Go router. A builder module, not a test module, so test
modules never import each other."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["FILES", "write_repo"]

FILES: dict[str, str] = {
    "app/config.py": '''
        """Settings of the app server."""
        from dataclasses import dataclass


        @dataclass
        class Settings:
            """Where and how the server listens."""

            host: str
            port: int
            timeout: float


        class ConfigError(Exception):
            """A settings file that cannot be read."""


        def parse_port(text: str) -> int:
            """Parse a TCP port number; refuse anything outside 1..65535."""
            value = int(text)
            if not 1 <= value <= 65535:
                raise ConfigError(f"port {value} out of range")
            return value


        def load_settings(path: str) -> Settings:
            """Read the settings file at `path` (key=value lines)."""
            pairs = dict(line.split("=", 1) for line in open(path).read().splitlines() if line)
            return Settings(host=pairs["host"], port=parse_port(pairs["port"]), timeout=get(pairs))
    ''',
    "app/server.py": '''
        """The HTTP server loop."""
        from app.config import Settings, load_settings


        def start_server(settings: Settings) -> None:
            """Bind the socket and serve requests until stopped."""
            sock = bind_socket(settings.host, settings.port)
            serve_forever(sock, settings.timeout)


        def bind_socket(host: str, port: int) -> object:
            """Open a listening TCP socket."""
            import socket

            return socket.create_server((host, port))


        def serve_forever(sock: object, timeout: float) -> None:
            """Accept connections one by one."""
            while True:
                handle_connection(sock, timeout)


        def handle_connection(sock: object, timeout: float) -> None:
            """Read one request and answer it."""
            return None


        def main() -> None:
            start_server(load_settings("app.conf"))
    ''',
    "app/tiny.py": '''
        def shout(text: str) -> str:
            """Upper-case a greeting."""
            return text.upper() + "!"


        def whisper(text: str) -> str:
            """Lower-case a greeting."""
            return text.lower() + "..."
    ''',
    "router/router.go": """
        package router

        // Handler answers one request.
        type Handler interface {
            ServeRequest(path string) string
        }

        // Router dispatches requests to mounted handlers by path prefix.
        type Router struct {
            routes map[string]Handler
        }

        // Mount attaches a handler under a path prefix.
        func (r *Router) Mount(prefix string, h Handler) {
            r.routes[prefix] = h
        }

        // Dispatch finds the handler for a path.
        func (r *Router) Dispatch(path string) string {
            for prefix, h := range r.routes {
                if len(path) >= len(prefix) && path[:len(prefix)] == prefix {
                    return h.ServeRequest(path)
                }
            }
            return "404"
        }
    """,
}
# `get` is defined in five places: L2 must not pull all of them in (S5 cap).
FILES.update(
    {
        f"app/util_{n}.py": f'''
        def get(mapping: dict) -> float:
            """Variant {n} of a lookup."""
            return float(mapping.get("timeout{n}", 1))
    '''
        for n in "abcde"
    }
)


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Each text written as it is under `root` (folders made); `root` back."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_repo(root: Path, files: dict[str, str] = FILES) -> Path:
    return write_files(root, {rel: textwrap.dedent(text).lstrip("\n") for rel, text in files.items()})
