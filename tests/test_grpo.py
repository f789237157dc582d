"""grpo.py: log-probs and the shift, the KL estimators on one step (the worked numbers, by exact enumeration
and autograd through grpo_loss; longer answers are in test_theory.py), the k3 clamp, ratio and clip, GSPO's
sequence ratio, what pg_loss shows, dead groups in the loss, masking, micro-batches (loss, gradient, stats,
aggregate), and where it differs from its peers."""

import itertools
import math

import pytest
import torch

from advantage import group_advantages
from grpo import (
    AGGS,
    RATIOS,
    aggregate,
    completion_entropy,
    completion_logprobs,
    grpo_loss,
    kl_penalty,
    score,
    scoring_columns,
    tis_weights,
    token_logprobs,
)
from model import GPT, GPTConfig

F64 = torch.float64
EOS = 256


def t(*xs):
    return torch.tensor(xs, dtype=F64)


def r4(x):
    return [round(v, 4) for v in x.tolist()]


# ----------------------------------------------------------------------------- log-probs


def test_token_logprobs_is_log_softmax_at_the_token_with_temperature():
    torch.manual_seed(0)
    logits = torch.randn(3, 4, 11, dtype=F64)  # (N, T, V)
    tokens = torch.randint(0, 11, (3, 4))  # (N, T)
    for temp in (1.0, 0.7, 1.5):
        expect = torch.log_softmax(logits / temp, -1).gather(-1, tokens[..., None])[..., 0]  # (N, T)
        assert torch.allclose(token_logprobs(logits, tokens, temp), expect)
    assert torch.equal(token_logprobs(logits, tokens, 0.0), token_logprobs(logits, tokens, 1.0))
    low = token_logprobs(logits.to(torch.bfloat16), tokens)  # computed in float32
    assert low.dtype == torch.float32
    assert torch.allclose(low, token_logprobs(logits.to(torch.bfloat16).float(), tokens))


def test_completion_logprobs_shift_matches_prefix_forwards():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16)).eval()
    P, T = 4, 5
    seq = torch.randint(0, 257, (2, P + T))  # (N, P+T)
    with torch.no_grad():
        logits = model(seq, logits_at=scoring_columns(P))  # (N, T, V): the head at the scoring columns only
        assert logits.shape == (2, T, 257)
        logp = completion_logprobs(logits, seq, P, temperature=0.8)  # (N, T)
        for j in range(T):  # token P+j is scored by the last logits of the prefix seq[:, :P+j]
            last = model(seq[:, : P + j])[:, -1] / 0.8  # (N, V)
            expect = torch.log_softmax(last, -1).gather(-1, seq[:, P + j, None])[:, 0]
            assert torch.allclose(logp[:, j], expect, atol=1e-5)
        assert torch.equal(score(model, seq, None, P, 0.8), logp)  # what train.py scores
        with pytest.raises(ValueError, match="not the scoring columns"):  # every column's logits: refused
            completion_logprobs(model(seq), seq, P)


# ----------------------------------------------------------------------------- KL estimators


def test_k3_single_tokens_seed_000():
    logp, ref = t(0.5, 0.2).log(), t(0.4, 0.3).log()  # π and π_ref of two sampled tokens
    assert [round(v, 3) for v in kl_penalty(logp, ref, "k3").tolist()] == [0.023, 0.095]
    assert [round(v, 3) for v in kl_penalty(logp, ref, "k1").tolist()] == [0.223, -0.405]
    x = torch.randn(1000, dtype=F64) * 3  # k3 >= 0 and k2 >= 0 everywhere; k1 is not
    assert (kl_penalty(x, x.flip(0), "k3") >= 0).all() and (kl_penalty(x, x.flip(0), "k2") >= 0).all()


def answers(theta):
    """logp (3, 1) of the three one-token answers of softmax(theta), through token_logprobs."""
    return token_logprobs(theta.expand(3, 1, 3), torch.arange(3)[:, None])  # (N=3, T=1)


def expected_kl_grad(theta0, ref, kind, sampler=None, importance=False):
    """Expected gradient of the KL part of the loss (A = 0, beta = 1) by exact enumeration.

    Each answer y is one sequence; its loss is weighted by its (detached) probability under the
    sampler (default: π itself), which is also π_old. importance=True replaces grpo_loss's KL term
    by the importance-weighted one a forker would add: aggregate((π/π_old).detach() · k, ...).
    """
    theta = torch.tensor(theta0, dtype=F64, requires_grad=True)  # (V,)
    logp = answers(theta)  # (3, 1)
    pi = logp.detach().exp()[:, 0]  # (3,)
    q = pi if sampler is None else torch.softmax(t(*sampler), 0)  # (3,) sampling distribution = π_old
    old_logp, ref_logp = q.log()[:, None], ref.log()[:, None]  # (3, 1)
    mask = torch.ones(1, 1, dtype=torch.bool)
    total = 0.0
    for y in range(3):
        rows = slice(y, y + 1)
        if importance:
            loss, _ = grpo_loss(logp[rows], old_logp[rows], None, torch.zeros(1), mask, beta=0.0)
            weight = torch.exp(logp[rows] - old_logp[rows]).detach()  # (1, 1) π/π_old
            loss = loss + 1.0 * aggregate(weight * kl_penalty(logp[rows], ref_logp[rows], kind), mask, "grpo")
        else:
            loss, _ = grpo_loss(logp[rows], old_logp[rows], ref_logp[rows], torch.zeros(1), mask, beta=1.0, kl=kind)
        total = total + q[y] * loss
    (grad,) = torch.autograd.grad(total, theta)
    return grad


