"""plumbing/hf.py, tokenizer.py and model.py's Llama family: RoPE (with Llama-3.1's scaling), grouped-query attention
and RMSNorm against their formulas; tiny random Qwen2-, Qwen3-, Llama-3- and SmolLM2-shaped models written here in
Hugging Face's layout (float32 or bf16, one file or shards, an embedding padded past the tokenizer, RoPE spelled both
ways) and read back by checkpoint.load_model to the same logits; tokenizer.json -> tiktoken against ids that Hugging
Face's `tokenizers` gave (tests/data/tokenizers, made by tests/make_tokenizer_fixtures.py); a chat template's
specials; stop ids; what is out of scope refused in one line; and train.py from such a folder. tests/check_hf.py
compares with transformers by hand."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys

import pytest
import tiktoken
import torch

from model import GPT, GPTConfig, RMSNorm, left_pad, rope_frequencies, rotate
from plumbing import export as hf_export
from plumbing import hf
from plumbing.checkpoint import digest, load_checkpoint, load_model, save_checkpoint
from plumbing.export import write_safetensors
from plumbing.files import LoadError
from plumbing.tokenizer import TEMPLATES, choose_template, encode_prompt, encode_text, stop_ids, tokenizer_from_json
from sample import completions_text, generate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "data", "tokenizers")
SCALING = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=32)
LLAMA = dict(arch="llama", bias=False, block_size=96, n_layer=2, n_head=4, n_embd=64, mlp_size=112, vocab_size=576)
FAMILIES = {  # model_type, GPTConfig, the tokenizer fixture, and its stop ids (generation_config.json)
    "qwen2": ("qwen2", GPTConfig(**LLAMA, n_kv_head=2, qkv_bias=True, rope_theta=1e6), "qwen", [540, 542]),
    "qwen3": ("qwen3", GPTConfig(**LLAMA, n_kv_head=2, head_dim=32, qk_norm=True, rope_theta=1e6), "qwen", [542]),
    "llama3": (
        "llama",
        GPTConfig(**LLAMA, n_kv_head=1, rope_theta=5e5, rope_scaling=SCALING, tie_embeddings=False),
        "llama3",
        [557, 560],
    ),
    "smollm2": ("llama", GPTConfig(**LLAMA, n_kv_head=4, rope_theta=1e5, norm_eps=1e-5), "smollm2", [540]),
    # as the real SmolLM2's: its special tokens the vocabulary's first ids, 21 single bytes missing
    "smollm2_real": ("llama", GPTConfig(**LLAMA, n_kv_head=2, rope_theta=1e5, norm_eps=1e-5), "smollm2_real", [2]),
}
# the real SmolLM2-135M-Instruct's chat_template.jinja, as its folder holds it
SMOLLM2_JINJA = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
    "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def random_model(config, seed=0):
    """A model of `config` whose every weight is random, norms and biases included."""
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def write_folder(folder, name, model, *, dtype=torch.float32, shards=1, spelling="rope_theta"):
    """Write `model` as Hugging Face writes a family's folder: config.json, weights (maybe sharded, maybe bf16),
    generation_config.json with the stop ids, the tokenizer fixture as tokenizer.json."""
    kind, config, tokenizer, stops = FAMILIES[name]
    os.makedirs(folder, exist_ok=True)
    c = model.config
    hf_cfg = dict(model_type=kind, hidden_size=c.n_embd, intermediate_size=c.mlp_size, num_hidden_layers=c.n_layer)
    hf_cfg |= dict(num_attention_heads=c.n_head, num_key_value_heads=c.kv_heads, rms_norm_eps=c.norm_eps)
    hf_cfg |= dict(vocab_size=c.vocab_size, max_position_embeddings=c.block_size, hidden_act="silu")
    hf_cfg |= dict(
        tie_word_embeddings=c.tie_embeddings, torch_dtype="bfloat16" if dtype == torch.bfloat16 else "float32"
    )
    if kind == "qwen3":
        hf_cfg["head_dim"] = c.head_size
    scaling = dict(rope_type="llama3", **c.rope_scaling) if c.rope_scaling else None
    if spelling == "rope_theta":  # as the Hub's files have it
        hf_cfg |= dict(rope_theta=c.rope_theta, rope_scaling=scaling)
    else:  # as newer transformers writes it
        hf_cfg["rope_parameters"] = (scaling or dict(rope_type="default")) | dict(rope_theta=c.rope_theta)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_cfg, f)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(dict(eos_token_id=stops if len(stops) > 1 else stops[0]), f)
    with open(os.path.join(FIXTURES, f"{tokenizer}.json"), encoding="utf-8") as src:
        text = src.read()
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text)
    tensors = {k: v.to(dtype).contiguous() for k, v in hf.llama_tensors(model).items()}  # names: check_hf.py
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        write_safetensors(os.path.join(folder, file), part)
        weight_map |= {n: file for n in part}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(dict(metadata={}, weight_map=weight_map), f)


# ----------------------------------------------------------------------------- the formulas


def test_rope_frequencies_follow_the_formula_and_llama3_scaling():
    config = GPTConfig(**LLAMA, rope_theta=5e5, rope_scaling=SCALING)
    D = config.head_size
    plain = [5e5 ** (-2 * j / D) for j in range(D // 2)]
    torch.testing.assert_close(rope_frequencies(GPTConfig(**LLAMA, rope_theta=5e5)), torch.tensor(plain))
    scaled = []
    for w in plain:  # Llama-3.1: long wavelengths slowed by the factor, short ones kept, a linear blend between
        wavelength = 2 * math.pi / w
        if wavelength < 32 / 4.0:
            scaled.append(w)
        elif wavelength > 32 / 1.0:
            scaled.append(w / 8.0)
        else:
            smooth = (32 / wavelength - 1.0) / (4.0 - 1.0)
            scaled.append((1 - smooth) * w / 8.0 + smooth * w)
    got = rope_frequencies(config)
    torch.testing.assert_close(got, torch.tensor(scaled))
    assert got[0] == plain[0] and got[-1] < plain[-1] / 7  # both ends are reached: kept, and slowed


def llama3_frequencies(theta, D, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings):
    """Llama-3.1's scaled RoPE frequencies, as transformers' _compute_llama3_parameters writes them, in float64."""
    low_freq_wavelen = original_max_position_embeddings / low_freq_factor
    high_freq_wavelen = original_max_position_embeddings / high_freq_factor
    out = []
    for j in range(D // 2):
        inv_freq = 1.0 / theta ** (2 * j / D)
        wavelen = 2 * math.pi / inv_freq
        if wavelen < high_freq_wavelen:  # high frequencies: kept
            out.append(inv_freq)
        elif wavelen > low_freq_wavelen:  # low frequencies: slowed by the factor
            out.append(inv_freq / factor)
        else:  # between: a linear blend in 1/wavelength
            smooth = (original_max_position_embeddings / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            out.append((1 - smooth) * inv_freq / factor + smooth * inv_freq)
    return out


def test_llama3_scaling_blends_the_wavelengths_between_its_bounds():
    """Heads 32 wide, θ = 10^4: wavelengths 6.3, 11.2, 19.9, 35.3, 62.8, 112, ...; with original 64 and frequency
    factors 1 and 4 the band [16, 64] holds three of them, so the blend runs (the test above has none in its band)."""
    scaling = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64)
    config = GPTConfig(**{**LLAMA, "n_embd": 128}, rope_theta=1e4, rope_scaling=scaling)
    want = llama3_frequencies(1e4, config.head_size, **scaling)
    wavelengths = [2 * math.pi * 1e4 ** (2 * j / 32) for j in range(16)]
    assert config.head_size == 32 and len([w for w in wavelengths if 16 < w < 64]) == 3  # inside the band
    torch.testing.assert_close(rope_frequencies(config), torch.tensor(want, dtype=torch.float32), atol=0, rtol=1e-5)


def test_qwen3_normalises_each_heads_q_and_k_before_rope():
    """One Qwen3 attention layer against the same computed by hand in float64: q, k and v projected, q and k
    RMS-normalised per head with their own weights, then turned by RoPE (each pair as a complex number times
    e^(i·pos·ω_j)), causal softmax(q·k/√D) over the shared key/value heads, o_proj. Normalising after RoPE differs
    once the norm's weights are not alike across a turned pair (random here)."""
    config = FAMILIES["qwen3"][1]  # 4 query heads 32 wide, 2 key/value heads, q/k norms
    model = random_model(config)
    attn = model.transformer.h[0].attn
    L = 6
    D = config.head_size
    x = torch.randn(1, L, config.n_embd)
    omega = config.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    angles = torch.arange(L, dtype=torch.float64)[:, None] * omega  # (L, D/2)
    both = torch.cat([angles, angles], -1)[None, None].float()  # (1, 1, L, D)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    w = {k: t.double() for k, t in attn.state_dict().items()}
    xd = x[0].double()  # (L, C)

    def rms_norm(t, weight):
        return weight * t / torch.sqrt((t**2).mean(-1, keepdim=True) + config.norm_eps)

    def turn(t):  # (L, heads, D): the pair (t_j, t_{j+D/2}) turned by pos·ω_j
        z = torch.complex(t[..., : D // 2], t[..., D // 2 :]) * torch.exp(1j * angles)[:, None, :]
        return torch.cat([z.real, z.imag], dim=-1)

    q = turn(rms_norm((xd @ w["q_proj.weight"].T).view(L, 4, D), w["q_norm.weight"]))  # norm, then RoPE
    k = turn(rms_norm((xd @ w["k_proj.weight"].T).view(L, 2, D), w["k_norm.weight"]))
    v = (xd @ w["v_proj.weight"].T).view(L, 2, D)
    heads = []
    for h in range(4):  # query head h reads key/value head h // 2
        scores = (q[:, h] @ k[:, h // 2].T / math.sqrt(D)).masked_fill(~causal, float("-inf"))  # (L, L)
        heads.append(scores.softmax(-1) @ v[:, h // 2])
    want = torch.cat(heads, dim=-1) @ w["o_proj.weight"].T  # (L, C)
    with torch.no_grad():
        got = attn(x, causal[None, None], (both.cos(), both.sin()))[0]
    torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-4)


def test_rotate_turns_each_pair_by_its_angle_so_scores_depend_on_the_distance():
    D = 8
    w = torch.tensor([1.0, 0.5, 0.1, 0.01])
    x = torch.randn(1, 1, 1, D)
    pos = torch.tensor(3.0)
    angles = torch.cat([pos * w, pos * w])[None, None, None]  # (1, 1, 1, D)
    got = rotate(x, angles.cos(), angles.sin())
    z = torch.complex(x[..., : D // 2], x[..., D // 2 :]) * torch.exp(1j * pos * w)  # the pair as a complex number
    torch.testing.assert_close(got, torch.cat([z.real, z.imag], dim=-1))

    def score(i, j, q, k):  # q at position i, k at position j, after RoPE
        a = torch.cat([i * w, i * w])
        b = torch.cat([j * w, j * w])
        return (rotate(q, a.cos(), a.sin()) * rotate(k, b.cos(), b.sin())).sum()

    q = torch.randn(D)
    k = torch.randn(D)
    torch.testing.assert_close(score(5.0, 2.0, q, k), score(13.0, 10.0, q, k))


def test_rms_norm_is_its_formula():
    norm = RMSNorm(6, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.arange(1.0, 7.0))
    x = torch.randn(3, 6)
    torch.testing.assert_close(norm(x), torch.arange(1.0, 7.0) * x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-5))


def test_grouped_query_attention_shares_each_key_value_head_among_its_queries():
    config = FAMILIES["qwen2"][1]  # 4 query heads, 2 key/value heads
    model = random_model(config)
    attn = model.transformer.h[0].attn
    x = torch.randn(1, 5, config.n_embd)
    pos = torch.arange(5.0)[None]
    angles = pos[..., None] * model.inv_freq
    angles = torch.cat([angles, angles], -1)[:, None]  # (1, 1, 5, D)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
    with torch.no_grad():
        got = attn(x, causal, (angles.cos(), angles.sin()))
        D = config.head_size
        q = attn.q_proj(x).view(1, 5, 4, D).transpose(1, 2)
        k = attn.k_proj(x).view(1, 5, 2, D).transpose(1, 2)
        v = attn.v_proj(x).view(1, 5, 2, D).transpose(1, 2)
        heads = []
        for h in range(4):  # query head h reads key/value head h // 2
            qh = rotate(q[:, h : h + 1], angles.cos(), angles.sin())
            kh = rotate(k[:, h // 2 : h // 2 + 1], angles.cos(), angles.sin())
            scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(D)
            heads.append(scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v[:, h // 2 : h // 2 + 1])
        want = attn.o_proj(torch.cat(heads, 1).transpose(1, 2).reshape(1, 5, 4 * D))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["qwen2", "llama3"])  # 2 and 4 query heads per key/value head
def test_grouped_query_attention_copies_no_cache_and_equals_the_repeated_heads_exactly(name):
    """The key/value heads read in place (sdpa's enable_gqa) give exactly (torch.equal, on the CPU) what k and v
    repeat_interleave'd to every query head give, under a bool mask with left padding, on a full forward and on a
    cached decode step; the cache keeps H_kv heads."""
    config = FAMILIES[name][1]
    model = random_model(config)
    attn = model.transformer.h[0].attn
    group = config.n_head // config.kv_heads
    assert group > 1

    def repeated(x, mask, cos, sin, cache=None):  # the formula with k and v copied to H heads
        N, L, _ = x.shape
        q = rotate(attn.q_proj(x).view(N, L, config.n_head, -1).transpose(1, 2), cos, sin)  # (N, H, L, D)
        k = rotate(attn.k_proj(x).view(N, L, config.kv_heads, -1).transpose(1, 2), cos, sin)  # (N, H_kv, L, D)
        v = attn.v_proj(x).view(N, L, config.kv_heads, -1).transpose(1, 2)  # (N, H_kv, L, D)
        if cache is not None:
            k = torch.cat([cache[0], k], 2)  # (N, H_kv, S, D)
            v = torch.cat([cache[1], v], 2)
        k = k.repeat_interleave(group, dim=1)  # (N, H, S, D)
        v = v.repeat_interleave(group, dim=1)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (N, H, L, D)
        return attn.o_proj(y.transpose(1, 2).reshape(N, L, -1))

    torch.manual_seed(1)
    N, L = 3, 6
    x = torch.randn(N, L + 1, config.n_embd)  # (N, L+1, C)
    real = torch.ones(N, L + 1, dtype=torch.bool)
    real[1, :2] = False  # row 1 left-padded
    angles = torch.arange(L + 1.0)[None, :, None] * model.inv_freq  # (1, L+1, D/2)
    angles = torch.cat([angles, angles], -1)[:, None].expand(N, 1, L + 1, -1)  # (N, 1, L+1, D)
    cos, sin = angles.cos(), angles.sin()
    causal = torch.ones(L + 1, L + 1, dtype=torch.bool).tril()  # (L+1, L+1)
    mask = ((causal & real[:, None, :]) | torch.eye(L + 1, dtype=torch.bool))[:, None]  # (N, 1, L+1, L+1)
    cache = model.new_cache(L + 1)
    with torch.no_grad():
        cache.claim(real[:, :L])
        got = attn(x[:, :L], mask[:, :, :L, :L], (cos[:, :, :L], sin[:, :, :L]), cache, 0)  # (N, L, C)
        assert torch.equal(got, repeated(x[:, :L], mask[:, :, :L, :L], cos[:, :, :L], sin[:, :, :L]))
        assert cache.k[0].shape[1] == config.kv_heads  # the cache holds H_kv heads, no copies
        before = (cache.k[0][:, :, :L].clone(), cache.v[0][:, :, :L].clone())
        cache.claim(real[:, L:])
        step = attn(x[:, L:], mask[:, :, L:], (cos[:, :, L:], sin[:, :, L:]), cache, 0)  # (N, 1, C) a decode step
        assert torch.equal(step, repeated(x[:, L:], mask[:, :, L:], cos[:, :, L:], sin[:, :, L:], before))


# ----------------------------------------------------------------------------- Hugging Face's folders


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_family_folder_loads_with_its_logits_tokenizer_and_stop_ids(tmp_path, name):
    kind, config, tokenizer, stops = FAMILIES[name]
    model = random_model(config)
    spelling = "rope_parameters" if name in ("qwen3", "llama3") else "rope_theta"
    write_folder(tmp_path / name, name, model, shards=2 if name == "llama3" else 1, spelling=spelling)
    loaded, enc, prompt = load_model(tmp_path / name)
    assert loaded.config == dataclasses.replace(config, head_dim=config.head_size, stop_ids=tuple(stops))
    idx, mask = left_pad([[5, 9, 200, 17, 3], [7, 8], [570, 575, 1]], 0)  # 570+: rows past the tokenizer's ids
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx, mask), model(idx, mask), atol=0, rtol=0)
    assert enc.name == ("bpe+nfc" if tokenizer == "qwen" else "bpe") and enc.n_vocab <= config.vocab_size
    assert stop_ids(loaded.config, enc) == stops


def test_bf16_weights_load_as_their_float32_values(tmp_path):
    model = random_model(FAMILIES["qwen2"][1])
    write_folder(tmp_path / "q", "qwen2", model, dtype=torch.bfloat16)
    loaded, _, _ = load_model(tmp_path / "q")
    for k, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], t.to(torch.bfloat16).float()), k


def test_a_missing_or_stale_shard_is_refused_in_one_line(tmp_path):
    model = random_model(FAMILIES["qwen2"][1])
    write_folder(tmp_path / "q", "qwen2", model, shards=3)
    index = tmp_path / "q" / "model.safetensors.index.json"
    good = index.read_text()
    table = json.loads(good)
    name = sorted(table["weight_map"])[0]
    table["weight_map"][name] = "model-00002-of-00003.safetensors"  # the index points elsewhere
    index.write_text(json.dumps(table))
    with pytest.raises(LoadError, match="the index places elsewhere"):
        load_model(tmp_path / "q")
    index.write_text(good)
    os.remove(tmp_path / "q" / "model-00002-of-00003.safetensors")
    with pytest.raises(LoadError, match="No such file|no such file"):
        load_model(tmp_path / "q")


@pytest.mark.parametrize(
    "change, found",
    [
        (dict(model_type="mistral"), "model_type 'mistral'"),
        (dict(model_type="qwen2_moe"), "model_type 'qwen2_moe'"),
        (dict(use_sliding_window=True), "use_sliding_window"),
        (dict(layer_types=["full_attention", "sliding_attention"]), "sliding-window"),
        (dict(rope_scaling=dict(rope_type="yarn", factor=4.0)), "RoPE scaling 'yarn'"),
        (dict(hidden_act="gelu"), "hidden_act"),
        (dict(attention_bias=True), "attention_bias"),
        (dict(num_key_value_heads=3), "num_key_value_heads"),
        (dict(hidden_size=2**20), "the model's is (576, 1048576)"),  # shapes checked on the meta device
        (dict(hidden_size=2**40, head_dim=2**40), "sizes cannot be built"),  # 2^84 bytes: torch refuses even there
        (dict(num_hidden_layers=10**9), "layers 0..1 (2), but config.json says num_hidden_layers = 1000000000"),
        (dict(num_hidden_layers=3), "num_hidden_layers = 3"),
        # numbers out of range, each of which would make the model compute NaN: refused, naming the value
        (dict(rope_theta=-10000.0), "rope_theta = -10000.0 is not a finite positive number"),
        (dict(rope_theta=0), "rope_theta = 0 is not"),
        (dict(rope_theta=float("nan")), "rope_theta = nan is not"),
        (dict(rope_theta=10**400), "rope_theta = "),  # past any float
        (dict(rms_norm_eps=float("nan")), "rms_norm_eps = nan is not"),
        (dict(rms_norm_eps=-1), "rms_norm_eps = -1 is not"),
        (dict(head_dim=17), "head width 17 is odd"),
        (dict(rope_scaling=SCALING | dict(rope_type="llama3", factor=float("nan"))), "factor = nan is not"),
        (dict(rope_scaling=SCALING | dict(rope_type="llama3", factor=0.0, high_freq_factor=1.0)), "factor = 0.0"),
        (dict(rope_scaling=SCALING | dict(rope_type="llama3", high_freq_factor=1.0)), "are both 1.0"),
        (dict(rope_scaling=SCALING | dict(rope_type="llama3", low_freq_factor=-1.0)), "low_freq_factor = -1.0"),
        (
            dict(rope_scaling=SCALING | dict(rope_type="llama3", original_max_position_embeddings=0)),
            "original_max_position_embeddings = 0 is not a positive integer",
        ),
        (dict(rope_scaling=["llama3"]), "rope_scaling is not a JSON object"),
    ],
)
def test_what_is_out_of_scope_is_refused_in_one_line_naming_it(tmp_path, change, found):
    write_folder(tmp_path / "m", "llama3", random_model(FAMILIES["llama3"][1]))
    path = tmp_path / "m" / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | change))
    with pytest.raises(LoadError) as e:
        load_model(tmp_path / "m")
    assert found in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_checkpoints_absurd_numbers_are_refused_in_one_line(tmp_path):
    """A checkpoint's config (signed anew: the digest finds damage, not intent) is checked as config.json is."""
    write_folder(tmp_path / "m", "llama3", random_model(FAMILIES["llama3"][1]))
    model, enc, _ = load_model(tmp_path / "m")
    save_checkpoint(tmp_path / "c.pt", model, enc)
    ckpt = torch.load(tmp_path / "c.pt", weights_only=True)
    for change, found in (
        (dict(n_head=0), "is not a GPTConfig"),  # a division by n_head comes after the sizes' check
        (dict(n_head=0, n_kv_head=0), "is not a GPTConfig"),
        (dict(norm_eps=float("nan")), "norm_eps = nan is not a finite positive number"),
        (dict(rope_theta=-1.0), "rope_theta = -1.0"),
        (dict(rope_scaling=SCALING | dict(high_freq_factor=1.0)), "are both 1.0"),
    ):
        crafted = {k: v for k, v in ckpt.items() if k != "digest"}
        crafted["config"] = crafted["config"] | change
        torch.save({**crafted, "digest": digest(crafted)}, tmp_path / "x.pt")
        with pytest.raises(LoadError) as e:
            load_model(tmp_path / "x.pt")
        assert found in str(e.value) and str(tmp_path / "x.pt") in str(e.value) and "\n" not in str(e.value), change


def fixture_json(name):
    with open(os.path.join(FIXTURES, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)


def test_added_tokens_are_bounded_and_follow_the_vocab_without_a_gap(tmp_path):
    """Each added token becomes a tiktoken special: a million are refused before tiktoken sees one; ids past the
    vocab's must run on from it (ids in a gap could be sampled but never decoded); one inside the vocab is its own."""
    tok = fixture_json("llama3")  # vocab 0..555, added 556..560
    path = tmp_path / "tokenizer.json"
    many = [dict(id=556 + i, content=f"<|reserved_{i}|>") for i in range(10**6)]
    gap = tok["added_tokens"][:-1] + [tok["added_tokens"][-1] | dict(id=575)]  # 560 -> 575: 560..574 a gap
    twice = tok["added_tokens"] + [tok["added_tokens"][0] | dict(id=561)]  # one text twice: id 556 left out
    for added, found in (
        (many, "not a list of at most 65536"),
        (gap, "ids [556, 557, 558, 559, 575] leave a gap after the vocab's 0..555"),
        (twice, "leave a gap after the vocab's 0..555"),
        (dict(a=1), "not a list"),
    ):
        path.write_text(json.dumps(tok | dict(added_tokens=added)))
        with pytest.raises(LoadError) as e:
            tokenizer_from_json(path)
        assert found in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value), found
    inside = tok["added_tokens"] + [dict(id=5, content="&")]  # the vocab's own token 5: not a special
    path.write_text(json.dumps(tok | dict(added_tokens=inside)))
    assert tokenizer_from_json(path).n_vocab == 561


def test_a_pattern_tiktoken_cannot_run_is_refused_at_load_and_a_failing_encode_is_one_line(tmp_path, capfd):
    """tiktoken accepts these regexes but cannot run them: one matches the empty string (encode panics in Rust), one
    backtracks past its limit on a long word. Both are refused at load, from tokenizer.json or a checkpoint, in one
    line and without Rust's panic message; a text that fails at run time ends in LoadError, one line."""
    tok = fixture_json("qwen")
    path = tmp_path / "tokenizer.json"
    steps = tok["pre_tokenizer"]["pretokenizers"]  # [Split, ByteLevel]
    for regex, found in (("|x*", "matches the empty string"), (r"(?:x|xx)+(?=y)|\w+|\s+|.", "Max limit for backtr")):
        pre = dict(type="Sequence", pretokenizers=[steps[0] | dict(pattern=dict(Regex=regex)), *steps[1:]])
        path.write_text(json.dumps(tok | dict(pre_tokenizer=pre)))
        with pytest.raises(LoadError) as e:
            tokenizer_from_json(path)
        assert f"{path}: tiktoken cannot use its pattern" in str(e.value) and found in str(e.value), str(e.value)
    enc = tokenizer_from_json(os.path.join(FIXTURES, "qwen.json"))
    save_checkpoint(tmp_path / "c.pt", random_model(FAMILIES["qwen2"][1]), enc)
    ckpt = torch.load(tmp_path / "c.pt", weights_only=True)
    crafted = {k: v for k, v in ckpt.items() if k != "digest"} | dict(tokenizer_pattern="|x*")
    torch.save({**crafted, "digest": digest(crafted)}, tmp_path / "x.pt")
    with pytest.raises(LoadError, match="x.pt: tiktoken cannot use its pattern '|x\\*': it matches the empty"):
        load_model(tmp_path / "x.pt")
    assert "panicked" not in capfd.readouterr().err  # nothing ran that panics
    ranks = {bytes([b]): b for b in range(256)}  # a regex that passes the probes but gives up on a long run of z
    late = tiktoken.Encoding("bpe", pat_str=r"(?:z|zz)+(?=y)|\w+|\s+|.", mergeable_ranks=ranks, special_tokens={})
    assert encode_text(late, "zz z") == late.encode("zz z")
    with pytest.raises(LoadError, match="tokenizer 'bpe' cannot encode 'zzzz.*Max limit for backtracking") as e:
        encode_text(late, "z" * 5000)
    assert "\n" not in str(e.value)


def test_a_checkpoints_special_tokens_with_a_gap_are_refused(tmp_path):
    enc = tokenizer_from_json(os.path.join(FIXTURES, "qwen.json"))  # vocab 0..539, specials 540..542
    save_checkpoint(tmp_path / "c.pt", random_model(FAMILIES["qwen2"][1]), enc)
    ckpt = torch.load(tmp_path / "c.pt", weights_only=True)
    specials = dict(ckpt["tokenizer_specials"]) | {"<|im_end|>": 560}
    crafted = {k: v for k, v in ckpt.items() if k != "digest"} | dict(tokenizer_specials=specials)
    torch.save({**crafted, "digest": digest(crafted)}, tmp_path / "x.pt")
    with pytest.raises(LoadError, match="x.pt: its tokenizer's ranks are not a byte-level BPE's"):
        load_model(tmp_path / "x.pt")


def test_a_tokenizer_that_is_not_a_byte_level_bpe_with_a_split_is_refused(tmp_path):
    tok = json.loads(open(os.path.join(FIXTURES, "qwen.json"), encoding="utf-8").read())
    for broken, found in [
        (dict(model=dict(type="WordPiece", vocab={})), "not a byte-level BPE"),
        (dict(normalizer=dict(type="NFKC")), "normalizer is 'NFKC'"),
        (dict(pre_tokenizer=dict(type="Metaspace")), "pre-tokenizer is ['Metaspace']"),
    ]:
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(tok | broken))
        with pytest.raises(LoadError, match=re.escape(found)):
            tokenizer_from_json(path)


# ----------------------------------------------------------------------------- tokenizers, templates, stops


@pytest.mark.parametrize("name", ["qwen", "llama3", "smollm2", "smollm2_real"])
def test_tokenizer_json_gives_the_ids_hugging_face_gave(name):
    """smollm2_real lacks 21 single bytes, as the real SmolLM2's vocabulary: a text holding one ("!\x04!") drops it
    from its piece and merges the rest ("!!"), as Hugging Face's tokenizers does."""
    with open(os.path.join(FIXTURES, "expected_ids.json"), encoding="utf-8") as f:
        expected = json.load(f)[name]
    enc = tokenizer_from_json(os.path.join(FIXTURES, f"{name}.json"))
    for text, ids in expected.items():
        if any(s in text for s in enc.special_tokens_set):  # Hugging Face reads an added token's text as the token
            text_ids = enc.encode(text, allowed_special="all")
        else:
            text_ids = encode_text(enc, text)
        assert text_ids == ids, text
    nfc = "café é" if name == "qwen" else "café e\u0301"  # Qwen's normalizer composes; Llama-3 has none
    assert enc.decode(encode_text(enc, "café e\u0301")) == nfc


def test_a_templates_specials_are_specials_and_a_questions_are_text():
    enc = tokenizer_from_json(os.path.join(FIXTURES, "qwen.json"))
    ids = encode_prompt(enc, TEMPLATES["qwen3"], "Is <|im_end|> text? 7+5")
    im_start = enc.encode_single_token("<|im_start|>")
    im_end = enc.encode_single_token("<|im_end|>")
    assert ids.count(im_start) == 2 and ids.count(im_end) == 1  # the template's, not the question's
    assert enc.decode(ids) == TEMPLATES["qwen3"].format(question="Is <|im_end|> text? 7+5")
    plain = encode_prompt(enc, "Q: {question}\nA: ", "Ann has 3 pens")  # no specials: one run, encoded whole
    assert plain == encode_text(enc, "Q: Ann has 3 pens\nA: ")


def test_a_completion_ends_at_the_first_of_its_stop_ids():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=64, vocab_size=20, n_layer=1, n_head=2, n_embd=16)).eval()
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.transformer.ln_f.bias.copy_(torch.zeros(16))  # logits all 0: uniform over 20 tokens
    g = torch.Generator().manual_seed(3)
    roll = generate(model, [[1, 2, 3]], 64, 30, eos_id=[19, 7, 11], generator=g)
    stopped = 0
    for row, n, cut in zip(roll.completion.tolist(), roll.lengths.tolist(), roll.truncated.tolist()):
        first = next((t for t, tok in enumerate(row) if tok in (19, 7, 11)), None)
        assert cut == (first is None) and n == (30 if cut else first + 1)
        stopped += row[n - 1] in (7, 11) if not cut else 0
    assert stopped > 10  # the other stop ids end completions, not only eos_id
    assert roll.completion_mask.sum().item() == roll.lengths.sum().item()


