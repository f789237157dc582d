"""advantage.py: each method's formula, the worked numbers (the [1,...,1,0.9] group under both σ conventions,
partial credit, the optimal baseline and the variances, the dead-group table), dead groups per prompt and for a
reward of several values, group_stats, what no baseline pushes, loo against mean under AdamW and SGD, and the
baseline claims for one-token answers by exact enumeration through grpo.py's loss and autograd (answers of
different lengths: test_theory.py)."""

import itertools

import pytest
import torch

from advantage import dead_groups, group_advantages, group_stats
from grpo import completion_logprobs, grpo_loss, scoring_columns, token_logprobs
from model import GPT, GPTConfig

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
    g = r.view(3, 4)  # (B, G)
    expect = (g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)  # (B, G)
    assert torch.allclose(group_advantages(r, 4), expect.reshape(-1))


def test_the_0_9_group_under_both_sigma_conventions():
    """[1,1,1,1,1,1,1,0.9]: +0.35 and -2.47 with the default (unbiased σ, eps=1e-4, also at eps=0); +0.38 and
    -2.65 with the population σ of the seed's problem 4 (eps ≈ 0; -2.64 at the default eps=1e-4)."""
    r = t(1, 1, 1, 1, 1, 1, 1, 0.9)
    for eps in (1e-4, 0.0):  # the default: unbiased σ
        assert [round(a, 2) for a in group_advantages(r, 8, eps=eps).tolist()] == [0.35] * 7 + [-2.47]
    adv = group_advantages(r, 8, "std", eps=1e-6, unbiased=False)  # the population σ
    assert [round(a, 2) for a in adv.tolist()] == [0.38] * 7 + [-2.65]
    # the default eps=1e-4 moves its last digit (σ = 0.0331 is not large next to 1e-4)
    assert round(group_advantages(r, 8, "std", unbiased=False)[-1].item(), 2) == -2.64


def test_std_advantages_are_affine_invariant():
    problem2 = t(0, 0, 0, 0, 0, 0, 0, 1)  # one correct answer in eight: +2.65 for it (population σ)
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


def test_sigma_erases_the_reward_scale_partial_credit():
    """Issue 15's case: 0.2 for an off-by-one answer gets the advantage of a fully right one."""
    right, partial = t(1, 0, 0, 0, 0, 0, 0, 0), t(0.2, 0, 0, 0, 0, 0, 0, 0)
    a_right, a_partial = group_advantages(right, 8)[0].item(), group_advantages(partial, 8)[0].item()
    assert round(a_right, 2) == round(a_partial, 2) == 2.47
    assert round(a_right, 4) == 2.4742 and round(a_partial, 4) == 2.4714  # eps=1e-4 moves the 3rd decimal
    assert group_advantages(partial, 8, eps=0)[0].item() == pytest.approx(group_advantages(right, 8, eps=0)[0].item())
    assert group_advantages(right, 8, "mean")[0].item() == 0.875
    # eps only matters where σ is as small as eps: σ = 5e-5 here, so eps = 1e-4 leaves a third
    tiny = t(0.5, 0.5, 0.5, 0.4999)
    ratio = group_advantages(tiny, 4) / group_advantages(tiny, 4, eps=0)
    assert torch.allclose(ratio, torch.full((4,), 1 / 3, dtype=F64), atol=1e-6)
    assert abs(group_advantages(partial, 8, "mean")[0].item() - 0.175) < 1e-12


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


def test_group_stats():
    r = t(1, 1, 0, 1, 0.5, 0.5)  # groups of 2: dead, alive, dead
    s = group_stats(r, 2)
    assert set(s) == {"dead_frac", "reward_mean", "reward_std", "group_std"}
    assert all(torch.is_tensor(v) and v.dim() == 0 for v in s.values())
    assert abs(s["dead_frac"].item() - 2 / 3) < 1e-12
    assert abs(s["reward_mean"].item() - 4 / 6) < 1e-12
    assert abs(s["reward_std"].item() - r.std(unbiased=False).item()) < 1e-12
    assert abs(s["group_std"].item() - 2**-0.5 / 3) < 1e-12  # unbiased σ of (0, 1) is 1/√2
    assert abs(group_stats(r, 2, unbiased=False)["group_std"].item() - 0.5 / 3) < 1e-12


