"""A check run by hand on a real pretrained Hugging Face folder (SmolLM2-135M-Instruct, say), where transformers and
tokenizers are installed (not dependencies of nanogrpo):

    python tests/check_real.py DIR [--texts 3000]

- token ids: plumbing/tokenizer.encode_text against the folder's tokenizer.json read by Hugging Face's `tokenizers`
  (add_special_tokens=False) on generated texts, GSM8K-style lines and texts holding bytes the vocabulary may lack;
- logits: plumbing/checkpoint.load_model against transformers on left-padded chat prompts (the folder's own
  format, found by its chat template), float32, padding positions not compared;
- greedy completions: sample.generate on the left-padded batch against transformers' generate, one prompt at a time;
- the export: plumbing/export.py writes the model as a Hugging Face folder; transformers loads it to the same logits,
  its tokenizer.json gives the same ids as the original's, and load_model reads it back bit for bit.
Prints one line per check and exits 1 on a mismatch.
"""

import argparse
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
from plumbing.checkpoint import load_model  # noqa: E402
from plumbing.export import export  # noqa: E402
from plumbing.tokenizer import encode_prompt, encode_text, stop_ids  # noqa: E402
from sample import generate  # noqa: E402

QUESTIONS = [
    "What is 2 + 3?",
    "Ann has 7 pens, gives away 4. How many pens now?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips "
    "did Natalia sell altogether in April and May?",
    "Using the numbers [3, 5, 7], make 22.",
]


def texts(n, seed=0):
    """n varied texts: words, numbers, punctuation, whitespace runs, accents, CJK, emoji, control characters, and
    GSM8K's questions and solutions. No special token's text: Hugging Face's tokenizers reads it as the special,
    encode_text as text (plumbing/tokenizer.encode_prompt says why)."""
    rng = random.Random(seed)
    pieces = "the answer is 42 . , ; ' 's 've I'd 12345 3.14 $ \\boxed{7} \n \n\n \t   café cafe\u0301".split(" ")
    pieces += "日本語 中文 😀 Ωμέγα".split(" ")
    pieces += [" ", "  ", "\r\n", "#### ", "×", "-", "ß", "İ", "ǅ", "<|im", "end|>", "<<48/2=24>>"]
    pieces += ["\x04", "\x06", "\x13", "\x14", "\x16", "\x1d", "!\x04!", "..\x06..", "\U00050000", "\x00", "\x7f"]
    out = ["".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(0, 30))) for _ in range(n)]
    with open(os.path.join(ROOT, "tests", "data", "gsm8k_sample.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out += [row["question"], row["answer"]]
    return out


def same_ids(enc, tok, sample):
    """(texts giving the same ids, the first that does not)."""
    bad = [t for t in sample if encode_text(enc, t) != tok.encode(t, add_special_tokens=False).ids]
    return len(sample) - len(bad), bad[:1]


def logit_gap(model, ref, prompts):
    idx, mask = left_pad(prompts, 0)
    with torch.no_grad():
        ours = model(idx, mask)
        positions = (mask.long().cumsum(1) - 1).clamp(min=0)  # (N, L) as model.py's: from each row's first token
        theirs = ref(input_ids=idx, attention_mask=mask.long(), position_ids=positions).logits
    return ((ours - theirs) * mask[..., None]).abs().max().item()  # padding positions are not compared


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="a Hugging Face folder of the Llama family")
    p.add_argument("--texts", type=int, default=3000)
    p.add_argument("--new_tokens", type=int, default=48)
    args = p.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    ok = True
    model, enc, prompt = load_model(args.dir)
    tok = Tokenizer.from_file(os.path.join(args.dir, "tokenizer.json"))
    sample = texts(args.texts)
    n, bad = same_ids(enc, tok, sample)
    ok = ok and not bad
    print(f"token ids: {n}/{len(sample)} texts give Hugging Face's ids" + (f"; first: {bad[0]!r}" if bad else ""))

    ref = transformers.AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32).eval()
    prompts = [encode_prompt(enc, prompt, q) for q in QUESTIONS]
    gap = logit_gap(model, ref, prompts)
    ok = ok and gap <= 1e-4
    print(f"logits on {len(prompts)} left-padded chat prompts: max |diff| {gap:.2e}")
    stops = stop_ids(model.config, enc, prompt)
    with torch.no_grad():
        roll = generate(model, prompts, 1, args.new_tokens, temperature=0, eos_id=stops)
    same = 0
    for row, q in enumerate(prompts):
        out = ref.generate(torch.tensor([q]), max_new_tokens=args.new_tokens, do_sample=False, eos_token_id=stops)
        n = int(roll.lengths[row])
        same += out[0, len(q) :].tolist() == roll.completion[row, :n].tolist()
        if row == 0:
            print("greedy answer to", repr(QUESTIONS[0]), "->", repr(enc.decode(roll.completion[row, :n].tolist())))
    ok = ok and same == len(prompts)
    print(f"greedy completions equal transformers' on {same}/{len(prompts)} left-padded chat prompts")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "export")
        export(model, enc, prompt, out)
        back, enc_back, prompt_back = load_model(out)
        bits = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
        bits = bits and enc_back._mergeable_ranks == enc._mergeable_ranks and prompt_back == prompt
        exported = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
        gap = logit_gap(model, exported, prompts)
        n, bad = same_ids(enc, Tokenizer.from_file(os.path.join(out, "tokenizer.json")), sample)
        hf_tok = transformers.AutoTokenizer.from_pretrained(out)
        chat = hf_tok.apply_chat_template([{"role": "user", "content": QUESTIONS[1]}], tokenize=False)
        rendered = chat == prompt.replace("{question}", QUESTIONS[1])
        ok = ok and bits and gap <= 1e-4 and not bad and rendered
        print(f"export: load_model bit for bit {bits}; transformers' logits max |diff| {gap:.2e}; its tokenizer.json")
        print(
            f"  gives the original's ids on {n}/{len(sample)} texts; its chat template renders the prompt: {rendered}"
        )
    print(json.dumps({"all_equal": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
