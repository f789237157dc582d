"""train.py: warm-start a GPT on arithmetic word problems, then train it with GRPO, top to bottom.

    python train.py --G 8 --beta 0.04                        # one process: CUDA, else MPS, else CPU
    torchrun --standalone --nproc_per_node=K train.py ...    # K data-parallel ranks: GPUs (NCCL) or CPUs (gloo)

One GRPO step (Shao et al. 2024, DeepSeekMath), each line a call into one other file:
    o_1..o_G ~ π_old(·|q) for each of B prompts q              sample.generate             rows N = B*G
    r_i = reward of o_i (1 if its final answer is right)       reward.REWARDS[--reward]    (N,)
    A_i = (r_i - mean(r)) / (std(r) + eps) in each group       advantage.group_advantages  (N,)
    log π_ref of the sampled tokens, once, without grad        grpo.completion_logprobs    (N, T)
    μ updates of loss = -1/(B·G) Σ_i 1/|o_i| Σ_t [min(ρ A, clip(ρ) A) - β k3]   grpo.grpo_loss, AdamW
(1/(B·G): B groups of G; the paper writes 1/G for one group.) --adv --agg --kl --ratio --reward --dynamic: variants.
Departures from DeepSeekMath: a small GPT warm-started on a teacher that is wrong some of the time, not a 7B math
model; a rule-based verifier, not a reward model; π_old's log-probs from the first update's forward (step 5), not the
sampler's; one reference model, the warm start (its iterative GRPO resets it and retrains the reward model).
"""

import argparse
import copy
import math
import os
import random
import signal
import sys
import time
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist

import advantage
import checkpoint
import grpo
import reward
import sample
from model import GPT, PROMPT, GPTConfig, byte_tokenizer, frequent_words

# ----------------------------------------------------------------------------- config
CUDA, MPS = torch.cuda.is_available(), torch.backends.mps.is_available()  # sizes follow CUDA; auto: the best


def die(msg):  # a user's error ends with one line, never a traceback
    sys.exit(f"error: {msg}")


def one_line(kind, e, tb):  # a bad file, a full disk, Ctrl-C, no memory: one line too; a bug: the traceback
    if issubclass(kind, (checkpoint.LoadError, reward.DataError, OSError, KeyboardInterrupt)):
        die(str(e) or "interrupted: what was not in a checkpoint yet is lost")
    if issubclass(kind, RuntimeError) and any(s in str(e) for s in ("out of memory", "to allocate")):
        die(f"out of memory ({str(e).splitlines()[0]}): lower --batch_prompts, --G, --sft_batch or --max_new_tokens")
    sys.__excepthook__(kind, e, tb)


def bounded(kind, lo, hi, above=False):  # an argparse type: a finite `kind` in [lo, hi], or in (lo, hi] if `above`
    def parse(text):
        if math.isfinite(x := kind(text)) and (x > lo if above else x >= lo) and x <= hi:
            return x
        raise argparse.ArgumentTypeError(f"{text} is not in {'(' if above else '['}{lo}, {hi}]")

    parse.__name__ = kind.__name__  # argparse names it in "invalid int value"
    return parse


