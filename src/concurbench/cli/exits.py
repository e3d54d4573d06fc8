"""Exit codes of the commands, and the one that sums up a check of claims.

0 success, 1 the run failed (or a variant run is incomplete), 2 usage or scenario error (nothing was
run), 3 a claim failed (`--check`), 4 a claim could not be decided (`--check`), 5 `history check` found a
regression (a new finding on a series that ran in the check), 6 `run --history` (or `claims --history`)
ended well but could not add the run to the history store, 130 interrupted.
"""

from __future__ import annotations

from ..check import check_outcome
from .console import err

EXIT_RUN_FAILED, EXIT_USAGE, EXIT_CLAIM_FAILED, EXIT_UNDECIDED, EXIT_INTERRUPTED = 1, 2, 3, 4, 130
EXIT_REGRESSION, EXIT_HISTORY_NOT_ADDED = 5, 6


def check_exit_code(claims) -> int | None:
    """--check: say how many claims failed or were left undecided; the exit code (3, 4), or None when all held."""
    failed, undecided = check_outcome(claims)
    if failed:
        err.print(f"[red]check failed:[/red] {failed} of {len(claims)} claims do not hold", highlight=False)
        return EXIT_CLAIM_FAILED
    if undecided:
        err.print(f"[yellow]check undecided:[/yellow] {undecided} of {len(claims)} claims could not be decided "
                  f"(see the reasons in the claims table)", highlight=False)
        return EXIT_UNDECIDED
    return None
