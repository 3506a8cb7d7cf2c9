"""What is wrong with a config file, where: key paths, lines, and the one error they make."""

from __future__ import annotations

from dataclasses import dataclass

from config.errors import ConfigError
from config.secrets import redact_text

KeyPath = tuple[str | int, ...]
"""Where a value sits in the YAML: mapping keys and sequence indexes."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config file, at a key path and line."""

    path: KeyPath
    message: str
    line: int | None

    def render(self, file: str) -> str:
        """``key.path: message (file line N)``."""
        where = f"{file} line {self.line}" if self.line else file
        return f"{format_path(self.path)}: {self.message} ({where})"


def format_path(path: KeyPath) -> str:
    """``('strategy', 'prefer', 1)`` → ``strategy.prefer[1]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


def line_at(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of ``path``, or of its nearest recorded ancestor."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def config_error(problems: list[Problem], file: str, secrets: list[str]) -> ConfigError:
    """One error listing every problem, in file order, with secrets scrubbed."""
    problems = sorted(set(problems), key=lambda p: (p.line or 0, format_path(p.path), p.message))
    rendered = [p.render(file) for p in problems]
    if len(rendered) == 1:
        text = rendered[0]
    else:
        text = f"{file}: {len(rendered)} problems\n" + "\n".join(f"  {r}" for r in rendered)
    # A very short password may also mask an ordinary word; printing it would be worse.
    return ConfigError(redact_text(text, secrets))
