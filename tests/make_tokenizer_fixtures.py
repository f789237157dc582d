"""Make tests/data/tokenizers/: small byte-level BPE tokenizer.json files in the shapes of Qwen2's, Llama-3's and
SmolLM2's (their pre-tokenizers: a Split regex, or SmolLM2's single digits then GPT-2's regex; Qwen's NFC normalizer;
each family's special tokens), trained on a few texts; "smollm2_real" as the real SmolLM2's vocabulary is laid out
(its special tokens the vocabulary's first ids, 21 of the 256 single bytes missing); and the
ids Hugging Face's `tokenizers` gives a set of texts with each (expected_ids.json), which tests/test_hf.py compares
with plumbing/tokenizer.py's tokenizer_from_json. Run by hand where `tokenizers` is installed (not a dependency of
nanogrpo):

    python tests/make_tokenizer_fixtures.py [NAME ...]    # NAME: only those families, the others' files kept
"""

import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tokenizers")
CONTRACTIONS = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"""
QWEN_PAT = CONTRACTIONS + r"""\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # digits one by one
LLAMA3_PAT = CONTRACTIONS + r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # up to three
FAMILIES = {
    "qwen": (QWEN_PAT, True, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "llama3": (
        LLAMA3_PAT,
        False,
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    ),
    "smollm2": (None, False, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),  # Digits, then ByteLevel's own regex
    "smollm2_real": (None, False, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),  # specials first, bytes missing
}
MISSING = [4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)]  # the real SmolLM2's vocabulary lacks these
TRAIN = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "How many clips did Natalia sell altogether in April and May? The answer is 72.",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting.",
    "Betty is saving money for a new wallet which costs $100. She'll need 5 more; it's what we've said.",
    "Q: Ann has 3 pens, gets 2 more. How many pens now?\nA: 3+2=5\n#### 5\n",
    "Résumé: café, naïve, Ünïcödé — 日本語のテキスト, 中文文本, Ελληνικά, русский текст.\n\n\tIndented   spaces.",
    "def f(x):\n    return x ** 2  # 12345 67890 3.14159 -42 1,000,000\n",
]
TEXTS = TRAIN + [
    "",
    " ",
    "  leading",
    "trailing  ",
    "a\n\nb\r\nc",
    "Tom's dog; they'll go. I'd've SAID 'S",
    "12345678901234567890",
    "x=1+2*3/4",
    "$\\boxed{42}$",
    "😀 emoji 👍🏽 mix",
    "e\u0301 composed vs é",
    "Å vs A\u030a",
    "tabs\t\tand\u00a0nbsp",
    "a  1",
    "x 12  345\t6 7",
    "1's 2nd ³ ½ Ⅻ",
    "中文123abc",
    "<|im_end|> as text",
    "   \n   ",
    "What's 7×8? It's 56.",
    "Ünïcödé résumé naïve café",
    "The quick brown fox jumps over the lazy dog " * 3,
    "a\x04b !\x04! ..\x06.. a \x04b \x13\x14 x\U00050000y \x1d 1\x162",  # bytes the real SmolLM2 lacks
]


def build(name, pattern, nfc, specials):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC() if nfc else None
    if pattern is None:
        digits = pre_tokenizers.Digits(individual_digits=True)
        tok.pre_tokenizer = pre_tokenizers.Sequence([digits, pre_tokenizers.ByteLevel(add_prefix_space=False)])
    else:
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    first = []  # the special tokens as the vocabulary's first ids, as the real SmolLM2's
    if name == "smollm2_real":
        alphabet = [c for c in alphabet if byte_level_byte(c) not in MISSING]
        first = specials
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=alphabet, special_tokens=first)
    tok.train_from_iterator(TRAIN * 20, trainer)
    tok.add_special_tokens(specials)
    tok.save(os.path.join(HERE, f"{name}.json"))
    return {text: tok.encode(text, add_special_tokens=False).ids for text in TEXTS}


def byte_level_byte(c):
    """The byte a ByteLevel character stands for (GPT-2's table: printable Latin-1 as itself, the rest from 256 on)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in keep]
    return ord(c) if ord(c) in keep else rest[ord(c) - 256]


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    path = os.path.join(HERE, "expected_ids.json")
    expected = {}
    if len(sys.argv) > 1 and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            expected = json.load(f)
    names = sys.argv[1:] or list(FAMILIES)
    expected |= {name: build(name, *FAMILIES[name]) for name in names}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=0)
    print({name: len(ids) for name, ids in expected.items()})
