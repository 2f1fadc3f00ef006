#!/usr/bin/python3
"""The simulator on MPI ranks (uroce-sim-mpi under Open MPI's mpirun) gives
the sequential run's results to the byte: every file `uroce sim` writes
(summary.json, the CSVs, the plots) for the shipped flow examples,
shortened, on 2 and 3 ranks, RoCE and InfiniBand, ECMP, spraying, static
and adaptive routing; a CSV of WRITE, READ and SEND flows, more at one
NIC than it has QPs; and the collectives (rings, servers of ranks on one
or more NICs, RoCE and InfiniBand); RoCE failures (a link flap, a switch
that fails and comes back, a collective losing a link). What cannot run
on ranks yet is refused with a message naming why and exit status 2 on
every rank, in bounded time: InfiniBand failures, a fabric with fewer
partitions than ranks, a collective's server cut.

Needs mpirun and uroce-sim-mpi (scripts/install-deps.sh test installs
libopenmpi-dev and openmpi-bin; CMake then builds it). CI runs as root,
which Open MPI refuses unless told."""

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(ROOT, "examples", "sim")

# (example, ranks, YAML substitutions that make it quick)
RUNS = [
    ("permutation_sizes.yaml", 2, []),
    ("dcqcn_leaf_spine.yaml", 3, [(r"size: 256KiB", "size: 32KiB")]),
    ("fat_tree_ecmp.yaml", 2, [(r"k: 16", "k: 4")]),
    ("fat_tree_spray.yaml", 3, [(r"k: 16", "k: 4")]),
    ("rails_csv.yaml", 2, []),
    ("ib_vs_roce/b_alltoall_ib.yaml", 2, [(r"k: 8", "k: 4")]),
    ("ib_vs_roce/b_alltoall_roce.yaml", 3, [(r"k: 8", "k: 4")]),
    ("ib_vs_roce/c_incast_ib.yaml", 2, [(r"k: 8", "k: 4"),
                                        (r"senders: 64", "senders: 12")]),
    ("ib_vs_roce/c_incast_uet.yaml", 2, [(r"k: 8", "k: 4"),
                                         (r"senders: 64", "senders: 12")]),
    # adaptive routing and credits crossing between ranks, FC packets
    # that credits join after they were sent
    ("ib_vs_roce/e_elephants_ib.yaml", 2, [(r"size: 16MiB", "size: 1MiB")]),
    ("ib_vs_roce/e_elephants_ib.yaml", 3, [(r"k: 8", "k: 4"),
                                           (r"size: 16MiB", "size: 2MiB"),
                                           (r"routing: adaptive",
                                            "routing: static")]),
    ("ib_vs_roce/e_elephants_uet.yaml", 2, [(r"k: 8", "k: 4"),
                                            (r"size: 16MiB", "size: 2MiB")]),
    # collectives: connections made as ranks ask, slot headers written
    # into rings at other ranks, sizes that end when every rank's did
    ("coll_servers_1to4.yaml", 3, [(r"sizes: \[4MiB, 64MiB\]",
                                    "sizes: [1MiB, 4MiB]")]),
    ("coll_servers_flat_ring.yaml", 2, [(r"sizes: \[4MiB, 64MiB\]",
                                         "sizes: [1MiB]")]),
    ("coll_ring_fat_tree_spray.yaml", 3, [(r"max: 16MiB", "max: 2MiB")]),
    ("ib_vs_roce/a_allreduce_ib.yaml", 2, [(r"k: 16", "k: 4"),
                                           (r"sizes: \[4MiB\]",
                                            "sizes: [1MiB, 2MiB]")]),
    # failures (RoCE): a collective losing a core link; flows through a
    # link flap and a core switch that fails and comes back
    ("ib_vs_roce/d_failure_roce.yaml", 2, [(r"k: 16", "k: 4"),
                                           (r"sizes: \[4MiB\]",
                                            "sizes: [256KiB]"),
                                           (r"switch: 128, port: 8",
                                            "switch: 8, port: 2"),
                                           (r"at_us: 100", "at_us: 20")]),
    ("ib_vs_roce/e_elephants_roce.yaml", 3, [
        (r"k: 8", "k: 4"), (r"size: 16MiB", "size: 1MiB"),
        (r"\Z", "failures:\n"
                "  - {at_us: 20, switch: 8, port: 2, up_after_us: 30}\n"
                "  - {at_us: 25, switch: 17, up_after_us: 40}\n")]),
]

