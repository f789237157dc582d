"""Data parallel: K ranks, each with its share of the prompts, make the same update as one process with all of
them, because grpo_loss is given the step's denominators (summed over ranks) and the gradients are summed over
ranks, as train.py does. Two gloo processes on the CPU; the end-to-end torchrun run is in tests/test_train.py."""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import advantage
import grpo
import sample
from model import GPT, GPTConfig

B, G, AGGS = 4, 2, grpo.AGGS  # 4 prompts of 2 answers: 2 prompts (4 rows) per rank with 2 ranks


def fixed_rollout():
    """A rollout whose prompts and answers have different lengths, and made-up rewards with live groups."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (3, 5, 2, 4) for _ in range(G)]
    answers = [torch.randint(0, 256, (n,), generator=g).tolist() + [256] for n in (1, 4, 2, 6, 3, 3, 5, 1)]
    rewards = torch.tensor([1.0, 0.0, 0.2, 1.0, 0.0, 0.0, 1.0, 0.5])  # (B*G,) the third group is dead
    return sample.teacher_rollout(prompts, answers, eos_id=256), rewards


def update(rank, world, agg):
    """One GRPO step (μ = 2, β > 0) on this rank's rows of the fixed rollout; returns the updated parameters."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, vocab_size=257, n_layer=1, n_head=2, n_embd=16)).double()  # float64:
    ref = GPT(GPTConfig(block_size=32, vocab_size=257, n_layer=1, n_head=2, n_embd=16)).double()  # exact sums
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    roll, rewards = fixed_rollout()
    rows = slice(rank * B * G // world, (rank + 1) * B * G // world)  # whole groups: rows b*G .. b*G+G-1
    tokens, mask, cmask = roll.tokens[rows], roll.mask[rows], roll.completion_mask[rows]
    adv = advantage.group_advantages(rewards[rows], G, method="std")
    num_tokens = cmask.sum().double()
    if world > 1:
        dist.all_reduce(num_tokens)  # the step's token count, over all ranks
    totals = dict(num_seqs=B * G, num_tokens=num_tokens, max_len=roll.completion_mask.shape[1])
    at = grpo.scoring_columns(roll.prompt_len)
    ref_logp = grpo.completion_logprobs(ref(tokens, mask, logits_at=at), tokens, roll.prompt_len)
    old = None
    for _ in range(2):
        opt.zero_grad()
        logp = grpo.completion_logprobs(model(tokens, mask, logits_at=at), tokens, roll.prompt_len)
        old = logp.detach() if old is None else old
        loss, _ = grpo.grpo_loss(logp, old, ref_logp, adv, cmask, beta=0.04, agg=agg, **totals)
        loss.backward()
        for q in model.parameters():
            if world > 1:
                dist.all_reduce(q.grad)  # summed, not averaged: the denominators are already the step's
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return [q.detach().clone() for q in model.parameters()]


def worker(rank, world, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    result = {agg: update(rank, world, agg) for agg in AGGS}
    if rank == 0:
        torch.save(result, out)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)  # as train.py: torch's gloo threads can abort (SIGABRT) the interpreter's ordinary shutdown


def test_two_ranks_make_the_one_process_update_in_every_aggregation(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "ranks.pt")
    mp.spawn(worker, args=(2, port, out), nprocs=2, join=True)
    two = torch.load(out, weights_only=True)
    torch.manual_seed(0)
    start = list(GPT(GPTConfig(block_size=32, vocab_size=257, n_layer=1, n_head=2, n_embd=16)).double().parameters())
    for agg in AGGS:
        one = update(0, 1, agg)
        moved = max((a - b).abs().max().item() for a, b in zip(one, start))
        gap = max((a - b).abs().max().item() for a, b in zip(one, two[agg]))
        assert gap < 1e-9 < 1e-3 < moved, (agg, gap, moved)