def test_stop_ids_put_the_one_that_closes_the_templates_turn_first():
    enc = tokenizer_from_json(os.path.join(FIXTURES, "qwen.json"))
    config = GPTConfig(**LLAMA, stop_ids=(540, 542))  # <|endoftext|>, <|im_end|>
    assert stop_ids(config, enc) == [540, 542]
    assert stop_ids(config, enc, TEMPLATES["qwen2.5"]) == [542, 540]  # <|im_end|> closes a turn there
    llama = tokenizer_from_json(os.path.join(FIXTURES, "llama3.json"))  # no <|endoftext|>: nothing assumes it
    with pytest.raises(ValueError, match="no <|endoftext|>"):
        stop_ids(GPTConfig(**LLAMA), llama)


# ----------------------------------------------------------------------------- checkpoints and train.py


def test_a_checkpoint_keeps_the_tokenizer_json_and_stop_ids(tmp_path):
    write_folder(tmp_path / "m", "llama3", random_model(FAMILIES["llama3"][1]))
    model, enc, prompt = load_model(tmp_path / "m")
    save_checkpoint(tmp_path / "c.pt", model, enc, TEMPLATES["llama3"])
    again, enc2, prompt2 = load_model(tmp_path / "c.pt")
    text = "Ünïcödé 12345 <|eot_id|>"
    assert enc2.name == enc.name and encode_text(enc2, text) == encode_text(enc, text)
    assert enc2.special_tokens_set == enc.special_tokens_set and prompt2 == TEMPLATES["llama3"]
    assert again.config == model.config and stop_ids(again.config, enc2, prompt2) == [560, 557]
    idx = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(again(idx), model(idx))
    assert load_checkpoint(tmp_path / "c.pt")["tokenizer_pattern"] == enc._pat_str


