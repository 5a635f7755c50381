"""Decode and prefill speed of a real-shape transformers model cut to a few layers, its MoE blocks patched with
hymoe.transformers against unpatched (transformers' default experts path, and its grouped_mm path), random bf16
weights, in one process: the end-to-end time per step, the MoE blocks' share of it, and the resident bytes.

  build/pypi-venv/bin/python scripts/transformers_bench.py --shape qwen3-30b-a3b --layers 2 --threads 2

(PYTHONPATH=python HYMOE_EXTENSION_DIR=build/release/python, or an installed hymoe). docs/performance.md has the
results. Medians of --repeats runs; decode is timed step by step with the KV cache after a 32-token prompt.
"""

import argparse
import gc
import json
import os
import statistics
import time

import torch
import transformers

import hymoe.transformers as ht

def _moe(name):
    """The MoE fields of a model's shape in bench/shapes/ (the file `hymoe bench --shape` reads)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "bench", "shapes", name + ".json")) as f:
        return json.load(f)


# The rest of each model's config.json (attention, vocabulary), with num_hidden_layers cut.
SHAPES = {
    "qwen3-30b-a3b": lambda layers, s: transformers.Qwen3MoeConfig(
        vocab_size=151936, hidden_size=s["dim"], intermediate_size=6144, moe_intermediate_size=s["expert_hidden"],
        num_experts=s["experts"], num_experts_per_tok=s["top_k"], norm_topk_prob=True, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, num_hidden_layers=layers, max_position_embeddings=4096,
        tie_word_embeddings=False),
    # first_k_dense_replace=1: layer 0 is dense, as in the checkpoint.
    "deepseek-v2-lite": lambda layers, s: transformers.DeepseekV2Config(
        vocab_size=102400, hidden_size=s["dim"], intermediate_size=10944, moe_intermediate_size=s["expert_hidden"],
        n_routed_experts=s["experts"], n_shared_experts=s["shared_experts"], num_experts_per_tok=s["top_k"],
        first_k_dense_replace=1, topk_method="greedy", routed_scaling_factor=1.0, num_attention_heads=16,
        num_key_value_heads=16, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64, qk_nope_head_dim=128,
        v_head_dim=128, num_hidden_layers=layers + 1, max_position_embeddings=4096),
}


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class BlockTimer:
    """Wall time inside the MoE blocks (the modules holding an experts module), summed per forward call."""

    def __init__(self, model):
        self.total = 0.0
        self._start = {}
        for module in model.modules():
            if hasattr(module, "experts") and isinstance(module.experts, torch.nn.Module):
                module.register_forward_pre_hook(self._pre)
                module.register_forward_hook(self._post)

    def _pre(self, module, args):
        self._start[id(module)] = time.perf_counter()

    def _post(self, module, args, out):
        self.total += time.perf_counter() - self._start.pop(id(module))


def measure(model, timer, prompt_lengths, decode_steps, repeats):
    result = {}
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for t in prompt_lengths:
            ids = torch.randint(0, vocab, (1, t), generator=g)
            model(ids)  # warm-up: first touch of the weights, buffers sized
            times, blocks = [], []
            for _ in range(repeats):
                timer.total = 0.0
                start = time.perf_counter()
                model(ids)
                times.append(time.perf_counter() - start)
                blocks.append(timer.total)
            result[f"prefill_{t}"] = {"ms": 1e3 * statistics.median(times),
                                      "moe_ms": 1e3 * statistics.median(blocks),
                                      "tokens_per_s": t / statistics.median(times)}
        ids = torch.randint(0, vocab, (1, 32), generator=g)
        out = model(ids, use_cache=True)
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        times, blocks = [], []
        for step in range(decode_steps + 2):
            timer.total = 0.0
            start = time.perf_counter()
            out = model(token, past_key_values=past, use_cache=True)
            elapsed = time.perf_counter() - start
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            if step >= 2:  # the first steps size the cache's buffers
                times.append(elapsed)
                blocks.append(timer.total)
        result["decode"] = {"ms": 1e3 * statistics.median(times), "moe_ms": 1e3 * statistics.median(blocks),
                            "tokens_per_s": 1 / statistics.median(times)}
    return result


def overhead(threads, calls=2000):
    """Per-call cost of a patched experts module at one token, on a block too small to compute much (8 experts,
    D 64): the module as the block calls it, and the engine's own submit + wait on the same operands."""
    config = transformers.Qwen3MoeConfig(vocab_size=97, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                         head_dim=16, num_experts=8, num_experts_per_tok=2)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    ht.patch(model, threads=threads)
    block = model.model.layers[0].mlp
    x = torch.randn(1, 64).bfloat16()

    def median_us(f):
        for _ in range(200):
            f()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return 1e6 * statistics.median(times)

    with torch.inference_mode():
        _, weights, ids = block.gate(x)
        experts = block.experts
        y = torch.empty(1, 64)
        w32 = weights.float().contiguous()
        module = median_us(lambda: experts(x, ids, weights))
        engine = median_us(lambda: (experts.engine.submit_raw(1, ids.shape[1], x.data_ptr(), True, ids.data_ptr(),
                                                              False, w32.data_ptr(), y.data_ptr(), False,
                                                              experts._mask_u8.data_ptr()),
                                    experts.engine.wait()))
    return {"patched_experts_module_us": module, "engine_submit_wait_us": engine}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-30b-a3b")
    p.add_argument("--layers", type=int, default=2, help="MoE layers kept")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, nargs="+", default=[32, 512], help="prefill lengths")
    p.add_argument("--decode-steps", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--paths", nargs="+", default=["eager", "grouped_mm", "hymoe"],
                   help="eager: transformers' eager experts loop; grouped_mm: its grouped_mm experts (its default); "
                        "hymoe: patched, in --format; hymoe-int8 / hymoe-int4: patched with that format")
    p.add_argument("--format", default="stored", choices=["stored", "int8", "int4"],
                   help="hymoe's expert format (patch's format=): int8 and int4 quantize the bf16 experts at load")
    p.add_argument("--release", action="store_true",
                   help="patch with release_torch_weights=True (one copy of the experts; hymoe must be the last path)")
    p.add_argument("--overhead", action="store_true", help="only the per-call overhead at one token (tiny block)")
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args()
    if args.release and not args.paths[-1].startswith("hymoe"):
        p.error("--release frees transformers' expert weights: hymoe must be the last of --paths")

    torch.set_num_threads(args.threads)
    if args.overhead:
        print(json.dumps(overhead(args.threads)))
        return
    config = SHAPES[args.shape](args.layers, _moe(args.shape))
    torch.manual_seed(0)
    base = rss_bytes()
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    unpatched_rss = rss_bytes() - base
    timer = BlockTimer(model)
    report = {"shape": args.shape, "layers": args.layers, "threads": args.threads, "format": args.format,
              "torch": torch.__version__,
              "transformers": transformers.__version__, "cpu": _cpu(), "paths": {}}
    for path in args.paths:
        if path.startswith("hymoe"):
            fmt = path.partition("-")[2] or args.format
            before = rss_bytes()
            ht.patch(model, threads=args.threads, release_torch_weights=args.release, format=fmt)
            gc.collect()
            report[f"{path}_host_weight_bytes"] = ht.host_weight_bytes(model)
            report[f"{path}_kernel"] = model.model.layers[-1].mlp.experts.engine.kernel_name
            report[f"{path}_patch_rss_growth_bytes"] = rss_bytes() - before
        else:
            model.set_experts_implementation(path)
        report["paths"][path] = measure(model, timer, args.prompt, args.decode_steps, args.repeats)
        if path.startswith("hymoe") and not args.release:
            ht.unpatch(model)
            gc.collect()
        print(json.dumps({path: report["paths"][path]}), flush=True)
    report["unpatched_rss_bytes"] = unpatched_rss
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


def _cpu():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
