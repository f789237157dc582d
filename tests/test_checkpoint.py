"""plumbing/checkpoint.py, hf.py, export.py: GPT-2 in Hugging Face's layout, nanogrpo checkpoints, bad files, atomic
saves, the gpt2 tokenizer, the export to Hugging Face's layout.

Everything is written here, small and random: no network and no downloaded weights. The files follow Hugging Face's
GPT-2 layout: names without "transformer." (safetensors) or with it (pytorch_model.bin), Conv1D weights stored (in,
out), the causal-mask buffers h.N.attn.bias / h.N.attn.masked_bias, a config.json and a vocab.json. An export is read
back without transformers: by load_model, by GPT-2 computed from its tensors, and its merges.txt by a byte-level BPE
as Hugging Face's (hf_bpe). Set NANOGRPO_GPT2 to a folder holding the real GPT-2 files to also check those."""

import errno
import json
import math
import os
import pickle
import re
import runpy
import struct
import subprocess
import sys
import warnings

import pytest
import tiktoken
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, left_pad
from plumbing import checkpoint, hf
from plumbing import export as hf_export
from plumbing.checkpoint import TRAIN_KEYS, RunDir, digest, load_checkpoint, load_model, restore, save_checkpoint
from plumbing.export import GPT2_FILES
from plumbing.files import LoadError
from plumbing.hf import read_safetensors
from plumbing.tokenizer import GPT2_PAT, PROMPT, byte_tokenizer, frequent_words, get_tokenizer, gpt2_byte_chars
from tasks import Arithmetic

MERGES = ["aa", "Ġa", "Ġaa", "ĠĠ", "ĊĊ"]  # GPT-2's spelling: Ġ is the space byte, Ċ the newline byte
V = 256 + len(MERGES) + 1  # bytes, merges, <|endoftext|>
CFG = GPTConfig(block_size=32, vocab_size=V, n_layer=2, n_head=2, n_embd=128)  # heads 64 wide, as GPT-2's
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def export_hf(ckpt, folder):
    """`python -m plumbing.export CKPT DIR` without the command line: load, then export."""
    hf_export.export(*load_model(ckpt), folder)


ST_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def byte_chars():
    """GPT-2's byte -> character table, written as tiktoken's loader writes it: printable non-space bytes keep
    their character, the rest become chr(256 + n) in byte order; dict order = the ids of GPT-2's vocab.json."""
    table = {b: chr(b) for b in range(256) if chr(b).isprintable() and b != ord(" ")}
    rest = [b for b in range(256) if b not in table]
    return {**table, **{b: chr(256 + n) for n, b in enumerate(rest)}}


def write_vocab(folder, merges=MERGES):
    """A tiny GPT-2 vocab.json: the 256 byte tokens with GPT-2's own ids, five merges, then <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(byte_chars().values())}
    for m in merges:
        vocab[m] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")


def write_config(folder, **changes):
    """config.json with the fields GPT-2's own files have."""
    cfg = {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "bos_token_id": V - 1,
        "eos_token_id": V - 1,
        "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2",
        "n_ctx": CFG.block_size,
        "n_embd": CFG.n_embd,
        "n_head": CFG.n_head,
        "n_layer": CFG.n_layer,
        "n_positions": CFG.block_size,
        "vocab_size": V,
        **changes,
    }
    (folder / "config.json").write_text(json.dumps(cfg))


def write_safetensors(path, tensors):
    """A .safetensors file: 8-byte little-endian header length, JSON header padded to 8 bytes, raw data."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {
            "dtype": ST_DTYPE[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def reference(seed=0, cfg=CFG):
    """A GPT with every number random (biases and LayerNorm too), so that a dropped or swapped tensor shows."""
    torch.manual_seed(seed)
    model = GPT(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def hf_tensors(model, prefix="", lm_head=False):
    """The model's numbers in Hugging Face's GPT-2 layout: Conv1D weights (in, out), the causal-mask buffers."""
    out = {}
    for name, t in model.state_dict().items():
        if name != "lm_head.weight":
            short = name.removeprefix("transformer.")
            out[prefix + short] = t.t().contiguous() if short.endswith(CONV1D) else t.clone()
    P = model.config.block_size
    for i in range(model.config.n_layer):
        out[f"{prefix}h.{i}.attn.bias"] = torch.ones(P, P).tril().view(1, 1, P, P)  # (1, 1, P, P) the mask
        out[f"{prefix}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    if lm_head:
        out["lm_head.weight"] = model.state_dict()["lm_head.weight"].clone()
    return out


def gpt2_folder(tmp_path, fmt="safetensors", dtype=torch.float32, config=True, edit=None):
    """A folder with a random GPT-2 in Hugging Face's layout; returns (folder, the reference GPT of its numbers)."""
    ref = reference()
    if dtype != torch.float32:  # the reference holds the numbers as the file stores them
        with torch.no_grad():
            for p in ref.parameters():
                p.copy_(p.to(dtype).float())
    folder = tmp_path / "gpt2"
    folder.mkdir()
    write_vocab(folder)
    if config:
        write_config(folder)
    if fmt == "safetensors":
        tensors = {k: v.to(dtype) for k, v in hf_tensors(ref).items()}
        if edit:
            edit(tensors)
        write_safetensors(folder / "model.safetensors", tensors)
    else:  # pytorch_model.bin as GPT2LMHeadModel saves it: "transformer." names and the tied lm_head.weight
        tensors = hf_tensors(ref, prefix="transformer.", lm_head=True)
        if edit:
            edit(tensors)
        torch.save(tensors, folder / "pytorch_model.bin", _use_new_zipfile_serialization=(fmt == "bin"))
    return folder, ref


