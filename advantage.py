"""
advantage.py: one advantage per completion, computed inside its group of G answers.

GRPO has no critic. For each prompt it samples G completions with rewards r_1..r_G and
uses the group itself as the baseline (a baseline may depend on the prompt, never on the
answer it is subtracted from: the baseline theorem). Every completion's tokens share its advantage.

    mean      A_i = r_i - mean(r)                      expected gradient (1 - 1/G)·∇J
    std       A_i = (r_i - mean(r)) / (std(r) + eps)   GRPO, Shao et al. 2024 (DeepSeekMath)
    loo       A_i = r_i - mean_{j≠i} r_j               RLOO, Kool et al. 2019, Ahmadian et al. 2024;
              = G/(G-1) · (r_i - mean(r))              expected gradient exactly ∇J
    dr_grpo   A_i = r_i - mean(r)                      Dr. GRPO, Liu et al. 2025: no σ; its other
                                                       half is grpo.py's agg="dr_grpo"
    none      A_i = r_i                                no baseline, for comparison only

Where this departs from DeepSeekMath or needs a choice:
- σ: DeepSeekMath does not say which. The default is the unbiased σ (divide by G-1), as
  torch.std, TRL and verl; unbiased=False gives the population σ (divide by G) of the
  seed's worked example, where [1,1,1,1,1,1,1,0.9] gives +0.38 and -2.65 (with eps ≈ 0;
  the default eps=1e-4 makes it -2.64).
- Dividing by σ is outside the baseline theorem: it makes A invariant to r -> a·r + b
  (a > 0), so a 0.1 reward gap in a group of near-equal rewards gets the same weight as
  the one correct answer in a group of wrong ones (tests/test_advantage.py). eps only stops
  0/0; it does not stop that amplification. This is why Dr. GRPO drops σ.
- A "dead" group (all rewards equal) gets advantage exactly 0 under every method that
  needs a group, never NaN, even with eps=0. With binary rewards and success rate q a
  group is dead with probability q^G + (1-q)^G (G=8, q=0.9: 43%): it costs G samples and
  teaches nothing. group_stats() reports the fraction for logging.

Pure functions: tensors in, tensors out; `rewards` is never written to.
Rewards are (B*G,) with groups contiguous: row b*G + g is completion g of prompt b.
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
    """(B,) bool: True for each group whose G rewards are all equal (no learning signal)."""
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
        return _as_float(rewards).clone()                       # A_i = r_i
    r = _groups(rewards, G)                    # (B, G)
    mu = r.mean(dim=1, keepdim=True)           # (B, 1)
    if method in ("mean", "dr_grpo"):
        adv = r - mu                                            # A_i = r_i - mean(r)
    elif method == "std":
        sigma = r.std(dim=1, keepdim=True, unbiased=unbiased)   # (B, 1)
        adv = (r - mu) / (sigma + eps)                          # A_i = (r_i - mean(r)) / (σ + eps)
    else:  # loo
        others = (r.sum(dim=1, keepdim=True) - r) / (G - 1)     # (B, G) mean of the other G-1
        adv = r - others                                        # A_i = r_i - mean_{j≠i} r_j
    # dead groups: exactly 0 (r - mean(r) can be ±1e-17 in floating point, and 0/0 with eps=0)
    dead = dead_groups(rewards, G)[:, None]                     # (B, 1)
    adv = torch.where(dead, torch.zeros_like(adv), adv)         # (B, G)
    return adv.reshape(-1)                                      # (B*G,)


def group_stats(rewards, G):
    """Numbers for logging, as detached 0-dim tensors (call .item() when you want to sync).

    dead_frac:   fraction of groups whose rewards are all equal (their advantages are 0)
    reward_mean: mean reward over the batch
    reward_std:  std of all rewards in the batch (population)
    group_std:   mean over groups of the within-group std (population); what σ-division sees
    """
    r = _groups(rewards, G)  # (B, G)
    return {
        "dead_frac": dead_groups(rewards, G).to(r.dtype).mean(),
        "reward_mean": r.mean(),
        "reward_std": r.std(unbiased=False),
        "group_std": r.std(dim=1, unbiased=False).mean(),
    }
