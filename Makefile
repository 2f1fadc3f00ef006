# The two commands a newcomer needs:
#   make demo   build, then move data over RDMA between two processes, decode
#               the packets, and simulate a fabric
#   make test   install what the tests need, build, run every test
# Everything else is a convenience over CMake; build/ is the normal build,
# build-asan/ the ASan+UBSan one, build-fuzz/ the libFuzzer one.

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
# Each target's share of FUZZ_SECONDS, in twelfths: the engine's stateful
# packet path gets the most, the small parsers saturate quickly.
FUZZ_SHARES = inspect:3 engine:4 scenario:2 bootstrap:2 plan:1
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all build demo test test-asan fuzz bench format clean deps deps-test \
	interop install uninstall deb test-tsan

all: build

deps:
	@scripts/install-deps.sh build

deps-test:
	@scripts/install-deps.sh test

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	cmake --build build -j$(JOBS)

demo: build
	@scripts/demo.sh

test: deps-test build
	cd build && ctest --output-on-failure -j$(JOBS)

# Wire interop with the Linux kernel's Soft-RoCE (rdma_rxe) in a qemu VM
# (tests/interop/rxe/run.py; needs root and the test bed in ../shared/testbed).
interop: deps-test build
	tests/interop/rxe/run.py

test-asan: deps-test
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DUROCE_SANITIZE=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UROCE_PROP_N=2000 \
	  ctest --output-on-failure -j$(JOBS)

# ThreadSanitizer over the threaded parts: the API's device (progress
# thread, thread hand-off), the collectives' bootstrap threads, and the
# drop-in libibverbs under unmodified verbs programs (uninstrumented, so
# they get the TSan runtime preloaded). Loopback only, quick sizes: the
# point is the interleavings, not the volume.
TSAN_FLAGS = -fsanitize=thread -O1 -g -fno-omit-frame-pointer
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 \
	  suppressions=$(CURDIR)/tests/tsan.supp"
test-tsan: deps-test
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS="$(TSAN_FLAGS)" \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
	  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && $(TSAN_ENV) ctest --output-on-failure -j$(JOBS) \
	  -R 'unit\.test_(api|udp_sock|coll_boot|qp_state|sim_par)$$'
	$(TSAN_ENV) LD_PRELOAD=$$($(CC) -print-file-name=libtsan.so) \
	  tests/net/verbs_e2e.py --uroce build-tsan/uroce --quick --no-netns

fuzz: deps-test
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS=-O1 \
	  -DUROCE_SANITIZE=ON -DUROCE_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
	cmake --build build-fuzz -j$(JOBS) --target \
	  $(foreach t,$(FUZZ_SHARES),fuzz_$(firstword $(subst :, ,$(t))))
	set -e; for ts in $(FUZZ_SHARES); do \
	  t=$${ts%%:*}; s=$$(( $(FUZZ_SECONDS) * $${ts#*:} / 12 )); \
	  mkdir -p build-fuzz/corpus/$$t; \
	  build-fuzz/fuzz/fuzz_$$t -max_total_time=$$s -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/$$t- build-fuzz/corpus/$$t fuzz/corpus/$$t; \
	done

bench: build
	build/bench/bench_icrc
	build/bench/bench_engine
	build/bench/bench_sim

# make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]: the program, the
# shared and static library, headers, uroce.pc, the CMake package, man
# pages, and the libibverbs.so.1 drop-in in <libdir>/uroce (out of the
# system's library path: `uroce run` finds it there). Its own build
# folder, configured for PREFIX, so that the library paths it bakes in are
# the installed ones.
PREFIX ?= /usr/local
install: deps
	cmake -S . -B build-install -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DBUILD_TESTING=OFF >/dev/null
	cmake --build build-install -j$(JOBS)
	DESTDIR=$(DESTDIR) cmake --install build-install

# make uninstall [DESTDIR=...]: the same DESTDIR as make install (CMake's
# manifest lists the paths without it).
uninstall:
	sed 's|^|$(DESTDIR)|' build-install/install_manifest.txt | \
	  xargs -d '\n' rm -f --

# make deb: uroce, liburoce0 and liburoce-dev _VERSION_ARCH.deb in
# build-deb/ (packaging/deb.sh).
deb: deps
	packaging/deb.sh build-deb

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-fuzz build-tsan build-install build-deb
