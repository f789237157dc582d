"""Exact enumeration beyond one-token answers, through the project's own functions (token_logprobs,
group_advantages, grpo_loss, kl_penalty) and autograd; masks come from lengths, never from token ids.

1. Answers of lengths 1, 2, 3: which (advantage, aggregation) pairs give ∇J or a constant multiple
   of it, and how far the others are (the numbers in grpo.py's docstring).
2. Answers of one length: every aggregation is a constant, and the baseline theorem holds again.
3. Two-token answers: the per-token KL estimators against the sequence-level KL gradients.
"""
import functools
import itertools

import pytest
import torch

from advantage import group_advantages
from grpo import AGGS, grpo_loss, kl_penalty, token_logprobs

F64 = torch.float64


def r4(x):
    return [round(v, 4) for v in x.tolist()]


def parallel(a, b, tol=1e-9):
    """True when a = c·b for one c (b has no zero component here)."""
    ratio = a / b
    return bool((ratio - ratio[0]).abs().max() < tol)


# ----------------------------------------------------------------------------- lengths 1, 2, 3

# Vocabulary {0: "a", 1: EOS}. At position t the policy says EOS with logit s_t (against 0 for "a"),
# so the answers are "⏎", "a⏎", "aa⏎" and "aaa" (truncated at T = 3: no EOS, all 3 tokens trained).
TOKENS = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]])  # (4, T) the padding after EOS is "a"
LENGTHS = torch.tensor([1, 2, 3, 3])                                # (4,)
MASK = torch.arange(3)[None, :] < LENGTHS[:, None]                  # (4, T) from the lengths
REWARDS = (0.0, 1.0, 0.2, 0.0)  # empty: wrong; "a⏎": right; "aa⏎": off by one, partial credit; "aaa": no answer
MAX_LEN = 3
S0 = (0.0, 0.0, 0.0)            # π = (1/2, 1/4, 1/8, 1/8)


def answer_logprobs(s):
    """(4, T) token log-probs of the four answers under stop logits s (T,), through token_logprobs."""
    logits = torch.stack([torch.zeros_like(s), s], dim=-1)        # (T, V) "a" at 0, EOS at s_t
    return token_logprobs(logits.expand(4, 3, 2), TOKENS)         # (4, T)


def answer_probs(s):
    """(4,) π(o) = exp Σ_t over the masked tokens."""
    return torch.where(MASK, answer_logprobs(s), 0.0).sum(1).exp()  # (4,)


def gradient_of_expectation(f, s0=S0):
    """∇_s Σ_o π(o)·f(o) for a fixed per-answer value f (4,): the exact gradient of E[f]."""
    s = torch.tensor(s0, dtype=F64, requires_grad=True)
    return torch.autograd.grad(answer_probs(s) @ f, s)[0]


@functools.lru_cache(maxsize=None)
def expected_gradient(method, agg, G, s0=S0, rewards=REWARDS, num_tokens=None):
    """E over all 4^G groups of the objective's gradient (-∇ grpo_loss; μ = 1, beta = 0, one group).

    old_logp is the no-grad copy of the same forward (ρ ≡ 1); each group's loss is weighted by its
    detached probability Π π(o_i). No Monte Carlo: 4^G exact terms. Read-only (cached).
    """
    s = torch.tensor(s0, dtype=F64, requires_grad=True)
    logp = answer_logprobs(s)                                      # (4, T)
    prob = answer_probs(s).detach()                                # (4,)
    R = torch.tensor(rewards, dtype=F64)                           # (4,)
    total = 0.0
    for ys in itertools.product(range(4), repeat=G):
        y = torch.tensor(ys)                                       # (G,) one group of answers
        adv = group_advantages(R[y], G, method)                    # (G,)
        loss, _ = grpo_loss(logp[y], logp[y].detach(), None, adv, MASK[y], beta=0.0, agg=agg,
                            max_len=MAX_LEN, num_tokens=num_tokens)
        total = total + prob[y].prod() * loss
    return -torch.autograd.grad(total, s)[0]