def exact_kls(theta0, ref):
    """Value and autograd gradient of KL(π‖π_ref) and KL(π_ref‖π) for π = softmax(theta)."""
    theta = torch.tensor(theta0, dtype=F64, requires_grad=True)
    pi = torch.softmax(theta, 0)
    fwd, rev = (pi * (pi / ref).log()).sum(), (ref * (ref / pi).log()).sum()
    return fwd.item(), torch.autograd.grad(fwd, theta, retain_graph=True)[0], torch.autograd.grad(rev, theta)[0]


def expected_value(theta0, ref, kind):
    logp = answers(t(*theta0))  # (3, 1)
    return (logp.exp() * kl_penalty(logp, ref.log()[:, None], kind)).sum().item()


def test_k3_value_is_kl_forward_but_gradient_is_kl_reverse_seed_004():
    theta, ref = (1.0, 0.0, -0.5), t(0.2, 0.5, 0.3)
    kl, grad_fwd, grad_rev = exact_kls(theta, ref)
    assert round(expected_value(theta, ref, "k3"), 4) == round(kl, 4) == 0.4347
    g = expected_kl_grad(theta, ref, "k3")
    assert r4(g) == [0.4285, -0.2688, -0.1598]
    assert torch.allclose(g, grad_rev, atol=1e-12)  # ∇KL(π_ref‖π) ...
    assert not torch.allclose(g, grad_fwd, atol=1e-3)  # ... not ∇KL(π‖π_ref)
    assert r4(grad_fwd) == [0.4465, -0.2788, -0.1676]


def test_k2_gradient_is_kl_forward_problem_9():
    theta, ref = (0.0, 1.0, 0.5), t(0.5, 0.3, 0.2)
    kl, grad_fwd, grad_rev = exact_kls(theta, ref)
    assert round(kl, 4) == 0.2132 and round(expected_value(theta, ref, "k3"), 4) == 0.2132
    assert round(expected_value(theta, ref, "k2"), 4) == 0.1885  # biased value ...
    g2 = expected_kl_grad(theta, ref, "k2")
    assert r4(g2) == [-0.2236, 0.1573, 0.0664]
    assert torch.allclose(g2, grad_fwd, atol=1e-12)  # ... but the right gradient
    g3 = expected_kl_grad(theta, ref, "k3")
    assert r4(g3) == [-0.3137, 0.2065, 0.1072]
    assert torch.allclose(g3, grad_rev, atol=1e-12)
    # k1: unbiased value, but on-policy its expected gradient is E_π[∇log π] = 0
    assert torch.allclose(expected_kl_grad(theta, ref, "k1"), torch.zeros(3, dtype=F64), atol=1e-12)


def test_k3_sampled_from_pi_old_and_importance_weights():
    theta, ref, old = (0.0, 1.0, 0.5), t(0.5, 0.3, 0.2), (0.5, 0.5, 0.0)
    g_old = expected_kl_grad(theta, ref, "k3", sampler=old)
    assert r4(g_old) == [-0.5698, 0.3632, 0.2066]
    _, grad_fwd, grad_rev = exact_kls(theta, ref)
    assert not torch.allclose(g_old, grad_fwd, atol=1e-2) and not torch.allclose(g_old, grad_rev, atol=1e-2)
    g = expected_kl_grad(theta, ref, "k3", sampler=old, importance=True)
    assert r4(g) == [-0.3137, 0.2065, 0.1072]
    assert torch.allclose(g, expected_kl_grad(theta, ref, "k3"), atol=1e-12)


# ----------------------------------------------------------------------------- ratio and clip


def test_k3_clamps_the_log_ratio_to_plus_minus_20_like_verl():
    logp = torch.tensor([-100.0, -1.0, -0.5, -0.5], requires_grad=True)  # float32, as in training
    ref = torch.tensor([-0.1, -1.5, -0.5, -30.5])  # log r = 99.9, -0.5, 0, -30
    assert torch.isinf(torch.exp(ref - logp.detach())[0])  # unclamped, exp overflows
    k3 = kl_penalty(logp, ref, "k3")
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    assert torch.isfinite(k3).all()
    assert math.isclose(k3[0].item(), math.exp(20) - 21, rel_tol=1e-6)  # the value at log r = 20 ...
    assert math.isclose(k3[3].item(), math.exp(-20) + 19, rel_tol=1e-6)  # ... and at log r = -20
    assert grad[0].item() == 0.0 and grad[3].item() == 0.0  # beyond the clamp: no gradient
    # inside it, the plain formula and its gradient d k3 / d log π = 1 - π_ref/π
    assert math.isclose(k3[1].item(), math.exp(-0.5) + 0.5 - 1, rel_tol=1e-6) and k3[2].item() == 0.0
    assert math.isclose(grad[1].item(), 1 - math.exp(-0.5), rel_tol=1e-6) and grad[2].item() == 0.0
    loss, s = grpo_loss(logp[None], logp[None].detach(), ref[None], torch.zeros(1), torch.ones(1, 4))
    assert torch.isfinite(loss) and torch.isfinite(s["kl"])


# ----------------------------------------------------------------------------- ratio and clip


