"""One GRPO step of a Qwen2.5-0.5B-shaped model with random weights: the sampler's tokens/s and peak memory, then
train.py's step time and peak memory. The folder (config.json in Qwen2.5-0.5B-Instruct's shape, bf16 random weights,
the test tokenizer of tests/data/tokenizers with the embedding padded to 151,936 rows, generation_config.json) is
written here: no download. Random weights rarely stop, so nearly every completion runs to --new_tokens: a worst case.

    python tests/bench_llama.py --out OUT_DIR                  # on a GPU: B 64, G 8, 512 new tokens, bf16
    python tests/bench_llama.py --out OUT_DIR --tiny --device cpu   # the same path in seconds, sizes shrunk
    python tests/bench_llama.py --estimate                     # GPT.step_memory's estimates for those sizes only
"""

import argparse
import contextlib
import json
import os
import runpy
import shutil
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from model import GPT  # noqa: E402
from plumbing import checkpoint, hf  # noqa: E402
from plumbing.export import write_safetensors  # noqa: E402
from plumbing.tokenizer import TEMPLATES, encode_prompt, stop_ids  # noqa: E402
from sample import generate  # noqa: E402
from tasks.gsm8k import read_gsm8k  # noqa: E402

QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14)
QWEN25_05B |= dict(num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
TINY |= dict(num_key_value_heads=2, vocab_size=1024, max_position_embeddings=2048, rope_theta=1e6)
DATA = os.path.join(ROOT, "tests", "data", "gsm8k_sample.jsonl")


def write_folder(folder, shape, device):
    """A Qwen2 folder of `shape` with random bf16 weights, as Hugging Face lays it out."""
    os.makedirs(folder, exist_ok=True)
    config = dict(model_type="qwen2", hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True, **shape)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(dict(eos_token_id=[542, 540]), f)  # the test tokenizer's <|im_end|>, <|endoftext|>
    shutil.copy(os.path.join(ROOT, "tests", "data", "tokenizers", "qwen.json"), os.path.join(folder, "tokenizer.json"))
    cfg = hf.llama_config(config, "config.json")
    torch.manual_seed(0)
    with torch.device(device):
        model = GPT(cfg)
    tensors = {k: t.to(torch.bfloat16).contiguous() for k, t in hf.llama_tensors(model).items()}
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    return model.num_params()


def peak_gib(device):
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="a folder for the model and the run")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="a small shape and batch: checks the path, measures nothing")
    p.add_argument("--B", type=int, default=64)
    p.add_argument("--G", type=int, default=8)
    p.add_argument("--new_tokens", type=int, default=512)
    p.add_argument("--micro_batch", type=int, default=16, help="rows per forward/backward in the training step")
    p.add_argument("--estimate", action="store_true", help="print step_memory's (prompts of 256 tokens) and stop")
    args = p.parse_args()
    if args.estimate:
        config = dict(model_type="qwen2", hidden_act="silu", tie_word_embeddings=True, **QWEN25_05B)
        with torch.device("meta"):  # shapes only
            model = GPT(hf.llama_config(config, "config.json"))
        cols = 256 + args.new_tokens
        rows = args.B * args.G
        for micro in (rows, 64, 16):
            for bf16 in (True, False):
                need = model.step_memory(rows, micro, cols, args.new_tokens, ref=True, bf16=bf16)
                print(
                    f"{model.num_params() / 1e6:.0f}M parameters, {rows} rows of {cols} columns, "
                    f"--micro_batch {micro}, "
                    f"{'bf16' if bf16 else 'float32'}: about {need / 2**30:.1f} GiB"
                )
        return
    if args.out is None:
        p.error("--out is needed")
    if args.tiny:
        args.B, args.G, args.new_tokens, args.micro_batch = 2, 2, 16, 2
    folder = os.path.join(args.out, "qwen2.5-0.5b-random")
    n = write_folder(folder, TINY if args.tiny else QWEN25_05B, args.device)
    print(f"wrote {folder}: {n / 1e6:.0f}M parameters")

    model, enc, _ = checkpoint.load_model(folder, device=args.device)
    prompt = TEMPLATES["qwen2.5"]
    stops = stop_ids(model.config, enc, prompt)
    problems = read_gsm8k(DATA)
    prompts = [encode_prompt(enc, prompt, problems[i % len(problems)].question) for i in range(args.B)]
    bf16 = args.device == "cuda" and torch.cuda.is_bf16_supported()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with autocast:  # a first call pays one-time costs (kernels, allocator): not timed
        generate(model, prompts[:1], 1, 2, 1.0, eos_id=stops)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    t0 = time.time()
    with autocast:
        roll = generate(model, prompts, args.G, args.new_tokens, 1.0, eos_id=stops)
    if args.device == "cuda":
        torch.cuda.synchronize()
    dt = time.time() - t0
    tokens = int(roll.lengths.sum())
    print(
        json.dumps(
            dict(
                part="sampler",
                rows=args.B * args.G,
                tokens=tokens,
                seconds=round(dt, 2),
                tokens_per_s=round(tokens / dt),
                peak_gib=round(peak_gib(args.device), 2),
                bf16=bf16,
            )
        )
    )
    del model, roll
    if args.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()

    run = os.path.join(args.out, "run")
    shutil.rmtree(run, ignore_errors=True)
    flags = ["--init_from", folder, "--data", DATA, "--prompt", "qwen2.5", "--steps", "1", "--sft_steps", "0"]
    flags += ["--batch_prompts", str(args.B), "--G", str(args.G), "--max_new_tokens", str(args.new_tokens)]
    flags += ["--micro_batch", str(args.micro_batch), "--eval_size", "1", "--device", args.device, "--out_dir", run]
    sys.argv = ["train.py", *flags]
    try:
        runpy.run_path(os.path.join(ROOT, "train.py"), run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    step = next(json.loads(line) for line in open(os.path.join(run, "metrics.jsonl")) if '"train"' in line)
    print(
        json.dumps(
            dict(
                part="grpo_step",
                seconds=round(step["dt"], 2),
                tokens=int(step["num_tokens"]),
                tokens_per_s=round(step["tok_s"]),
                peak_gib=round(peak_gib(args.device), 2),
            )
        )
    )


if __name__ == "__main__":
    main()
