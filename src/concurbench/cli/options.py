"""Option bundles more than one command takes: where the server comes from (`run`, `probe`)."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..provisioners.registry import APPLY, SERVER_SETTINGS, TargetOptions

DSN_OPTIONS = (
    click.option("--dsn", default=None, help="Connection URL or string of an existing server (--target dsn)."),
    click.option("--password-env", default=None, metavar="VAR",
                 help="Take the dsn target's password from this environment variable."),
    click.option("--allow-server-changes", is_flag=True,
                 help="Let the scenario change server-wide settings of a dsn target (restored at the end)."),
    click.option("--server-settings", type=click.Choice(SERVER_SETTINGS), default=APPLY, show_default=True,
                 help="as-is: run on a dsn server as it is: settings that need a restart (and, without "
                      "--allow-server-changes, every setting) are left as they are, and each difference from the "
                      "scenario is recorded and shown."),
)
TARGET_OPTIONS = (
    click.option("--target", default="embedded", show_default=True,
                 help="Where the server comes from: embedded, binaries, docker or dsn."),
    click.option("--server-version", "versions", default=None, metavar="V[,V...]",
                 help="Server version(s); with several, each gets its own server (run: side by side, one run directory)."),
    click.option("--image", default=None, help="Docker image to run (--target docker)."),
    click.option("--host-network", is_flag=True, help="Run containers with host networking (--target docker)."),
    *DSN_OPTIONS,
)


def _with(options, command):
    for option in reversed(options):
        command = option(command)
    return command


def target_options(command):
    """Add the target options to a command: --target, --server-version, --image, --host-network, and the dsn
    target's --dsn, --password-env, --allow-server-changes, --server-settings."""
    return _with(TARGET_OPTIONS, command)


def dsn_options(command):
    """Add the dsn target's options to a command: --dsn, --password-env, --allow-server-changes, --server-settings."""
    return _with(DSN_OPTIONS, command)


def server_versions(model, target: str, versions: str | None, image: str | None) -> list[str | None]:
    """The versions to provision: --server-version's list, else the scenario's own matrix (docker, binaries)."""
    wanted = [v.strip() for v in versions.split(",") if v.strip()] if versions else [None]
    if not versions and not image and model.versions and target in ("docker", "binaries"):
        wanted = list(model.versions)  # the scenario's own version matrix (server.versions)
    return wanted


def target_of(target: str, version: str | None, *, dsn, password_env, image, host_network, allow_server_changes,
              server_settings: str = APPLY, keep: bool = False, model=None, progress=None) -> TargetOptions:
    return TargetOptions(target=target, server_version=version, dsn=dsn, password_env=password_env, image=image,
                         images=model.images if model is not None else (), host_network=host_network, keep=keep,
                         allow_server_changes=allow_server_changes, server_settings=server_settings,
                         extra={"progress": progress})


def parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    """--param NAME=VALUE pairs as a dict."""
    params = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--param {pair}: expected NAME=VALUE")
        key, value = pair.split("=", 1)
        params[key.strip()] = value.strip()
    return params