def lengths_mask(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (N, T) bool


def test_mu_1_ratio_is_one_and_the_gradient_is_the_plain_policy_gradient():
    """π_old from a second, no-grad forward of the same weights on the same batch (μ = 1): ρ ≡ 1, nothing
    clipped, and the weights' gradient is REINFORCE's, -Σ_i A_i/(N·|o_i|) Σ_t ∇log π(o_it)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16))
    params = list(model.parameters())
    P, T = 3, 5
    seq = torch.randint(0, 256, (4, P + T))  # (N, P+T)
    mask = lengths_mask([5, 2, 3, 1], T)  # (N, T)
    adv = torch.tensor([1.0, -2.0, 0.5, -0.1])  # (N,)
    logp = score(model, seq, None, P, 1.0)  # (N, T) π_θ, with grad
    with torch.no_grad():
        old = score(model, seq, None, P, 1.0)  # (N, T) π_old: same weights, no grad
    loss, s = grpo_loss(logp, old, None, adv, mask, beta=0.0)
    grads = torch.autograd.grad(loss, params, retain_graph=True)
    assert s["ratio_mean"].item() == 1.0
    assert s["clip_frac_low"].item() == s["clip_frac_high"].item() == 0.0
    reinforce = -(adv[:, None] / (4 * mask.sum(1, keepdim=True)) * torch.where(mask, logp, 0.0)).sum()
    expect = torch.autograd.grad(reinforce, params)
    assert all(torch.allclose(g, e, atol=1e-7, rtol=1e-5) for g, e in zip(grads, expect))
    assert max(g.abs().max().item() for g in grads) > 1e-3
    # μ = 2: after one update on the same rollout π_θ ≠ π_old, ρ moves and the clip acts
    with torch.no_grad():
        for p, g in zip(params, grads):
            p -= 200.0 * g
    _, s2 = grpo_loss(score(model, seq, None, P, 1.0), old, None, adv, mask, beta=0.0)
    assert s2["ratio_mean"].item() != 1.0 and (s2["clip_frac_low"] + s2["clip_frac_high"]).item() > 0


def test_old_ref_and_advantages_are_constants_even_if_not_detached():
    torch.manual_seed(0)
    logp = torch.randn(4, 5, dtype=F64, requires_grad=True)  # (N, T)
    mask = lengths_mask([5, 2, 3, 1], 5)  # (N, T)
    adv = t(1.0, -2.0, 0.5, -0.1)  # (N,)
    adv_g = adv + (logp.sum(1) - logp.sum(1).detach())  # value adv, but a path to θ
    loss, _ = grpo_loss(logp, logp, logp - 0.3, adv_g, mask)
    loss_c, _ = grpo_loss(logp, logp.detach(), (logp - 0.3).detach(), adv, mask)
    grad, grad_c = (torch.autograd.grad(x, logp)[0] for x in (loss, loss_c))
    assert torch.equal(grad, grad_c)


def test_clip_engages_exactly_where_the_formula_says():
    rho = t(0.5, 0.9, 1.1, 1.25, 1.5)  # (T,) ratios, the same on every row
    adv = t(1.0, -1.0, 2.0, -0.5)  # (N,)
    old = torch.randn(4, 5, dtype=F64)  # (N, T)
    logp = (old + rho.log()).requires_grad_()  # (N, T) so that π/π_old = rho
    mask = torch.ones(4, 5, dtype=torch.bool)
    for eps_high, high_edge in ((None, 1.2), (0.28, 1.28)):  # DAPO clip-higher moves the upper edge
        loss, s = grpo_loss(logp, old, None, adv, mask, clip_eps=0.2, clip_eps_high=eps_high, beta=0.0)
        (grad,) = torch.autograd.grad(loss, logp)
        A = adv[:, None]  # (N, 1)
        low = (rho < 0.8) & (A < 0)  # (N, T)
        high = (rho > high_edge) & (A > 0)  # (N, T)
        clipped = low | high
        assert clipped.any() and (~clipped).any()
        assert torch.equal(grad[clipped], torch.zeros(int(clipped.sum()), dtype=F64))
        unclipped = (-A * rho / 20).expand(4, 5)  # d(-ρA/(N·T))/d logp = -ρA/(N·T)
        assert torch.allclose(grad[~clipped], unclipped[~clipped], atol=1e-15)
        assert abs(s["clip_frac_low"].item() - low.sum().item() / 20) < 1e-12
        assert abs(s["clip_frac_high"].item() - high.sum().item() / 20) < 1e-12
        assert abs(s["ratio_mean"].item() - rho.mean().item()) < 1e-12


def test_the_three_aggregations_on_a_known_batch():
    """μ = 1, beta = 0, so each token's objective is A_i: the three normalisers side by side."""
    mask = lengths_mask([4, 1, 2], 4)  # (N, T) |o| = 4, 1, 2
    adv = t(1.0, -2.0, 3.0)  # (N,)
    logp = torch.zeros(3, 4, dtype=F64)

    def loss(agg, **kw):
        return grpo_loss(logp, logp, None, adv, mask, beta=0.0, agg=agg, **kw)[0].item()

    assert abs(loss("grpo") - -(1 - 2 + 3) / 3) < 1e-12  # 1/N Σ_i 1/|o_i| Σ_t A_i
    assert abs(loss("dapo") - -(4 - 2 + 6) / 7) < 1e-12  # Σ_i Σ_t A_i / Σ|o_i|
    assert abs(loss("dr_grpo", max_len=4) - -(4 - 2 + 6) / (3 * 4)) < 1e-12  # Σ_i Σ_t A_i / (N·max_len)
    assert abs(loss("dr_grpo", max_len=16) - -(4 - 2 + 6) / (3 * 16)) < 1e-12
    assert abs(loss("grpo", num_seqs=6) - -(1 - 2 + 3) / 6) < 1e-12
    assert abs(loss("dapo", num_tokens=14) - -(4 - 2 + 6) / 14) < 1e-12
    for agg in AGGS:  # the public aggregate() is the same reduction
        x = adv[:, None].expand(3, 4)
        assert abs(-aggregate(x, mask, agg, max_len=4).item() - loss(agg, max_len=4)) < 1e-12


# ----------------------------------------------------------------------------- GSPO: one ratio per answer


def gspo_by_hand(logp, old, ref, adv, lengths, agg, eps_low, eps_high, beta, max_len):
    """GSPO written out answer by answer: s_i = (π(o_i)/π_old(o_i))^(1/|o_i|), min(s_i·A_i, clip(s_i)·A_i) once per
    answer, counted for each of its |o_i| tokens over the aggregation's denominator (agg="grpo": N·|o_i|, so 1/N
    per answer, the paper's 1/G Σ_i), plus GRPO's KL term (k3) over the same denominators."""
    N, total_len = len(lengths), sum(lengths)
    loss = 0.0
    for i, L in enumerate(lengths):
        s = torch.exp((logp[i, :L] - old[i, :L]).sum() / L)
        surr = torch.minimum(s * adv[i], s.clamp(1 - eps_low, 1 + eps_high) * adv[i])
        kl = kl_penalty(logp[i, :L], ref[i, :L], "k3").sum()
        denominator = {"grpo": N * L, "dapo": total_len, "dr_grpo": N * max_len}[agg]
        loss = loss + (-L * surr + beta * kl) / denominator
    return loss


@pytest.mark.parametrize("agg", AGGS)
def test_gspo_against_a_hand_written_loss_and_gradient(agg):
    torch.manual_seed(0)
    lengths, T, N = [4, 1, 3, 5, 2, 5], 5, 6
    mask = lengths_mask(lengths, T)  # (N, T)
    logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)  # μ > 1: π_θ has moved away from π_old
    old[5] += 0.4  # s_i = 1.26, 1.22, 1.40, 1.15, 1.07, 0.63
    ref = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)
    adv = t(1.0, -1.0, 0.5, 2.0, 1.5, -1.0)  # (N,) clipped at ε = 0.2: answers 0, 2 above, 5 below
    size = mask.sum(1).to(F64)  # (N,) |o_i|
    s_i = torch.exp(torch.where(mask, logp.detach() - old, 0.0).sum(1) / size)  # (N,) one ratio per answer
    for eps_low, eps_high in ((0.2, 0.2), (3e-4, 4e-4)):  # PPO's ε, then the GSPO paper's
        kw = dict(agg=agg, ratio="seq", clip_eps=eps_low, clip_eps_high=eps_high, max_len=8)
        loss, s = grpo_loss(logp, old, ref, adv, mask, beta=0.04, **kw)
        expect = gspo_by_hand(logp, old, ref, adv, lengths, agg, eps_low, eps_high, 0.04, 8)
        assert torch.allclose(loss, expect, atol=1e-14, rtol=0)
        (g,), (g_hand,) = torch.autograd.grad(loss, logp), torch.autograd.grad(expect, logp)
        assert torch.allclose(g, g_hand, atol=1e-14, rtol=0)
        # the policy part's gradient in closed form: -c_i·A_i·s_i/|o_i| on each token of an unclipped answer, where
        # c_i is the aggregation's weight of the whole answer; 0 on a clipped one
        (g_pg,) = torch.autograd.grad(grpo_loss(logp, old, None, adv, mask, beta=0.0, **kw)[0], logp)
        low, high = (s_i < 1 - eps_low) & (adv < 0), (s_i > 1 + eps_high) & (adv > 0)  # (N,) clipped answers
        assert low.any() and high.any() and (~(low | high)).any()
        c = {"grpo": torch.full((N,), 1 / N, dtype=F64), "dapo": size / size.sum(), "dr_grpo": size / (N * 8)}[agg]
        per_answer = torch.where(low | high, 0.0, -c * adv * s_i / size)  # (N,)
        assert torch.allclose(g_pg, torch.where(mask, per_answer[:, None], 0.0), atol=1e-15, rtol=0)
        # stats: every token of a clipped answer counts, and ratio_mean is the token mean of s_i
        assert abs(s["clip_frac_low"].item() - (size * low).sum().item() / size.sum().item()) < 1e-12
        assert abs(s["clip_frac_high"].item() - (size * high).sum().item() / size.sum().item()) < 1e-12
        assert abs(s["ratio_mean"].item() - (size * s_i).sum().item() / size.sum().item()) < 1e-12
        # the token ratio is a different loss here
        assert abs(grpo_loss(logp, old, ref, adv, mask, beta=0.04, **{**kw, "ratio": "token"})[0] - loss) > 1e-4


