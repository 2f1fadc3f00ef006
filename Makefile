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
FUZZ_SHARES = inspect:3 engine:5 scenario:2 bootstrap:2
BUILD_TYPE ?= RelWithDebInfo

.PHONY: all build demo test test-asan fuzz bench format clean deps deps-test \
	interop

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

fuzz: deps-test
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
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

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-fuzz
