"""
train.py: warm-start a GPT on arithmetic word problems, then train it with GRPO, top to bottom.

    python train.py --G 8 --beta 0.04                        # one process: CUDA, else MPS, else CPU
    torchrun --standalone --nproc_per_node=K train.py ...    # K data-parallel ranks: GPUs (NCCL) or CPUs (gloo)

One GRPO step (Shao et al. 2024, DeepSeekMath), each line a call into one other file:
    o_1..o_G ~ π_old(·|q) for each of B prompts q              sample.generate             rows N = B*G
    r_i = reward of o_i (1 if its final answer is right)       reward.rewards              (N,)
    A_i = (r_i - mean(r)) / (std(r) + eps) in each group       advantage.group_advantages  (N,)
    log π_ref of the sampled tokens, once, without grad        grpo.completion_logprobs    (N, T)
    μ updates of loss = -1/(B·G) Σ_i 1/|o_i| Σ_t [min(ρ A, clip(ρ) A) - β k3]   grpo.grpo_loss, AdamW
(1/(B·G): B groups of G; the paper writes 1/G for one group.) Departures from DeepSeekMath: a small GPT
warm-started (SFT) on a teacher that is wrong some of the time; a rule-based verifier; π_old's log-probs come
from the first update's own forward, so with μ = 1 the ratio is exactly 1 (the sampler's are compared: logp_gap).
"""
import argparse, copy, json, math, os, random, shutil, signal, sys, tempfile, time, zlib
from contextlib import nullcontext
from datetime import timedelta
import torch
import torch.distributed as dist
import advantage, grpo, reward, sample
from checkpoint import LoadError, load_checkpoint, load_model, restore, save_checkpoint
from model import GPT, PROMPT, GPTConfig, byte_tokenizer

# ----------------------------------------------------------------------------- config
def die(msg):
    sys.exit(f"error: {msg}")  # a user's error ends with one line, never a traceback

def one_line(kind, e, tb):  # a bad file, a full disk, Ctrl-C in set-up: one line too; a bug: the traceback
    if not issubclass(kind, (LoadError, reward.DataError, OSError, KeyboardInterrupt)):
        return sys.__excepthook__(kind, e, tb)
    die(e or "interrupted: what was not in a checkpoint yet is lost")

