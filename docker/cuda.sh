#!/bin/sh
# cuda.sh build|runtime CUDA_VERSION: the CUDA part of docker/Dockerfile's GPU build.
#
# With an empty CUDA_VERSION (the CPU build) it only creates /opt/cuda-repo, which the worker
# stage copies. Otherwise (e.g. 12.8, 13.0) it adds NVIDIA's CUDA apt repository for Debian 12
# and installs:
#   build:   nvcc, the CUDA runtime and cuBLAS headers, NCCL's headers (the repository's
#            keyring package is kept in /opt/cuda-repo for the runtime stage)
#   runtime: the CUDA runtime, cuBLAS and NCCL libraries
# NCCL is the newest build for exactly that CUDA version, else for its major version.
set -eu
mode=$1
version=${2:-}
mkdir -p /opt/cuda-repo
[ -n "$version" ] || exit 0

suffix=$(echo "$version" | tr . -)   # 12.8 -> 12-8, the packages' suffix
repo=https://developer.download.nvidia.com/compute/cuda/repos/debian12/$(uname -m)
export DEBIAN_FRONTEND=noninteractive

nccl_version() {
  v=$(apt-cache madison libnccl2 | awk -v c="+cuda$version" '{ if (index($3, c)) { print $3; exit } }')
  [ -n "$v" ] || v=$(apt-cache madison libnccl2 |
    awk -v c="+cuda${version%%.*}." '{ if (index($3, c)) { print $3; exit } }')
  [ -n "$v" ] || { echo "cuda.sh: no libnccl2 for CUDA $version in $repo" >&2; exit 1; }
  echo "$v"
}

case $mode in
  build)
    apt-get update
    apt-get install -y --no-install-recommends ca-certificates curl
    curl -fsSL -o /opt/cuda-repo/cuda-keyring.deb "$repo/cuda-keyring_1.1-1_all.deb"
    dpkg -i /opt/cuda-repo/cuda-keyring.deb
    apt-get update
    nccl=$(nccl_version)
    apt-get install -y --no-install-recommends "cuda-nvcc-$suffix" "cuda-cudart-dev-$suffix" \
      "libcublas-dev-$suffix" "libnccl2=$nccl" "libnccl-dev=$nccl"
    ;;
  runtime)
    dpkg -i /opt/cuda-repo/cuda-keyring.deb
    apt-get update
    nccl=$(nccl_version)
    apt-get install -y --no-install-recommends "cuda-cudart-$suffix" "libcublas-$suffix" \
      "libnccl2=$nccl"
    ;;
  *) echo "usage: cuda.sh build|runtime CUDA_VERSION" >&2; exit 2 ;;
esac
rm -rf /var/lib/apt/lists/*
