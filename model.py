"""
model.py: the policy π_θ of GRPO, a nanoGPT-style GPT that takes left-padded batches and a KV cache: GPT-2's block,
or the Llama family's (Llama-3, Qwen2/2.5, Qwen3, SmolLM2) by its config.

The language model is the policy: π_θ(o_t | q, o_<t) = softmax(logits_t / τ), where τ is the sampling
temperature (τ = 1 is the model's own distribution; sample.py and grpo.py divide by the same τ). Two blocks, side by
side below, one residual stream x ← x + attn(norm(x)); x ← x + mlp(norm(x)):
- GPT-2 (arch "gpt2"): GPT-2's parameter names (transformer.wte, transformer.wpe, transformer.h.N.{ln_1,
  attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, transformer.ln_f, lm_head tied to wte), LayerNorm with
  ε = 1e-5, learned positions added to the embedding, the tanh GELU, so GPT-2's weights load into it.
- The Llama family (arch "llama"): RMSNorm w·x/sqrt(mean(x²) + ε); RoPE, which turns each pair of q's and k's
  features by pos·ω_j (ω_j = θ^(-2j/D), Llama-3.1's scaling optional), so q·k depends on the positions' difference;
  grouped-query attention (H_kv ≤ H heads of keys and values, each shared by H/H_kv queries; the cache keeps H_kv);
  the SwiGLU MLP down(silu(gate(x)) · up(x)); options: q/k/v biases (Qwen2), an RMSNorm of each head's q and k
  (Qwen3, with its own head width D), an untied lm_head. Names follow Hugging Face's inside attn and mlp.
plumbing/hf.py reads Hugging Face's folders of both into it; plumbing/checkpoint.load_model is the entry point.
Text becomes token ids in plumbing/tokenizer.py: this file sees ids only.

Shape letters used in this repository (named once, here):
    B  prompts in a batch          G  completions per prompt (rows are N = B*G)
    P  prompt length after left padding
    T  completion length           V  vocabulary size
    L  tokens fed in one forward   S  keys attended to (cache + new tokens)
    C  embedding width             H  heads, D head width (C // H unless the config sets it)

Mask convention (the only one in the project): `mask` is a bool tensor, True for a real token and False for
left padding. It is never derived from token ids, because the pad id and the EOS id are the same token.
Positions start at each row's first real token, so a left-padded row gives the same logits as the same
sequence alone (tests/test_model.py).

The device (the end of the file): best_device() picks cuda, then mps, then cpu; bf16_supported() says where bf16
autocast is the default; GPT.step_memory estimates what a GRPO step holds, from which GPT.check_memory picks the rows
a forward/backward that fit the device (device_memory) or refuses the sizes, before any work.

Where this departs from GPT-2 / DeepSeekMath (a 7B model pretrained on math):
- a small model trained from scratch by default (train.py's warm start), or GPT-2's weights;
- no dropout: RL needs the sampler and the trainer to see the same function.
"""

import bisect
import math
import os
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