R = torch.tensor(REWARDS, dtype=F64)
L = LENGTHS.to(F64)


def grad_J(s0=S0, rewards=REWARDS):
    return gradient_of_expectation(torch.tensor(rewards, dtype=F64), s0)


def test_the_example_policy_and_its_true_gradient():
    p = answer_probs(torch.tensor(S0, dtype=F64))
    assert torch.allclose(p, torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 8], dtype=F64), atol=1e-15)
    assert torch.allclose(grad_J(), torch.tensor([-0.1375, 0.1125, 0.0125], dtype=F64), atol=1e-15)
    assert abs((p @ L).item() - 1.75) < 1e-15 and abs((p @ R).item() - 0.275) < 1e-15


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("G", [2, 3])
def test_mean_is_1_minus_1_over_G_of_loo_under_every_aggregation(agg, G):
    assert torch.allclose(expected_gradient("mean", agg, G), (1 - 1 / G) * expected_gradient("loo", agg, G),
                          atol=1e-14)


@pytest.mark.parametrize("G", [2, 3])
def test_a_constant_normaliser_gives_grad_J_over_max_len(G):
    """agg="dr_grpo": loo and none give ∇J/3 exactly, mean (1-1/G)·∇J/3, whatever the lengths."""
    target = grad_J() / MAX_LEN
    assert torch.allclose(expected_gradient("loo", "dr_grpo", G), target, atol=1e-14)
    assert torch.allclose(expected_gradient("none", "dr_grpo", G), target, atol=1e-14)
    assert torch.allclose(expected_gradient("mean", "dr_grpo", G), (1 - 1 / G) * target, atol=1e-14)
    assert r4(target) == [-0.0458, 0.0375, 0.0042]


@pytest.mark.parametrize("G", [2, 3])
def test_the_grpo_normaliser_biases_loo_by_answer_length(G):
    """agg="grpo" with loo: ∇E[(r - c)/|o|] at c = E[r] held fixed, for every G; not a multiple of ∇J."""
    c = (answer_probs(torch.tensor(S0, dtype=F64)) @ R).item()
    g = expected_gradient("loo", "grpo", G)
    assert torch.allclose(g, gradient_of_expectation((R - c) / L), atol=1e-14)
    assert r4(g) == [-0.1068, 0.0526, 0.0042]
    assert [round(v, 2) for v in (g / grad_J()).tolist()] == [0.78, 0.47, 0.33]
    assert abs((g / grad_J())[2].item() - 1 / 3) < 1e-12  # "aa⏎" vs "aaa": both of length 3
    assert not parallel(g, grad_J(), tol=0.1)
    # without a baseline: the gradient of E[r/|o|], reward per token
    g_none = expected_gradient("none", "grpo", G)
    assert torch.allclose(g_none, gradient_of_expectation(R / L), atol=1e-14)
    assert r4(g_none) == [-0.0667, 0.0583, 0.0042]
    assert [round(v, 2) for v in (g_none / grad_J()).tolist()] == [0.48, 0.52, 0.33]


def test_the_dapo_token_mean_is_biased_by_its_sampled_denominator():
    g = expected_gradient("loo", "dapo", 3)
    assert r4(g) == [-0.0879, 0.0627, 0.0060]
    assert [round(v, 2) for v in (g / grad_J()).tolist()] == [0.64, 0.56, 0.48]
    assert not parallel(g, grad_J(), tol=0.1)
    assert not torch.allclose(g, expected_gradient("loo", "dapo", 2), atol=1e-3)  # it depends on G too
    # the sampled token count is the only cause: the constant num_seqs·E|o| = 3·1.75 gives ∇J/E|o|
    g_const = expected_gradient("loo", "dapo", 3, num_tokens=3 * 1.75)
    assert torch.allclose(g_const, grad_J() / 1.75, atol=1e-14)


