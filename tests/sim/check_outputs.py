#!/usr/bin/python3
"""Runs every shipped simulator example (examples/sim/*.yaml) through
`uroce sim` and checks what a user reads: every plot the script names is a
non-empty PNG and gnuplot said nothing; no receive rate above the link's
and no utilisation above 100%; a collective's headline agrees with
summary.json, is non-zero, and never beats its bound; bad scenario files
(/dev/zero among them) are refused quickly with a message naming them.

Golden outputs: each example's results (summary.json without its
settings, version and event count) must equal tests/sim/golden/<example>.json,
integers and strings exactly, other numbers within a relative 1e-9; a
difference is listed key by key. A change in behaviour updates them in the
same commit, saying why: `tests/sim/check_outputs.py --update-golden`
reruns every example and rewrites them (and removes those of examples that
are gone).

Slow examples run shortened (smaller sizes or fabrics, the same kind of
workload, so the same plots); an example without an entry below runs as
shipped, so a new example is covered by default. Exit 77 (skipped) when
gnuplot is missing and everything else passed."""

import argparse
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(HERE, "golden")
# summary.json's keys that are no result: the settings (resolved: every
# one, defaults filled in; the results show what they changed), the
# version, and the event count (an implementation detail: a change in
# how events are scheduled changes it and nothing else). --reproducible
# leaves out the wall-clock fields already; they are listed in case.
NOT_GOLDEN = {"uroce_version", "resolved", "events", "wall_s", "events_per_s"}
REL_TOL = 1e-9

# Per example: (pattern, replacement) applied to the YAML text.
SHORTEN = {
    "fat_tree_ecmp.yaml": [(r"k: 16", "k: 8")],
    "fat_tree_spray.yaml": [(r"k: 16", "k: 8")],
    "dcqcn_leaf_spine.yaml": [(r"size: 256KiB", "size: 32KiB")],
    "coll_ring_fat_tree_ecmp.yaml": [(r"max: 16MiB", "max: 2MiB")],
    "coll_ring_fat_tree_spray.yaml": [(r"max: 16MiB", "max: 2MiB")],
    # 8 MiB on 64 ranks: blocks of two chunks, where the chunk pipeline
    # once beat the bound.
    "coll_ring_leaf_spine_2to1.yaml": [
        (r"sizes: \[1MiB, 4MiB, 16MiB\]", "sizes: [1MiB, 8MiB]")
    ],
}

# The fabric comparisons in examples/sim/ib_vs_roce/ run on a k=4
# fat-tree with smaller sizes (each pattern applied where present).
SHORTEN_DIR = {
    "ib_vs_roce": [(r"k: (8|16) ", "k: 4 "),
                   (r"sizes: \[4MiB\]", "sizes: [256KiB]"),
                   (r"size: 16MiB", "size: 1MiB"), (r"size: 32KiB", "size: 8KiB"),
                   (r"senders: 64", "senders: 15"),
                   (r"switch: 128, port: 8", "switch: 8, port: 2"),
                   (r"at_us: 100", "at_us: 20")],
}

failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, flush=True)


def check(cond, what):
    if not cond:
        fail(what)
    return cond


def scenario_copy(src, dst_dir):
    """The example with its shortening applied, next to copies of the files
    it names (paths in a scenario are relative to it)."""
    name = os.path.basename(src)
    text = open(src).read()
    applied = []
    for pat, rep in SHORTEN.get(name, []):
        new = re.sub(pat, rep, text)
        check(new != text, "%s: shortening '%s' no longer applies" % (name, pat))
        if new != text:
            applied.append([pat, rep])
        text = new
    sub = os.path.basename(os.path.dirname(src))
    for pat, rep in SHORTEN_DIR.get(sub, []):
        new = re.sub(pat, rep, text)
        if new != text:
            applied.append([pat, rep])
        text = new
    for f in glob.glob(os.path.join(os.path.dirname(src), "*")):
        if not f.endswith(".yaml") and os.path.isfile(f):
            shutil.copy(f, dst_dir)
    dst = os.path.join(dst_dir, name)
    with open(dst, "w") as f:
        f.write(text)
    return dst, applied


