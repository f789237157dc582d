"""
advantage.py: one advantage per completion, computed inside its group of G answers: the group is the baseline.

    std       A_i = (r_i - mean(r)) / (σ(r) + eps)     GRPO (Shao et al. 2024, DeepSeekMath), the default
    mean      A_i = r_i - mean(r)
    loo       A_i = r_i - mean_{j≠i} r_j               leave-one-out (Kool et al. 2019) = G/(G-1) · (r_i - mean(r))
    dr_grpo   A_i = r_i - mean(r)                      Dr. GRPO (Liu et al. 2025): this + agg="dr_grpo" + beta=0
    none      A_i = r_i                                no baseline, for comparison only

Each is a function named in METHODS. Where this departs from DeepSeekMath: the methods but std; its formula has no
eps and does not say which σ (group_advantages); a dead group's exact 0 is ours (_zero_if_dead). The notes at the
end: why a baseline, what dividing by σ does, how often a group is dead. `rewards` (B*G,), row b*G + g, is read only.
"""

import torch


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
    """Advantages (B*G,) from rewards (B*G,) by METHODS[method] (the module docstring). eps is added to σ under "std"
    only (eps=0 is allowed). unbiased: σ divides by G-1 (as torch.std, TRL and verl), else by G (the population σ)."""
    if method not in METHODS:
        raise ValueError(f"unknown advantage method '{method}'; choose one of {', '.join(METHODS)}")
    return METHODS[method](rewards, G, eps, unbiased)  # (B*G,)


def std_advantages(rewards, G, eps, unbiased):
    """GRPO's advantages, within each group (the formula beside its line); 0 in a dead group."""
    r = _groups(rewards, G)  # (B, G)
    sigma = r.std(dim=1, keepdim=True, unbiased=unbiased)  # (B, 1)
    adv = (r - r.mean(dim=1, keepdim=True)) / (sigma + eps)  # (B, G) A_i = (r_i - mean(r)) / (σ + eps)
    return _zero_if_dead(adv, rewards, G)  # (B*G,)


def _zero_if_dead(adv, rewards, G):
    """adv (B, G) as (B*G,), exactly 0 in each dead group (r - mean(r) can be ±1e-17 in floats, 0/0 at eps=0)."""
    dead = dead_groups(rewards, G)[:, None]  # (B, 1)
    return torch.where(dead, torch.zeros_like(adv), adv).reshape(-1)  # (B*G,)


def mean_advantages(rewards, G, eps, unbiased):
    """Within each group: A_i = r_i - mean(r) (Dr. GRPO's too); 0 in a dead group. eps and unbiased are unused."""
    r = _groups(rewards, G)  # (B, G)
    return _zero_if_dead(r - r.mean(dim=1, keepdim=True), rewards, G)  # (B*G,)


def loo_advantages(rewards, G, eps, unbiased):
    """Leave-one-out, within each group: A_i = r_i - mean_{j≠i} r_j; 0 in a dead group. eps and unbiased unused."""
    r = _groups(rewards, G)  # (B, G)
    others = (r.sum(dim=1, keepdim=True) - r) / (G - 1)  # (B, G) mean of the other G-1
    return _zero_if_dead(r - others, rewards, G)  # (B*G,)


def no_baseline(rewards, G, eps, unbiased):
    """A_i = r_i, the raw reward: no group needed (G is unused), and a dead group keeps its rewards."""
    return _as_float(rewards).clone()  # (B*G,)


METHODS = {  # --adv: each name's fn(rewards (B*G,), G, eps, unbiased) -> (B*G,)
    "mean": mean_advantages,
    "std": std_advantages,
    "loo": loo_advantages,
    "dr_grpo": mean_advantages,
    "none": no_baseline,
}