@pytest.mark.parametrize("agg", AGGS)
def test_std_with_partial_credit_is_not_a_multiple_of_grad_J(agg):
    assert not parallel(expected_gradient("std", agg, 3), grad_J(), tol=0.05)


def test_std_with_0_1_rewards_and_a_constant_normaliser_is_parallel_by_a_success_rate_factor():
    binary = (0.0, 1.0, 1.0, 0.0)
    for G in (3, 4):
        factors = []
        for s0 in (S0, (3.0, 0.0, 0.0)):  # success rate 0.375, then 0.036
            g, gJ = expected_gradient("std", "dr_grpo", G, s0, binary), grad_J(s0, binary)
            assert parallel(g, gJ)
            factors.append((g / gJ)[0].item())
        if G == 3:  # (with G = 2 or 3 the factor happens not to depend on the success rate)
            assert abs(factors[0] - factors[1]) < 1e-12
        else:       # with G = 4 it does: a per-prompt learning rate
            assert abs(factors[0] - factors[1]) > 0.02
    # the per-answer normaliser still breaks it, 0/1 rewards or not
    assert not parallel(expected_gradient("std", "grpo", 3, S0, binary), grad_J(S0, binary), tol=0.05)


# ----------------------------------------------------------------------------- two-token answers

# Vocabulary {0: "a", 1: "b"}, no EOS: the answers "aa", "ab", "ba", "bb", all of length 2.
# theta = the logit of "a" (against 0 for "b") at the root, after "a" and after "b".
SEQS = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])  # (4, T=2)
MASK2 = torch.ones(4, 2, dtype=torch.bool)             # (4, T) every answer has length 2
THETA2 = (0.5, 1.0, -0.5)
REF2 = torch.tensor([0.0, -1.0, 0.5], dtype=F64)


def prefix_logits(theta):
    """(3, V) next-token logits at the root, after "a", after "b"."""
    return torch.stack([theta, torch.zeros_like(theta)], dim=-1)  # (3, 2)


def two_token_logprobs(theta):
    """(4, T=2) token log-probs of the four answers, through token_logprobs."""
    table = prefix_logits(theta)                                             # (3, V)
    logits = torch.stack([table[0].expand(4, 2), table[1 + SEQS[:, 0]]], dim=1)  # (4, T, V)
    return token_logprobs(logits, SEQS)                                      # (4, T)


def test_answers_of_one_length_every_aggregation_gives_grad_J_over_that_length():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0], dtype=F64)  # (4,) over "aa", "ab", "ba", "bb"
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    logp = two_token_logprobs(theta)                          # (4, T)
    prob = logp.detach().sum(1).exp()                         # (4,)
    (gJ,) = torch.autograd.grad(logp.sum(1).exp() @ rewards, theta, retain_graph=True)  # ∇J
    G = 2
    for agg in AGGS:
        total = 0.0
        for ys in itertools.product(range(4), repeat=G):
            y = torch.tensor(ys)
            adv = group_advantages(rewards[y], G, "loo")
            loss, _ = grpo_loss(logp[y], logp[y].detach(), None, adv, MASK2[y], beta=0.0, agg=agg, max_len=2)
            total = total + prob[y].prod() * loss
        (g,) = torch.autograd.grad(-total, theta, retain_graph=True)
        assert torch.allclose(g, gJ / 2, atol=1e-14), agg


def expected_kl_gradient(kind):
    """E over answers o ~ π of ∇ Σ_t (per-token KL estimate of kind), through grpo_loss (A = 0, beta = 1).

    agg="grpo" averages an answer's two tokens, so the token sum's gradient is twice the loss's.
    """
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    logp, ref = two_token_logprobs(theta), two_token_logprobs(REF2)  # (4, T) each
    prob = logp.detach().sum(1).exp()                                # (4,)
    total = 0.0
    for o in range(4):
        loss, _ = grpo_loss(logp[o:o + 1], logp[o:o + 1].detach(), ref[o:o + 1], torch.zeros(1, dtype=F64),
                            MASK2[o:o + 1], beta=1.0, kl=kind)
        total = total + prob[o] * loss
    return 2 * torch.autograd.grad(total, theta)[0]


