"""
sample.py: draw G completions per prompt with a KV cache, o_i ~ π_θ_old(·|q), i = 1..G.

GRPO scores each completion against the others of its group, so every prompt q is
sampled G times. The B prompts are left-padded to P (the longest), prefilled ONCE as
B rows, then the cache is repeated to N = B*G rows and all rows decode one token per
step until every row has emitted EOS or max_new_tokens is reached; T <= max_new_tokens
is the number of steps taken. Row b*G + g is completion g of prompt b.

Shapes and conventions (see model.py for the shape letters and the mask convention):
    tokens          (N, P+T) long   left-padded prompt, then the completion; after a
                                    row's first EOS the columns hold eos_id (pad = EOS id)
    mask            (N, P+T) bool   False on left padding, True elsewhere, even after EOS
    completion_mask (N, T)   bool   True for each sampled token up to and including the
                                    first EOS, False after; taken from the loop's
                                    `finished` state, never from token ids
    truncated       (N,)     bool   no EOS within max_new_tokens
    logprobs        (N, T)   float32  log-prob of each sampled token under the
                                    distribution it was drawn from; 0 after EOS
`mask` is what the trainer passes to model() to rerun the same forward. Leaving it True
after EOS is safe: attention is causal, so those tokens never change the logits of any
earlier position, and completion_mask keeps them out of the loss.

Where this departs from DeepSeekMath (which samples at temperature 1 and reads π_old
off the sampler):
- we sample at a temperature τ with optional top-k: p = softmax(top_k(logits / τ));
  τ = 0 is greedy (argmax), and then logprobs hold log_softmax(logits) at τ = 1 without
  top-k, the greedy token's log-prob under the untempered model;
- the contract: the trainer recomputes π_old's log-probs with its own training forward
  (same dtype, masks and τ) and does not take them from here; `logprobs` are kept to
  check that the two agree (tests/test_sample.py) and for diagnostics.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from model import left_pad


@dataclass
class Rollout:
    tokens: torch.Tensor           # (N, P+T) long
    mask: torch.Tensor             # (N, P+T) bool, True = real token
    prompt_len: int                # P
    completion_mask: torch.Tensor  # (N, T) bool; the loss casts it to its own dtype
    truncated: torch.Tensor        # (N,) bool
    logprobs: torch.Tensor         # (N, T) float32

    @property
    def completion(self):
        return self.tokens[:, self.prompt_len:]  # (N, T)

    @property
    def lengths(self):
        """Tokens in each completion, the first EOS included: |o_i|."""
        return self.completion_mask.sum(dim=1)  # (N,) long


def completions_text(rollout, enc):
    """Each completion decoded up to, not including, its first EOS (bad UTF-8 -> U+FFFD)."""
    texts = []
    for ids, n, trunc in zip(rollout.completion.tolist(), rollout.lengths.tolist(), rollout.truncated.tolist()):
        texts.append(enc.decode(ids[:n if trunc else n - 1], errors="replace"))
    return texts


def sample_token(logits, temperature=1.0, top_k=None, generator=None):
    """Draw one token per row. logits (N, V) -> tokens (N,) long, log-probs (N,) float32."""
    logits = logits.float()  # (N, V) softmax in float32, even under autocast
    if temperature == 0:
        tok = logits.argmax(dim=-1)  # (N,)
        logp = F.log_softmax(logits, dim=-1)  # (N, V) at τ = 1, no top-k: see the docstring
        return tok, logp.gather(1, tok[:, None]).squeeze(1)
    logits = logits / temperature  # (N, V)
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (N, 1) k-th largest; ties at it are kept
        logits = logits.masked_fill(logits < kth, float("-inf"))  # (N, V)
    logp = F.log_softmax(logits, dim=-1)  # (N, V)
    tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # (N,)
    return tok, logp.gather(1, tok[:, None]).squeeze(1)


@torch.no_grad()
def generate(model, prompts, G, max_new_tokens, temperature=1.0, top_k=None, eos_id=256, generator=None):
    """Sample G completions for each of the B token lists in `prompts`; returns a Rollout.

    temperature: τ > 0 samples from softmax(logits / τ); τ = 0 is greedy.
    top_k: keep only the k largest logits (None = all).
    eos_id: ends a completion; it also pads the prompts, so it must be a valid token id.
    generator: a torch.Generator on the model's device (e.g. torch.Generator(device)),
        seeded, makes the rollout reproducible; None uses the global RNG.
    The caller may wrap this in torch.autocast; sampling itself runs in float32.
    """
    B, P = len(prompts), max((len(p) for p in prompts), default=0)
    if B == 0 or min(len(p) for p in prompts) == 0:
        raise ValueError("generate: every prompt needs at least one token")
    if G < 1 or max_new_tokens < 1:
        raise ValueError(f"generate: G ({G}) and max_new_tokens ({max_new_tokens}) must be >= 1")
    if temperature < 0 or (top_k is not None and top_k < 1):
        raise ValueError(f"generate: need temperature >= 0 and top_k >= 1 (got {temperature}, {top_k})")
    if P + max_new_tokens > model.config.block_size:
        raise ValueError(f"longest prompt ({P} tokens) + max_new_tokens ({max_new_tokens}) exceeds block_size "
                         f"({model.config.block_size}); shorten the prompts or lower max_new_tokens")
    device = next(model.parameters()).device
    N = B * G

    # left-pad the B prompts and prefill them once
    idx, mask = left_pad(prompts, eos_id)  # (B, P), (B, P)
    idx, mask = idx.to(device), mask.to(device)
    cache = model.new_cache(P + max_new_tokens)
    logits = model(idx, mask, cache=cache)[:, -1]  # (B, V) predicts each prompt's next token
    cache.repeat_interleave(G)                     # B rows -> N rows, row b*G+g from row b
    logits = logits.repeat_interleave(G, dim=0)    # (N, V)

    finished = torch.zeros(N, dtype=torch.bool, device=device)  # (N,) has emitted EOS
    toks, logps, alive = [], [], []  # T entries of (N,)
    for t in range(max_new_tokens):
        tok, logp = sample_token(logits, temperature, top_k, generator)  # (N,), (N,)
        tok = tok.masked_fill(finished, eos_id)   # finished rows keep emitting EOS ...
        logp = logp.masked_fill(finished, 0.0)    # ... which is not sampled, so log-prob 0
        toks.append(tok)
        logps.append(logp)
        alive.append(~finished)  # (N,) this step's token counts: the row had not finished before it
        finished = finished | (tok == eos_id)
        if t == max_new_tokens - 1 or bool(finished.all()):  # the one host sync per step
            break
        logits = model(tok[:, None], cache=cache)[:, -1]  # (N, V)

    completion = torch.stack(toks, dim=1)  # (N, T)
    tokens = torch.cat([idx.repeat_interleave(G, dim=0), completion], dim=1)  # (N, P+T)
    full_mask = torch.cat([mask.repeat_interleave(G, dim=0), torch.ones_like(completion, dtype=torch.bool)], dim=1)  # (N, P+T)
    return Rollout(tokens=tokens, mask=full_mask, prompt_len=P,
                   completion_mask=torch.stack(alive, dim=1),  # (N, T)
                   truncated=~finished,                        # (N,)
                   logprobs=torch.stack(logps, dim=1))         # (N, T)