@pytest.mark.parametrize("agg", AGGS)
def test_gspo_is_grpo_on_policy(agg):
    """μ = 1: π_old = π_θ, so s_i ≡ 1, ∇s_i = 1/|o_i| Σ_t ∇log π_it: the same loss, gradient and stats."""
    torch.manual_seed(0)
    mask = lengths_mask([4, 1, 3, 5, 2, 0], 5)  # (N, T); the last row has no token
    logp = (torch.randn(6, 5, dtype=F64) - 1).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(6, 5, dtype=F64)
    adv = t(1.0, -1.0, 0.5, -2.0, 1.5, 1.0)
    for clip_eps, clip_eps_high in ((0.2, None), (3e-4, 4e-4)):
        kw = dict(agg=agg, clip_eps=clip_eps, clip_eps_high=clip_eps_high, max_len=5)
        seq, s_seq = grpo_loss(logp, logp.detach(), ref, adv, mask, ratio="seq", **kw)
        tok, s_tok = grpo_loss(logp, logp.detach(), ref, adv, mask, ratio="token", **kw)
        (g_seq,), (g_tok,) = torch.autograd.grad(seq, logp), torch.autograd.grad(tok, logp)
        assert torch.allclose(seq, tok, atol=1e-15, rtol=0) and torch.allclose(g_seq, g_tok, atol=1e-15, rtol=0)
        assert g_seq.abs().max() > 1e-3
        assert all(torch.allclose(s_seq[k], s_tok[k], atol=1e-15, rtol=0) for k in s_tok)
        assert s_seq["ratio_mean"].item() == 1.0 and s_seq["clip_frac_low"] == s_seq["clip_frac_high"] == 0
    # after a step away from π_old (μ > 1) they differ
    old = logp.detach() + 0.1 * torch.randn(6, 5, dtype=F64)
    seq_moved = grpo_loss(logp, old, ref, adv, mask, ratio="seq", agg=agg, max_len=5)[0]
    assert abs(seq_moved - grpo_loss(logp, old, ref, adv, mask, ratio="token", agg=agg, max_len=5)[0]) > 1e-4


