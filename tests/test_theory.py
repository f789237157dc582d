"""Exact enumeration beyond one-token answers, through the project's own functions (token_logprobs,
group_advantages, grpo_loss, kl_penalty, aggregate) and autograd; masks come from lengths, never from token ids.

1. Answers of lengths 1, 2, 3: which (advantage, aggregation) pairs give ∇J or a constant multiple
   of it, and how far the others are (the example and its numbers: the docstrings below).
2. Answers of one length: every aggregation is a constant, and the baseline theorem holds again.
3. Two-token answers: the per-token KL estimators against the sequence-level KL gradients.
4. Lengths decided by EOS (1 to 3 tokens): the KL facts under each aggregation, Σ_t k1_t as a reward, and
   importance weights for answers sampled from π_old.
5. Issue 32's general cases: dynamic sampling's accuracy and dead fractions, loo and a reward's scale under AdamW
   with β > 0, the dead chance of a reward of several values, the README's statistics, and what eps alone does.
6. Issue 38's: dead groups at β > 0, CISPO's normaliser against MiniMax-M1's, the overlong penalty on a 0/1 reward,
   twelve rows paired with one GRPO evaluation, what TIS weights correct, the README table's dead groups.
"""

import functools
import itertools
import math

import pytest
import torch
from bench_variants import mcnemar_exact, paired_bootstrap

from advantage import dead_groups, group_advantages, group_stats
from grpo import AGGS, aggregate, grpo_loss, kl_penalty, tis_weights, token_logprobs

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
LENGTHS = torch.tensor([1, 2, 3, 3])  # (4,)
MASK = torch.arange(3)[None, :] < LENGTHS[:, None]  # (4, T) from the lengths
REWARDS = (0.0, 1.0, 0.2, 0.0)  # empty: wrong; "a⏎": right; "aa⏎": off by one, partial credit; "aaa": no answer
MAX_LEN = 3
S0 = (0.0, 0.0, 0.0)  # π = (1/2, 1/4, 1/8, 1/8)


def answer_logprobs(s):
    """(4, T) token log-probs of the four answers under stop logits s (T,), through token_logprobs."""
    logits = torch.stack([torch.zeros_like(s), s], dim=-1)  # (T, V) "a" at 0, EOS at s_t
    return token_logprobs(logits.expand(4, 3, 2), TOKENS)  # (4, T)


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
    logp = answer_logprobs(s)  # (4, T)
    prob = answer_probs(s).detach()  # (4,)
    R = torch.tensor(rewards, dtype=F64)  # (4,)
    total = 0.0
    for ys in itertools.product(range(4), repeat=G):
        y = torch.tensor(ys)  # (G,) one group of answers
        adv = group_advantages(R[y], G, method)  # (G,)
        loss, _ = grpo_loss(
            logp[y], logp[y].detach(), None, adv, MASK[y], beta=0.0, agg=agg, max_len=MAX_LEN, num_tokens=num_tokens
        )
        total = total + prob[y].prod() * loss
    return -torch.autograd.grad(total, s)[0]


R = torch.tensor(REWARDS, dtype=F64)
L = LENGTHS.to(F64)


def grad_J(s0=S0, rewards=REWARDS):
    return gradient_of_expectation(torch.tensor(rewards, dtype=F64), s0)


def test_the_example_policy_and_its_true_gradient():
    """The example for grpo.py's "Expected gradients and answer length": answers "⏎", "a⏎", "aa⏎", "aaa" (lengths
    1, 2, 3, 3; the last truncated) with rewards 0, 1, 0.2, 0, from a policy with stop logits s = (0, 0, 0) at
    positions 1-3: π = ½, ¼, ⅛, ⅛, and ∇J = (-0.1375, 0.1125, 0.0125). The tests below give each (advantage,
    aggregation) pair's expected gradient and, per component, its multiple of ∇J."""
    p = answer_probs(torch.tensor(S0, dtype=F64))
    assert torch.allclose(p, torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 8], dtype=F64), atol=1e-15)
    assert torch.allclose(grad_J(), torch.tensor([-0.1375, 0.1125, 0.0125], dtype=F64), atol=1e-15)
    assert abs((p @ L).item() - 1.75) < 1e-15 and abs((p @ R).item() - 0.275) < 1e-15


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("G", [2, 3])
def test_mean_is_1_minus_1_over_G_of_loo_under_every_aggregation(agg, G):
    assert torch.allclose(expected_gradient("mean", agg, G), (1 - 1 / G) * expected_gradient("loo", agg, G), atol=1e-14)


@pytest.mark.parametrize("G", [2, 3])
def test_a_constant_normaliser_gives_grad_J_over_max_len(G):
    """agg="dr_grpo": loo and none give ∇J/3 exactly, mean (1-1/G)·∇J/3, whatever the lengths:
    dr_grpo, loo or none  (-0.0458, 0.0375, 0.0042)  1/3, 1/3, 1/3 of ∇J  (max_len 3)"""
    target = grad_J() / MAX_LEN
    assert torch.allclose(expected_gradient("loo", "dr_grpo", G), target, atol=1e-14)
    assert torch.allclose(expected_gradient("none", "dr_grpo", G), target, atol=1e-14)
    assert torch.allclose(expected_gradient("mean", "dr_grpo", G), (1 - 1 / G) * target, atol=1e-14)
    assert r4(target) == [-0.0458, 0.0375, 0.0042]


@pytest.mark.parametrize("G", [2, 3])
def test_the_grpo_normaliser_biases_loo_by_answer_length(G):
    """agg="grpo" with loo: ∇E[(r - c)/|o|] at c = E[r] held fixed, for every G; not a multiple of ∇J:
        grpo, loo             (-0.1068, 0.0526, 0.0042)  0.78, 0.47, 0.33 of ∇J
        grpo, none            (-0.0667, 0.0583, 0.0042)  0.48, 0.52, 0.33 of ∇J
    The third component only trades "aa⏎" against "aaa", both of length 3: there grpo is exactly 1/3."""
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
    """agg="dapo" with loo, G = 3 (and another number at G = 2):
    dapo, loo             (-0.0879, 0.0627, 0.0060)  0.64, 0.56, 0.48 of ∇J"""
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
        else:  # with G = 4 it does: a per-prompt learning rate
            assert abs(factors[0] - factors[1]) > 0.02
    # the per-answer normaliser still breaks it, 0/1 rewards or not
    assert not parallel(expected_gradient("std", "grpo", 3, S0, binary), grad_J(S0, binary), tol=0.05)


# ----------------------------------------------------------------------------- two-token answers

# Vocabulary {0: "a", 1: "b"}, no EOS: the answers "aa", "ab", "ba", "bb", all of length 2.
# theta = the logit of "a" (against 0 for "b") at the root, after "a" and after "b".
SEQS = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])  # (4, T=2)
MASK2 = torch.ones(4, 2, dtype=torch.bool)  # (4, T) every answer has length 2
THETA2 = (0.5, 1.0, -0.5)
REF2 = torch.tensor([0.0, -1.0, 0.5], dtype=F64)


def prefix_logits(theta):
    """(3, V) next-token logits at the root, after "a", after "b"."""
    return torch.stack([theta, torch.zeros_like(theta)], dim=-1)  # (3, 2)


def two_token_logprobs(theta):
    """(4, T=2) token log-probs of the four answers, through token_logprobs."""
    table = prefix_logits(theta)  # (3, V)
    logits = torch.stack([table[0].expand(4, 2), table[1 + SEQS[:, 0]]], dim=1)  # (4, T, V)
    return token_logprobs(logits, SEQS)  # (4, T)


