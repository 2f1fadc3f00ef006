#!/bin/sh
# Builds the torch.distributed backend "uroce" (torch/uroce_pg.cpp) against
# Debian's python3-torch / libtorch-dev into OUT/uroce_torch/, next to a
# copy of the Python package. Skips the compile when the module is newer
# than its inputs.
#   torch/build.sh BUILD_DIR   (BUILD_DIR holds liburoce.so)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
PY=/usr/bin/python3
OUT=$BUILD/torch
mkdir -p "$OUT/uroce_torch"
cp "$HERE/uroce_torch/__init__.py" "$OUT/uroce_torch/"
SUFFIX=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
SO=$OUT/uroce_torch/_uroce_pg$SUFFIX
if [ -f "$SO" ] && [ "$SO" -nt "$HERE/uroce_pg.cpp" ] &&
  [ "$SO" -nt "$BUILD/liburoce.so" ]; then
  exit 0
fi
TI=/usr/lib/python3/dist-packages/torch/include
PYI=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
g++ -O2 -g0 -shared -fPIC -std=c++17 -Wno-deprecated-declarations -DTORCH_EXTENSION_NAME=_uroce_pg \
  -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1 \
  -I"$ROOT/include" -I"$TI" -I"$TI/torch/csrc/api/include" -I"$PYI" \
  "$HERE/uroce_pg.cpp" -o "$SO.tmp" \
  -L"$BUILD" -Wl,-rpath,"$BUILD" -luroce \
  -L/usr/lib/python3/dist-packages/torch/lib -ltorch -ltorch_cpu \
  -ltorch_python -lc10
mv "$SO.tmp" "$SO"