sys.excepthook = one_line
p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
p.error = die  # argparse's own errors ("invalid int value") are one line too
arg, count, unit, rate = p.add_argument, bounded(int, 1, 10**6), bounded(float, 0, 1), bounded(float, 0, 1, True)
# GRPO
arg("--G", type=bounded(int, 2, 1024), default=8, help="completions per prompt (group size)")
arg("--beta", type=bounded(float, 0, 100), default=0.04, help="KL coefficient; 0 drops the reference model")
arg("--kl", default="k3", choices=grpo.KL_KINDS, help="per-token KL estimator (grpo.py)")
arg("--adv", default="std", choices=advantage.METHODS, help="advantage estimator (advantage.py)")
arg("--agg", default="grpo", choices=grpo.AGGS, help="how the loss averages over tokens (grpo.py)")
arg("--ratio", default="token", choices=grpo.RATIOS, help="importance ratio per token, or per answer (GSPO)")
arg("--clip_eps", type=bounded(float, 0, 10, True), default=0.2, help="clip range ε (ε_low); PPO's 0.2")
arg("--clip_eps_high", type=bounded(float, 0, 10, True), default=None, help="ε_high; None: ε (DAPO: 0.28)")
arg("--mu", type=bounded(int, 1, 100), default=1, help="updates per rollout (μ)")
arg("--dynamic", type=bounded(int, 0, 100), default=0, help="rounds after the first replacing dead groups (DAPO)")
arg("--lr", type=rate, default=1e-4 if CUDA else 2e-4, help="GRPO learning rate (AdamW)")
# rollouts, rewards and evaluation
arg("--batch_prompts", type=count, default=64 if CUDA else 16, help="prompts per step B, over all ranks")
arg("--micro_batch", type=bounded(int, 0, 10**6), default=0, help="rows per forward/backward on a rank; 0: all")
arg("--max_new_tokens", type=bounded(int, 1, 10**5), default=48, help="completion length limit T")
arg("--temperature", type=bounded(float, 0.01, 100), default=1.0, help="sampling temperature of rollouts and pass@k")
arg("--reward", default="verifier", choices=tuple(reward.REWARDS), help="reward function (reward.py)")
arg("--format_bonus", type=bounded(float, 0, reward.MAX_FORMAT_BONUS), default=0.0, help="for a well-formed answer")
arg("--steps", type=bounded(int, 0, 10**8), default=300 if CUDA else 120, help="GRPO steps")
arg("--eval_every", type=bounded(int, 1, 10**8), default=50 if CUDA else 40, help="evaluate and save every N steps")
arg("--eval_size", type=count, default=200, help="held-out problems scored for greedy accuracy and pass@k/maj@k")
# task
arg("--data", default=None, help="GSM8K-format JSONL (question, answer ending '#### n'); None: the built-in task")
arg("--difficulty", type=bounded(int, 1, 20), default=2, help="built-in task: at most this many operations")
arg("--teacher_slip", type=unit, default=0.6, help="built-in task: the teacher's chance to write a wrong answer")
arg("--verbose", type=unit, default=0.0, help="built-in task: the teacher's chance to check a step on a line")
# model and warm start
arg("--init_from", default="scratch", help="scratch, resume (out_dir/ckpt.pt), a nanogrpo .pt, or GPT-2 file/folder")
arg("--sft_steps", type=bounded(int, 0, 10**8), help=f"warm-start steps; None: {3000 if CUDA else 1500}, 0 from a file")
arg("--sft_lr", type=rate, help=f"warm-start peak learning rate; None: {2e-3 if CUDA else 3e-3}, 3e-5 from a file")
arg("--sft_batch", type=count, default=64 if CUDA else 48, help="warm-start rows per step")
arg("--n_layer", type=bounded(int, 1, 256), default=4, help="transformer layers (from scratch)")
arg("--n_head", type=bounded(int, 1, 256), default=4, help="attention heads (from scratch)")
arg("--n_embd", type=bounded(int, 1, 16384), default=256 if CUDA else 96, help="embedding width (from scratch)")
arg("--block_size", type=bounded(int, 2, 65536), default=256, help="longest prompt + completion (from scratch)")
# system
arg("--seed", type=bounded(int, 0, 2**32 - 1), default=1337, help="random seed")
arg("--device", default="auto", choices=["auto", "cuda", "mps", "cpu"], help="auto: cuda, then mps, then cpu")
arg("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="autocast dtype (auto: bf16 on CUDA)")
arg("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile the training forward")
arg("--decode", default="plain", choices=sample.DECODERS, help="sampler (sample.py)")
arg("--out_dir", default="out", help="for metrics.jsonl, ckpt.pt and the cached warm start warmstart.pt")
args = p.parse_args()
world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))  # set by torchrun
master = rank == 0  # rank 0 alone warm-starts, logs, evaluates and saves
run = checkpoint.RunDir(args.out_dir, resume=args.init_from == "resume", writer=master)  # locked for this run
args, ckpt = checkpoint.resume(p, run.ckpt) if args.init_from == "resume" else (args, None)  # nanoGPT's rule
scratch = args.init_from == "scratch"
args.sft_steps = ((3000 if CUDA else 1500) if scratch else 0) if args.sft_steps is None else args.sft_steps
args.sft_lr = ((2e-3 if CUDA else 3e-3) if scratch else 3e-5) if args.sft_lr is None else args.sft_lr
device = args.device if args.device != "auto" else "cuda" if CUDA else "mps" if MPS else "cpu"
B = args.batch_prompts // world  # this rank's prompts per step
for broken, fix in [  # what the flags' own bounds cannot see
    (not {"cuda": CUDA, "mps": MPS, "cpu": True}[device], f"--device {device} is not available here; pick another"),
    (args.decode == "graph" and device != "cuda", "--decode graph captures a CUDA graph: use static or plain here"),
    (args.n_embd % args.n_head, f"--n_embd {args.n_embd} must be a multiple of --n_head {args.n_head}"),
    (args.batch_prompts % world, f"--batch_prompts {args.batch_prompts} must be a multiple of the {world} ranks"),
]:
    if broken:
        die(fix)

