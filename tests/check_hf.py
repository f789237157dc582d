"""A check run by hand where transformers is installed (not a dependency): random-weight Qwen2, Qwen3, Llama-3 (with
llama3 RoPE scaling), an untied Llama and a SmolLM2-shaped model, made and saved by transformers, then read by
checkpoint.load_model: logits on left-padded prompts within 1e-5 of transformers' in float32, the same greedy
tokens, and tests/data/tokenizers' tokenizer.json files giving the same ids as Hugging Face's `tokenizers` on
generated texts.

    python tests/check_hf.py            # prints one line per model and per tokenizer; exits 1 on a mismatch
"""

import json
import os
import random
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import transformers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from model import left_pad  # noqa: E402
from plumbing import checkpoint  # noqa: E402
from plumbing.tokenizer import encode_text, tokenizer_from_json  # noqa: E402
from sample import generate  # noqa: E402

TOKENIZERS = os.path.join(ROOT, "tests", "data", "tokenizers")
SIZES = dict(hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
SIZES |= dict(max_position_embeddings=256, vocab_size=576)  # the fixtures' 543 and 561 ids, the embedding padded past
LLAMA3_SCALING = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)
MODELS = {
    "qwen2": (transformers.Qwen2Config, dict(rope_theta=1e6, tie_word_embeddings=True), "qwen"),
    "qwen3": (transformers.Qwen3Config, dict(head_dim=32, rope_theta=1e6, tie_word_embeddings=True), "qwen"),
    "llama3 scaled": (
        transformers.LlamaConfig,
        dict(rope_theta=5e5, rope_scaling=LLAMA3_SCALING | dict(original_max_position_embeddings=32)),
        "llama3",
    ),
    "llama untied": (transformers.LlamaConfig, dict(tie_word_embeddings=False), "llama3"),
    "smollm2": (transformers.LlamaConfig, dict(rope_theta=1e5, tie_word_embeddings=True, rms_norm_eps=1e-5), "smollm2"),
}


def texts(n, seed=0):
    """n varied texts: words, numbers, punctuation, whitespace runs, accents (composed and not), CJK, emoji."""
    rng = random.Random(seed)
    pieces = "the answer is 42 . , ; ' 's 've I'd 12345 3.14 $ \\boxed{7} \n \n\n \t   café cafe\u0301".split(" ")
    pieces += "日本語 中文 😀 Ωμέγα".split(" ")
    pieces += [" ", "  ", "\r\n", "#### ", "×", "-", "ß", "İ", "ǅ"]
    return ["".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(0, 30))) for _ in range(n)]


def check_model(name, config_class, extra, tokenizer, folder):
    torch.manual_seed(0)
    config = config_class(**SIZES, **extra, eos_token_id=[1, 2])
    ref = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
    with torch.no_grad():  # random norms and biases too, so that every weight is exercised
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    ref.save_pretrained(folder)
    with open(os.path.join(TOKENIZERS, f"{tokenizer}.json"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text)
    model, enc, _ = checkpoint.load_model(folder)
    prompts = [[5, 9, 200, 17, 3, 44, 90], [7, 8], [100, 101, 102, 103]]
    idx, mask = left_pad(prompts, 0)
    with torch.no_grad():
        ours = model(idx, mask)
        theirs = ref(input_ids=idx, attention_mask=mask.long()).logits
    err = ((ours - theirs) * mask[..., None]).abs().max().item()  # padding positions are not compared
    gen = generate(model, prompts, 1, 12, temperature=0, eos_id=SIZES["vocab_size"] - 1)  # an id past the tokenizer
    same = True
    for row, p in enumerate(prompts):
        out = ref.generate(torch.tensor([p]), max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
        n = int(gen.lengths[row])  # 12, or up to and including that id if drawn
        same = same and out[0, len(p) : len(p) + n].tolist() == gen.completion[row, :n].tolist()
    print(f"{name:14s} logits max |diff| {err:.2e}  greedy {'same' if same else 'DIFFERENT'}")
    return err <= 1e-5 and same


def check_tokenizer(name, n=1000):
    theirs = Tokenizer.from_file(os.path.join(TOKENIZERS, f"{name}.json"))
    enc = tokenizer_from_json(os.path.join(TOKENIZERS, f"{name}.json"))
    sample = texts(n, seed=len(name))
    bad = [t for t in sample if encode_text(enc, t) != theirs.encode(t, add_special_tokens=False).ids]
    print(f"tokenizer {name}: {n - len(bad)}/{n} texts give the same ids" + (f"; first: {bad[0]!r}" if bad else ""))
    return not bad


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, (config_class, extra, tokenizer) in MODELS.items():
            ok = check_model(name, config_class, extra, tokenizer, os.path.join(tmp, name.replace(" ", "_"))) and ok
    for name in ("qwen", "llama3", "smollm2"):
        ok = check_tokenizer(name, 3000) and ok
    print(json.dumps({"all_equal": ok}))
    sys.exit(0 if ok else 1)
