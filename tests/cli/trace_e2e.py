#!/usr/bin/env python3
"""The transport trace end to end (docs/transport.md "Trace"):

- `uroce sim --trace`: every line is a JSON object with the members its
  kind promises, in time order; the events agree with the counters the
  simulator reports in summary.json (timeouts, NAKs, CNPs) on a lossy
  incast and on one with ECN and DCQCN (whose rate cuts are traced);
  `uroce trace` reports the same figures, and `--qp` prints one QP's lines.
- `uroce perf --trace`: both sides append to one file; each side's QP goes
  RESET > INIT > RTR > RTS; the lines of two processes never mix.
- `uroce run --trace` hands the program an absolute UROCE_TRACE.

Run it inside a fresh network namespace (ctest does: unshare -n), since the
perf case listens on loopback."""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

results = []

KIND_MEMBERS = {
    "qp_state": {"from", "to"}, "req": {"from", "to", "psn"},
    "resp": {"state", "psn"}, "comp": {"state", "psn"},
    "go_back": {"cause", "psn"}, "resend": {"cause", "psn"},
    "nak_tx": {"nak", "psn"}, "nak_rx": {"nak", "psn"},
    "timeout": {"cause", "retries_left", "psn"}, "cnp_tx": set(),
    "cnp_rx": set(), "cc": {"cause", "rate_bps", "cwnd"},
    "drop": {"why", "psn"},
}


