"""
advantage.py: one advantage per completion, computed inside its group of G answers.

GRPO has no critic. For each prompt it samples G completions with rewards r_1..r_G and uses the
group itself as the baseline. Every completion's tokens share its advantage.

    mean      A_i = r_i - mean(r)
    std       A_i = (r_i - mean(r)) / (σ(r) + eps)     GRPO, Shao et al. 2024 (DeepSeekMath)
    loo       A_i = r_i - mean_{j≠i} r_j               leave-one-out baseline (Kool et al. 2019)
              = G/(G-1) · (r_i - mean(r))
    dr_grpo   A_i = r_i - mean(r)                      Dr. GRPO, Liu et al. 2025: mean's numbers, no σ;
                                                       the method is this + grpo.py's agg="dr_grpo" + beta=0
    none      A_i = r_i                                no baseline, for comparison only; with rewards >= 0 (as
                                                       here) nothing is pushed down: reward 0 gets no policy gradient
σ is the unbiased σ (divide by G-1) by default, as torch.std, TRL and verl; unbiased=False gives the population σ
(divide by G) of the seed's worked example. [1,1,1,1,1,1,1,0.9] gives +0.35 and -2.47 with the default, +0.38 and
-2.65 with the population σ (eps ≈ 0; the default eps=1e-4 makes it -2.64).

RLOO (Ahmadian et al. 2024) is loo in a REINFORCE loss over the summed log-probs of each answer: here loo +
agg="dr_grpo" (a constant normaliser) + μ = 1. Ahmadian et al. put the KL into the reward, which nanogrpo does not;
beta=0 gives the plain estimator. Under the default agg="grpo", loo is GRPO with a leave-one-out baseline.
loo's gradient is G/(G-1) times mean's on every batch (1.14× at G = 8). Plain SGD would take that as a larger step;
AdamW (train.py's optimizer) divides each gradient by its own running scale, so one step moves the weights by the
same amount to about 1e-4 relative. The same holds for multiplying every reward by a constant.

Expected gradients: the expectation, over every G-tuple of answers, of the loss gradient (μ = 1, beta = 0), against
∇J for J = E[r]. The baseline theorem: E[(r(o) - b)·∇log π(o)] = ∇J if b does not depend on the answer o. loo's
baseline is the other answers' rewards, independent of o_i; mean's contains r_i itself, and mean = (1 - 1/G)·loo
answer by answer, so mean's expected gradient is (1 - 1/G) times loo's under every aggregation (a scale, which AdamW
nearly removes, as above). The loss multiplies (r_i - b)·∇log π(o_i) by its normaliser (grpo.py), so how loo's
compares with ∇J depends on it:
- one-token answers, answers of one length, or agg="dr_grpo": a constant c, and loo (like none) gives exactly c·∇J,
  mean (1 - 1/G)·c·∇J. The seed's toy, one-token answers with logits (0.3, 0.1, -0.2) and rewards (6, 5, 4):
  ∇J = (0.3454, -0.0548, -0.2907), and mean gives (1 - 1/G)·∇J;
- the default agg="grpo" (1/|o_i|) or agg="dapo", with answers of different lengths: in general neither is a
  multiple of ∇J (grpo.py says how).
The mean is close to the best constant baseline: on the same toy with one answer per step, the baseline that
minimises the total variance is b* = E[r‖∇log π‖²]/E[‖∇log π‖²] = 5.0054 (variance 0.2200); E[r] =
5.1622 gives 0.2361, and no baseline 16.5922. Tests: tests/test_advantage.py, tests/test_theory.py (lengths 1-3).

Dividing by σ is outside the baseline theorem (σ depends on every answer, r_i included):
- It makes A invariant to r -> a·r + b (a > 0), so the reward's scale is erased, group by group (a scale common
  to the step AdamW nearly erases anyway; σ changes how one group weighs against another). With partial credit
  0.2 for an off-by-one answer, the group [0.2, 0, ..., 0] (G = 8) gives the one partly right answer +2.47, as
  much as the one right answer of [1, 0, ..., 0] gets; mean gives 0.175 and 0.875. Likewise [1,1,1,1,1,1,1,0.9]
  gives the 0.9 answer -2.47, what the one right answer of a group of wrong ones gets with the sign flipped. This
  is why Dr. GRPO drops σ. eps matters only where σ is about as small as eps itself: it turns 0/0 into 0, and it
  cuts the advantages of (0.5, 0.5, 0.5, 0.4999) (σ = 5e-5) to a third; against a 0.1 gap it does nothing.
- Its expected gradient is in general not a multiple of ∇J if rewards take more than two values (tests/test_theory.py
  has one such case, under every aggregation). With 0/1 rewards and a constant normaliser it is parallel to ∇J, by
  a factor that can depend on the prompt's success rate, a per-prompt learning rate (it does for G = 4; for G = 2
  and 3 it happens not to).

A "dead" group (all rewards equal) gets advantage exactly 0 under every method that needs a group, never NaN,
even with eps=0. For one prompt with success rate q and 0/1 rewards a group is dead with probability
q^G + (1-q)^G (G = 8, q = 0.9: 0.4305); with a reward of several values v (the format bonus makes four) it is
Σ_v P(v)^G, never above it (P = 0.05, 0.15, 0.1, 0.7 for 0, 0.1, 1, 1.1, G = 8: 0.0576; the formula, q = 0.8: 0.1678).
In a step of prompts with different chances the expected dead fraction is the mean of the prompts' chances, which
for 0/1 rewards is at least the formula at the mean success rate (the function is convex): at mean reward 0.92
and G = 8 the formula gives 0.51, and any expected fraction from 0.51 up to 1 is possible (1 when every prompt is
always solved or always failed). group_stats() logs the fraction. What a dead group still does to the loss
(beta > 0, denominators) is in grpo.py.

Where this departs from DeepSeekMath: methods other than std are options it does not have; its formula has no eps and
does not say which σ (the choice above); a dead group's exact 0 is ours.

Pure functions; `rewards` is never written to. Rewards are (B*G,), groups contiguous: row b*G + g is answer g of b.
"""

