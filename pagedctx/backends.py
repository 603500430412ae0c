"""The backends door: what a model role runs on, for faces that hand a role its own backend (a
replayed evolution answers its generator from recorded calls, in order or by request): the
`ModelBackend` protocol with its request and reply, and the recorded, replayed, scripted and
function backends, and the module runner that puts a module's contract between a role and its
backend (one retry with the violations). Roles themselves are built by the `Engine`.
"""

from __future__ import annotations

from pagedctx.host.models.base import ModelBackend, ModelReply, ModelRequest
from pagedctx.host.models.recorded import FunctionBackend, ReplayBackend, ScriptedBackend
from pagedctx.host.models.runner import ModelModuleRunner

__all__ = [
    "FunctionBackend",
    "ModelBackend",
    "ModelModuleRunner",
    "ModelReply",
    "ModelRequest",
    "ReplayBackend",
    "ScriptedBackend",
]