def gpt2_forward(hf, idx, n_head):
    """GPT-2 computed straight from Hugging Face's tensors, as its Conv1D layers do: x @ W + b with W (in, out)."""
    N, L = idx.shape
    C = hf["wte.weight"].shape[1]
    D = C // n_head
    n_layer = len({k.split(".")[1] for k in hf if k.startswith("h.")})
    ln = lambda x, p: F.layer_norm(x, (C,), hf[p + ".weight"], hf[p + ".bias"], eps=1e-5)  # noqa: E731
    conv = lambda x, p: x @ hf[p + ".weight"] + hf[p + ".bias"]  # noqa: E731
    gelu = lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))  # noqa: E731
    future = torch.ones(L, L, dtype=torch.bool).triu(1)  # (L, L) True where a key comes after the query
    x = hf["wte.weight"][idx] + hf["wpe.weight"][:L]  # (N, L, C)
    for i in range(n_layer):
        q, k, v = conv(ln(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn").split(C, dim=-1)  # (N, L, C) each
        q, k, v = (t.view(N, L, n_head, D).transpose(1, 2) for t in (q, k, v))  # (N, H, L, D)
        att = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(future, float("-inf")).softmax(-1)  # (N, H, L, L)
        x = x + conv((att @ v).transpose(1, 2).reshape(N, L, C), f"h.{i}.attn.c_proj")
        x = x + conv(gelu(conv(ln(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc")), f"h.{i}.mlp.c_proj")
    return ln(x, "ln_f") @ hf["wte.weight"].T  # (N, L, V): the head is tied to wte


# ----------------------------------------------------------------------------- GPT-2 files


@pytest.mark.parametrize(
    "fmt,dtype",
    [
        ("safetensors", torch.float32),
        ("safetensors", torch.float16),
        ("safetensors", torch.bfloat16),
        ("bin", torch.float32),
        ("bin-legacy", torch.float32),
    ],
)
def test_gpt2_file_loads_to_the_logits_of_the_same_numbers(tmp_path, fmt, dtype):
    folder, ref = gpt2_folder(tmp_path, fmt, dtype)
    model, enc, prompt = load_model(folder)
    idx = torch.randint(0, V, (3, 20), generator=torch.Generator().manual_seed(0))  # (N, L)
    with torch.no_grad():
        assert torch.equal(model(idx), ref(idx))
    assert model.config == CFG and not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.lm_head.weight is model.transformer.wte.weight
    assert enc.name == "gpt2" and enc.n_vocab == V and enc.eot_token == V - 1 and prompt == PROMPT


def test_gpt2_file_matches_gpt2_computed_from_its_own_tensors(tmp_path):
    """Transposed Conv1D, tanh GELU, LayerNorm eps 1e-5, 1/sqrt(D), the tied head: GPT-2's function, not ours."""
    folder, _ = gpt2_folder(tmp_path)
    model, _, _ = load_model(folder / "model.safetensors")  # a file path works as well as its folder
    hf = {k: v.clone() for k, v in read_safetensors(folder / "model.safetensors").items()}
    idx = torch.randint(0, V, (2, CFG.block_size), generator=torch.Generator().manual_seed(1))  # (N, L)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), gpt2_forward(hf, idx, CFG.n_head), atol=1e-5, rtol=0)


def test_gpt2_without_config_json_infers_the_config(tmp_path):
    folder, ref = gpt2_folder(tmp_path, config=False)
    os.rename(folder / "model.safetensors", folder / "weights")  # recognised by its content, not its name
    model, _, _ = load_model(folder / "weights")
    assert model.config == CFG  # n_head = n_embd // 64
    idx = torch.randint(0, V, (2, 9))
    with torch.no_grad():
        assert torch.equal(model(idx), ref(idx))


def test_loaded_gpt2_left_padding_and_kv_cache_match_the_full_forward(tmp_path):
    folder, _ = gpt2_folder(tmp_path)
    model, enc, _ = load_model(folder)
    seqs = [enc.encode(t) for t in ("aa a", "Hello there, aa aa!", "\n\n  x")]
    idx, mask = left_pad(seqs, enc.eot_token)  # (N, P)
    steps = torch.randint(0, V, (3, 5), generator=torch.Generator().manual_seed(2))  # (N, T) fed one at a time
    full_idx = torch.cat([idx, steps], dim=1)  # (N, P+T)
    full_mask = torch.cat([mask, torch.ones_like(steps, dtype=torch.bool)], dim=1)  # (N, P+T)
    with torch.no_grad():
        batched = model(idx, mask)
        for n, s in enumerate(seqs):
            torch.testing.assert_close(batched[n, -len(s) :], model(torch.tensor([s]))[0], atol=1e-5, rtol=0)
        full = model(full_idx, full_mask)  # (N, P+T, V)
        cache = model.new_cache(full_idx.shape[1])
        pieces = [model(idx, mask, cache=cache)] + [model(steps[:, t : t + 1], cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(pieces, dim=1)[full_mask], full[full_mask], atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- nanogrpo checkpoints


def test_checkpoint_round_trip_rebuilds_model_tokenizer_and_prompt(tmp_path):
    cfg = GPTConfig(block_size=48, vocab_size=257, n_layer=3, n_head=2, n_embd=32)  # none of the defaults
    model = reference(1, cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randint(0, 257, (2, 8))).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    save_checkpoint(
        path,
        model,
        get_tokenizer("bytes"),
        prompt="Question: {question}\nAnswer:",
        step=7,
        optimizer=opt.state_dict(),
        args={"lr": 0.1, "G": 8},
    )
    assert os.listdir(tmp_path) == ["ckpt.pt"]
    loaded, enc, prompt = load_model(path)  # no flag, no config: the file says it all
    idx = torch.randint(0, 257, (2, 30))
    with torch.no_grad():
        assert torch.equal(loaded(idx), model.eval()(idx))
    assert loaded.config == cfg and enc.name == "bytes" and enc.eot_token == 256
    assert prompt == "Question: {question}\nAnswer:"
    ckpt = load_checkpoint(path)
    assert ckpt["step"] == 7 and ckpt["args"] == {"lr": 0.1, "G": 8}
    again = torch.optim.AdamW(loaded.parameters(), lr=0.1)
    again.load_state_dict(ckpt["optimizer"])  # the optimizer's state comes back whole
    assert torch.equal(again.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_checkpoint_keeps_a_words_tokenizer_whole(tmp_path):
    enc = byte_tokenizer([b" stamps", b" gives", b"####"])  # train.py's from-scratch kind: bytes and a task's words
    model = reference(0, GPTConfig(block_size=8, vocab_size=enc.n_vocab, n_layer=1, n_head=1, n_embd=8))
    save_checkpoint(tmp_path / "w.pt", model, enc)
    _, again, _ = load_model(tmp_path / "w.pt")
    text = "Q: Mia has 7 stamps, gives away 3.\nA: 7-3=4\n#### 4"
    assert again.name == "words" and again.n_vocab == enc.n_vocab and again.encode(text) == enc.encode(text)
    assert len(again.encode(" stamps")) == 1 and again.eot_token == enc.eot_token


def test_checkpoint_of_a_gpt2_model_finds_its_tokenizer_beside_it(tmp_path):
    folder, _ = gpt2_folder(tmp_path)
    model, enc, _ = load_model(folder)
    save_checkpoint(folder / "tuned.pt", model, enc)
    again, enc2, prompt = load_model(folder / "tuned.pt")
    assert enc2.name == "gpt2" and enc2.encode(" aa\n\n") == enc.encode(" aa\n\n") and prompt == PROMPT
    assert torch.equal(again.transformer.h[1].mlp.c_fc.weight, model.transformer.h[1].mlp.c_fc.weight)


def test_save_checkpoint_refuses_what_it_could_not_load_back(tmp_path):
    model = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    enc = get_tokenizer("bytes")
    for kwargs in ({"prompt": "no placeholder"}, {"config": {}}, {"digest": "x"}):
        with pytest.raises(ValueError):
            save_checkpoint(tmp_path / "c.pt", model, enc, **kwargs)
    with pytest.raises(ValueError):
        save_checkpoint(tmp_path / "c.pt", model, "cl100k_base")
    with pytest.raises(ValueError):  # its ranks are in its Encoding, not in its name
        save_checkpoint(tmp_path / "c.pt", model, "words")
    assert os.listdir(tmp_path) == []


def test_load_error_is_one_line():
    assert str(LoadError("x.pt: first\nsecond\r\nthird")) == "x.pt: first second third"


def test_restore_says_what_does_not_fit(tmp_path):
    small = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    other = GPT(GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=16))
    with pytest.raises(LoadError, match=r"warm\.pt does not fit this model \(size mismatch .*--n_layer"):
        restore(other, small.state_dict(), "warm.pt")
    with pytest.raises(LoadError, match="warm.pt does not fit"):
        restore(other, [torch.ones(2)], "warm.pt")
    bad = small.state_dict()
    bad["transformer.ln_f.bias"] = torch.full_like(bad["transformer.ln_f.bias"], float("nan"))
    with pytest.raises(LoadError, match="warm.pt holds non-finite weights"):
        restore(GPT(small.config), bad, "warm.pt")


# ----------------------------------------------------------------------------- bad files: one line, naming the file


def small_checkpoint(path, **state_edits):
    model = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    with torch.no_grad():
        for name, value in state_edits.items():
            model.state_dict()[name].fill_(value)
    save_checkpoint(path, model, get_tokenizer("bytes"))
    return model


def flipped_bit(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = small_checkpoint(path)
    data = bytearray(path.read_bytes())
    raw = model.state_dict()["transformer.h.0.mlp.c_fc.weight"].numpy().tobytes()
    at = data.find(raw)
    assert at > 0
    data[at + len(raw) // 2] ^= 0x04  # one bit of one weight
    path.write_bytes(bytes(data))
    return path


def cut_in_half(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def torch_file(tmp_path, obj):
    torch.save(obj, tmp_path / "x.pt")
    return tmp_path / "x.pt"


def words_checkpoint(tmp_path, edit):
    """A checkpoint of a "words" tokenizer whose ranks `edit` changed (dict -> dict or None), signed anew."""
    enc = byte_tokenizer([b" stamps"])
    cfg = GPTConfig(block_size=8, vocab_size=enc.n_vocab, n_layer=1, n_head=1, n_embd=8)
    save_checkpoint(tmp_path / "w.pt", reference(0, cfg), enc)
    ckpt = torch.load(tmp_path / "w.pt", weights_only=True)
    ckpt["tokenizer_ranks"] = edit(ckpt["tokenizer_ranks"])
    return torch_file(tmp_path, signed({k: v for k, v in ckpt.items() if k != "digest"}))


def signed(ckpt):
    """A crafted checkpoint with a valid digest, so that the check after the digest's is the one that fires."""
    return {**ckpt, "digest": digest(ckpt)}


def raw_file(tmp_path, data, name="x.pt"):
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


def safetensors_header(tmp_path, header, data=b""):
    h = json.dumps(header).encode()
    return raw_file(tmp_path, struct.pack("<Q", len(h)) + h + data, "model.safetensors")


def edited_config(tmp_path, **changes):
    folder, _ = gpt2_folder(tmp_path)
    write_config(folder, **changes)
    return folder


def small_state(tmp_path):
    """A bare state dict of this model (nn.Linear layout), as torch.save(model.state_dict()) writes it."""
    return torch_file(
        tmp_path, reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8)).state_dict()
    )


def renamed(tensors, old, new):
    tensors[new] = tensors.pop(old)


def replaced(name, value):
    return lambda d: gpt2_folder(d, edit=lambda tensors: tensors.update({name: value}))[0]


def st_entry(dtype, shape, offsets, data):
    """A safetensors file holding one tensor entry, wte.weight, with these header fields."""
    return lambda d: safetensors_header(
        d, {"wte.weight": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}, data
    )


BAD = {  # name: (make the file in tmp_path, a piece of the message that shows the right check fired)
    "missing": (lambda d: d / "nothing.pt", "no such file"),
    "empty": (lambda d: raw_file(d, b""), "empty"),
    "one byte": (lambda d: raw_file(d, b"a"), "cannot read"),
    "short text": (lambda d: raw_file(d, b"hello, this is not a checkpoint\n"), "cannot read"),
    "truncated checkpoint": (lambda d: (small_checkpoint(d / "x.pt"), cut_in_half(d / "x.pt"))[1], "cannot read"),
    "dict without keys": (lambda d: torch_file(d, {"step": 3, "lr": 0.1}), "neither"),
    "list of tensors": (lambda d: torch_file(d, [torch.ones(2), torch.zeros(3)]), "neither"),
    "checkpoint without config": (
        lambda d: torch_file(d, {"model": {"w": torch.ones(1)}, "tokenizer": "bytes", "prompt": PROMPT}),
        "lacks config",
    ),
    "checkpoint with a bad config": (
        lambda d: torch_file(
            d,
            signed({"model": {"w": torch.ones(1)}, "tokenizer": "bytes", "prompt": PROMPT, "config": {"n_layer": -1}}),
        ),
        "not a GPTConfig",
    ),
    "checkpoint with an unknown tokenizer": (
        lambda d: torch_file(
            d, signed({"model": {"w": torch.ones(1)}, "config": {}, "tokenizer": "cl100k_base", "prompt": PROMPT})
        ),
        "tokenizer",
    ),
    "words tokenizer without its ranks": (lambda d: words_checkpoint(d, lambda r: None), "ranks are not"),
    "words tokenizer with an id twice": (lambda d: words_checkpoint(d, lambda r: {**r, b"xyz": 0}), "ranks are not"),
    "words tokenizer without a byte": (lambda d: words_checkpoint(d, lambda r: r.pop(b"a") and r), "ranks are not"),
    "flipped bit": (flipped_bit, "digest"),
    "non-finite weights": (
        lambda d: (small_checkpoint(d / "x.pt", **{"transformer.h.0.ln_1.bias": float("inf")}), d / "x.pt")[1],
        "non-finite",
    ),
    "bare state dict": (small_state, "nn.Linear layout"),
    "gpt2 wrong shape": (
        replaced("h.1.mlp.c_fc.weight", torch.zeros(128, 384)),
        "h.1.mlp.c_fc.weight has shape (128, 384)",
    ),
    "gpt2 missing tensor": (lambda d: gpt2_folder(d, edit=lambda t: t.pop("h.1.ln_2.bias"))[0], "lacks h.1.ln_2.bias"),
    "gpt2 unexpected tensor": (
        lambda d: gpt2_folder(d, edit=lambda t: renamed(t, "h.0.ln_2.bias", "h.0.ln_3.bias"))[0],
        "unexpected tensor 'h.0.ln_3.bias'",
    ),
    "gpt2 untied head": (lambda d: gpt2_folder(d, "bin", edit=lambda t: t["lm_head.weight"].mul_(2))[0], "untied"),
    "gpt2 integer weights": (replaced("ln_f.bias", torch.zeros(128).long()), "not floating-point"),
    "gpt2 config disagrees": (lambda d: edited_config(d, n_layer=3), "do not belong together"),
    "gpt2 config other activation": (lambda d: edited_config(d, activation_function="relu"), "activation_function"),
    "gpt2 config other model": (lambda d: edited_config(d, model_type="mistral"), "model_type"),
    "gpt2 config prompt without {question}": (lambda d: edited_config(d, nanogrpo_prompt="Q: "), "nanogrpo_prompt"),
    "gpt2 vocab.json of another model": (
        lambda d: write_vocab(gpt2_folder(d)[0], merges=[]) or d / "gpt2",
        "262 token ids but tokenizer 'gpt2' has 257",
    ),
    "folder without weights": (lambda d: d, "folder without"),
    "safetensors one byte": (lambda d: raw_file(d, b"a", "model.safetensors"), "header length"),
    "safetensors header beyond file": (
        lambda d: raw_file(d, struct.pack("<Q", 10_000) + b'{"a": 1}', "model.safetensors"),
        "header length",
    ),
    "safetensors header not json": (
        lambda d: raw_file(d, struct.pack("<Q", 4) + b"{{{{", "model.safetensors"),
        "JSONDecodeError",
    ),
    "safetensors unknown dtype": (st_entry("F8_E4M3", [2], [0, 2], b"xx"), "'F8_E4M3'"),
    "safetensors wrong byte count": (st_entry("F32", [2], [0, 4], b"x" * 4), "bytes, not the 8"),
    "safetensors malformed entry": (st_entry("F32", 2, [0, 8], b"x" * 8), "malformed"),
    "safetensors range past the end": (st_entry("F32", [2], [0, 8], b"x" * 4), "cut short"),
    "safetensors truncated": (lambda d: cut_in_half(gpt2_folder(d)[0] / "model.safetensors"), "cut short"),
    "safetensors header not an object": (
        lambda d: raw_file(d, struct.pack("<Q", 2) + b"[]", "model.safetensors"),
        "header is not a JSON object",
    ),
    "gpt2 without wte": (lambda d: gpt2_folder(d, edit=lambda t: t.pop("wte.weight"))[0], "wte.weight or wpe.weight"),
    "gpt2 name twice": (
        lambda d: gpt2_folder(d, "bin", edit=lambda t: t.update({"wte.weight": t["transformer.wte.weight"]}))[0],
        "'wte.weight' twice",
    ),
    "sharded folder, no weight map": (
        lambda d: (raw_file(d, b"{}", "model.safetensors.index.json"), d)[1],
        "weight_map",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_file_ends_in_one_line_that_names_it(tmp_path, case):
    make, expect = BAD[case]
    path = make(tmp_path)
    with pytest.raises(LoadError) as e:
        load_model(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and expect in msg, msg
    if str(path).endswith(".pt") and case not in (
        "dict without keys",
        "list of tensors",
        "bare state dict",
        "non-finite weights",
    ):  # these are load_model's or restore's
        with pytest.raises(LoadError) as e:  # the trainer's resume reads the same way
            load_checkpoint(path)
        assert "\n" not in str(e.value) and str(path) in str(e.value) and expect in str(e.value), str(e.value)


class Payload:
    """Unpickling this runs code (it makes a folder): a safe loader refuses it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_a_plain_pickle_is_refused_in_one_line_without_torchs_warning(tmp_path):
    """pickle.dump's protocol 4 (not torch's 2) makes torch's safe unpickler warn: the one-line error is all."""
    path = tmp_path / "plain.pkl"
    with open(path, "wb") as f:
        pickle.dump({"model": 1, "config": {}}, f, protocol=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LoadError, match="plain.pkl"):
            load_model(path)
    assert not caught, [str(w.message)[:80] for w in caught]


def test_no_code_is_unpickled(tmp_path):
    marker = str(tmp_path / "code-ran")
    path = torch_file(
        tmp_path,
        {"model": {"w": torch.ones(1)}, "config": {}, "tokenizer": "bytes", "prompt": PROMPT, "extra": Payload(marker)},
    )
    for load in (load_model, load_checkpoint):
        with pytest.raises(LoadError, match="cannot read"):
            load(path)
    assert not os.path.exists(marker)


@pytest.mark.parametrize(
    "obj,expect", [({"step": 3}, "lacks model, config, tokenizer, prompt"), ([torch.ones(2)], "holds a list")]
)
def test_load_checkpoint_names_what_is_missing(tmp_path, obj, expect):
    path = torch_file(tmp_path, obj)
    with pytest.raises(LoadError, match=expect):
        load_checkpoint(path)


# ----------------------------------------------------------------------------- atomic saves


@pytest.mark.parametrize("failure", ["disk full", "Ctrl-C", "rename refused"])
def test_failed_save_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, monkeypatch, failure):
    path = tmp_path / "ckpt.pt"
    small_checkpoint(path)
    before = path.read_bytes()
    error = KeyboardInterrupt if failure == "Ctrl-C" else OSError

    def half_written(obj, f, *args, **kwargs):  # some bytes reach the disk, then the write fails
        f.write(b"PK\x03\x04 the first bytes of a checkpoint")
        raise error(errno.ENOSPC, "No space left on device")

    def refused(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied")

    if failure == "rename refused":
        monkeypatch.setattr(os, "replace", refused)
    else:
        monkeypatch.setattr(torch, "save", half_written)
    with pytest.raises(error):
        small_checkpoint(path, **{"transformer.ln_f.bias": 1.0})
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"]
    load_checkpoint(path)


def test_torch_writer_error_is_one_line_os_error(tmp_path, monkeypatch):
    """torch's writer reports a full disk as a RuntimeError from its cleanup: it still reads as one OSError line,
    the old file intact and no temp file (named with the writer's process id) left."""
    path = tmp_path / "ckpt.pt"
    names = []
    small_checkpoint(path)
    before = path.read_bytes()

    def full_disk(obj, f, *args, **kwargs):
        names.append(os.path.basename(f.name))
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1234 vs 5678\nmore")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError) as e:
        small_checkpoint(path, **{"transformer.ln_f.bias": 1.0})
    monkeypatch.undo()
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "MB free" in msg and "intact" in msg, msg
    assert names == [f"ckpt.pt.{os.getpid()}.tmp"]
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"]


def test_a_killed_writers_temp_file_is_removed_by_the_next_save_and_nothing_else(tmp_path):
    """kill -9 between the temp file's write and its rename leaves ckpt.pt.PID.tmp: the next save (and a run's
    out_dir, for warmstart.pt's) removes a dead writer's; a live writer's, a link, a folder, another name stay."""
    path = tmp_path / "ckpt.pt"
    small_checkpoint(path)
    pid = killed((1, "before"), lambda: small_checkpoint(path, **{"transformer.ln_f.bias": 1.0}))
    assert (tmp_path / f"ckpt.pt.{pid}.tmp").is_file()
    (tmp_path / f"warmstart.pt.{pid}.tmp").write_bytes(b"a killed warm start's")
    dead = killed((1, "before"), lambda: os.rename(tmp_path / "a", tmp_path / "b"))  # another dead process
    (tmp_path / "note").write_text("keep")
    planted = [
        f"ckpt.pt.{dead}.tmp.bak",
        "ckpt.pt.1.tmp",
        "ckpt.pt.x.tmp",
        f"xckpt.pt.{dead}.tmp",
        f"ckpt.pt.{dead}.old",
    ]
    for name in planted:
        (tmp_path / name).write_text("keep")
    (tmp_path / f"warmstart.pt.{dead}.tmp").symlink_to(tmp_path / "note")  # a link: the project writes none
    (tmp_path / f"ckpt.pt.{dead}.tmp").mkdir()  # a folder: not a temp file
    small_checkpoint(path)
    RunDir(str(tmp_path), resume=True)
    planted += [f"warmstart.pt.{dead}.tmp", f"ckpt.pt.{dead}.tmp", "note"]
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt.pt", "run.lock", *planted])
    assert (tmp_path / "note").read_text() == "keep" and load_checkpoint(path)


# ----------------------------------------------------------------------------- what a resume reads is checked


def train_checkpoint(path):
    """A checkpoint as train.py writes it: weights, reference, optimizer state, step, task, args, log size."""
    model = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    opt.step()
    state = dict(step=3, task="builtin", args={"G": 8, "lr": 0.1}, log_bytes=120, optimizer=opt.state_dict())
    save_checkpoint(path, model, get_tokenizer("bytes"), ref=reference(1, model.config).state_dict(), **state)
    return torch.load(path, weights_only=True)


def flip(t):
    t.view(-1)[0] += 1  # one number changed, the rest of the file as it was


EDITS = {  # a change to one thing a resume reads, the digest left as it was
    "a weight": lambda c: flip(c["model"]["transformer.ln_f.bias"]),
    "the reference": lambda c: flip(c["ref"]["transformer.h.0.mlp.c_fc.weight"]),
    "the optimizer's moments": lambda c: flip(c["optimizer"]["state"][0]["exp_avg"]),
    "the optimizer's settings": lambda c: c["optimizer"]["param_groups"][0].update(lr=0.2),
    "the step": lambda c: c.update(step=4),
    "an argument": lambda c: c["args"].update(G=4),
    "the task": lambda c: c.update(task="other"),
    "the log size": lambda c: c.update(log_bytes=0),
    "the config": lambda c: c["config"].update(block_size=16),
    "the prompt": lambda c: c.update(prompt="Q: {question}\nSo: "),
    "no digest": lambda c: c.pop("digest"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_digest_covers_everything_a_resume_reads(tmp_path, edit):
    path = tmp_path / "ckpt.pt"
    ckpt = train_checkpoint(path)
    assert load_checkpoint(path, resume=True)["step"] == 3  # sound as written
    EDITS[edit](ckpt)
    torch.save(ckpt, path)
    with pytest.raises(LoadError) as e:
        load_checkpoint(path, resume=True)
    assert "\n" not in str(e.value) and str(path) in str(e.value), str(e.value)
    assert ("lacks digest" if edit == "no digest" else "digest") in str(e.value)


@pytest.mark.parametrize("key", list(TRAIN_KEYS))
def test_resume_refuses_a_missing_or_mistyped_training_key(tmp_path, key):
    path = tmp_path / "ckpt.pt"
    ckpt = train_checkpoint(path)
    for broken in ({k: v for k, v in ckpt.items() if k != key}, {**ckpt, key: "x" if key != "task" else 7}):
        torch.save(signed({k: v for k, v in broken.items() if k != "digest"}), path)
        load_checkpoint(path)  # a model is still there for load_model and sample.py
        with pytest.raises(LoadError, match=f"no training state to resume \\({key} is missing"):
            load_checkpoint(path, resume=True)


def test_resume_checks_the_values_it_reads_whatever_the_digest_says(tmp_path):
    """A crafted checkpoint signed anew passes the digest: its step, log size and optimizer state are checked too."""
    path = tmp_path / "ckpt.pt"
    ckpt = train_checkpoint(path)
    model = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    wide = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=16))
    wide(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    other = torch.optim.AdamW(wide.parameters())
    other.step()  # the same parameters in number, not in shape

    def moments(edit):
        state = torch.load(path, weights_only=True)["optimizer"]
        edit(state["state"][0])
        return state

    cases = {
        "step": (dict(step=-5), "step -5 or log size 120 is negative"),
        "log size": (dict(log_bytes=-1), "is negative"),
        "another model's optimizer": (dict(optimizer=other.state_dict()), "not a tensor of shape"),
        "a NaN moment": (dict(optimizer=moments(lambda m: m["exp_avg"].view(-1)[0].fill_(math.nan))), "finite"),
        "a negative second moment": (dict(optimizer=moments(lambda m: m["exp_avg_sq"].fill_(-1.0))), "negative"),
        "a moment too many": (dict(optimizer=moments(lambda m: m.update(extra=torch.zeros(3)))), "extra"),
    }
    for name, (change, expect) in cases.items():
        crafted = {k: v for k, v in ckpt.items() if k != "digest"} | change
        torch.save(signed(crafted), path)
        with pytest.raises(LoadError, match=expect):
            got = load_checkpoint(path, resume=True)
            optimizer = torch.optim.AdamW(model.parameters())
            checkpoint.restore_training(got, path, optimizer, reference(1, model.config), "builtin")
    torch.save(signed({k: v for k, v in ckpt.items() if k != "digest"}), path)  # as train.py wrote it: restored
    optimizer = torch.optim.AdamW(model.parameters())
    assert checkpoint.restore_training(load_checkpoint(path, resume=True), path, optimizer, model, "builtin") == 3


def test_absurd_sizes_in_a_file_are_refused_before_anything_is_allocated(tmp_path):
    """Sizes come from the file; they are checked against the tensors present (on the meta device) first."""
    model = reference(0, GPTConfig(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=8))
    base = dict(model=model.state_dict(), tokenizer="bytes", prompt=PROMPT, tokenizer_ranks=None)
    for config, expect in (
        (
            dict(block_size=8, vocab_size=257, n_layer=10**9, n_head=1, n_embd=8),
            "1000000000 layers but the file only 17 tensors",
        ),
        (dict(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=10**7), "does not fit its tensors"),
        (dict(block_size=10**12, vocab_size=257, n_layer=1, n_head=1, n_embd=8), "does not fit its tensors"),
        (dict(block_size=8, vocab_size=257, n_layer=1, n_head=1, n_embd=2**40), "sizes cannot be built"),  # 2^83 B
    ):
        torch.save(signed({**base, "config": config}), tmp_path / "x.pt")
        with pytest.raises(LoadError, match=expect):
            load_model(tmp_path / "x.pt")
    # GPT-2 names that imply a million layers, with only one of them present
    (tmp_path / "many").mkdir()
    folder, _ = gpt2_folder(tmp_path / "many", edit=lambda t: t.update({"h.999999.ln_1.bias": torch.zeros(128)}))
    with pytest.raises(LoadError, match="without gaps"):
        load_model(folder)


def test_weights_larger_than_the_device_are_refused_before_allocation(tmp_path, monkeypatch, capsys):
    """load_model (and so train.py --init_from, sample.py and the export) checks the weights' bytes against
    model.device_memory before it builds the model: one line, not the allocator's traceback."""
    ckpt = tmp_path / "ckpt.pt"
    model = small_checkpoint(ckpt)
    need = 4 * model.num_params()
    monkeypatch.setattr(hf, "device_memory", lambda device: need - 1)
    with pytest.raises(LoadError, match="weights need .* GiB, cpu has"):
        load_model(ckpt)
    script = os.path.join(ROOT, "plumbing", "export.py")
    monkeypatch.setattr(sys, "argv", [script, str(ckpt), str(tmp_path / "hf")])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(script, run_name="__main__")
    assert str(e.value.code).startswith("error: ") and "GiB" in str(e.value.code) and not (tmp_path / "hf").exists()
    monkeypatch.setattr(hf, "device_memory", lambda device: need)
    assert load_model(ckpt)[0].num_params() == model.num_params()


def test_overlapping_safetensors_ranges_are_refused(tmp_path):
    header = {
        "wte.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "wpe.weight": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
    }
    path = safetensors_header(tmp_path, header, b"x" * 12)
    with pytest.raises(LoadError, match="'wte.weight' and 'wpe.weight' share bytes"):
        read_safetensors(path)


@pytest.mark.parametrize("name", ["config.json", "vocab.json"])
def test_json_nested_too_deeply_is_one_line(tmp_path, name):
    folder, _ = gpt2_folder(tmp_path)
    (folder / name).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LoadError) as e:
        load_model(folder)
    assert "\n" not in str(e.value) and name in str(e.value), str(e.value)


# ----------------------------------------------------------------------------- a run's out_dir

HOLD = """
import sys
sys.path.insert(0, {root!r})
from plumbing import checkpoint
run = checkpoint.RunDir({out!r}, resume=False)
print("locked", flush=True)
sys.stdin.readline()
"""


def test_one_run_per_out_dir(tmp_path):
    """A second run on a locked out_dir ends in one line; the lock goes with the process that held it."""
    out = str(tmp_path / "out")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(root=root, out=out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OSError, match="in use by another run"):
            RunDir(out, resume=True)
        RunDir(out, resume=True, writer=False)  # a data-parallel rank other than 0 takes no lock
    finally:
        holder.communicate("\n", timeout=60)
    RunDir(out, resume=True)  # free again


def test_fresh_run_dir_removes_the_old_checkpoint_and_keeps_the_log_to_its_size(tmp_path):
    run = RunDir(str(tmp_path), resume=False)
    small_checkpoint(run.ckpt)
    run.log({"kind": "train", "step": 1, "x": float("nan")}, ["kind", "step", "x"])
    assert json.loads(open(run.metrics).read()) == {"kind": "train", "step": 1, "x": None}  # strict JSON
    size = run.log_bytes()
    run.log({"kind": "train", "step": 2})  # written after the checkpoint: a resume drops it
    run.open_log(size)
    assert run.log_bytes() == size
    with pytest.raises(LoadError, match="shorter than when"):
        run.open_log(size + 1)
    assert os.path.exists(run.ckpt)
    RunDir(str(tmp_path), resume=False)
    assert not os.path.exists(run.ckpt)


# ----------------------------------------------------------------------------- the gpt2 tokenizer


def test_gpt2_tokenizer_from_vocab_json(tmp_path):
    write_vocab(tmp_path)
    enc = get_tokenizer("gpt2", folder=tmp_path)
    assert enc.name == "gpt2" and enc.n_vocab == V and enc.eot_token == V - 1
    assert enc.encode("!") == [0] and enc.encode("\n") == [198] and enc.encode(" ") == [220]  # GPT-2's own ids
    assert enc.encode("aa aa") == [256, 258] and enc.encode("  \n\n") == [259, 260]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [V - 1]
    text = "Ünïcødé 3½ × 2 = 7 ✓ 数学 🙂\n\n  a it's"
    assert enc.decode(enc.encode(text)) == text


def test_gpt2_pattern_splits_as_tiktokens_gpt2(tmp_path):
    pat = pytest.importorskip("tiktoken_ext.openai_public").r50k_pat_str
    write_vocab(tmp_path)
    ours = get_tokenizer("gpt2", folder=tmp_path)
    ranks = {bytes([b]): i for i, b in enumerate(byte_chars())}
    ranks.update({m.replace("Ġ", " ").replace("Ċ", "\n").encode(): 256 + i for i, m in enumerate(MERGES)})
    theirs = tiktoken.Encoding("theirs", pat_str=pat, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": V - 1})
    for text in ["a  a", "aa   aa\n\n\n a", "it's I'll we've", "  \n  ", "x\n\ny  ", "12 345  ", "\n\n\n\n", " aa\n\n"]:
        assert ours.encode(text) == theirs.encode(text), text


def test_gpt2_tokenizer_without_files_says_how_to_get_them(tmp_path, monkeypatch):
    def offline(name):
        raise OSError("network is unreachable")  # what requests raises offline is an OSError

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    for folder in (None, tmp_path):
        with pytest.raises(LoadError) as e:
            get_tokenizer("gpt2", folder)
        msg = str(e.value)
        assert "\n" not in msg and "TIKTOKEN_CACHE_DIR" in msg and "vocab.json" in msg, msg
    folder, _ = gpt2_folder(tmp_path)
    os.remove(folder / "vocab.json")
    with pytest.raises(LoadError, match="has no vocab.json"):
        load_model(folder)
    with pytest.raises(LoadError, match="unknown tokenizer 'gpt3'"):
        get_tokenizer("gpt3")


BYTES_ONLY = {c: i for i, c in enumerate(byte_chars().values())}


@pytest.mark.parametrize(
    "content,expect",
    [
        ("not json", "JSONDecodeError"),
        ('{"a": 0}', "is not a vocabulary {token: id} with <|endoftext|>"),
        ('{"a": 0, "<|endoftext|>": 1}', "256 single-byte"),
        (json.dumps({**BYTES_ONLY, "<|endoftext|>": 999}), "ids must be"),  # EOS not right after the tokens
        (json.dumps({**BYTES_ONLY, "!": 300, "<|endoftext|>": 256}), "ids must be"),  # a gap in the ids
    ],
)
def test_bad_vocab_json_is_one_line(tmp_path, content, expect):
    (tmp_path / "vocab.json").write_text(content)
    with pytest.raises(LoadError, match=re.escape(expect)) as e:
        get_tokenizer("gpt2", tmp_path)
    assert "\n" not in str(e.value) and str(tmp_path / "vocab.json") in str(e.value)


# ----------------------------------------------------------------------------- export to Hugging Face's layout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = "Question: {question}\nAnswer: "  # not model.PROMPT, so that a lost template shows
EXPORT_TEXTS = [  # beside the task's prompts and solutions: digits, runs of spaces, contractions, unicode, nothing
    "abc: ab then bc, not a then bc",  # with the words "ab" and "bc": merges out of rank order give [a, bc]
    "0123456789 12 345 6789 -3.5",
    "a  b   c\t\td\r\n\n\n x",
    "  leading and trailing  ",
    "it's I'll we've they're",
    "Ünïcødé 3½ × 2 = 7 ✓ 数学 🙂",
    "",
]


def exported_model(kind, tmp_path):
    """(checkpoint path, its model, its tokenizer): a small random model of each tokenizer kind; "words" is train.py's
    from-scratch tokenizer of the task's words (and "ab", "bc", which overlap), "gpt2" the small GPT-2 of gpt2_folder
    as a run that tuned it saves it."""
    if kind == "gpt2":
        model, enc, _ = load_model(gpt2_folder(tmp_path)[0])
    else:
        words = [*frequent_words(Arithmetic().texts(PROMPT, n=200)), b"ab", b"bc"] if kind == "words" else ()
        enc = byte_tokenizer(words)
        model = reference(0, GPTConfig(block_size=24, vocab_size=enc.n_vocab, n_layer=2, n_head=2, n_embd=16))
    save_checkpoint(tmp_path / "ckpt.pt", model, enc, prompt=TEMPLATE)
    return tmp_path / "ckpt.pt", model, enc


def hf_bpe(folder):
    """encode(text) -> ids as Hugging Face's byte-level BPE computes them from vocab.json and merges.txt alone: GPT-2's
    pattern splits the text, a piece's bytes become GPT-2's characters, then the adjacent pair listed first in
    merges.txt (the leftmost of equals) joins, until no pair is listed."""
    regex = pytest.importorskip("regex")  # tiktoken's own dependency: it knows \p{L}
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    lines = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2"
    order = {tuple(line.split(" ")): n for n, line in enumerate(lines[1:])}
    chars = gpt2_byte_chars()

    def encode(text):
        ids = []
        for piece in regex.findall(GPT2_PAT, text):
            word = [chars[b] for b in piece.encode()]
            while len(word) > 1:
                first, i = min((order.get(pair, math.inf), i) for i, pair in enumerate(zip(word, word[1:])))
                if first == math.inf:
                    break
                word[i : i + 2] = [word[i] + word[i + 1]]
            ids += [vocab[w] for w in word]
        return ids

    return encode


@pytest.mark.parametrize("kind", ["bytes", "words", "gpt2"])
def test_export_reads_back_with_the_same_logits_token_ids_and_prompt(tmp_path, kind):
    ckpt, model, enc = exported_model(kind, tmp_path)
    export_hf(ckpt, tmp_path / "hf")
    assert sorted(os.listdir(tmp_path / "hf")) == sorted(GPT2_FILES)
    again, enc2, prompt = load_model(tmp_path / "hf")
    idx = torch.randint(0, enc.n_vocab, (3, model.config.block_size), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(again(idx), model(idx), atol=1e-6, rtol=0)  # (N, L, V)
    assert again.config == model.config and prompt == TEMPLATE and enc2.eot_token == enc.eot_token
    hf_encode = hf_bpe(tmp_path / "hf")  # what merges.txt gives, which load_model does not read
    for text in Arithmetic().texts(PROMPT, n=20) + EXPORT_TEXTS:
        want = enc.encode(text, disallowed_special=())
        assert enc2.encode(text, disallowed_special=()) == want and hf_encode(text) == want, text
    if kind == "gpt2":  # GPT-2's own vocab.json comes back as it was
        vocab = json.loads((tmp_path / "hf" / "vocab.json").read_text(encoding="utf-8"))
        assert vocab == json.loads((tmp_path / "gpt2" / "vocab.json").read_text(encoding="utf-8"))


def test_exported_files_are_hugging_faces_gpt2_layout(tmp_path):
    """What transformers reads: GPT2LMHeadModel's names, the Conv1D weights (in, out) (GPT-2 computed from the file's
    own tensors gives the model's logits), an 8-byte aligned header saying format "pt", config.json's fields, and a
    tokenizer.json of the same vocab and merges, with GPT-2's byte-level pre-tokenizer and EOS."""
    ckpt, model, enc = exported_model("words", tmp_path)
    out = tmp_path / "hf"
    export_hf(ckpt, out)
    raw = (out / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0 and json.loads(raw[8 : 8 + n])["__metadata__"] == {"format": "pt"}
    tensors = read_safetensors(out / "model.safetensors")
    assert set(tensors) == set(model.state_dict()) - {"lm_head.weight"}  # tied to wte: not stored, as transformers
    cfg = model.config
    assert tensors["transformer.h.1.mlp.c_fc.weight"].shape == (cfg.n_embd, 4 * cfg.n_embd)  # (in, out)
    hf = {k.removeprefix("transformer."): t for k, t in tensors.items()}
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.block_size), generator=torch.Generator().manual_seed(1))  # (N, L)
    with torch.no_grad():
        torch.testing.assert_close(gpt2_forward(hf, idx, cfg.n_head), model(idx), atol=1e-5, rtol=0)
    config = json.loads((out / "config.json").read_text())
    eot = enc.eot_token
    expect = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], vocab_size=cfg.vocab_size, n_embd=cfg.n_embd)
    expect |= dict(n_layer=cfg.n_layer, n_head=cfg.n_head, n_positions=cfg.block_size, n_ctx=cfg.block_size)
    expect |= dict(activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    expect |= dict(bos_token_id=eot, eos_token_id=eot, nanogrpo_prompt=TEMPLATE)
    assert {k: config.get(k) for k in expect} == expect
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    merges = (out / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]
    assert vocab["<|endoftext|>"] == eot and len(vocab) == enc.n_vocab and len(merges) > 0
    fast = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert fast["model"]["type"] == "BPE" and fast["model"]["vocab"] == vocab and fast["model"]["merges"] == merges
    assert [(t["id"], t["content"], t["special"]) for t in fast["added_tokens"]] == [(eot, "<|endoftext|>", True)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    assert fast["pre_tokenizer"] == byte_level and fast["decoder"]["type"] == "ByteLevel"
    tok_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tok_config["tokenizer_class"] == "GPT2Tokenizer" and tok_config["eos_token"] == "<|endoftext|>"


def test_export_replaces_an_earlier_export_and_refuses_other_folders(tmp_path):
    ckpt, _, enc = exported_model("bytes", tmp_path)
    out = tmp_path / "hf"
    out.mkdir()  # an empty folder is taken
    export_hf(ckpt, out)
    other = reference(1, GPTConfig(block_size=16, vocab_size=enc.n_vocab, n_layer=1, n_head=1, n_embd=8))
    save_checkpoint(tmp_path / "other.pt", other, enc)
    export_hf(tmp_path / "other.pt", f"{out}/")  # an earlier export is replaced whole; a trailing slash is the same
    again, _, prompt = load_model(out)
    assert again.config == other.config and prompt == PROMPT
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), other.state_dict().values()))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    for folder, expect in ((tmp_path / "mine", "holds 'notes.txt'"), (tmp_path / "mine" / "notes.txt", "is a file")):
        with pytest.raises(LoadError, match=expect):
            export_hf(ckpt, folder)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    no_bias = reference(0, GPTConfig(block_size=8, vocab_size=enc.n_vocab, n_layer=1, n_head=1, n_embd=8, bias=False))
    save_checkpoint(tmp_path / "no_bias.pt", no_bias, enc)
    with pytest.raises(LoadError, match="no biases"):  # GPT-2 always has them
        export_hf(tmp_path / "no_bias.pt", tmp_path / "nb")
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt", "hf", "mine", "no_bias.pt", "other.pt"]  # no temp folder left


@pytest.mark.parametrize("failure", ["disk full", "rename refused", "rename refused, no swap"])
def test_failed_export_keeps_the_earlier_one_and_leaves_no_temp_folder(tmp_path, monkeypatch, failure):
    ckpt, model, enc = exported_model("bytes", tmp_path)
    out = tmp_path / "hf"
    export_hf(ckpt, out)
    before = {name: (out / name).read_bytes() for name in GPT2_FILES}
    save_checkpoint(tmp_path / "other.pt", reference(1, model.config), enc)

    def full_disk(path, tensors):  # some bytes reach the disk, then the write fails
        with open(path, "wb") as f:
            f.write(b"\x08\x00")
        raise OSError(errno.ENOSPC, "No space left on device")

    rename = os.rename

    def refused(src, dst):  # the new folder cannot take the name, after the earlier export was moved aside
        if str(src).endswith(".tmp"):
            raise PermissionError(errno.EACCES, "Permission denied")
        rename(src, dst)

    if failure == "disk full":
        monkeypatch.setattr(hf_export, "write_safetensors", full_disk)
    else:
        monkeypatch.setattr(os, "rename", refused)
        monkeypatch.setattr(hf_export, "_exchange", refused if failure == "rename refused" else lambda a, b: False)
    with pytest.raises(OSError) as e:
        export_hf(tmp_path / "other.pt", out)
    monkeypatch.undo()
    msg = str(e.value)
    assert "\n" not in msg and f"cannot write {out}" in msg and ("No space" in msg or "Permission" in msg), msg
    assert {name: (out / name).read_bytes() for name in GPT2_FILES} == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt", "hf", "other.pt"]


def killed(at, call, *args):
    """call(*args) in a forked process that kill -9's itself (os._exit: no cleanup runs) around its `at` = (n, when)
    n-th rename, replace or swap: "before" it, or "after" it. Returns that process's id, now dead."""
    n, when = at
    calls = []

    def hooked(real):
        def rename(*a):
            calls.append(a)
            if len(calls) == n and when == "before":
                os._exit(9)
            done = real(*a)
            if len(calls) == n:
                os._exit(9)
            return done

        return rename

    pid = os.fork()
    if pid == 0:  # the child: it never returns into pytest
        try:
            os.rename, os.replace, hf_export._exchange = (
                hooked(os.rename),
                hooked(os.replace),
                hooked(hf_export._exchange),
            )
            call(*args)
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] >> 8 == 9, "the process was not killed where asked"
    return pid


def weights(folder):
    return [t.clone() for t in load_model(folder)[0].state_dict().values()]


@pytest.mark.parametrize("at,swap", [((1, "before"), True), ((1, "after"), True), ((2, "after"), False)])
def test_a_killed_export_leaves_the_old_or_the_new_export_and_the_next_one_cleans_up(tmp_path, monkeypatch, at, swap):
    """kill -9 at any point of an export: DIR holds the earlier export or the new one, complete; what the killed
    writer left beside it (DIR.PID.tmp) is removed by the next export, and nothing else is. Where the OS cannot swap
    two names (swap False: the swap's call says so, then two renames), a kill between the two renames leaves the
    earlier export as DIR.PID.old, and the next export renames it back first."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    if not hf_export._exchange(str(tmp_path / "a"), str(tmp_path / "b")):
        pytest.skip("this file system cannot swap two names in one step")
    ckpt, model, enc = exported_model("bytes", tmp_path)
    out = tmp_path / "hf"
    export_hf(ckpt, out)
    old = weights(out)
    save_checkpoint(tmp_path / "other.pt", reference(1, model.config), enc)
    new = weights(tmp_path / "other.pt")
    planted = {"hf.1.tmp": "a writer alive (pid 1)", "hf.x.tmp": "no pid", "hf.5.tmp.bak": "another name"}
    for name, text in planted.items():
        (tmp_path / name).write_text(text)
    if not swap:
        monkeypatch.setattr(hf_export, "_exchange", lambda a, b: False)
    pid = killed(at, export_hf, tmp_path / "other.pt", out)
    left = set(os.listdir(tmp_path)) - {"a", "b", "ckpt.pt", "hf", "other.pt", *planted}
    assert left == ({f"hf.{pid}.tmp"} if swap else {f"hf.{pid}.tmp", f"hf.{pid}.old"}), left
    now = weights(out if swap else tmp_path / f"hf.{pid}.old")  # complete, and one of the two
    assert any(all(torch.equal(a, b) for a, b in zip(now, w)) for w in (old, new))
    export_hf(tmp_path / "other.pt", out)
    assert all(torch.equal(a, b) for a, b in zip(weights(out), new))
    assert sorted(os.listdir(tmp_path)) == sorted(["a", "b", "ckpt.pt", "hf", "other.pt", *planted])
    assert all((tmp_path / name).read_text() == text for name, text in planted.items())


def test_an_export_follows_a_link_and_refuses_folders_it_did_not_write(tmp_path):
    """DIR a link: the link stays, its target is written. An entry named as an export's file but not a regular file,
    or Hugging Face's files without nanogrpo's config, are the user's: refused in one line, all left as they were."""
    ckpt, _, _ = exported_model("bytes", tmp_path)
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to("target")
    export_hf(ckpt, tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and sorted(os.listdir(tmp_path / "target")) == sorted(GPT2_FILES)
    export_hf(ckpt, tmp_path / "link")  # again: an earlier export behind a link
    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == "target"
    mine = tmp_path / "d"
    (mine / "model.safetensors").mkdir(parents=True)  # a user's folder, named like an export's file
    (mine / "model.safetensors" / "data.bin").write_text("keep")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.json").symlink_to(tmp_path / "target" / "config.json")  # a link to an export's file
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "config.json").write_text('{"model_type": "gpt2"}')  # Hugging Face's, not an export's
    for folder, expect in (
        (mine, "'model.safetensors', which is not a file"),
        (tmp_path / "e", "a link"),
        (
            tmp_path / "f",
            "no nanogrpo_prompt",
        ),
    ):
        with pytest.raises(LoadError, match=expect):
            export_hf(ckpt, folder)
    assert (mine / "model.safetensors" / "data.bin").read_text() == "keep"
    assert (tmp_path / "e" / "config.json").is_symlink() and (tmp_path / "f" / "config.json").read_text()[0] == "{"


def test_an_export_to_a_link_that_points_nowhere_is_refused_and_creates_nothing(tmp_path):
    """DIR a dangling link: following it would create the folder it names, wherever that is; refused in one line."""
    ckpt, _, _ = exported_model("bytes", tmp_path)
    (tmp_path / "link").symlink_to(tmp_path / "away" / "hf")
    for given in (str(tmp_path / "link"), str(tmp_path / "link") + os.sep):
        with pytest.raises(LoadError, match="link to '.*away/hf', which does not exist; give a folder") as e:
            export_hf(ckpt, given)
        assert "\n" not in str(e.value) and str(e.value).startswith(given)
    assert not (tmp_path / "away").exists() and (tmp_path / "link").is_symlink()


def test_export_command_line_writes_the_folder_or_says_what_to_change_in_one_line(tmp_path, monkeypatch, capsys):
    ckpt, _, _ = exported_model("bytes", tmp_path)
    script = os.path.join(ROOT, "plumbing", "export.py")
    cmd = [sys.executable, "-m", "plumbing.export", str(tmp_path / "nothing.pt"), str(tmp_path / "hf")]
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, cwd=ROOT
    )  # a process of its own: what a user sees
    one_line = run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.returncode == 1 and run.stderr.startswith(f"error: {tmp_path / 'nothing.pt'}: no such file") and one_line
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    for folder, expect in (
        (tmp_path / "mine", "holds 'notes.txt'"),
        (tmp_path / "mine" / "notes.txt" / "hf", "cannot write"),  # under a file: the folder cannot be made
        (tmp_path / "hf", None),
    ):
        monkeypatch.setattr(sys, "argv", [script, str(ckpt), str(folder)])
        if expect is None:
            runpy.run_path(script, run_name="__main__")  # the command line in this process: quicker
            assert capsys.readouterr().out.startswith(f"wrote {folder}")
        else:
            with pytest.raises(SystemExit) as e:  # sys.exit(message): Python prints it as one line and exits with 1
                runpy.run_path(script, run_name="__main__")
            msg = e.value.code
            assert msg.startswith("error: ") and "\n" not in msg and expect in msg, msg
    assert load_model(tmp_path / "hf")[2] == TEMPLATE


# ----------------------------------------------------------------------------- the real GPT-2, where a user has it

GPT2_DIR = os.environ.get("NANOGRPO_GPT2")


@pytest.mark.skipif(
    not GPT2_DIR, reason="set NANOGRPO_GPT2 to a folder with GPT-2's model.safetensors, config.json and vocab.json"
)
def test_real_gpt2_matches_gpt2_computed_from_its_tensors():
    model, enc, _ = load_model(GPT2_DIR)
    assert enc.n_vocab == 50257 and enc.eot_token == 50256
    assert enc.encode("Hello, world!") == [15496, 11, 995, 0]
    st = os.path.join(GPT2_DIR, "model.safetensors")
    raw = (
        read_safetensors(st)
        if os.path.isfile(st)
        else torch.load(os.path.join(GPT2_DIR, "pytorch_model.bin"), map_location="cpu", weights_only=True)
    )
    hf = {k.removeprefix("transformer."): v.float() for k, v in raw.items()}
    idx = torch.tensor([enc.encode("The capital of France is Paris. The capital of Italy is")])  # (1, L)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), gpt2_forward(hf, idx, model.config.n_head), atol=1e-4, rtol=0)
