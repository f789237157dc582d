"""advantage.py: each method's formula, the worked numbers (baselines, the [1,...,1,0.9] group), dead groups,
and the baseline claims checked by exact enumeration through grpo.py's loss and autograd."""
import itertools

import pytest
import torch

from advantage import dead_groups, group_advantages, group_stats
from grpo import grpo_loss, token_logprobs

F64 = torch.float64
CENTRED = ("mean", "std", "loo", "dr_grpo")


def t(*xs):
    return torch.tensor(xs, dtype=F64)


def test_each_method_on_two_groups():
    r = t(1, 2, 3, 4, 0, 2)  # (B*G,) two groups of G=3: mean 2 and 2, unbiased σ 1 and 2
    assert torch.equal(group_advantages(r, 3, "mean"), t(-1, 0, 1, 2, -2, 0))
    assert torch.equal(group_advantages(r, 3, "dr_grpo"), t(-1, 0, 1, 2, -2, 0))
    assert torch.allclose(group_advantages(r, 3, "std", eps=0), t(-1, 0, 1, 1, -1, 0))
    assert torch.allclose(group_advantages(r, 3, "std", eps=0.5), t(-1 / 1.5, 0, 1 / 1.5, 2 / 2.5, -2 / 2.5, 0))
    pop = (2 / 3) ** 0.5  # population σ of (1, 2, 3)
    assert torch.allclose(group_advantages(r, 3, "std", eps=0, unbiased=False)[:3], t(-1, 0, 1) / pop)
    # leave-one-out: r_i - mean of the other two, e.g. 1 - (2+3)/2 = -1.5, and = G/(G-1)·(r - μ)
    assert torch.allclose(group_advantages(r, 3, "loo"), t(-1.5, 0, 1.5, 3, -3, 0))
    assert torch.equal(group_advantages(r, 3, "none"), r)


def test_default_sigma_is_unbiased_like_torch_std():
    r = torch.randn(12, dtype=F64)  # (B*G,)
    g = r.view(3, 4)                # (B, G)
    expect = (g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)  # (B, G)
    assert torch.allclose(group_advantages(r, 4), expect.reshape(-1))


def test_seed_problem_4_population_sigma():
    r = t(1, 1, 1, 1, 1, 1, 1, 0.9)
    adv = group_advantages(r, 8, "std", eps=1e-6, unbiased=False)
    assert [round(a, 2) for a in adv.tolist()] == [0.38] * 7 + [-2.65]
    # the default eps=1e-4 moves the last digit (σ = 0.0331 is not large next to 1e-4) ...
    assert round(group_advantages(r, 8, "std", unbiased=False)[-1].item(), 2) == -2.64
    # ... and the unbiased σ (the default) gives smaller numbers
    adv_unbiased = group_advantages(r, 8, "std", eps=0)
    assert round(adv_unbiased[0].item(), 2) == 0.35 and round(adv_unbiased[-1].item(), 2) == -2.47


def test_std_advantages_are_affine_invariant():
    problem2 = t(0, 0, 0, 0, 0, 0, 0, 1)  # one correct answer in eight: +2.65 for it
    problem4 = 0.9 + 0.1 * (1 - problem2)  # [1,1,1,1,1,1,1,0.9]: the same group, rescaled
    a2 = group_advantages(problem2, 8, "std", eps=0, unbiased=False)
    a4 = group_advantages(problem4, 8, "std", eps=0, unbiased=False)
    assert round(a2[-1].item(), 2) == 2.65
    assert torch.allclose(a4, -a2)  # r -> b - 0.1·r flips the sign, nothing else
    r = torch.rand(16, dtype=F64)  # (B*G,)
    for unbiased in (True, False):
        a = group_advantages(r, 4, "std", eps=0, unbiased=unbiased)
        assert torch.allclose(group_advantages(37.0 * r - 5.0, 4, "std", eps=0, unbiased=unbiased), a)
    # mean-centring alone is not scale invariant: that is the point of Dr. GRPO
    assert torch.allclose(group_advantages(10 * r, 4, "mean"), 10 * group_advantages(r, 4, "mean"))


@pytest.mark.parametrize("method", CENTRED)
@pytest.mark.parametrize("eps", [1e-4, 0.0])
def test_dead_groups_get_exactly_zero(method, eps):
    r = t(0.1, 0.1, 0.1, 1, 0, 1, 0.7, 0.7, 0.7)  # groups of 3: dead, alive, dead
    naive = r.view(3, 3) - r.view(3, 3).mean(1, keepdim=True)  # (B, G)
    assert naive[0].abs().max() > 0  # floating point: 0.1 - mean(0.1, 0.1, 0.1) != 0
    adv = group_advantages(r, 3, method, eps=eps)
    assert torch.isfinite(adv).all()
    assert torch.equal(adv[:3], torch.zeros(3, dtype=F64)) and torch.equal(adv[6:], torch.zeros(3, dtype=F64))
    assert adv[3:6].abs().min() > 0


