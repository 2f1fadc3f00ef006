#!/usr/bin/python3
"""Wire interop between uroce and the Linux kernel's Soft-RoCE (rdma_rxe).

The peer runs in a qemu VM (the test bed in ../shared/testbed: Debian 12
kernel with rdma_rxe, rdma-core, perftest) joined to the host over a tap
inside network namespace `rxetb` (host 10.99.0.1, VM 10.99.0.2). uroce runs
on the host side: the unmodified ibverbs-utils / perftest programs through
`uroce run`.

Every case runs both ways: the VM is the server and uroce the client, then
uroce is the server and the VM the client. Each run is captured twice, by
tshark on the tap (what really travelled) and by uroce itself (`--pcap`),
and each capture goes through `uroce dump --json`: every packet decodes,
no ICRC is bad, and both addresses sent packets.

The rdma_cm cases (rping, ucmatose, udaddy, ib_write_bw -R) connect through
uroce's librdmacm drop-in and the kernel's rdma_cm: CM MADs on QP1, which
the tap capture must hold. The cases run in three groups: IPv4 at the test
bed's MTU 1500, then IPv6
(fd99::1 and fd99::2 added to the tap and the VM's eth0 for the run), then
jumbo frames (the tap and eth0 set to MTU 9000 at run time, rxe's active
MTU following to 4096; both are put back at the end). The 5% loss case on
ib_read_bw reports the READ response packets sent per packet needed in
both roles (uroce reading from rxe, rxe reading from uroce).

Builds the VM image if missing, boots the VM if it is not running (and
stops it at the end only then). Prints one line per case and
`N passed, M failed`; exit status 0 only if every case passed.

Environment: RXE_TESTBED (dir with rxe-vm.sh; default ../shared/testbed
beside the repository), UROCE (the uroce binary; default build/uroce),
INTEROP_OUT (logs and captures; default build/interop), INTEROP_ONLY
(regex: run only the cases whose name matches), INTEROP_KEEP_VM=1 (leave
a VM this run booted running), RXE_HOST_IP6 / RXE_VM_IP6 (the IPv6
addresses; fd99::1 and fd99::2).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "net"))
from verbs_e2e import check_pingpong, check_perftest, summary  # noqa: E402

TESTBED = os.environ.get("RXE_TESTBED") or os.path.join(
    os.path.dirname(ROOT), "shared", "testbed")
VM_SH = os.path.join(TESTBED, "rxe-vm.sh")
UROCE = os.environ.get("UROCE") or os.path.join(ROOT, "build", "uroce")
OUT = os.environ.get("INTEROP_OUT") or os.path.join(ROOT, "build", "interop")
ONLY = os.environ.get("INTEROP_ONLY")
NETNS = os.environ.get("RXE_NETNS", "rxetb")
TAP = os.environ.get("RXE_TAP", "rxetap0")
HOST_IP = os.environ.get("RXE_HOST_IP", "10.99.0.1")
VM_IP = os.environ.get("RXE_VM_IP", "10.99.0.2")
HOST_IP6 = os.environ.get("RXE_HOST_IP6", "fd99::1")
VM_IP6 = os.environ.get("RXE_VM_IP6", "fd99::2")
LOSS = "0.02"        # uroce's receive-drop impairment for the loss cases
READ_LOSS = "0.05"   # the READ-response loss of the ib_read_bw loss case
JUMBO = 9000         # netdev MTU of the jumbo group
RUN_LIMIT = 120      # seconds any one program may run (rxe retries forever)
IFB = "ifb9"         # the VM's ingress loss device (read_loss, rxe reading)

results = []
FIGURES = []     # read_loss figures, reported at the end


def log(*a):
    print(*a, flush=True)


def vm(*args, timeout=300, check=False):
    p = subprocess.run([VM_SH] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if check and p.returncode:
        raise RuntimeError("rxe-vm.sh %s: rc %d\n%s" % (args[0], p.returncode,
                                                        p.stdout[-3000:]))
    return p


def ns(argv):
    return ["ip", "netns", "exec", NETNS] + argv


# ---- cases ----
# Each case is a dict: name, prog, args (for both sides; "{g}" is that
# side's GID index), kind ("pp": pingpong, both sides print a result;
# "bw"/"lat": perftest, the client prints the table, bw servers too), size,
# iters, and optionally net ("v4", "v6", "jumbo"; default "v4"), loss
# (uroce's receive drop, both ways), read_loss (READ responses dropped
# before the reader, whichever side reads: uroce's receive drop when uroce
# reads, netem on the VM's ingress when rxe reads; the figures are
# reported), min_payload (the capture must show a packet this big),
# table_iters (the iterations perftest's table shows, if not iters: -q N
# counts all QPs'), client_only (only the client sends: UD send_bw).

def case(name, prog, args, kind, size, iters, **kw):
    c = dict(name=name, prog=prog, args=args, kind=kind, size=size,
             iters=iters, net="v4", loss=None, read_loss=None,
             min_payload=None, table_iters=None, client_only=False,
             cm=False, drop_only=None)
    c.update(kw)
    return c


def cases():
    c = []
    pp = ["-g", "{g}", "-c"]
    for size, n in ((64, 100), (4096, 50), (65536, 20)):
        c.append(case("ibv_rc_pingpong -s %d" % size, "ibv_rc_pingpong",
                      pp + ["-s", str(size)], "pp", size, n))
    # 1 MB messages: 1024 packets each, every byte checked (-c)
    c.append(case("ibv_rc_pingpong -s 1M", "ibv_rc_pingpong",
                  pp + ["-s", "1048576"], "pp", 1048576, 10))
    # rxe accepts a path MTU above its active MTU (1024 here) up to its
    # max MTU (4096); so does uroce. 64 B messages fit either way.
    c.append(case("ibv_rc_pingpong -m 4096", "ibv_rc_pingpong",
                  pp + ["-m", "4096", "-s", "64"], "pp", 64, 50))
    for size, n in ((64, 100), (4096, 50)):
        c.append(case("ibv_uc_pingpong -s %d" % size, "ibv_uc_pingpong",
                      pp + ["-s", str(size)], "pp", size, n))
    for size, n in ((64, 100), (1024, 50)):
        c.append(case("ibv_ud_pingpong -s %d" % size, "ibv_ud_pingpong",
                      pp + ["-s", str(size)], "pp", size, n))
    for size, n in ((64, 100), (4096, 40)):
        c.append(case("ibv_srq_pingpong -q 4 -s %d" % size,
                      "ibv_srq_pingpong", pp + ["-q", "4", "-s", str(size)],
                      "pp", size, n))
    # perftest: its own TCP handshake, default sizes (bw 64 KiB, lat 2 B).
    # -F: under TCG the VM's CPU frequency checks fail; the figures are
    # only checked for sanity.
    pt = ["-x", "{g}", "-F"]
    c += [
        case("ib_send_bw", "ib_send_bw", pt, "bw", 65536, 200),
        case("ib_send_bw -c UD", "ib_send_bw", pt + ["-c", "UD", "-s",
                                                     "1024"], "bw", 1024,
             200, client_only=True),
        case("ib_write_bw", "ib_write_bw", pt, "bw", 65536, 200),
        case("ib_write_bw -q 4", "ib_write_bw", pt + ["-q", "4"], "bw",
             65536, 200, table_iters=800),
        case("ib_read_bw", "ib_read_bw", pt, "bw", 65536, 200),
        case("ib_read_bw -s 1M", "ib_read_bw", pt + ["-s", "1048576"], "bw",
             1048576, 5),
        case("ib_atomic_bw", "ib_atomic_bw", pt, "bw", 8, 200),
        case("ib_write_lat", "ib_write_lat", pt, "lat", 2, 200),
        case("ib_read_lat", "ib_read_lat", pt, "lat", 2, 200),
        case("ib_atomic_lat", "ib_atomic_lat", pt, "lat", 8, 200),
        case("ib_send_lat -s 2", "ib_send_lat", pt + ["-s", "2"], "lat", 2,
             200),
        case("ib_send_lat -s 4096", "ib_send_lat", pt + ["-s", "4096"],
             "lat", 4096, 100),
    ]
    # Loss: uroce drops 2% of what it receives; RC must still deliver the
    # right data (pingpong -c checks every byte; perftest checks counts).
    c += [
        # Requests only (--rx-drop-only requests), both ways. The run's
        # last ACK cannot be recovered once its sender has left: with
        # uroce the client, rxe's ACK of our last ping comes before its
        # last pong; were it dropped, rxe would see our pong ACK, exit and
        # destroy its QP before our retransmission (67 ms later) reaches
        # it, and ibv_rc_pingpong's retry_cnt 7 ("retry forever", in rxe
        # and uroce alike) keeps us retransmitting until the run limit (a
        # CI run was killed there after 120 s). With uroce the server, the
        # same for the client's ACK of our last pong. Any RC stack hangs
        # there; dropping requests still makes each side recover the
        # other's lost packets (sequence NAK or timeout, then resend), and
        # the perftest cases below, which end with a TCP handshake, drop
        # ACKs too.
        case("loss rc_pingpong -s 4096", "ibv_rc_pingpong",
             pp + ["-s", "4096"], "pp", 4096, 100, loss=LOSS,
             drop_only="requests"),
        case("loss ib_send_bw", "ib_send_bw", pt + ["-s", "16384"], "bw",
             16384, 100, loss=LOSS),
        case("loss ib_write_bw", "ib_write_bw", pt + ["-s", "16384"], "bw",
             16384, 100, loss=LOSS),
        case("loss ib_read_bw", "ib_read_bw", pt + ["-s", "16384"], "bw",
             16384, 100, loss=LOSS),
        # 5% of the READ responses lost before the reader, each stack
        # reading in turn: how many responses each recovery costs.
        case("loss 5% ib_read_bw", "ib_read_bw", pt + ["-s", "65536"], "bw",
             65536, 100, read_loss=READ_LOSS),
    ]
    # IPv6 GIDs (rxe sends UDP checksum 0 over IPv6 too).
    c += [
        case("ipv6 ibv_rc_pingpong", "ibv_rc_pingpong",
             pp + ["-s", "4096"], "pp", 4096, 50, net="v6"),
        case("ipv6 ibv_ud_pingpong", "ibv_ud_pingpong",
             pp + ["-s", "1024"], "pp", 1024, 50, net="v6"),
        case("ipv6 ib_write_bw", "ib_write_bw", pt, "bw", 65536, 200,
             net="v6"),
        case("ipv6 ib_read_lat", "ib_read_lat", pt, "lat", 2, 200,
             net="v6"),
    ]
    # Jumbo frames: MTU 9000 on the tap and eth0, path MTU 4096.
    c += [
        case("jumbo ibv_rc_pingpong -m 4096", "ibv_rc_pingpong",
             pp + ["-m", "4096", "-s", "65536"], "pp", 65536, 20,
             net="jumbo", min_payload=4096),
        case("jumbo ib_write_bw -m 4096", "ib_write_bw",
             pt + ["-m", "4096"], "bw", 65536, 200, net="jumbo",
             min_payload=4096),
        case("jumbo ibv_ud_pingpong -s 4000", "ibv_ud_pingpong",
             pp + ["-s", "4000"], "pp", 4000, 50, net="jumbo",
             min_payload=4000),
    ]
    # rdma_cm: connections made by uroce's librdmacm drop-in and the
    # kernel's rdma_cm, CM MADs on QP1 both ways. "{a}" is the server's
    # address, "{p}" the port. Each must show its CM MADs in the captures.
    c += [
        cm_case("rdma_cm rping -V", ["rping", "-s", "-a", "{a}", "-p", "{p}",
                                     "-C", "10", "-V", "-v"],
                ["rping", "-c", "-a", "{a}", "-p", "{p}", "-C", "10", "-V",
                 "-v"], "rping", ["REQ", "REP", "RTU", "DREQ"]),
        cm_case("rdma_cm ucmatose", ["ucmatose", "-b", "{a}", "-p", "{p}",
                                     "-c", "2", "-C", "10"],
                ["ucmatose", "-s", "{a}", "-p", "{p}", "-c", "2", "-C", "10"],
                "status0", ["REQ", "REP", "RTU"]),
        # udaddy's port is fixed (7174): SIDR in the UDP port space
        cm_case("rdma_cm udaddy", ["udaddy", "-b", "{a}", "-c", "2", "-C",
                                   "10"],
                ["udaddy", "-s", "{a}", "-c", "2", "-C", "10"], "status0",
                ["SIDR_REQ", "SIDR_REP"], port=7174),
        # perftest's server creates its listening id only after its TCP
        # handshake, which the TCG VM can take longer over than our
        # client: that client is rejected (no listener) and perftest's
        # retry reuses destroyed ids and crashes (docs/rdmacm.md). So
        # only the VM is the client here.
        cm_case("rdma_cm ib_write_bw -R", ["ib_write_bw", "-R", "-F", "-x",
                                           "{g}", "-p", "{p}", "-n", "200"],
                ["ib_write_bw", "-R", "-F", "-x", "{g}", "-p", "{p}", "-n",
                 "200", "{a}"], "bw", ["REQ", "REP", "RTU"],
                ways=("uroce-server",)),
    ]
    return c


def cm_case(name, srv, cli, check, mads, port=None,
            ways=("vm-server", "uroce-server")):
    return case(name, srv[0], None, "cm", 65536, 200, cm=True, srv=srv,
                cli=cli, check=check, mads=mads, fixed_port=port, ways=ways)


# ---- running one case one way ----

def iter_args(prog, iters):
    return ["-n", str(iters)]


def tcp_listening(port, in_vm):
    cmd = "ss -Hltn 'sport = :%d' | grep -q LISTEN" % port
    if in_vm:
        return vm("exec", cmd, timeout=30).returncode == 0
    return subprocess.run(ns(["sh", "-c", cmd])).returncode == 0


def wait_listening(port, in_vm, proc, limit=60):
    end = time.time() + limit
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            return False
        if tcp_listening(port, in_vm):
            return True
        time.sleep(0.3 if not in_vm else 0)
    return False


def start_tshark(pcap):
    err = pcap + ".err"
    f = open(err, "w")
    p = subprocess.Popen(ns(["tshark", "-i", TAP, "-f", "udp port 4791",
                             "-w", pcap, "-q"]), stdout=subprocess.DEVNULL,
                         stderr=f)
    end = time.time() + 20
    while time.time() < end:
        with open(err) as e:
            if "Capturing on" in e.read():
                break
        time.sleep(0.2)
    return p


def stop_tshark(p):
    time.sleep(0.5)
    p.send_signal(2)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


DUMPS = {}  # pcap -> dump(pcap), for one run: a capture may be read twice
KEEP = ("frame", "src", "dst", "opname", "psn", "payload_len", "icrc_ok",
        "cm")


def dump(pcap):
    """uroce dump --json of pcap: (packets, summary) or (None, why)."""
    if pcap not in DUMPS:
        DUMPS[pcap] = dump1(pcap)
    return DUMPS[pcap]


def dump1(pcap):
    if not os.path.exists(pcap):
        return None, "no capture %s" % os.path.basename(pcap)
    p = subprocess.run([UROCE, "dump", "--json", pcap], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        return None, "uroce dump rc %d: %s" % (p.returncode, p.stdout[-300:])
    pkts, summ = [], None
    for line in p.stdout.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            return None, "uroce dump printed non-JSON: %s" % line[:200]
        if "summary" in o:
            summ = o["summary"]
        else:  # only what the checks read: a loss run has 100k packets
            pkts.append({k: o[k] for k in KEEP if k in o})
    if summ is None:
        return None, "no summary from uroce dump"
    return pkts, summ


def check_capture(pcap, addrs, want_min=2, min_payload=None):
    """None if every packet decodes, every ICRC is good, both addresses
    sent packets (and one packet carried min_payload bytes); else what is
    wrong."""
    pkts, summ = dump(pcap)
    if pkts is None:
        return summ
    srcs, bad, biggest = {}, [], 0
    for o in pkts:
        srcs[o.get("src")] = srcs.get(o.get("src"), 0) + 1
        biggest = max(biggest, o.get("payload_len", 0))
        if not o.get("icrc_ok", False) and len(bad) < 3:
            bad.append("frame %s %s>%s %s psn %s" % (
                o.get("frame"), o.get("src"), o.get("dst"), o.get("opname"),
                o.get("psn")))
    name = os.path.basename(pcap)
    if summ["malformed"]:
        return "%s: %d malformed" % (name, summ["malformed"])
    if summ["bad_icrc"]:
        return "%s: %d bad ICRC (%s)" % (name, summ["bad_icrc"],
                                         "; ".join(bad))
    for a in addrs:
        if srcs.get(a, 0) < 1:
            return "%s: no packets from %s" % (name, a)
    if summ["roce"] < want_min:
        return "%s: only %d RoCEv2 packets" % (name, summ["roce"])
    if min_payload and biggest < min_payload:
        return "%s: largest payload %d B, expected %d" % (name, biggest,
                                                          min_payload)
    return None


def read_figures(pcap, reader, responder):
    """From a READ run's capture: (READ requests the reader sent, READ
    response packets the responder sent)."""
    pkts, _ = dump(pcap)
    if pkts is None:
        return None
    req = sum(1 for o in pkts if o.get("src") == reader and
              o.get("opname", "").endswith("RDMA_READ_REQUEST"))
    rsp = sum(1 for o in pkts if o.get("src") == responder and
              "RDMA_READ_RESPONSE" in o.get("opname", ""))
    return req, rsp


def check_output(out, kind, size, iters, server):
    if kind == "pp":
        return check_pingpong(out, size, iters)
    bad = check_perftest(out, kind, size, iters, server=server)
    # perftest times with the TSC, and its calibration fails in the VM
    # under TCG: a bw table can then show 0.00 (on the rxe client and on a
    # server that prints the client's figures) and latencies can be out of
    # order. The table itself (size, iterations) is still checked.
    if bad and re.match(r"zero figures|implausible latencies", bad):
        return None
    return bad


def vm_loss(on, share=READ_LOSS):
    """Drops share of the RoCEv2 packets the VM receives (netem on an ifb
    that eth0's UDP 4791 ingress is redirected to), or stops dropping."""
    if on:
        cmd = ("modprobe ifb numifbs=0 && modprobe sch_netem && "
               "ip link add {i} type ifb && ip link set {i} up && "
               "tc qdisc add dev eth0 handle ffff: ingress && "
               "tc filter add dev eth0 parent ffff: protocol ip u32 "
               "match ip protocol 17 0xff match ip dport 4791 0xffff "
               "action mirred egress redirect dev {i} && "
               "tc qdisc add dev {i} root netem loss {p}%").format(
                   i=IFB, p=float(share) * 100)
    else:
        cmd = ("tc qdisc del dev eth0 ingress 2>/dev/null; "
               "ip link del {i} 2>/dev/null; true").format(i=IFB)
    p = vm("exec", cmd, timeout=60)
    if on and p.returncode:
        vm_loss(False)
        raise RuntimeError("VM loss setup failed: %s" % p.stdout[-500:])


def run_way(case, way, port, tag, net):
    """way: 'vm-server' (VM server, uroce client) or 'uroce-server'. net:
    the RoCEv2 addresses of both ends and the VM's GID index."""
    prog, kind, size, iters = (case["prog"], case["kind"], case["size"],
                               case["iters"])
    loss = case["loss"]
    # who reads in a read_loss case: the client
    uroce_reads = way == "vm-server"
    if case["read_loss"] and uroce_reads:
        loss = case["read_loss"]

    def argv_for(gid):
        return [prog] + [a.replace("{g}", gid) for a in case["args"]] + \
            iter_args(prog, iters) + ["-p", str(port)]
    argv = argv_for("1")
    vm_argv = [prog, "-d", "rxe0"] + argv_for(net["vm_gid"])[1:]
    host_pcap = os.path.join(OUT, tag + ".uroce.pcap")
    tap_pcap = os.path.join(OUT, tag + ".tap.pcap")
    for f in (host_pcap, tap_pcap):
        if os.path.exists(f):
            os.unlink(f)
    uroce = [UROCE, "run", "--ns", NETNS, "--addr", net["host"], "--pcap",
             host_pcap]
    if loss:
        uroce += ["--rx-drop", loss]
        if case["drop_only"] and not (case["read_loss"] and uroce_reads):
            uroce += ["--rx-drop-only", case["drop_only"]]
    uroce_argv = ["timeout", "-s", "KILL", str(RUN_LIMIT)] + uroce + ["--"] \
        + argv
    vm_cmd = "timeout -s KILL %d %s" % (RUN_LIMIT, shlex.join(vm_argv))
    DUMPS.clear()
    vm_dropping = case["read_loss"] and not uroce_reads
    if vm_dropping:
        vm_loss(True, case["read_loss"])
    tsh = start_tshark(tap_pcap)
    host_out = vm_out = ""
    host_rc = vm_rc = None
    why = None
    t_run = time.time()
    try:
        if way == "vm-server":
            # The server in the VM in the background, its output to a file;
            # one ssh call starts it and waits until it listens.
            log_f = "/tmp/interop-srv.log"
            start = ("rm -f {l}; ({c} > {l} 2>&1 < /dev/null; "
                     "echo \"server-rc=$?\" >> {l}) > /dev/null 2>&1 & "
                     "for i in $(seq 200); do "
                     "ss -Hltn 'sport = :{p}' | grep -q LISTEN && exit 0; "
                     "sleep 0.2; done; exit 1").format(l=log_f, c=vm_cmd,
                                                       p=port)
            if vm("exec", start, timeout=90).returncode != 0:
                why = "VM server did not listen"
            else:
                p = subprocess.run(uroce_argv + [VM_IP],
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
                host_out, host_rc = p.stdout, p.returncode
                # wait for the server to finish (bounded by its timeout)
                wait = ("for i in $(seq %d); do grep -q server-rc= %s && "
                        "break; sleep 0.5; done; cat %s"
                        % (2 * RUN_LIMIT + 20, log_f, log_f))
                v = vm("exec", wait, timeout=RUN_LIMIT + 60)
                vm_out = v.stdout
                m = re.search(r"server-rc=(\d+)", vm_out)
                vm_rc = int(m.group(1)) if m else None
                vm_out = re.sub(r"server-rc=\d+\n?", "", vm_out)
        else:
            srv = subprocess.Popen(uroce_argv, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            if not wait_listening(port, False, srv):
                why = "uroce server did not listen"
                srv.kill()
                host_out = srv.communicate()[0]
            else:
                v = vm("exec", vm_cmd + " " + HOST_IP, timeout=RUN_LIMIT + 60)
                vm_out, vm_rc = v.stdout, v.returncode
                try:
                    host_out = srv.communicate(timeout=RUN_LIMIT + 10)[0]
                except subprocess.TimeoutExpired:
                    srv.kill()
                    host_out = srv.communicate()[0]
                host_rc = srv.returncode
    finally:
        t_run = time.time() - t_run
        stop_tshark(tsh)
        if vm_dropping:
            vm_loss(False)
    with open(os.path.join(OUT, tag + ".log"), "w") as f:
        f.write("== uroce (%s)\n%s\n== rxe VM (%s)\n%s\n" % (
            " ".join(uroce_argv), host_out, vm_cmd, vm_out))
    srv_side = "vm" if way == "vm-server" else "host"
    if why is None:
        if host_rc != 0:
            why = "uroce side rc %s" % host_rc
        elif vm_rc != 0:
            why = "VM side rc %s" % vm_rc
    if why is None:
        for side, out in (("uroce", host_out), ("rxe", vm_out)):
            is_srv = (side == "rxe") == (srv_side == "vm")
            if kind != "pp" and kind == "lat" and is_srv:
                continue  # perftest lat servers print no table
            bad = check_output(out, kind, size,
                               case["table_iters"] or iters, is_srv)
            if bad:
                why = "%s output: %s" % (side, bad)
                break
    addrs = (net["host"], net["vm"])
    if case["client_only"]:
        # UD SEND has no responses: only the client's packets travel
        addrs = addrs[:1] if way == "vm-server" else addrs[1:]
    if why is None:
        why = check_capture(tap_pcap, addrs,
                            min_payload=case["min_payload"]) or \
            check_capture(host_pcap, addrs, min_payload=case["min_payload"])
    client_out = host_out if way == "vm-server" else vm_out
    summ = summary(client_out, kind) if why is None else ""
    if why is None and case["read_loss"]:
        reader, responder = (addrs if uroce_reads else addrs[::-1])
        f = read_figures(tap_pcap, reader, responder)
        need = iters * -(-size // net["mtu"])
        fig = dict(way=way, reader="uroce" if uroce_reads else "rxe",
                   requests=f[0], responses=f[1], needed=need,
                   ratio=f[1] / need, seconds=round(t_run, 1))
        FIGURES.append(dict(case=case["name"], **fig))
        summ = ("%s reading: %d READ requests, %d response packets for %d "
                "needed (%.2f per packet), %.1f s" % (
                    fig["reader"], f[0], f[1], need, fig["ratio"], t_run))
    return why, summ


CM_LISTEN = ("rdma res show cm_id 2>/dev/null | grep LISTEN | "
             "grep -q ':{p} '")


def cm_check(case, out, server):
    k = case["check"]
    if k == "rping":
        n = re.findall(r"ping data: rdma-ping-(\d+):", out)
        if [int(x) for x in n] != list(range(10)):
            return "%d of 10 pings verified" % len(n)
        if re.search(r"(?i)error|failed|miscompare", out):
            return "error in output"
        return None
    if k == "status0":
        if "return status 0" not in out or \
                "data transfers complete" not in out:
            return "transfers not complete"
        return None
    return check_output(out, "bw", 65536, 200, server)


def cm_mads(pcap):
    pkts, _ = dump(pcap)
    if pkts is None:
        return []
    return [o["cm"].split()[0] for o in pkts if "cm" in o]


def run_cm_way(case, way, port, tag, net):
    """An rdma_cm case one way: the server in the VM (readiness: its
    listening cm_id in `rdma res`) or under uroce (the VM client tries again
    while it is rejected for want of a listener)."""
    port = case["fixed_port"] or port
    srv_addr = net["vm"] if way == "vm-server" else net["host"]

    def argv(tmpl, gid):
        return [a.replace("{a}", srv_addr).replace("{p}", str(port))
                .replace("{g}", gid) for a in tmpl]
    host_pcap = os.path.join(OUT, tag + ".uroce.pcap")
    tap_pcap = os.path.join(OUT, tag + ".tap.pcap")
    for f in (host_pcap, tap_pcap):
        if os.path.exists(f):
            os.unlink(f)
    uroce = ["timeout", "-s", "KILL", str(RUN_LIMIT), UROCE, "run", "--ns",
             NETNS, "--addr", net["host"], "--pcap", host_pcap, "--"]
    DUMPS.clear()
    tsh = start_tshark(tap_pcap)
    host_out = vm_out = ""
    host_rc = vm_rc = None
    why = None
    try:
        if way == "vm-server":
            vm_cmd = "timeout -s KILL %d %s" % (
                RUN_LIMIT, shlex.join(argv(case["srv"], net["vm_gid"])))
            log_f = "/tmp/interop-srv.log"
            start = ("rm -f {l}; ({c} > {l} 2>&1 < /dev/null; "
                     "echo \"server-rc=$?\" >> {l}) > /dev/null 2>&1 & "
                     "for i in $(seq 200); do {ready} && exit 0; "
                     "sleep 0.2; done; exit 1").format(
                         l=log_f, c=vm_cmd,
                         ready=CM_LISTEN.format(p=port))
            if vm("exec", start, timeout=90).returncode != 0:
                why = "VM server did not listen"
            else:
                p = subprocess.run(uroce + argv(case["cli"], "1"),
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
                host_out, host_rc = p.stdout, p.returncode
                wait = ("for i in $(seq %d); do grep -q server-rc= %s && "
                        "break; sleep 0.5; done; cat %s"
                        % (2 * RUN_LIMIT + 20, log_f, log_f))
                v = vm("exec", wait, timeout=RUN_LIMIT + 60)
                m = re.search(r"server-rc=(\d+)", v.stdout)
                vm_rc = int(m.group(1)) if m else None
                vm_out = re.sub(r"server-rc=\d+\n?", "", v.stdout)
        else:
            srv = subprocess.Popen(uroce + argv(case["srv"], "1"),
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            vm_cmd = "timeout -s KILL %d %s" % (
                RUN_LIMIT, shlex.join(argv(case["cli"], net["vm_gid"])))
            # no listener yet: REJ (invalid service ID); try again
            retry = ("for i in $(seq 20); do {c} > /tmp/interop-cli.log "
                     "2>&1; rc=$?; grep -q REJECTED /tmp/interop-cli.log || "
                     "break; sleep 1; done; cat /tmp/interop-cli.log; "
                     "exit $rc").format(c=vm_cmd)
            time.sleep(1)
            v = vm("exec", retry, timeout=RUN_LIMIT + 60)
            vm_out, vm_rc = v.stdout, v.returncode
            try:
                host_out = srv.communicate(timeout=RUN_LIMIT + 10)[0]
            except subprocess.TimeoutExpired:
                srv.kill()
                host_out = srv.communicate()[0]
            host_rc = srv.returncode
    finally:
        stop_tshark(tsh)
    with open(os.path.join(OUT, tag + ".log"), "w") as f:
        f.write("== uroce\n%s\n== rxe VM (%s)\n%s\n" % (host_out, vm_cmd,
                                                        vm_out))
    if why is None:
        if host_rc != 0:
            why = "uroce side rc %s" % host_rc
        elif vm_rc != 0:
            why = "VM side rc %s" % vm_rc
    if why is None:
        for side, out in (("uroce", host_out), ("rxe", vm_out)):
            is_srv = (side == "rxe") == (way == "vm-server")
            bad = cm_check(case, out, is_srv)
            if bad:
                why = "%s output: %s" % (side, bad)
                break
    addrs = (net["host"], net["vm"])
    if why is None:
        why = check_capture(tap_pcap, addrs) or check_capture(host_pcap,
                                                              addrs)
    if why is None:
        got = cm_mads(tap_pcap)
        missing = [m for m in case["mads"] if m not in got]
        if missing:
            why = "tap capture lacks CM %s (has %s)" % (missing,
                                                        sorted(set(got)))
    summ = "" if why else "CM MADs: %s" % " ".join(
        "%s x%d" % (m, n) for m, n in sorted(
            {m: cm_mads(tap_pcap).count(m) for m in
             cm_mads(tap_pcap)}.items()))
    return why, summ


def vm_gid_index(addr):
    """The index of rxe0's RoCE v2 GID for addr (waits for rxe to add it)."""
    cmd = ("for t in $(seq 50); do for g in /sys/class/infiniband/rxe0/ports/"
           "1/gids/*; do i=${g##*/}; "
           "[ \"$(cat $g)\" = \"%s\" ] && "
           "grep -q 'RoCE v2' /sys/class/infiniband/rxe0/ports/1/gid_attrs/"
           "types/$i 2>/dev/null && echo $i && exit 0; done; sleep 0.2; "
           "done; exit 1") % expand6(addr)
    p = vm("exec", cmd, timeout=60)
    if p.returncode:
        raise RuntimeError("rxe0 has no RoCE v2 GID %s" % addr)
    return p.stdout.strip()


def expand6(addr):
    """addr as the kernel's sysfs writes a GID: 8 groups of 4 hex digits."""
    import ipaddress
    return ipaddress.IPv6Address(addr).exploded


def vm_active_mtu():
    p = vm("exec", "ibv_devinfo -d rxe0 | grep active_mtu", timeout=60)
    m = re.search(r"active_mtu:\s+(\d+)", p.stdout)
    return int(m.group(1)) if m else None


def set_mtu(mtu):
    """The tap's and the VM's eth0 MTU, at run time; rxe follows the
    netdev's MTU change. Returns rxe0's active MTU afterwards."""
    subprocess.run(["ip", "-n", NETNS, "link", "set", TAP, "mtu", str(mtu)],
                   check=True)
    vm("exec", "ip link set eth0 mtu %d" % mtu, timeout=60, check=True)
    return vm_active_mtu()


def net_setup(kind):
    """Prepares the network for a group of cases; returns its addresses."""
    if kind == "v4":
        return dict(host=HOST_IP, vm=VM_IP, vm_gid="1", mtu=1024)
    if kind == "v6":
        subprocess.run(["ip", "-n", NETNS, "addr", "replace", HOST_IP6 +
                        "/64", "dev", TAP, "nodad"], check=True)
        vm("exec", "ip addr replace %s/64 dev eth0 nodad" % VM_IP6,
           timeout=60, check=True)
        gid = vm_gid_index(VM_IP6)
        log("== IPv6: uroce %s, rxe %s (rxe0 GID index %s)" % (
            HOST_IP6, VM_IP6, gid))
        return dict(host=HOST_IP6, vm=VM_IP6, vm_gid=gid, mtu=1024)
    active = set_mtu(JUMBO)
    log("== jumbo: tap and eth0 at MTU %d, rxe0 active_mtu %s" % (
        JUMBO, active))
    if active != 4096:
        raise RuntimeError("rxe0 active_mtu %s at MTU %d" % (active, JUMBO))
    return dict(host=HOST_IP, vm=VM_IP, vm_gid="1", mtu=4096)


def net_restore():
    """Undoes net_setup's changes (whatever of them were made)."""
    subprocess.run(["ip", "-n", NETNS, "addr", "del", HOST_IP6 + "/64", "dev",
                    TAP], stderr=subprocess.DEVNULL)
    vm("exec", "ip addr del %s/64 dev eth0 2>/dev/null; "
       "ip link set eth0 mtu 1500" % VM_IP6, timeout=60)
    subprocess.run(["ip", "-n", NETNS, "link", "set", TAP, "mtu", "1500"])


def report_figures():
    if not FIGURES:
        return
    log("== READ loss figures (response packets sent per packet needed, "
        "from the tap capture):")
    for f in FIGURES:
        log("   %-22s %-5s reading: %6d responses for %6d needed = %6.2f; "
            "%5d READ requests; %5.1f s" % (
                f["case"], f["reader"], f["responses"], f["needed"],
                f["ratio"], f["requests"], f["seconds"]))
    with open(os.path.join(OUT, "loss-figures.json"), "w") as fh:
        json.dump(FIGURES, fh, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    if not os.access(VM_SH, os.X_OK):
        log("no test bed at %s (set RXE_TESTBED)" % TESTBED)
        return 1
    if not os.access(UROCE, os.X_OK):
        log("no uroce binary at %s (build first, or set UROCE)" % UROCE)
        return 1
    log("== rxe interop: test bed %s, uroce %s" % (TESTBED, UROCE))
    vm("build", timeout=1800, check=True)
    booted = False
    if vm("status", timeout=60).returncode != 0:
        log("== booting the VM")
        vm("start", timeout=900, check=True)
        booted = True
    log("== VM up (%.0f s so far)" % (time.time() - t0))
    info = vm("exec", "uname -r; rdma link show rxe0/1; "
              "cat /sys/class/infiniband/rxe0/ports/1/gids/1", timeout=60)
    log(info.stdout.strip())
    npass = nfail = 0
    port = 18600
    todo = [c for c in cases() if not ONLY or re.search(ONLY, c["name"])]
    try:
        for kind in ("v4", "v6", "jumbo"):
            group = [c for c in todo if c["net"] == kind]
            if not group:
                continue
            try:
                net = net_setup(kind)
            except (subprocess.SubprocessError, RuntimeError) as e:
                for c in group:
                    nfail += 2
                    log("FAIL %-34s both ways: %s setup: %s" % (
                        c["name"], kind, str(e).splitlines()[0]))
                continue
            for c in group:
                for way in c.get("ways", ("vm-server", "uroce-server")):
                    port += 1
                    tag = re.sub(r"[^A-Za-z0-9]+", "_", c["name"]).strip(
                        "_") + "." + way
                    t = time.time()
                    try:
                        why, summ = (run_cm_way if c.get("cm") else
                                     run_way)(c, way, port, tag, net)
                    except (subprocess.TimeoutExpired, RuntimeError) as e:
                        why, summ = "harness: %s" % str(e).splitlines()[0], ""
                    label = "%-34s %-13s" % (c["name"], way)
                    if why is None:
                        npass += 1
                        log("PASS %s %5.1fs  %s" % (label, time.time() - t,
                                                    summ))
                    else:
                        nfail += 1
                        log("FAIL %s %5.1fs  %s (log: %s/%s.log)" % (
                            label, time.time() - t, why, OUT, tag))
    finally:
        net_restore()
        if booted and os.environ.get("INTEROP_KEEP_VM") != "1":
            log("== stopping the VM")
            vm("stop", timeout=300)
    report_figures()
    log("== %.0f s in all" % (time.time() - t0))
    log("%d passed, %d failed" % (npass, nfail))
    return 0 if nfail == 0 and npass > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
