"""
sample.py: draw G completions per prompt with a KV cache, o_i ~ π_θ_old(·|q), i = 1..G, as a Rollout.

The B prompts are left-padded and prefilled ONCE; then N = B*G rows (row b*G + g: completion g of prompt b) decode
one token per step until all have emitted EOS, or for max_new_tokens steps (T, the steps taken). Shapes: model.py.
Our choices, where DeepSeekMath states none: a temperature τ, optional top-k; π_old's log-probs are not taken from
here (train.py's docstring says why). Further on: the fast decoders, pass@k, maj@k, evaluate() and a command line.
"""

import math
from collections import Counter
from dataclasses import dataclass, fields
from fractions import Fraction

import torch
import torch.nn.functional as F

from model import best_device, left_pad

DECODERS = ("plain", "static", "graph")


@dataclass
class Rollout:
    """N rows of completions: generate()'s, teacher_rollout()'s or join()'s. `mask` is what the trainer passes to
    model() to rerun the same forward (grpo.score: the log-probs of the sampled tokens under π_θ, π_old, π_ref).
    True after EOS is safe: attention is causal, so those columns never change an earlier position's logits, and
    completion_mask keeps them out of the loss. select, join and micro_batches pick, join and split rows (DAPO's
    dynamic sampling needs the first two). A model that has diverged does not stop generate: non-finite logits give
    some token and a non-finite value in `logprobs`, for the caller to check once per step."""

    tokens: torch.Tensor  # (N, P+T) long: left-padded prompt, then the completion; eos_id after a row's first EOS
    mask: torch.Tensor  # (N, P+T) bool: False on the left padding only, so True after EOS too
    prompt_len: int  # P
    completion_mask: torch.Tensor  # (N, T) bool: each sampled token up to and including the first EOS (not after),
    # taken from the sampling loop's `finished` state, never from token ids; the loss casts it to its own dtype
    truncated: torch.Tensor  # (N,) bool: no EOS within max_new_tokens
    logprobs: torch.Tensor  # (N, T) float32: each sampled token's log-prob under the distribution it was drawn from,
    # 0 after EOS; non-finite where the model's logits were

    @property
    def completion(self):
        return self.tokens[:, self.prompt_len :]  # (N, T)

    @property
    def lengths(self):
        """Tokens in each completion, the first EOS included: |o_i|."""
        return self.completion_mask.sum(dim=1)  # (N,) long

    def micro_batches(self, size):
        """Row slices of at most `size` rows (0: one slice of all N) covering rows 0..N-1 in order."""
        N = len(self.tokens)
        size = size or max(N, 1)
        return [slice(i, min(i + size, N)) for i in range(0, N, size)]

    def select(self, rows):
        """The rows that `rows` picks, an (n,) long index or an (N,) bool mask, as a Rollout of n rows with the
        same P and T. Groups stay whole and contiguous only if `rows` keeps them so: that is the caller's part."""
        rows = torch.as_tensor(rows, device=self.tokens.device)  # (n,) long or (N,) bool
        kept = {f.name: getattr(self, f.name)[rows] for f in fields(self) if f.name != "prompt_len"}  # (n, ...) each
        return Rollout(prompt_len=self.prompt_len, **kept)

    @classmethod
    def join(cls, rollouts, eos_id):
        """The rows of `rollouts` (from generate() calls with their own P_i and T_i) one after the other, as one
        Rollout with P = max P_i, T = max T_i. A prompt gets P - P_i more columns of left padding (eos_id, mask
        False), a completion T - T_i more on the right, laid out as after an EOS (eos_id, mask True,
        completion_mask False, logprobs 0); truncated is kept. Columns come only before a row's first real token
        or after its last sampled one, so each row keeps its lengths and its completion log-probs under the model
        (tests/test_sample.py). P + T is at most max P_i + max_new_tokens: it fits if the calls share that."""
        if not rollouts:
            raise ValueError("Rollout.join: give at least one rollout")
        P = max(r.prompt_len for r in rollouts)
        T = max(r.completion.shape[1] for r in rollouts)
        tokens = []  # each rollout's, padded to (n_i, P+T)
        mask = []
        completion_mask = []  # (n_i, T) each
        logprobs = []
        for r in rollouts:
            left = P - r.prompt_len  # more left padding
            right = T - r.completion.shape[1]  # more columns after the end
            tokens.append(F.pad(r.tokens, (left, right), value=eos_id))  # (n_i, P+T)
            mask.append(F.pad(F.pad(r.mask, (left, 0), value=False), (0, right), value=True))  # (n_i, P+T)
            completion_mask.append(F.pad(r.completion_mask, (0, right), value=False))  # (n_i, T)
            logprobs.append(F.pad(r.logprobs, (0, right), value=0.0))  # (n_i, T)
        return cls(
            tokens=torch.cat(tokens),  # (N, P+T), N = Σ n_i
            mask=torch.cat(mask),  # (N, P+T)
            prompt_len=P,
            completion_mask=torch.cat(completion_mask),  # (N, T)
            truncated=torch.cat([r.truncated for r in rollouts]),  # (N,)
            logprobs=torch.cat(logprobs),  # (N, T)
        )