def test_rewards_are_not_modified_and_ints_work():
    r = t(3, 1, 2, 2)
    keep = r.clone()
    for method in CENTRED + ("none",):
        adv = group_advantages(r, 2, method)
        adv.add_(1.0)  # the result is a new tensor: writing to it leaves rewards alone
    assert torch.equal(r, keep)
    adv = group_advantages(torch.tensor([1, 0, 1, 1]), 2, "std")
    assert adv.dtype == torch.float32 and adv[2:].abs().max() == 0


def test_bad_groups_raise_clear_errors():
    r = torch.ones(6)
    for method in CENTRED:
        with pytest.raises(ValueError, match="at least 2"):
            group_advantages(r, 1, method)
        with pytest.raises(ValueError, match="do not split"):
            group_advantages(r, 4, method)
    with pytest.raises(ValueError, match="unknown advantage method"):
        group_advantages(r, 2, "ppo")
    with pytest.raises(ValueError, match="shape"):
        group_advantages(r.view(3, 2), 2)
    with pytest.raises(ValueError, match="at least 2"):
        group_stats(r, 1)
    assert torch.equal(group_advantages(r, 1, "none"), r)  # no group needed


def test_dead_group_probability_by_exact_enumeration():
    """Binary rewards, success rate q: P(group dead) = q^G + (1-q)^G; G=8, q=0.9 -> 0.4305."""
    G, q = 8, 0.9
    tuples = torch.tensor(list(itertools.product([0.0, 1.0], repeat=G)), dtype=F64)  # (2^G, G)
    k = tuples.sum(1)                                                              # (2^G,)
    prob = q ** k * (1 - q) ** (G - k)                                             # (2^G,)
    dead = dead_groups(tuples.reshape(-1), G)                                      # (2^G,)
    p_dead = (prob * dead).sum().item()
    assert abs(prob.sum().item() - 1) < 1e-12
    assert round(p_dead, 4) == 0.4305 and abs(p_dead - (q ** G + (1 - q) ** G)) < 1e-12
    stats = group_stats(tuples.reshape(-1), G)
    assert stats["dead_frac"].item() == 2 / 2 ** G  # unweighted: only all-0 and all-1


def test_group_stats():
    r = t(1, 1, 0, 1, 0.5, 0.5)  # groups of 2: dead, alive, dead
    s = group_stats(r, 2)
    assert all(torch.is_tensor(v) and v.dim() == 0 for v in s.values())
    assert abs(s["dead_frac"].item() - 2 / 3) < 1e-12
    assert abs(s["reward_mean"].item() - 4 / 6) < 1e-12
    assert abs(s["reward_std"].item() - r.std(unbiased=False).item()) < 1e-12
    assert abs(s["group_std"].item() - 0.5 / 3) < 1e-12


# ----------------------------------------------------------------------------- baselines

THETA = (0.3, 0.1, -0.2)   # the theory's toy policy: softmax over three one-token answers
R = t(6.0, 5.0, 4.0)       # their rewards
GRAD_J = (0.3454, -0.0548, -0.2907)


def expected_policy_gradient(method, G):
    """E over every G-tuple of answers of the gradient of the GRPO objective (beta=0, μ=1).

    Each tuple is one group; its loss comes from grpo_loss with old_logp = logp.detach() and is
    weighted by the tuple's (detached) probability. No Monte Carlo: 3^G exact terms.
    """
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)  # (V,) V = 3
    total = 0.0
    for ys in itertools.product(range(3), repeat=G):
        y = torch.tensor(ys)                                       # (G,)
        logp = token_logprobs(theta.expand(G, 1, 3), y[:, None])    # (G, 1) one-token answers
        adv = group_advantages(R[y], G, method)                     # (G,)
        loss, _ = grpo_loss(logp, logp.detach(), None, adv, torch.ones(G, 1), beta=0.0)
        total = total + logp.detach().sum().exp() * loss            # P(tuple) = Π π(y_i)
    (grad,) = torch.autograd.grad(total, theta)
    return -grad  # the loss is the negative objective


def true_gradient():
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)
    (grad,) = torch.autograd.grad(torch.softmax(theta, 0) @ R, theta)  # ∇J, J = E_π[r]
    return grad


def test_true_gradient_is_the_seed_number():
    assert [round(g, 4) for g in true_gradient().tolist()] == list(GRAD_J)


@pytest.mark.parametrize("G", [2, 3])
def test_mean_baseline_shrinks_the_gradient_by_1_minus_1_over_G(G):
    for method in ("mean", "dr_grpo"):
        assert torch.allclose(expected_policy_gradient(method, G), (1 - 1 / G) * true_gradient(), atol=1e-12)


@pytest.mark.parametrize("G", [2, 3])
def test_leave_one_out_gives_exactly_the_true_gradient(G):
    g = expected_policy_gradient("loo", G)
    assert torch.allclose(g, true_gradient(), atol=1e-12)
    assert [round(x, 4) for x in g.tolist()] == list(GRAD_J)
    # no baseline is unbiased too (just noisier); the σ division is outside the theorem
    assert torch.allclose(expected_policy_gradient("none", G), true_gradient(), atol=1e-12)
    assert not torch.allclose(expected_policy_gradient("std", G), true_gradient(), atol=1e-3)