sys.excepthook, CUDA = one_line, torch.cuda.is_available()  # the size defaults follow the best device present
p = argparse.ArgumentParser(description=__doc__.split("\n")[1], allow_abbrev=False,
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
p.error, arg = die, p.add_argument  # argparse's own errors ("invalid int value") are one line too
arg("--G", type=int, default=8, help="completions per prompt (group size), at least 2")
arg("--beta", type=float, default=0.04, help="KL coefficient; 0 drops the reference model")
arg("--kl", default="k3", choices=grpo.KL_KINDS, help="per-token KL estimator (grpo.py)")
arg("--adv", default="std", choices=advantage.METHODS, help="advantage estimator (advantage.py)")
arg("--agg", default="grpo", choices=grpo.AGGS, help="how the loss averages over tokens (grpo.py)")
arg("--clip_eps", type=float, default=0.2, help="clip range ε (ε_low); PPO's 0.2 (DeepSeekMath states none)")
arg("--clip_eps_high", type=float, default=None, help="upper clip ε_high; default ε (DAPO's clip-higher: 0.28)")
arg("--mu", type=int, default=1, help="updates per rollout (μ)")
arg("--lr", type=float, default=1e-4, help="GRPO learning rate (AdamW)")
arg("--batch_prompts", type=int, default=64 if CUDA else 16, help="prompts per step B, over all ranks")
arg("--micro_batch", type=int, default=0, help="rows per forward/backward on a rank (accumulation); 0 = all")
arg("--max_new_tokens", type=int, default=48, help="completion length limit T")
arg("--temperature", type=float, default=1.0, help="sampling temperature of rollouts and pass@k, >= 0.01")
arg("--format_bonus", type=float, default=0.0, help="reward for a well-formed last line (reward.py), <= 0.1")
arg("--steps", type=int, default=300 if CUDA else 150, help="GRPO steps")
arg("--eval_every", type=int, default=50 if CUDA else 30, help="evaluate and checkpoint every this many steps")
arg("--eval_size", type=int, default=200, help="held-out problems scored for greedy accuracy and pass@k/maj@k")
arg("--data", default=None, help="GSM8K-format JSONL (question, answer ending '#### n'), not the built-in task")
arg("--difficulty", type=int, default=2, help="built-in task: at most this many operations per problem")
arg("--teacher_slip", type=float, default=0.6, help="built-in task: the teacher's chance to write a wrong answer")
arg("--verbose", type=float, default=0.0, help="built-in task: the teacher's chance to check a step on a line")
arg("--init_from", default="scratch", help="scratch, resume (out_dir/ckpt.pt), a nanogrpo .pt, or GPT-2 file/folder")
arg("--sft_steps", type=int, default=None, help=f"warm-start steps (default {3000 if CUDA else 1000}; 0 from a file)")
arg("--sft_lr", type=float, default=None, help="warm-start peak learning rate (default 2e-3; 3e-5 from a file)")
arg("--n_layer", type=int, default=4, help="transformer layers (from scratch)")
arg("--n_head", type=int, default=4, help="attention heads (from scratch)")
arg("--n_embd", type=int, default=256 if CUDA else 128, help="embedding width (from scratch)")
arg("--block_size", type=int, default=256, help="longest prompt + completion in tokens (from scratch)")
arg("--seed", type=int, default=1337, help="random seed")
arg("--device", default="auto", choices=["auto", "cuda", "mps", "cpu"], help="auto: cuda, then mps, then cpu")
arg("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="autocast dtype (auto: bf16 on CUDA)")
arg("--compile", action=argparse.BooleanOptionalAction, default=False, help="torch.compile the training forward")
arg("--decode", default="plain", choices=sample.DECODERS, help="sampler: plain loop, static shapes, or CUDA graph")
arg("--out_dir", default="out", help="for metrics.jsonl, ckpt.pt and the cached warm start warmstart.pt")
args, ckpt = p.parse_args(), None
ckpt_path, warm_path, metrics_path = (os.path.join(args.out_dir, name) for name in ("ckpt.pt", "warmstart.pt",
                                                                                   "metrics.jsonl"))
if args.init_from == "resume":  # nanoGPT's rule: the checkpoint's settings, but for the few that may change
    ckpt = load_checkpoint(ckpt_path)
    if "args" not in ckpt:
        die(f"{ckpt_path} holds a model but no training state; start from it with --init_from {ckpt_path}")
    args = p.parse_args(namespace=argparse.Namespace(**ckpt["args"]))  # the flags typed override the saved ones
    for k, v in ckpt["args"].items():  # --data may move: its content is checked below
        if getattr(args, k) != v and k not in "lr steps eval_every micro_batch device dtype compile decode data " \
                                              "out_dir init_from".split():
            die(f"--{k} {getattr(args, k)} differs from the checkpoint's {v}; a resumed run keeps it (drop the flag)")
scratch = "scratch" in (args.init_from, ckpt and ckpt["args"]["init_from"])
args.sft_steps = (3000 if CUDA else 1000) * scratch if args.sft_steps is None else args.sft_steps
args.sft_lr = args.sft_lr or (2e-3 if scratch else 3e-5)
checks = {  # the one validation block; NaN fails every comparison, so it lands here too
    "--G >= 2": args.G >= 2, "--beta >= 0": args.beta >= 0, "--temperature >= 0.01": args.temperature >= 0.01,
    "--clip_eps > 0 (and --clip_eps_high)": args.clip_eps > 0 and (args.clip_eps_high or 1) > 0,
    "--lr > 0, --sft_lr > 0": 0 < min(args.lr, args.sft_lr) and max(args.lr, args.sft_lr) < 1e9,
    "--mu, --batch_prompts, --max_new_tokens >= 1": min(args.mu, args.batch_prompts, args.max_new_tokens) >= 1,
    "--eval_every, --eval_size, --difficulty >= 1": min(args.eval_every, args.eval_size, args.difficulty) >= 1,
    "--micro_batch >= 0, --sft_steps >= 0": min(args.micro_batch, args.sft_steps) >= 0,
    f"--steps >= {ckpt['step'] if ckpt else 0}": args.steps >= (ckpt["step"] if ckpt else 0),
    f"--format_bonus in [0, {reward.MAX_FORMAT_BONUS}]": 0 <= args.format_bonus <= reward.MAX_FORMAT_BONUS,
    "--teacher_slip, --verbose in [0, 1]": 0 <= args.teacher_slip <= 1 and 0 <= args.verbose <= 1,
    "--n_layer, --n_head >= 1 and --n_embd a multiple of --n_head":
        min(args.n_layer, args.n_head) >= 1 and args.n_embd % args.n_head == 0}
for need in [need for need, ok in checks.items() if not ok][:1]:
    die(f"this run needs {need} (see --help)")
world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))  # set by torchrun
master, MPS = rank == 0, torch.backends.mps.is_available()  # rank 0 alone warm-starts, logs, evaluates, saves
device = args.device if args.device != "auto" else "cuda" if CUDA else "mps" if MPS else "cpu"
if (device == "cuda" and not CUDA) or (device == "mps" and not MPS) or args.batch_prompts % world:
    die(f"--device {device} is not available here, or --batch_prompts does not split over the {world} ranks")
