"""
train.py: warm-start a small GPT on a task, then train it with GRPO (Shao et al. 2024). One step, the loop at the end:
    0.   B problems q (task.sample); encode() puts each in the prompt template       tasks/base.py
    1-2. G completions o_i ~ π_old(·|q) each, rewards r_i (N,): rollout()           sample.py, reward.py
    3.   A_i = (r_i - mean(r)) / (std(r) + eps) within each group, (N,)             advantage.py
    4.   log π_ref (N, T) of the sampled tokens, once, without grad: score()        grpo.score
    5.   μ updates of -1/(B·G) Σ_i 1/|o_i| Σ_t [min(ρA, clip(ρ)A) - β·k3], AdamW     grpo.py
Departures from DeepSeekMath: a small GPT warm-started on a teacher that is wrong some of the time, not a 7B math
model; a rule-based verifier, not a reward model; π_old's log-probs from the first update's forward, not the
sampler's, whose KV cache and kernels differ by rounding (logp_gap), so ρ = 1 exactly at μ = 1; one reference model,
the warm start (the paper's iterative GRPO resets it). Sections headed PLUMBING teach nothing about GRPO.
"""

import argparse
import copy
import math
import os
import random
import sys
import time
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist

import advantage
import grpo
import reward
import sample
import tasks
from model import GPT, GPTConfig, best_device, bf16_supported
from plumbing import checkpoint, cli, tokenizer
from plumbing.cli import bounded, die
from plumbing.tokenizer import PROMPT, TEMPLATES, choose_template, encode_prompt, encode_text, stop_ids

