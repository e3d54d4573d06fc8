"""Option bundles more than one command takes: where the server comes from (`run`, `probe`, `claims`)."""

from __future__ import annotations

import functools

import click

from ..api import Target
from ..errors import ConfigError
from ..provisioners.options import ServerSettings

DSN_OPTIONS = (
    click.option("--dsn", default=None, help="Connection URL or string of an existing server (--target dsn)."),
    click.option("--password-env", default=None, metavar="VAR",
                 help="Take the dsn target's password from this environment variable."),
    click.option("--allow-server-changes", is_flag=True,
                 help="Let the scenario change server-wide settings of a dsn target (restored at the end)."),
    click.option("--server-settings", type=click.Choice([s.value for s in ServerSettings]),
                 default=ServerSettings.APPLY.value, show_default=True,
                 help="as-is: run on a dsn server as it is: settings that need a restart (and, without "
                      "--allow-server-changes, every setting) are left as they are, and each difference from the "
                      "scenario is recorded and shown."),
    click.option("--keep-database", is_flag=True,
                 help="Keep the database of its own a dsn run creates (dropped at the end otherwise)."),
    click.option("--database", default=None, metavar="NAME",
                 help="The database a dsn run creates (dropped at the end unless --keep-database) or uses when it is "
                      "concurbench's or empty, instead of the default (concurbench; on SQL Server concurbench_<run "
                      "id>, or concurbench when kept)."),
    click.option("--allow-xe-without-max-duration", "xe_without_max_duration", is_flag=True,
                 help="SQL Server 2019 and 2022 on a dsn target: run Extended Events observers, which have no "
                      "MAX_DURATION there, so a killed run leaves its session running (capturing in the run's "
                      "database only) until the next run from this machine or `gc --target dsn --yes` drops it."),
)
VERSIONS_HELP = "Server version(s); with several, each gets its own server (run: side by side, one run directory)."
TARGET_KEYS = ("versions", "dsn", "password_env", "image", "host_network", "allow_server_changes", "server_settings",
               "keep_database", "database", "xe_without_max_duration")


def _target_bundle(default: str, versions_help: str) -> tuple:
    return (
        click.option("--target", default=default, show_default=True,
                     help="Where the server comes from: embedded, binaries, docker or dsn."),
        click.option("--server-version", "versions", default=None, metavar="V[,V...]", help=versions_help),
        click.option("--image", default=None, help="Docker image to run (--target docker)."),
        click.option("--host-network", is_flag=True, help="Run containers with host networking (--target docker)."),
        *DSN_OPTIONS,
    )


def target_options(default: str = "embedded", versions_help: str = VERSIONS_HELP):
    """Add the target options to a command (--target, --server-version, --image, --host-network, and the dsn
    target's --dsn, --password-env, --allow-server-changes, --server-settings, --keep-database, --database,
    --allow-xe-without-max-duration) and hand it one `target`, the
    api.Target built from them (and from --keep, when the command has it): the same for every command."""
    def decorate(command):
        @functools.wraps(command)
        def with_target(**kwargs):
            kwargs["target"] = target_of(kwargs.pop("target"), **{k: kwargs.pop(k) for k in TARGET_KEYS},
                                         keep=kwargs.pop("keep", False))
            return command(**kwargs)
        for option in reversed(_target_bundle(default, versions_help)):
            with_target = option(with_target)
        return with_target
    return decorate


def target_of(name: str, *, versions: str | None = None, keep: bool = False, **options) -> Target:
    """The Target of a command's options; `versions` as --server-version gives them (V[,V...])."""
    wanted = tuple(v.strip() for v in versions.split(",") if v.strip()) if versions else ()
    return Target(name, wanted, keep=keep, **options)


def parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    """--param NAME=VALUE pairs as a dict."""
    params = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--param {pair}: expected NAME=VALUE")
        key, value = pair.split("=", 1)
        params[key.strip()] = value.strip()
    return params