def csv_rows(path):
    with open(path) as f:
        lines = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    head = lines[0].split(",")
    return head, [dict(zip(head, l.split(","))) for l in lines[1:]]


def check_run(name, out, stdout, stderr, have_gnuplot):
    s = json.load(open(os.path.join(out, "summary.json")))
    check("uroce_version" in s and "resolved" in s,
          "%s: summary.json lacks uroce_version or resolved" % name)
    res = s["resolved"]
    host = res["topology"]["links"]["host"]["rate_gbps"]
    mtu = res["transport"]["mtu"]
    # Payload of a full packet over its wire bytes (IPv4: 82 bytes of
    # headers, FCS, preamble and gap; InfiniBand: LRH, BTH, ICRC, VCRC and
    # delimiters, 28, and a GRH's 40).
    if res.get("fabric") == "infiniband":
        over = 28 + (40 if res["infiniband"]["grh"] else 0)
    else:
        over = 82
    good = host * mtu / (mtu + over)
    r = s.get("receive_rate_gbps")
    if res["sample_interval_us"] > 0:
        check(r is not None, "%s: no receive_rate_gbps" % name)
    if r:
        check(r["stream_peak"] <= good * 1.0001,
              "%s: a stream at %.3f Gb/s, above the %.3f Gb/s link goodput"
              % (name, r["stream_peak"], good))
        check(r["stream_peak"] > 0, "%s: no stream rate" % name)
        nics = s["scenario"]["nics"]
        check(r["aggregate_peak"] <= nics * good * 1.0001,
              "%s: aggregate %.1f Gb/s above %u links" %
              (name, r["aggregate_peak"], nics))
        _, rows = csv_rows(os.path.join(out, "throughput.csv"))
        top = max(float(x["max_gbps"]) for x in rows)
        check(top <= good * 1.0001,
              "%s: throughput.csv max %.3f above %.3f" % (name, top, good))
        _, rows = csv_rows(os.path.join(out, "utilisation.csv"))
        for x in rows:
            for k, v in x.items():
                if k != "time_us":
                    check(float(v) <= 100.01,
                          "%s: %s at %s%% at %s us" % (name, k, v, x["time_us"]))
    headline = [l for l in stdout.splitlines() if l.startswith(name + ":")]
    check(len(headline) == 1, "%s: no headline line" % name)
    headline = headline[0] if headline else ""
    if "collective" in s:
        c = s["collective"]
        sizes = c["sizes"]
        check(c["done"] and sizes, "%s: collective not done" % name)
        check("0/0 flows" not in headline and "FCT" not in headline,
              "%s: collective headline about flows: %s" % (name, headline))
        for z in sizes:
            check(z["time_us"] > 0 and z["busbw_GBps"] > 0,
                  "%s: size %d has zero time or busbw" % (name, z["bytes"]))
            # The bound is a bound: a run that beats it is a bug.
            check(z["time_us"] >= z["bound_us"] and z["ratio"] >= 1.0,
                  "%s: size %d took %.3f us, beating its bound %.3f us" %
                  (name, z["bytes"], z["time_us"], z["bound_us"]))
            check(z["busbw_GBps"] <= z["bound_busbw_GBps"] + 1e-9,
                  "%s: busbw above the bound's" % name)
        big = max(sizes, key=lambda z: z["bytes"])
        m = re.search(r"largest (\d+) B in ([\d.]+) us, busbw ([\d.]+) GB/s "
                      r"\(bound ([\d.]+), time / bound ([\d.]+)\)", headline)
        if check(m, "%s: headline lacks the collective: %s" % (name, headline)):
            check(int(m.group(1)) == big["bytes"] and
                  abs(float(m.group(2)) - big["time_us"]) < 0.01 and
                  abs(float(m.group(3)) - big["busbw_GBps"]) < 0.001 and
                  abs(float(m.group(4)) - big["bound_busbw_GBps"]) < 0.001,
                  "%s: headline %s disagrees with summary.json" %
                  (name, headline))
        check(s["completion_us"] > 0 and s["aggregate_goodput_gbps"] > 0,
              "%s: zero completion or goodput" % name)
    else:
        fl = s["flows"]
        check(fl["count"] > 0 and fl["done"] == fl["count"],
              "%s: flows %s" % (name, fl))
        m = re.search(r"(\d+)/(\d+) flows done; FCT p50 ([\d.]+) us", headline)
        if check(m, "%s: headline: %s" % (name, headline)):
            check(int(m.group(1)) == fl["done"] and
                  abs(float(m.group(3)) - s["fct_us"]["p50"]) < 0.01,
                  "%s: headline disagrees with summary.json" % name)
        for b in s["fct_slowdown"]:
            # Nothing finishes faster than alone in the fabric.
            check(b["p50"] >= 1.0 and b["max"] >= b["p50"],
                  "%s: slowdown %s" % (name, b))
    # Plots: every PNG the script writes exists and is not empty, and
    # gnuplot said nothing.
    check(not re.search(r"gnuplot|warning|skipping", stderr, re.I),
          "%s: gnuplot talked: %s" % (name, stderr.strip()[-400:]))
    check(not os.path.exists(os.path.join(out, "plots.log")),
          "%s: plots.log exists" % name)
    pngs = re.findall(r"set output '([^']+)'",
                      open(os.path.join(out, "plots.gp")).read())
    want = {"coll_busbw.png"} if "collective" in s else {
        "fct_cdf.png", "fct_slowdown.png"}
    if res["sample_interval_us"] > 0:
        want |= {"throughput.png", "utilisation.png", "queues.png",
                 "port_queues.png", "pfc.png", "ecn.png"}
        if res["transport"]["cc"] == "dcqcn" and "collective" not in s:
            want.add("cc_rate.png")
    check(want <= set(pngs), "%s: plots.gp lacks %s" %
          (name, sorted(want - set(pngs))))
    if have_gnuplot:
        for p in pngs:
            path = os.path.join(out, p)
            check(os.path.exists(path) and os.path.getsize(path) > 0,
                  "%s: %s missing or empty" % (name, p))