def completions_text(rollout, enc):
    """Each completion decoded up to, not including, the token that ended it (bad UTF-8 -> U+FFFD). An id the
    tokenizer cannot decode (_decodes) decodes to nothing."""
    texts = []
    V = enc.n_vocab  # a property: read once, not per token
    for ids, n, trunc in zip(rollout.completion.tolist(), rollout.lengths.tolist(), rollout.truncated.tolist()):
        known = [i for i in ids[: n if trunc else n - 1] if i < V]
        try:
            texts.append(enc.decode(known, errors="replace"))
        except KeyError:  # tiktoken's "Invalid token for decoding": keep the ids it decodes one by one
            texts.append(enc.decode([i for i in known if _decodes(enc, i)], errors="replace"))
    return texts


def _decodes(enc, i):
    """Whether token id `i` is one of `enc`'s (tiktoken raises KeyError for an id it lacks). completions_text drops
    an id past the vocabulary (a row of an embedding padded past it, as Qwen's) and, looked for only when decoding
    fails, one inside it that `enc` lacks (a gap in a checkpoint's special tokens' ids)."""
    try:
        enc.decode_single_token_bytes(i)
    except KeyError:
        return False
    return True


def teacher_rollout(prompts, completions, eos_id=256, device="cpu"):
    """A Rollout of GIVEN completions (token lists, a teacher's solutions ending in EOS), laid out as
    generate() lays out sampled ones, so that supervised fine-tuning scores them with the same log-prob
    code as GRPO (train.py's warm start). Nothing is sampled: logprobs are 0, and completion_mask is True
    on each given token, from the lengths of the lists; the columns after a short one hold eos_id."""
    idx, mask = left_pad(prompts, eos_id)  # (N, P), (N, P)
    N = len(completions)
    T = max(len(c) for c in completions)
    completion = torch.full((N, T), eos_id, dtype=torch.long)  # (N, T)
    completion_mask = torch.zeros(N, T, dtype=torch.bool)  # (N, T)
    for n, c in enumerate(completions):
        completion[n, : len(c)] = torch.tensor(c, dtype=torch.long)
        completion_mask[n, : len(c)] = True
    return Rollout(
        tokens=torch.cat([idx, completion], dim=1).to(device),  # (N, P+T)
        mask=torch.cat([mask, torch.ones(N, T, dtype=torch.bool)], dim=1).to(device),  # (N, P+T)
        prompt_len=idx.shape[1],
        completion_mask=completion_mask.to(device),  # (N, T)
        truncated=torch.tensor([c[-1] != eos_id for c in completions], device=device),  # (N,)
        logprobs=torch.zeros(N, T, device=device),  # (N, T)
    )


def sample_token(logits, temperature=1.0, top_k=None, generator=None):
    """Draw one token per row. logits (N, V) -> tokens (N,) long, log-probs (N,) float32.

    The draw is an exponential race: argmax_v p_v / E_v with E_v ~ Exp(1) independent is distributed
    as p, since E_v / p_v ~ Exp(p_v) and the first of independent exponential clocks is v with
    probability p_v / Σ p. Unlike torch.multinomial it never waits for the device, so a CUDA
    graph can capture it, and NaN logits give a NaN log-prob instead of an exception.
    It takes N*V numbers from `generator` per call whatever the logits hold (none when greedy),
    and holds at most three (N, V) float32 tensors at a time.
    τ = 0 is greedy (argmax), and then the log-prob is log_softmax(logits) at τ = 1 without top-k: the greedy
    token's log-prob under the untempered model.
    """
    if temperature == 0:
        logits = logits.float()  # (N, V)
        tok = logits.argmax(dim=-1)  # (N,)
        logp = F.log_softmax(logits, dim=-1)  # (N, V) at τ = 1, no top-k: see the docstring
        return tok, logp.gather(1, tok[:, None]).squeeze(1)
    logits = logits.float() / temperature  # (N, V) softmax in float32, even under autocast
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (N, 1) k-th largest; ties at it are kept
        logits.masked_fill_(logits < kth, float("-inf"))  # (N, V)
    logp = F.log_softmax(logits, dim=-1)  # (N, V)
    race = torch.empty_like(logp).exponential_(generator=generator)  # (N, V) E ~ Exp(1)
    race = race.clamp_(min=torch.finfo(race.dtype).tiny).log_().neg_().add_(logp)  # (N, V) log(p / E), in place
    tok = race.argmax(dim=-1)  # (N,)
    return tok, logp.gather(1, tok[:, None]).squeeze(1)


