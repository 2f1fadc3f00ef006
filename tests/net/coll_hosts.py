#!/usr/bin/python3
"""Collectives across hosts: 2 and 3 hosts, each a network namespace of
its own (a switch namespace with a bridge joins their veths, subnet
10.77.0.0/16), two ranks per host, started as a real multi-node job would
be: one `uroce launch --nnodes H --node-rank K --master-addr ...` per host.

Ranks of one host talk through shared memory, ranks of different hosts
RoCEv2 over the veths, in one communicator.

  - every collective x type x op with uneven counts, in place and out of
    place, for each algorithm: #wrong must be 0, every host must report
    both its ranks on shared memory;
  - a rank killed with SIGKILL: every other rank, on its host and on the
    others, exits by itself within seconds naming it.

Needs root (network namespaces). Prints one line per case and `N passed,
M failed`."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

results = []
PID = os.getpid() % 10000
NS = []  # namespaces made here


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-58s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


def hosts_up(nhosts):
    """Namespaces hx-coll-<pid>-h<k> (10.77.<k+1>.1 and .2 on one veth)
    and a switch namespace with a bridge."""
    sw = "hx-coll-%d-sw" % PID
    sh("ip", "netns", "add", sw)
    NS.append(sw)
    sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", sw, "link", "set", "br0", "up")
    names = []
    for k in range(nhosts):
        ns = "hx-coll-%d-h%d" % (PID, k)
        sh("ip", "netns", "add", ns)
        NS.append(ns)
        a, b = "hc%d%d" % (PID, k), "hs%d%d" % (PID, k)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        sh("ip", "link", "set", a, "netns", ns)
        sh("ip", "link", "set", b, "netns", sw)
        sh("ip", "-n", sw, "link", "set", b, "master", "br0")
        sh("ip", "-n", sw, "link", "set", b, "mtu", "9000", "up")
        for i in (1, 2):
            sh("ip", "-n", ns, "addr", "add", "10.77.%d.%d/16" % (k + 1, i),
               "dev", a)
        sh("ip", "-n", ns, "link", "set", a, "mtu", "9000", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        names.append(ns)
    sh("ip", "-n", sw, "link", "set", "br0", "mtu", "9000")
    time.sleep(0.5)
    return names


def hosts_down():
    for ns in reversed(NS):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    NS.clear()


def start_job(uroce, hosts, per_host, args, extra=(), shared=False):
    """One uroce launch per host; returns the Popen objects. shared: the
    ranks of a host share its first address (a UDP port each)."""
    port = 20000 + PID % 20000
    procs = []
    for k, ns in enumerate(hosts):
        cmd = ["ip", "netns", "exec", ns, uroce, "launch", "-n",
               str(per_host), "--nnodes", str(len(hosts)), "--node-rank",
               str(k), "--master-addr", "10.77.1.1", "--master-port",
               str(port), "--addr" if shared else "--base-addr",
               "10.77.%d.1" % (k + 1)] + \
            list(extra) + ["--", uroce, "coll-bench"] + args
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


def check_case(uroce, hosts, algo, small_chunks, shared=False):
    name = "%d hosts x 2 ranks, algo %-5s%s%s" % (
        len(hosts), algo, ", 4K chunks 2 slots" if small_chunks else "",
        ", one address a host" if shared else "")
    args = ["-c", "-J", "-o", "all", "-d", "all", "-r", "all", "-b", "4",
            "-e", "120000", "-f", "13", "-n", "1", "-w", "0", "--algo", algo,
            "--root", "3", "--timeout", "20000"]
    if small_chunks:
        args += ["--chunk", "4096", "--slots", "2"]
    t0 = time.time()
    procs = start_job(uroce, hosts, 2, args, shared=shared)
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=150))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            report(name, False, "timed out")
            return
    dt = time.time() - t0
    ok = all(p.returncode == 0 for p in procs)
    detail = ""
    try:
        doc = json.loads(outs[0][0])
        ok = ok and doc["wrong"] == 0 and doc["ranks"] == 2 * len(hosts)
        ok = ok and doc["host_ranks"] == 2 and doc["shm"] == "map"
        ok = ok and doc["hosts"] == len(hosts) and doc["ranks_per_host"] == 2
        # the hosts are network namespaces of one machine: its CPUs are
        # shared by all their ranks, and polls yield only when outnumbered
        want_yield = 2 * len(hosts) > len(os.sched_getaffinity(0))
        if doc.get("yield") != want_yield:
            ok = False
            detail += "\n  yield %r with %d ranks on %d CPUs" % (
                doc.get("yield"), 2 * len(hosts),
                len(os.sched_getaffinity(0)))
        ok = ok and len(set(r["collective"] for r in doc["results"])) == 6
        ok = ok and len(set(r["type"] for r in doc["results"])) == 6
        if algo != "auto":
            ok = ok and algo in set(r["algo"] for r in doc["results"])
        else:
            # above 64 KiB an allreduce over hosts goes hierarchical
            big = [r for r in doc["results"] if r["collective"] == "allreduce"
                   and r["size"] > 65536]
            ok = ok and big and all(r["algo"] == "hier" for r in big)
        rows = len(doc["results"])
    except (ValueError, KeyError) as e:
        ok = False
        rows = 0
        detail = "bad JSON (%s): %s" % (e, outs[0][0][-300:])
    if not ok:
        detail += "\n  " + "\n  ".join(
            "host %d rc %d: %s" % (k, p.returncode, outs[k][1][-600:])
            for k, p in enumerate(procs))
    else:
        detail = "(%d points, %.1f s)" % (rows, dt)
    report(name, ok, detail)


def rank_pids(ns_launchers):
    """global rank -> pid, from the launchers' children's environments"""
    out = {}
    for lp in ns_launchers:
        # ip netns exec execs uroce launch in place: same pid
        try:
            with open("/proc/%d/task/%d/children" % (lp, lp)) as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for k in kids:
            try:
                with open("/proc/%d/environ" % k, "rb") as f:
                    env = dict(x.split(b"=", 1) for x in f.read().split(b"\0")
                               if b"=" in x)
                out[int(env[b"RANK"])] = k
            except (OSError, KeyError, ValueError):
                pass
    return out


def dead_rank_case(uroce, hosts, victim, limit, algo):
    n = 2 * len(hosts)
    name = "dead rank: %d hosts x 2 ranks, %s, kill rank %d" % (
        len(hosts), algo, victim)
    args = ["-o", "allreduce", "-b", "1M", "-e", "1M", "-n", "1000000",
            "-w", "0", "--algo", algo, "--timeout", "3000"]
    procs = start_job(uroce, hosts, 2, args, ["--grace", "60"])
    pids = {}
    end = time.time() + 20
    while time.time() < end and len(pids) < n:
        time.sleep(0.2)
        pids = rank_pids([p.pid for p in procs])
    time.sleep(2.0)
    if victim not in pids or any(p.poll() is not None for p in procs):
        for p in procs:
            p.kill()
        errs = [p.communicate()[1] for p in procs]
        report(name, False, "ranks did not start: %s" % errs)
        return
    t_kill = time.time()
    os.kill(pids[victim], signal.SIGKILL)
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=limit + 20)[1])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            report(name, False, "HANG: still running %d s after the kill" %
                   (limit + 20))
            return
    waited = time.time() - t_kill
    err = "".join(errs)
    lines = [l for l in err.splitlines() if l.startswith("uroce coll-bench")]
    named = [l for l in lines if "rank %d" % victim in l]
    ok = all(p.returncode != 0 for p in procs) and waited < limit and \
        len(named) == n - 1 and "terminating them" not in err
    detail = "(all %d others failed by themselves in %.1f s)" % (
        n - 1, waited) if ok else \
        "\n  after %.1f s, %d of %d named rank %d:\n  %s" % (
            waited, len(named), n - 1, victim,
            "\n  ".join(err.splitlines()[-14:]))
    report(name, ok, detail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    args = ap.parse_args()
    u = os.path.abspath(args.uroce)
    t0 = time.time()
    try:
        hosts = hosts_up(3)
        for i, algo in enumerate(("auto", "ring", "tree", "rhd", "hier")):
            check_case(u, hosts[:2], algo, i % 2 == 1)
        check_case(u, hosts, "auto", False)
        check_case(u, hosts, "ring", True)
        check_case(u, hosts, "hier", True)
        check_case(u, hosts[:2], "auto", False, shared=True)
        check_case(u, hosts, "hier", True, shared=True)
        dead_rank_case(u, hosts[:2], 3, 8, "ring")
        dead_rank_case(u, hosts, 1, 8, "hier")
    finally:
        hosts_down()
    failed = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed (%.0f s)" % (len(results) - failed, failed,
                                             time.time() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