def test_answers_of_one_length_every_aggregation_gives_grad_J_over_that_length():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0], dtype=F64)  # (4,) over "aa", "ab", "ba", "bb"
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    logp = two_token_logprobs(theta)  # (4, T)
    prob = logp.detach().sum(1).exp()  # (4,)
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
    prob = logp.detach().sum(1).exp()  # (4,)
    total = 0.0
    for o in range(4):
        loss, _ = grpo_loss(
            logp[o : o + 1],
            logp[o : o + 1].detach(),
            ref[o : o + 1],
            torch.zeros(1, dtype=F64),
            MASK2[o : o + 1],
            beta=1.0,
            kl=kind,
        )
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
        kl = (ref * (ref.log() - pi.log())).sum(-1)  # (3,) KL(π_ref‖π) at each prefix
    else:
        kl = (pi * (pi.log() - ref.log())).sum(-1)  # (3,) KL(π‖π_ref) at each prefix
    return torch.autograd.grad(weight @ kl, theta)[0]


def test_k3_on_two_tokens_is_the_one_step_fact_summed_not_a_sequence_kl_gradient():
    """Per-prefix logits θ = (0.5, 1, -0.5) for "a" at the root, after "a", after "b"; π_ref's (0, -1, 0.5);
    gradients of the token sum:
        k3 per-token losses       (0.1225, 0.2876, -0.0925)   first-token part = ∇KL(π_ref‖π)'s, not the rest
        ∇KL(π_ref‖π), sequences   (0.1225, 0.2311, -0.1225)"""
    g = expected_kl_gradient("k3")
    fwd, rev = sequence_kl_gradients()
    assert r4(g) == [0.1225, 0.2876, -0.0925]
    assert torch.allclose(g, one_step_prediction("reverse"), atol=1e-14)  # ∇KL(π_ref‖π) per prefix, π-weighted
    assert r4(rev) == [0.1225, 0.2311, -0.1225]
    assert abs(g[0] - rev[0]) < 1e-14 and not torch.allclose(g[1:], rev[1:], atol=1e-3)  # first token only
    assert not torch.allclose(g, fwd, atol=1e-3)


def test_k2_on_two_tokens_is_the_one_step_fact_summed_not_a_sequence_kl_gradient():
    """The same answers (θ and π_ref as above); k1's expected gradient is 0 here (one length: a constant weight):
    k2 per-token losses       (0.1175, 0.2448, -0.0887)   last-token part = ∇KL(π‖π_ref)'s, not the first
    ∇KL(π‖π_ref), sequences   (0.1973, 0.2448, -0.0887)"""
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
    """Advantage -Σ_t log(π/π_ref) (the KL in the reward, RLHF-PPO's placement), beta = 0: exactly the
    sequence-level ∇KL(π‖π_ref) = (0.1973, 0.2448, -0.0887), since every answer has the same length (with
    lengths set by EOS it needs a constant normaliser: section 4)."""
    theta = torch.tensor(THETA2, dtype=F64, requires_grad=True)
    logp, ref = two_token_logprobs(theta), two_token_logprobs(REF2)  # (4, T)
    prob = logp.detach().sum(1).exp()  # (4,)
    adv = -kl_penalty(logp, ref, "k1").detach().sum(1)  # (4,) one number per answer
    total = 0.0
    for o in range(4):
        loss, _ = grpo_loss(logp[o : o + 1], logp[o : o + 1].detach(), None, adv[o : o + 1], MASK2[o : o + 1], beta=0.0)
        total = total + prob[o] * loss
    g = 2 * torch.autograd.grad(total, theta)[0]  # agg="grpo": 1/|o| = 1/2
    fwd, _ = sequence_kl_gradients()
    assert torch.allclose(g, fwd, atol=1e-14) and r4(fwd) == [0.1973, 0.2448, -0.0887]


# ----------------------------------------------------------------------------- lengths decided by EOS

# Vocabulary {0: "a", 1: "b", 2: EOS}, answers of at most T = 3 tokens: "⏎", "a⏎", "b⏎", then the 12 answers of
# three tokens ("ab⏎", ..., "bba"; those without EOS truncated). The policy holds one row of 3 logits for each
# prefix that can still go on: "", "a", "b", "aa", "ab", "ba", "bb" (7 rows, 21 parameters; row 0 = first token).
ANSWERS = [(2,)] + [(x, 2) for x in (0, 1)] + [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1, 2)]
TOKENS3 = torch.tensor([list(o) + [0] * (3 - len(o)) for o in ANSWERS])  # (15, T) after the EOS: "a", masked
LENGTHS3 = torch.tensor([len(o) for o in ANSWERS])  # (15,)
MASK3 = torch.arange(3)[None, :] < LENGTHS3[:, None]  # (15, T) from the lengths
ROW = {(): 0, (0,): 1, (1,): 2, (0, 0): 3, (0, 1): 4, (1, 0): 5, (1, 1): 6}  # prefix -> its row of logits
ROWS3 = torch.tensor([[ROW[o[:t]] if t < len(o) else 0 for t in range(3)] for o in ANSWERS])  # (15, T)
THETA3 = (
    (0.3, -0.2, 0.0),
    (0.5, 0.1, -0.4),
    (-0.3, 0.2, 0.6),
    (0.2, -0.5, 0.1),
    (0.0, 0.4, -0.2),
    (-0.1, 0.3, 0.5),
    (0.6, -0.2, 0.0),
)
REF3 = (
    (0.0, 0.5, -0.3),
    (-0.4, 0.2, 0.3),
    (0.4, -0.1, 0.2),
    (0.1, 0.3, -0.5),
    (-0.2, -0.1, 0.4),
    (0.3, 0.0, -0.1),
    (-0.5, 0.2, 0.3),
)
OLD3 = (
    (0.5, 0.0, -0.5),
    (0.0, 0.6, -0.2),
    (0.2, 0.2, 0.2),
    (-0.4, 0.1, 0.3),
    (0.5, -0.3, 0.0),
    (0.0, 0.0, 0.7),
    (0.3, 0.3, -0.6),
)
L3 = LENGTHS3.to(F64)


def eos_logprobs(table):
    """(15, T) token log-probs of the 15 answers under a (7, V) table of logits, through token_logprobs."""
    return token_logprobs(table[ROWS3], TOKENS3)  # (15, T)


def eos_answer_logprobs(table):
    return torch.where(MASK3, eos_logprobs(table), 0.0).sum(1)  # (15,) log π(o)


def theta3():
    return torch.tensor(THETA3, dtype=F64, requires_grad=True)  # (7, V)


@functools.lru_cache(maxsize=None)
def eos_kl_gradient(kind, agg, G=2):
    """E over all 15^G groups o ~ π of ∇ grpo_loss (A = 0, beta = 1, μ = 1): the KL's expected gradient (7, V)."""
    theta = theta3()
    logp, ref = eos_logprobs(theta), eos_logprobs(torch.tensor(REF3, dtype=F64))  # (15, T) each
    prob = eos_answer_logprobs(theta).detach().exp()  # (15,)
    total = 0.0
    for ys in itertools.product(range(15), repeat=G):
        y = torch.tensor(ys)  # (G,) one group
        loss, _ = grpo_loss(
            logp[y],
            logp[y].detach(),
            ref[y],
            torch.zeros(G, dtype=F64),
            MASK3[y],
            beta=1.0,
            kl=kind,
            agg=agg,
            max_len=3,
        )
        total = total + prob[y].prod() * loss
    return torch.autograd.grad(total, theta)[0]


def eos_gradient_of_expectation(f, G=1):
    """∇_θ E[f] for a fixed value f of one answer (15,) or, with G = 2, of a pair of answers (15, 15)."""
    theta = theta3()
    p = eos_answer_logprobs(theta).exp()  # (15,)
    return torch.autograd.grad((p @ f) if G == 1 else p @ f @ p, theta)[0]


def eos_one_step(direction):
    """Σ over prefixes h, weighted by π(h) held fixed, of ∇KL_h: the one-step facts summed over the answer."""
    theta = theta3()
    pi, ref = torch.softmax(theta, -1), torch.softmax(torch.tensor(REF3, dtype=F64), -1)  # (7, V)
    p = pi.detach()
    reach = torch.cat([torch.ones(1, dtype=F64), p[0, :2], p[0, :2].repeat_interleave(2) * p[1:3, :2].reshape(-1)])
    kl = (ref * (ref / pi).log()).sum(-1) if direction == "reverse" else (pi * (pi / ref).log()).sum(-1)  # (7,)
    return torch.autograd.grad(reach @ kl, theta)[0]


