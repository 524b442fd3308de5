# Starts and stops a throw-away PostgreSQL on a loopback port. Source it; needs bash.
# pg_start DIR PORT   initdb (if needed) and start; runs as the postgres user when root.
#                     Extra server options from $PG_OPTS (tests use "-c fsync=off").
# pg_stop DIR         fast shutdown; safe to call twice.
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  local dir=$1 port=$2
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
  if [ ! -f "$dir/PG_VERSION" ]; then
    pg_as_owner "$PG_BIN/initdb" -D "$dir" -U postgres -A trust --no-sync >/dev/null
  fi
  pg_as_owner "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
    -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=300 ${PG_OPTS:-}" start >/dev/null
}

pg_stop() {
  local dir=$1
  [ -f "$dir/postmaster.pid" ] || return 0
  pg_as_owner "$PG_BIN/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}

# A free TCP port on 127.0.0.1, picked at random below the kernel's ephemeral range, as
# PickFreePort (libs/common/net.cc) does: a port-0 pick can be taken by any connect() before
# the server binds it.
free_port() {
  python3 -c '
import random, socket
try:
    high = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0]) - 1
except (OSError, ValueError):
    high = 0
for port in [random.randint(10000, high) for _ in range(100)] if high - 10000 >= 1000 else []:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        pass
    finally:
        s.close()
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])
'
}