def test_train_runs_from_a_qwen_folder_resumes_bit_for_bit_and_samples_from_its_checkpoint(tmp_path):
    """Two steps from a Qwen2 folder with its chat template; the same run stopped after one step and resumed gives the
    same log and weights; sample.py reads the checkpoint (tokenizer.json's ranks, pattern, specials, stop ids)."""
    config = dataclasses.replace(FAMILIES["qwen2"][1], block_size=1024)  # GSM8K's questions are long in 600 tokens
    write_folder(tmp_path / "qwen", "qwen2", random_model(config))
    data = os.path.join(ROOT, "tests", "data", "gsm8k_sample.jsonl")
    flags = ["--init_from", str(tmp_path / "qwen"), "--data", data, "--prompt", "qwen2.5", "--sft_steps", "2"]
    flags += ["--sft_batch", "2", "--batch_prompts", "2", "--G", "2", "--max_new_tokens", "8", "--eval_size", "2"]
    flags += ["--eval_every", "1", "--device", "cpu"]

    def train(out, *more):
        cmd = [sys.executable, "train.py", *flags, "--out_dir", str(out), *more]
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert run.returncode == 0, run.stderr
        return [
            {k: v for k, v in json.loads(line).items() if k not in ("dt", "tok_s")}
            for line in open(out / "metrics.jsonl")
        ]

    whole = train(tmp_path / "a", "--steps", "2")
    train(tmp_path / "b", "--steps", "1")
    resumed = train(tmp_path / "b", "--init_from", "resume", "--steps", "2")
    assert [r["step"] for r in whole if r["kind"] == "train"] == [1, 2] and resumed == whole
    model, enc, prompt = load_model(tmp_path / "a" / "ckpt.pt")
    again, _, _ = load_model(tmp_path / "b" / "ckpt.pt")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    assert prompt == TEMPLATES["qwen2.5"] and model.config.arch == "llama" and model.config.stop_ids == (540, 542)
    cmd = [sys.executable, "sample.py", "--ckpt", str(tmp_path / "a" / "ckpt.pt"), "--G", "2", "--max_new_tokens", "6"]
    sampled = subprocess.run(
        [*cmd, "--device", "cpu", "How many?"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert sampled.returncode == 0 and sampled.stdout.count("--- sample") == 2, sampled.stderr


def test_the_default_template_of_a_model_without_one_still_reads_the_questions():
    enc = tokenizer_from_json(os.path.join(FIXTURES, "qwen.json"))
    roll = generate(
        random_model(FAMILIES["qwen2"][1]), [encode_prompt(enc, TEMPLATES["plain"], "2+2?")], 2, 5, eos_id=540
    )
    assert len(completions_text(roll, enc)) == 2  # ids 543..575, past the tokenizer, decode to nothing


def test_a_folder_without_stop_ids_or_endoftext_and_a_template_without_question_end_in_one_line(tmp_path):
    write_folder(tmp_path / "m", "llama3", random_model(FAMILIES["llama3"][1]))
    os.remove(tmp_path / "m" / "generation_config.json")  # and config.json names no eos_token_id
    with pytest.raises(LoadError, match="no <.endoftext.> and the model names no stop ids; put the model's gen"):
        load_model(tmp_path / "m")
    cmd = [sys.executable, "train.py", "--prompt", "Q: no placeholder", "--out_dir", str(tmp_path / "o")]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 1 and run.stderr.startswith("error: --prompt 'Q: no placeholder' is neither one of")
    assert run.stderr.count("\n") == 1, run.stderr


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_llama_family_model_exports_and_loads_back_bit_for_bit(tmp_path, name):
    """plumbing/export.llama_files: a folder in its family's spelling that load_model reads back to the same weights,
    config, tokenizer (ranks, pattern, specials) and template (transformers' side: tests/check_real.py)."""
    kind, config, tokenizer, stops = FAMILIES[name]
    write_folder(tmp_path / "src", name, random_model(config))
    model, enc, _ = load_model(tmp_path / "src")
    template = TEMPLATES["llama3"] if tokenizer == "llama3" else TEMPLATES["qwen3"]
    hf_export.export(model, enc, template, tmp_path / "out")
    back, enc_back, template_back = load_model(tmp_path / "out")
    assert back.config == model.config and template_back == template
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
    assert enc_back._mergeable_ranks == enc._mergeable_ranks and enc_back._special_tokens == enc._special_tokens
    assert enc_back._pat_str == enc._pat_str and enc_back.name == enc.name
    with open(tmp_path / "out" / "config.json") as f:
        assert json.load(f)["model_type"] == kind
    with open(tmp_path / "out" / "chat_template.jinja") as f:
        assert "messages[-1]['content']" in f.read()
    hf_export.export(model, enc, template, tmp_path / "out")  # an earlier export is replaced
    assert load_model(tmp_path / "out")[2] == template


def test_a_folders_chat_template_picks_its_format_or_is_refused_in_one_line(tmp_path):
    """The folder's own chat format without --prompt: chat_template.jinja or tokenizer_config.json's chat_template;
    none: the plain prompt; one nanogrpo does not know: refused in one line naming --prompt's choices. A template whose
    markers are not the tokenizer's specials is refused, not encoded as text."""
    write_folder(tmp_path / "m", "smollm2_real", random_model(FAMILIES["smollm2_real"][1]))
    assert load_model(tmp_path / "m")[2] == TEMPLATES["plain"]  # no chat template: a base model's prompt
    (tmp_path / "m" / "chat_template.jinja").write_text(SMOLLM2_JINJA)
    model, enc, prompt = load_model(tmp_path / "m")
    assert prompt == TEMPLATES["smollm2"] and choose_template(None, prompt, enc, "m") == prompt
    os.remove(tmp_path / "m" / "chat_template.jinja")
    config = dict(chat_template=[dict(name="tool_use", template="x"), dict(name="default", template=SMOLLM2_JINJA)])
    (tmp_path / "m" / "tokenizer_config.json").write_text(json.dumps(config))
    assert load_model(tmp_path / "m")[2] == TEMPLATES["smollm2"]
    (tmp_path / "m" / "chat_template.jinja").write_text("{{ '[INST] ' + messages[0]['content'] + ' [/INST]' }}")
    assert load_model(tmp_path / "m")[2] is None
    with pytest.raises(LoadError, match="m's chat template is not one nanogrpo knows: give --prompt, one of plain"):
        choose_template(None, None, enc, "m")
    assert choose_template("[INST] {question} [/INST]", None, enc, "m") == "[INST] {question} [/INST]"
    with pytest.raises(LoadError, match="<.eot_id.>, <.start_header_id.> is no special token of this tokenizer"):
        choose_template("llama3", prompt, enc, "m")
    cmd = [sys.executable, "train.py", "--init_from", str(tmp_path / "m"), "--out_dir", str(tmp_path / "o")]
    run = subprocess.run([*cmd, "--steps", "0"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 1 and "chat template is not one nanogrpo knows" in run.stderr, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr


def test_a_tokenizer_larger_than_the_embedding_is_refused_naming_its_extra_tokens(tmp_path):
    config = dataclasses.replace(FAMILIES["qwen2"][1], vocab_size=541)  # the fixture's specials reach id 542
    write_folder(tmp_path / "m", "qwen2", random_model(config))
    os.remove(tmp_path / "m" / "generation_config.json")  # its stop ids are past the embedding too
    with pytest.raises(LoadError, match=r"has 541 token ids but tokenizer 'bpe\+nfc' has 543 \('<\|im_start\|>', '<"):
        load_model(tmp_path / "m")
