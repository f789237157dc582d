"""
grpo.py: the GRPO loss: per-token log-probs (the one shift), ratio, clip, KL to the reference, aggregation.

DeepSeekMath's objective (Shao et al. 2024), maximised; grpo_loss returns its negative, to minimise:

    J(θ) = E[ 1/G Σ_i 1/|o_i| Σ_t { min(ρ_it·A_i, clip(ρ_it, 1-ε_low, 1+ε_high)·A_i) - β·D_it } ]
    ρ_it = π_θ(o_it | q, o_i,<t) / π_old(o_it | q, o_i,<t)     the ratio; A_i from advantage.py
    D_it = π_ref/π_θ - log(π_ref/π_θ) - 1                      "k3", in the loss, not in the reward

The paper's path is grpo_loss with its defaults; each variant (train.py's flags) is a function beside the paper's,
named in a dict, so grpo_loss has no branch for any (the notes at the end list them, and the facts behind the choices).
Departures from DeepSeekMath: ε = 0.2 where it states none (PPO's, Schulman et al. 2017); ε_high (DAPO's
clip-higher); the variants; beta = 0 needs no π_ref; k3's clamp.
"""

from contextlib import nullcontext

import torch

K3_LOG_RATIO_CLAMP = 20.0  # verl's bound on log(π_ref/π) before k3's exp (the notes at the end)


# ----------------------------------------------------------------------------- log-probs


def scoring_columns(P):
    """THE shift, in one place: the completion seq[:, P:] (N, T) of seq (N, P+T) is scored by the logits at columns
    P-1 .. P+T-2 (column c predicts the token at c+1), the only ones computed: net(seq, mask, logits_at=this)."""
    return slice(P - 1, -1)


def tempered(logits, temperature):
    """logits / τ (N, T, V) in at least float32, as the sampler draws; τ <= 0 (greedy sampling, which has no
    distribution) is scored at τ = 1. float32 logits at τ = 1 are returned as they are: no copy."""
    z = logits.to(torch.promote_types(logits.dtype, torch.float32))  # (N, T, V)
    return z if temperature <= 0 or temperature == 1.0 else z / temperature  # (N, T, V)


def token_logprobs(logits, tokens, temperature=1.0):
    """log π(tokens[n, t]) as (N, T), from logits (N, T, V) ALREADY aligned with tokens (N, T), at `temperature`
    (tempered): the picked logit minus logsumexp, in at least float32, no log-softmax (N, T, V) materialised."""
    z = tempered(logits, temperature)  # (N, T, V)
    picked = z.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (N, T)
    return picked - torch.logsumexp(z, dim=-1)  # (N, T) log softmax at the token


def completion_logprobs(logits, seq, P, temperature=1.0):
    """Log-probs (N, T) of seq[:, P:], seq (N, P+T), from logits (N, T, V) at scoring_columns(P), else ValueError."""
    if logits.shape[:2] != seq[:, P:].shape:
        raise ValueError(f"logits {tuple(logits.shape)} are not the scoring columns of {P} + {seq.shape[1] - P}")
    return token_logprobs(logits, seq[:, P:], temperature)  # (N, T)


@torch.no_grad()
def completion_entropy(logits, temperature=1.0):
    """The entropy H_t = -Σ_v p_v log p_v (N, T) of each p = softmax(logits / τ) a completion token was drawn from
    (logits (N, T, V) at the scoring columns), in at least float32, without grad, a row's (T, V) at a time."""
    z = tempered(logits, temperature)  # (N, T, V)
    H = torch.empty(z.shape[:2], dtype=z.dtype, device=z.device)  # (N, T)
    for n in range(len(z)):
        logp = torch.log_softmax(z[n], dim=-1)  # (T, V)
        H[n] = -logp.exp().mul_(logp).sum(dim=-1)  # (T,)
    return H


