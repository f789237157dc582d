"""Properties of sample.py: log-probs equal the trainer's, masks and flags, early stop, group layout, seeds,
distribution; the static and graph decoders give the plain loop's rollout; diverged models; bf16 autocast;
Rollout.select and Rollout.join; the command line's one-line errors and plain-text special tokens."""

import math
import os
import subprocess
import sys

import pytest
import tiktoken
import torch

from grpo import completion_logprobs, score, scoring_columns
from model import GPT, GPTConfig
from plumbing.checkpoint import load_model, save_checkpoint
from plumbing.tokenizer import byte_tokenizer, template_name
from sample import DECODERS, SYNC_EVERY, Rollout, completions_text, generate, rollout_stats
from tasks import Task

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

    def new_cache(self, max_len, static=False):
        return self.gpt.new_cache(max_len, static)

    def forward(self, idx, mask=None, cache=None, logits_at=slice(None)):
        return self.gpt(idx, mask, cache, logits_at) * self.scale + self.bias  # (N, L', V)


def random_prompts(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, (n,), generator=g).tolist() for n in lengths]


def seeded(seed, device="cpu"):
    return torch.Generator(device).manual_seed(seed)


def skip_graph_off_cuda(decode, device):
    if decode == "graph" and device.type != "cuda":
        pytest.skip("decode='graph' needs CUDA")


@torch.no_grad()
def trainer_logprobs(model, r, temperature):
    """What the trainer computes for the rollout: grpo.completion_logprobs of the training forward, (N, T)."""
    logits = model(r.tokens, r.mask, logits_at=scoring_columns(r.prompt_len))  # (N, T, V)
    return completion_logprobs(logits, r.tokens, r.prompt_len, temperature)


@torch.no_grad()
def top_k_log_mass(model, r, temperature, k):
    """log of the trainer's probability mass on the k most likely tokens at each completion position, (N, T).

    Every token v is scored at every position by grpo.completion_logprobs (the logits at a position
    do not depend on the token that follows it), so no shift, τ or top-k is written out here.
    """
    P = r.prompt_len
    logits = model(r.tokens, r.mask, logits_at=scoring_columns(P))  # (N, T, V)
    every = []
    for v in range(CFG.vocab_size):
        seq = r.tokens.clone()  # (N, P+T)
        seq[:, P:] = v
        every.append(completion_logprobs(logits, seq, P, temperature))  # (N, T) log π_τ(v | prefix)
    return torch.stack(every).topk(k, dim=0).values.logsumexp(dim=0)  # (N, T)


@pytest.mark.parametrize("decode", ["plain", "static"])
@pytest.mark.parametrize("temperature,top_k", [(1.0, None), (0.7, 20), (1.5, 5), (0.0, None)])
def test_logprobs_equal_the_trainers_over_returned_tokens(temperature, top_k, decode, device):
    model = Policy(eos_bias=4.0).to(device)
    r = generate(
        model,
        random_prompts((3, 9, 6)),
        G=4,
        max_new_tokens=12,
        temperature=temperature,
        top_k=top_k,
        generator=seeded(0, device),
        decode=decode,
    )
    assert r.logprobs.dtype == torch.float32 and r.completion_mask.dtype == torch.bool
    ref = trainer_logprobs(model, r, temperature)  # (N, T); greedy is scored at τ = 1, as documented
    if top_k is not None:  # the sampler drew from π_τ renormalised over its k most likely tokens
        ref = ref - top_k_log_mass(model, r, temperature, top_k)  # (N, T)
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


@pytest.mark.parametrize("decode", ["plain", "static"])
def test_stops_as_soon_as_every_row_has_finished(decode):
    model = Policy(eos_bias=6.0)  # EOS about every other token
    r = generate(model, random_prompts((2, 7)), G=8, max_new_tokens=50, generator=seeded(2), decode=decode)
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
        rows = r.tokens[b * G : (b + 1) * G]  # (G, P+T)
        assert (rows == rows[0]).all()
        assert rows[0, P - len(p) : P].tolist() == p
        alone = generate(model, [p], G=1, max_new_tokens=10, temperature=0)  # unpadded
        n = alone.completion.shape[1]
        assert alone.prompt_len == len(p)
        assert rows[0, P : P + n].tolist() == alone.completion[0].tolist()
        # and both equal a plain greedy loop that reruns the full forward without a cache
        seq = list(p)
        with torch.no_grad():
            for _ in range(n):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        assert alone.completion[0].tolist() == seq[len(p) :]


