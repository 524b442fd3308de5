#!/usr/bin/env python3
"""A communication-bound MPI program that is not the built-in trainer: every rank passes a
buffer of MB megabytes to its right neighbour and receives one from its left, ROUNDS times
(after WARMUP untimed rounds). Rank 0 prints the ring's bandwidth: bytes one rank sent per
second, and the time the timed rounds took.

MODE "sendrecv" (the default): every rank sends and receives at once (bandwidth-bound). MODE
"token": one message in flight: rank 0 sends, every other rank receives from its left and only
then sends to its right, and rank 0 receives it back (latency-bound: every hop waits for the
one before, so each wake-up of a waiting rank is on the ring's critical path).

Usage: mpi_ring.py [MB] [ROUNDS] [WARMUP] [MODE]
"""
import sys
import time

from mpi4py import MPI

mb = float(sys.argv[1]) if len(sys.argv) > 1 else 4
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 5
mode = sys.argv[4] if len(sys.argv) > 4 else "sendrecv"
if mode not in ("sendrecv", "token"):
    sys.exit(f"MODE must be sendrecv or token, got {mode!r}")
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
n = int(mb * (1 << 20))
# bytearray, not numpy (not a dependency of the worker image): mpi4py takes any buffer.
send = bytearray([rank % 251]) * n
recv = bytearray(n)
right, left = (rank + 1) % size, (rank - 1) % size


def ring(times):
    for _ in range(times):
        if mode == "sendrecv":
            comm.Sendrecv([send, MPI.BYTE], dest=right, recvbuf=[recv, MPI.BYTE], source=left)
        elif rank == 0:
            comm.Send([send, MPI.BYTE], dest=right)
            comm.Recv([recv, MPI.BYTE], source=left)
        else:
            comm.Recv([recv, MPI.BYTE], source=left)
            comm.Send([send, MPI.BYTE], dest=right)


ring(warmup)
assert recv[0] == left % 251, "wrong data from the left neighbour"
comm.Barrier()
start = time.perf_counter()
ring(rounds)
comm.Barrier()
seconds = comm.reduce(time.perf_counter() - start, op=MPI.MAX, root=0)
if rank == 0:
    print(f"ring of {size} ranks ({mode}): {rounds} rounds of {mb:g} MB in {seconds:.3f} s",
          flush=True)
    print(f"ring MB/s: {rounds * mb / seconds:.1f}", flush=True)