import torch

METHODS = ("mean", "std", "loo", "dr_grpo", "none")


def _groups(rewards, G):
    """Check the shapes and return rewards viewed as (B, G) floats (a new tensor if cast)."""
    if G < 2:
        raise ValueError(f"group size G must be at least 2 to compare answers, got G={G}")
    if rewards.numel() % G != 0:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of G={G}")
    return _as_float(rewards).view(-1, G)  # (B, G)


def _as_float(rewards):
    """Detached rewards as a float tensor (at least float32; float64 stays float64)."""
    if rewards.dim() != 1:
        raise ValueError(f"rewards must have shape (B*G,), got {tuple(rewards.shape)}")
    return rewards.detach().to(torch.promote_types(rewards.dtype, torch.float32))


def dead_groups(rewards, G):
    """(B,) bool: True for each group whose G rewards are all equal (advantage 0 under every method but "none")."""
    r = _groups(rewards, G)  # (B, G)
    return (r == r[:, :1]).all(dim=1)  # (B,)


def group_advantages(rewards, G, method="std", eps=1e-4, unbiased=True):
    """Advantages (B*G,) from rewards (B*G,), groups contiguous. See the module docstring.

    eps is added to σ for method="std" only (eps=0 is allowed). unbiased selects σ's
    divisor: G-1 (default, like torch.std) or G (population σ, the seed's example).
    """
    if method not in METHODS:
        raise ValueError(f"unknown advantage method '{method}'; choose one of {', '.join(METHODS)}")
    if method == "none":  # needs no group: the raw reward, no baseline
        return _as_float(rewards).clone()  # A_i = r_i
    r = _groups(rewards, G)  # (B, G)
    mu = r.mean(dim=1, keepdim=True)  # (B, 1)
    if method in ("mean", "dr_grpo"):
        adv = r - mu  # A_i = r_i - mean(r)
    elif method == "std":
        sigma = r.std(dim=1, keepdim=True, unbiased=unbiased)  # (B, 1)
        adv = (r - mu) / (sigma + eps)  # A_i = (r_i - mean(r)) / (σ + eps)
    else:  # loo
        others = (r.sum(dim=1, keepdim=True) - r) / (G - 1)  # (B, G) mean of the other G-1
        adv = r - others  # A_i = r_i - mean_{j≠i} r_j
    # dead groups: exactly 0 (r - mean(r) can be ±1e-17 in floating point, and 0/0 with eps=0)
    dead = dead_groups(rewards, G)[:, None]  # (B, 1)
    adv = torch.where(dead, torch.zeros_like(adv), adv)  # (B, G)
    return adv.reshape(-1)  # (B*G,)


def group_stats(rewards, G, unbiased=True):
    """Numbers for logging, as detached 0-dim tensors (call .item() when you want to sync).

    dead_frac:   fraction of groups whose rewards are all equal (their advantages are 0); its
                 expectation is the mean of the prompts' chances (q^G + (1-q)^G for 0/1 rewards),
                 not that formula at the mean reward (module docstring)
    reward_mean: mean reward over the batch
    reward_std:  std of all rewards in the batch (population)
    group_std:   mean over groups of the within-group σ that method "std" divides by (unbiased
                 selects the same divisor as in group_advantages; pass the same value)
    """
    r = _groups(rewards, G)  # (B, G)
    return {
        "dead_frac": dead_groups(rewards, G).to(r.dtype).mean(),
        "reward_mean": r.mean(),
        "reward_std": r.std(unbiased=False),
        "group_std": r.std(dim=1, unbiased=unbiased).mean(),
    }