# ----------------------------------------------------------------------------- what pg_loss shows


@pytest.mark.parametrize("method", ["mean", "std", "loo", "dr_grpo"])
def test_pg_loss_is_zero_only_under_the_stated_conditions(method):
    torch.manual_seed(0)
    G = 4
    mask = lengths_mask([5, 1, 3, 2, 4, 4, 2, 5], 5)  # (N, T) two groups, lengths differ within each
    rewards = t(1, 0, 0, 0.2, 0, 1, 1, 0)  # (N,)
    logp = torch.randn(8, 5, dtype=F64) - 1  # (N, T)

    def pg(agg, adv=group_advantages(rewards, G, method), old=logp, mask=mask):
        return grpo_loss(logp, old, None, adv, mask, beta=0.0, agg=agg, max_len=5)[1]["pg_loss"].item()

    assert abs(pg("grpo")) < 1e-12  # μ = 1, mean-centred, every answer weighs 1/N
    halves = [
        grpo_loss(logp[m], logp[m], None, group_advantages(rewards, G, method)[m], mask[m], beta=0.0, num_seqs=8)[1][
            "pg_loss"
        ].item()
        for m in (slice(0, 4), slice(4, 8))
    ]
    assert abs(sum(halves)) < 1e-12  # micro-batches of whole groups, summed
    assert abs(pg("dapo")) > 1e-3 and abs(pg("dr_grpo")) > 1e-3  # weighted by length: not 0
    one_length = lengths_mask([3, 3, 3, 3, 5, 5, 5, 5], 5)  # (N, T) lengths equal within each group: 0 again
    assert abs(pg("dapo", mask=one_length)) < 1e-12 and abs(pg("dr_grpo", mask=one_length)) < 1e-12
    assert abs(pg("grpo", adv=group_advantages(rewards, G, "none"))) > 1e-3  # no baseline: not 0
    assert abs(pg("grpo", old=logp + 0.1 * torch.randn_like(logp))) > 1e-3  # ρ ≠ 1 (μ > 1): not 0


# ----------------------------------------------------------------------------- dead groups in the loss


@pytest.mark.parametrize("agg", AGGS)
def test_a_dead_group_still_gets_the_kl_gradient_and_counts_in_the_denominators(agg):
    torch.manual_seed(0)
    G = 3
    adv = group_advantages(t(1, 0, 0, 1, 1, 1), G)  # (N,) group 0 alive, group 1 dead (A = 0)
    mask = lengths_mask([2, 4, 3, 1, 4, 2], 4)  # (N, T)
    logp = (torch.randn(6, 4, dtype=F64) - 1).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(6, 4, dtype=F64)
    for beta in (0.04, 0.0):
        loss, _ = grpo_loss(logp, logp.detach(), ref, adv, mask, beta=beta, agg=agg, max_len=4)
        (grad,) = torch.autograd.grad(loss, logp)
        dead = grad[3:][mask[3:]]  # the dead group's tokens
        assert (dead.abs() > 0).all() if beta else (dead == 0).all()

    # beta = 0: the live group's gradient with the dead group in the step, against without it
    def live_grad(rows):
        loss, _ = grpo_loss(logp[rows], logp[rows].detach(), None, adv[rows], mask[rows], beta=0.0, agg=agg, max_len=4)
        return torch.autograd.grad(loss, logp)[0][:3]

    share = 0.5 if agg != "dapo" else mask[:3].sum().item() / mask.sum().item()  # live sequences or tokens
    assert torch.allclose(live_grad(slice(0, 6)), share * live_grad(slice(0, 3)), atol=1e-15)


# ----------------------------------------------------------------------------- masking


def test_masked_tokens_get_no_gradient_and_their_values_do_not_matter():
    torch.manual_seed(0)
    mask = lengths_mask([4, 1, 0, 6], 6)  # (N, T); row 2 has no token at all
    logp = torch.randn(4, 6, dtype=F64) - 1  # (N, T)
    old, ref = logp + 0.1 * torch.randn_like(logp), logp + 0.3 * torch.randn_like(logp)
    adv = t(1.0, -1.0, 0.5, 2.0)
    results = []
    for garbage in (0.0, float("nan"), float("inf"), -1e4):
        x = [v.masked_fill(~mask, garbage) for v in (logp, old, ref)]
        x[0].requires_grad_()
        for agg, ratio in itertools.product(AGGS, RATIOS):
            loss, s = grpo_loss(x[0], x[1], x[2], adv, mask, agg=agg, ratio=ratio, max_len=6)
            (grad,) = torch.autograd.grad(loss, x[0])
            assert torch.isfinite(loss) and torch.isfinite(grad).all()
            assert all(torch.isfinite(v) for v in s.values())
            assert torch.equal(grad[~mask], torch.zeros(int((~mask).sum()), dtype=F64))
            results.append((loss, grad))
    n = len(AGGS) * len(RATIOS)
    for k in range(n, len(results)):  # the same aggregation and ratio with garbage vs 0 after the EOS
        assert torch.equal(results[k][0], results[k % n][0]) and torch.equal(results[k][1], results[k % n][1])


