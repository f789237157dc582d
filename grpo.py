"""
grpo.py: the GRPO loss: per-token log-probs, ratio, clip, KL to the reference, aggregation.

The objective of DeepSeekMath (Shao et al. 2024), maximised; the loss is its negative:

    J(θ) = E[ 1/G Σ_i 1/|o_i| Σ_t { min(ρ_it·A_i, clip(ρ_it, 1-ε_low, 1+ε_high)·A_i) - β·D_it } ]
    ρ_it = π_θ(o_it | q, o_i,<t) / π_old(o_it | q, o_i,<t)     token ratio; A_i from advantage.py
    D_it = π_ref/π_θ - log(π_ref/π_θ) - 1                      "k3" (default), in the loss, not the reward

With one update per rollout (μ = 1) π_old = π_θ, so ρ ≡ 1 and the clip does nothing: that is
correct. The clip only matters when the same rollout is reused for μ > 1 updates.

KL estimators on a token sampled from π_θ, with log r = log(π_ref/π_θ) (Schulman 2020):
    k1 = -log r                 value unbiased for KL(π‖π_ref); expected gradient 0 on-policy
    k2 = ½ (log r)²             value biased (≈ KL to second order); expected gradient = ∇KL(π‖π_ref) on-policy
    k3 = r - log r - 1 ≥ 0      value unbiased for KL(π‖π_ref), but its gradient, on samples
                                from π, descends the OTHER direction, KL(π_ref‖π) (tests/test_grpo.py;
                                Tang & Munos 2025). DeepSeekMath uses k3; so do we by default.
The KL term is not importance-weighted, as in DeepSeekMath: with μ > 1 its samples come from
π_old and its expected gradient matches neither KL; weighting by (π/π_old).detach() restores
the on-policy one (Zhang et al. 2025; tests/test_grpo.py shows both).

Aggregation over the masked tokens (the mask is 1 up to and including the first EOS):
    agg="grpo"     1/num_seqs Σ_i 1/|o_i| Σ_t       DeepSeekMath (long answers weigh less per token)
    agg="dapo"     1/num_tokens Σ_i Σ_t             DAPO, Yu et al. 2025 (one token mean)
    agg="dr_grpo"  1/(num_seqs·max_len) Σ_i Σ_t     Dr. GRPO, Liu et al. 2025 (a constant; pair
                                                    it with advantage method "dr_grpo", no σ)
num_seqs, num_tokens, max_len default to this batch's; a caller that accumulates gradients
over micro-batches (or data-parallel ranks) passes the totals of the whole optimizer step,
so that the summed micro-batch losses equal the one-big-batch loss and gradient exactly.

Where this departs from DeepSeekMath:
- clip_eps_high: an asymmetric clip, "clip-higher" from DAPO (Yu et al. 2025); default symmetric;
- agg="dapo" and agg="dr_grpo" above, and kl="k1"/"k2" besides k3;
- beta=0 (DAPO, Dr. GRPO drop the KL term) needs no reference model: ref_logp may be None.

Shapes (letters in model.py): N = B*G completions, T completion length, V vocabulary.
Advantages, old_logp and ref_logp are constants: they are detached here too.
"""
import torch

KL_KINDS = ("k1", "k2", "k3")
AGGS = ("grpo", "dapo", "dr_grpo")


# ----------------------------------------------------------------------------- log-probs

def token_logprobs(logits, tokens, temperature=1.0):
    """log π(tokens[n, t]) as (N, T), from logits (N, T, V) ALREADY aligned with tokens (N, T).

    logits[:, t] must be the distribution that tokens[:, t] was drawn from; the one-position
    shift lives in completion_logprobs below. Computed as the picked logit minus logsumexp in
    at least float32: the only (N, T, V) float32 tensor is the (scaled) logits that logsumexp's
    backward needs; no log-softmax is materialised. The logits are divided by
    the temperature exactly as the sampler does (logits / temperature); temperature <= 0
    (greedy sampling, which has no distribution) is scored at temperature 1.
    """
    if temperature <= 0:
        temperature = 1.0
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # (N, T, V)
    if temperature != 1.0:
        logits = logits / temperature                                    # (N, T, V)
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)          # (N, T)
    return picked - torch.logsumexp(logits, dim=-1)                      # (N, T) log softmax at the token


def completion_logprobs(logits, seq, P, temperature=1.0):
    """THE shift, in one place: log-probs (N, T) of the completion seq[:, P:] of seq (N, P+T).

    logits (N, P+T, V) come from model(seq, mask); the logits at column c predict the token
    at column c+1, so the completion tokens seq[:, P:] are scored by logits[:, P-1:-1].
    Use it for the policy, π_old and π_ref alike so that all three are shifted the same way.
    """
    return token_logprobs(logits[:, P - 1:-1], seq[:, P:], temperature)  # (N, T)


# ----------------------------------------------------------------------------- KL

def kl_penalty(logp, ref_logp, kind="k3"):
    """Per-token KL(π‖π_ref) estimate (N, T) on tokens sampled from π; see the module docstring."""
    log_r = ref_logp.detach() - logp           # (N, T) log r = log(π_ref/π)
    if kind == "k1":
        return -log_r                          # k1 = log(π/π_ref)
    if kind == "k2":
        return 0.5 * log_r ** 2                # k2 = ½ (log(π_ref/π))²
    if kind == "k3":
        return torch.exp(log_r) - log_r - 1    # k3 = π_ref/π - log(π_ref/π) - 1
    raise ValueError(f"unknown KL estimator '{kind}'; choose one of {', '.join(KL_KINDS)}")


