"""Benchmark, run by hand (not collected by pytest): tokens/s of the KV-cache sampler vs a naive loop.

    python tests/bench_sample.py        # 2 CPU cores: about 2 minutes, nearly all of it the naive loop
    python tests/bench_sample.py --device cuda --B 64 --G 8 --n_layer 12 --n_head 12 --n_embd 768

The naive loop reruns the whole sequence through the model for every new token, which
is what sampling costs without a cache. Both samplers draw all `new_tokens` for all B*G
rows (a random-init model almost never makes every row of a group emit EOS, and rows
that finished are still computed), so tokens/s counts B*G*T and both counts are equal.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root
from model import GPT, GPTConfig  # noqa: E402
from sample import generate, sample_token  # noqa: E402


@torch.no_grad()
def naive_generate(model, prompts, G, max_new_tokens, temperature=1.0, eos_id=256, generator=None):
    """The same sampling without a cache: every step is a full forward over (N, P+t)."""
    P, dev = max(len(p) for p in prompts), next(model.parameters()).device
    idx = torch.tensor([[eos_id] * (P - len(p)) + p for p in prompts], device=dev)  # (B, P)
    mask = torch.tensor([[False] * (P - len(p)) + [True] * len(p) for p in prompts], device=dev)  # (B, P)
    idx, mask = idx.repeat_interleave(G, 0), mask.repeat_interleave(G, 0)  # (N, P)
    for _ in range(max_new_tokens):
        tok, _ = sample_token(model(idx, mask)[:, -1], temperature, generator=generator)  # (N,)
        idx = torch.cat([idx, tok[:, None]], dim=1)  # (N, P+t+1)
        mask = torch.cat([mask, torch.ones_like(tok[:, None], dtype=torch.bool)], dim=1)  # (N, P+t+1)
    return idx


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def timed(fn, device):
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--B", type=int, default=16, help="prompts")
    ap.add_argument("--G", type=int, default=8, help="completions per prompt")
    ap.add_argument("--new_tokens", type=int, default=128)
    ap.add_argument("--n_layer", type=int, default=4)
    ap.add_argument("--n_embd", type=int, default=256)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--block_size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--skip_naive", action="store_true", help="time the KV-cache sampler only")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=args.block_size, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(cfg).to(device).eval()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (int(n),), generator=g).tolist()
               for n in torch.randint(8, 33, (args.B,), generator=g)]  # 8..32 tokens each
    N = args.B * args.G
    print(f"device {device}, threads {torch.get_num_threads()}, {cfg.n_layer} layers x {cfg.n_embd} wide "
          f"({model.num_params() / 1e6:.1f}M params), {args.B} prompts x G={args.G} = {N} rows, "
          f"{args.new_tokens} new tokens, prompts up to {max(map(len, prompts))} tokens")

    def run_kv():
        return generate(model, prompts, args.G, args.new_tokens, generator=torch.Generator(device).manual_seed(1))

    generate(model, prompts[:2], 2, 4)  # warm-up: first calls pay one-off allocation costs
    rollout, t_kv = timed(run_kv, device)
    n_kv = rollout.completion.numel()
    print(f"kv cache : {n_kv} tokens in {t_kv:7.2f} s = {n_kv / t_kv:9.0f} tokens/s")
    if args.skip_naive:
        return
    out, t_naive = timed(lambda: naive_generate(model, prompts, args.G, args.new_tokens,
                                                generator=torch.Generator(device).manual_seed(1)), device)
    n_naive = out[:, rollout.prompt_len:].numel()
    assert n_naive == n_kv, "every row emitted EOS before new_tokens: use more rows (--B, --G) so counts match"
    print(f"naive    : {n_naive} tokens in {t_naive:7.2f} s = {n_naive / t_naive:9.0f} tokens/s")
    print(f"speed-up : {t_naive / t_kv:.1f}x")


if __name__ == "__main__":
    main()