def test_tokens_after_the_end_change_nothing_end_to_end():
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16)
    policy, ref_model = GPT(cfg), GPT(cfg)
    P, T = 3, 6
    lengths = [3, 5]  # row 0 ends at its third token, row 1 at its fifth
    seq = torch.randint(0, 256, (2, P + T))  # (N, P+T)
    seq[0, P + 2] = seq[1, P + 4] = EOS
    mask = lengths_mask(lengths, T)  # (N, T) from the lengths the sampler reports

    def run(seq):
        policy.zero_grad()
        logp = score(policy, seq, None, P, 1.0)  # (N, T)
        with torch.no_grad():
            ref = score(ref_model, seq, None, P, 1.0)
        loss, _ = grpo_loss(logp, logp.detach() + 0.05, ref, t(1.0, -1.0).float(), mask)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in policy.parameters()]

    loss_a, grads_a = run(seq)
    changed = seq.clone()
    changed[0, P + 3 :] = torch.randint(0, 257, (T - 3,))  # anything after the end, EOS too
    changed[1, P + 5 :] = 7
    loss_b, grads_b = run(changed)
    assert torch.allclose(loss_a, loss_b, atol=1e-6, rtol=0)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=0) for a, b in zip(grads_a, grads_b))
    assert max(g.abs().max().item() for g in grads_a) > 1e-4


# ----------------------------------------------------------------------------- micro-batches


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("agg", AGGS)
def test_micro_batches_sum_to_one_big_batch_loss_gradient_and_every_stat(agg, ratio):
    torch.manual_seed(0)
    N, T, max_len = 6, 5, 8
    mask = lengths_mask([5, 1, 0, 3, 5, 2], T)  # (N, T)
    logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)  # moved policy: the clip engages
    ref = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)
    adv = t(0.5, -0.3, -0.2, -0.6, 0.3, -0.4)  # (N,)
    kw = dict(agg=agg, ratio=ratio, clip_eps=0.02, beta=0.04, max_len=max_len)
    full, s = grpo_loss(logp, old, ref, adv, mask, **kw)
    (g_full,) = torch.autograd.grad(full, logp)
    assert s["clip_frac_low"] > 0 and s["clip_frac_high"] > 0 and s["clip_frac_low"] + s["clip_frac_high"] < 1
    micro = [slice(0, 1), slice(1, 4), slice(4, 6)]  # 5, 4 and 7 tokens: unequal
    step = dict(num_seqs=N, num_tokens=int(mask.sum()), **kw)
    parts = [grpo_loss(logp[m], old[m], ref[m], adv[m], mask[m], **step) for m in micro]
    acc = sum(loss for loss, _ in parts)
    (g_acc,) = torch.autograd.grad(acc, logp)
    assert torch.allclose(acc, full, atol=1e-12, rtol=0)
    assert torch.allclose(g_acc, g_full, atol=1e-12, rtol=0)
    assert set(parts[0][1]) == set(s)
    for key in s:  # every stat is an additive share of the step
        assert torch.allclose(sum(st[key] for _, st in parts).to(F64), s[key].to(F64), atol=1e-12, rtol=0), key
    # per-micro-batch denominators (the usual bug) give a different gradient: the test can fail
    naive = sum(grpo_loss(logp[m], old[m], ref[m], adv[m], mask[m], **kw)[0] for m in micro) / len(micro)
    (g_naive,) = torch.autograd.grad(naive, logp)
    assert not torch.allclose(g_naive, g_full, atol=1e-3)
    # an extra per-token term through aggregate() adds up the same way
    entropy_like = -logp * logp.exp()  # (N, T)
    one = 0.01 * aggregate(entropy_like, mask, agg, max_len=max_len)
    summed = sum(
        0.01 * aggregate(entropy_like[m], mask[m], agg, num_seqs=N, num_tokens=int(mask.sum()), max_len=max_len)
        for m in micro
    )
    assert torch.allclose(summed, one, atol=1e-15, rtol=0)
    g_summed = torch.autograd.grad(summed, logp, retain_graph=True)[0]
    assert torch.allclose(g_summed, torch.autograd.grad(one, logp)[0], atol=1e-15)


def test_argument_errors_and_beta_zero_needs_no_reference():
    logp, mask, adv = torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2)
    loss, s = grpo_loss(logp, logp, None, adv, mask, beta=0.0)
    assert loss.item() == 0.0 and s["kl"].item() == 0.0
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, logp, None, adv, mask)
    with pytest.raises(ValueError, match="aggregation"):
        grpo_loss(logp, logp, logp, adv, mask, agg="sum")
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(logp, mask, "sum")
    with pytest.raises(ValueError, match="KL estimator"):
        grpo_loss(logp, logp, logp, adv, mask, kl="k4")
    with pytest.raises(ValueError, match="ratio"):
        grpo_loss(logp, logp, logp, adv, mask, ratio="sequence")
    with pytest.raises(ValueError, match="advantages"):
        grpo_loss(logp, logp, logp, torch.zeros(2, 1), mask)
    # dr_grpo's constant must not be this batch's length, which shrinks when sampling stops early
    with pytest.raises(ValueError, match="max_len"):
        grpo_loss(logp, logp, logp, adv, mask, agg="dr_grpo")
    with pytest.raises(ValueError, match="max_len"):
        aggregate(logp, mask, "dr_grpo", num_seqs=2)
    with pytest.raises(TypeError):  # everything after the mask is keyword-only
        grpo_loss(logp, logp, logp, adv, mask, 0.2)


# ----------------------------------------------------------------------------- CISPO, sampler weights, entropy


def cispo_by_hand(logp, old, adv, lengths, agg, eps_high, max_len):
    """CISPO's policy loss written out answer by answer: -c(i, t)·min(ρ_it, 1+ε_high)·A_i·log π_it, the weight a
    constant, c the aggregation's weight of one token (grpo: 1/(N·|o_i|), dapo: 1/Σ|o|, dr_grpo: 1/(N·max_len))."""
    N = len(lengths)
    total = torch.zeros((), dtype=F64)
    for i, n in enumerate(lengths):
        for j in range(n):
            w = min(math.exp((logp[i, j] - old[i, j]).item()), 1 + eps_high)  # a number: no gradient through it
            c = {"grpo": 1 / (N * n), "dapo": 1 / sum(lengths), "dr_grpo": 1 / (N * max_len)}[agg]
            total = total - c * w * adv[i] * logp[i, j]
    return total


