#!/usr/bin/python3
"""torch.distributed all_reduce (float32 sum, in place) of 1-256 MiB
tensors with backend "uroce" and backend "gloo", side by side in one job of
N ranks on this host, ROUNDS interleaved rounds; prints each one's median
busbw (nccl-tests: size/time x 2(n-1)/n) and the ratio, with the load
average before and after.

  /usr/bin/python3 bench/torch_allreduce.py BUILD_DIR [N] [ROUNDS] [MAX_MIB]"""
import os
import statistics
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 2
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
MAXMIB = int(sys.argv[4]) if len(sys.argv) > 4 else 256
sys.path.insert(0, os.path.join(BUILD, "torch"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

SIZES = [m << 20 for m in (1, 4, 16, 64, 256) if m <= MAXMIB]


def worker(rank, n, port, q):
    import uroce_torch  # noqa: F401
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("uroce", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=n)
    groups = {"uroce": None, "gloo": dist.new_group(backend="gloo")}
    res = {}
    for r in range(ROUNDS):
        for b in SIZES:
            x = torch.ones(b // 4)
            iters = 3 if b >= 64 << 20 else 5
            for name, g in groups.items():
                dist.all_reduce(x, group=g)  # warm-up
                dist.barrier(group=groups["gloo"])
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(x, group=g)
                t = torch.tensor([(time.perf_counter() - t0) / iters],
                                 dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups["gloo"])
                res.setdefault((name, b), []).append(t.item())
    if rank == 0:
        q.put(res)
    dist.destroy_process_group()


def main():
    import random
    load0 = open("/proc/loadavg").read().split()[:3]
    port = 20000 + random.randrange(20000)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, N, port, q)) for r in range(N)]
    for p in ps:
        p.start()
    res = q.get(timeout=3600)
    for p in ps:
        p.join()
    load1 = open("/proc/loadavg").read().split()[:3]
    f = 2.0 * (N - 1) / N
    print("# torch.distributed all_reduce float32 sum, %d ranks on this host, "
          "median of %d rounds; load average %s before, %s after" %
          (N, ROUNDS, " ".join(load0), " ".join(load1)))
    print("# %10s %12s %12s %8s" % ("size (B)", "uroce GB/s", "gloo GB/s",
                                     "ratio"))
    for b in SIZES:
        u = b / statistics.median(res[("uroce", b)]) / 1e9 * f
        g = b / statistics.median(res[("gloo", b)]) / 1e9 * f
        print("  %10d %12.3f %12.3f %7.2fx" % (b, u, g, u / g))


if __name__ == "__main__":
    main()