def same_on_threads(uroce, y, out, name):
    """The run on three threads writes the sequential run's results, byte
    for byte (a scenario that cannot be cut runs on one and says why)."""
    t3 = out + "-threads3"
    p = subprocess.run([uroce, "sim", "--threads", "3", "--no-plots",
                        "--reproducible", "-o", t3, y],
                       capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0, "%s --threads 3: exit %d: %s" %
                 (name, p.returncode, p.stderr[-400:])):
        return
    m = re.search(r"(\d+) threads?(: (.*))?", p.stderr)
    check(m, "%s --threads 3: no thread count on stderr" % name)
    files = sorted(f for f in os.listdir(out)
                   if f.endswith(".json") or f.endswith(".csv"))
    check("summary.json" in files, "%s: no summary.json" % name)
    for f in files:
        a = open(os.path.join(out, f), "rb").read()
        b = open(os.path.join(t3, f), "rb").read() \
            if os.path.exists(os.path.join(t3, f)) else None
        check(a == b, "%s: %s differs on 3 threads" % (name, f))
    print("  %s on %s: %d files the same" %
          (name, m.group(0) if m else "?", len(files)), flush=True)


def compare(uroce, scen, work, have_gnuplot):
    """--compare draws its chart without a gnuplot message."""
    out = os.path.join(work, "compare")
    p = subprocess.run([uroce, "sim", "-q", "--compare", "-o", out,
                        os.path.join(scen, "incast_pfc.yaml"),
                        os.path.join(scen, "incast_lossy.yaml")],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and "B vs A" in p.stdout,
          "--compare: exit %d: %s" % (p.returncode, p.stderr[-300:]))
    check(not re.search(r"gnuplot|warning", p.stderr, re.I),
          "--compare: gnuplot talked: %s" % p.stderr[-300:])
    png = os.path.join(out, "compare_fct_cdf.png")
    if have_gnuplot:
        check(os.path.exists(png) and os.path.getsize(png) > 0,
              "--compare: %s missing or empty" % png)


