#!/usr/bin/env bash
# uroce installed the ways a user installs it, then used from there:
#   install.sh destdir SRC BUILD WORK   DESTDIR=... cmake --install --prefix
#   install.sh deb SRC WORK             packaging/deb.sh, then dpkg -i in a
#                                       private mount namespace
# Each links examples/rdma_write.c against what was installed (pkg-config,
# pkg-config --static, CMake's find_package) and runs it in a private
# network namespace, checks the exported symbols, the man pages, and that
# `uroce run` finds the installed libibverbs.so.1. Needs root (namespaces).
set -euo pipefail
mode=$1
src=$(cd "$2" && pwd)
fails=0
ok() { echo "ok   $*"; }
bad() {
  echo "FAIL $*"
  fails=$((fails + 1))
}
check() { # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

# rdma_write server and client in a fresh network namespace (nothing else
# on its loopback), each bounded. $1: server binary, $2: client binary.
run_pair() {
  timeout 60 unshare -n bash -c '
    ip link set lo up
    "$1" server 127.0.0.1 >"$3/server.out" 2>&1 & s=$!
    "$2" client 127.0.0.2 127.0.0.1 >"$3/client.out" 2>&1; c=$?
    wait $s; sv=$?
    grep -q "RDMA WRITE of .* success" "$3/client.out" &&
      grep -q "hello over RoCEv2 from 127.0.0.2" "$3/server.out" &&
      [ $c -eq 0 ] && [ $sv -eq 0 ]' _ "$1" "$2" "$work" ||
    { cat "$work/server.out" "$work/client.out" >&2; return 1; }
}

# Every defined global symbol of a library starts with uroce_.
only_uroce_symbols() { # nm-args FILE
  local others
  others=$(nm "$@" | awk 'NF >= 3 && $2 != "A" && $3 !~ /^uroce_/')
  [ -z "$others" ] || { echo "$others" | head >&2; return 1; }
}

# A man page for uroce and for every command `uroce --help` lists, which
# groff formats without a warning. $1: uroce, $2: the man1 folder.
man_pages() {
  local cmds c f
  cmds=$("$1" --help | awk '/^commands:/ {on = 1; next} on && NF == 0 {on = 0}
    on {print $1}')
  [ -n "$cmds" ] || return 1
  for c in "" $cmds; do
    f=$2/uroce${c:+-$c}.1
    [ -f "$f" ] || f=$f.gz
    [ -f "$f" ] || { echo "no man page $f" >&2; return 1; }
    if ! zcat -f "$f" | groff -man -ww -z 2>&1 | (! grep .); then
      echo "groff warns about $f" >&2
      return 1
    fi
  done
}

# `uroce run` puts the drop-in of its own installation first.
run_finds_dropin() { # UROCE LIBDIR
  local first
  first=$(env -u UROCE_LIBDIR "$1" run -- sh -c 'echo "${LD_LIBRARY_PATH%%:*}"')
  [ "$first" = "$2" ] && [ -f "$2/libibverbs.so.1" ] ||
    { echo "uroce run used '$first', not $2" >&2; return 1; }
}

# Build rdma_write with pkg-config (shared) and run it.
pkgconfig_shared() { # pkg-config env is set by the caller
  cc -o "$work/rw_pc" "$src/examples/rdma_write.c" \
    $(pkg-config --cflags --libs uroce) &&
    readelf -d "$work/rw_pc" | grep -q 'NEEDED.*\[liburoce\.so\.0\]' &&
    run_pair "$work/rw_pc" "$work/rw_pc"
}

cmake_consumer() { # PREFIX_PATH
  rm -rf "$work/consumer"
  cmake -S "$src/tests/install/consumer" -B "$work/consumer" \
    -DCMAKE_PREFIX_PATH="$1" -DRDMA_WRITE_C="$src/examples/rdma_write.c" \
    >"$work/consumer.log" 2>&1 &&
    cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 &&
    ! readelf -d "$work/consumer/rw_cmake_static" | grep -q liburoce &&
    run_pair "$work/consumer/rw_cmake_static" "$work/consumer/rw_cmake" ||
    { tail -20 "$work/consumer.log" >&2; return 1; }
}

case $mode in
destdir)
  build=$(cd "$3" && pwd)
  work=$4
  rm -rf "$work"
  mkdir -p "$work"
  prefix=/opt/uroce-test
  root=$work/root
  DESTDIR=$root cmake --install "$build" --prefix "$prefix" >/dev/null
  pc=$(find "$root" -name uroce.pc)
  libdir=$(dirname "$(dirname "$pc")")
  uroce=$root$prefix/bin/uroce
  check "uroce --version runs from the installed tree" \
    bash -c '"$1" --version | grep -qx "uroce [0-9.]*"' _ "$uroce"
  check "uroce.pc names the prefix given to cmake --install ($prefix)" \
    grep -qx "prefix=$prefix" "$pc"
  check "liburoce.so.0 has its SONAME" \
    bash -c 'readelf -d "$1" | grep -q "SONAME.*\[liburoce\.so\.0\]"' _ \
    "$libdir/liburoce.so.0"
  check "liburoce.so exports only uroce_* symbols" \
    only_uroce_symbols -D --defined-only "$libdir/liburoce.so.0"
  check "liburoce.a defines only uroce_* globals" \
    only_uroce_symbols -g --defined-only "$libdir/liburoce.a"
  export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
  export LD_LIBRARY_PATH=$libdir
  check "rdma_write links with pkg-config --libs uroce and runs" \
    pkgconfig_shared
  # Static: a tree with only liburoce.a, as a user who wants no .so.
  cp -a "$root" "$work/sroot"
  rm -f "$work/sroot${libdir#"$root"}"/liburoce.so*
  check "rdma_write links with pkg-config --static (liburoce.a) and runs" \
    env PKG_CONFIG_SYSROOT_DIR="$work/sroot" \
    PKG_CONFIG_PATH="$work/sroot${libdir#"$root"}/pkgconfig" bash -c '
      ! pkg-config --static --libs uroce | grep -q systemd &&
      cc -o "$1/rw_static" "$2/examples/rdma_write.c" \
        $(pkg-config --static --cflags --libs uroce) &&
      ! readelf -d "$1/rw_static" | grep -q liburoce' _ "$work" "$src" &&
    check "  and talks to the shared build" \
    run_pair "$work/rw_static" "$work/rw_pc"
  unset LD_LIBRARY_PATH
  check "find_package(uroce): uroce::uroce and uroce::uroce_static" \
    cmake_consumer "$root$prefix"
  check "man pages for uroce and each command" \
    man_pages "$uroce" "$root$prefix/share/man/man1"
  check "uroce run finds the installed libibverbs.so.1" \
    run_finds_dropin "$uroce" "$libdir/uroce"
  ;;
deb)
  work=$3
  rm -rf "$work"
  mkdir -p "$work"
  "$src/packaging/deb.sh" "$work/deb" >"$work/debs" 2>"$work/deb.log" ||
    { cat "$work/deb.log"; exit 1; }
  mapfile -t debs <"$work/debs"
  # (a fourth, uroce-sim-mpi, where Open MPI's headers are: CI's case)
  if command -v mpicc >/dev/null; then
    check "four packages built" [ ${#debs[@]} -eq 4 ]
  else
    check "three packages built" [ ${#debs[@]} -eq 3 ]
  fi
  # Every library a binary needs comes from a package it depends on:
  # what makes it run on a fresh machine.
  depends_cover() {
    local deb x f lib path pkg deps missing=0 elves=0
    for deb in "${debs[@]}"; do
      x=$work/x/$(basename "$deb")
      mkdir -p "$x"
      dpkg-deb -x "$deb" "$x" || return 1
      deps=" $(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/,/ /g') "
      while IFS= read -r f; do
        readelf -h "$f" >/dev/null 2>&1 || continue
        elves=$((elves + 1))
        for lib in $(readelf -d "$f" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p'); do
          path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
          # (merged /usr: ldconfig may say /lib, dpkg knows /usr/lib)
          pkg=$(dpkg -S "$path" "/usr$path" "$(readlink -f "$path")" \
            2>/dev/null | head -1 | cut -d: -f1)
          if [ -z "$pkg" ] || [[ "$deps" != *" $pkg "* && $pkg != libc6 ]]; then
            echo "$(basename "$deb"): ${f#"$x"} needs $lib ($pkg), not in Depends:$deps" >&2
            missing=1
          fi
        done
      done < <(find "$x" -type f)
    done
    # uroce, liburoce.so.0, libibverbs.so.1 and two provider stand-ins
    [ "$elves" -ge 5 ] || { echo "only $elves ELF files" >&2; return 1; }
    return $missing
  }
  check "Depends name every library the binaries need" depends_cover
  # dpkg -i onto this machine's /usr, /etc and /var, through overlays in
  # a private mount namespace: a real install (dependencies checked,
  # ldconfig run), gone when the namespace ends.
  cat >"$work/inside.sh" <<'EOS'
set -euo pipefail
work=$1 src=$2
shift 2
mount -t tmpfs tmpfs "$work/ovl"
for d in usr etc var; do
  mkdir -p "$work/ovl/$d/up" "$work/ovl/$d/wk"
  mount -t overlay overlay \
    -o "lowerdir=/$d,upperdir=$work/ovl/$d/up,workdir=$work/ovl/$d/wk" "/$d"
done
dpkg -i "$@" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
. "$work/checks.sh"
EOS
  mkdir -p "$work/ovl"
  ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  declare -f ok bad check run_pair pkgconfig_shared cmake_consumer \
    man_pages run_finds_dropin >"$work/checks.sh"
  cat >>"$work/checks.sh" <<EOS
fails=0
work=$work src=$src
check "installed: uroce --version" bash -c 'uroce --version | grep -q "^uroce "'
check "installed: pkg-config --exists uroce" pkg-config --exists uroce
check "installed: rdma_write links with pkg-config and runs" pkgconfig_shared
check "installed: find_package(uroce)" cmake_consumer ""
check "installed: man pages" man_pages /usr/bin/uroce /usr/share/man/man1
check "installed: uroce run finds /usr/lib/$ma/uroce" \
  run_finds_dropin /usr/bin/uroce /usr/lib/$ma/uroce
if [ -e /usr/bin/uroce-sim-mpi ]; then
  check "installed: uroce-sim-mpi --help" bash -c \
    'OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 uroce-sim-mpi --help | grep -q mpirun'
  check "installed: man uroce-sim-mpi" test -f /usr/share/man/man1/uroce-sim-mpi.1.gz
  dpkg -r uroce-sim-mpi >>"\$work/dpkg.log" 2>&1 || bad "dpkg -r uroce-sim-mpi"
fi
dpkg -r uroce liburoce-dev liburoce0 >>"\$work/dpkg.log" 2>&1 &&
  [ ! -e /usr/bin/uroce ] && ok "removed" || bad "dpkg -r"
exit \$fails
EOS
  if unshare -m --propagation private bash "$work/inside.sh" "$work" "$src" \
    "${debs[@]}"; then
    ok "packages install, run and remove"
  else
    bad "packages install, run and remove"
  fi
  ;;
*)
  echo "usage: $0 destdir SRC BUILD WORK | deb SRC WORK" >&2
  exit 2
  ;;
esac
echo "$fails failed"
[ "$fails" -eq 0 ]
