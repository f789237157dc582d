"""Exact enumeration beyond one-token answers, through the project's own functions (token_logprobs,
group_advantages, grpo_loss, kl_penalty, aggregate) and autograd; masks come from lengths, never from token ids.

1. Answers of lengths 1, 2, 3: which (advantage, aggregation) pairs give ∇J or a constant multiple
   of it, and how far the others are (the example and its numbers: the docstrings below).
2. Answers of one length: every aggregation is a constant, and the baseline theorem holds again.
3. Two-token answers: the per-token KL estimators against the sequence-level KL gradients.
4. Lengths decided by EOS (1 to 3 tokens): the KL facts under each aggregation, Σ_t k1_t as a reward, and
   importance weights for answers sampled from π_old.
"""

import functools
import itertools

import pytest
import torch

from advantage import group_advantages
from grpo import AGGS, aggregate, grpo_loss, kl_penalty, token_logprobs

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
