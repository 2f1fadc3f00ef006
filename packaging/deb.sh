#!/usr/bin/env bash
# Builds uroce's Debian packages with dpkg-deb alone (no debhelper, no
# source package), the split Debian uses for a library:
#   uroce          the program, its man pages, the libibverbs.so.1 and
#                  librdmacm.so.1 drop-ins
#   liburoce0      liburoce.so.0
#   liburoce-dev   headers, liburoce.so, liburoce.a, uroce.pc, CMake package
#   uroce-sim-mpi  `uroce sim` on MPI ranks (built where Open MPI's headers
#                  are; its own package, so that uroce needs no MPI)
# Depends come from dpkg-shlibdeps, so they name what the binaries link.
#   packaging/deb.sh [OUTDIR]     (default build-deb; `make deb`)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(sed -n 's/^project(uroce VERSION \([0-9.]*\).*/\1/p' \
  "$src/CMakeLists.txt")
debver=$version-1
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
maint="uroce developers <uroce@localhost>"
# The changelog's date: the last commit's, so that a rebuild is the same.
when=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null ||
  date +%s)}

cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$ma" \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build "$out/build" -j"$(nproc)" >/dev/null
stage=$out/stage
rm -rf "$stage" "$out/pkg"
DESTDIR=$stage cmake --install "$out/build" --strip >/dev/null

# take PKG PATH...: moves installed paths (relative to the stage) into PKG.
take() {
  local pkg=$1 p
  shift
  for p in "$@"; do
    [ -e "$stage/$p" ] || [ -L "$stage/$p" ] ||
      { echo "deb.sh: $p was not installed" >&2; exit 1; }
    mkdir -p "$out/pkg/$pkg/$(dirname "$p")"
    mv "$stage/$p" "$out/pkg/$pkg/$p"
  done
}
lib=usr/lib/$ma
take liburoce0 $(cd "$stage" && ls -d $lib/liburoce.so.*)
take liburoce-dev usr/include/uroce $lib/liburoce.so $lib/liburoce.a \
  $lib/pkgconfig/uroce.pc $lib/cmake/uroce
pkgs="liburoce0 liburoce-dev uroce"
if [ -e "$stage/usr/bin/uroce-sim-mpi" ]; then
  take uroce-sim-mpi usr/bin/uroce-sim-mpi usr/share/man/man1/uroce-sim-mpi.1
  pkgs="$pkgs uroce-sim-mpi"
else
  rm "$stage/usr/share/man/man1/uroce-sim-mpi.1"
fi
take uroce usr/bin/uroce $lib/uroce usr/share/man/man1
left=$(find "$stage" -type f -o -type l)
if [ -n "$left" ]; then
  echo "deb.sh: installed but in no package:" >&2
  echo "$left" >&2
  exit 1
fi
gzip -9n "$out"/pkg/uroce/usr/share/man/man1/*.1
[ ! -d "$out/pkg/uroce-sim-mpi" ] ||
  gzip -9n "$out"/pkg/uroce-sim-mpi/usr/share/man/man1/*.1

# dpkg-shlibdeps reads debian/control of a source package; this one is
# only for it. liburoce0's own shlibs file lets it resolve liburoce.so.0.
mkdir -p "$out/shlibs/debian"
printf 'Source: uroce\n\nPackage: uroce\nArchitecture: any\n' \
  >"$out/shlibs/debian/control"
echo "liburoce 0 liburoce0 (>= $version)" >"$out/shlibs/debian/shlibs.local"
depends() {
  local f args=()
  while IFS= read -r f; do args+=("-e$f"); done < <(find "$out/pkg/$1" \
    -type f \( -name '*.so*' -o -path '*/bin/*' \))
  # (it warns that the files are not under debian/PKG: they need not be)
  (cd "$out/shlibs" && dpkg-shlibdeps -O "${args[@]}" 2> >(grep -v \
    "should already be installed in their package's directory" >&2)) |
    sed -n 's/^shlibs:Depends=//p'
}

control() { # PKG SECTION DEPENDS DESCRIPTION...
  local pkg=$1 section=$2 deps=$3
  shift 3
  mkdir -p "$out/pkg/$pkg/DEBIAN" "$out/pkg/$pkg/usr/share/doc/$pkg"
  cat >"$out/pkg/$pkg/usr/share/doc/$pkg/copyright" <<EOT
uroce: a userspace RoCEv2 stack.
No licence has been stated for this software yet.
EOT
  printf 'uroce (%s) unstable; urgency=medium\n\n  * Built by packaging/deb.sh.\n\n -- %s  %s\n' \
    "$debver" "$maint" "$(date -R -d @"$when")" |
    gzip -9n >"$out/pkg/$pkg/usr/share/doc/$pkg/changelog.Debian.gz"
  local size
  size=$(du -sk --exclude=DEBIAN "$out/pkg/$pkg" | cut -f1)
  {
    echo "Package: $pkg"
    echo "Version: $debver"
    echo "Architecture: $arch"
    echo "Maintainer: $maint"
    echo "Installed-Size: $size"
    [ -n "$deps" ] && echo "Depends: $deps"
    [ "$pkg" = uroce-sim-mpi ] && echo "Recommends: openmpi-bin, gnuplot-nox"
    if [ "$pkg" = uroce ]; then
      echo "Recommends: iproute2, gnuplot-nox"
      echo "Suggests: ibverbs-utils, perftest, tcpdump"
    fi
    echo "Section: $section"
    echo "Priority: optional"
    echo "Description: $1"
    shift
    for line in "$@"; do echo " $line"; done
  } >"$out/pkg/$pkg/DEBIAN/control"
}

control liburoce0 libs "$(depends liburoce0)" \
  "userspace RoCEv2 stack (shared library)" \
  "RDMA over Converged Ethernet v2 in userspace, over ordinary UDP:" \
  "the native API (uroce_*) for programs linked against it."
echo "liburoce 0 liburoce0 (>= $version)" >"$out/pkg/liburoce0/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$out/pkg/liburoce0/DEBIAN/triggers"

control liburoce-dev libdevel \
  "liburoce0 (= $debver), libisal-dev, libpcap-dev, libyaml-dev, zlib1g-dev" \
  "userspace RoCEv2 stack (development files)" \
  "Headers, the static library, uroce.pc for pkg-config and the CMake" \
  "package (find_package(uroce): uroce::uroce, uroce::uroce_static)."

control uroce net "$(depends uroce)" \
  "userspace RoCEv2 stack (tools, libibverbs and librdmacm drop-ins)" \
  "The uroce command: perf (perftest-like), run (unmodified verbs and" \
  "rdma_cm programs over drop-in libibverbs.so.1 and librdmacm.so.1)," \
  "dump, sim (a fabric" \
  "simulator), launch and coll-bench (collectives), pktgen."

if [ -d "$out/pkg/uroce-sim-mpi" ]; then
  control uroce-sim-mpi science "$(depends uroce-sim-mpi)" \
    "userspace RoCEv2 stack (the fabric simulator on MPI ranks)" \
    "uroce-sim-mpi runs uroce sim with one partition of the fabric on each" \
    "MPI rank (mpirun -np N uroce-sim-mpi SCENARIO.yaml), with the results" \
    "of one process."
fi

for pkg in $pkgs; do
  dpkg-deb --root-owner-group -Zxz --build "$out/pkg/$pkg" \
    "$out/${pkg}_${debver}_$arch.deb" >/dev/null
  echo "$out/${pkg}_${debver}_$arch.deb"
done
