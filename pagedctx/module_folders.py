"""The module-folders door: the contract-first module folders (`configs/modules/<name>/`: prompt,
schemas, manifest) for `pagedctx modules` and `pagedctx envelope`: list, load, find and validate
them. The work is in `pagedctx.host.modules`.
"""

from __future__ import annotations

from pagedctx.host.modules import (
    default_root,
    list_modules,
    load_module,
    resolve_module_dir,
    validate_module_dir,
)

__all__ = ["default_root", "list_modules", "load_module", "resolve_module_dir", "validate_module_dir"]
