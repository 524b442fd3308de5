#!/bin/bash
# Entry point of the ringmaster-postgres image: creates the cluster and the database on the
# first start, then runs the server in the foreground (extra arguments go to postgres).
set -euo pipefail

listen=${POSTGRES_LISTEN:-127.0.0.1}
port=${POSTGRES_PORT:-5432}
db=${POSTGRES_DB:-ringmaster}
user=${POSTGRES_USER:-ringmaster}
password=${POSTGRES_PASSWORD:-}
sockets=/var/run/postgresql

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "ringmaster-postgres: creating the cluster in $PGDATA"
  if [ -n "$password" ]; then auth=scram-sha-256; else auth=trust; fi
  initdb -D "$PGDATA" -U postgres --encoding=UTF8 --locale=C.UTF-8 --auth-local=peer \
    --auth-host="$auth" >/dev/null
  # Host networking: the listen address decides who can connect; the password (when set)
  # guards every TCP connection.
  echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
  # A private socket directory and no TCP while the database is made, so the health check
  # (which uses $sockets) does not pass before it exists.
  init_sockets=$(mktemp -d)
  pg_ctl -D "$PGDATA" -w -s -o "-c listen_addresses='' -k $init_sockets -p $port -c jit=off" start
  psql -v ON_ERROR_STOP=1 -q -h "$init_sockets" -p "$port" -U postgres -d postgres \
    -v user="$user" -v password="$password" -v db="$db" <<'SQL'
SELECT CASE WHEN :'password' = '' THEN format('CREATE ROLE %I LOGIN', :'user')
            ELSE format('CREATE ROLE %I LOGIN PASSWORD %L', :'user', :'password') END \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'user') \gexec
SQL
  pg_ctl -D "$PGDATA" -w -s -m fast stop
  rmdir "$init_sockets"
  echo "ringmaster-postgres: database $db owned by $user"
fi

exec postgres -D "$PGDATA" -c listen_addresses="$listen" -p "$port" -k "$sockets" -c jit=off "$@"