@pytest.mark.parametrize("unbiased", [True, False])
def test_group_std_is_the_sigma_the_std_advantage_divides_by(unbiased):
    r = t(0.3, 1.0, 0.0, 0.0, 1.0, 1.0, 0.2, 0.9, 0.4)  # (B*G,) three groups of 3
    adv = group_advantages(r, 3, "std", eps=0, unbiased=unbiased).view(3, 3)  # (B, G)
    centred = r.view(3, 3) - r.view(3, 3).mean(1, keepdim=True)  # (B, G)
    sigma = centred[:, 0] / adv[:, 0]  # (B,) recovered σ per group
    assert abs(group_stats(r, 3, unbiased=unbiased)["group_std"].item() - sigma.mean().item()) < 1e-12


def test_no_baseline_pushes_nothing_down_when_rewards_are_not_negative():
    """method "none": A = r >= 0, so an answer with reward 0 (cut off, say) gets no gradient at all and every other
    answer is pushed up; it loses probability only as the others gain."""
    r = t(1.0, 0.0, 0.1, 0.0)  # (B*G,) right, cut off, well-formed wrong (format bonus), cut off
    adv = group_advantages(r, 4, "none")
    assert torch.equal(adv, r) and (adv >= 0).all()
    logp = torch.full((4, 3), -1.0, dtype=F64, requires_grad=True)  # (N, T)
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.bool)  # (N, T)
    (grad,) = torch.autograd.grad(grpo_loss(logp, logp.detach(), None, adv, mask, beta=0.0)[0], logp)
    assert (grad[1] == 0).all() and (grad[3] == 0).all()  # reward 0: not pushed down
    assert (grad[0][mask[0]] < 0).all() and (grad[2][mask[2]] < 0).all()  # loss falls as their log-probs rise
    centred = group_advantages(r, 4, "mean")  # a baseline pushes the cut-off answers down
    (grad,) = torch.autograd.grad(grpo_loss(logp, logp.detach(), None, centred, mask, beta=0.0)[0], logp)
    assert (grad[1] > 0).all() and (grad[3][mask[3]] > 0).all()


