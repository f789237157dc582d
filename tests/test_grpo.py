"""grpo.py: log-probs and the shift, the KL estimators (the worked numbers, by exact enumeration and
autograd through grpo_loss), ratio and clip, masking, and gradient accumulation."""
import pytest
import torch

from grpo import completion_logprobs, grpo_loss, kl_penalty, token_logprobs
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
    tokens = torch.randint(0, 11, (3, 4))      # (N, T)
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
        logp = completion_logprobs(model(seq), seq, P, temperature=0.8)  # (N, T)
        for j in range(T):  # token P+j is scored by the last logits of the prefix seq[:, :P+j]
            last = model(seq[:, :P + j])[:, -1] / 0.8                      # (N, V)
            expect = torch.log_softmax(last, -1).gather(-1, seq[:, P + j, None])[:, 0]
            assert torch.allclose(logp[:, j], expect, atol=1e-5)


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
    """Expected gradient of the KL part of grpo_loss (A=0, beta=1) by exact enumeration.

    Each answer y is one sequence; its loss is weighted by its (detached) probability under the
    sampler (default: π itself), times π(y)/sampler(y) (detached) when importance=True.
    """
    theta = torch.tensor(theta0, dtype=F64, requires_grad=True)  # (V,)
    logp = answers(theta)                                         # (3, 1)
    pi = logp.detach().exp()[:, 0]                                # (3,)
    q = pi if sampler is None else torch.softmax(t(*sampler), 0)  # (3,) sampling distribution
    old_logp, ref_logp = q.log()[:, None], ref.log()[:, None]     # (3, 1)
    total = 0.0
    for y in range(3):
        loss, _ = grpo_loss(logp[y:y + 1], old_logp[y:y + 1], ref_logp[y:y + 1], torch.zeros(1),
                            torch.ones(1, 1), beta=1.0, kl=kind)
        weight = q[y] * (pi[y] / q[y] if importance else 1.0)
        total = total + weight * loss
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
    assert torch.allclose(g, grad_rev, atol=1e-12)             # ∇KL(π_ref‖π) ...
    assert not torch.allclose(g, grad_fwd, atol=1e-3)          # ... not ∇KL(π‖π_ref)
    assert r4(grad_fwd) == [0.4465, -0.2788, -0.1676]


def test_k2_gradient_is_kl_forward_problem_9():
    theta, ref = (0.0, 1.0, 0.5), t(0.5, 0.3, 0.2)
    kl, grad_fwd, grad_rev = exact_kls(theta, ref)
    assert round(kl, 4) == 0.2132 and round(expected_value(theta, ref, "k3"), 4) == 0.2132
    assert round(expected_value(theta, ref, "k2"), 4) == 0.1885  # biased value ...
    g2 = expected_kl_grad(theta, ref, "k2")
    assert r4(g2) == [-0.2236, 0.1573, 0.0664]
    assert torch.allclose(g2, grad_fwd, atol=1e-12)            # ... but the right gradient
    g3 = expected_kl_grad(theta, ref, "k3")
    assert r4(g3) == [-0.3137, 0.2065, 0.1072]
    assert torch.allclose(g3, grad_rev, atol=1e-12)
    # k1: unbiased value, but on-policy its expected gradient is E_π[∇log π] = 0
    assert torch.allclose(expected_kl_grad(theta, ref, "k1"), torch.zeros(3, dtype=F64), atol=1e-12)


def test_k3_sampled_from_pi_old_and_importance_weights():
    theta, ref, old = (0.0, 1.0, 0.5), t(0.5, 0.3, 0.2), (0.5, 0.5, 0.0)
    assert r4(expected_kl_grad(theta, ref, "k3", sampler=old)) == [-0.5698, 0.3632, 0.2066]
    g = expected_kl_grad(theta, ref, "k3", sampler=old, importance=True)
    assert r4(g) == [-0.3137, 0.2065, 0.1072]
    assert torch.allclose(g, expected_kl_grad(theta, ref, "k3"), atol=1e-12)


# ----------------------------------------------------------------------------- ratio and clip