# ---------------- config. PLUMBING: a learner may skip it; try not to modify it
CUDA = torch.cuda.is_available()  # the sizes follow it
sys.excepthook = cli.excepthook(tasks.DataError)  # a user's error ends in one line
p = cli.parser(__doc__.split("\n")[0])  # flags named whole; a bad one ends in one line
arg = p.add_argument
count = bounded(int, 1, 10**6)
unit = bounded(float, 0, 1)
rate = bounded(float, 0, 1, above=True)
# GRPO
arg("--G", type=bounded(int, 2, 1024), default=8, help="completions per prompt (group size)")
arg("--beta", type=bounded(float, 0, 100), default=0.04, help="KL coefficient β; 0: no π_ref")
arg("--kl", default="k3", choices=grpo.KL_KINDS, help="KL estimator (grpo.py)")
arg("--adv", default="std", choices=advantage.METHODS, help="advantage (advantage.py)")
arg("--agg", default="grpo", choices=grpo.AGGS, help="mean over tokens (grpo.py)")
arg("--ratio", default="token", choices=grpo.RATIOS, help="ratio per token, or per answer (GSPO)")
arg("--loss", default="clip", choices=grpo.LOSSES, help="policy term: PPO's clip or CISPO (grpo.py)")
arg("--clip_eps", type=bounded(float, 0, 10, True), default=0.2, help="clip range ε (ε_low)")
arg("--clip_eps_high", type=bounded(float, 0, 10, True), help="ε_high; None: ε_low")
arg("--mu", type=bounded(int, 1, 100), default=1, help="updates per rollout (μ)")
arg("--dynamic", type=bounded(int, 0, 100), default=0, help="rounds replacing dead groups (DAPO)")
arg("--tis", type=bounded(float, 0, 1e6), default=0, help="sampler-gap weights' cap; 0: off (grpo.py)")
arg("--lr", type=bounded(float, 0, 1e30, True), default=1e-4 if CUDA else 2e-4, help="AdamW's; far too large diverges")
# rollouts, rewards and evaluation
arg("--batch_prompts", type=count, default=64 if CUDA else 16, help="prompts per step B, over all ranks")
arg("--micro_batch", type=bounded(int, 0, 10**6), default=0, help="rows per forward/backward; 0: the most that fit")
arg("--max_new_tokens", type=bounded(int, 1, 10**5), default=48, help="T, at most")
arg("--temperature", type=bounded(float, 0.01, 100), default=1.0, help="τ")
arg("--reward", default="verifier", choices=tuple(tasks.REWARDS), help="tasks/")
arg("--format_bonus", type=bounded(float, 0, reward.MAX_FORMAT_BONUS), default=0.0, help="for a well-formed answer")
arg("--overlong", type=bounded(int, 0, 10**5), default=0, help="DAPO's length penalty's last N tokens; 0: off")
arg("--steps", type=bounded(int, 0, 10**8), default=300 if CUDA else 120, help="GRPO's")
arg("--eval_every", type=bounded(int, 1, 10**8), default=50 if CUDA else 40, help="evaluate and save every N steps")
arg("--eval_size", type=count, default=200, help="held-out problems")
# task
arg("--task", choices=tuple(tasks.TASKS), help="None: gsm8k if --data, else arithmetic")
arg("--data", help="gsm8k: GSM8K-format JSONL")
arg("--difficulty", type=bounded(int, 1, 20), default=2, help="arithmetic: operations, at most")
arg("--teacher_slip", type=unit, default=0.6, help="teacher's error rate")
arg("--verbose", type=unit, default=0.0, help="arithmetic: teacher's check lines")
# model and warm start
arg("--init_from", default="scratch", help="scratch, resume, a checkpoint, or a Hugging Face folder")
arg("--prompt", help=f"template with {{question}}, or {', '.join(TEMPLATES)}; None: the file's")
arg("--sft_steps", type=bounded(int, 0, 10**8), help="None: 3000 on CUDA, else 1500; 0 from a file")
arg("--sft_lr", type=rate, help="peak; None: 2e-3 on CUDA, else 3e-3; 3e-5 from a file")
arg("--sft_batch", type=count, default=64 if CUDA else 48, help="warm-start rows")
arg("--n_layer", type=bounded(int, 1, 256), default=4, help="from scratch")
arg("--n_head", type=bounded(int, 1, 256), default=4, help="from scratch")
arg("--n_embd", type=bounded(int, 1, 16384), default=256 if CUDA else 96, help="from scratch")
arg("--block_size", type=bounded(int, 2, 65536), default=256, help="longest prompt + completion (from scratch)")
# system
arg("--seed", type=bounded(int, 0, 2**32 - 1), default=1337, help="of every stream")
arg("--device", default="auto", choices=["auto", "cuda", "mps", "cpu"], help="auto: cuda, then mps, then cpu")
arg("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="autocast dtype; auto: bf16 on CUDA")
arg("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile the training forward")
arg("--decode", default="plain", choices=sample.DECODERS, help="sample.py")
arg("--out_dir", default="out", help="for metrics.jsonl, ckpt.pt, warmstart.pt")
args = p.parse_args()
world = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun
rank = int(os.environ.get("RANK", "0"))
master = rank == 0  # alone warm-starts, logs, evaluates and saves
args = checkpoint.inherit(p, args)  # --init_from CKPT: its run's task flags
run = checkpoint.RunDir(args.out_dir, resume=args.init_from == "resume", writer=master)  # locked for this run
ckpt = None
if args.init_from == "resume":  # the checkpoint's settings
    args, ckpt = checkpoint.resume(p, run.ckpt)
args.task = args.task or ("gsm8k" if args.data is not None else "arithmetic")
scratch = args.init_from == "scratch"
if args.sft_steps is None:  # from a file: none unless asked
    args.sft_steps = 0
    if scratch:
        args.sft_steps = 3000 if CUDA else 1500
if args.sft_lr is None:  # from a file: a gentle one
    args.sft_lr = 3e-5
    if scratch:
        args.sft_lr = 2e-3 if CUDA else 3e-3
device = best_device() if args.device == "auto" else args.device
cli.check_flags(args, device, world)  # what the flags' own bounds cannot see
B = args.batch_prompts // world  # this rank's prompts per step

# ---------------- setup: devices, ranks, autocast. PLUMBING: a learner may skip it; try not to modify it
if world > 1:
    if device == "cuda":
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=2))
bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and bf16_supported(device))
autocast = torch.autocast(device.split(":")[0], dtype=torch.bfloat16) if bf16 else nullcontext()
torch.manual_seed(args.seed)  # the model's init (the rest seeds its own)