@pytest.mark.parametrize("decode", ["plain", "static"])
def test_same_seed_same_rollout_different_seed_different_rollout(decode):
    model = Policy(eos_bias=4.0)
    prompts = random_prompts((3, 9, 6))

    def run(seed, global_seed):
        torch.manual_seed(global_seed)  # the global RNG must not matter when a generator is given
        return generate(model, prompts, G=4, max_new_tokens=12, top_k=50, generator=seeded(seed), decode=decode)

    a, b, c = run(0, 1), run(0, 2), run(1, 1)
    for name in ["tokens", "mask", "completion_mask", "truncated", "logprobs"]:
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert not torch.equal(a.tokens, c.tokens)


# (temperature, top_k, eos_bias, max_new_tokens, how the rollouts end)
EQUIVALENCE_CASES = [
    (1.0, None, 4.0, 40, "stop"),
    (0.7, 20, 2.0, 40, "stop"),
    (1.5, 5, 2.0, 40, "stop"),
    (1.0, None, -2.0, 12, "truncate"),
    (0.0, None, 0.0, 20, "truncate"),
]


@pytest.mark.parametrize("temperature,top_k,eos_bias,max_new_tokens,ending", EQUIVALENCE_CASES)
def test_static_and_graph_decoders_give_the_plain_rollout(temperature, top_k, eos_bias, max_new_tokens, ending, device):
    """Same seed, same left-padded prompts: the same tokens, masks, T and flags, log-probs to float
    rounding, and the generator left in the same state, although the static decoder checks for the
    end only every SYNC_EVERY steps and so runs past it. "graph" is compared on CUDA only."""
    model = Policy(eos_bias=eos_bias).to(device)
    prompts = random_prompts((3, 9, 6, 14), seed=7)
    lengths = []
    for seed in range(4):
        rollouts, states = {}, {}
        for decode in DECODERS if device.type == "cuda" else ("plain", "static"):
            gen = seeded(seed, device)
            rollouts[decode] = generate(
                model,
                prompts,
                G=4,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                generator=gen,
                decode=decode,
            )
            states[decode] = gen.get_state()
        plain = rollouts.pop("plain")
        for decode, r in rollouts.items():
            assert r.prompt_len == plain.prompt_len, decode
            for name in ["tokens", "mask", "completion_mask", "truncated"]:
                assert torch.equal(getattr(r, name), getattr(plain, name)), (decode, name)
            torch.testing.assert_close(r.logprobs, plain.logprobs, atol=1e-5, rtol=0)
            assert torch.equal(states[decode], states["plain"]), decode
        lengths.append(plain.completion.shape[1])
    if ending == "truncate":
        assert lengths == [max_new_tokens] * 4
    else:  # some rollout ended after a few end checks, between two of them
        assert any(SYNC_EVERY < T < max_new_tokens and T % SYNC_EVERY for T in lengths), lengths


def test_static_decoder_leaves_the_global_rng_as_the_plain_loop_does(device):
    model = Policy(eos_bias=4.0).to(device)
    get_state = torch.cuda.get_rng_state if device.type == "cuda" else torch.get_rng_state
    lengths = []
    for seed in range(4):
        out = {}
        for decode in ("plain", "static"):
            torch.manual_seed(seed)  # generator=None: the global RNG
            r = generate(model, random_prompts((3, 9)), G=4, max_new_tokens=40, decode=decode)
            out[decode] = r.tokens, get_state()
        assert torch.equal(out["plain"][0], out["static"][0])
        assert torch.equal(out["plain"][1], out["static"][1])
        lengths.append(out["plain"][0].shape[1] - 9)
    # the static decoder ran steps past the end, and gave their numbers back
    assert any(T < 40 and T % SYNC_EVERY for T in lengths), lengths


def test_unknown_decoder_and_graph_off_cuda_raise_value_errors_that_say_what_to_change():
    model, prompts = Policy(), random_prompts((3,))
    with pytest.raises(ValueError, match="plain, static, graph"):
        generate(model, prompts, G=2, max_new_tokens=4, decode="fast")
    with pytest.raises(ValueError, match="decode='static' or 'plain'"):
        generate(model, prompts, G=2, max_new_tokens=4, decode="graph")  # the model is on the CPU


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("temperature,top_k", [(1.0, None), (0.7, 5), (0.0, None)])
def test_non_finite_logits_give_non_finite_logprobs_not_an_exception(temperature, top_k, bad, decode, device):
    """A diverged model must not crash the sampler: the trainer checks Rollout.logprobs once per step."""
    skip_graph_off_cuda(decode, device)
    model = Policy().to(device)
    model.bias[7] = bad  # every position's logits hold a NaN or an inf
    r = generate(
        model,
        random_prompts((3, 5)),
        G=2,
        max_new_tokens=6,
        temperature=temperature,
        top_k=top_k,
        generator=seeded(0, device),
        decode=decode,
    )
    assert not torch.isfinite(r.logprobs[r.completion_mask]).any()
    assert ((r.completion >= 0) & (r.completion < CFG.vocab_size)).all()  # token ids the trainer can index with