def eos_sequence_kl_gradients():
    """∇KL(π‖π_ref) and ∇KL(π_ref‖π) over the 15 answers."""
    theta = theta3()
    lp, lq = eos_answer_logprobs(theta), eos_answer_logprobs(torch.tensor(REF3, dtype=F64))  # (15,) each
    fwd, rev = (lp.exp() * (lp - lq)).sum(), (lq.exp() * (lq - lp)).sum()
    return torch.autograd.grad(fwd, theta, retain_graph=True)[0], torch.autograd.grad(rev, theta)[0]


def test_eos_lengths_the_kl_facts_hold_only_at_a_constant_weight():
    """Groups of G = 2, every one enumerated (expected length 2.161). agg="dr_grpo" (weight 1/(2·3)): k1's expected
    gradient is 0, k2's and k3's are the one-step facts summed (÷ max_len 3), so their first-token part (row 0) is
    ∇KL_root(π‖π_ref), ∇KL_root(π_ref‖π) (FWD0/REV0) over 3. agg="grpo" (1/|o_i|) and "dapo" (1/num_tokens):
    the weight depends on the sampled tokens and the first-token part moves:
        k1, grpo   ∇E[1/|o|], first token (-0.0905, -0.0426, 0.1331)   not 0
        k1, dapo   ∇E[1/(|o_1| + |o_2|)], first token (-0.0399, -0.0164, 0.0563)
        k3, grpo   first token 0.20, 0.47, 0.84 of REV0                 not a multiple of it
        k2, grpo   first token 0.11, 0.50, 1.01 of FWD0
    """
    p = eos_answer_logprobs(torch.tensor(THETA3, dtype=F64)).exp()  # (15,)
    assert abs(p.sum().item() - 1) < 1e-15 and round((p @ L3).item(), 3) == 2.161
    fwd0 = eos_one_step("forward")[0]  # (V,) ∇KL_root(π‖π_ref): only the root's KL depends on row 0
    rev0 = eos_one_step("reverse")[0]  # (V,) ∇KL_root(π_ref‖π)
    zero = torch.zeros(7, 3, dtype=F64)
    assert torch.allclose(eos_kl_gradient("k1", "dr_grpo"), zero, atol=1e-15)
    assert torch.allclose(eos_kl_gradient("k2", "dr_grpo"), eos_one_step("forward") / 3, atol=1e-15)
    assert torch.allclose(eos_kl_gradient("k3", "dr_grpo"), eos_one_step("reverse") / 3, atol=1e-15)
    fwd, rev = eos_sequence_kl_gradients()  # neither sequence-level KL (section 3's facts, with EOS)
    k2, k3 = 3 * eos_kl_gradient("k2", "dr_grpo"), 3 * eos_kl_gradient("k3", "dr_grpo")
    assert torch.allclose(k3[0], rev[0], atol=1e-15) and not torch.allclose(k3[1:], rev[1:], atol=1e-2)
    assert torch.allclose(k2[3:], fwd[3:], atol=1e-15) and not torch.allclose(k2[:3], fwd[:3], atol=1e-2)
    # the weight depends on the answer: k1 pushes toward longer answers, and the first token moves too
    k1_grpo, k1_dapo = eos_kl_gradient("k1", "grpo"), eos_kl_gradient("k1", "dapo")
    assert torch.allclose(k1_grpo, eos_gradient_of_expectation(1 / L3), atol=1e-15)
    assert torch.allclose(k1_dapo, eos_gradient_of_expectation(1 / (L3[:, None] + L3[None, :]), G=2), atol=1e-15)
    assert r4(k1_grpo[0]) == [-0.0905, -0.0426, 0.1331] and r4(k1_dapo[0]) == [-0.0399, -0.0164, 0.0563]
    assert [round(v, 2) for v in (eos_kl_gradient("k3", "grpo")[0] / rev0).tolist()] == [0.20, 0.47, 0.84]
    assert [round(v, 2) for v in (eos_kl_gradient("k2", "grpo")[0] / fwd0).tolist()] == [0.11, 0.50, 1.01]
    for agg in ("grpo", "dapo"):
        assert not parallel(eos_kl_gradient("k3", agg)[0], rev0, tol=0.1)
        assert not parallel(eos_kl_gradient("k2", agg)[0], fwd0, tol=0.1)
        assert not parallel(eos_kl_gradient("k3", agg).flatten(), eos_one_step("reverse").flatten(), tol=0.1)


@pytest.mark.parametrize("agg", AGGS)
def test_eos_lengths_the_k1_sum_as_a_reward_needs_a_constant_normaliser(agg):
    """Advantage -Σ_t k1_t = -log(π(o)/π_ref(o)), beta 0, groups of 2: ∇KL(π‖π_ref)/3 under dr_grpo; under grpo
    ∇E[log(π(o)/π_ref(o))/|o|] with the log-ratio held fixed (a per-token rate), not a multiple of ∇KL; under dapo
    neither, unless num_tokens is the constant 2·E|o|."""
    theta = theta3()
    logp, ref = eos_logprobs(theta), eos_logprobs(torch.tensor(REF3, dtype=F64))  # (15, T)
    prob = eos_answer_logprobs(theta).detach().exp()  # (15,)
    adv = -torch.where(MASK3, kl_penalty(logp, ref, "k1"), 0.0).detach().sum(1)  # (15,) one number per answer
    mean_len = (prob @ L3).item()

    def expected(**totals):
        total = 0.0
        for ys in itertools.product(range(15), repeat=2):
            y = torch.tensor(ys)
            loss, _ = grpo_loss(
                logp[y], logp[y].detach(), None, adv[y], MASK3[y], beta=0.0, agg=agg, max_len=3, **totals
            )
            total = total + prob[y].prod() * loss
        return torch.autograd.grad(total, theta, retain_graph=True)[0]

    fwd, _ = eos_sequence_kl_gradients()
    g = expected()
    if agg == "dr_grpo":
        assert torch.allclose(g, fwd / 3, atol=1e-15)
    else:
        assert not parallel(g.flatten(), fwd.flatten(), tol=0.1)
    if agg == "grpo":
        assert torch.allclose(g, eos_gradient_of_expectation(-adv / L3), atol=1e-15)
    if agg == "dapo":
        assert torch.allclose(expected(num_tokens=2 * mean_len), fwd / mean_len, atol=1e-15)


def off_policy_kl_gradient(kind, agg, weight):
    """E over answers o ~ π_old (OLD3) of ∇ of the KL term, one answer per call (beta = 1, A = 0).

    weight None: grpo_loss as it is. Otherwise the term a forker would add through aggregate(), each token's KL
    times a detached importance weight: "token" π/π_old of that token, "prefix" Π_{s≤t} π/π_old over o_≤t,
    "answer" π(o)/π_old(o) of the whole answer.
    """
    theta = theta3()
    logp, ref, old = (eos_logprobs(x) for x in (theta, torch.tensor(REF3, dtype=F64), torch.tensor(OLD3, dtype=F64)))
    q = eos_answer_logprobs(torch.tensor(OLD3, dtype=F64)).exp()  # (15,) the sampler: π_old
    total = 0.0
    for o in range(15):
        r = slice(o, o + 1)
        if weight is None:
            loss, _ = grpo_loss(
                logp[r], old[r], ref[r], torch.zeros(1, dtype=F64), MASK3[r], beta=1.0, kl=kind, agg=agg, max_len=3
            )
        else:
            log_rho = torch.where(MASK3[r], logp[r] - old[r], 0.0).detach()  # (1, T) log π/π_old per token
            log_w = {"token": log_rho, "prefix": log_rho.cumsum(1), "answer": log_rho.sum(1, keepdim=True)}[weight]
            loss = aggregate(log_w.exp() * kl_penalty(logp[r], ref[r], kind), MASK3[r], agg, max_len=3)
        total = total + q[o] * loss
    return torch.autograd.grad(total, theta)[0]


