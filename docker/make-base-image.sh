#!/usr/bin/env bash
# Makes the base image every Ringmaster image builds on, debian:bookworm-slim, from Debian's
# package mirror, for machines that cannot pull from a registry:
#
#   docker/make-base-image.sh [TAG]        (default TAG: debian:bookworm-slim; needs root)
#
# Nothing is done when TAG already exists. Otherwise `debootstrap --variant=minbase bookworm`
# fills a directory, which is trimmed the way Debian's official slim image is (no manuals,
# documentation or translations installed by later packages; apt keeps no .deb files) and
# `docker import`ed. The root file system is cached as a tarball in $RINGMASTER_BASE_CACHE
# (default /var/cache/ringmaster) so a machine whose Docker data was wiped imports it again in
# seconds. $DEBIAN_MIRROR chooses the mirror (default http://deb.debian.org/debian).
set -euo pipefail

tag=${1:-debian:bookworm-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${RINGMASTER_BASE_CACHE:-/var/cache/ringmaster}
tarball=$cache/debian-bookworm-minbase.tar

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "make-base-image: $tag is present"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "make-base-image: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "make-base-image: install debootstrap" >&2; exit 1; }

if [ ! -s "$tarball" ]; then
  mkdir -p "$cache"
  rootfs=$(mktemp -d /tmp/ringmaster-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "make-base-image: debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
    tail -20 "$cache/debootstrap.log" >&2
    exit 1
  }
  # What Debian's official slim image configures (debuerreotype's "slimify" and docker tweaks).
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CFG
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  # No init system runs in a container: packages must not try to start their services.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<CFG
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
CFG
  # Docker provides these at run time; the host's copies do not belong in an image.
  rm -f "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/*
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi

docker import --change 'CMD ["bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$tarball" "$tag" >/dev/null
echo "make-base-image: imported $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
