#!/usr/bin/env bash
# install_user_token (scripts/lib/user_token.sh), the quickstart's placing of the admin token
# in the user's config directory, in each case it tells apart. ACCEPT_CMD is `true` or `false`
# here: whether the cluster would take the user's own token.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/user_token.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect WHAT CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}
same() { cmp -s "$1" "$2"; }
has() { grep -q -- "$2" "$1"; }
hasnt() { ! grep -q -- "$2" "$1"; }
quiet() { [ ! -s "$tmp/out" ] && [ ! -s "$tmp/err" ]; }

admin=$tmp/state/admin-token
user=$tmp/config/ringmaster/token
mkdir -p "$tmp/state"
echo "rmt_cluster_one" >"$admin"

# No token yet: written, 0600, with the copy that marks it as the quickstart's.
install_user_token "$admin" "$user" false >"$tmp/out" 2>"$tmp/err"
expect "a missing token is written" same "$user" "$admin"
expect "with the quickstart's copy" same "$user.quickstart" "$admin"
expect "readable by the user alone" [ "$(stat -c %a "$user")" = 600 ]
expect "silently" quiet

# The same cluster again: nothing to do.
install_user_token "$admin" "$user" false >"$tmp/out" 2>"$tmp/err"
expect "the same token is left alone, silently" quiet

# A new cluster (the state directory was emptied): the quickstart's old token is replaced.
echo "rmt_cluster_two" >"$admin"
install_user_token "$admin" "$user" false >"$tmp/out" 2>"$tmp/err"
expect "the quickstart's token of an earlier cluster is replaced" same "$user" "$admin"
expect "and its copy too" same "$user.quickstart" "$admin"
expect "saying so" has "$tmp/out" "Replacing the token an earlier quickstart cluster left"

# The user's own token, which this cluster takes: kept, silently.
echo "rmt_the_users_own" >"$user"
install_user_token "$admin" "$user" true >"$tmp/out" 2>"$tmp/err"
expect "the user's own accepted token is kept" has "$user" "rmt_the_users_own"
expect "silently" quiet

# The user's own token, which this cluster refuses: kept, with a warning and what to do.
install_user_token "$admin" "$user" false >"$tmp/out" 2>"$tmp/err"
expect "the user's own refused token is kept" has "$user" "rmt_the_users_own"
expect "with a warning" has "$tmp/err" "is not a token of this cluster"
expect "naming the admin token to use" has "$tmp/err" "export RINGMASTER_TOKEN=\$(cat $admin)"
expect "the copy is untouched" hasnt "$user.quickstart" "rmt_the_users_own"

# No admin token yet (the scheduler did not write one): nothing changes.
rm "$admin"
install_user_token "$admin" "$user" false >"$tmp/out" 2>"$tmp/err"
expect "without an admin token nothing changes" has "$user" "rmt_the_users_own"

# install_user_config: the config file a new shell's ringctl reads, by the same rules.
config=$tmp/config/ringmaster/config
install_user_config 127.0.0.1:7070 /q/certs/ca.crt "$config" >"$tmp/out" 2>"$tmp/err"
expect "a missing config is written" has "$config" "^scheduler: 127.0.0.1:7070$"
expect "with the CA" has "$config" "^tls_ca: /q/certs/ca.crt$"
expect "and the quickstart's copy" same "$config" "$config.quickstart"
expect "silently" quiet
install_user_config 127.0.0.1:7070 /q/certs/ca.crt "$config" >"$tmp/out" 2>"$tmp/err"
expect "the same config is left alone, silently" quiet
install_user_config 127.0.0.1:7171 /q/certs/ca.crt "$config" >"$tmp/out" 2>"$tmp/err"
expect "a new cluster's address replaces the quickstart's old config" has "$config" "7171"
expect "saying so" has "$tmp/out" "Replacing the config an earlier quickstart cluster left"
printf 'scheduler: prod:7070\n' >"$config"
install_user_config 127.0.0.1:7272 /q/certs/ca.crt "$config" >"$tmp/out" 2>"$tmp/err"
expect "the user's own config is kept" has "$config" "prod:7070"
expect "with what to export instead" has "$tmp/err" \
  "export RINGMASTER_SCHEDULER=127.0.0.1:7272 RINGMASTER_TLS_CA=/q/certs/ca.crt"

[ "$failures" -eq 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
