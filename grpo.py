"""
grpo.py: the GRPO loss: per-token log-probs, ratio, clip, KL to the reference, aggregation.

The objective of DeepSeekMath (Shao et al. 2024), maximised; the loss is its negative:

    J(θ) = E[ 1/G Σ_i 1/|o_i| Σ_t { min(ρ_it·A_i, clip(ρ_it, 1-ε_low, 1+ε_high)·A_i) - β·D_it } ]
    ρ_it = π_θ(o_it | q, o_i,<t) / π_old(o_it | q, o_i,<t)     token ratio; A_i from advantage.py
    D_it = π_ref/π_θ - log(π_ref/π_θ) - 1                      "k3" (default), in the loss, not the reward

Ratio and clip. With one update per rollout (μ = 1, DeepSeekMath's setting) π_old = π_θ, so ρ ≡ 1 and the clip
does nothing: that is correct. The clip only matters when the same rollout is reused for μ > 1 updates.
DeepSeekMath gives no ε (with μ = 1 it never acts); the default 0.2 is PPO's (Schulman et al. 2017).
ratio="seq" is GSPO (Zheng et al. 2025): one ratio per answer, s_i = exp(1/|o_i| Σ_t log ρ_it), clipped once per
answer. Every token of o_i carries min(s_i·A_i, clip(s_i, 1-ε_low, 1+ε_high)·A_i), weighed by the aggregation as
ρ_it·A_i would be (agg="grpo": GSPO's 1/G Σ_i). On-policy (μ = 1) s_i ≡ 1, ∇s_i = 1/|o_i| Σ_t ∇log π_it,
so it equals GRPO, loss and gradient, under every aggregation; it differs only after the first of μ > 1 updates,
where the paper also clips far tighter (clip_eps=3e-4, clip_eps_high=4e-4).

What pg_loss shows. At ρ ≡ 1 every token's surrogate is A_i, so under agg="grpo" the policy part is
pg_loss = -1/num_seqs Σ_i A_i, which is 0 up to rounding when the advantages of each group sum to 0 (methods mean,
std, loo, dr_grpo) and the call holds whole groups (or its micro-batches are summed). Under agg="dapo" and
"dr_grpo" an answer weighs by its length (-Σ_i |o_i|·A_i / denominator), so pg_loss is in general not 0 when
lengths differ within a group; nor with method "none", nor after the first of μ > 1 updates. Where it is 0 its
gradient still is not: read the reward, not the loss.

KL estimators, with log r = log(π_ref/π_θ) on a token sampled from π_θ (Schulman 2020). One step: one token, its
prefix o_<t held fixed, expectations over the next token only:
    k1 = -log r                 value unbiased for KL(π‖π_ref); expected gradient 0
    k2 = ½ (log r)²             value biased (≈ KL to second order); expected gradient ∇KL(π‖π_ref)
    k3 = r - log r - 1 ≥ 0      value unbiased for KL(π‖π_ref), but expected gradient ∇KL(π_ref‖π):
                                it descends the OTHER direction (Tang & Munos 2025). DeepSeekMath uses
                                k3; so do we by default.
These hold for the estimator alone, and inside the loss only while a token's weight does not depend on the
sampled answers: agg="dr_grpo", or answers of one length. When EOS decides the length, 1/|o_i| ("grpo") and
1/num_tokens ("dapo") depend on the tokens, and the facts fail even for the first token: k1's expected loss
gradient is β·∇E[1/|o|] under "grpo" and β·∇E[1/num_tokens] under "dapo" (a push toward longer answers), and
k2's and k3's are not multiples of the one-step gradients.
Over whole answers the prefix is itself sampled from π_θ, and no per-token loss differentiates that sampling.
With a constant weight the token sum's expected gradient is Σ_t E_{o<t ~ π}[∇KL_t] (KL_t: of the next-token
distributions at the prefix, in k2's direction or k3's), which is neither sequence-level ∇KL: k3's first-token
part is ∇KL(π_ref‖π)'s, k2's last-token part ∇KL(π‖π_ref)'s; others differ. Σ_t k1_t as a reward (advantage
-Σ_t k1_t, beta=0; RLHF-PPO's placement) gives the sequence-level ∇KL(π‖π_ref) exactly, with a constant weight.
The KL term is not importance-weighted, as in DeepSeekMath: with μ > 1 its tokens come from π_old and even the
one-step expected gradient is in general neither KL's. Weighting each token's term by (π/π_old).detach() (Zhang et
al. 2025) restores the on-policy gradient for one-token answers. Over longer answers the prefix came from π_old
too: at a constant weight the per-token ratio restores the first token only and the cumulative ratio Π_{s≤t}
π/π_old restores all; under "grpo" 1/|o_i| depends on later tokens and only the whole answer's ratio does. To add
such a term, see aggregate().
Numbers: tests/test_grpo.py (one step), tests/test_theory.py (two tokens; lengths decided by EOS).

Aggregation over the masked tokens (the mask is 1 up to and including the first EOS):
    agg="grpo"     1/num_seqs Σ_i 1/|o_i| Σ_t       DeepSeekMath (long answers weigh less per token)
    agg="dapo"     1/num_tokens Σ_i Σ_t             DAPO's token-level loss (Yu et al. 2025); DAPO itself also sets
                                                    clip_eps=0.2, clip_eps_high=0.28, beta=0, dynamic sampling
                                                    (train.py --dynamic) and overlong reward shaping (not here)
    agg="dr_grpo"  1/(num_seqs·max_len) Σ_i Σ_t     a constant normaliser: Dr. GRPO (Liu et al. 2025) is
                                                    advantage "dr_grpo" (no σ) + this + beta=0 (theirs)
num_seqs, num_tokens and max_len are the whole optimizer step's (all micro-batches and data-parallel ranks); None
means this call's batch, except that agg="dr_grpo" requires max_len (the completion length limit): a batch's own T
would change the "constant" whenever sampling stops early.

Expected gradients and answer length (μ = 1, β = 0). With answers of one length L every aggregation divides by a
constant; with lengths that differ:
    dr_grpo  constant: advantage loo (or none) gives exactly ∇J/max_len, mean (1 - 1/G)·∇J/max_len;
    grpo     1/|o_i| depends on the answer: each answer's push (up if A_i > 0, down if A_i < 0) is divided by its
             length, so of the answers that beat their group the short ones gain most, and of those that lose the
             long ones lose least (the length bias Dr. GRPO removes). With loo the expected gradient is
             ∇E[(r - c)/|o|] at c = E[r] held fixed, for every G; with none ∇E[r/|o|];
    dapo     1/Σ_j |o_j| depends on all the step's sampled lengths: biased, and by an amount that depends on G; it
             would be ∇J/E|o| with loo if the token count were the constant num_seqs·E|o|.
mean is (1 - 1/G)·loo answer by answer (advantage.py), so its result is (1 - 1/G)·loo's everywhere.
An example with numbers (lengths 1, 2, 3 under each aggregation): tests/test_theory.py.

Dead groups (all rewards equal, so advantage 0: advantage.py) add nothing to the policy part, but with beta > 0
their tokens still get the KL term's gradient (at a constant weight, in expectation a pull toward π_ref under k2 and
k3 and none under k1; other weights: above), and under every aggregation they still count in the denominators
(num_seqs, num_tokens): the live groups' policy gradient shrinks with the live share of the step (by exactly the
live fraction of sequences under grpo and dr_grpo). DAPO's dynamic sampling refills the batch with live groups
instead: train.py --dynamic K, for at most K rounds; groups still dead then are trained and counted as above.

Where this departs from DeepSeekMath:
- clip_eps_high: an asymmetric clip, "clip-higher" from DAPO; default symmetric; ratio="seq" (GSPO) besides;
- agg="dapo" and agg="dr_grpo" above, and kl="k1"/"k2" besides k3;
- beta=0 (DAPO, Dr. GRPO drop the KL term) needs no reference model: ref_logp may be None;
- k3 clamps log(π_ref/π_θ) to [-20, 20] before the exp, as verl does, so that it cannot overflow; beyond the
  clamp the term is constant (e^20 - 21 ≈ 4.9e8 at the top) and passes no gradient. verl also caps the k3 value
  at 10 (which stops the KL gradient on such tokens); nanogrpo does not.

Shapes (letters in model.py): N = B*G completions, T completion length, V vocabulary.
Advantages, old_logp and ref_logp are constants: they are detached here too.
"""