def all_sum(t):  # t summed over the ranks, in place
    if world > 1:
        dist.all_reduce(t)
    return t


def score(net, roll, rows, temperature, with_entropy=False):  # log π (n, T) of the rows' completions; H (n, T)
    return grpo.score(net, roll.tokens[rows], roll.mask[rows], roll.prompt_len, temperature, autocast, with_entropy)


# ---------------- task and model
task = tasks.TASKS[args.task](args)  # held-out problems; a sampler of the others
if scratch:  # tokens: bytes and the task's words
    enc = tokenizer.byte_tokenizer(tokenizer.frequent_words(task.texts(PROMPT)))
    prompt = PROMPT
    shape = dict(block_size=args.block_size, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(GPTConfig(vocab_size=enc.n_vocab, **shape))
else:  # a checkpoint or a Hugging Face folder, with its tokenizer and template
    model, enc, prompt = checkpoint.load_model(run.ckpt if ckpt else args.init_from)
    vars(args).update(cli.shape(model))
prompt = choose_template(args.prompt, prompt, enc, args.init_from)  # --prompt, else the file's (chat) format
model = model.to(device)
STOPS = stop_ids(model.config, enc, prompt)  # the ids that end a completion; EOS = STOPS[0] pads and ends solutions
EOS = STOPS[0]
run.check_space(model.num_params(), ref=args.beta > 0)  # before any work
fwd = torch.compile(model) if args.compile else model  # the training forward
sampling = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, eos_id=STOPS, decode=args.decode)


def encode(pb):  # (prompt, solution + EOS) token ids; a special token's text in a question or solution is text
    q = encode_prompt(enc, prompt, pb.question)
    a = encode_text(enc, pb.solution)
    if len(q) + max(args.max_new_tokens, len(a) + 1) > model.config.block_size:
        fix = "raise --block_size" if scratch else "shorten it or lower --max_new_tokens"
        die(f"{pb.question[:30]!r}...: needs more than the model's {model.config.block_size} positions; {fix}")
    return q, a + [EOS]


held_out = [encode(pb)[0] for pb in task.test]
longest = max(len(encode(pb)[0]) for pb in task.problems) + args.max_new_tokens  # each fits; a step's columns
sizes = dict(cols=longest, completion=args.max_new_tokens, ref=args.beta > 0, bf16=bf16)  # a step's (model.py)
args.micro_batch = model.check_memory(device, B * args.G, micro_batch=args.micro_batch, **sizes)  # before any work
if master:
    print("config:", " ".join(f"{k}={v}" for k, v in vars(args).items()), end=" ")
    print(f"device={device} bf16={bf16} template={tokenizer.template_name(prompt)}")


# ---------------- warm start (SFT on the teacher)
def warm_start(key):  # supervised fine-tuning on the teacher's solutions
    t0 = time.time()
    rng = random.Random(f"{args.seed}-sft")  # its problems
    opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, betas=(0.9, 0.95), weight_decay=0.1)
    shown = [t0, 0, torch.zeros((), device=device)]  # progress: when last printed, steps since, their Σ loss
    for it in range(1, args.sft_steps + 1):
        cosine = 0.1 + 0.45 * (1 + math.cos(math.pi * it / args.sft_steps))  # from 1 down to 0.1
        opt.param_groups[0]["lr"] = args.sft_lr * min(1, it / 100) * cosine  # warmup over 100 steps
        prompts, solutions = zip(*[encode(task.sample(rng)) for _ in range(args.sft_batch)])
        roll = sample.teacher_rollout(prompts, solutions, eos_id=EOS, device=device)
        num_tokens = roll.completion_mask.sum()  # the step's, not a micro-batch's
        opt.zero_grad(set_to_none=True)
        for rows in roll.micro_batches(args.micro_batch):
            nll = -score(fwd, roll, rows, 1.0)[roll.completion_mask[rows]].sum() / num_tokens
            nll.backward()
            shown[2] += nll.detach()
        if torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):  # no NaN reaches the weights
            opt.step()
        shown[1] += 1
        if it in (1, args.sft_steps) or time.time() - shown[0] >= 10:  # a line every 10 s, with its mean loss
            loss = shown[2].item() / shown[1]
            print(f"warm start {it}/{args.sft_steps}: loss {loss:.3f} nats/token, {time.time() - t0:.0f}s", flush=True)
            shown = [time.time(), 0, torch.zeros((), device=device)]
    checkpoint.save_checkpoint(run.warm, model, enc, prompt, key=key, seconds=time.time() - t0)