# Written here: 70 flows on a k=4 fat-tree (16 NICs, 32 QPs each), WRITE,
# READ and SEND, 40 of them from NIC 0 at once (8 wait for a QP, started
# by RETRY events as others end), the rest at random times; RoCE with
# ECMP, and InfiniBand with adaptive routing.
def qp_scenarios(work):
    import random
    rnd = random.Random(5)
    ops = ["write", "read", "send"]
    rows = ["time_us,src,dst,bytes,op"]
    for i in range(40):
        rows.append(f"0,0,{1 + i % 15},{65536 * (1 + i % 3)},{ops[i % 3]}")
    for i in range(30):
        src, dst = rnd.randrange(16), rnd.randrange(16)
        if src == dst:
            dst = (dst + 5) % 16
        rows.append(f"{rnd.randrange(40)},{src},{dst},"
                    f"{rnd.choice([4096, 100000, 300000])},{rnd.choice(ops)}")
    with open(os.path.join(work, "qp.csv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    paths = []
    for fabric, routing in (("roce", "ecmp"), ("infiniband", "adaptive")):
        path = os.path.join(work, f"qp_{fabric}.yaml")
        with open(path, "w") as f:
            f.write(f"name: qp_{fabric}\nseed: 7\nsample_interval_us: 5\n"
                    "topology:\n  kind: fat_tree\n  k: 4\n  links:\n"
                    "    all: {rate_gbps: 100, delay_us: 1}\n"
                    f"fabric: {fabric}\nrouting: {routing}\n"
                    "workload:\n  kind: csv\n  file: qp.csv\n")
        paths.append(path)
    return paths


# (example, ranks, substitutions, what the refusal must say)
REFUSED = [
    ("ib_vs_roce/d_failure_ib.yaml", 2, [], "InfiniBand failures"),
    ("ib_vs_roce/e_elephants_ib.yaml", 2,
     [(r"\Z", "failures:\n  - {at_us: 10, switch: 0, port: 4}\n")],
     "InfiniBand failures"),
    ("incast_lossy.yaml", 2, [], "cuts into 1 partition"),
    # 3 parts would split a server of 8 NICs on two leaves
    ("coll_servers_flat_ring.yaml", 3, [], "a server's NICs are on switches"),
    ("permutation_sizes.yaml", 9, [], "run with at most that many ranks"),
]


def mpirun(ranks):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
           str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def scenario(work, name, subs):
    with open(os.path.join(EX, name)) as f:
        text = f.read()
    for pat, rep in subs:
        text, n = re.subn(pat, rep, text)
        if not n:
            sys.exit(f"mpi_e2e: {name}: '{pat}' is not in it any more")
    path = os.path.join(work, name.replace("/", "_"))
    with open(path, "w") as f:
        f.write(text)
    return path


def differ(a, b):
    """Files that differ or exist on one side only, under a and b."""
    out = []
    cmp = filecmp.dircmp(a, b)
    out += [f"only in the sequential run: {x}" for x in cmp.left_only]
    out += [f"only on MPI ranks: {x}" for x in cmp.right_only]
    for x in cmp.common_files:
        if not filecmp.cmp(os.path.join(a, x), os.path.join(b, x),
                           shallow=False):
            out.append(f"differs: {x}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    ap.add_argument("--uroce-mpi", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="a sanitizer build: every fourth run, and the "
                         "refusals")
    a = ap.parse_args()
    for tool in (a.uroce_mpi, shutil.which("mpirun")):
        if not tool or not os.access(tool, os.X_OK):
            sys.exit("mpi_e2e: needs mpirun and uroce-sim-mpi "
                     "(scripts/install-deps.sh test, then rebuild)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    if a.quick:  # a sanitizer build: Open MPI's own leaks are not ours
        env["LSAN_OPTIONS"] = ("suppressions=" +
                               os.path.join(HERE, "..", "lsan-mpi.supp") +
                               ":print_suppressions=0")
        env["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                               ":fast_unwind_on_malloc=0").lstrip(":")
    work = tempfile.mkdtemp(prefix="uroce-mpi-")
    for f in os.listdir(EX):  # the files scenarios name (flows, sizes)
        if f.endswith((".txt", ".csv")):
            shutil.copy(os.path.join(EX, f), work)
    bad = 0
    runs = [(name, ranks, scenario(work, name, subs), [])
            for name, ranks, subs in RUNS]
    for path in qp_scenarios(work):
        runs += [(os.path.basename(path), r, path, []) for r in (2, 3)]
        # stopped with flows still running (and waiting for a QP)
        runs.append((os.path.basename(path) + " --stop-us 60", 3, path,
                     ["--stop-us", "60"]))
    if a.quick:  # (10x slower under ASan) a flow, a collective, a failure...
        runs = runs[::4]
    for i, (name, ranks, path, extra) in enumerate(runs):
        seq, par = (os.path.join(work, f"{i}-{k}") for k in ("seq", "mpi"))
        r = subprocess.run([a.uroce, "sim", "-q", "--reproducible", "-o", seq,
                            path] + extra, capture_output=True, text=True,
                           timeout=300)
        if r.returncode:
            print(f"FAIL {name}: uroce sim: {r.stderr.strip()}")
            bad += 1
            continue
        r = subprocess.run(mpirun(ranks) + [a.uroce_mpi, "-q",
                                            "--reproducible", "-o", par, path]
                           + extra,
                           capture_output=True, text=True, timeout=300,
                           env=env)
        if r.returncode:
            print(f"FAIL {name} on {ranks} ranks: exit {r.returncode}: "
                  f"{r.stderr.strip()[-400:]}")
            bad += 1
            continue
        d = differ(seq, par)
        if not os.path.exists(os.path.join(par, "summary.json")):
            d.append("no summary.json")
        if d:
            print(f"FAIL {name} on {ranks} ranks: " + "; ".join(d[:6]))
            bad += 1
        else:
            n = len(os.listdir(seq))
            print(f"ok   {name} on {ranks} ranks: {n} files the same")
    for name, ranks, subs, says in REFUSED:
        path = scenario(work, name, subs)
        out = os.path.join(work, "refused")
        r = subprocess.run(mpirun(ranks) + [a.uroce_mpi, "-q", "-o", out,
                                            path],
                           capture_output=True, text=True, timeout=120,
                           env=env)
        if r.returncode == 0 or says not in r.stderr:
            print(f"FAIL {name} on {ranks} ranks: want a refusal saying "
                  f"'{says}', got exit {r.returncode}: "
                  f"{r.stderr.strip()[-300:]}")
            bad += 1
        elif r.stderr.count("uroce sim:") != 1:
            print(f"FAIL {name}: the refusal should come once (rank 0): "
                  f"{r.stderr.strip()[-300:]}")
            bad += 1
        else:
            print(f"ok   {name} on {ranks} ranks refused: '{says}'")
    shutil.rmtree(work, ignore_errors=True)
    if bad:
        sys.exit(f"mpi_e2e: {bad} failed")


if __name__ == "__main__":
    main()