def left_pad(seqs, pad_id, device="cpu"):
    """Token lists -> idx (N, L) long and mask (N, L) bool on `device`, True on real tokens, padded on the left."""
    L = max(len(s) for s in seqs)
    idx = torch.full((len(seqs), L), pad_id, dtype=torch.long)  # (N, L)
    mask = torch.zeros(len(seqs), L, dtype=torch.bool)  # (N, L)
    for n, s in enumerate(seqs):
        idx[n, L - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[n, L - len(s) :] = True
    return idx.to(device), mask.to(device)


# ----------------------------------------------------------------------------- KV cache


class KVCache:
    """Keys and values of every layer for incremental decoding, plus the key mask.

    k[l], v[l]: (N, H, S_max, D), allocated on first use; valid: (N, S_max) bool, True where a
    column holds a real token. Each forward call first `claim`s the columns of its L new tokens,
    then every layer `update`s them. Two ways to attend, the same numbers up to float rounding:
    - dynamic (the default): the host counts the columns filled, and attention sees those S
      columns only, so each decode step has a new shape. The simplest, and the cheapest on a CPU.
    - static=True: the next free column is a device tensor, `col`, and attention always spans all
      S_max columns, the empty ones masked out. Every decode step is then the same computation on
      the same buffers, with no host value changing between steps: what a CUDA graph can capture
      once and replay (sample.py, decode="static"/"graph"). Nothing is checked on the host per
      step, so the caller must not feed more than max_len tokens (sample.py sizes it).
    """

    def __init__(self, n_layer, max_len, static=False):
        self.n_layer = n_layer
        self.max_len = max_len
        self.static = static
        self.k = [None] * n_layer  # per layer: (N, H, S_max, D), allocated on first use
        self.v = [None] * n_layer
        self.valid = None  # (N, S_max) bool, allocated on first use
        self.length = 0  # dynamic: columns filled, counted on the host
        self.col = None  # static: (1,) long on the device, the next column to fill
        self.cols = None  # (L,) long, the columns of the forward call in progress

    def claim(self, mask):
        """Take the next L columns for new tokens whose mask is `mask` (N, L).

        Returns their columns (L,) long and the key mask (N, S) bool of everything they may attend to.
        """
        N, L = mask.shape
        if self.valid is None:
            self.valid = torch.zeros(N, self.max_len, dtype=torch.bool, device=mask.device)  # (N, S_max)
            self.col = torch.zeros(1, dtype=torch.long, device=mask.device)  # (1,)
        if self.static:
            self.cols = self.col + torch.arange(L, device=mask.device)  # (L,) computed on the device
            self.valid.index_copy_(1, self.cols, mask)
            self.col += L
            return self.cols, self.valid  # (L,), (N, S_max)
        if self.length + L > self.max_len:
            raise ValueError(f"KV cache full: {self.length} + {L} > {self.max_len}")
        self.cols = torch.arange(self.length, self.length + L, device=mask.device)  # (L,)
        self.valid[:, self.length : self.length + L] = mask
        self.length += L
        return self.cols, self.valid[:, : self.length]  # (L,), (N, S)

    def update(self, layer, k, v):
        """Write the claimed columns' keys/values k, v (N, H, L, D); return all keys/values (N, H, S, D)."""
        N, H, L, D = k.shape
        if self.k[layer] is None:
            self.k[layer] = k.new_zeros(N, H, self.max_len, D)  # (N, H, S_max, D)
            self.v[layer] = v.new_zeros(N, H, self.max_len, D)  # (N, H, S_max, D)
        if self.static:
            self.k[layer].index_copy_(2, self.cols, k)
            self.v[layer].index_copy_(2, self.cols, v)
            return self.k[layer], self.v[layer]  # (N, H, S_max, D), empty columns masked by `valid`
        self.k[layer][:, :, self.length - L : self.length] = k  # claim() has counted these L columns
        self.v[layer][:, :, self.length - L : self.length] = v
        return self.k[layer][:, :, : self.length], self.v[layer][:, :, : self.length]

    def repeat_interleave(self, G):
        """Row n becomes rows n*G .. n*G+G-1: prefill B prompts once, then decode B*G rows."""
        self.k = [t.repeat_interleave(G, dim=0) if t is not None else None for t in self.k]
        self.v = [t.repeat_interleave(G, dim=0) if t is not None else None for t in self.v]
        self.valid = self.valid.repeat_interleave(G, dim=0)
        return self


# ----------------------------------------------------------------------------- the GPT


@dataclass
class GPTConfig:
    block_size: int = 256  # longest sequence (positions) the model can see
    vocab_size: int = 257  # 256 bytes + <|endoftext|> (more with words: plumbing/tokenizer.py); 50257 for gpt2
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 256
    bias: bool = True  # GPT-2 has biases in Linear and LayerNorm
    # "gpt2", or "llama": the Llama family's block (Llama-3, Qwen2/2.5, Qwen3, SmolLM2); the fields below are its own
    arch: str = "gpt2"
    n_kv_head: int = 0  # grouped-query attention: heads of keys and values, each shared by n_head / n_kv_head queries
    head_dim: int = 0  # D; 0: n_embd // n_head (Qwen3 sets its own)
    mlp_size: int = 0  # the SwiGLU MLP's inner width (intermediate_size)
    norm_eps: float = 1e-6  # RMSNorm's ε (GPT-2's LayerNorm keeps 1e-5)
    rope_theta: float = 10000.0  # RoPE's base θ
    rope_scaling: dict | None = None  # Llama-3.1's "llama3" scaling: factor, low/high_freq_factor, original length
    qkv_bias: bool = False  # biases on q, k and v only (Qwen2)
    qk_norm: bool = False  # an RMSNorm over each head's q and k before RoPE (Qwen3)
    tie_embeddings: bool = True  # lm_head shares wte's weight
    stop_ids: tuple = ()  # the ids that end a completion, the first also pads; (): the tokenizer's <|endoftext|>

    @property
    def kv_heads(self):
        return self.n_kv_head or self.n_head

    @property
    def head_size(self):
        return self.head_dim or self.n_embd // self.n_head


# ---------------- GPT-2's block: LayerNorm, learned absolute positions (wpe, in GPT.forward), GELU MLP


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0, "n_embd must be divisible by n_head"
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x, attn_mask, rope=None, cache=None, layer=0):  # rope: None, GPT-2 adds positions to x instead
        N, L, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(N, L, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (N, H, L, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (N, H, S, D)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (N, H, L, D)
        return self.c_proj(y.transpose(1, 2).contiguous().view(N, L, C))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


# ---------------- the Llama family's block: RMSNorm, rotary positions (RoPE), grouped-query attention, SwiGLU MLP


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):  # w · x / sqrt(mean(x²) + ε), the division in float32
        x32 = x.float()  # (..., C)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., C)
        return self.weight * x32.to(x.dtype)


def rope_frequencies(config):
    """RoPE's angular frequencies (D/2,) float32: ω_j = θ^(-2j/D). Llama-3.1's "llama3" scaling divides the low ones
    (wavelength 2π/ω above original/low_freq_factor) by `factor`, keeps the high ones (below original/high_freq_factor)
    and blends linearly between them."""
    D = config.head_size
    inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, D, 2, dtype=torch.int64, device="cpu").float() / D)  # (D/2,)
    s = config.rope_scaling
    if not s:
        return inv_freq
    original = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq  # (D/2,)
    smooth = (original / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])  # (D/2,)
    blended = (1 - smooth) * inv_freq / s["factor"] + smooth * inv_freq  # (D/2,)
    scaled = torch.where(wavelen > original / s["low_freq_factor"], inv_freq / s["factor"], inv_freq)  # (D/2,)
    medium = (wavelen <= original / s["low_freq_factor"]) & (wavelen >= original / s["high_freq_factor"])  # (D/2,)
    return torch.where(medium, blended, scaled)


