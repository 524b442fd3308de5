# shellcheck shell=bash
# install_user_token ADMIN_TOKEN_FILE USER_TOKEN_FILE ACCEPT_CMD...
# Puts a cluster's admin token where the user's ringctl and Python client look for it
# (scripts/quickstart). A token there that the quickstart did not write is never overwritten;
# one it wrote for an earlier cluster (its state directory gone, say after a reboot emptied
# /tmp) is replaced, or every ringctl command afterwards would be UNAUTHENTICATED.
# USER_TOKEN_FILE.quickstart is a copy of what was written last, to tell the two apart.
# ACCEPT_CMD runs only for a token of the user's own: it must succeed when the cluster accepts
# the token in USER_TOKEN_FILE; when it fails, a warning says how to use the admin token.
install_user_token() {
  local admin=$1 user=$2
  shift 2
  local ours=$user.quickstart
  [ -s "$admin" ] || return 0
  cmp -s "$user" "$admin" && return 0
  if [ ! -e "$user" ] || { [ -f "$ours" ] && cmp -s "$user" "$ours"; }; then
    if [ -e "$user" ]; then
      echo "Replacing the token an earlier quickstart cluster left in $user"
    fi
    mkdir -p "$(dirname "$user")"
    (umask 077 && cp "$admin" "$user" && cp "$admin" "$ours")
  elif ! "$@" >/dev/null 2>&1; then
    local why="is not a token of this cluster (kept: the quickstart did not write it)"
    printf 'quickstart: %s %s;\n' "$user" "$why" >&2
    # shellcheck disable=SC2016 # the command is printed for the user, not run
    printf '  for this cluster: export RINGMASTER_TOKEN=$(cat %s)\n' "$admin" >&2
  fi
}

# install_user_config SCHEDULER CA USER_CONFIG_FILE
# Writes the client config file (cli/config.h) that ringctl and the Python client read, so that
# a new shell reaches this cluster with no exports. Same rule as the token: a file the
# quickstart wrote for an earlier cluster (USER_CONFIG_FILE.quickstart is its copy) is replaced;
# one the user wrote is kept, with a warning that says how to reach this cluster instead.
install_user_config() {
  local scheduler=$1 ca=$2 user=$3
  local ours=$user.quickstart new
  new=$(mktemp)
  cat >"$new" <<EOF
# Written by scripts/quickstart for its cluster on loopback; replaced by the next quickstart
# cluster. ringctl and the Python client read it where no flag or RINGMASTER_* variable says
# otherwise (docs/ringctl.md, "Config file").
scheduler: $scheduler
tls_ca: $ca
EOF
  if cmp -s "$user" "$new"; then
    rm -f "$new"
    return 0
  fi
  if [ ! -e "$user" ] || { [ -f "$ours" ] && cmp -s "$user" "$ours"; }; then
    if [ -e "$user" ]; then
      echo "Replacing the config an earlier quickstart cluster left in $user"
    fi
    mkdir -p "$(dirname "$user")"
    cp "$new" "$user"
    cp "$new" "$ours"
  else
    printf 'quickstart: %s is not the quickstart'"'"'s (kept); for this cluster:\n' "$user" >&2
    printf '  export RINGMASTER_SCHEDULER=%s RINGMASTER_TLS_CA=%s\n' "$scheduler" "$ca" >&2
  fi
  rm -f "$new"
}