def score(net, tokens, mask, P, temperature, autocast=nullcontext(), with_entropy=False):
    """log π(o_t) (N, T) of the completions tokens[:, P:] (N, P+T) under `net` (its forward in `autocast`) at
    `temperature`; with_entropy: also the entropy (N, T). train.py scores π_θ, π_old, π_ref and the teacher this way."""
    with autocast:
        logits = net(tokens, mask, logits_at=scoring_columns(P))  # (N, T, V)
    logits = tempered(logits, temperature)  # (N, T, V) float32 / τ, which the backward keeps; the net's dropped
    logp = completion_logprobs(logits, tokens, P)  # (N, T)
    return (logp, completion_entropy(logits)) if with_entropy else logp  # (N, T), and (N, T)


# ----------------------------------------------------------------------------- KL


def k1(log_r):
    """k1 = -log r = log(π/π_ref): unbiased; its expected gradient is 0."""
    return -log_r


def k2(log_r):
    """k2 = ½ (log r)²: biased (≈ KL to second order); its expected gradient is ∇KL(π‖π_ref)."""
    return 0.5 * log_r**2


def k3(log_r):
    """k3 = r - log r - 1 ≥ 0, DeepSeekMath's: unbiased, but its expected gradient is ∇KL(π_ref‖π), the other
    direction. log r is clamped to [-20, 20] first (verl's bound), so exp cannot overflow."""
    log_r = log_r.clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)  # (N, T)
    return torch.exp(log_r) - log_r - 1  # π_ref/π - log(π_ref/π) - 1


KL_KINDS = {"k1": k1, "k2": k2, "k3": k3}  # --kl


def kl_penalty(logp, ref_logp, kind="k3"):
    """Per-token estimate (N, T) of KL(π‖π_ref) on tokens sampled from π (Schulman 2020), log r = log(π_ref/π), by
    KL_KINDS[kind] (one token, its prefix fixed; over whole answers and EOS-decided lengths: the notes at the end)."""
    if kind not in KL_KINDS:
        raise ValueError(f"unknown KL estimator '{kind}'; choose one of {', '.join(KL_KINDS)}")
    return KL_KINDS[kind](ref_logp.detach() - logp)  # (N, T)


# ----------------------------------------------------------------------------- aggregation: 1/G Σ_i 1/|o_i| Σ_t


def per_answer_mean(x, mask, num_seqs, num_tokens, max_len):
    """DeepSeekMath's 1/num_seqs Σ_i 1/|o_i| Σ_t x_it: each answer's token mean, then their mean (so a long answer's
    tokens weigh less each). x is already 0 at masked positions."""
    per_seq = x.sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (N,) 1/|o_i| Σ_t, |o_i| its own
    return per_seq.sum() / num_seqs  # 1/num_seqs Σ_i


def token_mean(x, mask, num_seqs, num_tokens, max_len):
    """DAPO's (Yu et al. 2025) 1/num_tokens Σ_i Σ_t x_it: one mean over the step's tokens."""
    return x.sum() / num_tokens


def constant_norm(x, mask, num_seqs, num_tokens, max_len):
    """Dr. GRPO's (Liu et al. 2025) 1/(num_seqs·max_len) Σ_i Σ_t x_it: a constant normaliser."""
    return x.sum() / (num_seqs * max_len)


AGGS = {"grpo": per_answer_mean, "dapo": token_mean, "dr_grpo": constant_norm}  # --agg


def _check_agg(agg, max_len):
    if agg not in AGGS:
        raise ValueError(f"unknown aggregation '{agg}'; choose one of {', '.join(AGGS)}")
    if agg == "dr_grpo" and max_len is None:
        raise ValueError("agg='dr_grpo' needs max_len, the step's completion length limit (aggregate(): why)")