def _check_generate_args(model, prompts, G, max_new_tokens, temperature, top_k, decode):
    """generate's arguments, or ValueError; returns B, P and the model's device."""
    B = len(prompts)
    P = max((len(p) for p in prompts), default=0)
    if B == 0 or min(len(p) for p in prompts) == 0:
        raise ValueError("generate: every prompt needs at least one token")
    if G < 1 or max_new_tokens < 1:
        raise ValueError(f"generate: G ({G}) and max_new_tokens ({max_new_tokens}) must be >= 1")
    if temperature < 0 or (top_k is not None and top_k < 1):
        raise ValueError(f"generate: need temperature >= 0 and top_k >= 1 (got {temperature}, {top_k})")
    if P + max_new_tokens > model.config.block_size:
        raise ValueError(
            f"longest prompt ({P} tokens) + max_new_tokens ({max_new_tokens}) exceeds block_size "
            f"({model.config.block_size}); shorten the prompts or lower max_new_tokens"
        )
    device = next(model.parameters()).device
    if decode not in DECODERS:
        raise ValueError(f"generate: unknown decode '{decode}'; choose one of {', '.join(DECODERS)}")
    if decode == "graph" and device.type != "cuda":
        raise ValueError(
            f"generate: decode='graph' captures CUDA graphs, and the model is on {device.type}; "
            f"use decode='static' or 'plain'"
        )
    return B, P, device


@torch.no_grad()
def generate(
    model, prompts, G, max_new_tokens, temperature=1.0, top_k=None, eos_id=256, generator=None, decode="plain"
):
    """Sample G completions for each of the B token lists in `prompts`; returns a Rollout.

    temperature τ > 0 samples softmax(logits / τ), τ = 0 is greedy; top_k keeps the k largest logits (None: all).
    eos_id: the id, or list of ids (plumbing/tokenizer.stop_ids), that end a completion; the first pads. A seeded
    torch.Generator on the model's device makes it reproducible (None: the global RNG). decode: "plain" (below),
    "static" or "graph" (the fast path's section). Sampling runs in float32, under the caller's autocast or not."""
    B, P, device = _check_generate_args(model, prompts, G, max_new_tokens, temperature, top_k, decode)
    N = B * G
    ends = eos_id if isinstance(eos_id, list) else [eos_id]  # the ids that end a completion
    eos_id = ends[0]  # pads
    stops = torch.tensor(ends, device=device)  # (n_stops,)

    # left-pad the B prompts and prefill them once
    idx, mask = left_pad(prompts, eos_id, device)  # (B, P), (B, P)
    cache = model.new_cache(P + max_new_tokens, static=decode != "plain")
    logits = model(idx, mask, cache=cache, logits_at=slice(-1, None))[:, 0]  # (B, V) each prompt's next token
    cache.repeat_interleave(G)  # B rows -> N rows, row b*G+g from row b
    logits = logits.repeat_interleave(G, dim=0)  # (N, V)

    if decode == "plain":  # the reference loop
        finished = torch.zeros(N, dtype=torch.bool, device=device)  # (N,) has emitted EOS
        toks = []  # T entries of (N,) each
        logps = []
        alive = []
        for t in range(max_new_tokens):
            tok, logp = sample_token(logits, temperature, top_k, generator)  # (N,), (N,)
            tok = tok.masked_fill(finished, eos_id)  # finished rows keep emitting EOS ...
            logp = logp.masked_fill(finished, 0.0)  # ... which is not sampled, so log-prob 0
            toks.append(tok)
            logps.append(logp)
            alive.append(~finished)  # (N,) this step's token counts: the row had not finished before it
            finished = finished | torch.isin(tok, stops)
            if t == max_new_tokens - 1 or bool(finished.all()):  # the one host sync per step
                break
            logits = model(tok[:, None], cache=cache)[:, -1]  # (N, V)
        completion = torch.stack(toks, 1)  # (N, T)
        logp = torch.stack(logps, 1)  # (N, T)
        alive = torch.stack(alive, 1)  # (N, T)
    else:
        completion, logp, alive, finished = decode_static(
            model, cache, logits, max_new_tokens, temperature, top_k, eos_id, stops, generator, graph=decode == "graph"
        )

    tokens = torch.cat([idx.repeat_interleave(G, dim=0), completion], dim=1)  # (N, P+T)
    mask = torch.cat([mask.repeat_interleave(G, dim=0), torch.ones_like(completion, dtype=torch.bool)], 1)  # (N, P+T)
    return Rollout(tokens=tokens, mask=mask, prompt_len=P, completion_mask=alive, truncated=~finished, logprobs=logp)


