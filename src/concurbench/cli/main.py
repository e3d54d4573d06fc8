"""The command line: a thin layer that builds library objects, calls them and prints.

Commands are imported when they are called (`concurbench history add` does not load the runner, the
provisioners or pandas), from the modules COMMANDS names.

Exit codes: 0 success, 1 the run failed or is incomplete, 2 usage or scenario error, 3 a claim failed
(`--check`), 4 a claim could not be decided (`--check`), 5 `history check` found a regression, 6 `--history`
could not add the run, 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from .. import __version__
from ..errors import ConcurbenchError
from .console import err
from .errors import fail as _fail
from .exits import EXIT_INTERRUPTED, EXIT_RUN_FAILED, EXIT_USAGE
from .lazy import LazyGroup

COMMANDS = {  # name -> module of concurbench.cli : the command object
    "run": "run:run", "validate": "scenario_files:validate", "list": "scenario_files:list_",
    "probe": "probe:probe", "doctor": "housekeeping:doctor", "gc": "housekeeping:gc_command", "report": "stored:report",
    "results": "stored:results", "compare": "compare:compare", "claims": "claims:claims", "merge": "merge:merge",
    "history": "history:history", "cluster": "cluster:cluster",
}


@click.group(cls=LazyGroup, where=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="concurbench")
def cli() -> None:
    """Database concurrency experiments: one YAML scenario, one command."""


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except ConcurbenchError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - the last guard: one paragraph, no traceback unless asked
        if os.environ.get("CONCURBENCH_DEBUG"):
            traceback.print_exc()
        err.print(f"[red]internal error:[/red] {type(exc).__name__}: {exc} "
                  f"(set CONCURBENCH_DEBUG=1 for the traceback)", highlight=False, soft_wrap=True)
        sys.exit(EXIT_RUN_FAILED)


if __name__ == "__main__":
    main()