@pytest.mark.parametrize("G", [4, 8])
def test_loo_is_a_larger_gradient_but_not_a_larger_adamw_step(G):
    """loo = G/(G-1)·mean answer by answer, so the gradient is G/(G-1) larger. One step of AdamW as train.py builds
    it (lr 1e-4, betas (0.9, 0.95), gradient norm clipped at 1) moves the weights by the same amount to about 1e-4
    relative (1.0001 at G = 4 and 8 here); plain SGD moves them G/(G-1) as far (1.14 at G = 8)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=16))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    P, T, N = 3, 6, 2 * G
    seq = torch.randint(0, 256, (N, P + T))  # (N, P+T) two groups
    mask = torch.arange(T)[None, :] < torch.randint(1, T + 1, (N,))[:, None]  # (N, T)
    rewards = torch.rand(N).round()  # (N,) 0/1

    def update(method, optimizer):
        model.load_state_dict(start)
        model.zero_grad(set_to_none=True)
        params = list(model.parameters())
        if optimizer == "adamw":
            opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0)
        else:
            opt = torch.optim.SGD(params, lr=1e-2)
        logp = completion_logprobs(model(seq, logits_at=scoring_columns(P)), seq, P)  # (N, T)
        loss, _ = grpo_loss(logp, logp.detach(), None, group_advantages(rewards, G, method), mask, beta=0.0)
        loss.backward()
        if optimizer == "adamw":
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return torch.cat([(p.detach() - start[name]).flatten() for name, p in model.named_parameters()])

    adamw = (update("loo", "adamw").norm() / update("mean", "adamw").norm()).item()
    sgd = (update("loo", "sgd").norm() / update("mean", "sgd").norm()).item()
    assert abs(adamw - 1) < 1e-3 and round(adamw, 4) == 1.0001
    assert abs(sgd - G / (G - 1)) < 1e-5 * G / (G - 1)


# ----------------------------------------------------------------------------- dead groups per prompt

SEED_TABLE = {  # success rate q: % of dead groups at G = 4, 8, 16 (the seed's table)
    0.5: (12.5, 0.8, 0.0),
    0.7: (24.8, 5.8, 0.3),
    0.9: (65.6, 43.1, 18.5),
    0.95: (81.5, 66.3, 44.0),
}


def p_dead(q, G):
    """Exact P(dead group) for one prompt of success rate q, by enumerating every 0/1 group through dead_groups."""
    tuples = ((torch.arange(2**G)[:, None] >> torch.arange(G)) & 1).to(F64)  # (2^G, G) every 0/1 group
    k = tuples.sum(1)  # (2^G,)
    prob = q**k * (1 - q) ** (G - k)  # (2^G,)
    return (prob * dead_groups(tuples.reshape(-1), G)).sum().item()


def test_the_seed_dead_group_table():
    for q, row in SEED_TABLE.items():
        for G, percent in zip((4, 8, 16), row):
            exact = p_dead(q, G)
            assert abs(exact - (q**G + (1 - q) ** G)) < 1e-12
            if (q, G) == (0.9, 8):  # 43.05%: the seed rounded it twice (to 43.05, then 43.1)
                assert round(100 * exact, 2) == 43.05 and round(100 * exact, 1) == 43.0
            else:
                assert round(100 * exact, 1) == percent, (q, G)
    assert abs(p_dead(0.05, 8) - p_dead(0.95, 8)) < 1e-12  # a hard prompt wastes as much as an easy one


def test_the_dead_fraction_of_a_step_is_the_mean_over_prompts_not_the_formula_at_the_mean_reward():
    """Two prompts with success rates 1.0 and 0.84 (mean 0.92), G = 4: every joint outcome, through group_stats."""
    G, qs = 4, (1.0, 0.84)
    outcomes = torch.tensor(list(itertools.product([0.0, 1.0], repeat=2 * G)), dtype=F64)  # (2^(2G), B*G)
    q = torch.tensor(qs, dtype=F64).repeat_interleave(G)  # (B*G,)
    prob = (q**outcomes * (1 - q) ** (1 - outcomes)).prod(1)  # (2^(2G),)
    expected = sum(p * group_stats(r, G)["dead_frac"] for p, r in zip(prob, outcomes)).item()
    assert abs(expected - sum(qb**G + (1 - qb) ** G for qb in qs) / 2) < 1e-12
    assert round(expected, 4) == 0.7493 and round(0.92**G + 0.08**G, 4) == 0.7164  # above the formula
    # a late step's mean reward, 0.92 at G = 8: the formula gives 0.51, but a step of prompts that
    # are always solved or always failed has the same mean reward and every group dead
    assert round(p_dead(0.92, 8), 2) == 0.51
    always = torch.cat([torch.ones(23 * 8, dtype=F64), torch.zeros(2 * 8, dtype=F64)])  # 25 prompts
    s = group_stats(always, 8)
    assert s["reward_mean"].item() == 0.92 and s["dead_frac"].item() == 1.0


def test_the_dead_chance_for_a_reward_of_several_values():
    """With the format bonus a reward takes four values (0, 0.1, 1, 1.1): a group is dead with chance Σ_v P(v)^G,
    below the 0/1 formula at the same success rate. P = (0.05, 0.15, 0.1, 0.7), G = 8: 0.0576, where
    q^G + (1-q)^G at q = P(r >= 1) = 0.8 gives 0.1678. Every one of the 4^8 groups, through dead_groups."""
    values, P, G = t(0.0, 0.1, 1.0, 1.1), t(0.05, 0.15, 0.1, 0.7), 8
    groups = torch.cartesian_prod(*[torch.arange(4)] * G)  # (4^G, G) every group, as indices into values
    chance = (P[groups].prod(1) * dead_groups(values[groups].reshape(-1), G)).sum().item()
    assert abs(chance - (P**G).sum().item()) < 1e-12 and round(chance, 4) == 0.0576
    q = P[2:].sum().item()
    assert round(q**G + (1 - q) ** G, 4) == 0.1678
    assert abs(p_dead(q, G) - (q**G + (1 - q) ** G)) < 1e-12  # the formula is right for 0/1 rewards


# ----------------------------------------------------------------------------- baselines

THETA = (0.3, 0.1, -0.2)  # the theory's toy policy: softmax over three one-token answers
R = t(6.0, 5.0, 4.0)  # their rewards
GRAD_J = (0.3454, -0.0548, -0.2907)


def one_token_logprobs(theta):
    """(3, 1) log π of the three one-token answers, through token_logprobs."""
    return token_logprobs(theta.expand(3, 1, 3), torch.arange(3)[:, None])  # (N=3, T=1)


def expected_policy_gradient(method, G):
    """E over every G-tuple of answers of the gradient of the GRPO objective (beta=0, μ=1).

    Each tuple is one group; its loss comes from grpo_loss with old_logp the no-grad copy of the same
    forward and is weighted by the tuple's (detached) probability. No Monte Carlo: 3^G exact terms.
    """
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)  # (V,) V = 3
    logp = one_token_logprobs(theta)  # (3, 1)
    total = 0.0
    for ys in itertools.product(range(3), repeat=G):
        y = torch.tensor(ys)  # (G,)
        adv = group_advantages(R[y], G, method)  # (G,)
        loss, _ = grpo_loss(logp[y], logp[y].detach(), None, adv, torch.ones(G, 1), beta=0.0)
        total = total + logp[y].detach().sum().exp() * loss  # P(tuple) = Π π(y_i)
    (grad,) = torch.autograd.grad(total, theta)
    return -grad  # the loss is the negative objective


def true_gradient():
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)
    (grad,) = torch.autograd.grad(one_token_logprobs(theta)[:, 0].exp() @ R, theta)  # ∇J, J = E_π[r]
    return grad


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


def test_the_optimal_baseline_and_the_variances_of_the_seed():
    """One answer per step, advantage r - b: the gradient's total variance as a function of b.

    Each answer's gradient (r_y - b)·∇log π(y) comes from grpo_loss and autograd; the variance is
    Σ_y π(y)‖g_y‖² - ‖Σ_y π(y) g_y‖² over the three answers.
    """
    theta = torch.tensor(THETA, dtype=F64, requires_grad=True)
    logp = one_token_logprobs(theta)  # (3, 1)
    p = logp.detach().exp()[:, 0]  # (3,)

    def gradients(adv):  # (3, V) -∇loss of each answer alone
        return torch.stack(
            [
                -torch.autograd.grad(
                    grpo_loss(
                        logp[y : y + 1], logp[y : y + 1].detach(), None, adv[y : y + 1], torch.ones(1, 1), beta=0.0
                    )[0],
                    theta,
                    retain_graph=True,
                )[0]
                for y in range(3)
            ]
        )

    def variance(b):
        g = gradients(R - b)  # (3, V)
        return ((p[:, None] * g**2).sum() - ((p[:, None] * g).sum(0) ** 2).sum()).item()

    score_sq = (gradients(torch.ones(3, dtype=F64)) ** 2).sum(1)  # (3,) ‖∇log π(y)‖²
    assert [round(v, 4) for v in score_sq.tolist()] == [0.5219, 0.6714, 0.8463]
    assert round((p @ score_sq).item(), 4) == 0.6535  # the Fisher information's trace
    b_star = ((p * R * score_sq).sum() / (p * score_sq).sum()).item()
    mean_r = (p @ R).item()
    assert round(b_star, 4) == 5.0054 and round(mean_r, 4) == 5.1622
    table = {0: 16.5922, 2: 6.1225, 4: 0.8806, 5: 0.2200, 6: 0.8665, 8: 6.0802, 10: 16.5218}
    assert {b: round(variance(b), 4) for b in table} == table
    assert round(variance(b_star), 4) == 0.2200 and round(variance(mean_r), 4) == 0.2361
    assert variance(b_star) < variance(mean_r) < variance(5.5)  # b* is the minimum