@pytest.mark.parametrize("kind", ["k2", "k3"])
def test_eos_lengths_importance_weights_for_answers_sampled_from_pi_old(kind):
    """The on-policy target is E_{o ~ π} of the same term (eos_kl_gradient). Under dr_grpo the per-token weight
    restores the first token only (its prefix is empty), the cumulative prefix ratio restores all; under grpo the
    1/|o_i| depends on tokens after t, so only the whole answer's ratio does."""
    for agg in ("dr_grpo", "grpo"):
        target = eos_kl_gradient(kind, agg)
        none, token, prefix, answer = (
            off_policy_kl_gradient(kind, agg, w) for w in (None, "token", "prefix", "answer")
        )
        assert not torch.allclose(none[0], target[0], atol=1e-3)
        assert torch.allclose(answer, target, atol=1e-15)
        assert not torch.allclose(token[1:], target[1:], atol=1e-3)
        if agg == "dr_grpo":
            assert torch.allclose(token[0], target[0], atol=1e-15) and torch.allclose(prefix, target, atol=1e-15)
        else:
            assert not torch.allclose(token[0], target[0], atol=1e-3)
            assert not torch.allclose(prefix, target, atol=1e-3)


# ----------------------------------------------------------------------------- 5. issue 32: the general cases

# Dynamic sampling (train.py --dynamic K): 0/1 rewards (reward = right), G answers per group, each group's prompt
# drawn afresh with success rate qs[j] with probability ws[j].


def every_01_group(G):
    return ((torch.arange(2**G)[:, None] >> torch.arange(G)) & 1).to(F64)  # (2^G, G) every 0/1 group


def fresh_groups(qs, ws, G):
    """Every outcome of one fresh group, prompt and answers: rewards (n, G), probabilities (n,), dead (n,) by
    dead_groups; n = len(qs)·2^G."""
    bits = every_01_group(G)  # (2^G, G)
    k = bits.sum(1)  # (2^G,) right answers
    prob = torch.cat([w * q**k * (1 - q) ** (G - k) for q, w in zip(qs, ws)])  # (n,)
    rewards = bits.repeat(len(qs), 1)  # (n, G)
    return rewards, prob, dead_groups(rewards.reshape(-1), G)


def dynamic_trained_group(qs, ws, G, K):
    """The law of the group that one of the batch's slots trains under --dynamic K, every chain enumerated: the
    slot's first group; while it is dead and fewer than K rounds were added, a fresh group of a fresh prompt in its
    place; a group still dead after K rounds is trained. A chain of m dead groups and then the trained one (live, or
    any when m = K) has the product of their probabilities. Returns rewards (n, G), dead (n,), the law (n,)."""
    rewards, prob, dead = fresh_groups(qs, ws, G)
    n, law = len(prob), torch.zeros(len(prob), dtype=F64)
    for m in range(K + 1):
        chains = torch.cartesian_prod(*[torch.arange(n)] * (m + 1)).view(-1, m + 1)  # (n^(m+1), m+1)
        weight = prob[chains].prod(1) * dead[chains[:, :m]].all(1)  # the first m replaced: dead
        if m < K:
            weight = weight * ~dead[chains[:, m]]  # kept at round m: live
        law.index_add_(0, chains[:, m], weight)
    return rewards, dead, law


def dynamic_numbers(qs, ws, G, K):
    """E[q], the trained batch's expected acc, D (a fresh group's dead chance), f (the share of dead groups that are
    all right), the live groups' accuracy a, and the trained batch's expected dead_frac."""
    rewards, dead, law = dynamic_trained_group(qs, ws, G, K)
    _, prob, _ = fresh_groups(qs, ws, G)
    acc = rewards.mean(1)  # (n,) a group's accuracy
    D = (prob * dead).sum().item()
    f = (prob * dead * acc).sum().item() / D
    a = (prob * ~dead * acc).sum().item() / (1 - D) if D < 1 else float("nan")  # nan: no live group
    assert abs(law.sum().item() - 1) < 1e-12
    policy = sum(q * w for q, w in zip(qs, ws))
    return policy, (law @ acc).item(), D, f, a, (law @ dead.to(F64)).item()


def dynamic_batch_expectations(qs, ws, G, K, B=2):
    """train.py's loop as written, on B groups, every branch enumerated: round 1 samples B groups; while fewer than
    K + 1 rounds were sampled and some group is dead, the live groups are kept and each dead one is replaced by a new
    group (cat, as train.py does). Returns the trained batch's expected acc (= reward_mean for 0/1 rewards) and
    dead_frac, both from group_stats, and the expected dead_frac_sampled (dead groups / groups, over all rounds)."""
    rewards, prob, _ = fresh_groups(qs, ws, G)
    vectors, which = torch.unique(rewards, dim=0, return_inverse=True)  # the batch depends on the rewards only
    P = torch.zeros(len(vectors), dtype=F64).index_add_(0, which, prob)
    out = torch.zeros(3, dtype=F64)

    def go(r, p, n_dead, n_groups, rounds):
        dead = dead_groups(r, G)  # (B,)
        if rounds > K or not dead.any():
            s = group_stats(r, G)
            out.add_(p * torch.stack([s["reward_mean"], s["dead_frac"], torch.tensor(n_dead / n_groups, dtype=F64)]))
            return
        live = (~dead).repeat_interleave(G)
        for new in itertools.product(range(len(vectors)), repeat=int(dead.sum())):
            new_r = vectors[list(new)].reshape(-1)
            n_new = int(dead_groups(new_r, G).sum())
            go(torch.cat([r[live], new_r]), p * P[list(new)].prod(), n_dead + n_new, n_groups + len(new), rounds + 1)

    for first in itertools.product(range(len(vectors)), repeat=B):
        r = vectors[list(first)].reshape(-1)
        go(r, P[list(first)].prod(), int(dead_groups(r, G).sum()), B, 1)
    return out.tolist()


def test_dynamic_sampling_biases_the_trained_accuracy_either_way():
    """With 0/1 rewards, --dynamic K's trained batch (whose `acc` train.py logs) has in expectation the accuracy
    E[q] + (1 - D^K)·D·(a - f): D a group's dead chance, f the share of dead groups that are all right, a the live
    groups' accuracy (in [1/G, 1 - 1/G]). So it is above the policy's E[q] exactly when a > f, whatever most dead
    groups are. G = 4, K = 0, 1, 2:
        q 0.1 or 0.5 (½ each)    f = 0.08   0.300, then 0.386, 0.419   up
        q 0.9 or 0.5 (½ each)    f = 0.92   0.700, then 0.614, 0.581   down
        q 0.95 or 0.2 (0.3/0.7)  f = 0.46   0.425, then 0.406, 0.395   down, though most dead groups are all wrong
    (a = 0.38 there); K = 0 trains E[q] itself."""
    cases = {
        ((0.1, 0.5), (0.5, 0.5)): (0.08, [0.300, 0.386, 0.419]),
        ((0.9, 0.5), (0.5, 0.5)): (0.92, [0.700, 0.614, 0.581]),
        ((0.95, 0.2), (0.3, 0.7)): (0.46, [0.425, 0.406, 0.395]),
    }
    G = 4
    for (qs, ws), (f_rounded, accs) in cases.items():
        trained = []
        for K in (0, 1, 2):
            policy, acc, D, f, a, _ = dynamic_numbers(qs, ws, G, K)
            assert abs(acc - (policy + (1 - D**K) * D * (a - f))) < 1e-12
            assert 1 / G <= a <= 1 - 1 / G and round(f, 2) == f_rounded
            trained.append(round(acc, 3))
        assert trained == accs and trained[0] == round(policy, 3)
    # the third case: most dead groups are all wrong, and the filter still lowers the trained accuracy
    policy, acc, D, f, a, _ = dynamic_numbers((0.95, 0.2), (0.3, 0.7), G, 1)
    assert f < 1 / 2 and a < f and acc < policy - 0.01 and round(a, 2) == 0.38