@pytest.mark.parametrize("agg", AGGS)
def test_cispo_against_a_hand_written_loss_and_gradient(agg):
    """loss="cispo": sg(min(ρ, 1+ε_high))·A·log π per token. Its gradient is w·A·∇log π: PPO-clip's ρ·A·∇log π on
    every token that CISPO does not cap and PPO does not clip, and where PPO's clip cuts a token's gradient CISPO
    keeps one."""
    torch.manual_seed(0)
    lengths, T, N = [4, 1, 3, 5, 2], 5, 5
    mask = lengths_mask(lengths, T)  # (N, T)
    logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)  # μ > 1: some ratios beyond 1 ± ε
    adv = t(1.0, -1.0, 0.5, 2.0, -1.5)  # (N,)
    kw = dict(agg=agg, beta=0.0, clip_eps=0.2, clip_eps_high=0.28, max_len=7)
    loss, s = grpo_loss(logp, old, None, adv, mask, loss="cispo", **kw)
    expect = cispo_by_hand(logp, old, adv, lengths, agg, 0.28, 7)
    assert torch.allclose(loss, expect, atol=1e-14, rtol=0)
    (g,), (g_hand,) = torch.autograd.grad(loss, logp), torch.autograd.grad(expect, logp)
    assert torch.allclose(g, g_hand, atol=1e-14, rtol=0)
    rho = torch.exp(logp.detach() - old)  # (N, T)
    capped = mask & (rho > 1.28)
    assert capped.any() and (mask & ~capped).any()
    assert abs(s["clip_frac_high"].item() - capped.sum().item() / sum(lengths)) < 1e-12
    assert s["clip_frac_low"].item() == 0.0  # no lower bound
    # against PPO's clip: the same gradient on every token that neither caps nor clips, and CISPO's is never 0
    (g_clip,) = torch.autograd.grad(grpo_loss(logp, old, None, adv, mask, **kw)[0], logp)
    A = adv[:, None].expand(N, T)  # (N, T)
    ppo_clipped = mask & (((rho < 0.8) & (A < 0)) | ((rho > 1.28) & (A > 0)))
    assert ppo_clipped.any()
    same = mask & ~capped & ~ppo_clipped
    assert torch.allclose(g[same], g_clip[same], atol=1e-15, rtol=0)
    assert (g_clip[ppo_clipped] == 0).all() and (g[ppo_clipped] != 0).all()


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("ratio", RATIOS)
def test_cispo_is_grpo_on_policy(agg, ratio):
    """μ = 1 (π_old = π_θ, ρ ≡ 1, nothing capped): CISPO's gradient is GRPO's under every aggregation and ratio."""
    torch.manual_seed(1)
    mask = lengths_mask([4, 1, 3, 5, 2, 0], 5)  # (N, T)
    logp = (torch.randn(6, 5, dtype=F64) - 1).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(6, 5, dtype=F64)
    adv = t(1.0, -1.0, 0.5, -2.0, 1.5, 1.0)
    kw = dict(agg=agg, ratio=ratio, max_len=5)
    cispo = grpo_loss(logp, logp.detach(), ref, adv, mask, loss="cispo", **kw)[0]
    clip = grpo_loss(logp, logp.detach(), ref, adv, mask, **kw)[0]
    (g_cispo,), (g_clip,) = torch.autograd.grad(cispo, logp), torch.autograd.grad(clip, logp)
    assert torch.allclose(g_cispo, g_clip, atol=1e-15, rtol=0) and g_clip.abs().max() > 1e-3


def test_tis_weights_correct_for_the_sampler_and_are_the_identity_without_a_gap():
    """tis_weights: min(π_old/π_sampler, C) per token, a constant; with weight=..., grpo_loss multiplies each token's
    policy term by it (not the KL term). No gap: every weight 1, the same loss and gradient as without."""
    torch.manual_seed(0)
    mask = lengths_mask([3, 5, 1, 4], 5)  # (N, T)
    logp = (torch.randn(4, 5, dtype=F64) - 1).requires_grad_()
    old = logp.detach()  # μ = 1
    ref = logp.detach() + 0.2 * torch.randn(4, 5, dtype=F64)
    adv = t(1.0, -0.5, 2.0, -1.0)
    gap = t(0.0, 0.5, -0.3, 2.0, 0.1)  # log π_old - log π_sampler, by column: the sampler's numbers differ
    sampler = old - gap  # (N, T)
    w = tis_weights(old, sampler, 3.0)  # (N, T)
    assert torch.allclose(w, torch.exp(gap).clamp(max=3.0).expand(4, 5), atol=0, rtol=1e-15)
    assert w.max().item() == 3.0 and w.min().item() < 1  # exp(2) capped at 3; exp(-0.3) below 1
    loss, s = grpo_loss(logp, old, ref, adv, mask, weight=w)
    pg = -(w * adv[:, None] * torch.where(mask, torch.ones(4, 5, dtype=F64), 0.0)).sum(1) / mask.sum(1)  # ρ ≡ 1
    expect = pg.sum() / 4 + grpo_loss(logp, old, ref, adv, mask)[1]["kl_loss"]  # the KL term unweighted
    assert torch.allclose(loss.detach(), expect, atol=1e-14, rtol=0)
    assert abs(s["weight_mean"].item() - (w * mask).sum().item() / mask.sum().item()) < 1e-12
    # no gap: the identity
    same = tis_weights(old, old.clone(), 3.0)
    assert torch.equal(same, torch.ones(4, 5, dtype=F64))
    a, _ = grpo_loss(logp, old, ref, adv, mask, weight=same)
    b, _ = grpo_loss(logp, old, ref, adv, mask)
    (ga,), (gb,) = torch.autograd.grad(a, logp), torch.autograd.grad(b, logp)
    assert torch.equal(a, b) and torch.equal(ga, gb)


