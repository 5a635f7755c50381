# Thin wrapper over the CMake presets so the README's two commands do all set-up on a fresh machine.
.PHONY: setup build run test asan fuzz avx512-emulated clean

setup:
	bash scripts/setup.sh

build: setup
	cmake --preset release >/dev/null
	cmake --build --preset release

# The main job: a forward pass of the default DeepSeek-V2-Lite-shaped MoE layer on seeded random weights.
run: build
	./build/release/tools/hymoe/hymoe demo

test: build
	ctest --preset release

asan: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan

# The fuzz targets are built by the asan preset (clang), beside the sanitized tests.
fuzz: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	@# Each target X_fuzz runs over fuzz/corpus/X; new inputs go to build/, never into the repo's seed corpus.
	@for t in build/asan/fuzz/*_fuzz; do \
	  n=$$(basename $$t _fuzz); mkdir -p build/asan/corpus-$$n; \
	  echo "fuzzing $$n for $${FUZZ_SECONDS:-30} s"; \
	  $$t -max_total_time=$${FUZZ_SECONDS:-30} -rss_limit_mb=2048 -print_final_stats=1 build/asan/corpus-$$n \
	    fuzz/corpus/$$n >build/asan/log-$$n 2>&1 || { tail -40 build/asan/log-$$n; exit 1; }; \
	  grep -E "^(Done|stat::number_of_executed_units)" build/asan/log-$$n; \
	done

avx512-emulated:
	bash scripts/avx512_under_emulation.sh

clean:
	rm -rf build
