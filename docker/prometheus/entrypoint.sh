#!/bin/bash
# Entry point of the ringmaster-prometheus image. Writes the scrape configuration from the
# environment, then runs Prometheus in the foreground (extra arguments go to prometheus):
#
#   PROMETHEUS_LISTEN             web and API address (default 127.0.0.1:9090)
#   PROMETHEUS_SCRAPE_INTERVAL    default 5s (the dashboards' datasource says 5s)
#   PROMETHEUS_RETENTION          default 15d
#   RINGMASTER_SCRAPE_SCHEDULER   HOST:PORT of the scheduler's /metrics (127.0.0.1:9464)
#   RINGMASTER_SCRAPE_METRICS     HOST:PORT of ringmaster-metrics' /metrics (127.0.0.1:9466)
#   RINGMASTER_SCRAPE_WORKERS     comma-separated HOST:PORT of the workers' /metrics
#                                 (127.0.0.2:9465,127.0.0.3:9465)
#   PROMETHEUS_CONFIG             a configuration file of your own instead (nothing is written)
#
# The scrape job names are the ones the Grafana dashboards (dashboards/) expect.
set -euo pipefail

listen=${PROMETHEUS_LISTEN:-127.0.0.1:9090}
config=${PROMETHEUS_CONFIG:-}

# 'a:1,b:2' -> "'a:1', 'b:2'"
targets() {
  local out="" t
  IFS=, read -ra list <<<"$1"
  for t in "${list[@]}"; do
    t=${t// /}
    [ -n "$t" ] && out+="${out:+, }'$t'"
  done
  echo "$out"
}

if [ -z "$config" ]; then
  config=/tmp/prometheus.yml
  interval=${PROMETHEUS_SCRAPE_INTERVAL:-5s}
  cat >"$config" <<YAML
global:
  scrape_interval: $interval
  evaluation_interval: $interval
scrape_configs:
  - job_name: ringmaster-scheduler
    static_configs:
      - targets: [$(targets "${RINGMASTER_SCRAPE_SCHEDULER:-127.0.0.1:9464}")]
  - job_name: ringmaster-worker
    static_configs:
      - targets: [$(targets "${RINGMASTER_SCRAPE_WORKERS:-127.0.0.2:9465,127.0.0.3:9465}")]
  - job_name: ringmaster-metrics
    static_configs:
      - targets: [$(targets "${RINGMASTER_SCRAPE_METRICS:-127.0.0.1:9466}")]
  - job_name: prometheus
    static_configs:
      - targets: ['$listen']
YAML
  echo "ringmaster-prometheus: scrape configuration:"
  cat "$config"
fi

exec prometheus --config.file="$config" --storage.tsdb.path=/var/lib/prometheus/metrics2 \
  --storage.tsdb.retention.time="${PROMETHEUS_RETENTION:-15d}" --web.listen-address="$listen" "$@"
