"""YAML loading that keeps line and column numbers, and the problem list validation fills."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from ..errors import ConfigError
from ..util import parse_duration, suggest


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"


def read_text(path: Path, what: str = "scenario file") -> str:
    """A file's text as UTF-8; a file that cannot be read, or is not UTF-8, is a ConfigError naming it
    (and, for bytes that are not UTF-8, the line and column where they start)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror or exc}", cause=exc) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start].decode("utf-8", errors="replace")
        line, col = _line_col(before, len(before))
        problem = Problem(str(path), line, col, "", f"the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                                                    f"offset {exc.start}); save it as UTF-8")
        raise ConfigError(str(problem), problems=[problem], cause=exc) from exc


def _line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset into text."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


# A mistake of these kinds is where the construct opened, not where the parser gave up (the end of the
# file for a quote that is never closed).
_OPENED_AT = {"while scanning a quoted scalar": "the quoted string that starts here is never closed"}


def load_yaml(path: Path, what: str = "scenario file") -> Any:
    """Parse a YAML file into ruamel's round-trip nodes (which carry positions)."""
    yaml = YAML(typ="rt")
    text = read_text(path, what)
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        problem = Problem(str(path), *_yaml_problem(exc))
        raise ConfigError(str(problem), problems=[problem], cause=exc) from exc
    except YAMLError as exc:  # the reader's: a character YAML does not allow (a NUL, a control character)
        position = getattr(exc, "position", None)
        line, col = _line_col(text, position) if isinstance(position, int) else (1, 1)
        char = getattr(exc, "character", None)
        code = ord(char) if isinstance(char, str) and len(char) == 1 else char
        reason = f"the character #x{code:04x} is not allowed in YAML" if isinstance(code, int) else \
            str(getattr(exc, "reason", "") or str(exc).splitlines()[0])
        problem = Problem(str(path), line, col, "", f"not valid YAML: {reason}")
        raise ConfigError(str(problem), problems=[problem], cause=exc) from exc


def _yaml_problem(exc: MarkedYAMLError) -> tuple[int, int, str, str]:
    """Line, column, field path (none) and message of a parser error: where the problem is, and where
    the construct it is in was opened when that is elsewhere."""
    problem, context = exc.problem_mark, exc.context_mark
    what = exc.problem or exc.context or "invalid YAML"
    if context is not None and exc.context in _OPENED_AT:
        end = f" ({what} at {problem.line + 1}:{problem.column + 1})" if problem is not None else ""
        return context.line + 1, context.column + 1, "", f"not valid YAML: {_OPENED_AT[exc.context]}{end}"
    mark = problem or context
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if context is not None and problem is not None and exc.context and (context.line, context.column) != (
            problem.line, problem.column):
        what += f" ({exc.context} at {context.line + 1}:{context.column + 1})"
    return line, col, "", f"not valid YAML: {what}"


def join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class Checker:
    """Collects every problem of one file, each with line, column and field path."""

    def __init__(self, file: Path, what: str = "scenario"):
        self.file = str(file)
        self.what = what  # what the file is, for the heading of the problems
        self.problems: list[Problem] = []

    # -- positions -------------------------------------------------------
    @staticmethod
    def position(parent: Any, key: Any = None, *, of_key: bool = False) -> tuple[int, int]:
        lc = getattr(parent, "lc", None)
        if lc is None:
            return (1, 1)
        try:
            if key is None:
                line, col = lc.line, lc.col
            elif isinstance(parent, CommentedSeq):
                line, col = lc.item(key)
            elif of_key:
                line, col = lc.key(key)
            else:
                line, col = lc.value(key)
        except (KeyError, IndexError, TypeError, AttributeError):
            line, col = lc.line, lc.col
        if line is None or col is None:  # a node made here rather than read from the file
            return (1, 1)
        return (line + 1, col + 1)

    def add(self, parent: Any, key: Any, path: str, message: str, *, of_key: bool = False) -> None:
        line, col = self.position(parent, key, of_key=of_key)
        self.problems.append(Problem(self.file, line, col, path, message))

    # -- shape checks ----------------------------------------------------
    def mapping(self, parent: Any, key: Any, path: str, *, required: bool = False) -> CommentedMap | None:
        node = parent.get(key) if isinstance(parent, dict) else None
        if node is None:
            if required:
                self.add(parent, None, path, "is required but missing")
            return None
        if not isinstance(node, dict):
            self.add(parent, key, path, f"must be a mapping, got {describe(node)}")
            return None
        return node

    def mappings(self, parent: Any, key: str, path: str, *, what: str, item: str = "a mapping"):
        """The mapping items of the list at parent[key] as (index, item, its path); other items are reported."""
        value = parent.get(key) if isinstance(parent, dict) else None
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(parent, key, path, f"must be a list of {what}, got {describe(value)}")
            return []
        out = []
        for i, entry in enumerate(value):
            if isinstance(entry, dict):
                out.append((i, entry, join(path, i)))
            else:
                self.add(value, i, join(path, i), f"must be {item}, got {describe(entry)}")
        return out

    def known_keys(self, node: dict, path: str, allowed: set[str] | list[str], required: tuple = ()) -> None:
        for key in node:
            if str(key).startswith("x-"):  # extension keys hold YAML anchors to reuse, as in compose files
                continue
            if key not in allowed:
                self.add(node, key, join(path, key), f"unknown key '{key}'{suggest(key, allowed)}", of_key=True)
        for key in required:
            if key not in node:
                self.add(node, None, join(path, key), "is required but missing")

    def string(self, node: dict, key: str, path: str, *, required: bool = False, default: str | None = None):
        if key not in node or node[key] is None:
            if required:
                self.add(node, None, join(path, key), "is required but missing")
            return default
        value = node[key]
        if isinstance(value, (dict, list)):
            self.add(node, key, join(path, key), f"must be a string, got {describe(value)}")
            return default
        return str(value)

    def integer(self, node: dict, key: str, path: str, *, minimum: int | None = None, default=None):
        if key not in node or node[key] is None:
            return default
        value = node[key]
        number = as_int(value)
        if number is None:
            self.add(node, key, join(path, key), f"must be an integer, got {describe(value)}")
            return default
        if minimum is not None and number < minimum:
            self.add(node, key, join(path, key), f"must be at least {minimum}, got {number}")
            return default
        return number

    def boolean(self, node: dict, key: str, path: str, *, default: bool = False) -> bool:
        if key not in node or node[key] is None:
            return default
        value = node[key]
        if not isinstance(value, bool):
            self.add(node, key, join(path, key), f"must be true or false, got {describe(value)}")
            return default
        return value

    def duration(self, node: dict, key: str, path: str, *, default: float | None = None):
        if key not in node or node[key] is None:
            return default
        value = node[key]
        seconds = parse_duration(value)
        if seconds is None or seconds < 0:
            self.add(node, key, join(path, key),
                     f"must be a duration such as 30s, 500ms, 2m or a number of seconds, got {describe(value)}")
            return default
        return seconds

    def fail(self) -> None:
        if self.problems:
            count = len(self.problems)
            head = f"{self.file}: {count} problem{'s' if count > 1 else ''} in the {self.what}"
            raise ConfigError("\n".join([head, *(f"  {p}" for p in self.problems)]), problems=self.problems)


def describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if text.lstrip("-").isdigit():
            return int(text)
    return None