# ----------------------------------------------------------------------------- the fast path: "static" and "graph"
# Three decoders (generate's `decode`, train.py's --decode). For the same seed they give the same tokens, masks,
# T and generator state after the call, and log-probs equal up to float rounding (tests/test_sample.py; in
# float32: under bf16 autocast, rounding differs more and a rare token may too):
#     "plain"   the loop in generate(), on model.KVCache's dynamic cache: every step has a new shape (the cache
#               grows) and asks the device whether every row has finished. Read it first: it is the reference.
#     "static"  decode_static(): the same steps on the static cache (KVCache(static=True)), each step the same
#               computation on the same buffers, and the host asks only every SYNC_EVERY steps.
#     "graph"   "static" with one decode step captured once as a CUDA graph and replayed (CUDA only): on a GPU a
#               small model is bound by kernel launches and host waits, not arithmetic (tests/bench_sample.py).
SYNC_EVERY = 8  # steps per "all finished?" check (a wait for the device); up to SYNC_EVERY - 1 run past the end
GRAPH_WARMUP = 2  # steps run eagerly on a side stream before capture, which CUDA graphs require


def decode_static(model, cache, logits, max_new_tokens, temperature, top_k, eos_id, stops, generator, graph=False):
    """The plain loop's steps with fixed shapes, on a static cache already prefilled and repeated to N rows.

    logits (N, V) predict the first new token. Returns completion (N, T) long, logprobs (N, T)
    float32, completion mask (N, T) bool and finished (N,) bool, equal to the plain loop's
    (T included, and the generator's state after it).
    """
    N = logits.shape[0]
    dev = logits.device
    logits = logits.clone()  # (N, V) this step's logits
    finished = torch.zeros(N, dtype=torch.bool, device=dev)  # (N,) has emitted EOS
    toks = torch.full((N, max_new_tokens), eos_id, dtype=torch.long, device=dev)  # (N, T_max)
    logps = torch.zeros(N, max_new_tokens, device=dev)  # (N, T_max) float32
    alive = torch.zeros(N, max_new_tokens, dtype=torch.bool, device=dev)  # (N, T_max)
    t = torch.zeros(1, dtype=torch.long, device=dev)  # (1,) this step's column

    def step():  # the plain loop's body, writing in place, with the step's column t on the device
        tok, logp = sample_token(logits, temperature, top_k, generator)  # (N,), (N,)
        tok = tok.masked_fill(finished, eos_id)
        logp = logp.masked_fill(finished, 0.0)
        toks.index_copy_(1, t, tok[:, None])
        logps.index_copy_(1, t, logp[:, None])
        alive.index_copy_(1, t, ~finished[:, None])
        finished.logical_or_(torch.isin(tok, stops))
        logits.copy_(model(tok[:, None], cache=cache)[:, -1])  # the next step's (unused after the last step)
        t.add_(1)

    if generator is None:  # the global RNG, as an object whose state can be read and set back
        generator = global_generator(dev)
    run = graphed(step, generator) if graph else step
    states = []  # the generator's state after each step (read on the host: no sync)
    for i in range(max_new_tokens):
        run()
        if generator is not None:
            states.append(generator.get_state())
        if (i + 1) % SYNC_EVERY == 0 and bool(finished.all()):  # the host sync, once per SYNC_EVERY steps
            break
    T = int(alive.any(dim=0).sum())  # the steps where some row was still running: the plain loop's T
    if generator is not None:
        generator.set_state(states[T - 1])  # forget the numbers drawn by the steps after T
    return toks[:, :T], logps[:, :T], alive[:, :T], finished


