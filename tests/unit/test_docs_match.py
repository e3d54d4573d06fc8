"""Docs that cannot drift from the code: docs/commands.md's reference part is what the click command tree
gives, docs/development.md's source map names every folder and root module of the package, and docs/targets.md's
table of what each target can do is the targets' registry."""

from __future__ import annotations

import re
from pathlib import Path

from concurbench.cli import reference

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "concurbench"


def test_the_commands_page_has_every_command_and_option_as_the_code_gives_them():
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    start, end = text.find(reference.BEGIN), text.find(reference.END)
    assert start >= 0 and end > start, "docs/commands.md lost the reference markers"
    committed = text[start:end + len(reference.END)]
    assert committed == reference.markdown(), (
        "docs/commands.md differs from the commands: run `python -m concurbench.cli.reference docs/commands.md`")


def test_the_reference_covers_every_command_and_subcommand():
    names = [full for full, _ in reference.commands()]
    assert {"concurbench run", "concurbench claims", "concurbench history", "concurbench history check"} <= set(names)
    for full, command in reference.commands():
        for option in command.params:
            for opt in getattr(option, "opts", []):
                if opt.startswith("--"):
                    assert f"`{opt}`" in reference.markdown(), f"{full} {opt}"


def test_the_source_map_names_every_folder_and_root_module():
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    layout = re.search(r"## Layout.*?```(.*?)```", text, re.S).group(1)
    folders = sorted(p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    missing = [name for name in folders + modules if not re.search(rf"(?<![\w/]){re.escape(name)}", layout)]
    assert not missing, f"docs/development.md's layout does not name {', '.join(missing)}"
    gone = [name for name in re.findall(r"^  ([a-z_]+(?:\.py|/))", layout, re.M) if name not in folders + modules]
    assert not gone, f"docs/development.md's layout names what the package no longer has: {', '.join(gone)}"


def test_the_readme_is_the_front_door():
    """Two commands first (one runs a scenario, one the tests), then under 10 kB in all: measurements live
    in docs/, one line and a link each."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.match(r"```sh\n(.*?)\n```", text, re.S)
    assert block, "the README starts with a sh block"
    commands = block.group(1).splitlines()
    assert len(commands) == 2 and "concurbench run" in commands[0] and "pytest" in commands[1]
    assert len(text.encode()) < 10_000, f"README.md is {len(text.encode()):,} bytes"


def test_the_docs_name_no_local_paths():
    """A developer's checkout or home (/work/..., /home/..., /root/...) means nothing on a reader's machine."""
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"(?<![\w.])/(work|home|root)/", line)]
    assert not found, "\n".join(found)


def test_the_targets_table_is_what_the_registry_says():
    """docs/targets.md's table of what each target can do, row for row from provisioners/registry.py's TargetSpecs."""
    from concurbench.provisioners.registry import TARGETS

    text = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    rows = {cells[0]: cells[1:] for line in text.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]] if cells[0] in TARGETS}
    yes = {True: "yes", False: "no"}
    assert rows == {name: [", ".join(t.engines), yes[t.owns_server], yes[t.on_this_machine], yes[t.version_matrix],
                           yes[t.as_is], yes[t.keep_database], yes[t.database], yes[t.xe_without_max_duration]]
                    for name, t in TARGETS.items()}
