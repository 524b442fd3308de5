#!/usr/bin/env python3
"""An elastic command workload: SGD on a small linear regression, written with mpi4py, that
checkpoints on SIGTERM and resumes from $RINGMASTER_CHECKPOINT_DIR at whatever number of ranks
it is restarted with (docs/trainer.md, "Elastic jobs: resuming at another size").

What makes it elastic:
  1. The work is one global sequence: step s trains on samples [(s - 1) G, s G) of a global
     batch of G, each sample made from its index alone, and rank r of W computes the slice
     [r G / W, (r + 1) G / W). W must divide G; the program refuses other sizes.
  2. The per-sample gradients are gathered in global sample order and summed in that order on
     every rank, so the update has the same bits at every world size (an allreduce would add
     partial sums in an order that depends on W).
  3. SIGTERM only sets a flag. After every step the ranks agree (an allreduce of the flag) on
     whether to stop; if so rank 0 writes the checkpoint atomically (temp file, fsync, rename)
     with checkpoint.meta for the platform, every rank waits for it, and all exit with 143.
  4. At start rank 0 reads the checkpoint and broadcasts it; the step, the weights and the
     global batch are all the state there is, none of it per rank.

Run it by hand (as root add --allow-run-as-root; docs/trainer.md has the whole sequence):
  RINGMASTER_CHECKPOINT_DIR=/tmp/ckpt mpirun -np 2 /usr/bin/python3 elastic_mpi4py.py
  then SIGTERM the ranks, and run the same at -np 4: it resumes where it stopped and ends
  with the same weights as a run never stopped.
"""

import argparse
import json
import os
import random
import signal
import sys
import time

from mpi4py import MPI

DIM = 8
# The weights the regression should find, and the noise on its targets.
TRUE_WEIGHTS = [0.5 * (i % 3) - 0.4 + 0.1 * i for i in range(DIM)]
NOISE = 0.05
EXIT_STOPPED_BY_SIGTERM = 128 + 15

stop_requested = False


def on_sigterm(signum, frame):
    global stop_requested
    stop_requested = True


def sample(seed, index):
    """Inputs and target of global sample `index`: the same at every world size."""
    rng = random.Random(seed * 1_000_003 + index)
    x = [rng.uniform(-1.0, 1.0) for _ in range(DIM)]
    y = sum(w * xi for w, xi in zip(TRUE_WEIGHTS, x)) + rng.uniform(-NOISE, NOISE)
    return x, y


def write_atomically(directory, name, text):
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, name))
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(directory, step, weights, global_batch, world):
    os.makedirs(directory, exist_ok=True)
    # json writes a float as its repr, which reads back to the same bits.
    state = {"step": step, "weights": weights, "global_batch": global_batch, "world_size": world}
    write_atomically(directory, "checkpoint.json", json.dumps(state))
    # What the worker reports to the scheduler (docs/trainer.md, "checkpoint.meta").
    write_atomically(directory, "checkpoint.meta",
                     f"step={step}\ntime_ms={int(time.time() * 1000)}\n")


def load(directory):
    try:
        with open(os.path.join(directory, "checkpoint.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--global-batch", type=int, default=12,
                        help="samples per step over all ranks (a fresh start only; a resumed "
                        "run keeps its checkpoint's)")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoint-every", type=int, default=50,
                        help="also save every N steps (0: only on SIGTERM)")
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="sleep per step, standing in for real work")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    # The platform sets WORLD_SIZE; under it, MPI must agree.
    if os.environ.get("WORLD_SIZE", str(world)) != str(world):
        sys.exit(f"WORLD_SIZE={os.environ['WORLD_SIZE']} but MPI has {world} ranks")
    directory = os.environ.get("RINGMASTER_CHECKPOINT_DIR", "")
    if directory:
        signal.signal(signal.SIGTERM, on_sigterm)

    state = load(directory) if directory and rank == 0 else None
    state = comm.bcast(state, root=0)
    if state is None:
        step, weights, global_batch = 0, [0.0] * DIM, args.global_batch
    else:
        step, weights, global_batch = state["step"], state["weights"], state["global_batch"]
    if global_batch % world != 0:
        if rank == 0:
            print(f"a global batch of {global_batch} does not split evenly over {world} "
                  f"rank(s); run at a number of ranks that divides {global_batch}", flush=True)
        sys.exit(1)
    per_rank = global_batch // world
    if rank == 0:
        if state is None:
            print(f"starting at step 1: {world} rank(s) x {per_rank}", flush=True)
        else:
            print(f"resumed at step {step} (written at {state['world_size']} rank(s)): "
                  f"global batch {global_batch}, {world} rank(s) x {per_rank}", flush=True)

    while step < args.steps:
        step += 1
        first = (step - 1) * global_batch + rank * per_rank
        mine = []  # (gradient, squared error) per sample of this rank's slice
        for index in range(first, first + per_rank):
            x, y = sample(args.seed, index)
            error = sum(w * xi for w, xi in zip(weights, x)) - y
            mine.append(([2.0 * error * xi for xi in x], error * error))
        # Rank order is global sample order: sum in it, the same on every rank and size.
        gradient, loss = [0.0] * DIM, 0.0
        for per_sample in comm.allgather(mine):
            for g, squared in per_sample:
                gradient = [a + b for a, b in zip(gradient, g)]
                loss += squared
        weights = [w - args.lr * g / global_batch for w, g in zip(weights, gradient)]
        if rank == 0 and (step % 50 == 0 or step == args.steps):
            print(f"step {step}/{args.steps} loss {loss / global_batch:.6f}", flush=True)
        time.sleep(args.step_seconds)

        if not directory:
            continue
        stop = comm.allreduce(1 if stop_requested else 0, op=MPI.MAX) > 0
        if stop or (args.checkpoint_every > 0 and step % args.checkpoint_every == 0):
            if rank == 0:
                save(directory, step, weights, global_batch, world)
                print(f"checkpoint at step {step}{' (SIGTERM)' if stop else ''}", flush=True)
            comm.Barrier()  # nobody exits before the checkpoint is whole
        if stop:
            if rank == 0:
                print(f"stopping after step {step} on SIGTERM (checkpoint saved)", flush=True)
            sys.exit(EXIT_STOPPED_BY_SIGTERM)

    if rank == 0:
        print("final weights: " + " ".join(repr(w) for w in weights), flush=True)


if __name__ == "__main__":
    main()