def bad_inputs(uroce, work):
    """Files that are no scenario: refused, non-zero, naming the file, in
    bounded time."""
    cases = [("/dev/zero", "/dev/zero"), (work, work)]
    for what, key in [("workload: {kind: csv, file: /dev/zero}\n", "/dev/zero"),
                      ("workload: {kind: permutation, size_distribution: "
                       "/dev/zero}\n", "/dev/zero")]:
        p = os.path.join(work, "bad_%d.yaml" % len(cases))
        open(p, "w").write(what)
        cases.append((p, key))
    big = os.path.join(work, "big.yaml")
    with open(big, "w") as f:
        f.write("# " + "x" * (2 << 20) + "\n")
    cases.append((big, big))
    for path, key in cases:
        t0 = time.time()
        try:
            p = subprocess.run([uroce, "sim", "-q", "--no-plots", "-o",
                                os.path.join(work, "bad-out"), path],
                               capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            fail("uroce sim %s did not finish in 20 s" % path)
            continue
        dt = time.time() - t0
        check(p.returncode != 0, "uroce sim %s: exit 0" % path)
        check(key in p.stderr, "uroce sim %s: message does not name it: %s" %
              (path, p.stderr.strip()))
        check(dt < 10, "uroce sim %s: %.1f s" % (path, dt))
        print("  %-40s rc %d in %.2f s: %s" % (path[-40:], p.returncode, dt,
                                                p.stderr.strip()[:100]))


def golden_doc(key, applied, out):
    """What the golden file of an example holds: which example, how it was
    shortened, and its results."""
    s = json.load(open(os.path.join(out, "summary.json")))
    return {"example": "examples/sim/%s.yaml" % key,
            "shortened": applied,
            "results": {k: v for k, v in s.items() if k not in NOT_GOLDEN}}


ABSENT = object()  # a key or list item one side lacks


def diff(old, new, path, out):
    """Appends (path, old, new) for every leaf where new differs from old:
    integers, booleans and strings exactly, other numbers within REL_TOL."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            p = "%s.%s" % (path, k) if path else k
            if k in new:
                diff(old[k], new[k], p, out)
            else:
                out.append((p, old[k], ABSENT))
        for k in new:
            if k not in old:
                out.append(("%s.%s" % (path, k) if path else k, ABSENT,
                            new[k]))
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            p = "%s[%d]" % (path, i)
            if i >= len(new):
                out.append((p, old[i], ABSENT))
            elif i >= len(old):
                out.append((p, ABSENT, new[i]))
            else:
                diff(old[i], new[i], p, out)
    else:
        num = (int, float)
        if (isinstance(old, num) and isinstance(new, num) and
                not isinstance(old, bool) and not isinstance(new, bool) and
                (isinstance(old, float) or isinstance(new, float))):
            same = math.isclose(old, new, rel_tol=REL_TOL, abs_tol=0.0)
        else:
            same = type(old) is type(new) and old == new
        if not same:
            out.append((path, old, new))


def dumps(o, ind=""):
    """JSON with one value a line, but a list of plain values on one line
    (a diff then shows the figure that changed and its key)."""
    inner = ind + "  "
    if isinstance(o, dict) and o:
        return "{\n%s\n%s}" % (",\n".join(
            "%s%s: %s" % (inner, json.dumps(k), dumps(v, inner))
            for k, v in o.items()), ind)
    if (isinstance(o, list) and o and
            any(isinstance(v, (dict, list)) for v in o)):
        return "[\n%s\n%s]" % (",\n".join(
            inner + dumps(v, inner) for v in o), ind)
    return json.dumps(o)


def golden(key, doc, update):
    """Compares an example's results with its golden file, or (update)
    writes the file. Returns whether they matched."""
    path = os.path.join(GOLDEN, key + ".json")
    rel = os.path.relpath(path, ROOT)
    if update:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = dumps(doc) + "\n"
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            with open(path, "w") as f:
                f.write(text)
            print("  %s %s" % ("updated" if old else "created", rel),
                  flush=True)
        return True
    if not os.path.exists(path):
        fail("%s: no golden output %s (a new example?)" % (key, rel))
        return False
    d = []
    diff(json.load(open(path)), doc, "", d)
    if not d:
        return True
    def show(v):
        return "(absent)" if v is ABSENT else json.dumps(v)
    lines = ["    %s: %s -> %s" % (p, show(o), show(n)) for p, o, n in d[:40]]
    if len(d) > 40:
        lines.append("    ... and %d more" % (len(d) - 40))
    fail("%s: results differ from %s (%d values, golden -> now):\n%s" %
         (key, rel, len(d), "\n".join(lines)))
    return False


def stale_goldens(keys, update):
    """Golden files whose example is gone: removed when updating, else a
    failure. Returns how many."""
    n = 0
    for path in sorted(glob.glob(os.path.join(GOLDEN, "**", "*.json"),
                                 recursive=True)):
        key = os.path.relpath(path, GOLDEN)[:-5]
        if key in keys:
            continue
        rel = os.path.relpath(path, ROOT)
        if update:
            os.remove(path)
            print("  removed %s (no such example)" % rel, flush=True)
        else:
            fail("%s: golden output of an example that is gone" % rel)
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", default=os.path.join(ROOT, "build", "uroce"),
                    help="the uroce binary (default: build/uroce)")
    ap.add_argument("--examples", default=os.path.join(ROOT, "examples", "sim"))
    ap.add_argument("--workdir", help="where the runs go (emptied first; "
                    "default: a temporary directory, kept if a check fails)")
    ap.add_argument("--update-golden", action="store_true",
                    help="write tests/sim/golden/ from this run instead of "
                    "comparing with it")
    a = ap.parse_args()
    have_gnuplot = shutil.which("gnuplot") is not None
    tmp = not a.workdir
    if tmp:
        a.workdir = tempfile.mkdtemp(prefix="uroce-sim-examples-")
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    scen = os.path.join(a.workdir, "scenarios")
    os.makedirs(scen)
    examples = sorted(glob.glob(os.path.join(a.examples, "*.yaml")) +
                      glob.glob(os.path.join(a.examples, "*", "*.yaml")))
    check(examples, "no examples in %s" % a.examples)
    for name in SHORTEN:
        check(os.path.exists(os.path.join(a.examples, name)),
              "shortening for %s, which is gone" % name)
    keys = set()
    changed = 0
    for ex in examples:
        name = os.path.basename(ex)[:-5]
        key = os.path.relpath(ex, a.examples)[:-5]
        keys.add(key)
        y, applied = scenario_copy(ex, scen)
        out = os.path.join(a.workdir, name)
        t0 = time.time()
        cmd = [a.uroce, "sim", "-q", "--reproducible", "-o", out, y]
        if not have_gnuplot:
            cmd.insert(2, "--no-plots")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print("%-32s rc %d, %.1f s" % (name, p.returncode, time.time() - t0),
              flush=True)
        if not check(p.returncode == 0, "%s: exit %d: %s" %
                     (name, p.returncode, p.stderr[-400:])):
            continue
        # The headline names the scenario's name: key, or the file's.
        m = re.search(r"^name: *(\S+)", open(y).read(), re.M)
        check_run(m.group(1) if m else name, out, p.stdout, p.stderr,
                  have_gnuplot)
        if not golden(key, golden_doc(key, applied, out), a.update_golden):
            changed += 1
        same_on_threads(a.uroce, y, out, name)
    if os.path.realpath(a.examples) == os.path.join(ROOT, "examples", "sim"):
        # (another folder of examples has no goldens to go stale)
        changed += stale_goldens(keys, a.update_golden)
    compare(a.uroce, scen, a.workdir, have_gnuplot)
    bad_inputs(a.uroce, a.workdir)
    if failures:
        print("%d failures" % len(failures))
        if changed:
            print("%d examples' results differ from tests/sim/golden/ (or "
                  "have none, or none is left). If the change is meant, "
                  "regenerate the golden outputs and commit them with the "
                  "change, saying why in its message:\n  "
                  "tests/sim/check_outputs.py --update-golden --uroce %s" %
                  (changed, os.path.abspath(a.uroce)))
        if tmp:
            print("runs kept in %s" % a.workdir)
        return 1
    if tmp:
        shutil.rmtree(a.workdir, ignore_errors=True)
    if not have_gnuplot:
        print("gnuplot missing: PNGs not checked")
        return 77
    print("all examples: plots, rates, bounds and headlines check out; "
          "results %s" % ("written to tests/sim/golden/" if a.update_golden
                          else "as in tests/sim/golden/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