def group_stats(rewards, G, unbiased=True):
    """Numbers for logging, as detached 0-dim tensors (call .item() when you want to sync).

    dead_frac:   fraction of groups whose rewards are all equal (their advantages are 0); for groups as
                 sampled its expectation is the mean of the prompts' chances (the notes at the end); train.py
                 passes the trained batch, which --dynamic K has refilled (then dead_frac_sampled is the sampled one)
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


# ----------------------------------------------------------------------------- notes
# The facts behind the methods above, for a second reading; the tests named prove them with numbers.
#
# Which σ. The default unbiased σ (divide by G-1) is torch.std's, TRL's and verl's; unbiased=False gives the population
# σ (divide by G) of the theory's worked example: [1,1,1,1,1,1,1,0.9] gives +0.35 and -2.47 by default, +0.38 and
# -2.65 with the population σ (eps ≈ 0; the default eps=1e-4 makes it -2.64).
#
# Why a baseline (tests/test_advantage.py, tests/test_theory.py). The expected gradient is the expectation, over
# every G-tuple of answers, of the loss gradient (μ = 1, beta = 0), compared with ∇J for J = E[r]. The baseline
# theorem: E[(r(o) - b)·∇log π(o)] = ∇J if b does not depend on the answer o. loo's baseline is the other answers'
# rewards, independent of o_i; mean's contains r_i itself, and mean = (1 - 1/G)·loo answer by answer, so mean's
# expected gradient is (1 - 1/G) times loo's under every aggregation. The loss multiplies (r_i - b)·∇log π(o_i) by
# its normaliser (grpo.py), so how loo compares with ∇J depends on it:
# - one-token answers, answers of one length, or agg="dr_grpo": a constant c, and loo (like none) gives exactly
#   c·∇J, mean (1 - 1/G)·c·∇J. The theory's toy, one-token answers with logits (0.3, 0.1, -0.2) and rewards
#   (6, 5, 4): ∇J = (0.3454, -0.0548, -0.2907), and mean gives (1 - 1/G)·∇J;
# - the default agg="grpo" (1/|o_i|) or agg="dapo", with answers of different lengths: in general neither is a
#   multiple of ∇J (grpo.py's notes say how).
# The mean is close to the best constant baseline: on the same toy with one answer per step, the baseline that
# minimises the total variance is b* = E[r‖∇log π‖²]/E[‖∇log π‖²] = 5.0054 (variance 0.2200); E[r] = 5.1622 gives
# 0.2361, and no baseline 16.5922. With no baseline and rewards >= 0 (as here) nothing is pushed down: an answer of
# reward 0 gets no policy gradient.
#
# A gradient's scale and AdamW (tests/test_advantage.py, tests/test_theory.py). loo's policy gradient is G/(G-1)
# times mean's on every batch (1.14× at G = 8), and rewards × c multiply it by c under mean, loo, dr_grpo and none.
# Plain SGD takes that as a larger step. AdamW (train.py) divides each gradient by its own running scale, so a
# constant factor on the WHOLE loss leaves its steps unchanged to about 1e-4 relative (its eps), as long as the
# gradient-norm clip (train.py, at 1) acts on both runs or on neither. At beta = 0 the factor is on the whole loss,
# and loo is mean. With beta > 0 the KL term is not scaled: under AdamW loo at β is mean at β·(G-1)/G, and rewards
# × c (mean, loo, dr_grpo, none) are the rewards at β/c; an update's norm cannot tell these apart, the trajectories
# can. Under std the scale is erased group by group: c·r gives r's advantages at eps/c, exactly so at eps = 0.
#
# Dividing by σ is outside the baseline theorem (σ depends on every answer, r_i included):
# - It makes A invariant to r -> a·r + b (a > 0), group by group: σ changes how one group weighs against another.
#   With partial credit 0.2 for an off-by-one answer, the group [0.2, 0, ..., 0] (G = 8) gives the one partly right
#   answer +2.47, as much as the one right answer of [1, 0, ..., 0] gets; mean gives 0.175 and 0.875. Likewise
#   [1,1,1,1,1,1,1,0.9] gives the 0.9 answer -2.47, what the one right answer of a group of wrong ones gets with the
#   sign flipped. This is why Dr. GRPO drops σ. eps matters only where σ is about as small as eps itself: it cuts
#   the advantages of (0.5, 0.5, 0.5, 0.4999) (σ = 5e-5) to a third; against a 0.1 gap it does nothing. It does not
#   make a dead group's 0: r - mean(r) can be ±1e-17 in floating point, which eps alone turns into ±1e-13; the
#   dead-group rule makes it exactly 0.
# - Its expected gradient is in general not a multiple of ∇J if rewards take more than two values
#   (tests/test_theory.py has one such case, under every aggregation). With 0/1 rewards and a constant normaliser
#   it is parallel to ∇J, by a factor that can depend on the prompt's success rate, a per-prompt learning rate (it
#   does for G = 4; for G = 2 and 3 it happens not to).
#
# How often a group is dead (tests/test_advantage.py, tests/test_theory.py). For one prompt with success rate q and
# 0/1 rewards: q^G + (1-q)^G (G = 8, q = 0.9: 0.4305). With a reward of several values v: Σ_v P(v)^G, which is at
# most q^G + (1-q)^G when each value is paid only to right answers or only to wrong ones, as the format bonus's
# four values are (P = 0.05, 0.15, 0.1, 0.7 for 0, 0.1, 1, 1.1, G = 8: 0.0576; the formula at q = 0.8: 0.1678); a
# value paid to both right and wrong answers can make it larger (1 for a right, well-formed answer, 0 for the rest,
# with P = 0.1, 0.5, 0.4 for right well-formed, right otherwise, wrong, G = 4: 0.66 against 0.16). In a step of
# prompts with different chances, the expected dead fraction of the groups as sampled is the mean of the prompts'
# chances, which for 0/1 rewards is at least the formula at the mean success rate (it is convex): at mean reward 0.92
# and G = 8 the formula gives 0.51, and any expected fraction from 0.51 up to 1 is possible (1 when every prompt is
# always solved or always failed).