def rotate(x, cos, sin):
    """RoPE: each pair (x_j, x_{j+D/2}) of x (N, H, L, D) turned by the angle pos·ω_j; cos, sin (N, 1, L, D)."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (N, H, L, D)
    return x * cos + turned * sin


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.n_kv_head = config.kv_heads
        self.gqa = config.n_head != config.kv_heads  # grouped-query attention: H_kv < H key/value heads
        D = config.head_size
        self.q_proj = nn.Linear(config.n_embd, config.n_head * D, bias=config.qkv_bias)
        self.k_proj = nn.Linear(config.n_embd, config.kv_heads * D, bias=config.qkv_bias)
        self.v_proj = nn.Linear(config.n_embd, config.kv_heads * D, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.n_head * D, config.n_embd, bias=False)
        self.q_norm = RMSNorm(D, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(D, config.norm_eps) if config.qk_norm else None

    def forward(self, x, attn_mask, rope, cache=None, layer=0):  # rope: (cos, sin), each (N, 1, L, D)
        N, L, C = x.shape
        q = self.q_proj(x).view(N, L, self.n_head, -1)  # (N, L, H, D)
        k = self.k_proj(x).view(N, L, self.n_kv_head, -1)  # (N, L, H_kv, D)
        v = self.v_proj(x).view(N, L, self.n_kv_head, -1)  # (N, L, H_kv, D)
        if self.q_norm is not None:  # Qwen3
            q = self.q_norm(q)
            k = self.k_norm(k)
        q = rotate(q.transpose(1, 2), *rope)  # (N, H, L, D)
        k = rotate(k.transpose(1, 2), *rope)  # (N, H_kv, L, D)
        v = v.transpose(1, 2)  # (N, H_kv, L, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (N, H_kv, S, D): the cache keeps H_kv heads
        # softmax(q·k / sqrt(D)) v; query head h reads key/value head h // (H / H_kv), not copied (tests/test_hf.py)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=self.gqa)  # (N, H, L, D)
        return self.o_proj(y.transpose(1, 2).reshape(N, L, -1))


class SwiGLU(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.n_embd, config.mlp_size, bias=False)
        self.up_proj = nn.Linear(config.n_embd, config.mlp_size, bias=False)
        self.down_proj = nn.Linear(config.mlp_size, config.n_embd, bias=False)

    def forward(self, x):  # down(silu(gate(x)) · up(x))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# ---------------- the GPT: a stack of either block


class Block(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x)): GPT-2's parts, or the Llama family's (config.arch)."""

    def __init__(self, config):
        super().__init__()
        llama = config.arch == "llama"
        C = config.n_embd
        self.ln_1 = RMSNorm(C, config.norm_eps) if llama else nn.LayerNorm(C, bias=config.bias)
        self.attn = LlamaAttention(config) if llama else CausalSelfAttention(config)
        self.ln_2 = RMSNorm(C, config.norm_eps) if llama else nn.LayerNorm(C, bias=config.bias)
        self.mlp = SwiGLU(config) if llama else MLP(config)

    def forward(self, x, attn_mask, rope=None, cache=None, layer=0):
        x = x + self.attn(self.ln_1(x), attn_mask, rope, cache, layer)
        return x + self.mlp(self.ln_2(x))