if world > 1:
    device = f"cuda:{os.environ['LOCAL_RANK']}" if device == "cuda" else device
    if device.startswith("cuda"): torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=2))
bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and "cuda" in device and torch.cuda.is_bf16_supported())
autocast = torch.autocast(device.split(":")[0], dtype=torch.bfloat16) if bf16 else nullcontext()
os.makedirs(args.out_dir, exist_ok=True)  # fail now, not after the warm start, if out_dir takes no files
tempfile.TemporaryFile(dir=args.out_dir).close()
if master and not ckpt and os.path.exists(ckpt_path):
    os.remove(ckpt_path)  # a fresh run replaces the old one: it can never be resumed into another run's state
if master: print("config:", " ".join(f"{k}={v}" for k, v in vars(args).items()), f"device={device} bf16={bf16}")
torch.manual_seed(args.seed)  # the model's init; the task, sampling and evaluation have generators of their own

# ----------------------------------------------------------------------------- model and task
if args.init_from == "scratch":
    enc, prompt = byte_tokenizer(), PROMPT
    model = GPT(GPTConfig(block_size=args.block_size, vocab_size=enc.n_vocab, n_layer=args.n_layer,
                          n_head=args.n_head, n_embd=args.n_embd))
else:  # a nanogrpo checkpoint or GPT-2's weights: config, tokenizer and prompt template come from the file
    model, enc, prompt = load_model(ckpt_path if ckpt else args.init_from)
model, EOS, cfg = model.to(device), enc.eot_token, model.config
if shutil.disk_usage(args.out_dir).free < 20 * model.num_params():  # weights, reference, AdamW's moments, warm start
    die(f"--out_dir {args.out_dir} has too little free disk for checkpoints; free some space or pick another")
fwd = torch.compile(model) if args.compile else model  # the training forward; sampling uses `model`

def encode_prompt(question):
    return enc.encode(prompt.format(question=question))
def fits(pb):
    """The one block-size check: prompt + completion (the longer of T and the solution with EOS) fit the model."""
    need = len(encode_prompt(pb.question)) + max(args.max_new_tokens, len(enc.encode(pb.solution)) + 1)
    if need > cfg.block_size:
        die(f"{pb.question[:30]!r}...: prompt + answer need {need} tokens > --block_size {cfg.block_size}")
    return pb