# ----------------------------------------------------------------------------- loss

def _aggregate(x, mask, agg, num_seqs, num_tokens, max_len):
    """Reduce per-token values x (N, T) over the masked tokens to a scalar (see the docstring)."""
    x = torch.where(mask, x, torch.zeros_like(x))           # (N, T), 0 after the first EOS
    if agg == "grpo":
        per_seq = x.sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (N,) 1/|o_i| Σ_t, |o_i| local
        return per_seq.sum() / num_seqs                     # 1/num_seqs Σ_i
    if agg == "dapo":
        return x.sum() / num_tokens                         # 1/num_tokens Σ_i Σ_t
    return x.sum() / (num_seqs * max_len)                   # dr_grpo: 1/(num_seqs·max_len) Σ_i Σ_t


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, clip_eps=0.2, clip_eps_high=None,
              beta=0.04, kl="k3", agg="grpo", num_seqs=None, num_tokens=None, max_len=None):
    """The GRPO loss (the negative objective, to minimise) and a dict of stats.

    logp (N, T) with grad; old_logp, ref_logp (N, T) constants (ref_logp may be None when
    beta == 0); advantages (N,); mask (N, T) bool or 0/1, true up to and including the first
    EOS. clip_eps is ε_low, clip_eps_high is ε_high (None: = ε_low). Values at masked
    positions are never used, whatever they hold (inf and NaN included), and get zero gradient.

    Returns (loss, stats). stats holds detached 0-dim tensors, so that the caller decides when
    to sync (.item()); they describe this batch alone (token means over its masked tokens):
        loss, pg_loss, kl_loss     loss = pg_loss + kl_loss (the two parts, aggregated)
        kl                         mean per-token KL estimate (kind `kl`); 0 without ref_logp
        clip_frac_low              fraction of tokens with ρ < 1-ε_low and A < 0 (clipped, no grad)
        clip_frac_high             fraction of tokens with ρ > 1+ε_high and A > 0 (clipped, no grad)
        ratio_mean, ratio_min, ratio_max    of ρ (min/max are ±inf if there is no token)
        num_tokens                 number of masked tokens in this batch
    """
    if agg not in AGGS:
        raise ValueError(f"unknown aggregation '{agg}'; choose one of {', '.join(AGGS)}")
    if ref_logp is None and beta != 0:
        raise ValueError(f"beta={beta} needs reference log-probs; pass ref_logp or set beta=0")
    N, T = logp.shape
    if mask.shape != (N, T) or advantages.shape != (N,):
        raise ValueError(f"expected mask {(N, T)} and advantages {(N,)}, got "
                         f"{tuple(mask.shape)} and {tuple(advantages.shape)}")
    eps_low = clip_eps
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    mask = mask.bool()                                       # (N, T)
    n_tok = mask.sum()                                       # () tokens in this batch
    num_seqs = N if num_seqs is None else num_seqs
    num_tokens = n_tok.clamp(min=1) if num_tokens is None else num_tokens
    max_len = T if max_len is None else max_len

    # masked positions become 0 before any arithmetic, so nothing there reaches loss or grad
    zero = torch.zeros_like(logp)                            # (N, T)
    logp = torch.where(mask, logp, zero)                     # (N, T)
    old_logp = torch.where(mask, old_logp.detach(), zero)    # (N, T)
    adv = advantages.detach().to(logp.dtype)[:, None]        # (N, 1) one A_i for all its tokens

    ratio = torch.exp(logp - old_logp)                       # (N, T) ρ = π_θ/π_old
    pg = torch.minimum(ratio * adv,                          # (N, T) min(ρ·A,
                       ratio.clamp(1 - eps_low, 1 + eps_high) * adv)  # clip(ρ, 1-ε_low, 1+ε_high)·A)
    if ref_logp is not None:
        ref_logp = torch.where(mask, ref_logp.detach(), zero)  # (N, T)
        kl_tok = kl_penalty(logp, ref_logp, kl)              # (N, T)
    else:
        kl_tok = zero                                        # (N, T)

    pg_loss = -_aggregate(pg, mask, agg, num_seqs, num_tokens, max_len)
    kl_loss = beta * _aggregate(kl_tok, mask, agg, num_seqs, num_tokens, max_len)
    loss = (pg_loss + kl_loss) if beta != 0 else pg_loss    # beta = 0: no KL term at all

    with torch.no_grad():
        denom = n_tok.clamp(min=1).to(ratio.dtype)         # () token count, for token means
        inf = torch.full_like(ratio, float("inf"))           # (N, T)
        stats = {
            "loss": loss.detach(),
            "pg_loss": pg_loss.detach(),
            "kl_loss": kl_loss.detach(),
            "kl": torch.where(mask, kl_tok, zero).sum() / denom,
            "clip_frac_low": ((ratio < 1 - eps_low) & (adv < 0) & mask).to(ratio.dtype).sum() / denom,
            "clip_frac_high": ((ratio > 1 + eps_high) & (adv > 0) & mask).to(ratio.dtype).sum() / denom,
            "ratio_mean": torch.where(mask, ratio, zero).sum() / denom,
            "ratio_min": torch.where(mask, ratio, inf).amin(),
            "ratio_max": torch.where(mask, ratio, -inf).amax(),
            "num_tokens": n_tok,
        }
    return loss, stats
