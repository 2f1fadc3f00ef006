#!/usr/bin/env python3
"""Bad command lines and environments given to `uroce`: each must end, in
bounded time, with a non-zero exit and a message that names the bad value
(or option, or missing variable). Also the consistency fixes around them:
--version in --help, the perf server printing the result, a perf server
whose client died, launch's signal names, run's port spellings.

Run it inside a fresh network namespace (ctest does: unshare -n), since the
perf cases listen on loopback."""
import argparse
import os
import signal
import subprocess
import sys
import time

LIMIT = 15  # seconds any one refusal may take
results = []


def report(name, ok, detail=""):
    results.append(ok)
    print("%-66s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def refused(uroce, args, *named, env=None, code=None):
    """uroce ARGS exits non-zero within LIMIT and stderr contains every
    string in named."""
    name = " ".join(["%s=%s" % kv for kv in (env or {}).items()
                     if kv[0].startswith("UROCE_")] + ["uroce"] + args)
    full_env = dict(os.environ)
    for k in list(full_env):  # no launcher variables leak in from outside
        if k.startswith(("OMPI_", "PMI", "SLURM_", "UROCE_")) or k in (
                "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            del full_env[k]
    full_env.update(env or {})
    t0 = time.time()
    try:
        p = subprocess.run([uroce] + args, capture_output=True, text=True,
                           timeout=LIMIT, env=full_env)
    except subprocess.TimeoutExpired:
        report(name, False, "\n  still running after %d s" % LIMIT)
        return
    dt = time.time() - t0
    missing = [n for n in named if n not in p.stderr]
    ok = p.returncode != 0 and not missing and \
        (code is None or p.returncode == code)
    report(name, ok, "" if ok else "\n  rc=%d, stderr lacks %r:\n  %s" % (
        p.returncode, missing, p.stderr.strip()[-600:]))
    return dt


def bad_values(uroce):
    r = refused
    # coll-bench: -b 0 used to loop forever at 100% CPU.
    world = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": "29500"}
    r(uroce, ["coll-bench", "-b", "0"], "-b '0'", env=world, code=2)
    r(uroce, ["coll-bench", "-b", "1M", "-e", "1K"], "-b 1M", "-e 1K",
      env=world, code=2)
    r(uroce, ["coll-bench", "-f", "nan"], "-f 'nan'", env=world, code=2)
    r(uroce, ["coll-bench", "-f", "1.0000001"], "-f '1.0000001'", env=world)
    r(uroce, ["coll-bench", "-b", "1", "-e", "16G", "-i", "1"],
      "more than 1000 sizes", env=world)
    r(uroce, ["coll-bench", "-n", "5x"], "-n '5x'", env=world)
    r(uroce, ["coll-bench", "-e", "1T"], "-e '1T'", env=world)
    r(uroce, ["coll-bench", "-o", "allreduse"], "-o 'allreduse'", env=world)
    r(uroce, ["coll-bench", "--timeout", "-5"], "--timeout '-5'", env=world)
    r(uroce, ["coll-bench", "--chunk", "10"], "--chunk '10'", env=world)
    r(uroce, ["coll-bench", "--slots", "65"], "--slots '65'", env=world)
    r(uroce, ["coll-bench", "-b"], "requires an argument", env=world)
    # coll-bench's environment: say what is missing.
    r(uroce, ["coll-bench"], "no launcher environment")
    r(uroce, ["coll-bench"], "Open MPI", "MASTER_ADDR",
      env={"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    r(uroce, ["coll-bench"], "RANK '5'",
      env={"RANK": "5", "WORLD_SIZE": "2"})
    r(uroce, ["coll-bench"], "MASTER_PORT 'http'",
      env=dict(world, MASTER_PORT="http"))
    # launch
    r(uroce, ["launch", "-n", "0", "--", "true"], "-n '0'", code=2)
    r(uroce, ["launch", "-n", "100000", "--", "true"], "-n '100000'")
    r(uroce, ["launch", "-n", "2x", "--", "true"], "-n '2x'")
    r(uroce, ["launch", "-n", "10", "--base-addr", "255.255.255.250", "--",
              "true"], "255.255.255.250", "255.255.255.255")
    r(uroce, ["launch", "-n", "2", "--grace", "nan", "--", "true"],
      "--grace 'nan'")
    r(uroce, ["launch", "-n", "2", "--master-port", "65536", "--", "true"],
      "--master-port '65536'")
    r(uroce, ["launch", "-n", "2"], "no program")
    r(uroce, ["launch", "-n", "2", "--addr", "10.0.0.1", "--base-addr",
              "10.0.0.1", "--", "true"], "--addr and --base-addr")
    r(uroce, ["launch", "-n", "2", "--addr", "10.0.0.300", "--", "true"],
      "--addr 10.0.0.300 is not an IP address")
    r(uroce, ["launch", "-n", "4", "--addr", "::1", "--rdma-port", "65534",
              "--", "true"], "--rdma-port 65534", "past 65535")
    r(uroce, ["launch", "-n", "2", "--rdma-port", "0", "--", "true"],
      "--rdma-port '0'")
    r(uroce, ["coll-bench"], "UROCE_PORT=4791x",
      env=dict(world, UROCE_PORT="4791x"))
    # perf
    r(uroce, ["perf", "write", "bw", "-D", "nan"], "--duration 'nan'",
      code=2)
    r(uroce, ["perf", "write", "bw", "-D", "inf"], "--duration 'inf'")
    r(uroce, ["perf", "write", "bw", "--bogus"], "'--bogus'", code=2)
    r(uroce, ["perf", "write", "bw", "--pcap", "/nonexistent/dir/x.pcap"],
      "--pcap '/nonexistent/dir/x.pcap'", "No such file")
    r(uroce, ["perf", "write", "bw", "--trace", "/nonexistent/dir/t.jsonl"],
      "--trace '/nonexistent/dir/t.jsonl'", "No such file")
    r(uroce, ["perf", "write", "bw"], "UROCE_TRACE=/nonexistent/dir/t",
      "No such file", env={"UROCE_TRACE": "/nonexistent/dir/t"})
    r(uroce, ["perf", "write", "bw", "-s", "10x"], "--size '10x'")
    r(uroce, ["perf", "write", "bw", "-p", "0"], "'0'")
    r(uroce, ["perf", "write", "bw", "--udp-port", "99999"],
      "--udp-port '99999'")
    r(uroce, ["perf", "write", "bw", "-m", "1500"], "--mtu '1500'")
    r(uroce, ["perf", "write", "bw", "-q", "-1"], "--qps '-1'")
    r(uroce, ["perf", "wrte", "bw"], "'wrte'")
    # the transport's environment (docs/transport.md)
    r(uroce, ["perf", "write", "bw"], "UROCE_PATHS=0", "1..16384",
      env={"UROCE_PATHS": "0"})
    r(uroce, ["perf", "write", "bw"], "UROCE_PATHS=16385",
      env={"UROCE_PATHS": "16385"})
    r(uroce, ["perf", "write", "bw"], "UROCE_PATHS=8x",
      env={"UROCE_PATHS": "8x"})
    r(uroce, ["perf", "write", "bw"], "UROCE_TRANSPORT=multipth",
      env={"UROCE_TRANSPORT": "multipth"})
    r(uroce, ["perf", "write", "bw"], "UROCE_CC=dcqnc", "swift",
      env={"UROCE_CC": "dcqnc"})
    r(uroce, ["perf", "write", "bw", "a", "b"], "'b'")
    # run
    r(uroce, ["run", "--udp-port", "0", "--", "true"], "--udp-port '0'")
    r(uroce, ["run", "--rx-drop", "nan", "--", "true"], "--rx-drop 'nan'")
    r(uroce, ["run", "--rx-drop", "1", "--", "true"], "--rx-drop '1'")
    r(uroce, ["run", "--rx-drop", "0.1", "--rx-drop-only", "acks", "--",
              "true"], "--rx-drop-only 'acks'")
    r(uroce, ["run", "--rx-drop-only", "requests", "--", "true"],
      "--rx-drop-only needs --rx-drop")
    r(uroce, ["run", "--pcap", "/nonexistent/dir/x.pcap", "--", "true"],
      "--pcap '/nonexistent/dir/x.pcap'")
    r(uroce, ["run", "--bogus", "--", "true"], "'--bogus'")
    r(uroce, ["run", "--trace", "/nonexistent/dir/t.jsonl", "--", "true"],
      "--trace '/nonexistent/dir/t.jsonl'", "No such file")
    # trace: files that are not traces, bad options
    r(uroce, ["trace", "/nonexistent/t.jsonl"], "/nonexistent/t.jsonl",
      "No such file", code=1)
    r(uroce, ["trace", "/dev/null"], "/dev/null", "no trace events", code=1)
    r(uroce, ["trace", "/etc/passwd"], "/etc/passwd", "no trace events")
    r(uroce, ["trace", "/"], "/: Is a directory", code=1)
    r(uroce, ["trace", "--qp", "-1", "/dev/null"], "--qp '-1'", code=2)
    r(uroce, ["trace", "--qp", "2x", "/dev/null"], "--qp '2x'", code=2)
    r(uroce, ["trace", "--qp", "16777216", "/dev/null"], "--qp '16777216'")
    r(uroce, ["trace"], "usage", code=2)
    r(uroce, ["trace", "--bogus", "x"], "bogus", code=2)
    # sim --trace: only where it can mean something
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "..", "..", "examples", "sim", "incast_pfc.yaml")
    r(uroce, ["sim", "-q", "--no-plots", "-o", "/tmp/uroce-bad-sim",
              "--trace", "/nonexistent/dir/t.jsonl", example],
      "/nonexistent/dir/t.jsonl", "No such file")
    simple = "/tmp/uroce-bad-simple.yaml"
    with open(example) as f, open(simple, "w") as g:
        g.write(f.read().replace("transport:", "transport:\n  model: simple"))
    r(uroce, ["sim", "-q", "--no-plots", "-o", "/tmp/uroce-bad-sim",
              "--trace", "/tmp/uroce-bad-t.jsonl", simple],
      "trace needs the uroce host model")
    r(uroce, ["sim", "--trace", "/tmp/t.jsonl", "--compare", "a.yaml",
              "b.yaml"], "--trace", "--compare", code=2)
    r(uroce, ["run", "--addr"], "--addr needs a value")
    # pktgen
    r(uroce, ["pktgen", "--random", "-1", "--out", "/tmp/x.pcap"],
      "--random '-1'")
    r(uroce, ["pktgen", "--demo", "--seed", "12ab", "--out", "/tmp/x.pcap"],
      "--seed '12ab'")
    r(uroce, ["pktgen", "--demo", "--out", "/nonexistent/dir/x.pcap"],
      "--out '/nonexistent/dir/x.pcap'")
    r(uroce, ["pktgen", "--demo"], "--out")
    # top level
    r(uroce, ["frobnicate"], "'frobnicate'")


def run(cmd, limit=LIMIT, **kw):
    return subprocess.run(cmd, capture_output=True, text=True,
                          timeout=limit, **kw)


# A whole perf test, not a refusal: more time (sanitizers, a busy host).
PERF_LIMIT = 120


def consistency(uroce):
    p = run([uroce, "--help"])
    report("uroce --help mentions --version", "--version" in p.stdout)
    p = run([uroce, "--version"])
    report("uroce --version", p.returncode == 0 and
           p.stdout.startswith("uroce "))

    p = run([uroce, "launch", "-n", "1", "--", "sh", "-c", "kill -9 $$"])
    report("launch names the signal (killed by SIGKILL)",
           p.returncode == 137 and "killed by SIGKILL" in p.stderr and
           "killed by Killed" not in p.stderr, p.stderr.strip())

    p = run([uroce, "run", "--udp-port", "5000", "--", "sh", "-c",
             "echo $UROCE_PORT"])
    report("run --udp-port sets UROCE_PORT",
           p.returncode == 0 and p.stdout.strip() == "5000")
    p = run([uroce, "run", "--port", "5001", "--", "sh", "-c",
             "echo $UROCE_PORT"])
    report("run --port still works, with a note",
           p.returncode == 0 and p.stdout.strip() == "5001" and
           "--udp-port" in p.stderr)


def perf_pair(uroce, test, extra=()):
    """Server and client of one perf test; returns both CompletedProcess
    results (or None on a hang)."""
    base = [uroce, "perf", "write", test, "-n", "100"] + list(extra)
    srv = subprocess.Popen(base + ["--addr", "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        cli = run(base + ["--addr", "127.0.0.2", "127.0.0.1"], PERF_LIMIT)
        out, err = srv.communicate(timeout=PERF_LIMIT)
    except subprocess.TimeoutExpired:
        srv.kill()
        return None, None
    return (srv.returncode, out, err), cli


def perf_server(uroce):
    for test in ("bw", "lat"):
        s, c = perf_pair(uroce, test, ["--tcp-port", "18600"])
        ok = s is not None and s[0] == 0 and c.returncode == 0
        rows = [l for l in (s[1] if s else "").splitlines()
                if l.strip() and l.split()[0].isdigit()]
        crow = [l for l in (c.stdout if c else "").splitlines()
                if l.strip() and l.split()[0].isdigit()]
        report("perf write %s: the server prints the result too" % test,
               ok and len(rows) == 1 and rows == crow,
               "" if ok and rows == crow else "\n  server: %r\n  client: %r"
               % (s, c and c.stdout))

    # The client dies mid-test: the server says so, promptly.
    srv = subprocess.Popen([uroce, "perf", "write", "bw", "-D", "30",
                            "--addr", "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    cli = subprocess.Popen([uroce, "perf", "write", "bw", "-D", "30",
                            "--addr", "127.0.0.2", "127.0.0.1"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(2)
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    try:
        out, err = srv.communicate(timeout=LIMIT)
        report("perf server whose client died says so",
               srv.returncode != 0 and
               "client closed the connection" in err,
               "" if "client closed" in err else err.strip())
    except subprocess.TimeoutExpired:
        srv.kill()
        report("perf server whose client died says so", False,
               "\n  still running %d s after the kill" % LIMIT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    a = ap.parse_args()
    bad_values(a.uroce)
    consistency(a.uroce)
    perf_server(a.uroce)
    failed = results.count(False)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