def lengths_mask(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (N, T) bool


def test_mu_1_ratio_is_one_and_the_clip_does_nothing():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, 7, dtype=F64, requires_grad=True)  # (N, T, V)
    logp = token_logprobs(logits, torch.randint(0, 7, (4, 5)))     # (N, T)
    mask = lengths_mask([5, 2, 3, 1], 5)                           # (N, T)
    adv = t(1.0, -2.0, 0.5, -0.1)                                  # (N,)
    logp.retain_grad()
    loss, s = grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0)
    loss.backward()
    assert s["ratio_min"].item() == s["ratio_max"].item() == s["ratio_mean"].item() == 1.0
    assert s["clip_frac_low"].item() == s["clip_frac_high"].item() == 0.0
    # the plain policy gradient: d loss / d logp_it = -A_i / (N·|o_i|) on the completion
    expect = -adv[:, None] / (4 * mask.sum(1, keepdim=True)) * mask  # (N, T)
    assert torch.allclose(logp.grad, expect, atol=1e-15)
    # old_logp, ref_logp and advantages are constants even if the caller forgot to detach them
    adv_g = adv + (logp.sum(1) - logp.sum(1).detach())  # value adv, but a path to θ
    loss, _ = grpo_loss(logp, logp, logp - 0.3, adv_g, mask)
    loss_c, _ = grpo_loss(logp, logp.detach(), (logp - 0.3).detach(), adv, mask)
    grad, grad_c = (torch.autograd.grad(x, logp, retain_graph=True)[0] for x in (loss, loss_c))
    assert torch.equal(grad, grad_c) and not torch.allclose(grad, expect)  # the KL term pulls too


def test_clip_engages_exactly_where_the_formula_says():
    rho = t(0.5, 0.9, 1.1, 1.25, 1.5)                 # (T,) ratios, the same on every row
    adv = t(1.0, -1.0, 2.0, -0.5)                     # (N,)
    old = torch.randn(4, 5, dtype=F64)                # (N, T)
    logp = (old + rho.log()).requires_grad_()         # (N, T) so that π/π_old = rho
    mask = torch.ones(4, 5, dtype=torch.bool)
    for eps_high, high_edge in ((None, 1.2), (0.28, 1.28)):  # DAPO clip-higher moves the upper edge
        loss, s = grpo_loss(logp, old, None, adv, mask, clip_eps=0.2, clip_eps_high=eps_high, beta=0.0)
        (grad,) = torch.autograd.grad(loss, logp)
        A = adv[:, None]                                        # (N, 1)
        low = (rho < 0.8) & (A < 0)                             # (N, T)
        high = (rho > high_edge) & (A > 0)                      # (N, T)
        clipped = low | high
        assert clipped.any() and (~clipped).any()
        assert torch.equal(grad[clipped], torch.zeros(int(clipped.sum()), dtype=F64))
        unclipped = (-A * rho / 20).expand(4, 5)                # d(-ρA/(N·T))/d logp = -ρA/(N·T)
        assert torch.allclose(grad[~clipped], unclipped[~clipped], atol=1e-15)
        assert abs(s["clip_frac_low"].item() - low.sum().item() / 20) < 1e-12
        assert abs(s["clip_frac_high"].item() - high.sum().item() / 20) < 1e-12
        assert abs(s["ratio_max"].item() - 1.5) < 1e-12 and abs(s["ratio_min"].item() - 0.5) < 1e-12


def test_the_three_aggregations_on_a_known_batch():
    """μ = 1, beta = 0, so each token's objective is A_i: the three normalisers side by side."""
    mask = lengths_mask([4, 1, 2], 4)               # (N, T) |o| = 4, 1, 2
    adv = t(1.0, -2.0, 3.0)                          # (N,)
    logp = torch.zeros(3, 4, dtype=F64)
    def loss(agg, **kw):
        return grpo_loss(logp, logp, None, adv, mask, beta=0.0, agg=agg, **kw)[0].item()
    assert abs(loss("grpo") - -(1 - 2 + 3) / 3) < 1e-12                   # 1/N Σ_i 1/|o_i| Σ_t A_i
    assert abs(loss("dapo") - -(4 - 2 + 6) / 7) < 1e-12                   # Σ_i Σ_t A_i / Σ|o_i|
    assert abs(loss("dr_grpo") - -(4 - 2 + 6) / (3 * 4)) < 1e-12          # Σ_i Σ_t A_i / (N·T)
    assert abs(loss("dr_grpo", max_len=16) - -(4 - 2 + 6) / (3 * 16)) < 1e-12
    assert abs(loss("grpo", num_seqs=6) - -(1 - 2 + 3) / 6) < 1e-12
    assert abs(loss("dapo", num_tokens=14) - -(4 - 2 + 6) / 14) < 1e-12


# ----------------------------------------------------------------------------- masking