def chi2(counts, p):
    """Pearson's statistic of observed counts against probabilities p; inf if a count falls where p = 0."""
    n, keep = counts.sum(), p > 0
    if counts[~keep].sum() > 0:
        return float("inf")
    return float(((counts[keep] - n * p[keep]) ** 2 / (n * p[keep])).sum())


def test_first_token_frequencies_match_the_trainers_distribution_within_top_k(device):
    model, prompt, tau, k, n = Policy(eos_bias=0.0).to(device), [5, 6, 7, 8], 0.8, 10, 20_000
    r = generate(model, [prompt], G=n, max_new_tokens=1, temperature=tau, top_k=k, generator=seeded(4, device))
    counts = torch.bincount(r.completion[:, 0].cpu(), minlength=CFG.vocab_size).double()  # (V,)
    every = torch.tensor([prompt + [v] for v in range(CFG.vocab_size)], device=device)  # (V, P+1) each first token

    def expected(tau, k):
        """The trainer's π_τ(v | prompt) for every v (grpo.completion_logprobs), kept on its k most likely."""
        with torch.no_grad():
            logits = model(every, logits_at=scoring_columns(len(prompt)))  # (V, 1, V)
            logp = completion_logprobs(logits, every, len(prompt), tau)[:, 0].double().cpu()  # (V,)
        top = logp.topk(k).indices  # (k,)
        p = torch.zeros_like(logp)  # (V,)
        p[top] = torch.softmax(logp[top], dim=0)  # renormalised over the k
        return p

    p = expected(tau, k)
    assert (n * p[p > 0]).min() > 100  # every cell is well populated, so χ² is accurate
    assert counts[p == 0].sum() == 0  # nothing outside the top-k is ever drawn
    # 9 degrees of freedom: P(χ² > 60) ≈ 1e-9, so a right sampler fails by chance about never ...
    assert chi2(counts, p) < 60
    # ... and the same bound has power: a temperature 25% off, or k one off, is 5x beyond it
    for wrong in [expected(tau * 1.25, k), expected(tau / 1.25, k), expected(tau, k - 1), expected(tau, k + 1)]:
        assert chi2(counts, wrong) > 5 * 60
    # the sampler's own log-probs are those of the distribution it drew from
    torch.testing.assert_close(r.logprobs[:, 0].double().exp().cpu(), p[r.completion[:, 0].cpu()], atol=1e-5, rtol=0)


@pytest.mark.parametrize("decode", ["plain", "static"])
def test_sampling_under_autocast_keeps_float32_logprobs(decode):
    model = Policy(eos_bias=4.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = generate(model, random_prompts((3, 5)), G=2, max_new_tokens=6, generator=seeded(5), decode=decode)
    assert r.logprobs.dtype == torch.float32 and r.tokens.dtype == torch.long


# bf16 keeps 8 significant bits: two forwards that add up the same numbers in a different order (one
# token at a time from the cache, or the whole sequence at once) round differently, by up to ~0.4% of
# each intermediate value. On this test's model and rollout, bf16 autocast on a CPU gives a largest gap
# of 0.009 nats, while a trainer whose τ is 25% off the sampler's gives 0.58 (checked below, so the
# bound can fail); the bound leaves GPU kernels ten times the CPU's rounding.
BF16_MAX_GAP = 0.1  # nats, the largest |sampler - trainer| log-prob over the completion tokens


@pytest.mark.parametrize("decode", DECODERS)
def test_bf16_autocast_sampler_and_trainer_logprobs_agree(decode, device):
    if device.type != "cuda" or not torch.cuda.is_bf16_supported():
        pytest.skip("bf16 autocast is what train.py uses on CUDA; the CPU runs float32")
    model = Policy(eos_bias=2.0).to(device)
    tau = 0.9
    with torch.autocast("cuda", dtype=torch.bfloat16):
        r = generate(
            model,
            random_prompts((3, 9, 6, 20)),
            G=8,
            max_new_tokens=40,
            temperature=tau,
            generator=seeded(0, device),
            decode=decode,
        )
        gap = (r.logprobs - trainer_logprobs(model, r, tau)).abs()[r.completion_mask]  # (tokens,)
        wrong_tau = (r.logprobs - trainer_logprobs(model, r, tau * 1.25)).abs()[r.completion_mask]
    assert gap.max() < BF16_MAX_GAP, f"largest gap {gap.max():.4f} nats, mean {gap.mean():.5f}"
    assert wrong_tau.max() > BF16_MAX_GAP  # the bound can fail


def test_too_long_raises_value_error_that_says_what_to_change():
    model = Policy()
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, [[1] * 60, [2] * 3], G=2, max_new_tokens=5)
    r = generate(model, [[1] * 59], G=1, max_new_tokens=5, generator=seeded(6))  # exactly block_size
    assert r.tokens.shape[1] <= CFG.block_size