def global_generator(device):
    """The generator that generator=None draws from on `device`; None where torch does not expose it."""
    if device.type == "cuda":
        return torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
    return torch.default_generator if device.type == "cpu" else None


def graphed(step, generator):
    """`step` as a function that runs one step per call: eagerly on a side stream for the first
    GRAPH_WARMUP calls, then captured once as a CUDA graph (reading and writing the same buffers)
    and replayed. CUDA graph replay advances `generator` exactly as the eager step does."""
    side = torch.cuda.Stream()
    cuda_graph = None
    calls = 0

    def run():
        nonlocal cuda_graph, calls
        calls += 1
        if calls <= GRAPH_WARMUP:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step()
            torch.cuda.current_stream().wait_stream(side)
            return
        if cuda_graph is None:
            cuda_graph = torch.cuda.CUDAGraph()
            cuda_graph.register_generator_state(generator)  # replays take this generator's numbers
            with torch.cuda.graph(cuda_graph):
                step()  # recorded, not run
        cuda_graph.replay()

    return run


# ----------------------------------------------------------------------------- measuring samples: pass@k and maj@k
# pass@k and maj@k of the G samples of each problem, both exact averages over all k-subsets of its n samples. What is
# right, and what a sample answers, is the task's: evaluate() and sampled_metrics() take a judge, the run's task
# (tasks/) or any object with its two methods verdict(problem, completion) -> bool and answer(problem, completion) ->
# the value maj@k votes on, so this file imports no task and no verifier. evaluate() gives pass@k, maj@k and the greedy
# accuracy on held-out problems; rollout_stats() what a training step's samples look like. DeepSeekMath found that RL
# lifts maj@k but not pass@k: it makes the right answer likelier among the samples rather than adding new ones.


def pass_at_k(n, c, k):
    """Unbiased pass@k (Chen et al. 2021) from n samples of which c are correct: 1 - C(n-c, k) / C(n, k),
    the fraction of k-subsets holding a correct sample, computed exactly and then rounded to a float."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def _maj_counts(answers, gold):
    """maj@k for every k = 1..n as exact Fractions: the score of a majority vote averaged over all k-subsets of
    the n answers, counted over the values' multiplicities instead of enumerating the subsets.

    The vote scores only when gold's value wins or ties. So for each t, the number of gold answers a subset
    holds, count the ways to pick the rest: every other value at most t times, j of them exactly t (a tie of
    j + 1 values scores 1 / (j + 1)). ways[j][s] counts the picks of s answers from the values seen at least
    t times; abstentions and values seen fewer than t times fill the rest freely (C(free, k - t - s) ways)."""
    n = len(answers)
    votes = Counter(v for v in answers if v is not None)
    a = votes.pop(gold, 0) if gold is not None else 0
    by_tie = [[0] * (len(votes) + 1) for _ in range(n + 1)]  # by_tie[k][j]: k-subsets where gold ties j others
    for t in range(1, a + 1):
        rivals = [r for r in votes.values() if r >= t]
        ways = [[1]]
        for r in rivals:
            below = [math.comb(r, b) for b in range(t)]  # ways to pick b < t of this value
            exactly = math.comb(r, t)
            new = [[0] * (len(ways[0]) + t) for _ in range(len(ways) + 1)]
            for j, row in enumerate(ways):
                for s, w in enumerate(row):
                    if w:
                        for b, c in enumerate(below):
                            new[j][s + b] += w * c
                        new[j + 1][s + t] += w * exactly
            ways = new
        fill = [math.comb(n - a - sum(rivals), i) for i in range(n + 1)]
        for j, row in enumerate(ways):
            picks = [(s, w * math.comb(a, t)) for s, w in enumerate(row) if w]
            for k in range(t, n + 1):
                by_tie[k][j] += sum(w * fill[k - t - s] for s, w in picks if s <= k - t)
    return [sum(Fraction(c, j + 1) for j, c in enumerate(by_tie[k]) if c) / math.comb(n, k) for k in range(1, n + 1)]


def maj_at_k(answers, gold, k):
    """maj@k of one problem from its n >= k answers (the task's values: Fractions for a number task, so '0.5' and
    '1/2' are one vote; None abstains) and the right one (gold, None: nothing is right): the expected score of a
    majority vote over k answers drawn without replacement, i.e. averaged exactly over all k-subsets. No
    votes scores 0. Tie rule: a tie among m values scores the fraction of them equal to gold (1/m or 0),
    the expected score of a random tie-break. maj@1 is the fraction of answers equal to gold, which is
    pass@1 whenever correctness is judged by the same answers (abstentions are wrong in both)."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"need 1 <= k <= {len(answers)} answers, got k={k}")
    return float(_maj_counts(answers, gold)[k - 1])


