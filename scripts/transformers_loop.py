"""Record -> plan -> run, end to end on a transformers model: generate with every MoE block patched and recording,
plan a GPU-expert budget from those counts with hymoe's planner, patch again with the plan (the planned experts in
PyTorch, the rest in hymoe), generate on other prompts and report the realized hit rate beside the plan's
in-sample prediction. The greedy tokens of the planned run are checked against the all-hymoe run's.

  build/pypi-venv/bin/python scripts/transformers_loop.py --family qwen3_moe --budget 0.25 --out build/loop

(PYTHONPATH=python:python/tests/hf_transformers HYMOE_EXTENSION_DIR=build/release/python). The model is one of the
tiny random models of python/tests/hf_transformers/tiny_models.py (no downloads here), or, with --model DIR, a model
directory transformers loads. --out keeps the counts, the trace and PLAN.json for `hymoe stats`, `plan`, `replay`.
"""

import argparse
import json
import os

import torch

import hymoe.placement as placement
import hymoe.transformers as ht


def load(args):
    if args.model:
        import transformers

        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype="auto").eval()
        return model, args.model
    import tiny_models

    return tiny_models.build(args.family), None


def generate(model, prompts, new_tokens):
    with torch.inference_mode():
        return [model.generate(p, max_new_tokens=new_tokens, do_sample=False) for p in prompts]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="qwen3_moe", help="a tiny_models family (without --model)")
    p.add_argument("--model", help="a model directory instead of a tiny random model")
    p.add_argument("--budget", type=float, default=0.25, help="share of the routed experts planned for the GPU")
    p.add_argument("--strategy", default="frequency", help="hymoe plan's strategy")
    p.add_argument("--prompts", type=int, default=8, help="prompts recorded, and as many held out")
    p.add_argument("--prompt-length", type=int, default=24)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--out", default="build/transformers-loop")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    model, checkpoint = load(args)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(11)
    prompts = [torch.randint(3, vocab, (1, args.prompt_length), generator=g) for _ in range(2 * args.prompts)]
    recorded, held_out = prompts[:args.prompts], prompts[args.prompts:]

    # 1. Record: every expert in hymoe, counts and the per-token trace.
    ht.patch(model, checkpoint=checkpoint, record_trace=True)
    generate(model, recorded, args.new_tokens)
    train = ht.counts(model)
    ht.write_counts(model, os.path.join(args.out, "counts.json"))
    ht.write_counts(model, os.path.join(args.out, "logical_count.pt"))
    ht.write_trace(model, os.path.join(args.out, "trace.csv"))
    reference = generate(model, held_out, args.new_tokens)
    ht.unpatch(model)

    # 2. Plan a GPU budget from the recorded counts.
    layers, experts = train.shape
    budget = max(1, round(args.budget * layers * experts))
    mask, report, _ = placement.plan(train.to(torch.float64).numpy(), budget, args.strategy)
    plan_path = os.path.join(args.out, "PLAN.json")
    with open(plan_path, "w") as f:
        json.dump({"format": "hymoe.placement.v1", "mask": mask.astype(int).tolist(), "report": report}, f)
    predicted = placement.evaluate(mask, train.to(torch.float64).numpy())["hit_rate"]

    # 3. Run with the plan: the planned experts in PyTorch, the rest in hymoe.
    ht.patch(model, checkpoint=checkpoint, gpu_experts_mask=plan_path)
    got = generate(model, held_out, args.new_tokens)
    run = ht.counts(model)
    realized = placement.evaluate(mask, run.to(torch.float64).numpy())["hit_rate"]
    same = all(torch.equal(a, b) for a, b in zip(got, reference))
    ht.unpatch(model)

    result = {"model": args.model or f"tiny random {args.family}", "moe_layers": layers, "experts": experts,
              "budget_experts": budget, "strategy": args.strategy, "predicted_hit_rate": predicted,
              "realized_hit_rate": realized, "random_hit_rate": budget / (layers * experts),
              "recorded_pairs": int(train.sum()), "run_pairs": int(run.sum()), "same_greedy_tokens": same,
              "files": sorted(os.listdir(args.out))}
    print(json.dumps(result, indent=1))
    if not same:
        raise SystemExit("the planned run's greedy tokens differ from the all-hymoe run's")


if __name__ == "__main__":
    main()
