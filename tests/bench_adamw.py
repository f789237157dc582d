"""Benchmark, run by hand (not collected by pytest): torch's three AdamW implementations on the CPU, for train.py's
GRPO optimizer (betas 0.9, 0.95, no weight decay): the for-loop (torch's default on the CPU), foreach and fused, each
on its own copy of the same model and gradients, stepped in turn (the order reversed every other round); printed:
each one's median CPU seconds a step, the median of the per-round ratios for-loop / it, and whether its weights after
the rounds equal the for-loop's bit for bit (train.py keeps the default command's log unchanged only if they do).

    python tests/bench_adamw.py                  # the default command's model (0.51M parameters), one thread
    python tests/bench_adamw.py --model smollm2  # SmolLM2-135M's shape, random weights
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from model import GPT, GPTConfig  # noqa: E402

MODELS = {
    "default": GPTConfig(vocab_size=392, n_layer=4, n_head=4, n_embd=96),
    "smollm2": GPTConfig(vocab_size=49152, n_layer=30, n_head=9, n_embd=576, arch="llama", n_kv_head=3, mlp_size=1536),
}
KINDS = {"for-loop": dict(foreach=False), "foreach": dict(foreach=True), "fused": dict(fused=True)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="default", choices=MODELS)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="torch's threads")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    runs = {}
    for kind, options in KINDS.items():
        torch.manual_seed(0)
        model = GPT(MODELS[args.model])
        for q in model.parameters():
            q.grad = torch.randn_like(q) * 1e-3
        runs[kind] = (
            model,
            torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), weight_decay=0.0, **options),
        )
        runs[kind][1].step()  # the moments are allocated in the first step: not timed
    times = {kind: [] for kind in KINDS}
    for r in range(args.rounds):
        for kind in list(KINDS) if r % 2 == 0 else list(KINDS)[::-1]:
            t0 = time.process_time()
            runs[kind][1].step()
            times[kind].append(time.process_time() - t0)
    loop = runs["for-loop"][0].parameters()
    weights = [q.detach() for q in loop]
    for kind in KINDS:
        same = all(torch.equal(a, b.detach()) for a, b in zip(weights, runs[kind][0].parameters()))
        ratio = statistics.median(a / b for a, b in zip(times["for-loop"], times[kind]))
        print(
            f"{args.model} {kind}: {statistics.median(times[kind]):.4f} CPU-s a step, for-loop / it {ratio:.2f}, ",
            end="",
        )
        print(f"weights {'equal' if same else 'NOT equal'} to the for-loop's")


if __name__ == "__main__":
    main()
