#!/usr/bin/env bash
# Installs the Debian packages uroce needs, only those missing.
#   scripts/install-deps.sh build   what building needs
#   scripts/install-deps.sh test    building, testing, fuzzing
# Runs apt-get as root, or through sudo; says what to install otherwise.
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libpcap-dev libisal-dev libyaml-dev zlib1g-dev gnuplot-nox
  libibverbs-dev librdmacm-dev)
test_pkgs=(python3 python3-scapy tshark clang libclang-rt-14-dev iproute2
  ibverbs-utils rdmacm-utils perftest groff-base)
test_pkgs+=(tcpdump) # captures for tests/net/dump_e2e.py
# the torch.distributed backend (torch/) and its test against Gloo;
# torch's headers include pybind11's, which python3-torch only recommends
test_pkgs+=(python3-torch libtorch-dev pybind11-dev)
# UCX over the drop-in (tests/net/ucx_e2e.py, bench/ucx_bench.sh) and
# rdma-core's pyverbs (tests/net/pyverbs_e2e.py, scripts/rdma-core-tests.sh)
test_pkgs+=(ucx-utils libucx-dev python3-pyverbs)
# the simulator on MPI ranks (uroce-sim-mpi, tests/sim/mpi_e2e.py)
test_pkgs+=(libopenmpi-dev openmpi-bin)

want=("${build_pkgs[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  *) echo "usage: $0 [build|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO=(sudo)
else
  echo "uroce: these Debian packages are needed: ${missing[*]}" >&2
  echo "uroce: run as root, or give this user sudo, or install them:" >&2
  echo "  apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "uroce: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, quietly.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
  "${SUDO[@]}" debconf-set-selections 2>/dev/null || true
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