import torch

KL_KINDS = ("k1", "k2", "k3")
AGGS = ("grpo", "dapo", "dr_grpo")
RATIOS = ("token", "seq")  # GRPO's ρ_it per token; GSPO's s_i per answer
K3_LOG_RATIO_CLAMP = 20.0  # verl's bound on log(π_ref/π) before k3's exp


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
        logits = logits / temperature  # (N, T, V)
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (N, T)
    return picked - torch.logsumexp(logits, dim=-1)  # (N, T) log softmax at the token


def completion_logprobs(logits, seq, P, temperature=1.0):
    """THE shift, in one place: log-probs (N, T) of the completion seq[:, P:] of seq (N, P+T).

    logits (N, P+T, V) come from model(seq, mask); the logits at column c predict the token
    at column c+1, so the completion tokens seq[:, P:] are scored by logits[:, P-1:-1].
    Use it for the policy, π_old and π_ref alike so that all three are shifted the same way.
    """
    return token_logprobs(logits[:, P - 1 : -1], seq[:, P:], temperature)  # (N, T)


# ----------------------------------------------------------------------------- KL


def kl_penalty(logp, ref_logp, kind="k3"):
    """Per-token KL(π‖π_ref) estimate (N, T) on tokens sampled from π; see the module docstring."""
    log_r = ref_logp.detach() - logp  # (N, T) log r = log(π_ref/π)
    if kind == "k1":
        return -log_r  # k1 = log(π/π_ref)
    if kind == "k2":
        return 0.5 * log_r**2  # k2 = ½ (log(π_ref/π))²
    if kind == "k3":
        log_r = log_r.clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)  # (N, T) exp cannot overflow
        return torch.exp(log_r) - log_r - 1  # k3 = π_ref/π - log(π_ref/π) - 1
    raise ValueError(f"unknown KL estimator '{kind}'; choose one of {', '.join(KL_KINDS)}")


