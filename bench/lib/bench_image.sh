# The image the container benchmarks run: the test image (docker/make-job-image.sh: Debian 12's
# python3, mpi4py and Open MPI, the workers' own) with bench/mpi_ring.py at
# /opt/ringmaster/bench. A localhost/ image of this machine's store, which the workers never
# pull (docs/environments.md). Source it after setting `root`; make_bench_image prints the name.
make_bench_image() {
  local tag=localhost/ringmaster/bench:ring
  "$root/docker/make-job-image.sh" >/dev/null
  podman build --quiet --pull=never --network=none -t "$tag" -f - "$root/bench" >/dev/null <<'CONTAINERFILE'
FROM localhost/ringmaster/job:bookworm
COPY mpi_ring.py /opt/ringmaster/bench/mpi_ring.py
CONTAINERFILE
  echo "$tag"
}

# The test image with this build's ringmaster-train at /usr/local/bin (the trainer a job with an
# image runs: the image's own, docs/environments.md) and every library it links that the image
# lacks (gRPC, OpenBLAS, the CUDA toolkit's cuBLAS and NCCL: about 850 MB) under
# /opt/ringmaster/lib. The CUDA libraries come from the host's toolkit because Debian 12 has no
# package of them; an NGC image would carry its own. make_trainer_image BUILD prints the name.
make_trainer_image() {
  local build=$1 tag=localhost/ringmaster/bench:train ctx lib
  "$root/docker/make-job-image.sh" >/dev/null
  ctx=$(mktemp -d /tmp/ringmaster-train-image.XXXXXX)
  mkdir -p "$ctx/lib"
  cp "$build/trainer/ringmaster-train" "$ctx/ringmaster-train"
  # Not the C and C++ runtimes nor Open MPI: the image's own (Debian 12's, as the host's) stay.
  for lib in $(ldd "$build/trainer/ringmaster-train" | awk '$3 ~ /^\// {print $3}'); do
    case "${lib##*/}" in
      libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++* | \
        libgcc_s* | libmpi* | libopen-* | libpmix* | libhwloc* | libevent*) ;;
      *) cp -L "$lib" "$ctx/lib/" ;;
    esac
  done
  podman build --quiet --pull=never --network=none -t "$tag" -f - "$ctx" >/dev/null <<'CONTAINERFILE'
FROM localhost/ringmaster/job:bookworm
COPY lib/ /opt/ringmaster/lib/
COPY ringmaster-train /usr/local/bin/ringmaster-train
ENV LD_LIBRARY_PATH=/opt/ringmaster/lib
CONTAINERFILE
  rm -rf "$ctx"
  echo "$tag"
}
