"""Profiles whose llama.cpp servers are the stand-in (`llama_stand_in.py`), for the lifecycle tests of
actors/llama_server.py (issue 32). A helper module, not a test module."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ray_support import start_time

__all__ = ["STAND_IN", "WORKER_ANSWER", "fake_weights", "gone", "stand_in_profile", "start_stand_in"]

STAND_IN = Path(__file__).with_name("llama_stand_in.py")
META = {"confidence": 0.9, "risk": "low", "explain": "from the view", "model": "stand-in"}
WORKER_ANSWER = json.dumps(
    {"ok": True, "meta": META, "data": {"actions": [], "answer": "port 9090", "rationale": "turn t3"}}
)


def fake_weights(folder: Path) -> tuple[Path, str]:
    """A small file standing for a GGUF model, and its sha256."""
    path = folder / "stand-in.gguf"
    path.write_bytes(b"GGUF stand-in weights\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def stand_in_profile(
    folder: Path,
    ports: dict[str, int],
    roles: dict[str, str],
    *,
    sha256: str | None = None,
    launcher: bool = True,
    start_timeout_s: float = 20.0,
) -> Path:
    """A profile (YAML file) with one stand-in server per `ports` entry (alias `stand-in-NAME`) and
    `roles` (role -> server name) reaching them through the OpenAI backend."""
    weights, digest = fake_weights(folder)
    servers = {
        name: {
            "alias": f"stand-in-{name}",
            "port": port,
            "n_ctx": 2048,
            "weights": {"path": str(weights), "sha256": sha256 or digest},
            **({"launcher": [sys.executable, str(STAND_IN)]} if launcher else {}),
        }
        for name, port in ports.items()
    }
    models = {
        "llama_cpp": {"threads": 1, "start_timeout_s": start_timeout_s, "servers": servers},
        "roles": {
            role: {
                "backend": "openai",
                "model": f"stand-in-{name}",
                "base_url": f"http://127.0.0.1:{ports[name]}/v1",
            }
            for role, name in roles.items()
        },
    }
    path = folder / "stand-in.yaml"
    path.write_text(json.dumps({"runtime": "inproc", "models": models}, indent=1))  # JSON is YAML
    return path


def start_stand_in(
    port: int, alias: str, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A stand-in server started by the test itself (one a command must find and leave alone);
    `env`: its STAND_IN_* settings."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, str(STAND_IN), "--model", "x", "--model_alias", alias, "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )  # fmt: skip
    deadline = time.monotonic() + 20
    while "listening" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc


def gone(pid: int, started: str | None, timeout: float = 10.0) -> bool:
    """Whether the process (its pid and start time) ended within `timeout`."""
    deadline = time.monotonic() + timeout
    while start_time(pid) == started and started is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