# ----------------------------------------------------------------------------- loss


def _check_agg(agg, max_len):
    if agg not in AGGS:
        raise ValueError(f"unknown aggregation '{agg}'; choose one of {', '.join(AGGS)}")
    if agg == "dr_grpo" and max_len is None:
        raise ValueError(
            "agg='dr_grpo' needs max_len, the step's completion length limit (a constant); "
            "this batch's own length would change whenever sampling stops early"
        )


def aggregate(x, mask, agg, *, num_seqs=None, num_tokens=None, max_len=None):
    """Reduce per-token values x (N, T) over the masked tokens to a scalar, as grpo_loss does.

    agg is one of AGGS; num_seqs, num_tokens, max_len are the whole optimizer step's totals (None:
    this batch's; agg="dr_grpo" requires max_len). Values at masked positions are never used.
    For an extra per-token loss term (an entropy bonus, say), add
        coef * aggregate(term, mask, agg, **totals)
    to the loss, with the same totals as grpo_loss: summed over micro-batches and ranks it gives
    the one-big-batch value and gradient.
    """
    _check_agg(agg, max_len)
    mask = mask.bool()  # (N, T)
    x = torch.where(mask, x, torch.zeros_like(x))  # (N, T), 0 after the first EOS
    if agg == "grpo":
        num_seqs = x.shape[0] if num_seqs is None else num_seqs
        per_seq = x.sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (N,) 1/|o_i| Σ_t, |o_i| its own
        return per_seq.sum() / num_seqs  # 1/num_seqs Σ_i
    if agg == "dapo":
        num_tokens = mask.sum().clamp(min=1) if num_tokens is None else num_tokens
        return x.sum() / num_tokens  # 1/num_tokens Σ_i Σ_t
    num_seqs = x.shape[0] if num_seqs is None else num_seqs
    return x.sum() / (num_seqs * max_len)  # dr_grpo: 1/(num_seqs·max_len) Σ_i Σ_t


