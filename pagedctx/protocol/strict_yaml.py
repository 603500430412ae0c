"""YAML that refuses what PyYAML silently accepts (REFERENCE.md "Contracts and evidence").

PyYAML keeps the last of duplicate keys without a word; a config or manifest with a repeated key is
almost always a mistake, so `load_yaml` refuses it and names the line. Only the safe subset of YAML
is read (no Python objects).
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YamlError", "load_yaml"]


class YamlError(ValueError):
    """YAML text that does not parse, or repeats a key; `line`/`column` are 1-based when known."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.message, self.line, self.column))


def _rebuild(message: str, line: int | None, column: int | None) -> YamlError:
    return YamlError(message, line=line, column=column)


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            mark = key_node.start_mark
            try:
                hash(key)
            except TypeError:
                raise YamlError(
                    f"a mapping key must be a scalar, found {type(key).__name__} at line {mark.line + 1}",
                    line=mark.line + 1,
                    column=mark.column + 1,
                ) from None
            if key in seen:
                raise YamlError(
                    f"duplicate key {key!r} at line {mark.line + 1}",
                    line=mark.line + 1,
                    column=mark.column + 1,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely; raises YamlError on syntax errors and duplicate keys."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no Python objects
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        raise YamlError(f"not valid YAML: {exc.problem or exc}", line=line, column=column) from exc
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {exc}") from exc
