"""Benchmark, run by hand (not collected by pytest): tokens/s of the samplers in sample.py and of a naive loop.

    python tests/bench_sample.py                          # CPU: plain and static, then the naive loop
    python tests/bench_sample.py --device cuda --B 64     # CUDA: plain, static and graph, bf16 autocast

Each decoder (sample.generate's `decode`: plain, static, graph on CUDA) runs once to warm up
and then `--repeat` times, timed; the best run counts. A CUDA graph is captured inside every
generate call, so its capture is part of the time, as in training. The naive loop reruns the
whole sequence through the model for every new token: what sampling costs without a cache.
All samplers draw `new_tokens` for all B*G rows (a random-init model almost never makes every
row of a group emit EOS, and rows that finished are still computed), so tokens/s counts B*G*T.
"""

import argparse
import os
import sys
import time
from contextlib import nullcontext

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


def timed(fn, device, repeat):
    """fn's result and its best wall time over `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return out, best


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
    ap.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="autocast dtype (auto: bf16 on CUDA where supported, as train.py)",
    )
    ap.add_argument("--decoders", default="auto", help="comma-separated (auto: plain,static, and graph on CUDA)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per sampler; the best counts")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--skip_naive", action="store_true", help="time the KV-cache samplers only")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.decoders == "auto":
        decoders = ["plain", "static"] + (["graph"] if device.type == "cuda" else [])
    else:
        decoders = args.decoders.split(",")
    bf16_here = device.type == "cuda" and torch.cuda.is_bf16_supported()
    bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and bf16_here)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=args.block_size, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(cfg).to(device).eval()
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(8, 33, (args.B,), generator=g).tolist()  # (B,) 8..32 tokens each
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in lengths]
    N = args.B * args.G
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(
        f"device {device} ({name}), torch {torch.__version__}, {'bf16 autocast' if bf16 else 'float32'}, "
        f"{cfg.n_layer} layers x {cfg.n_embd} wide ({model.num_params() / 1e6:.1f}M params), "
        f"{args.B} prompts x G={args.G} = {N} rows, {args.new_tokens} new tokens, "
        f"prompts up to {max(map(len, prompts))} tokens"
    )

    def run(decode):
        gen = torch.Generator(device).manual_seed(1)
        with autocast:
            return generate(model, prompts, args.G, args.new_tokens, decode=decode, generator=gen)

    results, first = {}, None
    for decode in decoders:
        run(decode)  # warm-up: first calls pay one-off costs (allocator, library handles)
        rollout, seconds = timed(lambda: run(decode), device, args.repeat)
        n = rollout.completion.numel()
        results[decode] = n / seconds
        first = first or rollout
        same = "same tokens as " + decoders[0] if torch.equal(rollout.tokens, first.tokens) else "other tokens"
        print(
            f"{decode:7s}: {n} tokens in {seconds:7.3f} s = {n / seconds:9.0f} tokens/s"
            f"  ({n / seconds / results[decoders[0]]:.2f}x {decoders[0]}; {same})",
            flush=True,
        )
    if not args.skip_naive:
        gen = torch.Generator(device).manual_seed(1)
        with autocast:
            out, seconds = timed(
                lambda: naive_generate(model, prompts, args.G, args.new_tokens, generator=gen), device, 1
            )
        n = out[:, first.prompt_len :].numel()
        assert n == first.completion.numel(), "every row emitted EOS before new_tokens: use more rows (--B, --G)"
        faster = ", ".join(f"{d} {results[d] * seconds / n:.0f}x faster" for d in results)
        print(f"naive  : {n} tokens in {seconds:7.3f} s = {n / seconds:9.0f} tokens/s  ({faster})")


if __name__ == "__main__":
    main()