if not ckpt and args.sft_steps > 0:  # cached in run.warm under what it depends on
    warm_from = args.init_from if scratch else os.path.abspath(args.init_from)
    key = f"{warm_from}-{task.key}-{model.config}-sft{args.sft_steps}x{args.sft_batch}-lr{args.sft_lr}-seed{args.seed}"
    if master and checkpoint.cached(run.warm, key) is None:
        warm_start(key)
    if world > 1:
        dist.barrier()  # for rank 0's
    warm = checkpoint.load_checkpoint(run.warm)
    checkpoint.restore(model, warm["model"], run.warm)
    if master:
        print(f"warm start: {args.sft_steps} steps, {warm['seconds']:.0f}s when trained, in {run.warm}")


# ---------------- the step's parts
def rollout(problems, gen):  # 1-2. G completions per problem (rows b*G .. b*G+G-1), scored
    with autocast:
        roll = sample.generate(model, [encode(pb)[0] for pb in problems], args.G, generator=gen, **sampling)
    texts = sample.completions_text(roll, enc)
    rewards = tasks.REWARDS[args.reward](task, problems, texts, format_bonus=args.format_bonus).to(device)  # (N,)
    if args.overlong:  # DAPO's length penalty
        rewards = rewards + reward.overlong_penalty(roll.lengths, args.max_new_tokens, args.overlong).to(device)
    correct = task.verdicts(problems, texts).to(device)  # (N,) bool: the verdict, whatever the reward
    return roll, rewards, correct


def refill(roll, rewards, correct, gen, step, sampled):  # --dynamic K (DAPO): K rounds replacing dead groups
    # each round's dead groups are appended to `sampled` (dead_frac_sampled and rounds in the log)
    extra = random.Random(f"{args.seed}-dynamic-{step}-{rank}")
    for _ in range(args.dynamic):
        dead = advantage.dead_groups(rewards, args.G)  # (B,)
        if not dead.any():
            break
        new_roll, new_rewards, new_correct = rollout([task.sample(extra) for _ in range(int(dead.sum()))], gen)
        live = (~dead).repeat_interleave(args.G)  # (N,) the rows kept; the new ones go after them
        roll = sample.Rollout.join([roll.select(live), new_roll], EOS)
        rewards = torch.cat([rewards[live], new_rewards])  # (N,)
        correct = torch.cat([correct[live], new_correct])  # (N,)
        sampled.append(advantage.dead_groups(new_rewards, args.G))  # this round's (B_k,)
    return roll, rewards, correct


def denominators(roll):  # the loss's: the step's, all micro-batches and ranks (grpo.py)
    num_tokens = all_sum(roll.completion_mask.sum().float())
    return dict(num_seqs=args.batch_prompts * args.G, num_tokens=num_tokens.clamp(min=1), max_len=args.max_new_tokens)


def stop_if_diverged(roll, step):  # the sampler's log-probs not finite on any rank: all stop
    if all_sum((~torch.isfinite(roll.logprobs[roll.completion_mask])).sum().float()) > 0:
        die(f"step {step + 1}: the policy's log-probs are not finite: lower --lr (the last checkpoint is intact)")


def stop_if_stuck(skips, step):  # every update of 3 steps in a row skipped: diverged, though the weights are finite
    if skips >= 3 * args.mu:
        why = "every update of the last 3 steps was skipped (a loss or gradient not finite)"
        die(f"step {step}: {why}: lower --lr or go back to an earlier checkpoint ({run.ckpt} is as last saved)")