def grpo_loss(
    logp,
    old_logp,
    ref_logp,
    advantages,
    mask,
    *,
    clip_eps=0.2,
    clip_eps_high=None,
    beta=0.04,
    kl="k3",
    agg="grpo",
    ratio="token",
    num_seqs=None,
    num_tokens=None,
    max_len=None,
):
    """The GRPO loss (the negative objective, to minimise) and a dict of stats.

    logp (N, T) with grad; old_logp, ref_logp (N, T) constants (ref_logp may be None when
    beta == 0); advantages (N,); mask (N, T) bool or 0/1, true up to and including the first
    EOS. clip_eps is ε_low, clip_eps_high is ε_high (None: = ε_low). ratio is one of RATIOS: "token"
    (ρ_it) or "seq" (GSPO's s_i, module docstring). num_seqs, num_tokens, max_len: the optimizer step's
    totals, see the module docstring. Values at masked positions are never used, whatever they hold
    (inf and NaN included), and get zero gradient.

    Returns (loss, stats). stats holds detached 0-dim tensors (call .item() when you want to
    sync). Each is this call's additive share of the step, so the sum over the step's
    micro-batches (and ranks) is the one-big-batch value. "The ratio" is ρ_it, or under ratio="seq"
    s_i on each token of o_i (so a clipped answer counts all its tokens):
        loss, pg_loss, kl_loss     loss = pg_loss + kl_loss, divided by the step's denominators
        kl                         Σ of the per-token KL estimate (kind `kl`) / num_tokens; 0 without ref_logp
        clip_frac_low              #tokens with ratio < 1-ε_low and A < 0 (clipped, no grad) / num_tokens
        clip_frac_high             #tokens with ratio > 1+ε_high and A > 0 (clipped, no grad) / num_tokens
        ratio_mean                 Σ ratio / num_tokens
        num_tokens                 the number of masked tokens in this call (a count)
    """
    _check_agg(agg, max_len)
    if ratio not in RATIOS:
        raise ValueError(f"unknown ratio '{ratio}'; choose one of {', '.join(RATIOS)}")
    if ref_logp is None and beta != 0:
        raise ValueError(f"beta={beta} needs reference log-probs; pass ref_logp or set beta=0")
    N, T = logp.shape
    if mask.shape != (N, T) or advantages.shape != (N,):
        raise ValueError(
            f"expected mask {(N, T)} and advantages {(N,)}, got {tuple(mask.shape)} and {tuple(advantages.shape)}"
        )
    eps_low = clip_eps
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    mask = mask.bool()  # (N, T)
    n_tok = mask.sum()  # () tokens in this call
    num_seqs = N if num_seqs is None else num_seqs
    num_tokens = n_tok.clamp(min=1) if num_tokens is None else num_tokens
    totals = dict(num_seqs=num_seqs, num_tokens=num_tokens, max_len=max_len)

    # masked positions become 0 before any arithmetic, so nothing there reaches loss or grad
    zero = torch.zeros_like(logp)  # (N, T)
    logp = torch.where(mask, logp, zero)  # (N, T)
    old_logp = torch.where(mask, old_logp.detach(), zero)  # (N, T)
    adv = advantages.detach().to(logp.dtype)[:, None]  # (N, 1) one A_i for all its tokens

    log_rho = logp - old_logp  # (N, T) log ρ_it, 0 at masked positions
    if ratio == "seq":  # GSPO: log s_i = 1/|o_i| Σ_t log ρ_it, on each token
        log_rho = torch.where(mask, log_rho.sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1), zero)
    rho = torch.exp(log_rho)  # (N, T) ρ = π_θ/π_old, or s_i on each token of o_i
    pg = torch.minimum(rho * adv, rho.clamp(1 - eps_low, 1 + eps_high) * adv)  # (N, T) min(ρA, clip(ρ)A)
    if ref_logp is not None:
        ref_logp = torch.where(mask, ref_logp.detach(), zero)  # (N, T)
        kl_tok = kl_penalty(logp, ref_logp, kl)  # (N, T)
    else:
        kl_tok = zero  # (N, T)

    pg_loss = -aggregate(pg, mask, agg, **totals)
    kl_loss = beta * aggregate(kl_tok, mask, agg, **totals)
    loss = (pg_loss + kl_loss) if beta != 0 else pg_loss  # beta = 0: no KL term at all

    with torch.no_grad():
        keep = mask.to(rho.dtype)  # (N, T) 1 on this call's tokens; each stat below is Σ / the step's num_tokens
        stats = {
            "loss": loss.detach(),
            "pg_loss": pg_loss.detach(),
            "kl_loss": kl_loss.detach(),
            "kl": (keep * kl_tok).sum() / num_tokens,
            "clip_frac_low": (keep * ((rho < 1 - eps_low) & (adv < 0))).sum() / num_tokens,
            "clip_frac_high": (keep * ((rho > 1 + eps_high) & (adv > 0))).sum() / num_tokens,
            "ratio_mean": (keep * rho).sum() / num_tokens,
            "num_tokens": n_tok,
        }
    return loss, stats
