"""
train.py: warm-start a small GPT on arithmetic word problems, then train it with GRPO.

    python train.py --G 8 --beta 0.04          # CUDA if present, else MPS, else CPU

One GRPO step (Shao et al. 2024, DeepSeekMath), each line a call into one other file:
    o_1..o_G ~ π_old(·|q) for B prompts q                   sample.generate      (N = B*G rows)
    r_i = 1[answer(o_i) == gold]                            reward.rewards       (N,)
    A_i = (r_i - mean(r)) / (std(r) + eps) within a group   advantage.group_advantages
    loss = -1/G Σ_i 1/|o_i| Σ_t [min(ρ A, clip(ρ) A) - β k3] grpo.grpo_loss, μ updates per rollout
The built-in task (procedural word problems, `make_problem`) and the warm start live here;
pass@k and maj@k live in reward.py. Where this departs from DeepSeekMath:
- a tiny byte-level GPT trained from scratch, and a warm start (SFT) on a noisy teacher that
  writes a wrong final answer some of the time, instead of DeepSeekMath-Instruct 7B;
- a rule-based verifier instead of a learned reward model (reward.py);
- π_old's log-probs come from the first inner update's own forward (weights are still π_old
  then), so with μ = 1 the ratio is exactly 1; the paper's setting, μ = 1, is the default;
- smaller defaults (model, batch, steps) when CUDA is not found; they are printed at the start.
"""
import argparse, copy, json, math, os, pickle, random, re, signal, sys, time, zlib
from contextlib import nullcontext

import torch
import torch.nn.functional as F

import reward
from advantage import group_advantages, group_stats
from grpo import completion_logprobs, grpo_loss
from model import GPT, GPTConfig, get_tokenizer, left_pad
from sample import completions_text, generate

# ----------------------------------------------------------------------------- config
def die(msg):
    sys.exit(f"error: {msg}")  # user errors end with one line, never a traceback


def ranged(cast, lo, hi=math.inf, open_lo=False):
    """An argparse type: `cast` the text, then require lo <= value <= hi (lo < value if open_lo)."""
    def parse(text):
        v = cast(text)
        if not math.isfinite(v) or v < lo or v > hi or (open_lo and v == lo):
            raise argparse.ArgumentTypeError(f"{text} is impossible, it must be {'>' if open_lo else '>='} {lo}"
                                             + (f" and <= {hi}" if hi < math.inf else ""))
        return v
    parse.__name__ = cast.__name__  # argparse names it in "invalid int value"
    return parse