def test_dynamic_sampling_raises_the_accuracy_for_sure_only_when_f_is_below_1_over_G():
    """Every two-prompt mixture on a grid (q in {0, 0.05, 0.1, ..., 0.9, 0.95, 1}, weights 0.2/0.5/0.8), G = 2, 3, 4,
    K = 1: with f the share of dead groups that are all right, the trained batch's expected accuracy is above the
    policy's E[q] whenever f < 1/G, below whenever f > 1 - 1/G, and for 1/G <= f <= 1 - 1/G (G = 3, 4) there are
    mixtures either way: live groups' accuracy, anywhere in [1/G, 1 - 1/G], decides."""
    grid = (0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1)
    for G in (2, 3, 4):
        between = set()
        for q1, q2 in itertools.combinations(grid, 2):
            if (q1, q2) == (0, 1):
                continue  # every group dead: nothing to filter
            for w in (0.2, 0.5, 0.8):
                policy, acc, D, f, a, _ = dynamic_numbers((q1, q2), (w, 1 - w), G, 1)
                if f < 1 / G - 1e-9:
                    assert acc > policy + 1e-6, (G, q1, q2, w)
                elif f > 1 - 1 / G + 1e-9:
                    assert acc < policy - 1e-6, (G, q1, q2, w)
                elif abs(acc - policy) > 1e-6:
                    between.add(acc > policy)
        assert between == ({True, False} if G > 2 else set())


def test_dynamic_sampling_as_train_py_loops_it_and_its_dead_fractions():
    """train.py's loop on B = 2 groups of G = 3 (q 0.95 or 0.2, weights 0.3/0.7), every branch: its expected acc is
    the one-slot law's (slots are independent), and the trained batch's expected dead_frac is D^(K+1) (a slot's
    group is dead only if all K + 1 were), not D = 0.621, the mean of the prompts' dead chances, which is the
    expectation for a batch as sampled (K = 0). dead_frac_sampled (dead groups over all groups of all rounds) is a
    ratio of counts: its expectation is not D either, 0.567 at K = 1 with B = 2 (below D for so few groups)."""
    qs, ws, G = (0.95, 0.2), (0.3, 0.7), 3
    for K in (0, 1, 2):
        acc, dead_frac, dead_frac_sampled = dynamic_batch_expectations(qs, ws, G, K)
        _, slot_acc, D, _, _, slot_dead = dynamic_numbers(qs, ws, G, K)
        assert abs(acc - slot_acc) < 1e-12
        assert abs(dead_frac - D ** (K + 1)) < 1e-12 and abs(slot_dead - D ** (K + 1)) < 1e-12
        if K == 0:
            assert abs(dead_frac_sampled - D) < 1e-12 and round(D, 3) == 0.621
        else:
            assert dead_frac_sampled < D - 0.04
    assert round(dynamic_batch_expectations(qs, ws, G, 1)[2], 3) == 0.567


# Leave-one-out against mean, and the reward's scale, under train.py's AdamW (betas 0.9, 0.95, no weight decay,
# lr 2e-4) with β > 0: a policy of one row of logits per position (T = 3, V = 5), B = 2 groups of G = 4, answers of
# 1-3 tokens, a fixed batch per step (sampling plays no part in the identities), k3 against a π_ref of other logits.
ADAM_G, ADAM_T, ADAM_V, ADAM_N, ADAM_STEPS, BETA = 4, 3, 5, 8, 8, 0.04


@functools.lru_cache(maxsize=None)
def adamw_setup():
    gen = torch.Generator().manual_seed(0)
    theta0 = torch.randn(ADAM_T, ADAM_V, generator=gen, dtype=F64)  # (T, V) the policy's logits at the start
    ref = torch.randn(ADAM_T, ADAM_V, generator=gen, dtype=F64)  # (T, V) π_ref's
    batches = []
    for _ in range(ADAM_STEPS):
        tokens = torch.randint(0, ADAM_V, (ADAM_N, ADAM_T), generator=gen)  # (N, T)
        lengths = torch.randint(1, ADAM_T + 1, (ADAM_N,), generator=gen)
        lengths[0] = ADAM_T  # every position is trained: every logit has a gradient
        rewards = torch.randint(0, 2, (ADAM_N,), generator=gen).to(F64)  # (N,)
        batches.append((tokens, torch.arange(ADAM_T)[None, :] < lengths[:, None], rewards))
    return theta0, ref, batches


@functools.lru_cache(maxsize=None)
def adamw_trajectory(method, beta, scale=1.0, clip=1.0, adam_eps=1e-8, adv_eps=1e-4):
    """(steps, T, V) the weights after each AdamW step, and the gradient norms before the clip (clip None: none;
    1.0 is train.py's clip_grad_norm_). Rewards times `scale`; advantages from group_advantages. Read-only."""
    theta0, ref, batches = adamw_setup()
    theta = torch.nn.Parameter(theta0.clone())
    opt = torch.optim.AdamW([theta], lr=2e-4, betas=(0.9, 0.95), weight_decay=0.0, eps=adam_eps)
    path, norms = [], []
    for tokens, mask, rewards in batches:
        logp = token_logprobs(theta.expand(ADAM_N, ADAM_T, ADAM_V), tokens)  # (N, T)
        ref_logp = token_logprobs(ref.expand(ADAM_N, ADAM_T, ADAM_V), tokens)  # (N, T)
        adv = group_advantages(scale * rewards, ADAM_G, method, eps=adv_eps)  # (N,)
        loss, _ = grpo_loss(logp, logp.detach(), ref_logp, adv, mask, beta=beta, kl="k3")
        opt.zero_grad()
        loss.backward()
        norms.append(theta.grad.norm().item())
        if clip is not None:
            torch.nn.utils.clip_grad_norm_([theta], clip)
        opt.step()
        path.append(theta.detach().clone())
    return torch.stack(path), norms


def apart(a, b):
    """Largest distance between two trajectories' weights (steps, T, V), over the first's largest distance travelled."""
    theta0 = adamw_setup()[0]
    return ((a - b).abs().max() / (a - theta0).abs().max()).item()


def test_loo_under_adamw_is_mean_at_a_smaller_beta_not_mean():
    """loo's advantages are G/(G-1) times mean's, the KL term is not: loss_loo(β) = G/(G-1)·loss_mean(β(G-1)/G), so
    under AdamW, whose step m̂/(√v̂ + eps) is free of a scale common to every step but for eps, loo at β follows mean
    at β(G-1)/G: here to 3e-6 of the distance travelled (< 1e-4 asserted: eps = 1e-8 against √v̂ >= 4e-4 is at most
    3e-5 of a step; with eps = 0 exactly), not mean at β (20% apart). Both runs' gradient norms stay below train.py's
    clip (1.0); a clip acting on one run and not the other breaks it. The first update's norm is the same for all
    three to 1e-4 (AdamW's first step is about lr·sign(g)): an update-norm ratio near 1 does not make runs alike."""
    G = ADAM_G
    loo, norms = adamw_trajectory("loo", BETA)
    same, norms_same = adamw_trajectory("mean", BETA * (G - 1) / G)
    other, _ = adamw_trajectory("mean", BETA)
    assert max(norms) < 1 and max(norms_same) < 1  # train.py's clip acts on neither
    assert apart(loo, same) < 1e-4 and apart(loo, other) > 0.1
    exact = apart(
        adamw_trajectory("loo", BETA, adam_eps=0.0)[0], adamw_trajectory("mean", BETA * (G - 1) / G, adam_eps=0.0)[0]
    )
    assert exact < 1e-12
    theta0 = adamw_setup()[0]
    first = [(path[0] - theta0).norm().item() for path in (loo, same, other)]
    assert max(first) / min(first) < 1 + 1e-4


