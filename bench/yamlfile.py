"""Reading a YAML file the user wrote, with errors that say where and what to fix."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.errors import UserError


def load_yaml(path: Path, what: str):
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}; check the path") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read this {what} ({err.__class__.__name__}); give a readable YAML file") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise UserError(f"{path}: not valid YAML{where}: {problem}; fix the {what}'s syntax") from None