def save(obj, path):
    """Atomic write: a half-written checkpoint never replaces a good one."""
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def load(path, keys=()):
    """A checkpoint dict, loaded without unpickling code; a bad file ends with a one-line error."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
        die(f"cannot load {path} ({type(e).__name__}); delete it or pick another --init_from")
    if keys and not (isinstance(obj, dict) and all(k in obj for k in keys)):
        die(f"{path} is not a nanogrpo checkpoint of this kind; delete it or pick another --init_from")
    return obj


p = argparse.ArgumentParser(description=__doc__.split("\n")[1], formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                            allow_abbrev=False)
p.error = lambda msg: die(f"{msg} (see --help)")
p.add_argument("--G", type=ranged(int, 2), default=8, help="completions per prompt (group size), at least 2")
p.add_argument("--beta", type=ranged(float, 0), default=0.04, help="KL coefficient; 0 drops the reference model")
p.add_argument("--clip_eps", type=ranged(float, 0, open_lo=True), default=0.2, help="clip range ε (ε_low)")
p.add_argument("--clip_eps_high", type=ranged(float, 0, open_lo=True), default=None, help="upper clip ε_high (DAPO clip-higher); default ε")
p.add_argument("--mu", type=ranged(int, 1), default=1, help="inner updates per rollout (μ)")
p.add_argument("--adv", default="std", choices=["std", "mean", "loo", "dr_grpo", "none"], help="advantage estimator")
p.add_argument("--agg", default="grpo", choices=["grpo", "dapo", "dr_grpo"], help="token aggregation of the loss")
p.add_argument("--kl", default="k3", choices=["k1", "k2", "k3"], help="per-token KL estimator")
p.add_argument("--lr", type=ranged(float, 0, open_lo=True), default=1e-4, help="GRPO learning rate (AdamW)")
p.add_argument("--batch_prompts", type=ranged(int, 1), default=None, help="prompts per step B (auto: 64 on CUDA, 16 elsewhere)")
p.add_argument("--micro_batch", type=ranged(int, 0), default=0, help="rows per forward/backward (gradient accumulation); 0 = all")
p.add_argument("--max_new_tokens", type=ranged(int, 1), default=48, help="completion length limit T")
p.add_argument("--temperature", type=ranged(float, 0.01), default=1.0, help="sampling temperature for rollouts and pass@k (>= 0.01)")
p.add_argument("--steps", type=ranged(int, 0), default=None, help="GRPO steps (auto: 300 on CUDA, 150 elsewhere)")
p.add_argument("--eval_every", type=ranged(int, 1), default=None, help="evaluate every this many steps (auto: 50 on CUDA, 30 elsewhere)")
p.add_argument("--eval_size", type=ranged(int, 1), default=200, help="held-out problems for greedy accuracy and pass@k/maj@k")
p.add_argument("--sft_steps", type=ranged(int, 0), default=None, help="warm-start steps (auto: 3000 on CUDA, 1000 elsewhere)")
p.add_argument("--teacher_slip", type=ranged(float, 0, 1), default=0.6, help="built-in task: the warm-start teacher's chance to write a wrong final answer")
p.add_argument("--difficulty", type=ranged(int, 1), default=2, help="built-in task: at most this many operations per problem")
p.add_argument("--n_layer", type=ranged(int, 1), default=4, help="transformer layers")
p.add_argument("--n_embd", type=ranged(int, 4), default=None, help="embedding width, a multiple of the 4 heads (auto: 256 on CUDA, 128 elsewhere)")
p.add_argument("--block_size", type=ranged(int, 8), default=256, help="longest prompt + completion, in tokens")
p.add_argument("--seed", type=ranged(int, 0, 2**31 - 1), default=1337, help="random seed")
p.add_argument("--device", default="auto", choices=["auto", "cuda", "mps", "cpu"], help="auto: cuda, then mps, then cpu")
p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="autocast dtype (auto: bf16 where supported)")
p.add_argument("--compile", action="store_true", help="torch.compile the training forward")
p.add_argument("--out_dir", default="out", help="metrics.jsonl, ckpt.pt and the cached warm start go here")
p.add_argument("--init_from", default="warmstart", help="warmstart (cached SFT), resume (out_dir/ckpt.pt), or a .pt path")
p.add_argument("--data", default=None, help="GSM8K-format JSONL (question, answer ending in '#### n') instead of the built-in task")
args = p.parse_args()
given = {t[2:].split("=")[0] for t in sys.argv[1:] if t.startswith("--")}  # the flags typed (no abbreviations)
ckpt_path, warm_path = os.path.join(args.out_dir, "ckpt.pt"), os.path.join(args.out_dir, "warmstart.pt")
if args.init_from == "resume":  # a resumed run keeps its settings: flags not typed come from the checkpoint
    if not os.path.isfile(ckpt_path):
        die(f"--init_from resume: no checkpoint at {ckpt_path}")
    ckpt = load(ckpt_path, ("model", "optimizer", "step", "args", "task", "ref", "task_rng", "gen_rng"))
    if not isinstance(ckpt["args"], dict):
        die(f"{ckpt_path} is not a nanogrpo checkpoint; delete it or start a fresh run")
    for k, v in ckpt["args"].items():
        if k in ("out_dir", "init_from"):  # where the run lives now and how it starts: this command's
            continue
        if k not in given:
            setattr(args, k, v)
        elif v != getattr(args, k) and k not in ("lr", "steps", "eval_every", "micro_batch", "device", "dtype", "compile"):
            die(f"--{k} {getattr(args, k)} differs from the checkpoint's {v}; a resumed run keeps it (drop the flag)")

device = args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else \
    "mps" if torch.backends.mps.is_available() else "cpu"
if (device == "cuda" and not torch.cuda.is_available()) or (device == "mps" and not torch.backends.mps.is_available()):
    die(f"--device {device} is not available here; use --device auto")
auto = dict(batch_prompts=64, steps=300, eval_every=50, sft_steps=3000, n_embd=256) if device == "cuda" else \
    dict(batch_prompts=16, steps=150, eval_every=30, sft_steps=1000, n_embd=128)
for k, v in auto.items():  # the one place a device-dependent default is chosen
    if getattr(args, k) is None:
        setattr(args, k, v)
N_HEAD = 4
if args.n_embd % N_HEAD:
    die(f"--n_embd {args.n_embd} must be a multiple of {N_HEAD} (the number of heads)")
bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and device == "cuda" and torch.cuda.is_bf16_supported())
if bf16 and device != "cuda":
    die("--dtype bfloat16 autocast is only used on CUDA here; use --dtype float32")
autocast = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else nullcontext()
print("config: " + " ".join(f"{k}={v}" for k, v in vars(args).items()) + f" device={device} bf16={bf16}")
torch.manual_seed(args.seed)  # the model's init; sampling and evaluation use their own generators
try:
    os.makedirs(args.out_dir, exist_ok=True)
except OSError as e:
    die(f"--out_dir {args.out_dir}: {e.strerror}")

# ----------------------------------------------------------------------------- task
NAMES = "Ann Ben Cal Dee Eli Fay Gus Ivy Jo Kim Leo Mia Ned Ola Pia Raj Sam Tia Uma Vic".split()
ITEMS = "apples pens cards coins books shells stamps beads eggs nuts".split()


def make_problem(rng, difficulty, slip=0.0):
    """A word problem, 1..difficulty operations on numbers 1-9: (question, worked solution, gold).
    With probability `slip` the teacher's final line repeats the number before the last
    operation instead of the result: a wrong answer that RL with a verifier can unlearn."""
    name, item, x = rng.choice(NAMES), rng.choice(ITEMS), rng.randint(2, 9)
    text, lines = f"{name} has {x} {item}", []
    for _ in range(rng.randint(1, difficulty)):
        prev = x
        if rng.random() < 0.5 or x < 2:  # nothing to give away from 1
            n = rng.randint(1, 9)
            x, text, op = x + n, text + f", gets {n} more", "+"
        else:
            n = rng.randint(1, min(9, x - 1))
            x, text, op = x - n, text + f", gives away {n}", "-"
        lines.append(f"{prev}{op}{n}={x}")
    shown = prev if rng.random() < slip else x
    return f"{text}. How many {item} now?", "\n".join(lines) + f"\n#### {shown}", str(x)


def load_jsonl(path):
    """GSM8K-format lines -> [(question, solution, gold)]; a bad file ends with a one-line error."""
    if not os.path.isfile(path):
        die(f"--data {path}: no such file")
    rows = []
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line.decode("utf-8"))
                q, a = str(d["question"]), str(d["answer"])
                gold = a.rsplit("####", 1)[1].strip()
            except (ValueError, KeyError, TypeError, IndexError):
                die(f"--data {path} line {i}: expected JSON with 'question' and 'answer' ending in '#### n'")
            if reward.parse_number(gold) is None:
                die(f"--data {path} line {i}: the answer after '####' is not a number: {gold[:40]!r}")
            rows.append((q, re.sub(r"<<[^>]*>>", "", a), gold))  # drop GSM8K's calculator annotations
    if len(rows) < 2:
        die(f"--data {path} holds {len(rows)} problems; it needs at least 2 (some are held out for evaluation)")
    return rows


enc = get_tokenizer("bytes")
EOS = enc.eot_token
fmt = lambda q: enc.encode(f"Q: {q}\nA: ")  # noqa: E731, the prompt template


def fits(problem):
    """Prompt + completion (the longer of max_new_tokens and the solution with EOS) fit the model."""
    q, s, _ = problem
    if len(fmt(q)) + max(args.max_new_tokens, len(enc.encode(s)) + 1) > args.block_size:
        die(f"a prompt + completion does not fit --block_size {args.block_size} tokens; raise it (question: {q[:30]!r}...)")
    return problem


if args.data:
    data = [fits(row) for row in load_jsonl(args.data)]
    n_test = min(args.eval_size, max(1, len(data) // 10))
    test, train_rows = data[-n_test:], data[:-n_test]
    next_problem = lambda rng: rng.choice(train_rows)  # noqa: E731
else:
    test_rng = random.Random(args.seed + 1)
    test = [fits(make_problem(test_rng, args.difficulty)) for _ in range(args.eval_size)]
    held_out = {q for q, _, _ in test}

    def next_problem(rng):
        while True:  # never train on a held-out question
            prob = make_problem(rng, args.difficulty, args.teacher_slip)
            if prob[0] not in held_out:
                return fits(prob)
sft_rng, rl_rng = random.Random(args.seed + 2), random.Random(args.seed + 3)  # the warm start's and GRPO's problems

# ----------------------------------------------------------------------------- model and warm start
cfg = GPTConfig(block_size=args.block_size, vocab_size=enc.n_vocab, n_layer=args.n_layer, n_head=N_HEAD, n_embd=args.n_embd)
model = GPT(cfg).to(device)
fwd = torch.compile(model) if args.compile else model  # the training forward; sampling uses `model`
print(f"model: {model.num_params() / 1e6:.2f}M parameters")


def restore(module, state, path):
    try:
        module.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError) as e:  # another model size, or not a state dict
        why = [line.strip() for line in str(e).splitlines() if line.strip()][-1][:100]
        die(f"{path} does not fit this model ({why}); match --n_layer/--n_embd/--block_size")
    if not all(torch.isfinite(t).all() for t in module.state_dict().values()):
        die(f"{path} holds non-finite weights; it is damaged")


@torch.no_grad()
def evaluate():
    """Greedy accuracy (= maj@1 of greedy) and pass@k / maj@k for k = 1..G on the held-out split.
    Its own seeded generator: the numbers depend on the weights only, not on the training RNG."""
    qs, golds = [fmt(q) for q, _, _ in test], [g for _, _, g in test]
    eval_gen = torch.Generator(device).manual_seed(args.seed)
    with autocast:
        greedy = completions_text(generate(model, qs, 1, args.max_new_tokens, temperature=0, eos_id=EOS), enc)
        samples = completions_text(generate(model, qs, args.G, args.max_new_tokens, args.temperature,
                                            eos_id=EOS, generator=eval_gen), enc)
    return {"greedy_acc": reward.rewards(greedy, golds).mean().item(), **reward.sampled_metrics(samples, golds, args.G)}


def warm_start():
    """Supervised fine-tuning on teacher solutions: cross-entropy on solution tokens (and EOS) only."""
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    for it in range(1, args.sft_steps + 1):
        for group in opt.param_groups:  # linear warmup, cosine decay to 10%
            group["lr"] = 2e-3 * min(1, it / 100) * (0.1 + 0.45 * (1 + math.cos(math.pi * it / args.sft_steps)))
        pairs = [(fmt(q), enc.encode(s) + [EOS]) for q, s, _ in (next_problem(sft_rng) for _ in range(64))]
        idx, mask = left_pad([q + s for q, s in pairs], EOS)  # (B, L) prompt + solution, left-padded
        target = torch.zeros_like(mask)                      # (B, L) True on solution tokens
        for b, (_, s) in enumerate(pairs):
            target[b, -len(s):] = True
        idx, mask, target = idx.to(device), mask.to(device), target.to(device)
        with autocast:
            logits = fwd(idx[:, :-1], mask[:, :-1])  # (B, L-1, V); position t predicts token t+1
        loss = F.cross_entropy(logits.float()[target[:, 1:]], idx[:, 1:][target[:, 1:]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (torch.isfinite(loss) and torch.isfinite(grad_norm)):  # never let a NaN reach the weights
            print(f"warm start {it}: non-finite loss or gradient, update skipped")
            continue
        opt.step()
        if it % 100 == 0 or it == args.sft_steps:
            print(f"warm start {it}/{args.sft_steps}: loss {loss.item():.3f}", flush=True)


step, metrics_path = 0, os.path.join(args.out_dir, "metrics.jsonl")
task = f"data-{zlib.crc32(json.dumps(data).encode())}" if args.data else f"builtin-d{args.difficulty}-slip{args.teacher_slip}"
task_key = f"{task}-eval{args.eval_size}-{cfg}-sft{args.sft_steps}-seed{args.seed}"  # reuse a cached warm start only for this
if args.init_from == "resume":
    if ckpt["task"] != task:
        die(f"the task changed since {ckpt_path} was written (another --data file or content); start a fresh run")
    restore(model, ckpt["model"], ckpt_path)
elif args.init_from == "warmstart":
    warm = load(warm_path, ("key", "model", "seconds")) if os.path.isfile(warm_path) else None
    if warm is None or warm["key"] != task_key:
        t0 = time.time()
        try:
            warm_start()
        except KeyboardInterrupt:
            die("interrupted during the warm start; nothing was saved")
        warm = {"key": task_key, "model": model.state_dict(), "seconds": time.time() - t0}
        save(warm, warm_path)
    restore(model, warm["model"], warm_path)
    print(f"warm start: {args.sft_steps} steps, {warm['seconds']:.0f}s when trained, cached in {warm_path}")
else:
    if not os.path.isfile(args.init_from):
        die(f"--init_from {args.init_from}: not 'warmstart', 'resume' or an existing .pt file")
    state = load(args.init_from)
    restore(model, state.get("model", state) if isinstance(state, dict) else state, args.init_from)

# ----------------------------------------------------------------------------- GRPO
ref = copy.deepcopy(model).requires_grad_(False) if args.beta > 0 else None  # frozen π_ref
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
gen = torch.Generator(device).manual_seed(args.seed)  # rollouts are reproducible from here
if args.init_from == "resume":
    optimizer.load_state_dict(ckpt["optimizer"])
    for group in optimizer.param_groups:
        group["lr"] = args.lr  # the flag, not the saved value: one source of truth
    step = ckpt["step"]
    if ref is not None:
        restore(ref, ckpt["ref"], ckpt_path)
    rl_rng.setstate(ckpt["task_rng"])
    try:
        gen.set_state(ckpt["gen_rng"])
    except RuntimeError:
        die(f"{ckpt_path} was written on another kind of device; resume on that one (--device)")
kept = []  # a fresh run starts a fresh log (and will overwrite ckpt.pt); a resumed one keeps its past
if args.init_from == "resume" and os.path.isfile(metrics_path):
    with open(metrics_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                if json.loads(line)["step"] <= step:  # drop what was written after the checkpoint
                    kept.append(line)
            except (ValueError, KeyError, TypeError):  # a line cut short by a crash
                print(f"metrics.jsonl: dropping a damaged line: {line[:60]!r}")
with open(metrics_path + ".tmp", "w") as f:
    f.writelines(kept)
os.replace(metrics_path + ".tmp", metrics_path)


def checkpoint():
    save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "args": vars(args), "task": task,
          "ref": ref.state_dict() if ref is not None else None, "task_rng": rl_rng.getstate(),
          "gen_rng": gen.get_state()}, ckpt_path)


def log(record):
    with open(metrics_path, "a") as f:
        f.write(json.dumps(record) + "\n")


def run_eval():
    ev = evaluate()
    log({"kind": "eval", "step": step, **ev})
    print(f"eval {step}: greedy_acc {ev['greedy_acc']:.3f} pass@1 {ev['pass@1']:.3f} pass@{args.G} "
          f"{ev[f'pass@{args.G}']:.3f} maj@1 {ev['maj@1']:.3f} maj@{args.G} {ev[f'maj@{args.G}']:.3f}", flush=True)


stop = []  # Ctrl-C asks to stop; the step in flight finishes, then a checkpoint is saved


def request_stop(signum, frame):
    print("Ctrl-C: finishing this step, then saving (Ctrl-C again to quit at once)")
    stop.append(signum)
    signal.signal(signal.SIGINT, signal.default_int_handler)


signal.signal(signal.SIGINT, request_stop)
if step == 0 and not kept:
    run_eval()  # the starting point: the warm start's greedy accuracy and pass@k
while step < args.steps and not stop:
    t0 = time.time()
    # 1. sample G completions for each of B prompts (rows b*G .. b*G+G-1 belong to prompt b)
    batch = [next_problem(rl_rng) for _ in range(args.batch_prompts)]
    with autocast:
        roll = generate(model, [fmt(q) for q, _, _ in batch], args.G, args.max_new_tokens,
                        args.temperature, eos_id=EOS, generator=gen)
    # 2. score them; 3. advantages, one per completion (a new tensor: rewards stay as they are)
    rewards = reward.rewards(completions_text(roll, enc), [g for _, _, g in batch]).to(device)  # (N,)
    advantages = group_advantages(rewards, args.G, method=args.adv)                            # (N,)
    completion_mask = roll.completion_mask                                                     # (N, T)
    N, T = completion_mask.shape
    # 4-5. μ updates on this rollout. During the first, the weights are still π_old's, so that
    # forward gives old_logp; ref_logp comes from the frozen copy, micro-batch by micro-batch.
    old_logp = torch.zeros(N, T, device=device)  # (N, T)
    ref_logp = torch.zeros(N, T, device=device) if ref is not None else None  # (N, T)
    mb = args.micro_batch or N
    totals = dict(num_seqs=N, num_tokens=completion_mask.sum().clamp(min=1), max_len=args.max_new_tokens)
    for inner in range(args.mu):
        optimizer.zero_grad(set_to_none=True)
        stats = {}  # of the last inner update, summed over micro-batches
        for start in range(0, N, mb):
            rows = slice(start, start + mb)  # this micro-batch's rows
            tokens, cmask = roll.tokens[rows], completion_mask[rows]
            with autocast:
                logp = completion_logprobs(fwd(tokens, roll.mask[rows]), tokens, roll.prompt_len, args.temperature)  # (n, T)
                if inner == 0:
                    old_logp[rows] = logp.detach()
                    if ref is not None:
                        with torch.no_grad():
                            ref_logp[rows] = completion_logprobs(ref(tokens, roll.mask[rows]), tokens,
                                                                 roll.prompt_len, args.temperature)
            loss, st = grpo_loss(logp, old_logp[rows], None if ref is None else ref_logp[rows], advantages[rows],
                                 cmask, args.clip_eps, args.clip_eps_high, args.beta, args.kl, args.agg, **totals)
            loss.backward()
            w = cmask.sum() / totals["num_tokens"]  # this micro-batch's share of the step's tokens
            for k in ("loss", "pg_loss", "kl_loss", "kl", "clip_frac_low", "clip_frac_high", "ratio_mean"):
                stats[k] = stats.get(k, 0.0) + (st[k] if k.endswith("loss") else w * st[k])  # losses add up
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if not (torch.isfinite(stats["loss"]) and torch.isfinite(grad_norm)):
            optimizer.zero_grad(set_to_none=True)  # a non-finite step never touches the weights
            print(f"step {step + 1}: non-finite loss or gradient, update skipped")
            log({"kind": "skipped", "step": step + 1, "inner": inner})
            continue
        optimizer.step()
    step += 1
    dt = time.time() - t0
    rec = {"kind": "train", "step": step, **{k: float(v) for k, v in group_stats(rewards, args.G).items()},
           "acc": float((rewards >= 1).float().mean()), **{k: float(v) for k, v in stats.items()},
           "len": float(roll.lengths.float().mean()), "truncated": float(roll.truncated.float().mean()),
           "tok_s": float(completion_mask.sum()) / dt, "dt": dt}
    log(rec)
    print(f"step {step}: reward {rec['reward_mean']:.3f} acc {rec['acc']:.3f} dead {rec['dead_frac']:.2f} "
          f"kl {rec['kl']:.4f} clip {rec['clip_frac_low']:.3f}/{rec['clip_frac_high']:.3f} len {rec['len']:.1f} "
          f"trunc {rec['truncated']:.2f} tok/s {rec['tok_s']:.0f} dt {dt:.2f}s", flush=True)
    if step % args.eval_every == 0 or step == args.steps:
        run_eval()
        checkpoint()
checkpoint()
if stop:
    sys.exit(f"stopped at step {step}; saved {ckpt_path}, continue with --init_from resume")