def test_a_reward_scale_under_adamw_is_a_beta_scale_while_the_clip_treats_both_runs_alike():
    """Method mean, rewards times c at β: loss = c·loss(rewards, β/c), so under AdamW the run follows rewards at
    β/c, not at β, as long as train.py's grad-norm clip (1.0) acts on neither run or on both at every step:
        c = 3, no clip acts      follows β/c to < 1e-4 of the distance (AdamW's eps); β: over 10% apart
        c = 10, the clip acts on the scaled run at some steps only (norms 0.4-1.4)   over 1% apart; unclipped: < 1e-4
        c = 30 at β against c = 60 at 2β, the clip acts on both at every step        < 1e-4"""
    scaled, norms = adamw_trajectory("mean", BETA, 3.0)
    base, base_norms = adamw_trajectory("mean", BETA / 3)
    assert max(norms) < 1 and max(base_norms) < 1
    assert apart(scaled, base) < 1e-4 and apart(scaled, adamw_trajectory("mean", BETA)[0]) > 0.1
    # the clip on one run only
    scaled, norms = adamw_trajectory("mean", BETA, 10.0)
    base, base_norms = adamw_trajectory("mean", BETA / 10)
    assert min(norms) < 1 < max(norms) and max(base_norms) < 1
    assert apart(scaled, base) > 0.01
    unclipped = (adamw_trajectory("mean", BETA, 10.0, clip=None)[0], adamw_trajectory("mean", BETA / 10, clip=None)[0])
    assert apart(*unclipped) < 1e-4
    # the clip on both, at every step: both gradients become unit vectors of the same direction
    a, norms_a = adamw_trajectory("mean", BETA, 30.0)
    b, norms_b = adamw_trajectory("mean", 2 * BETA, 60.0)
    assert min(norms_a) > 1 and min(norms_b) > 1 and apart(a, b) < 1e-4


def test_std_erases_the_reward_scale_up_to_eps_and_needs_no_beta_change():
    """Method std: group_advantages(c·r) is group_advantages(r) with eps/c in place of eps, so the reward's scale is
    erased exactly at eps = 0 (at the default eps = 1e-4 up to eps/σ), and under AdamW rewards times 10 follow the
    unscaled run at the same β, clip or not (the same gradients)."""
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.2, 0.0, 0.0, 0.0], dtype=F64)  # (B*G,) G = 4
    for c in (0.1, 10.0, 1000.0):
        assert torch.allclose(
            group_advantages(c * r, 4, "std"), group_advantages(r, 4, "std", eps=1e-4 / c), atol=1e-14
        )
        assert torch.allclose(
            group_advantages(c * r, 4, "std", eps=0), group_advantages(r, 4, "std", eps=0), atol=1e-14
        )
    assert not torch.allclose(group_advantages(10 * r, 4, "std"), group_advantages(r, 4, "std"), atol=1e-5)
    pair = (adamw_trajectory("std", BETA, 10.0, adv_eps=0.0)[0], adamw_trajectory("std", BETA, adv_eps=0.0)[0])
    assert apart(*pair) < 1e-12


# The dead chance for a reward of several values: answer types k with probabilities P_k, reward values[k], right[k].


def dead_chance(values, probs, G):
    """P(dead group), (M,), for each of M type distributions probs (M, types): every group of G answers enumerated
    and judged by dead_groups on its rewards."""
    groups = torch.cartesian_prod(*[torch.arange(len(values))] * G)  # (types^G, G)
    dead = dead_groups(values[groups].reshape(-1), G).to(F64)  # (types^G,)
    return probs[:, groups].prod(-1) @ dead  # (M,)


def simplex(parts, steps=10):
    """(M, parts) every distribution over `parts` types in multiples of 1/steps."""
    counts = [c for c in itertools.product(range(steps + 1), repeat=parts) if sum(c) == steps]
    return torch.tensor(counts, dtype=F64) / steps


def test_the_dead_chance_is_below_the_0_1_formula_only_when_the_values_refine_right_and_wrong():
    """Σ_v P(v)^G is at most q^G + (1-q)^G (q = P(right)) when each reward value is paid only to right answers or
    only to wrong ones: the format bonus's 0, 0.1 (wrong), 1, 1.1 (right), every distribution in tenths, G = 2-5.
    A value paid to both can exceed it: a format-gated reward, 1 for a right well-formed answer and 0 for a right
    unformed one and for a wrong one, at P = (0.1, 0.5, 0.4), G = 4: 0.6562 where the formula gives 0.1552."""
    bonus, right = torch.tensor([0.0, 0.1, 1.0, 1.1], dtype=F64), torch.tensor([False, False, True, True])
    P = simplex(4)  # (286, 4)
    q = P[:, right].sum(1)  # (286,)
    for G in (2, 3, 4, 5):
        chance = dead_chance(bonus, P, G)
        assert torch.allclose(chance, (P**G).sum(1), atol=1e-15)  # Σ_v P(v)^G: four values, one type each
        assert (chance <= q**G + (1 - q) ** G + 1e-15).all()
    gated, right = torch.tensor([1.0, 0.0, 0.0], dtype=F64), torch.tensor([True, True, False])
    P = simplex(3)  # (66, 3) right well-formed, right unformed, wrong
    q = P[:, right].sum(1)
    for G in (2, 3, 4, 5):
        chance = dead_chance(gated, P, G)
        assert torch.allclose(chance, P[:, 0] ** G + (P[:, 1] + P[:, 2]) ** G, atol=1e-15)
        assert (chance > q**G + (1 - q) ** G + 0.1).any()
    example = torch.tensor([[0.1, 0.5, 0.4]], dtype=F64)
    assert round(dead_chance(gated, example, 4).item(), 4) == 0.6562 and round(0.6**4 + 0.4**4, 4) == 0.1552


# The README's statistics, through bench_variants.py's own functions.
TABLE_DISCORDANT = (116, 127, 115, 116, 140, 125, 155, 115, 140, 122, 121, 194)  # b + c of the variant table's 12 rows


def mcnemar_level(n, alpha=0.05):
    """The real level of bench_variants' McNemar test with n discordant pairs: P(p < alpha) when each pair goes
    either way with chance 1/2, every b = 0..n enumerated."""
    return sum(math.comb(n, b) for b in range(n + 1) if mcnemar_exact(b, n - b) < alpha) / 2**n


def test_twelve_rows_and_one_p_below_0_05_by_chance():
    """If no row differed from GRPO and the 12 tests were independent, one p < 0.05 or more would come by chance
    with probability 1 - 0.95^12 = 0.46 at the nominal level. McNemar's exact test is conservative: with n
    discordant pairs its real level is below 0.05 for every n up to 200 (0 for n <= 5, 0.021 at n = 10, 0.032-0.049
    at the table's 115-194), so with the table's counts the chance is 0.37."""
    assert round(1 - 0.95**12, 4) == 0.4596
    levels = [mcnemar_level(n) for n in range(201)]
    assert max(levels) < 0.05 and levels[:6] == [0.0] * 6 and round(levels[10], 3) == 0.021
    table = [mcnemar_level(n) for n in TABLE_DISCORDANT]
    assert 0.032 < min(table) and max(table) < 0.049
    assert round(1 - math.prod(1 - x for x in table), 2) == 0.37


def test_what_a_difference_of_two_evaluations_on_200_problems_resolves():
    """At accuracy 0.9 on 200 problems se = sqrt(p(1-p)/n) = 0.021. Two independent evaluations (other problems, or
    independent errors) differ beyond noise at 1.96·sqrt(2)·se = 0.059 (0.029 on 800). On the same problems, paired,
    only the D discordant problems carry information: about 1.96·sqrt(D)/200, 0.044 at D = 20 (10%; with McNemar's
    exact test and the paired bootstrap a step of 0.01 above, 0.05: b/c = 5/15 resolved, 6/14 not), and 0.059 at
    the 18% (D = 36) that two independent evaluations at 0.9 have, where pairing gains nothing."""
    se = math.sqrt(0.9 * 0.1 / 200)
    assert round(se, 3) == 0.021 and round(1.96 * math.sqrt(2) * se, 3) == 0.059
    assert round(1.96 * math.sqrt(2 * 0.9 * 0.1 / 800), 3) == 0.029
    assert abs(1.96 * math.sqrt(2 * 0.9 * 0.1 * 200) / 200 - 1.96 * math.sqrt(2) * se) < 1e-15  # D = 36: no gain
    assert round(1.96 * math.sqrt(20) / 200, 3) == 0.044
    assert mcnemar_exact(5, 15) < 0.05 < mcnemar_exact(6, 14)
    for b, resolved in ((5, True), (6, False)):  # D = 20 of 200: b problems right for one run only, 20 - b the other
        _, lo, _ = paired_bootstrap([[1] * (20 - b) + [-1] * b + [0] * 180])
        assert (lo > 0) == resolved