def report(name, ok, detail=""):
    ok = bool(ok)
    results.append(ok)
    print("%-60s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def load(path, who):
    """The trace's events; reports lines that are not well-formed."""
    evs, bad = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                e = json.loads(line)
            except ValueError:
                bad.append(n)
                continue
            want = KIND_MEMBERS.get(e.get("ev"))
            if want is None or not want <= set(e) or "qpn" not in e or \
                    "t_us" not in e or who not in e or "?" in e.values():
                bad.append(n)
            evs.append(e)
    report("%s: every line a well-formed event" % path, not bad and evs,
           "%d events; bad lines %s" % (len(evs), bad[:5]))
    return evs


def sim_case(uroce, work, name, yaml_text, want_cc):
    scen = os.path.join(work, name + ".yaml")
    with open(scen, "w") as f:
        f.write(yaml_text)
    out, trace = os.path.join(work, name), os.path.join(work, name + ".jsonl")
    p = subprocess.run([uroce, "sim", scen, "-o", out, "-q", "--no-plots",
                        "--threads", "2", "--trace", trace],
                       capture_output=True, text=True, timeout=300)
    report("%s: uroce sim --trace exits 0" % name, p.returncode == 0,
           p.stderr[-400:])
    if p.returncode:
        return
    evs = load(trace, "nic")
    times = [e["t_us"] for e in evs]
    report("%s: in time order (one thread)" % name, times == sorted(times))
    count = collections.Counter(e["ev"] for e in evs)
    tp = json.load(open(os.path.join(out, "summary.json")))["transport"]
    for ev, key in (("timeout", "timeouts"), ("nak_tx", "naks"),
                    ("cnp_tx", "cnps")):
        report("%s: %s events = summary's %s" % (name, ev, key),
               count[ev] == tp[key], "%d vs %d" % (count[ev], tp[key]))
    report("%s: the lossy part happened" % name,
           count["go_back"] > 0 or count["cnp_tx"] > 0, str(dict(count)))
    if want_cc:
        cuts = [e for e in evs if e["ev"] == "cc" and e["cause"] == "cnp"]
        report("%s: DCQCN's cuts traced with their cause" % name,
               len(cuts) > 0 and all(0 < e["rate_bps"] < 100e9 for e in cuts),
               "%d cuts" % len(cuts))
    # the summary's figures
    s = subprocess.run([uroce, "trace", trace], capture_output=True,
                       text=True, timeout=120)
    head = "%s: %d events from" % (trace, len(evs))
    ok = s.returncode == 0 and head in s.stdout
    if count["nak_tx"]:
        ok = ok and ("PSN-sequence-error %d" % count["nak_tx"]) in s.stdout
    if count["timeout"]:
        ok = ok and re.search(r"timeout/\w+ %d" % count["timeout"],
                              s.stdout) is not None
    report("%s: uroce trace agrees" % name, ok, s.stdout[-600:] + s.stderr)
    qpn = next(e["qpn"] for e in evs if e["ev"] == "go_back" or
               e["ev"] == "cc")
    q = subprocess.run([uroce, "trace", "--qp", str(qpn), trace],
                       capture_output=True, text=True, timeout=120)
    lines = q.stdout.splitlines()
    report("%s: uroce trace --qp prints that QP's lines" % name,
           q.returncode == 0 and lines and
           all(json.loads(x)["qpn"] == qpn for x in lines) and
           len(lines) == sum(e["qpn"] == qpn for e in evs))


# A 4-to-1 incast on one leaf; the two runs differ in what the switch
# and the transport do about it.
INCAST = """name: %s
seed: 1
topology:
  kind: leaf_spine
  leaves: 1
  hosts_per_leaf: 5
  links:
    all: {rate_gbps: 100, delay_us: 1}
switch:
%s
transport:
  mtu: 4096
%s
workload:
  kind: incast
  senders: 4
  receiver: 0
  size: 1MiB
"""
LOSSY = INCAST % ("lossy", "  buffer: 256KiB\n  pfc: {enabled: false}",
                  "  rto_us: 200")
DCQCN = INCAST % ("dcqcn",
                  "  ecn: {enabled: true, kmin: 20KB, kmax: 200KB, pmax: 0.2}",
                  "  cc: dcqcn")


def perf_case(uroce, work):
    trace = os.path.join(work, "perf.jsonl")
    base = [uroce, "perf", "write", "bw", "-s", "65536", "-n", "2000",
            "--trace", trace]
    srv = subprocess.Popen(base + ["--addr", "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    time.sleep(0.5)
    cli = subprocess.run(base + ["--addr", "127.0.0.2", "127.0.0.1"],
                         capture_output=True, text=True, timeout=60)
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
    report("perf --trace: both sides exit 0",
           cli.returncode == 0 and srv.returncode == 0, cli.stderr[-300:])
    evs = load(trace, "dev")
    by = collections.defaultdict(list)
    for e in evs:
        by[(e["dev"], e["pid"])].append(e)
    report("perf --trace: both sides in one file", len(by) == 2,
           str(list(by)))
    for who, es in sorted(by.items()):
        path = [(e["from"], e["to"]) for e in es if e["ev"] == "qp_state"]
        report("perf --trace: %s %s: RESET > INIT > RTR > RTS" % who,
               path[:3] == [("RESET", "INIT"), ("INIT", "RTR"),
                            ("RTR", "RTS")], str(path))
        t = [e["t_us"] for e in es]
        report("perf --trace: %s %s: its lines in time order" % who,
               t == sorted(t))
    steps = collections.Counter(e["ev"] for e in evs)
    report("perf --trace: the responder's steps are there",
           steps["resp"] >= 2000, str(dict(steps)))


def run_case(uroce, work):
    p = subprocess.run([uroce, "run", "--trace", "rel.jsonl", "--", "sh",
                        "-c", 'echo "$UROCE_TRACE"'], capture_output=True,
                       text=True, timeout=30, cwd=work)
    report("run --trace: the program gets an absolute UROCE_TRACE",
           p.returncode == 0 and
           p.stdout.strip() == os.path.join(os.path.realpath(work),
                                            "rel.jsonl"),
           p.stdout + p.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    a = ap.parse_args()
    a.uroce = os.path.abspath(a.uroce)
    with tempfile.TemporaryDirectory() as work:
        sim_case(a.uroce, work, "lossy", LOSSY, False)
        sim_case(a.uroce, work, "dcqcn", DCQCN, True)
        perf_case(a.uroce, work)
        run_case(a.uroce, work)
    print("%d/%d passed" % (sum(results), len(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
