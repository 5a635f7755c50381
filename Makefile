# Thin wrapper over the CMake presets so the README's two commands do all set-up on a fresh machine.
.PHONY: setup build run test asan fuzz clean

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

fuzz: setup
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	./build/fuzz/fuzz/safetensors_fuzz -max_total_time=$${FUZZ_SECONDS:-30} -rss_limit_mb=2048 fuzz/corpus/safetensors

clean:
	rm -rf build