def aggregate(x, mask, agg, *, num_seqs=None, num_tokens=None, max_len=None):
    """Reduce per-token values x (N, T) over the masked tokens to a scalar, by AGGS[agg], as grpo_loss does.

    num_seqs, num_tokens, max_len: the step's totals (grpo_loss's docstring); None means this call's batch, except
    that "dr_grpo" requires max_len, the completion length limit: the batch's own T would change the "constant"
    whenever sampling stops early. Values at masked positions are never used. An extra per-token loss term (an
    entropy bonus, say) is `coef * aggregate(term, mask, agg, **totals)` with grpo_loss's totals."""
    _check_agg(agg, max_len)
    mask = mask.bool()  # (N, T)
    x = torch.where(mask, x, torch.zeros_like(x))  # (N, T), 0 after the first EOS
    num_seqs = x.shape[0] if num_seqs is None else num_seqs
    num_tokens = mask.sum().clamp(min=1) if num_tokens is None else num_tokens
    return AGGS[agg](x, mask, num_seqs, num_tokens, max_len)


# ----------------------------------------------------------------------------- the ratio, and the policy term


def token_ratio(log_rho, mask):
    """DeepSeekMath's log ρ_it = log π_θ(o_it) - log π_old(o_it), one per token, as it is."""
    return log_rho


def sequence_ratio(log_rho, mask):
    """GSPO's (Zheng et al. 2025) log s_i = 1/|o_i| Σ_t log ρ_it, the same on each token of o_i (0 where masked)."""
    log_s = log_rho.sum(1, keepdim=True) / mask.sum(1, keepdim=True).clamp(min=1)  # (N, 1)
    return torch.where(mask, log_s, torch.zeros_like(log_rho))  # (N, T)


RATIOS = {"token": token_ratio, "seq": sequence_ratio}  # --ratio


def clipped_surrogate(rho, adv, logp, low, high):
    """PPO's clipped surrogate, DeepSeekMath's: min(ρA, clip(ρ, low, high)·A) (N, T). Where the clip binds, min()
    takes the constant side, whose gradient is 0. Also returns the tokens clipped below (A < 0) and above (A > 0)."""
    pg = torch.minimum(rho * adv, rho.clamp(low, high) * adv)  # (N, T)
    return pg, (rho < low) & (adv < 0), (rho > high) & (adv > 0)


def cispo_surrogate(rho, adv, logp, low, high):
    """CISPO's (MiniMax-M1, 2025) sg(min(ρ, high))·A·log π (N, T): the capped ratio as a constant weight, so no
    token's gradient is cut. The cap is 1 + --clip_eps_high (TRL caps at its epsilon_high itself); no lower bound.
    Also returns no tokens clipped below, and the capped ones above (their gradient stays)."""
    pg = rho.clamp(max=high).detach() * adv * logp  # (N, T)
    return pg, torch.zeros_like(rho, dtype=torch.bool), rho > high


LOSSES = {"clip": clipped_surrogate, "cispo": cispo_surrogate}  # --loss


# ----------------------------------------------------------------------------- the sampler's gap


def tis_weights(old_logp, sampler_logp, cap):
    """Truncated importance sampling (N, T): min(π_old/π_sampler, cap) per token, a constant (no gradient), for
    grpo_loss's `weight`.

    π_old's log-probs here are the trainer's forward; the sampler drew the tokens with its own numbers (another
    kernel, bf16, or another engine), so the rollout came from π_sampler, not π_old. The weight corrects each token's
    own draw: exactly for one-token answers. Over longer answers the prefix and the rest of the answer came from the
    sampler too: only the product of the ratios over the whole answer corrects exactly; per-token weights leave an
    error, smaller or larger than none at all (tests/test_theory.py). Under --ratio seq every token of an answer
    carries the same term, so its per-token weights act as their mean over the answer (TRL's token_* modes weigh
    per token too; its sequence_* modes weigh an answer by the product of its ratios). The cap bounds the variance
    (TRL and verl offer it). With no gap every weight is 1 and nothing changes; train.py's logp_gap shows the gap's
    size."""
    return torch.exp(old_logp.detach() - sampler_logp.detach()).clamp(max=cap)  # (N, T)


# ----------------------------------------------------------------------------- the loss