# ---------------- saving, evaluating, logging. PLUMBING: a learner may skip it; try not to modify it
def save():  # no random state: every step seeds its streams from (seed, step, rank)
    if master:
        state = dict(step=step, task=task.key, args=vars(args), log_bytes=run.log_bytes(), ref=ref and ref.state_dict())
        checkpoint.save_checkpoint(run.ckpt, model, enc, prompt, optimizer=optimizer.state_dict(), **state)


def evaluate():  # held out, with a generator of its own; B prompts at a time, as a step samples (check_memory)
    g = torch.Generator(device).manual_seed(args.seed + 1)
    with autocast:
        ev = sample.evaluate(
            model, held_out, task.test, G=args.G, enc=enc, batch=B, generator=g, judge=task, **sampling
        )
    show = ["kind", "step", "greedy_acc", "greedy_acc_se", "pass@1", f"pass@{args.G}", "maj@1", f"maj@{args.G}"]
    run.log({"kind": "eval", "step": step, **ev}, show)


def log_step(roll, rewards, correct, old_logp, stats, entropy, sampled, t0):  # a record of all ranks' rows
    gap = ((old_logp - roll.logprobs).abs() * roll.completion_mask).amax(dim=1)  # (N,) |π_old - sampler|
    gathered = torch.zeros(world, len(rewards), 5, device=device)  # (world, N, 5)
    gathered[rank] = torch.stack([rewards, correct.float(), roll.lengths.float(), roll.truncated.float(), gap], dim=1)
    r, right, length, truncated, gap = all_sum(gathered).flatten(0, 1).unbind(1)  # (world*N,) each
    drawn = all_sum(torch.tensor([[d.sum().item(), len(d), 1] for d in sampled], device=device).sum(0)).tolist()
    dt = time.time() - t0
    record = {**advantage.group_stats(r, args.G), **sample.rollout_stats(right > 0, length, truncated)}
    record = {"kind": "train", "step": step, **{k: v.item() for k, v in record.items()}, "logp_gap": gap.max().item()}
    record |= {**stats, "entropy": all_sum(entropy).item(), "dt": dt, "tok_s": stats["num_tokens"] / dt}
    record |= {"dead_frac_sampled": drawn[0] / drawn[1], "rounds": drawn[2] / world}  # before --dynamic
    run.log(record, [k for k in SHOW if k not in still])
    opening.append(record["dead_frac"])  # the run's first steps' shares of dead groups
    if master and len(opening) == 3 and min(opening) == 1:  # no gradient yet: say what usually causes it
        cut = f"{record['truncated']:.0%} cut at the limit"
        print(f"WARNING: every group dead for 3 steps; check --prompt, --max_new_tokens ({cut}) and what is paid")
    if master and record["logp_gap"] > (0.1 if bf16 else 1e-3):
        print(f"WARNING: logp_gap {record['logp_gap']:.3g}: π_old is not scored as the sampler drew")


def begin():  # the log as far as the checkpoint; Ctrl-C's handler; a new run's start evaluated (and saved at --steps 0)
    run.open_log(ckpt["log_bytes"] if ckpt else 0)
    run.catch_ctrl_c()  # Ctrl-C: every rank finishes the step, then the run saves
    if master and not ckpt:
        evaluate()
    if args.steps == 0 and not ckpt:
        save()  # --steps 0: the starting model


def end_of_step():  # evaluate and save when due; True when any rank's Ctrl-C stops the run (all ranks together)
    stopping = all_sum(torch.tensor([run.stopped], device=device)).item() > 0
    due = step % args.eval_every == 0 or step == args.steps
    if master and due:
        evaluate()
    if due or stopping:
        save()
    return stopping


SHOW = "step reward_mean acc dead_frac kl clip_frac_low clip_frac_high entropy len truncated logp_gap tok_s dt".split()
still = {"reward_mean"} if args.reward == "verifier" and not args.format_bonus and not args.overlong else set()  # =acc
still |= {"kl"} if args.beta == 0 else set()
still |= {"clip_frac_low", "clip_frac_high"} if args.mu == 1 and args.ratio == "token" else set()  # ρ ≡ 1 (grpo.py)
opening = []  # dead_frac of the run's first steps (log_step)


