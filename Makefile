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

# The transformers suite needs PyPI's PyTorch and transformers (pinned): scripts/setup_pypi.sh installs them once.
test: build
	bash scripts/setup_pypi.sh
	ctest --preset release

asan: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan

# The fuzz targets are built by the asan preset (clang), beside the sanitized tests.
fuzz: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	@# Each target X_fuzz runs over fuzz/corpus/X; new inputs and crash files go to build/, never into the repo's
	@# seed corpus. FUZZ_RUNS=N runs each target for N executions instead of FUZZ_SECONDS (the project's bar
	@# before a parser change is closed is FUZZ_RUNS=1000000). fuzz/X.dict, else fuzz/json.dict, is the dictionary.
	@# Inputs of 100-270 KB that reach every limit (100,000-deep nesting, 200 KB tokens) run once each, whole.
	python3 fuzz/large_seeds.py build/asan/large
	@for t in build/asan/fuzz/*_fuzz; do \
	  n=$$(basename $$t _fuzz); mkdir -p build/asan/corpus-$$n; \
	  if [ -d build/asan/large/$$n ]; then $$t -rss_limit_mb=2048 build/asan/large/$$n/* >build/asan/log-large-$$n 2>&1 \
	    || { tail -40 build/asan/log-large-$$n; exit 1; }; fi; \
	  if [ -f fuzz/$$n.dict ]; then d=fuzz/$$n.dict; else d=fuzz/json.dict; fi; \
	  if [ -n "$${FUZZ_RUNS:-}" ]; then limit="-runs=$$FUZZ_RUNS"; echo "fuzzing $$n for $$FUZZ_RUNS runs"; \
	  else limit="-max_total_time=$${FUZZ_SECONDS:-30}"; echo "fuzzing $$n for $${FUZZ_SECONDS:-30} s"; fi; \
	  $$t $$limit -max_len=$${FUZZ_MAX_LEN:-4096} -rss_limit_mb=2048 -timeout=25 -print_final_stats=1 -dict=$$d \
	    -artifact_prefix=build/asan/ build/asan/corpus-$$n fuzz/corpus/$$n >build/asan/log-$$n 2>&1 \
	    || { tail -40 build/asan/log-$$n; exit 1; }; \
	  grep -E "^(Done|stat::number_of_executed_units)" build/asan/log-$$n; \
	done

avx512-emulated:
	bash scripts/avx512_under_emulation.sh

clean:
	rm -rf build