def _check_loss_args(logp, ref_logp, advantages, mask, beta, kl, agg, ratio, loss, max_len):
    """grpo_loss's arguments, or ValueError."""
    _check_agg(agg, max_len)
    for name, value, known in [("KL estimator", kl, KL_KINDS), ("ratio", ratio, RATIOS), ("loss", loss, LOSSES)]:
        if value not in known:
            raise ValueError(f"unknown {name} '{value}'; choose one of {', '.join(known)}")
    if ref_logp is None and beta != 0:
        raise ValueError(f"beta={beta} needs reference log-probs; pass ref_logp or set beta=0")
    want = (tuple(logp.shape), tuple(logp.shape[:1]))  # mask (N, T), advantages (N,)
    if (tuple(mask.shape), tuple(advantages.shape)) != want:
        raise ValueError(f"mask and advantages need shapes {want}, got {tuple(mask.shape)}, {tuple(advantages.shape)}")


def _masked(x, mask):
    """x (N, T) as a constant, 0 at the masked positions whatever they held: nothing there reaches the loss."""
    return torch.where(mask, x.detach(), torch.zeros_like(x))  # (N, T)


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
    loss="clip",
    weight=None,
    num_seqs=None,
    num_tokens=None,
    max_len=None,
):
    """The GRPO loss (the negative objective, to minimise) and a dict of stats.

    logp (N, T) with grad; old_logp, ref_logp (N, T) constants (ref_logp None when beta == 0); advantages (N,);
    mask (N, T): masked positions are never used, whatever they hold, and get no gradient; weight (N, T) or None: a
    constant on each token's policy term (tis_weights). clip_eps is ε_low, clip_eps_high ε_high (None: ε_low). kl,
    ratio, loss, agg name a function in KL_KINDS, RATIOS, LOSSES, AGGS. num_seqs, num_tokens, max_len are the whole
    step's, all micro-batches and ranks (None: this call's), so that the calls' losses and gradients add up to the
    one-big-batch ones (tests/test_grpo.py, tests/test_ddp.py)."""
    _check_loss_args(logp, ref_logp, advantages, mask, beta, kl, agg, ratio, loss, max_len)
    mask = mask.bool()  # (N, T)
    n_tok = mask.sum()  # ()
    num_seqs = len(logp) if num_seqs is None else num_seqs
    num_tokens = n_tok.clamp(min=1) if num_tokens is None else num_tokens
    totals = dict(num_seqs=num_seqs, num_tokens=num_tokens, max_len=max_len)
    high = 1 + (clip_eps if clip_eps_high is None else clip_eps_high)  # 1 + ε_high
    low = 1 - clip_eps  # 1 - ε_low

    zero = torch.zeros_like(logp)  # (N, T)
    logp = torch.where(mask, logp, zero)  # (N, T)
    old_logp = _masked(old_logp, mask)  # (N, T)
    adv = advantages.detach().to(logp.dtype)[:, None]  # (N, 1) one A_i for all its tokens

    rho = torch.exp(RATIOS[ratio](logp - old_logp, mask))  # (N, T) ρ_it = π_θ/π_old; "seq": GSPO's s_i
    pg, clipped_low, clipped_high = LOSSES[loss](rho, adv, logp, low, high)  # (N, T) min(ρA, clip(ρ)A), or CISPO's
    w = 1.0 if weight is None else _masked(weight, mask).to(logp.dtype)  # (N, T) TIS's weights, else 1
    pg = torch.where(mask, pg * w, zero)  # (N, T) 0 after the first EOS, whatever the policy term holds there
    kl_tok = zero if ref_logp is None else kl_penalty(logp, _masked(ref_logp, mask), kl)  # (N, T) D_it; 0 without π_ref

    pg_loss = -AGGS[agg](pg, mask, **totals)  # -1/G Σ_i 1/|o_i| Σ_t min(ρA, clip(ρ)A); --agg
    kl_loss = beta * AGGS[agg](kl_tok, mask, **totals)  # β·1/G Σ_i 1/|o_i| Σ_t D_it (0 where masked: log r = 0)
    total = pg_loss + kl_loss

    with torch.no_grad():
        keep = mask.to(rho.dtype)  # (N, T)
        stats = dict(loss=total.detach(), pg_loss=pg_loss.detach(), kl_loss=kl_loss.detach())  # 0-dim, as below
        stats |= {  # this call's share of the step's values: they add up over micro-batches and ranks
            "kl": (keep * kl_tok).sum() / num_tokens,  # the per-token KL estimate's (0 without ref_logp)
            "clip_frac_low": (keep * clipped_low).sum() / num_tokens,  # clipped below (A < 0): no gradient
            "clip_frac_high": (keep * clipped_high).sum() / num_tokens,  # above (A > 0); "cispo": capped, gradient kept
            "ratio_mean": (keep * rho).sum() / num_tokens,  # ρ_it, or GSPO's s_i on each token
            "num_tokens": n_tok,  # this call's masked tokens
        }
        stats |= {} if weight is None else {"weight_mean": (keep * w).sum() / num_tokens}  # --tis
    return total, stats