def test_completions_text_stops_before_eos_and_survives_split_utf8():
    enc = byte_tokenizer()
    done = list("hi é".encode()) + [EOS, EOS]  # 5 byte tokens, EOS, and the fill after it
    cut = list("ok ".encode()) + [0xC3] + [33] * 3  # "ok ", half of é, "!!!": no EOS, truncated
    tokens = torch.tensor([[7] + done, [7] + cut])  # (2, 1+7): a 1-token prompt, then T = 7
    r = Rollout(
        tokens=tokens,
        mask=torch.ones_like(tokens, dtype=torch.bool),
        prompt_len=1,
        completion_mask=torch.tensor([[True] * 6 + [False], [True] * 7]),
        truncated=torch.tensor([False, True]),
        logprobs=torch.zeros(2, 7),
    )
    assert completions_text(r, enc) == ["hi é", "ok \ufffd!!!"]


def test_completions_text_skips_ids_the_tokenizer_lacks():
    """A tokenizer whose special's id leaves a gap (a checkpoint's, say): ids in the gap, below n_vocab, can be sampled
    but not decoded; they decode to nothing, as ids past n_vocab do, and the rest of the completion is kept."""
    ranks = {bytes([b]): b for b in range(256)}
    enc = tiktoken.Encoding("gap", pat_str=r"\w+|\s+|.", mergeable_ranks=ranks, special_tokens={"<|eot|>": 300})
    ids = [*b"hi ", 260, *b"there", 299, 400, 300]  # ids 256..299 are none of enc's; 300 ends it
    completion = torch.tensor([ids])  # (1, T)
    roll = Rollout(
        tokens=completion,
        mask=torch.ones_like(completion, dtype=torch.bool),
        prompt_len=0,
        completion_mask=torch.ones_like(completion, dtype=torch.bool),
        truncated=torch.tensor([False]),
        logprobs=torch.zeros(completion.shape),
    )
    assert completions_text(roll, enc) == ["hi there"]


def test_select_keeps_the_rows_an_index_or_a_bool_mask_picks():
    r = generate(Policy(eos_bias=4.0), random_prompts((3, 9, 6)), G=4, max_new_tokens=12, generator=seeded(8))
    index = torch.tensor([8, 9, 10, 11, 0, 1, 2, 3])  # (n,) groups 2 and 0, in that order
    mask = torch.zeros(12, dtype=torch.bool)  # (N,) groups 0 and 2, in row order
    mask[index] = True
    for rows, picked in [(index, index), (mask, mask.nonzero().squeeze(1)), (index.tolist(), index)]:
        s = r.select(rows)
        assert s.prompt_len == r.prompt_len
        for name in ["tokens", "mask", "completion_mask", "truncated", "logprobs"]:
            assert torch.equal(getattr(s, name), getattr(r, name)[picked]), name
        assert torch.equal(s.lengths, r.lengths[picked])
    assert not torch.equal(r.select(index).tokens, r.select(mask).tokens)  # the order of an index is kept


@pytest.mark.parametrize(
    "N, size, want", [(7, 0, [(0, 7)]), (7, 3, [(0, 3), (3, 6), (6, 7)]), (6, 3, [(0, 3), (3, 6)])]
)
def test_micro_batches_cover_every_row_once_in_order(N, size, want):
    r = Rollout(
        tokens=torch.zeros(N, 3, dtype=torch.long),
        mask=torch.ones(N, 3, dtype=torch.bool),
        prompt_len=1,
        completion_mask=torch.ones(N, 2, dtype=torch.bool),
        truncated=torch.zeros(N, dtype=torch.bool),
        logprobs=torch.zeros(N, 2),
    )
    assert [(s.start, s.stop) for s in r.micro_batches(size)] == want