# ---------------- GRPO: the optimizer, π_ref, then the loop
ref = copy.deepcopy(model).requires_grad_(False) if args.beta > 0 else None  # frozen π_ref, when β > 0
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
step = checkpoint.restore_training(ckpt, run.ckpt, optimizer, ref, task.key) if ckpt else 0  # AdamW's, π_ref
optimizer.param_groups[0]["lr"] = args.lr  # the flag, not a saved value
begin()  # PLUMBING: the log, Ctrl-C, the starting point's evaluation
variant = {k: vars(args)[k] for k in ("clip_eps", "clip_eps_high", "beta", "kl", "agg", "ratio", "loss")}
skips = 0  # updates skipped in a row (a loss or gradient not finite)
stopping = False  # any rank's Ctrl-C
while step < args.steps and not stopping:
    t0 = time.time()
    rng = random.Random(f"{args.seed}-grpo-{step}")  # the step's problems, on every rank
    gen = torch.Generator(device).manual_seed(args.seed + 1_000_003 * (rank + 1) + step)  # this rank's
    problems = [task.sample(rng) for _ in range(args.batch_prompts)][rank * B : (rank + 1) * B]  # its share
    roll, rewards, correct = rollout(problems, gen)  # 1-2. rewards (N,)
    sampled = [advantage.dead_groups(rewards, args.G)]  # (B,) per round of sampling: its dead groups
    if args.dynamic:  # DAPO's dynamic sampling
        roll, rewards, correct = refill(roll, rewards, correct, gen, step, sampled)
    advantages = advantage.group_advantages(rewards, args.G, method=args.adv)  # 3. (N,), a new tensor
    totals = denominators(roll)
    stop_if_diverged(roll, step)
    micro = roll.micro_batches(args.micro_batch)  # --micro_batch rows at a time
    with torch.no_grad():  # 4. π_ref's log-probs, once per rollout
        ref_logp = None if ref is None else torch.cat([score(ref, roll, r, args.temperature) for r in micro])
    old_logp = torch.zeros_like(roll.logprobs)  # (N, T)
    entropy = torch.zeros((), device=device)  # Σ over the sampled tokens
    for inner in range(args.mu):  # 5. μ updates; the first one's forward is π_old's
        optimizer.zero_grad(set_to_none=True)
        stats = {}  # this update's: each micro-batch's are its share of the step
        for rows in micro:
            mask = roll.completion_mask[rows]  # (n, T) True up to and including the first EOS
            logp, H = score(fwd, roll, rows, args.temperature, with_entropy=True)  # (n, T), (n, T)
            if inner == 0:  # the weights are still π_old's (the docstring: why not the sampler's)
                old_logp[rows] = logp.detach()
                entropy += H[mask].sum()
            ref_rows = None if ref is None else ref_logp[rows]
            weight = grpo.tis_weights(old_logp[rows], roll.logprobs[rows], args.tis) if args.tis else None  # (n, T)
            loss, st = grpo.grpo_loss(
                logp, old_logp[rows], ref_rows, advantages[rows], mask, weight=weight, **variant, **totals
            )
            loss.backward()
            stats = {k: stats.get(k, 0) + v for k, v in st.items()}
        for q in model.parameters():  # the step's gradient is the sum over ranks
            all_sum(q.grad)
        stats = dict(zip(stats, all_sum(torch.stack(list(stats.values())).float()).tolist()))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (math.isfinite(stats["loss"]) and torch.isfinite(grad_norm)):  # no NaN reaches the weights
            run.log({"kind": "skipped", "step": step + 1, "inner": inner}, ["kind", "step", "inner"])
            skips += 1
            continue
        skips = 0
        optimizer.step()
    step += 1
    log_step(roll, rewards, correct, old_logp, stats, entropy / totals["num_tokens"], sampled, t0)
    stop_if_stuck(skips, step)
    stopping = end_of_step()  # PLUMBING: evaluate and save when due; Ctrl-C
run.finish(step, world)  # every rank waits for rank 0's last save
