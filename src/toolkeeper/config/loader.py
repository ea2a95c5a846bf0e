"""Reading ``toolkeeper.yaml``: YAML → node positions → validated :class:`ConfigFile`.

Every problem — YAML syntax, duplicate keys, schema validation — raises one
:class:`~toolkeeper.errors.ConfigError` carrying the first problem's position and *all*
problems as ``file:line:col: path: message`` strings. Values are taken literally:
there is no environment interpolation (secrets are ``${secret:connector/key}`` references
resolved at call time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from toolkeeper.config.model import TOOL_ENTRY_TAGS, ConfigFile, NodePath, render_path
from toolkeeper.errors import ConfigError

Positions = dict[NodePath, tuple[int, int]]


def load_file(path: str | Path) -> ConfigFile:
    """Load and validate the config file at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror or exc}", path=str(p)) from exc
    return load_text(text, str(p))


def load_text(text: str, path: str = "<string>") -> ConfigFile:
    """Validate config ``text``; ``path`` names it in error messages."""
    node, data = _parse(text, path)
    positions: Positions = {}
    problems: list[tuple[int, int, str]] = []
    _walk(node, (), positions, problems)
    if problems:
        _raise(path, problems)
    if not isinstance(data, dict):
        raise ConfigError("the config must be a mapping (version: 1, tools: …)", path=path,
                          line=1, column=1)
    try:
        config = ConfigFile.model_validate(data)
    except ValidationError as exc:
        _raise(path, [_problem(err, positions) for err in exc.errors()])
    config._source = path
    config._positions = positions
    return config


def _parse(text: str, path: str) -> tuple[yaml.Node, Any]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(s for s in (exc.context, exc.problem) if s) or str(exc)
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        where = f"{path}:{line}:{column}" if mark else path
        raise ConfigError(f"YAML syntax: {message}", path=path, line=line, column=column,
                          problems=[f"{where}: YAML syntax: {message}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML: {exc}", path=path) from None
    finally:
        loader.dispose()
    if node is None:
        raise ConfigError("the config is empty (it needs at least `version: 1`)", path=path,
                          line=1, column=1)
    return node, data


def _walk(node: yaml.Node, path: NodePath, positions: Positions,
          problems: list[tuple[int, int, str]]) -> None:
    """Record each node's position; report duplicate mapping keys, which PyYAML accepts."""
    positions.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append((line, key_node.start_mark.column + 1,
                                 f"{render_path((*path, key))}: duplicate key {key!r} "
                                 f"(first at line {seen[key]})"))
                continue
            seen[key] = line
            child = (*path, key)
            positions[child] = (line, key_node.start_mark.column + 1)
            _walk(value_node, child, positions, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), positions, problems)


def _node_path(loc: tuple[int | str, ...], positions: Positions) -> NodePath:
    """Map a pydantic ``loc`` onto the file: drop union tags, stringify mapping keys."""
    out: list[str | int] = []
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "tools" and part in TOOL_ENTRY_TAGS:
            continue  # the tagged-union member name is not a node of the file
        if part == "[key]":
            continue
        key: str | int = part
        if isinstance(part, int) and (*out, part) not in positions \
                and (*out, str(part)) in positions:
            key = str(part)  # an integer mapping key (autonomy levels): nodes keep text
        out.append(key)
    return tuple(out)


def _problem(err: Any, positions: Positions) -> tuple[int, int, str]:
    path = _node_path(tuple(err["loc"]), positions)
    line, column = 0, 0
    for end in range(len(path), -1, -1):
        if path[:end] in positions:
            line, column = positions[path[:end]]
            break
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key (not allowed here)"
    return line, column, f"{render_path(path)}: {message}"


def _raise(path: str, problems: list[tuple[int, int, str]]) -> NoReturn:
    problems = sorted(problems, key=lambda p: (p[0], p[1]))
    rendered = [f"{path}:{line}:{col}: {msg}" if line else f"{path}: {msg}"
                for line, col, msg in problems]
    line, column, first = problems[0]
    count = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise ConfigError(first + count, path=path, line=line or None, column=column or None,
                      problems=rendered)