def test_join_repads_rollouts_of_different_lengths_and_keeps_every_rows_logprobs(device):
    """Rows of two generate() calls with different P and T (here also a selection of groups), joined: each row's
    logits on its real tokens, its completion log-probs under the model (grpo.completion_logprobs) and the
    sampler's, its masks, lengths, truncated flag and text are those it had in its own rollout."""
    model, tau = Policy(eos_bias=2.0).to(device), 0.9
    short = generate(
        model, random_prompts((3, 5), seed=1), G=4, max_new_tokens=4, temperature=tau, generator=seeded(9, device)
    )
    long = generate(
        model, random_prompts((12, 7), seed=2), G=4, max_new_tokens=20, temperature=tau, generator=seeded(10, device)
    )
    parts = [short.select(torch.arange(4, 8)), long.select(torch.arange(8) < 4), short.select(torch.arange(4))]
    joined = Rollout.join(parts, eos_id=EOS)
    P, T = long.prompt_len, long.completion.shape[1]
    assert (short.prompt_len, short.completion.shape[1]) < (P, T) and short.truncated.any()  # both paddings occur
    assert joined.prompt_len == P and joined.completion.shape == (12, T)
    with torch.no_grad():
        logits = model(joined.tokens, joined.mask)  # (N, P+T, V)
    logp = completion_logprobs(logits[:, scoring_columns(P)], joined.tokens, P, tau)  # (N, T)
    enc, n = byte_tokenizer(), 0
    for part in parts:
        with torch.no_grad():
            own = model(part.tokens, part.mask)  # (n, P_i+T_i, V)
        own_logp = completion_logprobs(own[:, scoring_columns(part.prompt_len)], part.tokens, part.prompt_len, tau)
        left, t = P - part.prompt_len, part.completion.shape[1]
        for i in range(len(part.tokens)):
            j, real, cm = n + i, part.mask[i], part.completion_mask[i]  # real (P_i+T_i,), cm (T_i,)
            row = slice(left, left + part.tokens.shape[1])  # where row i's columns sit in the joined row
            assert torch.equal(joined.tokens[j, row], part.tokens[i])
            assert (joined.tokens[j, :left] == EOS).all() and (joined.tokens[j, row.stop :] == EOS).all()
            assert joined.mask[j].tolist() == [False] * left + real.tolist() + [True] * (T - t)
            assert joined.completion_mask[j].tolist() == cm.tolist() + [False] * (T - t)
            assert joined.lengths[j] == part.lengths[i] and joined.truncated[j] == part.truncated[i]
            assert joined.logprobs[j].tolist() == part.logprobs[i].tolist() + [0.0] * (T - t)
            torch.testing.assert_close(logits[j, row][real], own[i][real], atol=1e-5, rtol=0)
            torch.testing.assert_close(logp[j, :t][cm], own_logp[i][cm], atol=1e-5, rtol=0)
            torch.testing.assert_close(logp[j, :t][cm], part.logprobs[i][cm], atol=1e-4, rtol=0)
        n += len(part.tokens)
    assert completions_text(joined, enc) == sum((completions_text(p, enc) for p in parts), [])
    assert all(torch.equal(getattr(Rollout.join([long], EOS), f), getattr(long, f)) for f in ["tokens", "mask"])
    with pytest.raises(ValueError, match="at least one"):
        Rollout.join([], EOS)