# ----------------------------------------------------------------------------- notes
# The facts behind the choices above, for a second reading; the tests named prove them with numbers.
#
# The variants (train.py's flags) and the dicts that name them:
#     --kl     KL_KINDS  k3 (the paper's), k1, k2: per-token estimators of KL(π‖π_ref)
#     --agg    AGGS      per_answer_mean (the paper's "grpo"), token_mean ("dapo"), constant_norm ("dr_grpo")
#     --ratio  RATIOS    token_ratio (ρ_it, the paper's), sequence_ratio (GSPO's one ratio per answer, "seq")
#     --loss   LOSSES    clipped_surrogate (the paper's "clip"), cispo_surrogate (the capped ratio as a weight)
#     --tis    weight    tis_weights(): a constant per token on the policy term, for the sampler's gap
#
# k3's clamp. k3 clamps log(π_ref/π_θ) to [-20, 20] before its exp, as verl does: beyond it the term is constant and
# passes no gradient. verl also caps k3 at 10; nanogrpo does not.
#
# No dual clip. verl's clip_ratio_c = 3 bounds -ρA at 3·|A| when A < 0; clipped_surrogate has no such bound: a ratio
# far above 1 + ε_high with A < 0 keeps its whole ρA.
#
# Entropy (completion_entropy). Its mean over an answer falls as the policy grows sure of itself ("entropy
# collapse"); train.py logs the step's mean.
#
# What pg_loss shows (tests/test_grpo.py). At ρ ≡ 1 every token's surrogate is A_i, so under agg="grpo" the policy
# part is pg_loss = -1/num_seqs Σ_i A_i: 0 up to rounding when each group's advantages sum to 0 (methods mean, std,
# loo, dr_grpo) and the call holds whole groups (or its micro-batches are summed). Under "dapo" and "dr_grpo" an
# answer weighs by its length (-Σ_i |o_i|·A_i / denominator), so pg_loss is in general not 0 when lengths differ
# within a group; nor with method "none", nor after the first of μ > 1 updates, nor under loss="cispo" (its value is
# A·log π, not A). Where it is 0 its gradient still is not: read the reward, not the loss.
#
# The KL estimators' gradients (tests/test_grpo.py for one token, tests/test_theory.py for two). kl_penalty's
# one-step facts hold for the estimator alone, and inside the loss only while a token's weight does not depend on the
# sampled answers: agg="dr_grpo", or answers of one length. When EOS decides the length, 1/|o_i| ("grpo") and
# 1/num_tokens ("dapo") depend on the tokens, and the facts fail even for the first token: k1's expected loss
# gradient is β·∇E[1/|o|] under "grpo" and β·∇E[1/num_tokens] under "dapo" (a push toward longer answers), and k2's
# and k3's are not multiples of the one-step gradients. Over whole answers the prefix is itself sampled from π_θ,
# and no per-token loss differentiates that sampling: with a constant weight the token sum's expected gradient is
# Σ_t E_{o<t ~ π}[∇KL_t] (KL_t: of the next-token distributions at the prefix, in k2's direction or k3's), which is
# neither sequence-level ∇KL: k3's first-token part is ∇KL(π_ref‖π)'s, k2's last-token part ∇KL(π‖π_ref)'s. Σ_t k1_t
# as a reward (advantage -Σ_t k1_t, beta=0; RLHF-PPO's placement) gives the sequence-level ∇KL(π‖π_ref) exactly, with
# a constant weight. The KL term is not importance-weighted, as in DeepSeekMath: with μ > 1 its tokens come from
# π_old and even the one-step expected gradient is in general neither KL's. Weighing each token's term by
# (π/π_old).detach() (Zhang et al. 2025) restores the on-policy gradient for one-token answers; over longer answers
# the prefix came from π_old too: at a constant weight the per-token ratio restores the first token only and the
# cumulative ratio Π_{s≤t} π/π_old restores all; under "grpo" 1/|o_i| depends on later tokens and only the whole
# answer's ratio does. To add such a term, see aggregate().
#
# Expected gradients and answer length (μ = 1, beta = 0; tests/test_theory.py, lengths 1-3). With answers of one
# length L every aggregation divides by a constant; with lengths that differ:
#   dr_grpo  constant: advantage loo (or none) gives exactly ∇J/max_len, mean (1 - 1/G)·∇J/max_len;
#   grpo     1/|o_i| depends on the answer: each answer's push (up if A_i > 0, down if A_i < 0) is divided by its
#            length, so of the answers that beat their group the short ones gain most, and of those that lose the
#            long ones lose least (the length bias Dr. GRPO removes). With loo the expected gradient is
#            ∇E[(r - c)/|o|] at c = E[r] held fixed, for every G; with none ∇E[r/|o|];
#   dapo     1/Σ_j |o_j| depends on all the step's sampled lengths: biased, by an amount that depends on G; it would
#            be ∇J/E|o| with loo if the token count were the constant num_seqs·E|o|.
# mean is (1 - 1/G)·loo answer by answer (advantage.py), so its result is (1 - 1/G)·loo's everywhere.
#
# Dead groups (all rewards equal, so advantage 0: advantage.py; tests/test_theory.py) add nothing to the policy part, so
# at beta = 0 they teach nothing; but with beta > 0 their tokens still get the KL term's gradient (at a constant weight,
# in expectation a pull toward π_ref under k2 and k3 and none under k1), and under every aggregation they still count in
# the denominators: the live groups' policy gradient shrinks with the live share of the step (by exactly the live
# fraction of sequences under "grpo" and "dr_grpo", of tokens under "dapo"). DAPO's dynamic sampling refills the batch
# with live groups instead: train.py --dynamic K, for at most K rounds; groups still dead then are trained and counted
# as above. DAPO's other settings: README's table of the literature's variants.
#
# GSPO (tests/test_grpo.py). Every token of o_i carries min(s_i·A_i, clip(s_i)·A_i), weighed by the aggregation as
# ρ_it·A_i would be (agg="grpo": GSPO's 1/G Σ_i). On-policy (μ = 1) s_i ≡ 1 and ∇s_i = 1/|o_i| Σ_t ∇log π_it, so it
# equals GRPO, loss and gradient, under every aggregation; it differs only after the first of μ > 1 updates, where
# the paper also clips far tighter (clip_eps=3e-4, clip_eps_high=4e-4).
#
# CISPO (tests/test_grpo.py). ∇[sg(w)·A·log π] = w·A·∇log π, and PPO's ∇[ρ·A] = ρ·A·∇log π where its clip does not
# bind: on every token that CISPO does not cap and PPO does not clip (at μ = 1 every token, ρ ≡ 1) the two gradients
# are equal, under every aggregation and both ratios. Where PPO's clip binds, its token gets no gradient; CISPO's
# keeps one, with w capped at 1+ε_high (and no lower bound: below 1-ε_low the weight is ρ itself). MiniMax-M1 divides
# the sum by the step's token count (agg="dapo"); under the default per-answer mean each token's gradient is
# Σ_j |o_j| / (N·|o_i|) times that (tests/test_theory.py).