# ----------------------------------------------------------------------------- setup
if world > 1:
    if device == "cuda":
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=2))
bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and "cuda" in device and torch.cuda.is_bf16_supported())
autocast = torch.autocast(device.split(":")[0], dtype=torch.bfloat16) if bf16 else nullcontext()
if master:
    print("config:", " ".join(f"{k}={v}" for k, v in vars(args).items()), f"device={device} bf16={bf16}")
torch.manual_seed(args.seed)  # the model's init; the task, sampling and evaluation have generators of their own

# ----------------------------------------------------------------------------- task and model
task_flags = dict(difficulty=args.difficulty, slip=args.teacher_slip, verbose=args.verbose, eval_size=args.eval_size)
task = reward.Task(args.data, seed=args.seed, **task_flags)  # held-out problems, and a sampler of the others
if scratch:  # the tokenizer: bytes and the task's words (a prompt is 25 tokens, not 63 bytes)
    enc, prompt = byte_tokenizer(frequent_words(task.texts(PROMPT))), PROMPT
    shape = dict(block_size=args.block_size, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(GPTConfig(vocab_size=enc.n_vocab, **shape))
else:  # a nanogrpo checkpoint or GPT-2's weights: config, tokenizer and prompt template come from the file
    model, enc, prompt = checkpoint.load_model(run.ckpt if ckpt else args.init_from)
model, EOS = model.to(device), enc.eot_token
run.check_space(model.num_params(), ref=args.beta > 0)  # before the work, not after it
fwd = torch.compile(model) if args.compile else model  # the training forward; sampling uses `model`
sampling = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, eos_id=EOS, decode=args.decode)


def encode(pb):  # (prompt, solution + EOS) token ids; "<|endoftext|>" in their text is text, not the EOS token
    q, a = (enc.encode(text, disallowed_special=()) for text in (prompt.format(question=pb.question), pb.solution))
    if len(q) + max(args.max_new_tokens, len(a) + 1) > model.config.block_size:  # the one block-size check
        die(f"{pb.question[:30]!r}...: prompt + answer need more than --block_size {model.config.block_size} tokens")
    return q, a + [EOS]


def rollout(problems, gen):  # G completions per problem, rows b*G .. b*G+G-1 for problem b, each scored
    with autocast:
        roll = sample.generate(model, [encode(pb)[0] for pb in problems], args.G, generator=gen, **sampling)
    texts = sample.completions_text(roll, enc)  # each completion against its prompt's gold answer
    golds = reward.expand_golds([pb.gold for pb in problems], len(texts))
    rewards = reward.REWARDS[args.reward](texts, golds, format_bonus=args.format_bonus).to(device)  # (N,)
    return roll, rewards, reward.correct(texts, golds).to(device)  # correct (N,) bool: the verifier's, not a reward