def sampled_metrics(completions, problems, G, judge):
    """pass@k and maj@k for k = 1..G, averaged over problems, from G sampled completions per problem in contiguous
    groups (completion b*G + g answers problems[b]); sampled_right, each problem's right ones. The judge (a task)
    decides: judge.verdict(problem, completion) -> bool, judge.answer(problem, completion) -> the value voted on
    (hashable) or None; a right completion's answer is the problem's one right value, which maj@k counts as gold."""
    B = len(problems)
    verdicts = [judge.verdict(problems[i // G], c) for i, c in enumerate(completions)]
    right = torch.tensor(verdicts, dtype=torch.bool).view(B, G)  # (B, G)
    answers = [judge.answer(problems[i // G], c) for i, c in enumerate(completions)]
    golds = [None] * B  # each problem's right value, when a sample gives it (else no vote is right)
    for i, (a, v) in enumerate(zip(answers, verdicts)):
        if v:
            golds[i // G] = a
    maj = [_maj_counts(answers[b * G : (b + 1) * G], golds[b]) for b in range(B)]
    out = {"sampled_right": right.sum(dim=1).tolist()}  # (B,) per problem, for paired comparisons
    for k in range(1, G + 1):
        out[f"pass@{k}"] = sum(pass_at_k(G, int(c), k) for c in right.sum(dim=1)) / B
        out[f"maj@{k}"] = float(sum(m[k - 1] for m in maj) / B)
    return out


def rollout_stats(right, lengths, truncated):
    """What a step's samples look like, as 0-dim tensors: acc (the share right, by the task's verdict), len (mean
    tokens, EOS included), len_right and len_wrong (the same over the right and the wrong ones; nan when there are
    none), truncated (the share cut at max_new_tokens). right (N,) bool; lengths, truncated (N,) numbers."""
    lengths = lengths.float()  # (N,)
    return {
        "acc": right.float().mean(),
        "len": lengths.mean(),
        "len_right": lengths[right].mean(),
        "len_wrong": lengths[~right].mean(),
        "truncated": truncated.float().mean(),
    }


@torch.no_grad()
def evaluate(
    model,
    prompts,
    problems,
    G,
    max_new_tokens,
    enc,
    judge,
    temperature=1.0,
    eos_id=256,
    batch=64,
    generator=None,
    decode="plain",
):
    """A policy on held-out problems (prompts as token lists, and the problems they pose): greedy accuracy (one
    greedy answer per problem) with its standard error sqrt(acc (1 - acc) / n), and pass@k / maj@k for
    k = 1..G from G samples at `temperature`, generated `batch` prompts at a time. Counted with the judge's (the task's)
    verdict and answer (sampled_metrics), never with a reward's value. Per problem, for paired comparisons of two
    policies on the same problems: greedy_right (1 if its greedy answer is right) and sampled_right (how many of its G
    samples are)."""
    greedy = []  # one greedy answer per problem
    samples = []  # G sampled answers per problem
    options = dict(eos_id=eos_id, decode=decode)
    for i in range(0, len(prompts), batch):
        chunk = prompts[i : i + batch]
        greedy += completions_text(generate(model, chunk, 1, max_new_tokens, 0, **options), enc)
        roll = generate(model, chunk, G, max_new_tokens, temperature, generator=generator, **options)
        samples += completions_text(roll, enc)
    greedy_right = torch.tensor([judge.verdict(pb, o) for pb, o in zip(problems, greedy)], dtype=torch.bool)  # (n,)
    acc = greedy_right.float().mean().item()
    se = math.sqrt(acc * (1 - acc) / len(problems))
    scores = {"greedy_acc": acc, "greedy_acc_se": se, "greedy_right": greedy_right.int().tolist()}
    return {**scores, **sampled_metrics(samples, problems, G, judge)}


if __name__ == "__main__":  # python sample.py --ckpt out/ckpt.pt "Ann has 3 pens, gets 2 more. How many pens now?"
    import argparse
    import sys

    import tasks
    from plumbing.checkpoint import LoadError, load_checkpoint, load_model
    from plumbing.tokenizer import TEMPLATES, choose_template, encode_prompt, stop_ids, template_name

    about = "Sample G completions per question from a checkpoint (train.py's or GPT-2's) and show each answer read."
    p = argparse.ArgumentParser(description=about, allow_abbrev=False)  # --temp is not --temperature
    p.add_argument("question", nargs="+", help="questions; the checkpoint's prompt template is applied")
    p.add_argument("--ckpt", default="out/ckpt.pt", help="a nanogrpo checkpoint, or a GPT-2 file or folder")
    p.add_argument("--G", type=int, default=4, help="completions per question")
    p.add_argument("--max_new_tokens", type=int, default=64, help="completion length limit")
    p.add_argument("--temperature", type=float, default=1.0, help="0 is greedy")
    p.add_argument("--top_k", type=int, default=None, help="sample among the k most likely tokens only")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sampling generator")
    p.add_argument("--device", default=best_device(), help="cuda, mps or cpu")
    p.add_argument(
        "--prompt", help=f"a template holding {{question}}, or one of {', '.join(TEMPLATES)}; None: the file's"
    )
    p.add_argument("--show_tokens", action="store_true", help="print each prompt's token pieces")
    args = p.parse_args()
    try:
        device = torch.device(args.device)
    except RuntimeError:
        sys.exit(f"error: --device {args.device} is not a device name; use --device cpu, cuda or mps")
    n = {"cpu": 1, "cuda": torch.cuda.device_count(), "mps": int(torch.backends.mps.is_available())}.get(device.type, 0)
    if n <= (device.index or 0):  # checked here, as torch would stop with a traceback
        use = "--device cuda or cpu" if torch.cuda.device_count() else "--device cpu"
        sys.exit(f"error: --device {args.device}: torch {torch.__version__} sees {n} such device(s); use {use}")
    try:
        model, enc, prompt = load_model(args.ckpt, device=device)
        try:  # a training checkpoint's flags name its task; Hugging Face's files and a warm start hold none
            saved = load_checkpoint(args.ckpt, mmap=True).get("args")
        except LoadError:
            saved = None
        task = tasks.TASKS[saved["task"]](argparse.Namespace(**saved)) if saved and "task" in saved else tasks.Task()
        prompt = choose_template(args.prompt, prompt, enc, args.ckpt)  # --prompt, else the file's (chat) format
        prompts = [encode_prompt(enc, prompt, q) for q in args.question]  # a special token's text in q stays text
        questions = [task.problem(q) for q in args.question]  # what each answer is read against
        T = max(1, min(args.max_new_tokens, model.config.block_size - max(map(len, prompts))))  # what fits
        gen = torch.Generator(device).manual_seed(args.seed)
        stops = stop_ids(model.config, enc, prompt)
        roll = generate(model, prompts, args.G, T, args.temperature, args.top_k, eos_id=stops, generator=gen)
    except (LoadError, ValueError, RuntimeError) as e:  # a bad file, flag, device or data: one line, no traceback
        sys.exit("error: " + " ".join(str(e).splitlines()))
    ending = ", ".join(repr(enc.decode([i])) for i in stops)
    print(f"template: {template_name(prompt)}; a completion ends at {ending} or after {T} tokens")
    ends = roll.completion[torch.arange(len(roll.lengths)), (roll.lengths - 1).clamp(min=0)].tolist()  # (N,) last ids
    for i, text in enumerate(completions_text(roll, enc)):
        if i % args.G == 0:
            print(f"=== {args.question[i // args.G]}")
            if args.show_tokens:
                pieces = [enc.decode_single_token_bytes(t).decode("utf-8", "replace") for t in prompts[i // args.G]]
                print("prompt pieces:", pieces)
        answer = task.answer(questions[i // args.G], text)  # the task's: a number's value, ...
        end = f"the limit of {T} tokens" if roll.truncated[i] else repr(enc.decode([ends[i]]))
        shown = None if answer is None else str(answer)
        print(f"--- sample {i % args.G + 1}: answer {shown!r}, ended by {end}\n{text}")