if args.data:  # the last 10% (at most --eval_size) of the distinct questions are held out, never trained on
    data = [fits(pb) for pb in reward.read_gsm8k(args.data)]
    n_test = min(args.eval_size, max(1, len(data) // 10))
    test, train_set = data[-n_test:], data[:-n_test]
    task = f"data-{zlib.crc32(json.dumps(data).encode())}-eval{n_test}"  # by content: the file may move
else:  # 1000 held-out questions (or --eval_size if more) are never trained on; the first --eval_size are scored
    test_rng = random.Random(args.seed + 1)
    pool = [fits(reward.make_problem(test_rng, args.difficulty)) for _ in range(max(1000, args.eval_size))]
    test, held_out = pool[:args.eval_size], {pb.question for pb in pool}
    task = f"builtin-d{args.difficulty}-slip{args.teacher_slip}-verbose{args.verbose}-pool{len(pool)}"

def next_problem(rng):
    if args.data: return rng.choice(train_set)
    while (pb := reward.make_problem(rng, args.difficulty, args.teacher_slip, args.verbose)).question in held_out:
        pass
    return fits(pb)
def reward_fn(texts, golds):
    """THE reward hook: (N,) rewards of N completions. A fork's partial credit or format reward goes here;
    accuracy is always the verifier's correctness (reward.correct), never these values."""
    return reward.rewards(texts, golds, format_bonus=args.format_bonus)
def logprobs(net, roll, rows, temperature=args.temperature):
    """(n, T) log-probs of the completion tokens of a Rollout's `rows` under `net`, as the update computes them."""
    with autocast:
        logits = net(roll.tokens[rows], roll.mask[rows])  # (n, P+T, V)
    return grpo.completion_logprobs(logits, roll.tokens[rows], roll.prompt_len, temperature)

# ----------------------------------------------------------------------------- warm start
def warm_start():
    """Supervised fine-tuning: maximise the log-likelihood of the teacher's solutions (with EOS), token mean."""
    opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = random.Random(f"{args.seed}-sft")  # the warm start's problems
    for it in range(1, args.sft_steps + 1):
        for group in opt.param_groups:  # linear warmup, cosine decay to 10%
            group["lr"] = args.sft_lr * min(1, it / 100) * (0.1 + 0.45 * (1 + math.cos(math.pi * it / args.sft_steps)))
        batch = [next_problem(rng) for _ in range(64)]
        roll = sample.teacher_rollout([encode_prompt(pb.question) for pb in batch],
                                      [enc.encode(pb.solution) + [EOS] for pb in batch], eos_id=EOS, device=device)
        opt.zero_grad(set_to_none=True)
        for rows in (slice(i, i + (args.micro_batch or 64)) for i in range(0, 64, args.micro_batch or 64)):
            nll = -grpo.aggregate(logprobs(fwd, roll, rows, 1.0), roll.completion_mask[rows], "dapo", num_seqs=64,
                                  num_tokens=roll.completion_mask.sum(), max_len=roll.completion_mask.shape[1])
            nll.backward()
        if torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):  # no NaN reaches the weights
            opt.step()
        if it % 100 == 0 or it == args.sft_steps: print(f"warm start {it}/{args.sft_steps}", flush=True)

warm_key = f"{args.init_from if scratch else os.path.abspath(args.init_from)}-{task}-{cfg}-sft{args.sft_steps}-" \
           f"lr{args.sft_lr}-seed{args.seed}"  # what the warm start depends on; a cache with another key is redone
if ckpt and ckpt["task"] != task:
    die(f"the task changed since {ckpt_path} was written (another --data content or task flag); start a fresh run")
if not ckpt and args.sft_steps > 0:
    if master and (not os.path.isfile(warm_path) or load_checkpoint(warm_path).get("key") != warm_key):
        t0 = time.time()
        warm_start()
        save_checkpoint(warm_path, model, enc, prompt, key=warm_key, seconds=time.time() - t0)
    if world > 1: dist.barrier()  # the other ranks wait for rank 0's warm start, then load it
    warm = load_checkpoint(warm_path)
    restore(model, warm["model"], warm_path)
    if master: print(f"warm start: {args.sft_steps} steps, {warm['seconds']:.0f}s when trained, in {warm_path}")

# ----------------------------------------------------------------------------- GRPO
ref = copy.deepcopy(model).requires_grad_(False) if args.beta > 0 else None  # frozen π_ref, only when β > 0
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
step, log_bytes, gen = 0, 0, torch.Generator(device)
if ckpt:
    optimizer.load_state_dict(ckpt["optimizer"])
    optimizer.param_groups[0]["lr"] = args.lr  # the flag, not the saved value: one source of truth
    if ref is not None: restore(ref, ckpt["ref"], ckpt_path)
    step, log_bytes = ckpt["step"], ckpt["log_bytes"]
    if master and (not os.path.isfile(metrics_path) or os.path.getsize(metrics_path) < log_bytes):
        die(f"{metrics_path} is shorter than when {ckpt_path} was written; restore it or start a fresh run")
if master:  # keep the log up to the checkpoint (what a crash wrote after it goes); a fresh run starts a fresh log
    open(metrics_path, "a").truncate(log_bytes)

def all_sum(t):
    """t summed over the data-parallel ranks, in place; with one process, t itself."""
    if world > 1: dist.all_reduce(t)
    return t
def all_rows(t):
    """(n, ...) on each rank -> (world*n, ...) in rank order: the whole step's rows, for the log."""
    if world == 1: return t
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    return torch.cat(parts)
def log(record, show):
    """One record to metrics.jsonl (strict JSON: a non-finite number is null) and its `show` keys to stdout."""
    record = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}
    if master:
        with open(metrics_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(" ".join(f"{k} {record[k]:.4g}" if isinstance(record[k], float) else f"{k} {record[k]}" for k in show))

def checkpoint():  # no random state to save: every step re-seeds its streams from (seed, step, rank)
    if master:
        save_checkpoint(ckpt_path, model, enc, prompt, optimizer=optimizer.state_dict(), step=step, task=task,
                        args=vars(args), ref=ref and ref.state_dict(), log_bytes=os.path.getsize(metrics_path))

def evaluate():  # on the held-out problems, with a generator of its own: the numbers depend on the weights only
    with autocast:
        ev = sample.evaluate(model, [encode_prompt(pb.question) for pb in test], [pb.gold for pb in test], args.G,
                             args.max_new_tokens, enc, args.temperature, eos_id=EOS, batch=args.batch_prompts,
                             generator=torch.Generator(device).manual_seed(args.seed + 1), decode=args.decode)
    log({"kind": "eval", "step": step, **ev},
        ["kind", "step", "greedy_acc", "greedy_acc_se", "pass@1", f"pass@{args.G}", "maj@1", f"maj@{args.G}"])

stop = []  # Ctrl-C asks to stop: the step in flight finishes on every rank, then a checkpoint is saved
def request_stop(signum, frame):
    print("Ctrl-C: finishing this step, then saving (Ctrl-C again to quit at once)", flush=True)
    stop.append(signum)
    signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGINT, request_stop)
