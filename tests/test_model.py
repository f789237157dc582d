"""Properties of model.py: causality, left-padding invariance, KV cache (dynamic and static), tokenizer, size,
learning, torch.compile, the memory floor."""

import os
import sys

import pytest
import torch
import torch.nn.functional as F

import model as model_module
from model import GPT, GPTConfig, left_pad
from plumbing.tokenizer import byte_tokenizer, frequent_words

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CFG = GPTConfig(block_size=64, vocab_size=257, n_layer=2, n_head=2, n_embd=32)
LLAMA = dict(block_size=64, vocab_size=257, n_layer=2, n_head=4, n_embd=32, arch="llama", mlp_size=48, bias=False)
SCALING = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16)
CONFIGS = {  # GPT-2's block, and the Llama family's shapes (tests/test_hf.py checks them against their formulas)
    "gpt2": CFG,
    "qwen2": GPTConfig(**LLAMA, n_kv_head=2, qkv_bias=True, rope_theta=1e6),
    "qwen3": GPTConfig(**LLAMA, n_kv_head=2, head_dim=16, qk_norm=True),
    "llama3": GPTConfig(**LLAMA, n_kv_head=1, rope_scaling=SCALING, tie_embeddings=False),
}


def tiny(seed=0, cfg=CFG):
    torch.manual_seed(seed)
    return GPT(cfg).eval()


@pytest.mark.parametrize("arch", CONFIGS)
def test_causality(arch):
    model = tiny(cfg=CONFIGS[arch])
    idx = torch.randint(0, 256, (2, 12))
    changed = idx.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 256
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :8], b[:, :8], atol=1e-6, rtol=0)
    assert (a[:, 8:] - b[:, 8:]).abs().max() > 1e-4  # the change is visible from position 8 on


@pytest.mark.parametrize("arch", CONFIGS)
def test_left_padding_gives_the_logits_of_the_sequence_alone(arch):
    model = tiny(cfg=CONFIGS[arch])
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (5, 11, 8)]
    idx, mask = left_pad(seqs, 256)
    with torch.no_grad():
        batched = model(idx, mask)  # (N, L, V)
        for n, s in enumerate(seqs):
            alone = model(torch.tensor([s]))[0]
            torch.testing.assert_close(batched[n, -len(s) :], alone, atol=1e-5, rtol=0)
        # the mask is what makes this true: ignoring it must break it
        unmasked = model(idx)
    assert (unmasked[0, -5:] - batched[0, -5:]).abs().max() > 1e-3


@pytest.mark.parametrize("arch", CONFIGS)
def test_the_head_runs_on_the_picked_columns_only_and_gives_the_full_forwards_logits(arch):
    """logits_at: the prefill's last column, grpo's scoring columns. The head (lm_head) sees those columns only, but
    on GPT-2's path under grad, where it sees them all so that its weight's gradient is the full head's bit for bit
    (model.py's forward). The logits are the full forward's at those columns up to float rounding (exactly there)."""
    model = tiny(cfg=CONFIGS[arch])
    idx, mask = left_pad([[1, 2, 3, 9, 4, 4, 7], [4, 5, 6, 7, 8, 10, 11, 12, 13]], 256)  # (N, L), L = 9
    seen = []
    model.lm_head.register_forward_hook(lambda m, inputs, out: seen.append(inputs[0].shape[1]))
    for at, width in ((slice(-1, None), 1), (slice(3, -1), 5)):
        with torch.no_grad():
            full = model(idx, mask)[:, at]  # (N, L', V)
            torch.testing.assert_close(model(idx, mask, logits_at=at), full, atol=1e-6, rtol=0)
            assert seen[-1] == width
        model.zero_grad()
        full = model(idx, mask)[:, at]  # with grad
        full.square().sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        part = model(idx, mask, logits_at=at)
        part.square().sum().backward()
        torch.testing.assert_close(part, full, atol=1e-6, rtol=0)
        assert seen[-1] == (9 if arch == "gpt2" else width)
        if arch == "gpt2":  # the full head's logits and gradient: the same rows summed in the same order
            assert torch.equal(part, full)
            assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads))