def test_completion_entropy_is_the_sampling_distributions_entropy_at_the_shift():
    """H_t = -Σ_v p_v log p_v of softmax(logits / τ) at the completion positions (the logits one column before each
    token, as completion_logprobs): uniform logits give log V; one certain token gives 0; no gradient."""
    torch.manual_seed(0)
    N, P, T, V = 3, 4, 5, 11
    logits = torch.randn(N, P + T, V, dtype=F64, requires_grad=True)  # (N, P+T, V) every column's
    for temp in (1.0, 0.7):
        H = completion_entropy(logits[:, scoring_columns(P)], temp)  # (N, T)
        p = torch.softmax(logits.detach()[:, P - 1 : -1] / temp, -1)  # (N, T, V)
        assert torch.allclose(H, -(p * p.log()).sum(-1), atol=1e-13, rtol=0) and not H.requires_grad
    flat = torch.zeros(1, T, V)
    assert torch.allclose(completion_entropy(flat), torch.full((1, T), math.log(V)))
    sure = torch.full((1, T, V), -1e4)
    sure[..., 3] = 1e4
    assert completion_entropy(sure).abs().max().item() == 0.0
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16))
    seq = torch.randint(0, 257, (2, P + T))  # (N, P+T)
    logp, H = score(model, seq, None, P, 0.7, with_entropy=True)  # what train.py logs: the same columns, τ
    assert torch.equal(H, completion_entropy(model(seq)[:, P - 1 : -1], 0.7)) and logp.requires_grad


def test_the_kl_stat_is_the_token_mean_of_the_estimate_on_a_known_batch():
    """stats["kl"] = Σ over every masked token of the step of k_t / num_tokens, whatever the aggregation: the k3
    values of answers of lengths 3 and 1, not the mean of per-answer means."""
    logp = t(-1.0, -2.0, -0.5, -1.0).view(2, 2)  # (N, T)
    logp = torch.cat([logp, t(-1.5, 0.0).view(2, 1)], 1)  # (N, T=3)
    ref = logp + t(0.5, -0.5, 1.0, 0.0, 0.0, 0.0).view(2, 3)
    mask = lengths_mask([3, 1], 3)  # (N, T)
    k3 = [math.exp(x) - x - 1 for x in (0.5, -0.5, 1.0, 0.0)]  # the four tokens' k3
    for agg in AGGS:
        _, s = grpo_loss(logp, logp, ref, t(1.0, -1.0), mask, agg=agg, max_len=3)
        assert abs(s["kl"].item() - sum(k3) / 4) < 1e-15
    assert abs(sum(k3) / 4 - (sum(k3[:3]) / 3 + k3[3]) / 2) > 0.05  # a per-answer mean would differ


def test_where_nanogrpo_differs_from_its_peers_no_dual_clip_cispos_cap_and_tis_under_the_sequence_ratio():
    """Three differences grpo.py states. No dual clip: with A < 0 a ratio of 10 keeps its whole ρ·A (verl's
    clip_ratio_c = 3 would bound the loss at 3·|A|). CISPO caps its weight at 1 + clip_eps_high (TRL at its
    epsilon_high itself). Under ratio="seq" each token's TIS weight acts as its answer's mean weight, under every
    aggregation: the loss and the gradient equal those of the mean weight on every token of the answer."""
    logp = torch.tensor([[0.0]], dtype=F64, requires_grad=True)
    old = torch.tensor([[-math.log(10.0)]], dtype=F64)  # ρ = 10
    mask = torch.ones(1, 1, dtype=torch.bool)
    loss, s = grpo_loss(logp, old, None, t(-1.0), mask, beta=0.0)
    assert abs(loss.item() - 10.0) < 1e-12 and s["clip_frac_low"] == 0  # -ρ·A = 10, not 3
    (grad,) = torch.autograd.grad(loss, logp)
    assert abs(grad.item() - 10.0) < 1e-12  # ∇(-ρA) = -A·ρ: the gradient is kept too
    loss, _ = grpo_loss(logp, old, None, t(1.0), mask, beta=0.0, loss="cispo", clip_eps_high=0.28)
    (grad,) = torch.autograd.grad(loss, logp)
    assert abs(grad.item() + 1.28) < 1e-12  # -sg(min(ρ, 1 + 0.28))·A·∇log π
    torch.manual_seed(0)
    mask = lengths_mask([3, 1, 4, 2], 4)  # (N, T)
    logp = (torch.randn(4, 4, dtype=F64) - 1).requires_grad_()
    old = logp.detach() + 0.1 * torch.randn(4, 4, dtype=F64)
    ref = logp.detach() + 0.3 * torch.randn(4, 4, dtype=F64)
    adv = t(0.7, -0.2, -0.9, 0.4)
    w = tis_weights(old, old + 0.2 * torch.randn(4, 4, dtype=F64), 2.0)  # (N, T)
    mean_w = ((w * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)).expand(4, 4)  # (N, T)
    for agg in AGGS:
        kw = dict(ratio="seq", agg=agg, max_len=4, clip_eps=0.02)
        per_token, _ = grpo_loss(logp, old, ref, adv, mask, weight=w, **kw)
        mean, _ = grpo_loss(logp, old, ref, adv, mask, weight=mean_w, **kw)
        assert abs(per_token.item() - mean.item()) < 1e-14
        g_tok, g_mean = (torch.autograd.grad(x, logp)[0] for x in (per_token, mean))
        assert torch.allclose(g_tok, g_mean, atol=1e-14, rtol=0), agg
        token = {**kw, "ratio": "token"}  # there the weights do not act as their mean: the test can fail
        token_level = grpo_loss(logp, old, ref, adv, mask, weight=w, **token)[0]
        assert abs(token_level - grpo_loss(logp, old, ref, adv, mask, weight=mean_w, **token)[0]) > 1e-6