def sequence_kl_gradients():
    """∇KL(π‖π_ref) and ∇KL(π_ref‖π) over whole answers, from the answers' probabilities."""
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    lp, lq = two_token_logprobs(theta).sum(1), two_token_logprobs(REF2).sum(1)  # (4,) log π(o), log π_ref(o)
    fwd, rev = (lp.exp() * (lp - lq)).sum(), (lq.exp() * (lq - lp)).sum()
    return torch.autograd.grad(fwd, theta, retain_graph=True)[0], torch.autograd.grad(rev, theta)[0]


def one_step_prediction(direction):
    """Σ_t E_{o<t ~ π}[∇KL_t]: each prefix's next-token KL, prefixes weighted by π held fixed."""
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    pi, ref = torch.softmax(prefix_logits(theta), -1), torch.softmax(prefix_logits(REF2), -1)  # (3, V)
    weight = torch.cat([torch.ones(1, dtype=F64), pi[0].detach()])  # (3,) root, then π("a"), π("b")
    if direction == "reverse":
        kl = (ref * (ref.log() - pi.log())).sum(-1)                  # (3,) KL(π_ref‖π) at each prefix
    else:
        kl = (pi * (pi.log() - ref.log())).sum(-1)                   # (3,) KL(π‖π_ref) at each prefix
    return torch.autograd.grad(weight @ kl, theta)[0]


def test_k3_on_two_tokens_is_the_one_step_fact_summed_not_a_sequence_kl_gradient():
    g = expected_kl_gradient("k3")
    fwd, rev = sequence_kl_gradients()
    assert r4(g) == [0.1225, 0.2876, -0.0925]
    assert torch.allclose(g, one_step_prediction("reverse"), atol=1e-14)  # ∇KL(π_ref‖π) per prefix, π-weighted
    assert r4(rev) == [0.1225, 0.2311, -0.1225]
    assert abs(g[0] - rev[0]) < 1e-14 and not torch.allclose(g[1:], rev[1:], atol=1e-3)  # first token only
    assert not torch.allclose(g, fwd, atol=1e-3)


def test_k2_on_two_tokens_is_the_one_step_fact_summed_not_a_sequence_kl_gradient():
    g = expected_kl_gradient("k2")
    fwd, rev = sequence_kl_gradients()
    assert r4(g) == [0.1175, 0.2448, -0.0887]
    assert torch.allclose(g, one_step_prediction("forward"), atol=1e-14)
    assert r4(fwd) == [0.1973, 0.2448, -0.0887]
    assert torch.allclose(g[1:], fwd[1:], atol=1e-14) and abs(g[0] - fwd[0]) > 0.05  # later tokens only
    assert not torch.allclose(g, rev, atol=1e-3)
    # k1 as a loss: 0 in expectation at every prefix, so 0 over the answer too
    assert torch.allclose(expected_kl_gradient("k1"), torch.zeros(3, dtype=F64), atol=1e-14)


def test_the_k1_sum_as_a_reward_gives_the_sequence_level_forward_kl_gradient():
    """Advantage -Σ_t log(π/π_ref) (the KL in the reward, RLHF-PPO's placement), beta = 0."""
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    logp, ref = two_token_logprobs(theta), two_token_logprobs(REF2)  # (4, T)
    prob = logp.detach().sum(1).exp()                                # (4,)
    adv = -kl_penalty(logp, ref, "k1").detach().sum(1)               # (4,) one number per answer
    total = 0.0
    for o in range(4):
        loss, _ = grpo_loss(logp[o:o + 1], logp[o:o + 1].detach(), None, adv[o:o + 1], MASK2[o:o + 1], beta=0.0)
        total = total + prob[o] * loss
    g = 2 * torch.autograd.grad(total, theta)[0]  # agg="grpo": 1/|o| = 1/2
    fwd, _ = sequence_kl_gradients()
    assert torch.allclose(g, fwd, atol=1e-14)
