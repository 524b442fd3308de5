#!/usr/bin/env bash
# Makes the small job image the tests (and the quickstart's container demo) run, with Podman,
# from Debian's package mirror alone (docs/environments.md, "The test image"):
#
#   docker/make-job-image.sh [TAG]        (default TAG: localhost/ringmaster/job:bookworm; root)
#
# Debian 12's python3 with mpi4py and Open MPI (the workers' Open MPI: Debian 12's too, which is
# what the hybrid model needs; docs/environments.md, "MPI inside containers"). Nothing is done
# when TAG exists. The root file system (`debootstrap --variant=minbase --include=...`, about a
# minute) is cached as a tarball in $RINGMASTER_BASE_CACHE (default /var/cache/ringmaster), so a
# machine whose images were wiped imports it again in seconds. $DEBIAN_MIRROR chooses the mirror.
set -euo pipefail

tag=${1:-localhost/ringmaster/job:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${RINGMASTER_BASE_CACHE:-/var/cache/ringmaster}
packages=python3-mpi4py,openmpi-bin
tarball=$cache/job-image-rootfs.tar

if podman image exists "$tag"; then
  echo "make-job-image: $tag is present"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "make-job-image: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "make-job-image: install debootstrap" >&2; exit 1; }

# The cache is keyed by the package list: a changed list builds a new root file system.
if [ ! -s "$tarball" ] || [ "$(cat "$tarball.packages" 2>/dev/null)" != "$packages" ]; then
  mkdir -p "$cache"
  rootfs=$(mktemp -d /tmp/ringmaster-jobfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "make-job-image: debootstrap --variant=minbase --include=$packages bookworm (about a minute)"
  debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" \
    >"$cache/job-image-debootstrap.log" 2>&1 || {
    tail -20 "$cache/job-image-debootstrap.log" >&2
    exit 1
  }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  echo "$packages" >"$tarball.packages"
fi
podman import --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
echo "make-job-image: $tag"
