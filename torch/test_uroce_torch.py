#!/usr/bin/python3
"""The torch.distributed backend "uroce" against Gloo, in one job of N
ranks on this host (shared memory between them): every collective on
random integer-valued tensors of every supported dtype (exact, whatever the
reduction order), sync and async, then DistributedDataParallel training of
a small model for 200 steps with a fixed seed under each backend: the
weights must agree within float tolerance. A rank failing prints why and
the job exits non-zero.

  /usr/bin/python3 torch/test_uroce_torch.py BUILD_DIR [N]"""
import os
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 2
sys.path.insert(0, os.path.join(BUILD, "torch"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64,
          torch.float16, torch.bfloat16]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
       dist.ReduceOp.MAX]


def data(rank, n, dtype, seed):
    g = torch.Generator().manual_seed(seed * 131 + rank)
    return torch.randint(-3, 4, (n,), generator=g).to(dtype)


def ref_dt(dt):
    """Gloo (1.13) has no bfloat16: its reference runs in float64, exact
    for these small integers."""
    return torch.float64 if dt == torch.bfloat16 else dt


def check(name, a, b, fails):
    if not torch.equal(a, b):
        fails.append(name)


def collectives(rank, n, gloo, fails):
    count = 0
    for dt in DTYPES:
        for k, size in enumerate((1, 13, 1000, 70001)):
            seed = k * 10 + DTYPES.index(dt)
            for op in OPS:
                if op == dist.ReduceOp.PRODUCT and size > 13:
                    continue
                x = data(rank, size, dt, seed)
                y = x.to(ref_dt(dt))
                dist.all_reduce(x, op=op)
                dist.all_reduce(y, op=op, group=gloo)
                check("all_reduce %s %s %d" % (dt, op, size), x, y.to(dt),
                      fails)
                root = size % n
                x = data(rank, size, dt, seed)
                y = x.to(ref_dt(dt))
                dist.reduce(x, root, op=op)
                dist.reduce(y, root, op=op, group=gloo)
                if rank == root:
                    check("reduce %s %s %d" % (dt, op, size), x, y.to(dt),
                          fails)
                count += 2
            if dt in (torch.float16, torch.bfloat16):
                continue  # Gloo's CPU gathers and scatters skip these
            x = data(rank, size, dt, seed)
            y = x.clone()
            w = dist.broadcast(x, size % n, async_op=True)
            dist.broadcast(y, size % n, group=gloo)
            w.wait()
            check("broadcast %s %d" % (dt, size), x, y, fails)
            inp = data(rank, size, dt, seed)
            outs = [torch.zeros(size, dtype=dt) for _ in range(n)]
            outg = [torch.zeros(size, dtype=dt) for _ in range(n)]
            dist.all_gather(outs, inp)
            dist.all_gather(outg, inp, group=gloo)
            check("all_gather %s %d" % (dt, size), torch.cat(outs),
                  torch.cat(outg), fails)
            ins = [data(rank * n + j, size, dt, seed) for j in range(n)]
            o1 = torch.zeros(size, dtype=dt)
            dist.reduce_scatter(o1, ins)
            # Gloo has no reduce_scatter: the reference is the sum of every
            # rank's block, gathered with Gloo's all_reduce
            ref = torch.cat(ins).clone()
            dist.all_reduce(ref, group=gloo)
            check("reduce_scatter %s %d" % (dt, size), o1,
                  ref[rank * size:(rank + 1) * size], fails)
            ins = [data(rank * n + j, size, dt, seed + 1) for j in range(n)]
            o1 = [torch.zeros(size, dtype=dt) for _ in range(n)]
            dist.all_to_all(o1, ins)
            # reference: everyone's inputs all-gathered with Gloo
            allin = [torch.zeros(n * size, dtype=dt) for _ in range(n)]
            dist.all_gather(allin, torch.cat(ins), group=gloo)
            ref = torch.cat([allin[j][rank * size:(rank + 1) * size]
                             for j in range(n)])
            check("all_to_all %s %d" % (dt, size), torch.cat(o1), ref, fails)
            out = torch.zeros(n * size, dtype=dt)
            dist.all_to_all_single(out, torch.cat(ins))
            check("all_to_all_single %s %d" % (dt, size), out, ref, fails)
            count += 6
    # async handles: several in flight, completed in order
    xs = [data(rank, 5000, torch.float32, s) for s in range(4)]
    refs = [x.clone() for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for r in refs:
        dist.all_reduce(r, group=gloo)
    for w, x, r in zip(works, xs, refs):
        w.wait()
        if not w.is_completed():
            fails.append("async: not completed after wait")
        check("async all_reduce", x, r, fails)
    dist.barrier()
    return count + 4


def ddp(rank, n, group, steps=200):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8))
    m = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(99 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 8, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def worker(rank, n, port, q):
    import uroce_torch  # noqa: F401  registers the backend
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    fails = []
    try:
        dist.init_process_group("uroce", init_method="tcp://127.0.0.1:%d" %
                                port, rank=rank, world_size=n)
        gloo = dist.new_group(backend="gloo")
        if dist.get_backend() != "uroce":
            fails.append("default backend is %s" % dist.get_backend())
        t0 = time.time()
        count = collectives(rank, n, gloo, fails)
        t1 = time.time()
        wu = ddp(rank, n, None)
        wg = ddp(rank, n, gloo)
        t2 = time.time()
        for a, b in zip(wu, wg):
            if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
                fails.append("DDP weights differ by %g" %
                             (a - b).abs().max().item())
                break
        moved = sum((a - p).abs().sum().item() for a, p in zip(
            wu, ddp(rank, n, None, steps=0)))
        if not moved > 0:
            fails.append("DDP: the weights did not change")
        dist.destroy_process_group()
        q.put((rank, fails, count, t1 - t0, t2 - t1))
    except Exception as e:  # noqa: BLE001
        import traceback
        q.put((rank, fails + ["exception: %r at %s" % (
            e, traceback.format_exc().strip().splitlines()[-3])], 0, 0, 0))


def main():
    import random
    port = 20000 + random.randrange(20000)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=worker, args=(r, N, port, q)) for r in range(N)]
    for p in ps:
        p.start()
    res = []
    deadline = time.time() + 600
    died = []
    while len(res) < N and time.time() < deadline and not died:
        try:
            res.append(q.get(timeout=1))
        except Exception:  # noqa: BLE001  queue.Empty: look at the ranks
            if all(p.exitcode is None for p in ps):
                continue
            try:  # a rank that exited may have its result still in the pipe
                while len(res) < N:
                    res.append(q.get(timeout=2))
            except Exception:  # noqa: BLE001
                pass
            got = {r[0] for r in res}
            died = ["rank %d exited with code %s and no result" %
                    (r, p.exitcode) for r, p in enumerate(ps)
                    if r not in got and p.exitcode is not None]
            continue
        if res[-1][1]:
            deadline = min(deadline, time.time() + 30)  # the others follow
    for p in ps:
        p.join(10)
        if p.is_alive():
            p.kill()
    for d in died:
        print(d)
    if len(res) < N and not died:
        print("%d of %d ranks gave no result in time" % (N - len(res), N))
    bad = len(res) < N
    for rank, fails, count, tc, td in sorted(res):
        print("rank %d: %d collectives vs Gloo in %.1f s, DDP x2 in %.1f s: "
              "%s" % (rank, count, tc, td,
                      "ok" if not fails else "FAIL " + "; ".join(fails[:8])))
        bad = bad or bool(fails)
    print("FAILED" if bad else "passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
