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
