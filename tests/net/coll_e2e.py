#!/usr/bin/python3
"""End-to-end tests of the collectives over the real stack: `uroce launch`
starts N ranks of `uroce coll-bench --check` on loopback, each rank with
its own uroce device (127.0.2.x) and one RC QP per peer.

  - every collective, the six types and four reductions, uneven counts
    (sizes 4 * 13^k bytes: counts 1, 13, 169, 2197, 28561), in place and
    out of place, for 2, 3, 4, 8 and 16 ranks and every algorithm, some
    runs with small chunks and few slots so that long pipelines and slot
    reuse are exercised: #wrong must be 0 everywhere and the figures real;
  - a rank killed with SIGKILL in the middle of a run: the other ranks must
    fail by themselves with an error that names the dead rank within a few
    seconds (never hang), and `uroce launch` must exit non-zero.

--transport roce (the default) keeps every rank on RoCEv2 over loopback
(UROCE_COLL_SHM=0); --transport shm lets the ranks, all on one host, find
each other and use shared memory (docs/coll.md, "Shared memory"): the same
cases, each checked to have really run over it: straight into the peer's
receive ring mapped in shared memory (the default), and with
UROCE_COLL_SHM_RING=0 through CMA and, with UROCE_COLL_CMA=0 too, the copy
path. Into the mapped ring the sender picks ordinary or streaming stores
as it measures them; one case fixes each (UROCE_COLL_SHM_STREAM=on, mode
"map-stream"; =off, "map-plain").

Prints one line per case and `N passed, M failed` at the end."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

results = []
TRANSPORT = "roce"


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-58s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def launch_cmd(uroce, n, base, extra_launch=(), shared=False):
    """base: the first rank's address (one each), or with shared the one
    address of every rank (a UDP port each)"""
    return [uroce, "launch", "-n", str(n),
            "--addr" if shared else "--base-addr", base] + \
        list(extra_launch) + ["--", uroce, "coll-bench"]


def shm_env(mode):
    env = dict(os.environ)
    if mode:
        # map: into the peer's receive ring, mapped (the default); cma
        # and copy where that ring is not shared
        env["UROCE_COLL_SHM_RING"] = "1" if mode.startswith("map") else "0"
        env["UROCE_COLL_CMA"] = "0" if mode == "copy" else "1"
        env.pop("UROCE_COLL_SHM_STREAM", None)
        if mode in ("map-stream", "map-plain"):
            env["UROCE_COLL_SHM_STREAM"] = "on" if mode == "map-stream" \
                else "off"
    return env


def check_case(uroce, n, algo, maxbytes, small_chunks, root,
               progress="inline", shm_mode=None, shared=False,
               yield_env=None):
    name = "%2d ranks, algo %-5s%s%s%s%s" % (
        n, algo, ", 4K chunks 2 slots" if small_chunks else "",
        ", progress thread" if progress == "thread" else "",
        ", shm " + shm_mode if shm_mode else "",
        ", one address" if shared else "") + \
        (", UROCE_COLL_YIELD=" + yield_env if yield_env else "")
    args = ["-c", "-J", "-o", "all", "-d", "all", "-r", "all", "-b", "4",
            "-e", str(maxbytes), "-f", "13", "-n", "1", "-w", "0",
            "--algo", algo, "--root", str(root), "--timeout", "20000",
            "--progress", progress]
    if small_chunks:
        args += ["--chunk", "4096", "--slots", "2"]
    env = shm_env(shm_mode)
    if yield_env:
        env["UROCE_COLL_YIELD"] = yield_env
    t0 = time.time()
    try:
        p = subprocess.run(launch_cmd(uroce, n, "127.0.2.200" if shared
                                      else "127.0.2.1", shared=shared) + args,
                           capture_output=True, text=True, timeout=120,
                           env=env)
    except subprocess.TimeoutExpired as e:
        report(name, False, "\n  timed out after 120 s: %s" %
               ((e.stderr or b"")[-800:]))
        return
    dt = time.time() - t0
    detail = ""
    ok = p.returncode == 0
    rows = 0
    try:
        doc = json.loads(p.stdout)
        res = doc["results"]
        rows = len(res)
        kinds = set(r["collective"] for r in res)
        types = set(r["type"] for r in res)
        ops = set(r["redop"] for r in res)
        ok = ok and doc["ranks"] == n and doc["wrong"] == 0
        # the transport asked for is the one that ran
        want = (n, shm_mode.split("-")[0]) if shm_mode else (1, "off")
        got = (doc.get("host_ranks"), doc.get("shm"))
        if got != want:
            ok = False
            detail += "\n  ran with (host ranks, shm) %r, wanted %r" % (got,
                                                                      want)
        # polls yield only when this machine has fewer CPUs than ranks
        want_yield = {"on": True, "off": False}.get(
            yield_env, n > len(os.sched_getaffinity(0)))
        if doc.get("yield") != want_yield:
            ok = False
            detail += "\n  yield %r with %d ranks on %d CPUs" % (
                doc.get("yield"), n, len(os.sched_getaffinity(0)))
        # the progress mode asked for is the one that ran
        if doc.get("progress") != progress:
            ok = False
            detail += "\n  progress %r ran, %r asked" % (doc.get("progress"),
                                                        progress)
        ok = ok and len(kinds) == 6 and len(types) == 6 and \
            ops >= {"sum", "prod", "min", "max", "none"}
        for r in res:
            for side in ("out_of_place", "in_place"):
                f = r[side]
                if f["wrong"] != 0:
                    ok = False
                    detail += "\n  %s %s %s count %d %s: %d wrong" % (
                        r["collective"], r["type"], r["redop"], r["count"],
                        side, f["wrong"])
                # figures must be real: a time, and bandwidth when data moved
                if not f["time_us"] > 0 or (r["count"] >= n and
                                            not f["busbw_gbs"] > 0):
                    ok = False
                    detail += "\n  %s count %d %s: no real figures %s" % (
                        r["collective"], r["count"], side, f)
        # the named algorithm really ran where it applies
        if algo != "auto":
            ran = set(r["algo"] for r in res)
            ok = ok and algo in ran
    except (ValueError, KeyError) as e:
        ok = False
        detail += "\n  bad JSON (%s): %s" % (e, p.stdout[-400:])
    if not ok:
        detail += "\n  rc=%d stderr: %s" % (p.returncode, p.stderr[-1200:])
    else:
        detail = "(%d points, %.1f s)" % (rows, dt)
    report(name, ok, detail)


def plan_case(uroce):
    """--plan: each size with its own warm-up and iteration counts, in the
    order given, checked; a malformed plan is refused before any rank
    connects."""
    name = " 3 ranks, --plan"
    want = [(4096, 0, 2), (1 << 20, 1, 1), (64, 2, 3)]
    plan = ",".join("%d:%d:%d" % w for w in want)
    p = subprocess.run(launch_cmd(uroce, 3, "127.0.2.91") +
                       ["-c", "-J", "--plan", plan, "--timeout", "20000"],
                       capture_output=True, text=True, timeout=120)
    ok, detail = p.returncode == 0, ""
    try:
        doc = json.loads(p.stdout)
        got = [(r["size"], r["warmup"], r["iters"]) for r in doc["results"]]
        if got != want or doc["wrong"] != 0:
            ok = False
            detail += "\n  rows %s, wrong %s" % (got, doc["wrong"])
    except (ValueError, KeyError) as e:
        ok = False
        detail += "\n  bad JSON (%s): %s" % (e, p.stdout[-400:])
    for bad in ("1M:x:3", "1M:2", "4K:1:2,", "-5:1:1", ""):
        q = subprocess.run(launch_cmd(uroce, 2, "127.0.2.95") +
                           ["--plan", bad], capture_output=True, text=True,
                           timeout=60)
        if q.returncode == 0 or "bad --plan" not in q.stderr:
            ok = False
            detail += "\n  --plan %r: rc %d, %s" % (bad, q.returncode,
                                                    q.stderr[-200:])
    if not ok:
        detail += "\n  rc=%d stderr: %s" % (p.returncode, p.stderr[-800:])
    report(name, ok, detail)


def rank_pids(launcher_pid):
    """rank -> pid of the launcher's children, from /proc."""
    out = {}
    try:
        with open("/proc/%d/task/%d/children" % (launcher_pid,
                                                 launcher_pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for k in kids:
        try:
            with open("/proc/%d/environ" % k, "rb") as f:
                env = dict(x.split(b"=", 1) for x in f.read().split(b"\0")
                           if b"=" in x)
            out[int(env[b"RANK"])] = k
        except (OSError, KeyError, ValueError):
            pass
    return out


def dead_rank_case(uroce, n, victim, algo, base, limit):
    """SIGKILL one rank mid-run. The launcher's grace period is long (60 s)
    so that the others must notice by themselves."""
    name = "dead rank: %d ranks, kill rank %d, algo %s" % (n, victim, algo)
    args = ["-o", "allreduce", "-b", "1M", "-e", "1M", "-n", "1000000",
            "-w", "0", "--algo", algo, "--timeout", "3000"]
    p = subprocess.Popen(launch_cmd(uroce, n, base, ["--grace", "60"]) + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # wait until every rank runs and the collectives are under way
    pids = {}
    end = time.time() + 20
    while time.time() < end and len(pids) < n:
        time.sleep(0.2)
        pids = rank_pids(p.pid)
    time.sleep(2.0)
    if victim not in pids or p.poll() is not None:
        p.kill()
        out, err = p.communicate()
        report(name, False, "\n  ranks did not start: %s" % err[-800:])
        return
    t_kill = time.time()
    os.kill(pids[victim], signal.SIGKILL)
    try:
        out, err = p.communicate(timeout=limit + 20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        report(name, False, "\n  HANG: still running %d s after the kill: %s"
               % (limit + 20, err[-800:]))
        return
    waited = time.time() - t_kill
    lines = [l for l in err.splitlines() if l.startswith("uroce coll-bench")]
    named = [l for l in lines if "rank %d" % victim in l]
    survivors = n - 1
    ok = p.returncode != 0 and waited < limit and \
        len(named) == survivors and \
        "rank %d (pid %d) killed" % (victim, pids[victim]) in err and \
        "terminating them" not in err
    detail = "(all %d others failed by themselves in %.1f s)" % (
        survivors, waited) if ok else \
        "\n  rc=%d after %.1f s, %d of %d survivors named rank %d:\n  %s" % (
            p.returncode, waited, len(named), survivors, victim,
            "\n  ".join(err.splitlines()[-12:]))
    report(name, ok, detail)
    if ok:
        print("    e.g. " + named[0][:150], flush=True)


def shm_full_case(uroce):
    """/dev/shm too small for the receive rings (a container's is often 64
    MB): every rank keeps a ring of its own and its host peers write
    through CMA; results stay exact."""
    name = "2 ranks, /dev/shm of 1 MB: rings fall back to CMA"
    cmd = launch_cmd(uroce, 2, "127.0.2.1") + [
        "-c", "-J", "-o", "allreduce,allgather", "-b", "4", "-e", "4M",
        "-f", "32", "-n", "2", "-w", "0"]
    sh = "mount -t tmpfs -o size=1M tmpfs /dev/shm && exec " + \
        " ".join(cmd)
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", sh],
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        report(name, False, "timed out")
        return
    ok, detail = p.returncode == 0, ""
    try:
        doc = json.loads(p.stdout)
        ok = ok and doc["wrong"] == 0 and doc["shm"] == "cma" and \
            len(doc["results"]) >= 6
        detail = "(shm %s, %d points)" % (doc["shm"], len(doc["results"]))
    except (ValueError, KeyError) as e:
        ok = False
        detail = "bad JSON (%s)" % e
    if not ok:
        detail += "\n  rc=%d stderr: %s" % (p.returncode, p.stderr[-800:])
    report(name, ok, detail)


def shm_main(u, t0):
    """Every collective x algorithm x type x op over shared memory, the
    three ways of moving bytes, and a dead rank named within seconds."""
    plan = []
    for n in (2, 3, 4, 8):
        for i, algo in enumerate(("auto", "ring", "tree", "rhd")):
            mode = ("copy", "cma", "map")[(n + i) % 3]
            plan.append((n, algo, 120000, (n + i) % 2 == 1,
                         (n - 1) * (i % 2), "inline", mode))
    plan.append((16, "auto", 10000, False, 5, "inline", "map"))
    plan.append((5, "ring", 120000, True, 4, "inline", "copy"))
    plan.append((4, "ring", 120000, True, 0, "inline", "map-stream"))
    plan.append((2, "tree", 120000, False, 1, "inline", "map-plain"))
    for c in plan:
        check_case(u, *c)
    # the environment overrides the automatic choice, both ways
    check_case(u, 2, "ring", 120000, False, 0, "inline", "map",
               yield_env="on")
    check_case(u, 3, "rhd", 5000, False, 1, "inline", "map",
               yield_env="off")
    shm_full_case(u)
    dead_rank_case(u, 4, 2, "ring", "127.0.2.101", 5)
    dead_rank_case(u, 8, 5, "tree", "127.0.2.111", 5)
    failed = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed (%.0f s)" % (len(results) - failed, failed,
                                             time.time() - t0))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="fewer rank counts and algorithms")
    ap.add_argument("--transport", choices=("roce", "shm"), default="roce")
    args = ap.parse_args()
    u = args.uroce
    t0 = time.time()
    if args.transport == "roce":
        os.environ["UROCE_COLL_SHM"] = "0"
    else:
        os.environ.pop("UROCE_COLL_SHM", None)
        return shm_main(u, t0)

    plan = []  # (ranks, algo, max bytes, small chunks, root)
    for n in (2, 3, 4, 8):
        for i, algo in enumerate(("auto", "ring", "tree", "rhd")):
            plan.append((n, algo, 120000, (n + i) % 2 == 1, (n - 1) * (i % 2)))
    plan.append((16, "auto", 10000, False, 5))
    plan.append((16, "ring", 10000, True, 15))
    # a NIC thread per rank: the responder and the completions come from
    # the thread while the rank polls
    plan.append((4, "auto", 120000, False, 1, "thread"))
    plan.append((8, "ring", 120000, True, 3, "thread"))
    # every rank on one address, a UDP port each (uroce launch --addr)
    plan.append((4, "auto", 120000, False, 2, "inline", None, True))
    plan.append((3, "ring", 120000, True, 0, "thread", None, True))
    if args.quick:
        plan = [c for c in plan if c[0] in (3, 8) or c[1] == "auto" or
                c[-1] is True]
    for c in plan:
        check_case(u, *c)
    plan_case(u)

    dead_rank_case(u, 4, 2, "ring", "127.0.2.101", 8)
    dead_rank_case(u, 8, 5, "tree", "127.0.2.111", 8)

    failed = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed (%.0f s)" % (len(results) - failed, failed,
                                             time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
