#!/bin/sh
# Entry point of the ringmaster-redis image: redis-server in the foreground, no persistence.
exec redis-server --bind "${REDIS_BIND:-127.0.0.1}" --port "${REDIS_PORT:-6379}" \
  --save '' --appendonly no --daemonize no --logfile '' "$@"
