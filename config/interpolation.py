"""``${VAR}`` and ``${VAR:-default}`` in a config's string values, from the environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.problems import KeyPath, Problem

# ``$${`` is a literal ``${``; ``${`` not followed by NAME or NAME:-default} is malformed.
_VARIABLE = re.compile(
    r"\$\$\{|\$\{(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\})?"
)
_MALFORMED = "malformed ${...}: write ${NAME} or ${NAME:-default} ($${ for a literal ${)"


def interpolate(value: Any, env: Mapping[str, str], path: KeyPath, problems: list[Problem]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string value (keys stay as written).

    A value with an unset variable is kept as written and reported in ``problems``.
    """
    if isinstance(value, dict):
        return {k: interpolate(v, env, (*path, k), problems) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, (*path, i), problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        name = match["name"]
        if name is None:
            missing.append(_MALFORMED)
            return match[0]
        if env.get(name):  # like the shell's ${VAR:-default}, an empty value takes the default
            return env[name]
        if match["default"] is not None:
            return match["default"]
        if name in env:
            return ""
        fix = "${" + name + ":-default}"
        missing.append(f"environment variable {name} is not set; set it or write {fix}")
        return match[0]

    result = _VARIABLE.sub(substitute, value)
    problems += [Problem(path, message, None) for message in missing]
    return value if missing else result