def test_masked_tokens_get_no_gradient_and_their_values_do_not_matter():
    torch.manual_seed(0)
    mask = lengths_mask([4, 1, 0, 6], 6)              # (N, T); row 2 has no token at all
    logp = torch.randn(4, 6, dtype=F64) - 1           # (N, T)
    old, ref = logp + 0.1 * torch.randn_like(logp), logp + 0.3 * torch.randn_like(logp)
    adv = t(1.0, -1.0, 0.5, 2.0)
    results = []
    for garbage in (0.0, float("nan"), float("inf"), -1e4):
        x = [v.masked_fill(~mask, garbage) for v in (logp, old, ref)]
        x[0].requires_grad_()
        for agg in ("grpo", "dapo", "dr_grpo"):
            loss, s = grpo_loss(x[0], x[1], x[2], adv, mask, agg=agg)
            (grad,) = torch.autograd.grad(loss, x[0])
            assert torch.isfinite(loss) and torch.isfinite(grad).all()
            assert all(torch.isfinite(v) for v in s.values())
            assert torch.equal(grad[~mask], torch.zeros(int((~mask).sum()), dtype=F64))
            results.append((loss, grad))
    for k in range(3, len(results)):  # the same aggregation with garbage vs 0 after the EOS
        assert torch.equal(results[k][0], results[k % 3][0]) and torch.equal(results[k][1], results[k % 3][1])


def completion_mask(completion):
    """(N, T) bool: True up to and including the first EOS."""
    is_eos = (completion == EOS).long()                    # (N, T)
    return (is_eos.cumsum(1) - is_eos) == 0                # no EOS strictly before


def test_tokens_after_the_first_eos_change_nothing_end_to_end():
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16)
    policy, ref_model = GPT(cfg), GPT(cfg)
    P, T = 3, 6
    seq = torch.randint(0, 256, (2, P + T))               # (N, P+T)
    seq[0, P + 2] = EOS                                   # row 0 ends at its third token
    seq[1, P + 4] = EOS
    def run(seq):
        policy.zero_grad()
        mask = completion_mask(seq[:, P:])                # (N, T)
        logp = completion_logprobs(policy(seq), seq, P)   # (N, T)
        with torch.no_grad():
            ref = completion_logprobs(ref_model(seq), seq, P)
        loss, _ = grpo_loss(logp, logp.detach() + 0.05, ref, t(1.0, -1.0).float(), mask)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in policy.parameters()]
    loss_a, grads_a = run(seq)
    changed = seq.clone()
    changed[0, P + 3:] = torch.randint(0, 257, (T - 3,))  # anything after the first EOS, EOS too
    changed[1, P + 5:] = 7
    loss_b, grads_b = run(changed)
    assert torch.allclose(loss_a, loss_b, atol=1e-6, rtol=0)
    assert all(torch.allclose(a, b, atol=1e-6, rtol=0) for a, b in zip(grads_a, grads_b))


# ----------------------------------------------------------------------------- accumulation

@pytest.mark.parametrize("agg", ["grpo", "dapo", "dr_grpo"])
def test_gradient_accumulation_equals_one_big_batch(agg):
    torch.manual_seed(0)
    N, T, max_len = 6, 5, 8
    mask = lengths_mask([5, 1, 0, 3, 5, 2], T)         # (N, T)
    logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)  # moved policy: the clip engages
    ref = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)
    adv = torch.randn(N, dtype=F64)
    kw = dict(agg=agg, beta=0.04, max_len=max_len)
    full, s = grpo_loss(logp, old, ref, adv, mask, **kw)
    (g_full,) = torch.autograd.grad(full, logp)
    assert s["clip_frac_low"] + s["clip_frac_high"] > 0
    micro = [slice(0, 1), slice(1, 4), slice(4, 6)]    # 5, 4 and 7 tokens: unequal
    step = dict(num_seqs=N, num_tokens=int(mask.sum()), **kw)
    acc = sum(grpo_loss(logp[m], old[m], ref[m], adv[m], mask[m], **step)[0] for m in micro)
    (g_acc,) = torch.autograd.grad(acc, logp)
    assert torch.allclose(acc, full, atol=1e-6, rtol=0)
    assert torch.allclose(g_acc, g_full, atol=1e-6, rtol=0)
    # per-micro-batch denominators (the usual bug) give a different gradient: the test can fail
    naive = sum(grpo_loss(logp[m], old[m], ref[m], adv[m], mask[m], **kw)[0] for m in micro) / len(micro)
    (g_naive,) = torch.autograd.grad(naive, logp)
    assert not torch.allclose(g_naive, g_full, atol=1e-3)


def test_argument_errors_and_beta_zero_needs_no_reference():
    logp, mask, adv = torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2)
    loss, s = grpo_loss(logp, logp, None, adv, mask, beta=0.0)
    assert loss.item() == 0.0 and s["kl"].item() == 0.0
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, logp, None, adv, mask)
    with pytest.raises(ValueError, match="aggregation"):
        grpo_loss(logp, logp, logp, adv, mask, agg="sum")
    with pytest.raises(ValueError, match="KL estimator"):
        grpo_loss(logp, logp, logp, adv, mask, kl="k4")
    with pytest.raises(ValueError, match="advantages"):
        grpo_loss(logp, logp, logp, torch.zeros(2, 1), mask)