RESIDUAL_OUT = ("c_proj.weight", "o_proj.weight", "down_proj.weight")  # the projections into the residual stream
LOGIT_COPIES = 4  # float32 (rows, T, V) tensors alive at once at the head's backward (GPT.step_memory)
FIT_SHARE = 0.5  # of the memory, the most a chosen micro-batch fills: the rest for the estimate's error and others


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.arch not in ("gpt2", "llama"):
            raise ValueError(f"unknown arch {config.arch!r}; choose 'gpt2' or 'llama'")
        self.config = config
        llama = config.arch == "llama"
        C = config.n_embd
        layers = dict(wte=nn.Embedding(config.vocab_size, C))
        if not llama:  # GPT-2 learns a vector per position; the Llama family rotates q and k instead (RoPE)
            layers["wpe"] = nn.Embedding(config.block_size, C)
        layers["h"] = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        layers["ln_f"] = RMSNorm(C, config.norm_eps) if llama else nn.LayerNorm(C, bias=config.bias)
        self.transformer = nn.ModuleDict(layers)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.transformer.wte.weight  # weight tying, as GPT-2
        if llama:  # not a parameter, not saved: computed from the config, on the host in float32
            where = self.lm_head.weight.device  # the meta device: shapes only, nothing computed
            freqs = torch.empty(config.head_size // 2) if where.type == "meta" else rope_frequencies(config)
            self.register_buffer("inv_freq", freqs.to(where), persistent=False)
        # GPT-2 init: N(0, 0.02) everywhere, residual projections scaled by 1/sqrt(2 * n_layer)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(RESIDUAL_OUT):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self):
        """Parameter count; a tied lm_head is counted once (as wte)."""
        return sum(p.numel() for p in self.parameters())

    def step_memory(self, sampled, trained, cols, completion, ref=False, bf16=False):
        """An estimate of the bytes a GRPO step holds at its peak: `sampled` rows decoded at once, `trained` rows a
        forward/backward, of `cols` columns whose last `completion` are sampled and scored; a reference if `ref`;
        bf16 activations (autocast) if `bf16`, else float32. float32 weights and AdamW's moments (12 bytes a parameter,
        16 with the reference), and the largest of the sampling (the last step's gradients, the KV cache, (rows, V)
        float32 logits), a forward/backward (what autograd keeps, as counted below; the head's output and LOGIT_COPIES
        float32 (rows, T, V) at its backward, which begins with no gradient) and AdamW's update (the gradients, the
        largest parameter's temporaries). Python and torch's own buffers are not counted (tests/bench_memory.py)."""
        c = self.config
        act = 2 if bf16 else 4  # bytes of an activation
        C = c.n_embd
        V = c.vocab_size
        HD = c.n_head * c.head_size  # q's width, H·D
        KD = c.kv_heads * c.head_size  # k's and v's, H_kv·D
        head = completion if c.arch == "llama" else cols  # columns the head runs on under grad (forward)
        if c.arch == "llama":  # 2 RMSNorms' x and x·rsqrt; their outputs, q, k, v, attention out, SwiGLU's 4; the mask
            layer = 16 * C + act * (2 * C + 3 * HD + 2 * KD + 4 * c.mlp_size + cols)
            layer += 12 * (HD + KD) if c.qk_norm else 0  # q's and k's RMSNorms
        else:  # x twice; 2 LayerNorms' outputs, q k v, attention out and its copy, the MLP's 4C in and out; the mask
            layer = 8 * C + act * (15 * C + cols)
        row = cols * (c.n_layer * layer + 16 * C) + head * V * act + LOGIT_COPIES * completion * V * 4  # one row's
        grads = 4 * self.num_params()
        sampling = grads + sampled * (cols * c.n_layer * 2 * KD * act + 4 * V * 4)
        update = grads + 8 * max(p.numel() for p in self.parameters())
        return grads * (4 if ref else 3) + max(sampling, trained * row, update)  # weights, 2 moments, π_ref

    def check_memory(self, device, rows, cols, completion, micro_batch=0, ref=False, bf16=False):
        """The rows a forward/backward of a step of `rows` rows (step_memory's sizes) on `device`: `micro_batch`, or if
        0 the most that fit in FIT_SHARE of device_memory (all where it is unknown). Raises torch.OutOfMemoryError, as
        the allocator would but before any work, naming the most rows that fit, when one row does not fit in that
        share, or `micro_batch` rows in all of it."""
        have = device_memory(device) if device is not None else None
        sizes = dict(cols=cols, completion=completion, ref=ref, bf16=bf16)
        if have is None:
            return micro_batch or rows
        share = 1.0 if micro_batch else FIT_SHARE
        fit = most_rows(lambda m: self.step_memory(rows, m, **sizes), share * have, rows)
        tried = max(min(micro_batch, rows), 1)  # rows a forward/backward takes (micro_batches)
        if fit < tried:
            need = self.step_memory(rows, tried, **sizes) / 2**30
            raise torch.OutOfMemoryError(
                f"a step needs to allocate about {need:.1f} GiB at {tried} rows a forward/backward, more than "
                f"{share:.0%} of the {have / 2**30:.1f} GiB {device} has: {fit} rows fit"
            )
        return micro_batch or fit

    def new_cache(self, max_len, static=False):
        """An empty KVCache for up to max_len columns (prompt + new tokens); see KVCache for `static`."""
        if max_len > self.config.block_size:
            raise ValueError(
                f"a cache of {max_len} columns exceeds block_size {self.config.block_size}; "
                f"shorten the prompts or the completions"
            )
        return KVCache(self.config.n_layer, max_len, static)

    def forward(self, idx, mask=None, cache=None, logits_at=slice(None)):
        """Logits for the columns of idx that `logits_at` picks.

        idx:   (N, L) token ids; with a cache, the L tokens that follow the cached ones.
        mask:  (N, L) bool, True = real token, False = left padding. None = all real.
        cache: a KVCache, updated in place, or None for a plain full forward.
        logits_at: a slice of the L columns, the only ones the head (C·V a column) runs on: slice(-1, None) for the
               sampler's prefill, the scoring columns for grpo.score; by default all L.
        Returns logits (N, L', V) in the autocast dtype if any, else float32: the full forward's up to rounding (a
        matmul's kernel may change with its rows, MKL's below 12), bit for bit on GPT-2's block under grad, whose head
        runs on all L, then sliced, so that its weight's gradient sums rows as the full head's (the default's
        record)."""
        N, L = idx.shape
        if mask is None:
            mask = torch.ones(N, L, dtype=torch.bool, device=idx.device)  # (N, L)
        if cache is None:
            if L > self.config.block_size:  # checked on the host: no device sync
                raise ValueError(f"{L} columns exceed block_size {self.config.block_size}")
            q_col = torch.arange(L, device=idx.device)  # (L,) the queries' columns
            key_valid = mask  # (N, S = L)
        else:
            q_col, key_valid = cache.claim(mask)  # (L,), (N, S): S = the columns filled, or all of them if static
        # positions count real tokens only, so left padding does not shift them
        pos = (key_valid.long().cumsum(dim=1) - 1).clamp(min=0).index_select(1, q_col)  # (N, L)
        # query i (column q_col[i]) sees key j if j <= q_col[i] and key j is real; every query
        # also sees itself, so a padding query never has an empty (NaN) softmax row.
        k_col = torch.arange(key_valid.shape[1], device=idx.device)[None, :]  # (1, S)
        q_col = q_col[:, None]  # (L, 1)
        attn_mask = ((k_col <= q_col) & key_valid[:, None, :]) | (k_col == q_col)  # (N, L, S)
        attn_mask = attn_mask[:, None]  # (N, 1, L, S), broadcast over heads

        x = self.transformer.wte(idx)  # (N, L, C)
        rope = None
        if self.config.arch == "gpt2":
            x = x + self.transformer.wpe(pos)  # (N, L, C)
        else:
            angles = pos[..., None].float() * self.inv_freq  # (N, L, D/2) pos·ω_j, in float32
            angles = torch.cat((angles, angles), dim=-1)[:, None]  # (N, 1, L, D)
            rope = (angles.cos(), angles.sin())  # (N, 1, L, D) each
        for i, block in enumerate(self.transformer.h):
            x = block(x, attn_mask, rope, cache, i)
        x = self.transformer.ln_f(x)  # (N, L, C)
        if self.config.arch == "gpt2" and torch.is_grad_enabled():
            return self.lm_head(x)[:, logits_at]  # (N, L', V), a view of (N, L, V): see the docstring
        return self.lm_head(x[:, logits_at])  # (N, L', V)


def most_rows(need, have, rows):
    """The largest n in 1..rows whose need(n) (bytes, growing with n) is at most `have`; 0 when none is."""
    return bisect.bisect_right(range(1, rows + 1), have, key=need)


def device_memory(device):
    """Bytes of memory `device` has in all, or None where neither torch nor the OS says: a CUDA GPU's total, MPS's
    recommended maximum, a CPU's physical memory (or a Linux container's lower cgroup limit)."""
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if kind == "mps":
        return torch.mps.recommended_max_memory() if hasattr(torch.mps, "recommended_max_memory") else None
    if not hasattr(os, "sysconf") or "SC_PHYS_PAGES" not in os.sysconf_names:  # Windows: unknown
        return None
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = "/sys/fs/cgroup/memory.max"
    if os.path.isfile(limit):
        with open(limit) as f:
            text = f.read().strip()  # bytes, or "max" when there is no limit
        ram = min(ram, int(text)) if text.isdigit() else ram
    return ram


def best_device():
    """The device a run takes when none is named: cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def bf16_supported(device):
    """Whether bf16 autocast is the default on `device`: on a CUDA GPU that supports it; elsewhere float32."""
    return torch.device(device).type == "cuda" and torch.cuda.is_bf16_supported()