if master and not ckpt: evaluate()  # the starting point: the warm start's accuracy and pass@k
start_step, B = step, args.batch_prompts // world  # B: this rank's prompts per step
while step < args.steps:
    t0, rng = time.time(), random.Random(f"{args.seed}-grpo-{step}")  # the step's problems: the same on every rank
    gen.manual_seed(args.seed + 1_000_003 * (rank + 1) + step)       # this rank's own sampling stream
    # 1. sample G completions for this rank's share of the step's prompts (rows b*G .. b*G+G-1 answer prompt b)
    problems = [next_problem(rng) for _ in range(args.batch_prompts)][rank * B:(rank + 1) * B]
    with autocast:
        roll = sample.generate(model, [encode_prompt(pb.question) for pb in problems], args.G, args.max_new_tokens,
                               args.temperature, eos_id=EOS, generator=gen, decode=args.decode)
    # 2. score them; 3. one advantage per completion, within its group (a new tensor: rewards stay as they are)
    texts, golds = sample.completions_text(roll, enc), [pb.gold for pb in problems]
    rewards = reward_fn(texts, golds).to(device)                                # (N,)
    correct = reward.correct(texts, golds).to(device)                           # (N,) bool, the verifier's verdict
    advantages = advantage.group_advantages(rewards, args.G, method=args.adv)  # (N,)
    mask, (N, T) = roll.completion_mask, roll.completion_mask.shape             # (N, T) up to and including EOS
    # the step's loss denominators over all micro-batches and ranks, and whether any rank's policy diverged
    counts = all_sum(torch.stack([mask.sum(), (~torch.isfinite(roll.logprobs[mask])).sum()]).float())  # (2,)
    if counts[1] > 0:
        die(f"step {step + 1}: the policy's log-probs are not finite: lower --lr (the last checkpoint is intact)")
    totals = dict(num_seqs=args.batch_prompts * args.G, num_tokens=counts[0].clamp(min=1), max_len=args.max_new_tokens)
    micro = [slice(i, i + (args.micro_batch or N)) for i in range(0, N, args.micro_batch or N)]
    # 4. π_ref's log-probs of the sampled tokens, once per rollout, without grad
    with torch.no_grad():
        ref_logp = torch.cat([logprobs(ref, roll, rows) for rows in micro]) if ref is not None else None  # (N, T)
    # 5. μ updates on this rollout. In the first, the weights are still π_old's: its forward gives old_logp.
    old_logp = torch.zeros(N, T, device=device)  # (N, T)
    for inner in range(args.mu):
        optimizer.zero_grad(set_to_none=True)
        stats = {}  # of this update; each stat grpo_loss returns is this micro-batch's share of the step: they add
        for rows in micro:
            with autocast:  # the training forward; a fork's entropy bonus would start from these logits
                logits = fwd(roll.tokens[rows], roll.mask[rows])  # (n, P+T, V)
            logp = grpo.completion_logprobs(logits, roll.tokens[rows], roll.prompt_len, args.temperature)  # (n, T)
            if inner == 0: old_logp[rows] = logp.detach()
            loss, st = grpo.grpo_loss(logp, old_logp[rows], None if ref is None else ref_logp[rows], advantages[rows],
                                      mask[rows], clip_eps=args.clip_eps, clip_eps_high=args.clip_eps_high,
                                      beta=args.beta, kl=args.kl, agg=args.agg, **totals)
            loss.backward()
            stats = {k: stats.get(k, 0) + v for k, v in st.items()}
        for q in model.parameters():  # the step's gradient is the sum over ranks: the denominators are step-wide
            all_sum(q.grad)
        stats = dict(zip(stats, all_sum(torch.stack(list(stats.values())).float()).tolist()))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (math.isfinite(stats["loss"]) and torch.isfinite(grad_norm)):  # no NaN reaches the weights
            log({"kind": "skipped", "step": step + 1, "inner": inner}, ["kind", "step", "inner"])
            continue
        optimizer.step()
    step += 1
    # the log, over every rank's rows; logp_gap: the largest |π_old - sampler| log-prob, at the same temperature
    table = all_rows(torch.stack([rewards, correct.float(), roll.lengths.float(), roll.truncated.float(),
                                  ((old_logp - roll.logprobs).abs() * mask).amax(dim=1)], dim=1))  # (B*G*world, 5)
    right, length, gap, dt = table[:, 1] > 0, table[:, 2], table[:, 4].max().item(), time.time() - t0
    groups = {k: v.item() for k, v in advantage.group_stats(table[:, 0], args.G).items()}  # reward_mean, dead_frac..
    log({"kind": "train", "step": step, **groups, "acc": right.float().mean().item(), **stats,
         "len": length.mean().item(), "truncated": table[:, 3].mean().item(),
         "len_right": length[right].mean().item(), "len_wrong": length[~right].mean().item(), "logp_gap": gap,
         "tok_s": stats["num_tokens"] / dt, "dt": dt},
        "step reward_mean acc dead_frac kl clip_frac_low clip_frac_high len truncated logp_gap tok_s dt".split())
    if master and gap > (0.1 if bf16 else 1e-3):  # π_old must be scored like the sampler: temperature, masks, dtype
        print(f"WARNING: logp_gap {gap:.3g}: the trainer's log-probs of the sampled tokens are not the sampler's")
    stopping = all_sum(torch.tensor([len(stop)], device=device)).item() > 0  # every rank stops after the same step
    if step % args.eval_every == 0 or step == args.steps or stopping:
        if master and not stopping: evaluate()
        checkpoint()
    if stopping: break
if step == start_step and not ckpt: checkpoint()  # --steps 0: the starting model, ready for sample.py
if world > 1:  # every rank waits here for rank 0's last evaluation and save: none exits while rank 0 works
    dist.barrier()
    dist.destroy_process_group()
if stop: sys.exit(f"stopped at step {step}; saved {ckpt_path}, continue with --init_from resume")