@pytest.mark.parametrize("arch", CONFIGS)
@pytest.mark.parametrize("static", [False, True])
def test_kv_cache_matches_full_forward_on_left_padded_batch(static, device, arch):
    model = tiny(cfg=CONFIGS[arch]).to(device)
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (3, 9, 6)]
    idx, mask = left_pad(prompts, 256)
    steps = torch.randint(0, 257, (3, 7), generator=g)  # (N, T) tokens fed one at a time
    full_idx = torch.cat([idx, steps], dim=1).to(device)  # (N, P+T)
    full_mask = torch.cat([mask, torch.ones_like(steps, dtype=torch.bool)], dim=1).to(device)  # (N, P+T)
    with torch.no_grad():
        full = model(full_idx, full_mask)  # (N, P+T, V)
        cache = model.new_cache(full_idx.shape[1] + 5, static=static)  # 5 columns to spare: never filled
        pieces = [model(idx.to(device), mask.to(device), cache=cache)]
        for t in range(steps.shape[1]):
            pieces.append(model(steps[:, t : t + 1].to(device), cache=cache))
    cached = torch.cat(pieces, dim=1)
    real = full_mask  # padding positions have no meaningful logits
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", CONFIGS)
@pytest.mark.parametrize("static", [False, True])
def test_cache_repeat_interleave_matches_repeated_prompts(static, arch):
    model = tiny(cfg=CONFIGS[arch])
    idx, mask = left_pad([[1, 2, 3], [4, 5, 6, 7, 8]], 256)
    G = 3
    with torch.no_grad():
        cache = model.new_cache(10, static=static)
        model(idx, mask, cache=cache)
        cache.repeat_interleave(G)
        nxt = torch.arange(6).view(6, 1)  # (B*G, 1)
        out = model(nxt, cache=cache)[:, -1]  # (B*G, V)
        ref = model(
            torch.cat([idx.repeat_interleave(G, 0), nxt], 1),
            torch.cat([mask.repeat_interleave(G, 0), torch.ones(6, 1, dtype=torch.bool)], 1),
        )[:, -1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


def test_static_cache_steps_are_the_same_computation_on_the_same_buffers():
    """What a CUDA graph needs: every decode step sees tensors of the same shapes at the same addresses,
    and its column is a device tensor changed in place (no host value changes between steps)."""
    model = tiny()
    idx, mask = left_pad([[1, 2, 3], [4, 5, 6, 7, 8]], 256)
    with torch.no_grad():
        cache = model.new_cache(12, static=True)
        model(idx, mask, cache=cache)
        update, returned = cache.update, []

        def spy(layer, k, v):  # what each layer's attention gets back from the cache
            keys, values = update(layer, k, v)
            returned.append((layer, tuple(keys.shape), keys.data_ptr(), values.data_ptr()))
            return keys, values

        cache.update = spy
        steps = []
        for t in range(4):
            returned.clear()
            model(torch.full((2, 1), 40 + t), cache=cache)
            steps.append((tuple(returned), cache.valid.data_ptr(), cache.col.data_ptr()))
    assert all(s == steps[0] for s in steps), steps
    assert steps[0][0][0][1] == (2, 2, 12, 16)  # attention spans the whole allocation, (N, H, S_max, D)
    assert int(cache.col) == 5 + 4  # the next column, counted on the device


def test_new_cache_longer_than_block_size_raises_value_error():
    with pytest.raises(ValueError, match="block_size"):
        tiny().new_cache(CFG.block_size + 1, static=True)


def test_compiled_forward_gives_the_eager_logits_and_gradients(device):
    """train.py --compile: torch.compile(model) as the training forward, on a left-padded batch."""
    if device.type != "cuda":
        pytest.skip("compiling takes about a minute on a 2-core CPU; checked where CUDA is (tests/gpu_check.sh)")
    model = tiny().to(device).train()
    idx, mask = left_pad([[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11, 12]], 256)
    idx, mask = idx.to(device), mask.to(device)
    grads = []
    for fwd in (model, torch.compile(model)):
        logits = fwd(idx, mask)  # (N, L, V)
        loss = F.cross_entropy(logits[:, :-1][mask[:, 1:]], idx[:, 1:][mask[:, 1:]])
        model.zero_grad()
        loss.backward()
        grads.append((logits.detach(), loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (l_e, loss_e, g_e), (l_c, loss_c, g_c) = grads
    torch.testing.assert_close(l_c, l_e, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(loss_c, loss_e, atol=1e-5, rtol=1e-5)
    for a, b in zip(g_c, g_e):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)


def test_bytes_tokenizer_round_trips_utf8():
    enc = byte_tokenizer()
    assert enc.n_vocab == 257 and enc.eot_token == 256
    for text in ["12 + 30 = 42", "Ünïcødé − 3½ × 2 = 7 ✓ 数学 🙂", "", "a\nb\tc  "]:
        ids = enc.encode(text)
        assert all(0 <= i < 256 for i in ids)
        assert enc.decode(ids) == text
        assert len(ids) == len(text.encode("utf-8"))
    assert enc.encode("<|endoftext|>", allowed_special="all") == [256]


def test_words_tokenizer_makes_each_word_one_token_and_keeps_digits_single():
    texts = ["Q: Mia has 7 pens, gets 12 more.\nA: 7+12=19\n#### 19"] * 3 + ["Mia has pens now?"]
    assert frequent_words(texts) == [b" Mia", b" gets", b" has", b" more", b" now", b" pens", b"####", b"Mia"]
    words = frequent_words(texts, n=6)  # the 6 most frequent, sorted: "Mia" and " now" (once each) left out
    assert words == [b" Mia", b" gets", b" has", b" more", b" pens", b"####"]
    assert frequent_words(["a bb bb ccc ccc ccc 44 x5y _z"], n=2) == [b" bb", b" ccc"]  # no digit, two bytes or more
    enc = byte_tokenizer(words)
    assert enc.name == "words" and enc.eot_token == enc.n_vocab - 1 == 256 + sum(len(w) - 1 for w in words)
    text = "Q: Mia has 7 pens, gets 12 more.\nA: 7+12=19\n#### 19"
    pieces = [enc.decode_single_token_bytes(i) for i in enc.encode(text)]
    assert pieces[3:5] == [b" has", b" "] and b" pens" in pieces and b"####" in pieces
    assert [p for p in pieces if p.isdigit()] == [b"7", b"1", b"2", b"7", b"1", b"2", b"1", b"9", b"1", b"9"]
    for text in ["Ünïcødé − 3½ × 2 = 7 ✓ 数学 🙂", "hashes hass has", "ahas pensive", "", "a\nb\tc  "]:
        assert enc.decode(enc.encode(text)) == text  # any text round-trips; a word inside another stays bytes
    assert enc.encode("<|endoftext|>", allowed_special="all") == [enc.eot_token]
    assert byte_tokenizer([]).name == "bytes" and byte_tokenizer([]).n_vocab == 257


def test_words_tokenizer_is_bounded_and_takes_any_text():
    """A data file's huge word stays out of the vocabulary (its prefixes would cost its length squared), a lone
    surrogate (JSON's "\\ud800", which UTF-8 cannot encode) is no word, and byte_tokenizer refuses what is too big."""
    from plumbing.tokenizer import MAX_WORD_BYTES, MAX_WORDS

    long = "x" * (MAX_WORD_BYTES + 1)
    texts = [f"a {long} {long} {'y' * 10**6} and x\ud800y \ud800\ud800 and !\udfff!"] * 2
    words = frequent_words(texts)
    assert words == [b" !", b" and", b" x"], words  # the surrogates split the runs, the long words are left out
    ok = "é" * (MAX_WORD_BYTES // 2)  # 64 bytes: kept; one more letter is 66 bytes: left out
    assert frequent_words([f"{ok} {ok}é"]) == [ok.encode()]
    assert len(frequent_words([f" w{i:c}" for i in range(0x4E00, 0x4E00 + 2 * MAX_WORDS)], n=10**9)) == MAX_WORDS
    enc = byte_tokenizer(words)
    assert enc.decode(enc.encode("x\ud800y and", disallowed_special=())) == "x\ufffdy and"  # tiktoken's replacement
    for bad in ([b"x" * (MAX_WORD_BYTES + 1)], [b"ab"] * (MAX_WORDS + 1)):
        with pytest.raises(ValueError, match="at most"):
            byte_tokenizer(bad)


def test_parameter_count_matches_hand_count():
    V, S, C, nl = 257, 64, 32, 2
    per_layer = (2 * C) + (C * 3 * C + 3 * C) + (C * C + C) + (2 * C) + (C * 4 * C + 4 * C) + (4 * C * C + C)
    expected = V * C + S * C + nl * per_layer + 2 * C  # lm_head is tied to wte
    model = tiny()
    assert per_layer == 12_704 and expected == 35_744  # the arithmetic, written out
    assert model.num_params() == expected
    assert model.lm_head.weight is model.transformer.wte.weight
    names = set(dict(model.named_parameters()))
    for n in [
        "transformer.wte.weight",
        "transformer.wpe.weight",
        "transformer.h.0.ln_1.weight",
        "transformer.h.1.attn.c_attn.weight",
        "transformer.h.1.attn.c_proj.bias",
        "transformer.h.0.ln_2.bias",
        "transformer.h.0.mlp.c_fc.weight",
        "transformer.h.0.mlp.c_proj.weight",
        "transformer.ln_f.weight",
    ]:
        assert n in names, n


def test_tiny_model_overfits_one_batch():
    model = tiny(seed=3).train()
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 257, (4, 24), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 5.0  # about log(257) = 5.55 at init
    assert losses[-1] < 0.2 * losses[0]


def test_parameter_count_of_the_llama_family_matches_hand_count():
    C, H, H_kv, D, M, V, nl = 32, 4, 1, 16, 48, 257, 2  # llama3 above: GQA with one key/value head, D set apart from C
    attn = C * H * D + 2 * C * H_kv * D + H * D * C  # q, k, v, o: no biases
    per_layer = C + attn + C + 3 * C * M  # RMSNorm, attention, RMSNorm, SwiGLU's gate, up and down
    expected = V * C + nl * per_layer + C + C * V  # no wpe; an untied lm_head of its own
    config = GPTConfig(**{**LLAMA, "head_dim": D}, n_kv_head=H_kv, tie_embeddings=False)
    assert GPT(config).num_params() == expected
    qwen2 = GPT(CONFIGS["qwen2"])  # tied, and q/k/v biases; kv heads of 2
    assert qwen2.num_params() == V * C + nl * (2 * C + C * 32 + 2 * C * 16 + 32 + 2 * 16 + 32 * C + 3 * C * M) + C


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kB on Linux only")
def llama_of_width(C, layers):
    """A Llama-family model of width C on the meta device: shapes only, nothing allocated."""
    config = GPTConfig(**{**LLAMA, "n_embd": C, "n_layer": layers, "mlp_size": 3 * C, "vocab_size": 4096})
    with torch.device("meta"):
        return GPT(config)


def test_the_default_micro_batch_is_the_most_rows_that_fit_and_shrinks_as_the_model_grows(monkeypatch):
    """check_memory with no micro_batch: all rows while they fit in FIT_SHARE of the memory, then fewer and fewer as
    the model grows (a pure function of the sizes and the memory: device_memory patched); an explicit micro_batch
    is kept while it fits in all of it, else refused in words naming the most rows that fit; no memory known, no
    check."""
    GiB = 2**30
    monkeypatch.setattr(model_module, "device_memory", lambda device: 16 * GiB)
    sizes = dict(cols=200, completion=128, ref=True)
    chosen = [llama_of_width(C, n).check_memory("cpu", 256, **sizes) for C, n in [(64, 2), (256, 8), (512, 16)]]
    assert chosen[0] == 256 and 256 > chosen[1] > chosen[2] >= 1, chosen
    big = llama_of_width(512, 16)
    fit = chosen[2]
    assert (
        big.step_memory(256, fit, **sizes) <= model_module.FIT_SHARE * 16 * GiB < big.step_memory(256, fit + 1, **sizes)
    )
    assert model_module.most_rows(lambda n: 10 * n, 35, 8) == 3 and model_module.most_rows(lambda n: 10 * n, 5, 8) == 0
    assert big.check_memory("cpu", 256, micro_batch=fit + 1, **sizes) == fit + 1  # given: all of the memory is room
    most = model_module.most_rows(lambda m: big.step_memory(256, m, **sizes), 16 * GiB, 256)
    with pytest.raises(torch.OutOfMemoryError, match=f"at {most + 1} rows a forward/backward, .*: {most} rows fit"):
        big.check_memory("cpu", 256, micro_batch=most + 1, **sizes)
    with pytest.raises(torch.OutOfMemoryError, match="at 1 rows a forward/backward, more than 50% of .*: 0 rows fit"):
        big.check_memory("cpu", 10**6, **sizes)  # the sampling alone does not fit
    monkeypatch.setattr(model_module, "device_memory", lambda device: None)  # unknown: no check
    assert (
        big.check_memory("cpu", 10**6, **sizes) == 10**6 and big.check_memory("cpu", 10**6, micro_batch=7, **sizes) == 7
    )


def test_device_memory_is_this_machines_physical_memory_at_most():
    have = model_module.device_memory("cpu")
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        assert 0 < have <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    else:
        assert have is None


def test_the_device_is_cuda_then_mps_then_cpu_and_bf16_only_where_cuda_supports_it(monkeypatch):
    """best_device: the first of cuda, mps, cpu that is present; bf16_supported: only a CUDA device that has it."""
    for cuda, mps, expect in ((True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
        assert model_module.best_device() == expect
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert model_module.bf16_supported("cuda:0") and not model_module.bf16_supported("cpu")
    assert not model_module.bf16_supported("mps")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert not model_module.bf16_supported("cuda")