def logprobs(net, roll, rows, temperature):  # (n, T) log-probs of the completion tokens of a Rollout's rows
    with autocast:
        logits = net(roll.tokens[rows], roll.mask[rows])  # (n, P+T, V)
    return grpo.completion_logprobs(logits, roll.tokens[rows], roll.prompt_len, temperature)  # (n, T)


def all_sum(t):  # t summed over the data-parallel ranks, in place; with one process, t itself
    if world > 1:
        dist.all_reduce(t)
    return t


def save():  # no random state to save: every step re-seeds its streams from (seed, step, rank)
    if master:
        state = dict(step=step, task=task.key, args=vars(args), log_bytes=run.log_bytes(), ref=ref and ref.state_dict())
        checkpoint.save_checkpoint(run.ckpt, model, enc, prompt, optimizer=optimizer.state_dict(), **state)


def evaluate():  # on the held-out problems, with a generator of its own: the numbers depend on the weights only
    g, B_eval = torch.Generator(device).manual_seed(args.seed + 1), args.batch_prompts
    with autocast:
        ev = sample.evaluate(model, test_prompts, test_golds, G=args.G, enc=enc, batch=B_eval, generator=g, **sampling)
    show = ["kind", "step", "greedy_acc", "greedy_acc_se", "pass@1", f"pass@{args.G}", "maj@1", f"maj@{args.G}"]
    run.log({"kind": "eval", "step": step, **ev}, show)


def request_stop(signum, frame):  # Ctrl-C: the step in flight finishes on every rank (with its evaluation), then saves
    print("Ctrl-C: finishing this step, then saving (Ctrl-C again to quit at once)", flush=True)
    stop.append(signum)
    signal.signal(signal.SIGINT, signal.default_int_handler)


known = {pb.question: encode(pb)[0] for pb in task.problems}  # each fits the model (one drawn later: when drawn)
test_prompts, test_golds = [known[pb.question] for pb in task.test], [pb.gold for pb in task.test]
longest = max(map(len, known.values())) + args.max_new_tokens  # columns of a step's longest row, at the least
model.check_memory(device, rows=B * args.G, cols=longest, micro_batch=args.micro_batch, ref=args.beta > 0)
if ckpt and ckpt["task"] != task.key:
    die(f"the task changed since {run.ckpt} was written (another --data content or task flag); start a fresh run")

# ----------------------------------------------------------------------------- warm start (SFT on the teacher)
warm_from = args.init_from if scratch else os.path.abspath(args.init_from)  # the key: what the warm start depends on
warm_key = f"{warm_from}-{task.key}-{model.config}-sft{args.sft_steps}x{args.sft_batch}-lr{args.sft_lr}-seed{args.seed}"
if master and not ckpt and args.sft_steps > 0 and checkpoint.cached(run.warm, warm_key) is None:  # else: cached
    t0, rng = time.time(), random.Random(f"{args.seed}-sft")  # rng: the warm start's problems
    opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, betas=(0.9, 0.95), weight_decay=0.1)
    for it in range(1, args.sft_steps + 1):
        cosine = 0.1 + 0.45 * (1 + math.cos(math.pi * it / args.sft_steps))  # from 1 down to 0.1
        opt.param_groups[0]["lr"] = args.sft_lr * min(1, it / 100) * cosine  # warmup over 100 steps, then cosine
        prompts, solutions = zip(*[encode(task.sample(rng)) for _ in range(args.sft_batch)])
        roll = sample.teacher_rollout(prompts, solutions, eos_id=EOS, device=device)
        num_tokens = roll.completion_mask.sum()  # the step's, not a micro-batch's
        opt.zero_grad(set_to_none=True)
        for rows in roll.micro_batches(args.micro_batch):
            nll = -logprobs(fwd, roll, rows, 1.0)[roll.completion_mask[rows]].sum() / num_tokens  # teacher tokens
            nll.backward()
        if torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):  # no NaN reaches the weights
            opt.step()
        if it % 100 == 0 or it == args.sft_steps:
            print(f"warm start {it}/{args.sft_steps}", flush=True)
    checkpoint.save_checkpoint(run.warm, model, enc, prompt, key=warm_key, seconds=time.time() - t0)