def test_eps_alone_does_not_make_a_dead_group_0_the_dead_group_rule_does(monkeypatch):
    """In floating point mean(0.1, 0.1, 0.1) != 0.1, so r - mean(r) = -1.4e-17 and σ = 1.7e-17. By the formula
    (r - mean(r))/(σ + eps) the group gets -1.4e-13 with eps = 1e-4 and -0.82 (-sqrt(2/3)) with eps = 0; where the
    float mean is exact (1, 1, 1) the formula is 0 with eps = 1e-4 and 0/0 = NaN with eps = 0. group_advantages
    without its dead-group rule gives those numbers; with it, exactly 0 for either eps (tests/test_advantage.py
    checks every method)."""
    inexact, exact = torch.full((3,), 0.1, dtype=F64), torch.ones(3, dtype=F64)
    dev, sigma = inexact - inexact.mean(), inexact.std()
    assert (dev != 0).all() and sigma > 0 and (exact - exact.mean() == 0).all()
    hand = {1e-4: dev / (sigma + 1e-4), 0.0: dev / sigma}
    assert round(hand[1e-4][0].item() * 1e13, 1) == -1.4 and abs(hand[0.0][0].item() + math.sqrt(2 / 3)) < 1e-12
    for eps in (1e-4, 0.0):
        assert torch.equal(group_advantages(inexact, 3, eps=eps), torch.zeros(3, dtype=F64))
        assert torch.equal(group_advantages(exact, 3, eps=eps), torch.zeros(3, dtype=F64))
    # group_advantages without its dead-group rule (it looks dead_groups up in advantage.py): what eps alone does
    monkeypatch.setattr("advantage.dead_groups", lambda rewards, G: torch.zeros(rewards.numel() // G, dtype=torch.bool))
    for eps in (1e-4, 0.0):
        assert torch.equal(group_advantages(inexact, 3, eps=eps), hand[eps])
    assert torch.equal(group_advantages(exact, 3, eps=1e-4), torch.zeros(3, dtype=F64))
    assert torch.isnan(group_advantages(exact, 3, eps=0.0)).all()


# ----------------------------------------------------------------------------- issue 38's general cases


def dead_and_live(agg, beta, lengths, dead, G=2, seed=0):
    """The gradient (N, T) of grpo_loss on groups of G answers with these lengths, the groups in `dead` given one
    reward to all their answers, and the live groups' gradient when the loss sees them alone."""
    torch.manual_seed(seed)
    N, T = len(lengths), max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (N, T)
    logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
    ref = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)
    rewards = torch.rand(N, dtype=F64)
    for b in dead:
        rewards[b * G : (b + 1) * G] = 1.0
    adv = group_advantages(rewards, G)  # (N,)
    loss, _ = grpo_loss(logp, logp.detach(), ref, adv, mask, beta=beta, agg=agg, max_len=T)
    (grad,) = torch.autograd.grad(loss, logp)
    live = torch.tensor([i // G not in dead for i in range(N)])  # (N,)
    alone, _ = grpo_loss(
        logp[live], logp[live].detach(), ref[live], adv[live], mask[live], beta=beta, agg=agg, max_len=T
    )
    (grad_alone,) = torch.autograd.grad(alone, logp)
    return grad, grad_alone, live, mask


@pytest.mark.parametrize("agg", AGGS)
def test_a_dead_group_teaches_nothing_only_at_beta_0_and_dilutes_the_live_ones_at_every_beta(agg):
    """A dead group (all rewards equal, advantage 0) gets no policy gradient. At β = 0 its answers get no gradient
    at all; at β > 0 its tokens still get the KL term's. Counted in the denominators, it shrinks the live groups'
    policy gradient by the live share of the step: of the answers under "grpo" and "dr_grpo", of the tokens under
    "dapo" (half the groups dead: half the gradient, when their answers are as long). Every dead share of 4 groups."""
    lengths = [3, 1, 2, 4, 4, 2, 1, 3]
    for dead in ([0], [1, 2], [0, 1, 3]):
        for beta in (0.0, 0.04):
            grad, grad_alone, live, mask = dead_and_live(agg, beta, lengths, dead)
            dead_rows = ~live
            if beta == 0:
                assert grad[dead_rows].abs().max() == 0
                share = live.sum().item() / len(live) if agg != "dapo" else mask[live].sum().item() / mask.sum().item()
                assert torch.allclose(grad, share * grad_alone, atol=1e-15, rtol=0)
            else:
                assert grad[dead_rows][mask[dead_rows]].abs().min() > 0  # the KL term's, on every token
    _, _, live, mask = dead_and_live(agg, 0.0, [2] * 8, [0, 1])
    assert live.sum() / len(live) == mask[live].sum() / mask.sum() == 0.5


def test_the_cispo_row_differs_from_minimax_m1_by_its_normaliser():
    """MiniMax-M1 divides CISPO's sum by the step's token count (agg="dapo"); the variant table's CISPO row keeps the
    per-answer mean ("grpo"). Both gradients, policy and KL terms alike, differ token by token by the factor
    Σ_j |o_j| / (N·|o_i|): equal only where an answer is as long as the step's mean answer. Lengths 1-4, N = 4."""
    for lengths in itertools.product(range(1, 5), repeat=4):
        lengths = torch.tensor(lengths)
        N, T = len(lengths), int(lengths.max())
        mask = torch.arange(T)[None, :] < lengths[:, None]  # (N, T)
        torch.manual_seed(int(lengths @ torch.tensor([1, 5, 25, 125])))
        logp = (torch.randn(N, T, dtype=F64) - 1).requires_grad_()
        old = logp.detach() + 0.2 * torch.randn(N, T, dtype=F64)
        ref = logp.detach() + 0.3 * torch.randn(N, T, dtype=F64)
        adv = torch.randn(N, dtype=F64)
        grads = {}
        for agg in ("grpo", "dapo"):
            loss, _ = grpo_loss(logp, old, ref, adv, mask, loss="cispo", clip_eps_high=0.2, agg=agg)
            grads[agg] = torch.autograd.grad(loss, logp)[0]
        factor = (lengths.sum() / (N * lengths.to(F64)))[:, None].expand(N, T)  # (N, T)
        assert torch.allclose(grads["grpo"][mask], (factor * grads["dapo"])[mask], atol=1e-14, rtol=1e-12)


def test_the_overlong_penalty_on_a_0_1_reward_weighs_twice_what_it_does_on_dapos_plus_minus_1():
    """DAPO adds its penalty (0 down to -1) to a reward of ±1; here the verifier pays 0 or 1, so against the
    reward's range the penalty weighs twice as much: a right answer that reaches the limit scores 0, as a short wrong
    one does, where under ±1 it scores midway between right and wrong. Every length and cache up to 16 tokens."""
    from reward import overlong_penalty

    for max_len in range(2, 17):
        for cache in range(1, max_len):
            lengths = torch.arange(1, max_len + 1)
            pen = overlong_penalty(lengths, max_len, cache).to(F64)  # (max_len,)
            for right, wrong in ((1.0, 0.0), (1.0, -1.0)):
                share = -pen / (right - wrong)  # the penalty against the reward's range
                assert torch.allclose(share, -pen / (2.0 if wrong else 1.0))
                assert (right + pen[-1]).item() == (0.0 if wrong else wrong)  # right at the limit: 1 - 1
            assert (pen <= 0).all() and pen[-1] == -1


def paired_rows_simulation(paired, trials=2000, rows=12, n=600, a=0.5, b=0.75, seed=0, alpha=0.05):
    """The share of trials in which some of `rows` McNemar tests (bench_variants.mcnemar_exact) gives p < alpha
    when no row differs from GRPO: each of n problems has a chance p ~ Beta(a, b) (mean 0.4, about 160 discordant
    pairs of 600, as in the variant table), and every run of every row is an independent draw with that chance.
    paired: all rows compared with one GRPO evaluation, as the table does; else each row with one of its own.
    Returns the share and the mean number of discordant pairs."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # Beta draws from the global stream
    chance = torch.distributions.Beta(torch.tensor(float(a)), torch.tensor(float(b))).sample((trials, 1, n))
    grpo = torch.rand(trials, 1 if paired else rows, n, generator=g) < chance  # (trials, 1 or rows, n)
    row = torch.rand(trials, rows, n, generator=g) < chance  # (trials, rows, n)
    only_row = (row & ~grpo).sum(-1)  # (trials, rows) b
    only_grpo = (~row & grpo).sum(-1)  # c
    total = only_row + only_grpo  # (trials, rows)
    crit = torch.full((n + 1,), -1)  # the largest min(b, c) that rejects, for each number of discordant pairs
    for t in total.unique().tolist():
        lo, hi = -1, t // 2  # p grows with min(b, c): bisect for the last k with p < alpha
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if mcnemar_exact(mid, t - mid) < alpha else (lo, mid - 1)
        crit[t] = lo
    reject = torch.minimum(only_row, only_grpo) <= crit[total]  # (trials, rows)
    return reject.any(1).double().mean().item(), total.double().mean().item()


def test_twelve_rows_paired_with_one_grpo_evaluation_give_a_chance_p_less_often_than_independent_rows():
    """The table's 12 rows are all compared with the same GRPO evaluation, so their tests depend on each other
    (positively: a GRPO evaluation that was lucky on some problems makes every row look worse there). With no true
    difference, some p < 0.05 then comes about 27% of the time, against about 41% for 12 independent comparisons in
    the same simulation (37% with the table's own counts: the test above), below 1 - 0.95^12 = 46% either way."""
    paired, discordant = paired_rows_simulation(paired=True)
    independent, _ = paired_rows_simulation(paired=False)
    assert 130 < discordant < 190  # the table's 115-194
    assert round(paired, 2) == 0.27 and round(independent, 2) == 0.41, (paired, independent)
    assert paired < independent - 0.05 and independent < 1 - 0.95**12


TWO_TOKENS = torch.tensor(list(itertools.product(range(2), repeat=2)))  # (4, 2) the answers "aa", "ab", "ba", "bb"


def two_token_answer_logprobs(theta):
    """(4, 2) token log-probs of the four two-token answers: theta (6,) = first-token logits (2,), then the
    second token's logits (2, 2) after each first token."""
    logits = torch.stack([theta[:2].expand(4, 2), theta[2:].view(2, 2)[TWO_TOKENS[:, 0]]], dim=1)  # (4, 2, V=2)
    return token_logprobs(logits, TWO_TOKENS)  # (4, 2)


def sampler_gap_gradient(theta, gap, rewards, weigh):
    """The expected gradient (6,) of grpo_loss (μ = 1, β = 0, advantage = reward, agg="dr_grpo": a constant weight)
    over answers drawn from the sampler, softmax(theta + gap), with tis_weights per token ("token"), the product
    of an answer's ratios on each of its tokens ("answer"), none ("none"), or drawn from π_old itself ("target")."""
    theta = theta.clone().requires_grad_()
    logp = two_token_answer_logprobs(theta)  # (4, 2)
    old = logp.detach()
    sampler = two_token_answer_logprobs(theta.detach() + gap)  # (4, 2)
    weights = {
        "token": tis_weights(old, sampler, 1e9),
        "answer": tis_weights(old.sum(1, keepdim=True), sampler.sum(1, keepdim=True), 1e9).expand(4, 2),
        "none": None,
        "target": None,
    }
    prob = (old if weigh == "target" else sampler).sum(1).exp()  # (4,) the chance of each answer
    total = 0.0
    for i in range(4):
        w = None if weights[weigh] is None else weights[weigh][i : i + 1]
        ones = torch.ones(1, 2, dtype=torch.bool)
        loss, _ = grpo_loss(logp[i : i + 1], old[i : i + 1], None, rewards[i : i + 1], ones, beta=0.0, weight=w, **DR)
        total = total + prob[i] * loss
    return torch.autograd.grad(total, theta)[0]


DR = dict(agg="dr_grpo", max_len=2)


def test_tis_weights_correct_one_token_answers_exactly_and_longer_ones_only_by_the_whole_answers_ratio():
    """grpo.tis_weights, min(π_old/π_sampler, C) per token, corrects the sampler's gap exactly for one-token answers
    (there the token's ratio is the answer's). Over two-token answers the prefix and the rest of the answer came
    from the sampler too: the product of the ratios over the whole answer corrects exactly, per-token weights do not,
    and their error may be smaller or larger than no correction at all (0.12 to 1.08 times it in these 8 examples)."""
    torch.manual_seed(0)
    ratios = []
    for _ in range(8):
        theta, rewards, gap = torch.randn(6, dtype=F64), torch.randn(4, dtype=F64), 0.3 * torch.randn(6, dtype=F64)
        g = {weigh: sampler_gap_gradient(theta, gap, rewards, weigh) for weigh in ("target", "none", "token", "answer")}
        assert torch.allclose(g["answer"], g["target"], atol=1e-14)
        assert (g["token"] - g["target"]).norm() > 1e-4
        ratios.append(((g["token"] - g["target"]).norm() / (g["none"] - g["target"]).norm()).item())
    assert round(min(ratios), 2) == 0.12 and round(max(ratios), 2) == 1.08, ratios
    # one-token answers: V = 3 tokens, the token's ratio is the answer's
    theta, gap, rewards = torch.tensor([0.5, -0.2, 0.1], dtype=F64), torch.tensor([0.3, 0.0, -0.4], dtype=F64), R[:3]
    expected = {}
    for weigh in ("target", "token"):
        s = theta.clone().requires_grad_()
        logp = token_logprobs(s.expand(3, 1, 3), torch.arange(3)[:, None])  # (3, 1) each answer one token
        sampler = token_logprobs((theta + gap).expand(3, 1, 3), torch.arange(3)[:, None])  # (3, 1)
        prob = (logp.detach() if weigh == "target" else sampler).exp()[:, 0]  # (3,)
        w = None if weigh == "target" else tis_weights(logp.detach(), sampler, 1e9)
        total = 0.0
        for i in range(3):
            wi = None if w is None else w[i : i + 1]
            ones = torch.ones(1, 1, dtype=torch.bool)
            loss, _ = grpo_loss(
                logp[i : i + 1], logp[i : i + 1].detach(), None, rewards[i : i + 1], ones, beta=0.0, weight=wi
            )
            total = total + prob[i] * loss
        expected[weigh] = torch.autograd.grad(total, s)[0]
    assert torch.allclose(expected["token"], expected["target"], atol=1e-15)


def test_the_readmes_variant_table_has_the_most_dead_groups_in_the_cispo_row_and_beta_0_next():
    """The README's sentence on dead groups, read against its own table's `dead` column: β = 0 has more than GRPO,
    and CISPO, not β = 0, the most."""
    import os

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")) as f:
        lines = [line for line in f if line.startswith("| ") and line.count("|") == 10]
    header = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    rows = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] != "---" and not cells[0].startswith("--"):
            rows[cells[0]] = float(cells[header.index("dead")])
    assert len(rows) == 13 and max(rows, key=rows.get) == "CISPO, μ = 4", rows
    ranked = sorted(rows, key=rows.get, reverse=True)
    assert ranked[1] == "β = 0" and rows["β = 0"] > rows["GRPO"]
