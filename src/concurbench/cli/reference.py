"""docs/commands.md's reference part, made from the click command tree, so the page cannot drift from
the code: every command and subcommand, its arguments, and every option with its default.

    python -m concurbench.cli.reference [docs/commands.md]   # rewrites the part between the markers

tests/unit/test_docs_match.py fails when the committed page differs from what this makes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .main import cli

BEGIN = "<!-- reference: made by python -m concurbench.cli.reference; edit the commands' help, not this -->"
END = "<!-- end of reference -->"


def commands(group: click.Group = cli, prefix: str = "concurbench") -> list[tuple[str, click.Command]]:
    """(full name, command) for every command below the group, subcommands after their group."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        full = f"{prefix} {name}"
        out.append((full, command))
        if isinstance(command, click.Group):
            out.extend(commands(command, full))
    return out


def markdown() -> str:
    parts = [BEGIN, ""]
    for full, command in commands():
        parts += _command(full, command)
    parts.append(END)
    return "\n".join(parts)


def _command(full: str, command: click.Command) -> list[str]:
    args = " ".join(_argument(p) for p in command.params if isinstance(p, click.Argument))
    is_group = isinstance(command, click.Group)
    usage = f"{full} {'COMMAND' if is_group else '[OPTIONS]'}{' ' + args if args else ''}"
    out = [f"### {full}", "", f"`{usage}`", ""]
    text = (command.help or "").strip()
    if text:
        out += [" ".join(text.split("\n\n")[0].split()), ""]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if options:
        out += ["| option | value | default | what it does |", "|---|---|---|---|"]
        for option in options:
            out.append(f"| {_names(option)} | {_value(option)} | {_default(option)} | {_cell(option.help or '')} |")
        out.append("")
    return out


def _argument(arg: click.Argument) -> str:
    name = arg.human_readable_name.upper()
    name += "..." if arg.nargs == -1 else ""
    return name if arg.required else f"[{name}]"


def _names(option: click.Option) -> str:
    names = ", ".join(f"`{n}`" for n in sorted(option.opts, key=len))
    if option.secondary_opts:
        names += ", " + ", ".join(f"`{n}`" for n in option.secondary_opts)
    return names + (" (repeatable)" if option.multiple else "")


def _value(option: click.Option) -> str:
    if option.is_flag:
        return "flag"
    if isinstance(option.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in option.type.choices)
    return _cell(f"`{option.metavar}`") if option.metavar else option.type.name.upper()


def _default(option: click.Option) -> str:
    if option.is_flag or option.default in (None, (), [], False) or not option.show_default:
        return ""
    default = option.default() if callable(option.default) else option.default
    return f"`{default}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rewrite(path: Path) -> bool:
    """Put the reference between the markers of `path`; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: the markers of the reference are missing ({BEGIN!r} ... {END!r})")
    new = text[:start] + markdown() + text[end + len(END):]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/commands.md")
    print(f"{path}: {'rewritten' if rewrite(path) else 'already up to date'}")


if __name__ == "__main__":
    main()
