"""Properties of sample.py: exact log-probs, masks and flags, early stop, group layout, seeds, distribution."""
import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, get_tokenizer
from sample import Rollout, completions_text, generate

CFG = GPTConfig(block_size=64, vocab_size=257, n_layer=2, n_head=2, n_embd=32)
EOS = 256


class Policy(torch.nn.Module):
    """A tiny seeded GPT whose logits are scaled by `scale` and whose EOS logit gets `eos_bias`.

    A random-init GPT has nearly uniform logits (std ~0.1), so it would almost never emit
    EOS and temperature would barely matter; this wrapper has GPT's call signature.
    """

    def __init__(self, seed=0, scale=5.0, eos_bias=0.0):
        super().__init__()
        torch.manual_seed(seed)
        self.gpt = GPT(CFG).eval()
        self.config = CFG
        self.scale = scale
        bias = torch.zeros(CFG.vocab_size)  # (V,)
        bias[EOS] = eos_bias
        self.register_buffer("bias", bias)

    def new_cache(self, max_len):
        return self.gpt.new_cache(max_len)

    def forward(self, idx, mask=None, cache=None):
        return self.gpt(idx, mask, cache) * self.scale + self.bias  # (N, L, V)


def random_prompts(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in lengths]


def seeded(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("temperature,top_k", [(1.0, None), (0.7, 20), (1.5, 5), (0.0, None)])
def test_logprobs_equal_full_forward_over_returned_tokens(temperature, top_k):
    model = Policy(eos_bias=4.0)
    r = generate(model, random_prompts((3, 9, 6)), G=4, max_new_tokens=12,
                 temperature=temperature, top_k=top_k, generator=seeded(0))
    assert r.logprobs.dtype == torch.float32 and r.completion_mask.dtype == torch.bool
    P, T = r.prompt_len, r.completion.shape[1]
    with torch.no_grad():
        logits = model(r.tokens, r.mask).float()[:, P - 1:-1]  # (N, T, V): column t-1 predicts token t
    if temperature > 0:  # greedy log-probs are documented as log_softmax at τ = 1
        logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (N, T, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    ref = F.log_softmax(logits, dim=-1).gather(-1, r.completion[..., None]).squeeze(-1)  # (N, T)
    m = r.completion_mask
    torch.testing.assert_close(r.logprobs[m], ref[m], atol=1e-4, rtol=0)
    assert (r.logprobs[~m] == 0).all()
    if temperature > 0:  # the batch exercised both rows that stopped and rows after their EOS
        assert (~m).any() and m[:, -1].any()


def test_completion_mask_truncated_flag_and_tokens_after_eos():
    model = Policy(eos_bias=4.0)
    prompts = random_prompts((3, 9, 6), seed=1)
    r = generate(model, prompts, G=16, max_new_tokens=16, generator=seeded(1))
    P, T = r.prompt_len, r.completion.shape[1]
    assert r.truncated.any() and (~r.truncated).any()  # both cases occur, so both are checked
    assert T == 16  # some row is truncated, so the loop ran to the end
    for i, row in enumerate(r.completion.tolist()):
        if EOS not in row:
            assert r.truncated[i] and r.completion_mask[i].all()
        else:
            first = row.index(EOS)
            assert not r.truncated[i]
            assert r.completion_mask[i].tolist() == [True] * (first + 1) + [False] * (T - first - 1)
            assert row[first:] == [EOS] * (T - first)
    assert torch.equal(r.lengths, r.completion_mask.sum(1))
    # the attention mask is False exactly on the left padding, True after it (EOS included)
    for i in range(len(r.tokens)):
        n = len(prompts[i // 16])
        assert r.mask[i].tolist() == [False] * (P - n) + [True] * (n + T)


def test_stops_as_soon_as_every_row_has_finished():
    model = Policy(eos_bias=6.0)  # EOS about every other token
    r = generate(model, random_prompts((2, 7)), G=8, max_new_tokens=50, generator=seeded(2))
    T = r.completion.shape[1]
    assert T < 50 and not r.truncated.any()
    assert r.completion_mask[:, -1].any()  # the last step was needed: some row's first EOS is there
    assert (r.completion[:, -1] == EOS).all()


def test_greedy_groups_are_identical_and_equal_each_prompt_decoded_alone():
    model, G = Policy(eos_bias=0.0), 4
    prompts = random_prompts((3, 9, 6), seed=3)
    r = generate(model, prompts, G=G, max_new_tokens=10, temperature=0)
    P = r.prompt_len
    for b, p in enumerate(prompts):
        rows = r.tokens[b * G:(b + 1) * G]  # (G, P+T)
        assert (rows == rows[0]).all()
        assert rows[0, P - len(p):P].tolist() == p
        alone = generate(model, [p], G=1, max_new_tokens=10, temperature=0)  # unpadded
        n = alone.completion.shape[1]
        assert alone.prompt_len == len(p)
        assert rows[0, P:P + n].tolist() == alone.completion[0].tolist()
        # and both equal a plain greedy loop that reruns the full forward without a cache
        seq = list(p)
        with torch.no_grad():
            for _ in range(n):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        assert alone.completion[0].tolist() == seq[len(p):]


def test_same_seed_same_rollout_different_seed_different_rollout():
    model = Policy(eos_bias=4.0)
    prompts = random_prompts((3, 9, 6))

    def run(seed, global_seed):
        torch.manual_seed(global_seed)  # the global RNG must not matter when a generator is given
        return generate(model, prompts, G=4, max_new_tokens=12, top_k=50, generator=seeded(seed))

    a, b, c = run(0, 1), run(0, 2), run(1, 1)
    for name in ["tokens", "mask", "completion_mask", "truncated", "logprobs"]:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert not torch.equal(a.tokens, c.tokens)


def chi2(counts, p):
    """Pearson's statistic of observed counts against probabilities p; inf if a count falls where p = 0."""
    n, keep = counts.sum(), p > 0
    if counts[~keep].sum() > 0:
        return float("inf")
    return float(((counts[keep] - n * p[keep]) ** 2 / (n * p[keep])).sum())


def test_first_token_frequencies_match_softmax_over_top_k():
    model, prompt, tau, k, n = Policy(eos_bias=0.0), [5, 6, 7, 8], 0.8, 10, 20_000
    r = generate(model, [prompt], G=n, max_new_tokens=1, temperature=tau, top_k=k, generator=seeded(4))
    counts = torch.bincount(r.completion[:, 0], minlength=CFG.vocab_size).double()  # (V,)
    with torch.no_grad():
        logits = model(torch.tensor([prompt]))[0, -1].double()  # (V,)

    def expected(tau, k):
        z = logits / tau
        top = z.topk(k).indices
        p = torch.zeros_like(z)
        p[top] = torch.softmax(z[top], dim=0)
        return p  # (V,)

    p = expected(tau, k)
    assert (n * p[p > 0]).min() > 100  # every cell is well populated, so χ² is accurate
    assert counts[p == 0].sum() == 0  # nothing outside the top-k is ever drawn
    # 9 degrees of freedom: P(χ² > 60) ≈ 1e-9, so a right sampler fails by chance about never ...
    assert chi2(counts, p) < 60
    # ... and the same bound has power: a temperature 25% off, or k one off, is 5x beyond it
    for wrong in [expected(tau * 1.25, k), expected(tau / 1.25, k), expected(tau, k - 1), expected(tau, k + 1)]:
        assert chi2(counts, wrong) > 5 * 60


def test_sampling_under_autocast_keeps_float32_logprobs():
    model = Policy(eos_bias=4.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = generate(model, random_prompts((3, 5)), G=2, max_new_tokens=6, generator=seeded(5))
    assert r.logprobs.dtype == torch.float32 and r.tokens.dtype == torch.long


def test_too_long_raises_value_error_that_says_what_to_change():
    model = Policy()
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, [[1] * 60, [2] * 3], G=2, max_new_tokens=5)
    r = generate(model, [[1] * 59], G=1, max_new_tokens=5, generator=seeded(6))  # exactly block_size
    assert r.tokens.shape[1] <= CFG.block_size


def test_completions_text_stops_before_eos_and_survives_split_utf8():
    enc = get_tokenizer("bytes")
    done = list("hi é".encode()) + [EOS, EOS]  # 5 byte tokens, EOS, and the fill after it
    cut = list("ok ".encode()) + [0xC3] + [33] * 3  # "ok ", half of é, "!!!": no EOS, truncated
    tokens = torch.tensor([[7] + done, [7] + cut])  # (2, 1+7): a 1-token prompt, then T = 7
    r = Rollout(tokens=tokens, mask=torch.ones_like(tokens, dtype=torch.bool), prompt_len=1,
                completion_mask=torch.tensor([[True] * 6 + [False], [True] * 7]),
                truncated=torch.tensor([False, True]), logprobs=torch.zeros(2, 7))
    assert completions_text(r, enc) == ["hi é", "ok \ufffd!!!"]