if not ckpt and args.sft_steps > 0:  # the other ranks wait for rank 0's warm start; then every rank loads it
    if world > 1:
        dist.barrier()
    warm = checkpoint.load_checkpoint(run.warm)
    checkpoint.restore(model, warm["model"], run.warm)
    if master:
        print(f"warm start: {args.sft_steps} steps, {warm['seconds']:.0f}s when trained, in {run.warm}")

# ----------------------------------------------------------------------------- GRPO
ref = copy.deepcopy(model).requires_grad_(False) if args.beta > 0 else None  # frozen π_ref, only when β > 0
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
step = checkpoint.restore_training(ckpt, run.ckpt, optimizer, ref) if ckpt else 0  # AdamW's moments, π_ref
optimizer.param_groups[0]["lr"] = args.lr  # the flag, not a saved value: one source of truth
run.open_log(ckpt["log_bytes"] if ckpt else 0)  # the log as far as the checkpoint (rank 0)
stop, stopping = [], False  # this rank's Ctrl-C requests; whether any rank had one by the step's end
signal.signal(signal.SIGINT, request_stop)
if master and not ckpt:
    evaluate()  # the starting point: the warm start's accuracy and pass@k
variant = {k: vars(args)[k] for k in ("clip_eps", "clip_eps_high", "beta", "kl", "agg", "ratio")}  # grpo_loss's
while step < args.steps and not stopping:
    t0, rng = time.time(), random.Random(f"{args.seed}-grpo-{step}")  # the step's problems: the same on every rank
    gen = torch.Generator(device).manual_seed(args.seed + 1_000_003 * (rank + 1) + step)  # this rank's sampling stream
    problems = [task.sample(rng) for _ in range(args.batch_prompts)][rank * B : (rank + 1) * B]  # this rank's share
    roll, rewards, correct = rollout(problems, gen)  # 1-2. G completions per prompt, scored: rewards (N,)
    # --dynamic K (DAPO): up to K more rounds, each replacing the groups whose rewards are all equal by new ones
    sampled, extra = [advantage.dead_groups(rewards, args.G)], random.Random(f"{args.seed}-dynamic-{step}-{rank}")
    while len(sampled) <= args.dynamic and (dead := advantage.dead_groups(rewards, args.G)).any():
        new_roll, new_rewards, new_correct = rollout([task.sample(extra) for _ in range(int(dead.sum()))], gen)
        live = (~dead).repeat_interleave(args.G)  # (N,) the rows of the groups kept; the new ones go after them
        roll = sample.Rollout.join([roll.select(live), new_roll], EOS)
        rewards, correct = torch.cat([rewards[live], new_rewards]), torch.cat([correct[live], new_correct])  # (N,)
        sampled.append(advantage.dead_groups(new_rewards, args.G))  # (B_k,) bool: each round's new groups
    # 3. one advantage per completion, within its group: a new tensor, the rewards stay as they are
    advantages = advantage.group_advantages(rewards, args.G, method=args.adv)  # (N,)
    mask = roll.completion_mask  # (N, T) True up to and including each completion's first EOS (sample.py)
    # the loss denominators are the step's, over every micro-batch and rank; a diverged policy on any rank stops all
    num_tokens = all_sum(mask.sum().float())
    if all_sum((~torch.isfinite(roll.logprobs[mask])).sum().float()) > 0:
        die(f"step {step + 1}: the policy's log-probs are not finite: lower --lr (the last checkpoint is intact)")
    totals = dict(num_seqs=args.batch_prompts * args.G, num_tokens=num_tokens.clamp(min=1), max_len=args.max_new_tokens)
    micro = roll.micro_batches(args.micro_batch)  # the step's rows, --micro_batch at a time
    with torch.no_grad():  # 4. π_ref's log-probs of the sampled tokens, once per rollout
        ref_logp = None if ref is None else torch.cat([logprobs(ref, roll, r, args.temperature) for r in micro])
    # 5. μ updates; the first one's forward gives old_logp (the weights are still π_old's): with μ = 1, ρ ≡ 1
    old_logp = torch.zeros_like(roll.logprobs)  # (N, T)
    for inner in range(args.mu):
        optimizer.zero_grad(set_to_none=True)
        stats = {}  # of this update; each stat grpo_loss returns is this micro-batch's share of the step: they add
        for rows in micro:
            logp = logprobs(fwd, roll, rows, args.temperature)  # (n, T) the training forward
            if inner == 0:
                old_logp[rows] = logp.detach()
            ref_rows = None if ref is None else ref_logp[rows]
            loss, st = grpo.grpo_loss(logp, old_logp[rows], ref_rows, advantages[rows], mask[rows], **variant, **totals)
            loss.backward()
            stats = {k: stats.get(k, 0) + v for k, v in st.items()}
        for q in model.parameters():  # the step's gradient is the sum over ranks: the denominators are step-wide
            all_sum(q.grad)
        stats = dict(zip(stats, all_sum(torch.stack(list(stats.values())).float()).tolist()))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (math.isfinite(stats["loss"]) and torch.isfinite(grad_norm)):  # no NaN reaches the weights
            run.log({"kind": "skipped", "step": step + 1, "inner": inner}, ["kind", "step", "inner"])
            continue
        optimizer.step()
    step += 1
    # the log, over every rank's rows; logp_gap: the largest |π_old - sampler| log-prob, at the same temperature
    gap = ((old_logp - roll.logprobs).abs() * mask).amax(dim=1)  # (N,)
    gathered = torch.zeros(world, len(rewards), 5, device=device)  # (world, N, 5): the other ranks' rows 0
    gathered[rank] = torch.stack([rewards, correct.float(), roll.lengths.float(), roll.truncated.float(), gap], dim=1)
    cols = dict(zip(["reward", "right", "len", "truncated", "gap"], all_sum(gathered).flatten(0, 1).unbind(1)))
    right, length, dt = cols["right"] > 0, cols["len"], time.time() - t0
    record = {**advantage.group_stats(cols["reward"], args.G), "acc": cols["right"].mean(), "len": length.mean()}
    record |= {"len_right": length[right].mean(), "len_wrong": length[~right].mean(), "logp_gap": cols["gap"].max()}
    record = {"kind": "train", "step": step, **{k: v.item() for k, v in record.items()}, **stats, "dt": dt}
    record |= {"truncated": cols["truncated"].mean().item(), "tok_s": stats["num_tokens"] / dt}
    drawn = all_sum(torch.tensor([[d.sum().item(), len(d), 1] for d in sampled], device=device).sum(0)).tolist()  # (3,)
    record |= {"dead_frac_sampled": drawn[0] / drawn[1], "rounds": drawn[2] / world}  # of all rounds, before filtering
    show = "step reward_mean acc dead_frac kl clip_frac_low clip_frac_high len truncated logp_gap tok_s dt".split()
    run.log(record, show)
    if master and record["logp_gap"] > (0.1 if bf16 else 1e-3):  # π_old must be scored as the sampler draws
        print(f"WARNING: logp_gap {record['logp_gap']:.3g}: the trainer's log-probs are not the sampler's")
    stopping = all_sum(torch.tensor([len(stop)], device=device)).item() > 0  # every rank stops after the same step
    due = step % args.eval_every == 0 or step == args.steps
    if master and due:
        evaluate()
    if due or stopping:
        save()
if args.steps == 0 and not ckpt:
    save()  # --steps 0: the starting model, ready for sample.py
if stop:
    print(f"stopped at step {step}; saved {run.ckpt}, continue with --init_from resume", file=sys.stderr, flush=True)
if world > 1:  # every rank waits for rank 0's last evaluation and save, then leaves at once: in the interpreter's
    dist.barrier()  # ordinary shutdown torch's gloo threads can abort (SIGABRT), and torchrun would call the run failed
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(1 if stop else 0)
sys.exit(1 if stop else 0)