# ----------------------------------------------------------------------------- the command line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command_line(*args):
    """python sample.py ARGS in a fresh process: (exit status, stdout, stderr), the bytes decoded as UTF-8."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "sample.py"), *args], capture_output=True, timeout=120, cwd=ROOT, env=env
    )
    return r.returncode, r.stdout.decode(), r.stderr.decode()


@pytest.fixture
def tiny_ckpt(tmp_path):
    path = str(tmp_path / "tiny.pt")
    torch.manual_seed(0)
    save_checkpoint(path, GPT(CFG), byte_tokenizer())
    return path


ABSENT = ["cuda" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}", "mps", "gpu"]


@pytest.mark.parametrize("name", ABSENT)
def test_command_line_device_that_is_not_here_ends_in_one_line_that_says_what_to_change(tiny_ckpt, name):
    if name == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has an MPS device")
    rc, out, err = command_line("--ckpt", tiny_ckpt, "--device", name, "--G", "1", "How many?")
    assert rc == 1 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"error: --device {name}") and "use --device cpu" in err, err


def test_command_line_encodes_special_token_text_in_a_question_as_plain_text(tiny_ckpt):
    question = "What is <|endoftext|> 2 + 3?"
    rc, out, err = command_line(
        "--ckpt", tiny_ckpt, "--device", "cpu", "--G", "1", "--temperature", "0", "--max_new_tokens", "8", question
    )
    assert rc == 0 and "Traceback" not in err, err
    model, enc, prompt = load_model(tiny_ckpt)

    def shown(ids):
        """What the command line prints for a greedy completion of the prompt `ids`."""
        roll = generate(model, [ids], G=1, max_new_tokens=8, temperature=0, eos_id=EOS)
        text = completions_text(roll, enc)[0]
        answer = Task().answer(None, text)  # a checkpoint without a run's flags: a number task's answer
        end = "the limit of 8 tokens" if roll.truncated[0] else repr(enc.decode([EOS]))
        head = f"template: {template_name(prompt)}; a completion ends at {enc.decode([EOS])!r} or after 8 tokens\n"
        shown = None if answer is None else str(answer)
        return f"{head}=== {question}\n--- sample 1: answer {shown!r}, ended by {end}\n{text}\n"

    plain = enc.encode(prompt.format(question=question), disallowed_special=())
    assert EOS not in plain and enc.decode(plain) == prompt.format(question=question)
    assert out == shown(plain)
    special = enc.encode(prompt.format(question=question), allowed_special="all")  # the other reading
    assert EOS in special and shown(special) != out  # the output tells the two apart


def test_command_line_reads_a_malformed_countdown_question_as_one_nothing_answers(tmp_path):
    """A Countdown run's checkpoint reads typed questions as Countdown does: a list of numbers it cannot read poses a
    problem nothing answers (answer None), never a traceback."""
    path = str(tmp_path / "countdown.pt")
    torch.manual_seed(0)
    saved = dict(task="countdown", teacher_slip=0.6, eval_size=1, seed=0)  # what Countdown's constructor reads
    save_checkpoint(path, GPT(CFG), byte_tokenizer(), args=saved)
    question = "Using the numbers [1,,2], make 5."
    rc, out, err = command_line("--ckpt", path, "--device", "cpu", "--G", "2", "--max_new_tokens", "4", question)
    assert rc == 0 and err == "" and f"\n=== {question}\n" in out and out.count("answer None") == 2, err


def test_score_reruns_the_forward_with_the_one_shift_and_rollout_stats_count_the_rows():
    """grpo.score: the completion tokens' log-probs under a net, as grpo.completion_logprobs of a plain forward on
    the rows' tokens and mask at the scoring columns (equal to the sampler's own log-probs up to rounding), and from
    the same logits each position's entropy. rollout_stats: acc, lengths (EOS included) of the right and the wrong
    rows, truncated."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    gen = torch.Generator().manual_seed(0)
    roll = generate(model, [[1, 2, 3], [4, 5]], G=3, max_new_tokens=6, temperature=0.8, eos_id=256, generator=gen)
    rows = slice(1, 5)
    with torch.no_grad():
        logp, H = score(
            model, roll.tokens[rows], roll.mask[rows], roll.prompt_len, 0.8, with_entropy=True
        )  # (4, T), (4, T)
        logits = model(roll.tokens[rows], roll.mask[rows])[:, scoring_columns(roll.prompt_len)]  # (4, T, V)
        expect = completion_logprobs(logits, roll.tokens[rows], roll.prompt_len, 0.8)
    torch.testing.assert_close(logp, expect, atol=1e-6, rtol=0)
    assert torch.equal(score(model, roll.tokens[rows], roll.mask[rows], roll.prompt_len, 0.8), logp)
    m = roll.completion_mask[rows]
    assert torch.allclose(logp[m], roll.logprobs[rows][m], atol=1e-5)
    assert H.shape == logp.shape and (H >= 0).all() and H.max() <= math.log(257) + 1e-5
    right = torch.tensor([True, False, True, False])
    lengths = torch.tensor([3, 5, 1, 6])
    st = rollout_stats(right, lengths, torch.tensor([False, False, False, True]))
    assert {k: v.item() for k, v in st.items()} == {
        "acc": 0.5,
        "len": 3.75,
        "len_right": 2.0,
        "len_wrong": 5.5,
        "truncated": 0.25,
    }
