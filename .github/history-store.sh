#!/usr/bin/env bash
# The history store's branch, fetched before a night (or an ack) and pushed after it, so that nothing
# anyone pushed is erased. .github/workflows/history.yml uses it, and so does the ack procedure in
# docs/history.md; tests/e2e/test_history_store_script.py runs it against a local bare repository.
#
#   .github/history-store.sh fetch    # the branch's store into $HISTORY_STORE, or a new store when there is no branch
#   .github/history-store.sh push     # the store back, as the one file of one commit, over the commit fetched only
#
# fetch: `git ls-remote --exit-code` tells a branch that does not exist (exit 2: `concurbench history
# init` makes an empty store, and this night starts the history) from a remote that cannot be asked
# (any other code: fetch fails and makes nothing). The store is written to a temporary file and moved
# into place only when whole, so a failure never leaves an empty file; a store already here gets the
# branch's merged into it instead. The commit fetched ("none": no branch) is kept in
# $HISTORY_STORE.lease for the push.
#
# push: the store goes only where the lease says the branch still is: `git push
# --force-with-lease=refs/heads/$STORE_BRANCH:<the commit fetched>` (or expecting no branch). When the
# lease fails, someone pushed meanwhile (the nightly job, a person's ack): their commit is fetched, its
# store merged into ours (`concurbench history merge`), and the push tried again, at most
# $HISTORY_PUSH_TRIES times. Never a plain --force. Before each try the store fetched is merged into
# ours, so a push never loses a run, finding or acknowledgement the branch held; an empty file, or one
# that is no history store, is refused and never pushed.
#
# Settings (environment): STORE_BRANCH (concurbench-history), HISTORY_STORE (history.db), HISTORY_REMOTE
# (origin), HISTORY_PUSH_TRIES (5), HISTORY_MESSAGE (the commit's message). Exit codes: 0 done, 1 git
# or a merge failed, or the tries ran out (the message says which), 2 usage, or a store that may not be
# pushed.
set -euo pipefail

branch=${STORE_BRANCH:-concurbench-history}
store=${HISTORY_STORE:-history.db}
remote=${HISTORY_REMOTE:-origin}
tries=${HISTORY_PUSH_TRIES:-5}
lease_file="$store.lease"
on_branch=history.db               # the store's name in the branch's commit
fetched=refs/history-store/fetched  # where the commit fetched is kept (so git keeps its objects)
none=none                           # the lease when there was no branch

say() { echo "history-store: $*" >&2; }
fail() { local code=$1; shift; say "$*"; exit "$code"; }

tmp=""
trap '[ -z "$tmp" ] || rm -f -- "$tmp"' EXIT

# The branch's commit on the remote, or "none" when it has no such branch; exit 1 when the remote cannot
# be asked (the caller's command substitution fails with it).
remote_head() {
  local out code=0
  out=$(git ls-remote --exit-code "$remote" "refs/heads/$branch") || code=$?
  case $code in
    0) echo "${out%%[[:space:]]*}" ;;
    2) echo "$none" ;;
    *) fail 1 "cannot list $remote's branches (git ls-remote exited $code): nothing was fetched, made or pushed" ;;
  esac
}

# Fetch the branch's commit; print its sha.
fetch_commit() {
  git fetch --quiet --no-tags --depth=1 "$remote" "+refs/heads/$branch:$fetched" \
    || fail 1 "cannot fetch $branch from $remote: nothing was fetched, made or pushed"
  git rev-parse --verify --quiet "$fetched^{commit}" || fail 1 "the fetch of $branch left no commit"
}

# The store of commit $1 written whole to a new temporary file next to ours; its path in $tmp.
take_out() {
  git cat-file -e "$1:$on_branch" 2>/dev/null \
    || fail 1 "commit $1 of $branch holds no $on_branch: nothing was made (is $branch the history's branch?)"
  tmp=$(mktemp "$store.fetched.XXXXXX")
  git cat-file blob "$1:$on_branch" >"$tmp" || fail 1 "cannot read $on_branch from commit $1"
}

# Bring the store of commit $1 into ours (ours made from it when we have none).
merge_from() {
  take_out "$1"
  if [ -e "$store" ]; then
    concurbench history merge "$tmp" --store "$store" >&2 \
      || fail 1 "merging $branch's store (commit $1) into $store failed (see above): nothing was pushed"
    rm -f -- "$tmp"
  else
    mv -- "$tmp" "$store"
  fi
  tmp=""
}

do_fetch() {
  local head sha
  head=$(remote_head) || exit 1
  if [ "$head" = "$none" ]; then
    concurbench history init "$store" >&2 || fail 1 "cannot make a store at $store"
    say "no store yet: this night starts the history ($remote has no branch $branch)"
    echo "$none" >"$lease_file"
    return
  fi
  sha=$(fetch_commit) || exit 1
  merge_from "$sha"
  echo "$sha" >"$lease_file"
  say "fetched $store from $branch at ${sha:0:12}"
}

# A commit without parents whose one file is our store; print its sha (nothing when its tree is the lease's).
make_commit() {
  local blob tree ident=()
  blob=$(git hash-object -w -- "$store")
  tree=$(printf '100644 blob %s\t%s\n' "$blob" "$on_branch" | git mktree)
  if [ "$1" != "$none" ] && [ "$(git rev-parse "$1^{tree}")" = "$tree" ]; then
    return
  fi
  git config user.email >/dev/null || ident=(-c "user.name=concurbench history" -c
                                            "user.email=history@users.noreply.github.com")
  git ${ident[@]+"${ident[@]}"} commit-tree "$tree" -m "${HISTORY_MESSAGE:-history store}"
}

do_push() {
  local lease commit head try
  [ -f "$lease_file" ] || fail 2 "no $lease_file here: fetch the store first (.github/history-store.sh fetch)"
  lease=$(cat "$lease_file")
  [ -s "$store" ] || fail 2 "$store is missing or empty: an empty file is never pushed over $branch (fetch again)"
  for ((try = 1; try <= tries; try++)); do
    if [ "$lease" = "$none" ]; then  # a store of ours: refused here when it is no history store
      concurbench history init "$store" >&2 || fail 2 "$store is no history store: nothing was pushed"
    else  # what the branch held, in ours (nothing comes in when ours was made from it)
      merge_from "$lease"
    fi
    commit=$(make_commit "$lease")
    if [ -z "$commit" ]; then
      say "$store is as $branch holds it: nothing to push"
      return
    fi
    if git push --quiet --force-with-lease="refs/heads/$branch:${lease#"$none"}" "$remote" \
        "$commit:refs/heads/$branch"; then
      echo "$commit" >"$lease_file"
      say "pushed $store to $branch at ${commit:0:12}"
      return
    fi
    head=$(remote_head) || exit 1
    [ "$head" != "$lease" ] \
      || fail 1 "the push to $branch failed, and not because someone pushed meanwhile (see git's message above)"
    say "someone pushed $branch meanwhile (now ${head:0:12}): merging their store into ours, then trying again"
    if [ "$head" = "$none" ]; then
      lease=$none
    else
      lease=$(fetch_commit) || exit 1
    fi
  done
  fail 1 "$branch kept moving: gave up after $tries tries; $store keeps tonight's runs (push it again)"
}

case "${1:-}" in
  fetch) do_fetch ;;
  push) do_push ;;
  *) fail 2 "usage: $0 fetch|push (the history store's branch: see the comment at the top of this script)" ;;
esac
