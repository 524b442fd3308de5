#!/usr/bin/env bash
# Development certificates for Ringmaster, made with openssl. NOT for production: the CA key
# sits beside the certificates. See docs/security.md.
#
#   dev_certs.sh DIR                      a CA and the scheduler, metrics and client certificates
#   dev_certs.sh DIR worker ID [IP...]    a certificate for worker ID (made with the CA if missing)
#   dev_certs.sh DIR service NAME [SAN...] another certificate (SAN: DNS:x or IP:x)
#
# Every certificate lands in DIR/NAME/ in cert-manager's Secret layout: tls.crt, tls.key and
# ca.crt (the CA, also DIR/ca.crt). Existing files are kept, so running it again is cheap and
# servers that already read them are not disturbed. Keys are ECDSA P-256.
#
# Names in the certificates:
#   scheduler  DNS localhost, scheduler, ringmaster-scheduler(.ringmaster.svc[.cluster.local]),
#              IP 127.0.0.1, ::1, and $RINGMASTER_CERT_EXTRA_SANS (e.g. "IP:10.0.0.5
#              DNS:ctl.example"); server and client use
#   metrics    the same with metrics / ringmaster-metrics; server and client use
#   client     CN ringctl, no names: a client certificate ringctl no longer needs (logs come
#              through the scheduler); tests use it as one the agents' ReadLogs must refuse
#   worker ID  DNS ID (the scheduler admits a worker only under a DNS name of its certificate),
#              IP each address given (default 127.0.0.1 .. 127.0.0.9); server and client use
set -euo pipefail

die() { echo "dev_certs.sh: $*" >&2; exit 2; }
command -v openssl >/dev/null || die "openssl is not installed (apt-get install openssl)"

[ "${1:-}" != "-h" ] && [ "${1:-}" != "--help" ] || { sed -n '2,22p' "$0"; exit 0; }
[ $# -ge 1 ] || die "usage: dev_certs.sh DIR [worker ID [IP...] | service NAME [SAN...]]"
dir=$1
shift
mkdir -p "$dir"
# Directories and certificates readable by the services' users (containers run as uid
# 10001 on a bind mount); only the CA key is private. Guard DIR itself in production.
umask 022
ns=${RINGMASTER_CERT_NAMESPACE:-ringmaster}
days=${RINGMASTER_CERT_DAYS:-825}

make_ca() {
  [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ] && return 0
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$dir/ca.key.tmp" -out "$dir/ca.crt.tmp" -days "$days" \
    -subj "/O=Ringmaster development/CN=Ringmaster development CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  chmod 600 "$dir/ca.key.tmp"
  mv "$dir/ca.key.tmp" "$dir/ca.key"
  chmod 644 "$dir/ca.crt.tmp"
  mv "$dir/ca.crt.tmp" "$dir/ca.crt"
}

# leaf NAME CN EKU SAN...  (SAN entries as DNS:x or IP:x)
leaf() {
  local name=$1 cn=$2 eku=$3
  shift 3
  local out="$dir/$name"
  [ -s "$out/tls.crt" ] && [ -s "$out/tls.key" ] && return 0
  mkdir -p "$out"
  local ext="$out/ext.cnf"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    if [ $# -gt 0 ]; then
      local IFS=,
      echo "subjectAltName=$*"
    fi
  } >"$ext"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$out/tls.key.tmp" -out "$out/tls.csr" -subj "/O=Ringmaster development/CN=$cn" \
    2>/dev/null
  openssl x509 -req -in "$out/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -CAserial "$dir/ca.srl" -days "$days" -extfile "$ext" \
    -out "$out/tls.crt.tmp" 2>/dev/null
  rm -f "$out/tls.csr" "$ext"
  cp "$dir/ca.crt" "$out/ca.crt"
  # Readable by the services' users in containers (the directory is the operator's to guard).
  chmod 644 "$out/tls.key.tmp" "$out/tls.crt.tmp" "$out/ca.crt"
  mv "$out/tls.key.tmp" "$out/tls.key"
  mv "$out/tls.crt.tmp" "$out/tls.crt"
}

service_sans() {
  local short=$1
  echo "DNS:localhost DNS:$short DNS:ringmaster-$short DNS:ringmaster-$short.$ns" \
    "DNS:ringmaster-$short.$ns.svc DNS:ringmaster-$short.$ns.svc.cluster.local" \
    "IP:127.0.0.1 IP:::1" ${RINGMASTER_CERT_EXTRA_SANS:-}
}

make_ca
case "${1:-}" in
  "")
    # shellcheck disable=SC2046
    leaf scheduler ringmaster-scheduler serverAuth,clientAuth $(service_sans scheduler)
    # shellcheck disable=SC2046
    leaf metrics ringmaster-metrics serverAuth,clientAuth $(service_sans metrics)
    leaf client ringctl clientAuth
    ;;
  worker)
    [ $# -ge 2 ] || die "usage: dev_certs.sh DIR worker ID [IP...]"
    id=$2
    shift 2
    [[ $id =~ ^[a-z0-9.-]{1,63}$ ]] || die "worker id '$id' is not [a-z0-9.-]{1,63}"
    ips=("$@")
    [ ${#ips[@]} -gt 0 ] || ips=(127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6
      127.0.0.7 127.0.0.8 127.0.0.9)
    sans=("DNS:$id")
    for ip in "${ips[@]}"; do sans+=("IP:$ip"); done
    leaf "worker-$id" "$id" serverAuth,clientAuth "${sans[@]}"
    ;;
  service)
    [ $# -ge 2 ] || die "usage: dev_certs.sh DIR service NAME [SAN...]"
    name=$2
    shift 2
    leaf "$name" "$name" serverAuth,clientAuth "$@"
    ;;
  *) die "unknown kind '$1' (worker or service)" ;;
esac
