#!/usr/bin/env python3
"""nccl_allreduce.py - GPU test: a PyTorch loop that captures, every
iteration, a new CUDA graph holding an NCCL all-reduce, as tensor-parallel
code without graph-update logic does.

Each iteration writes new inputs into the graph's static buffer, creates
torch.cuda.CUDAGraph(), captures (capture_begin/capture_end on a side
stream, global capture mode as torch.cuda.graph uses)
y = x * scale + rank;  all_reduce(y, AVG);
z = y * 0.5  with a Python-float scale that changes every iteration (so
kernel arguments change), replays it, reads z, checks it exactly against
the average the host computes, and deletes the graph. At the end the program
destroys its process group (dist.destroy_process_group()) and exits 0; a
hang there would be recap's kept graphs holding NCCL's resources (NCCL's
communicator destruction waits until every graph that captured it is gone),
which RUN_TIMEOUT turns into a failure.

Runs as one rank (world_size 1: MASTER_ADDR=127.0.0.1, a free port, RANK=0,
WORLD_SIZE=1 set here when no launcher set them) or under
`torchrun --nproc-per-node N` (one GPU per rank, LOCAL_RANK picks it).
With one rank NCCL serves the all-reduce by its one-rank shortcut: AVG is
a pre-multiplied sum, so it launches its one-rank reduction kernel into the
graph (SUM in place would launch nothing), but it makes no kernel plan and
attaches no user object; those only the runs with two or more ranks
exercise. The communicator is created and the collective warmed up before
any capture, as NCCL requires. Inputs are small integers in float32 and
the world size a power of two, so averages are exact in any order.

  nccl_allreduce.py [--iterations N] [--memory-check]

--iterations N (default 200): the identity run: rank 0 prints a checksum
  line every 50 iterations and a final line; stdout is compared byte for
  byte between a plain run and a run under recap.
--memory-check: instead, 100 then 10,000 more iterations; device memory in
  use (torch.cuda.mem_get_info: total - free, which sees NCCL's and recap's
  allocations too, unlike torch's allocator statistics) after each stage
  goes to stderr as "memory: after N iterations: B bytes in use", the form
  check_run.py memory reads.

Exit 0 right, 1 a wrong result, 77 SKIP (no torch, no GPU, no NCCL, or
fewer GPUs than ranks).
"""
import argparse
import hashlib
import os
import socket
import struct
import sys

SKIP = 77
N = 4096                     # elements all-reduced per iteration


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    skip(f"torch not importable: {e}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_rank_environment():
    """Fills in what torchrun would set, for a run as the only rank. Done
    before CUDA is touched: recap reads RANK at the first driver call."""
    if "RANK" not in os.environ and "WORLD_SIZE" not in os.environ:
        os.environ.update({"RANK": "0", "WORLD_SIZE": "1"})
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())


def inputs_for(iteration, rank):
    """Small integers as floats: exact through every sum."""
    base = torch.arange(N, dtype=torch.float32)
    return (base * (rank + 1) + iteration) % 97.0 - 48.0


def expected(iteration, scale, world_size):
    """NCCL's AVG: each rank's value times 1/world_size, summed."""
    total = torch.zeros(N, dtype=torch.float32)
    for r in range(world_size):
        total += (inputs_for(iteration, r) * scale + r) * (1.0 / world_size)
    return total * 0.5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--memory-check", action="store_true")
    args = parser.parse_args()

    single_rank_environment()
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    if not dist.is_available() or not dist.is_nccl_available():
        skip("torch.distributed has no NCCL backend")
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if world_size & (world_size - 1):
        skip(f"world size {world_size} is not a power of two: averages would round")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.device_count() <= local_rank:
        skip(f"rank {rank} needs GPU {local_rank}, torch sees {torch.cuda.device_count()}")
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)

    dist.init_process_group("nccl", device_id=device)
    # NCCL needs its communicator before capture: one collective outside
    # capture creates it (torch creates communicators lazily).
    warm = torch.ones(N, device=device)
    dist.all_reduce(warm)
    torch.cuda.synchronize()
    if warm[0].item() != world_size:
        print(f"rank {rank}: warm-up all-reduce gave {warm[0].item()}, want {world_size}",
              file=sys.stderr)
        return 1

    static_x = torch.zeros(N, device=device)
    # Captures run on one side stream, through capture_begin/capture_end:
    # torch.cuda.graph() would also synchronize and empty the allocator's
    # cache at every capture, which 10,100 iterations cannot afford.
    capture_stream = torch.cuda.Stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):       # warm-up on a side stream, as for any capture
        for _ in range(3):
            y = static_x * 1.0 + rank
            dist.all_reduce(y, op=dist.ReduceOp.AVG)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    digest = hashlib.sha256()
    mismatches = 0

    def run(first, count):
        nonlocal mismatches
        for iteration in range(first, first + count):
            static_x.copy_(inputs_for(iteration, rank))
            scale = float(1 + iteration % 5)
            graph = torch.cuda.CUDAGraph()
            capture_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(capture_stream):
                graph.capture_begin(capture_error_mode="global")
                y = static_x * scale + rank
                dist.all_reduce(y, op=dist.ReduceOp.AVG)
                static_out = y * 0.5
                graph.capture_end()
            torch.cuda.current_stream().wait_stream(capture_stream)
            graph.replay()
            torch.cuda.synchronize()
            got = static_out.cpu()
            del static_out, y
            del graph
            if not torch.equal(got, expected(iteration, scale, world_size)):
                if mismatches == 0:
                    print(f"rank {rank} iteration {iteration}: all-reduce result differs "
                          f"from the host's average", file=sys.stderr)
                mismatches += 1
            digest.update(got.numpy().tobytes())
            done = iteration + 1
            if rank == 0 and not args.memory_check and done % 50 == 0:
                print(f"iteration {done:5d} hash {digest.hexdigest()[:16]} "
                      f"first {struct.pack('<f', float(got[0])).hex()} "
                      f"last {struct.pack('<f', float(got[-1])).hex()}", flush=True)

    if args.memory_check:
        done = 0
        for stage in (100, 10000):
            run(done, stage)
            done += stage
            torch.cuda.synchronize()
            free, total = torch.cuda.mem_get_info(device)
            suffix = f" (rank {rank})" if world_size > 1 else ""
            print(f"memory: after {done} iterations: {total - free} bytes in use{suffix}",
                  file=sys.stderr, flush=True)
            if rank == 0:
                print(f"after {done} iterations: hash {digest.hexdigest()[:16]} "
                      f"mismatches {mismatches}", flush=True)
    else:
        run(0, args.iterations)
        if rank == 0:
            print(f"final iterations {args.iterations} ranks {world_size} "
                  f"hash {digest.hexdigest()[:16]} mismatches {mismatches}", flush=True)

    # Every graph is gone; the communicator must be destroyable now, with
    # or without recap keeping executable graphs for reuse.
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: process group destroyed", file=sys.stderr, flush=True)
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
