"""train.py end to end, as a user runs it: resume, the warm-start cache, learning, user errors, reliability,
the temperature contract, plug-in points, and data-parallel ranks under torchrun."""

import contextlib
import gc
import io
import json
import math
import os
import random
import re
import runpy
import signal
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import advantage
import grpo
import reward
import sample
import tasks
from model import GPT, GPTConfig
from plumbing import checkpoint, cli
from plumbing.checkpoint import load_model, save_checkpoint
from plumbing.cli import die
from plumbing.export import GPT2_FILES
from plumbing.tokenizer import byte_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "--n_layer",
    "1",
    "--n_embd",
    "32",
    "--block_size",
    "128",
    "--max_new_tokens",
    "24",
    "--device",
    "cpu",
    "--eval_size",
    "4",
    "--batch_prompts",
    "2",
    "--G",
    "2",
]


def run(*flags, timeout=240, torchrun=0):
    """train.py in a process of its own (python, or torchrun with that many ranks), as a user runs it."""
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"]
        if torchrun
        else [sys.executable]
    )
    return subprocess.run(
        [*launcher, os.path.join(ROOT, "train.py"), *flags], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def start(*flags):
    """train.py started in a process of its own, its stdout read line by line as it runs. Ctrl-C reaches it as at a
    terminal even where the suite runs as a background job, whose shell makes it ignore SIGINT: a handler of Python's
    here (not an ignore) becomes the default in the new process."""
    cmd = [sys.executable, os.path.join(ROOT, "train.py"), *flags]
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    finally:
        signal.signal(signal.SIGINT, saved)


def here(*flags):
    """train.py in this process: no interpreter to start, and a test may patch a library function first. Its
    output and exit code are those of a process of its own: an uncaught error goes to train.py's excepthook."""
    out, err, saved = io.StringIO(), io.StringIO(), (sys.argv, sys.excepthook, signal.getsignal(signal.SIGINT))
    sys.argv = ["train.py", *flags]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                try:
                    runpy.run_path(os.path.join(ROOT, "train.py"), run_name="__main__")
                    code = 0
                except Exception as e:  # what the interpreter would hand to sys.excepthook
                    sys.excepthook(type(e), e, e.__traceback__)
                    code = 1
            except SystemExit as e:  # sys.exit(message): the message goes to stderr, the exit code is 1
                code = e.code if isinstance(e.code, int) or e.code is None else print(e.code, file=sys.stderr) or 1
    finally:
        sys.argv, sys.excepthook = saved[:2]
        signal.signal(signal.SIGINT, saved[2])
        gc.collect()  # the run's globals go, and with them its out_dir lock, as when a process ends
    return subprocess.CompletedProcess(flags, code or 0, out.getvalue(), err.getvalue())


def records(out_dir, kind):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["kind"] == kind]


def one_line_error(r, words):
    lines = r.stderr.strip().splitlines()
    return r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:") and words in lines[0]


def test_smoke_run_writes_metrics_resumes_and_cannot_resume_a_replaced_run(tmp_path):
    out = str(tmp_path / "out")
    r = run(*TINY, "--steps", "2", "--sft_steps", "3", "--eval_every", "2", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    assert " micro_batch=4 " in r.stdout.split("config:")[1]  # 0 by default: the most rows that fit, all 2 * 2 here
    assert [t["step"] for t in records(out, "train")] == [1, 2]
    for key in (
        "reward_mean",
        "acc",
        "dead_frac",
        "kl",
        "clip_frac_low",
        "clip_frac_high",
        "len",
        "len_right",
        "len_wrong",
        "truncated",
        "logp_gap",
        "tok_s",
        "dt",
        "loss",
        "pg_loss",
        "kl_loss",
        "num_tokens",
    ):
        assert key in records(out, "train")[0], key
    ev = records(out, "eval")[-1]
    assert {"greedy_acc", "greedy_acc_se", "pass@1", "pass@2", "maj@1", "maj@2"} <= set(ev)
    assert len(ev["greedy_right"]) == len(ev["sampled_right"]) == 4  # per held-out problem, for paired comparisons
    assert sum(ev["greedy_right"]) / 4 == ev["greedy_acc"] and sum(ev["sampled_right"]) / (4 * 2) == ev["pass@1"]
    assert os.path.isfile(os.path.join(out, "ckpt.pt")) and os.path.isfile(os.path.join(out, "warmstart.pt"))
    r = run(*TINY, "--steps", "3", "--eval_every", "2", "--out_dir", out, "--init_from", "resume", "--no-compile")
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == [1, 2, 3]  # continued, did not restart
    assert "warm start" not in r.stdout
    r = run(*TINY, "--init_from", "resume", "--steps", "0", "--out_dir", out)  # would rewrite the step budget
    assert one_line_error(r, "is at step 3: --steps must be at least that"), r.stderr
    # a fresh run in the same out_dir, stopped before its first checkpoint (here: a bad flag value after set-up
    # would not do; --steps 0 with a failing eval is hard to provoke, so the run simply ends before training):
    # the old run's checkpoint must be gone, never resumable into the new run's log
    r = run(
        *TINY, "--steps", "5", "--sft_steps", "3", "--eval_every", "5", "--out_dir", out, "--max_new_tokens", "200"
    )  # fails in set-up (too long for the block), after the out_dir is claimed
    assert one_line_error(r, "block_size"), r.stderr
    r = run(*TINY, "--init_from", "resume", "--steps", "6", "--out_dir", out)
    assert one_line_error(r, "ckpt.pt"), r.stderr


def test_warm_start_is_cached_and_eval_size_does_not_redo_it(tmp_path):
    out = str(tmp_path / "out")
    flags = [*TINY, "--steps", "0", "--sft_steps", "3", "--out_dir", out]
    r = here(*flags)
    assert r.returncode == 0 and "warm start 3/3" in r.stdout, r.stderr
    r = here(*flags, "--eval_size", "6")  # the last --eval_size wins; the warm start does not depend on it
    assert r.returncode == 0, r.stderr
    assert "warm start 3/3" not in r.stdout and "warm start: 3 steps" in r.stdout  # loaded, not retrained
    r = here(*flags, "--teacher_slip", "0.5")  # another task: another warm start
    assert r.returncode == 0 and "warm start 3/3" in r.stdout, r.stderr


def test_the_warm_start_shows_its_loss_and_a_run_of_dead_groups_is_named(tmp_path):
    """The warm start prints its first step, then a line every 10 s, and its last, each with the mean loss since the
    line before; a run whose every group is dead for its first 3 steps (an untrained model answers nothing right)
    says so once, naming what to check."""
    out = str(tmp_path / "out")
    r = here(*TINY, "--steps", "3", "--sft_steps", "2", "--out_dir", out)
    lines = [line for line in r.stdout.splitlines() if line.startswith("warm start ")]
    assert r.returncode == 0 and len(lines) == 2, r.stdout
    for line, it in zip(lines, (1, 2)):
        assert re.fullmatch(rf"warm start {it}/2: loss \d+\.\d{{3}} nats/token, \d+s", line), line
    assert [rec["dead_frac"] for rec in records(out, "train")] == [1.0] * 3
    warned = [line for line in r.stdout.splitlines() if line.startswith("WARNING: every group dead")]
    assert warned == [
        "WARNING: every group dead for 3 steps; check --prompt, --max_new_tokens (100% cut at the limit) "
        "and what is paid"
    ], r.stdout


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    flags = [*TINY, "--sft_steps", "3", "--eval_every", "2", "--mu", "2"]
    assert here(*flags, "--steps", "4", "--out_dir", a).returncode == 0
    assert here(*flags, "--steps", "2", "--out_dir", b).returncode == 0
    with open(os.path.join(b, "metrics.jsonl"), "a") as f:
        f.write('{"kind": "train", "st')  # a crash cut a line short after the checkpoint
    r = here(*TINY, "--steps", "4", "--out_dir", b, "--init_from", "resume")
    assert r.returncode == 0, r.stderr

    def strip(rows):
        return [{k: v for k, v in row.items() if k not in ("dt", "tok_s")} for row in rows]

    for kind in ("train", "eval"):
        assert strip(records(a, kind)) == strip(records(b, kind))
    wa, wb = (torch.load(os.path.join(d, "ckpt.pt"), weights_only=True)["model"] for d in (a, b))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def trivial_task(tmp_path):
    """A one-question task and a 2-layer model warm-started on a teacher that is right 1 time in 4 and else
    answers a random digit: sampled answers are right about 0.25 + 0.75/10."""
    data = tmp_path / "trivial.jsonl"
    with open(data, "w") as f:
        for q in ("What is two plus one?", "What is one plus two?"):  # two distinct questions: one is held out
            f.write(json.dumps({"question": q, "answer": "#### 3"}) + "\n")
    enc = byte_tokenizer()
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=128, vocab_size=257, n_layer=2, n_head=4, n_embd=32))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(0)
    for _ in range(200):
        digits = [3 if rng.random() < 0.25 else rng.randint(0, 9) for _ in range(32)]
        idx = torch.tensor([enc.encode(f"Q: What is two plus one?\nA: #### {d}") + [256] for d in digits])  # (32, L)
        logits = model(idx[:, :-1])[:, -7:]  # the last 7 predictions: "#### d" and EOS
        loss = F.cross_entropy(logits.reshape(-1, 257), idx[:, -7:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    init = tmp_path / "init.pt"
    save_checkpoint(init, model, enc)
    return [
        "--data",
        str(data),
        "--init_from",
        str(init),
        "--max_new_tokens",
        "8",
        "--device",
        "cpu",
        "--G",
        "8",
        "--seed",
        "0",
    ]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return trivial_task(tmp_path_factory.mktemp("task"))


def test_grpo_raises_reward_on_a_trivial_task(tmp_path, task):
    """GRPO with the verifier must learn to give the right digit (reward ≈ 0.3 -> near 1)."""
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "8", "--steps", "30", "--eval_every", "30", "--lr", "3e-3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rewards = [t["reward_mean"] for t in records(out, "train")]
    assert rewards[0] < 0.5, rewards  # it starts near the teacher's 0.25 + 0.75 / 10
    assert sum(rewards[-5:]) / 5 > 0.8, rewards  # and learns to give the right digit


def test_user_errors_are_one_line_messages(tmp_path):
    def write(name, data):
        path = tmp_path / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return str(path)

    bad = write("bad.jsonl", '{"question": "q", "answer": "#### 1"}\n{"question": "q"\n')
    no_marker = write("nomark.jsonl", '{"question": "q", "answer": "42"}\n')
    same = write("same.jsonl", '{"question": "q", "answer": "#### 1"}\n' * 5)  # one distinct question
    latin1 = write("latin1.jsonl", '{"question": "caf\xe9", "answer": "#### 1"}\n'.encode("latin-1"))
    a_file = write("a_file", "not a folder")
    cases = [
        (["--G", "1"], "--G: 1 is not in [2, 1024]"),
        (["--beta", "-0.1"], "--beta"),
        (["--beta", "nan"], "--beta"),
        (["--G", "two"], "--G"),
        (["--lr", "inf"], "--lr"),
        (["--n_embd", "30"], "--n_head"),
        (["--adv", "nope"], "--adv"),
        (["--format_bonus", "0.5"], "--format_bonus"),
        (["--data", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
        (["--data", bad], "line 2"),
        (["--data", no_marker], "line 1"),
        (["--data", same], "1 distinct"),
        (["--data", latin1], "line 1"),
        (["--init_from", write("a.pt", "a")], "a.pt"),
        (["--init_from", write("notes.pt", "some notes")], "notes"),
        (["--init_from", write("empty.pt", b"")], "empty"),
        (["--init_from", str(tmp_path / "no.pt")], "no.pt"),
        (["--block_size", "40"], "block_size"),
        (["--out_dir", a_file + "/out"], "a_file"),
        (["--init_from", "resume", "--out_dir", str(tmp_path / "nothing")], "ckpt.pt"),
        (["--lr", "1e308"], "--lr: 1e308 is not in (0, 1e+30]"),
        (["--clip_eps", "nan"], "--clip_eps: nan"),
        (["--clip_eps_high", "0"], "--clip_eps_high: 0 is not in (0"),
        (["--sft_lr", "0"], "--sft_lr: 0 is"),
        (["--seed", str(2**64)], "--seed"),
        (["--batch_prompts", "0"], "--batch_prompts: 0"),
        (["--G", "100000"], "--G: 100000"),
        (["--max_new_tokens", "1e9"], "invalid int value: '1e9'"),
        (["--difficulty", "1000000000"], "--difficulty"),
        (["--data", ""], "the data file name is empty"),
        (["--n_layer", "-1"], "--n_layer: -1"),
    ]
    if not torch.cuda.is_available():
        cases += [
            (["--decode", "graph"], "--decode graph captures a CUDA graph"),
            (["--device", "cuda"], "--device cuda"),
        ]
    for i, (flags, words) in enumerate(cases):
        runner = run if i in (0, 8) else here  # a process of its own for one bad flag and one bad file
        r = runner(*TINY, "--sft_steps", "0", "--steps", "0", "--out_dir", str(tmp_path / "o"), *flags)
        assert one_line_error(r, words), (flags, r.stderr)


def test_an_abbreviated_flag_is_refused_by_every_command_line(tmp_path, monkeypatch):
    """argparse would take --temp for --temperature (allow_abbrev): a typo'd or shortened flag is refused instead."""
    r = here(*TINY, "--temp", "0.5", "--sft_steps", "0", "--steps", "0", "--out_dir", str(tmp_path / "o"))
    assert one_line_error(r, "unrecognized arguments: --temp 0.5"), r.stderr
    for script, flags in (("sample.py", ["--temp", "0", "q"]), ("plumbing/export.py", ["--h", "a.pt", "hf"])):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
            monkeypatch.setattr(sys, "argv", [script, *flags])  # the command line in this process: quicker
            runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
        assert e.value.code == 2 and f"unrecognized arguments: {flags[0]}" in err.getvalue(), err.getvalue()


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_running_out_of_memory_ends_in_one_line_that_names_the_sizes(tmp_path, task, monkeypatch, where):
    """Sizes too large for this machine's memory: torch's allocator refuses, and the run ends in one line naming the
    flags to lower, not a traceback. On the CPU a real refusal (2^62 bytes); CUDA's OutOfMemoryError, raised."""

    def too_big(*args, **kwargs):
        if where == "cpu":
            return torch.empty(2**60, dtype=torch.float32)  # 2^62 bytes: more than any machine has
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB. GPU 0 has a total capacity of")

    monkeypatch.setattr(sample, "generate", too_big)
    r = here(*task, "--batch_prompts", "2", "--steps", "1", "--out_dir", str(tmp_path / "out"))
    assert one_line_error(r, "out of memory") and "--batch_prompts, --G, --sft_batch or --max_new_tokens" in r.stderr
    assert ("allocate" in r.stderr) and "Traceback" not in r.stderr


def test_sizes_that_cannot_fit_end_in_one_line_before_any_work(tmp_path):
    """Sizes whose estimate (model.check_memory) exceeds this machine's memory even one row a forward/backward, and an
    explicit --micro_batch too large for it: refused after the model and the task are built, before the warm start,
    in one line with the estimate, the most rows that fit and the flags to lower."""
    out = tmp_path / "out"
    r = here(*TINY, "--batch_prompts", "100000", "--G", "1024", "--sft_steps", "2", "--out_dir", str(out))
    assert one_line_error(r, "out of memory (a step needs to allocate about") and "--batch_prompts, --G" in r.stderr
    assert "at 1 rows a forward/backward" in r.stderr and ": 0 rows fit)" in r.stderr
    assert "warm start" not in r.stdout and not (out / "warmstart.pt").exists()
    long = ["--block_size", "65536", "--max_new_tokens", "60000", "--micro_batch", "16", "--sft_steps", "2"]
    r = here(*TINY, "--batch_prompts", "8", *long, "--out_dir", str(out))  # columns of 60,000: GiBs a row
    assert one_line_error(r, "at 16 rows a forward/backward, more than 100% of the")
    assert "lower --micro_batch" in r.stderr and " rows fit)" in r.stderr
    assert "warm start" not in r.stdout and not (out / "warmstart.pt").exists()


def test_garbage_in_the_run_folder_ends_in_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "warmstart.pt").write_text("x")  # a damaged cache
    r = here(*TINY, "--sft_steps", "2", "--steps", "0", "--out_dir", str(out))
    assert one_line_error(r, "warmstart.pt"), r.stderr
    (out / "warmstart.pt").unlink()
    (out / "ckpt.pt").write_bytes(b"a")
    r = here(*TINY, "--init_from", "resume", "--steps", "1", "--out_dir", str(out))
    assert one_line_error(r, "ckpt.pt"), r.stderr


def test_a_diverging_policy_stops_in_one_line_and_no_nan_reaches_a_checkpoint(tmp_path, task):
    """--lr 1e6, within its bounds, diverges: step 1's first update moves each weight by about 1e6 (AdamW's step is
    lr-sized whatever the gradient), so the second update's loss is not finite: it is skipped and logged so; the next
    rollout's forward overflows float32, its log-probs are not finite, and the run stops in one line with step 1's
    checkpoint intact and finite."""
    out = str(tmp_path / "out")
    flags = ["--batch_prompts", "4", "--steps", "6", "--eval_every", "1", "--mu", "2", "--lr", "1e6", "--out_dir", out]
    r = here(*task, *flags)
    assert one_line_error(r, "step 2: the policy's log-probs are not finite: lower --lr"), r.stderr
    assert [(t["step"], t["inner"]) for t in records(out, "skipped")] == [(1, 1)]
    assert "kind skipped step 1 inner 1" in r.stdout and [t["step"] for t in records(out, "train")] == [1]
    state = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["model"]
    assert all(torch.isfinite(t).all() for t in state.values())
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in metrics.jsonl"))  # strict JSON
    out = str(tmp_path / "lr1e3")  # every update after the first is skipped, yet the log-probs stay finite
    r = here(*task, "--batch_prompts", "4", "--steps", "3", "--mu", "2", "--lr", "1e3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    skipped = [(t["step"], t["inner"]) for t in records(out, "skipped")]
    assert skipped == [(1, 1), (2, 0), (2, 1), (3, 0), (3, 1)] and len(records(out, "train")) == 3


def test_a_run_whose_every_update_is_skipped_for_3_steps_stops_in_one_line(tmp_path, task, monkeypatch):
    """A policy collapsed with finite weights: its log-probs stay finite, but every loss or gradient is not, so every
    update is skipped (made so here: the loss times NaN). After 3 such steps in a row the run stops in one line saying
    why, its checkpoint as last saved; a resume of it stops the same way, 3 steps later."""
    plain = grpo.grpo_loss

    def nan_loss(*args, **kwargs):
        loss, stats = plain(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(grpo, "grpo_loss", nan_loss)
    out = str(tmp_path / "out")
    flags = ["--batch_prompts", "2", "--eval_every", "1", "--mu", "2", "--out_dir", out]
    r = here(*task, *flags, "--steps", "8")
    assert one_line_error(r, "step 3: every update of the last 3 steps was skipped"), r.stderr
    assert "lower --lr or go back to an earlier checkpoint" in r.stderr
    assert len(records(out, "skipped")) == 6 and [t["step"] for t in records(out, "train")] == [1, 2, 3]
    saved = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)
    assert saved["step"] == 2 and all(torch.isfinite(t).all() for t in saved["model"].values())
    r = here("--init_from", "resume", "--out_dir", out, "--steps", "8")
    assert one_line_error(r, "step 5: every update of the last 3 steps was skipped"), r.stderr


@pytest.mark.parametrize("ratio, dynamic", [("token", "0"), ("seq", "0"), ("token", "2"), ("seq", "2")])
def test_micro_batches_give_the_one_batch_step(tmp_path, task, ratio, dynamic, monkeypatch):
    """Gradient accumulation with step-level denominators: the same losses with or without --micro_batch, with
    GRPO's per-token ratio and with GSPO's per-answer one, and on a batch that dynamic sampling refilled."""
    calls = []

    def fork(
        run_task, problems, texts, **kw
    ):  # a fork's reward: round 1's groups all dead (0), then 1 for every third row
        calls.append(len(texts))
        return torch.tensor([float(len(calls) > 1 and i % 3 == 0) for i in range(len(texts))])

    if dynamic != "0":  # the step's batch is refilled: every group of the second round is live
        monkeypatch.setitem(tasks.REWARDS, "verifier", fork)
    logs = []
    for mb in ("0", "3"):
        out = str(tmp_path / f"mb{mb}")
        calls.clear()
        r = here(
            *task,
            "--dynamic",
            dynamic,
            "--steps",
            "1",
            "--mu",
            "2",
            "--agg",
            "dapo",
            "--micro_batch",
            mb,
            "--lr",
            "3e-3",
            "--batch_prompts",
            "4",
            "--ratio",
            ratio,
            "--out_dir",
            out,
        )
        assert r.returncode == 0, r.stderr
        logs.append(records(out, "train")[0])
    one, acc = logs
    assert abs(one["pg_loss"]) > 1e-4 and one["kl"] > 0  # μ = 2: the second update sees a moved policy
    assert one["rounds"] == acc["rounds"] == (1 if dynamic == "0" else 2)
    for k in ("loss", "pg_loss", "kl_loss", "kl", "ratio_mean", "reward_mean", "num_tokens", "clip_frac_low"):
        assert abs(one[k] - acc[k]) <= 1e-5 + 1e-3 * abs(one[k]), (k, one[k], acc[k])


@pytest.mark.parametrize("dynamic, rounds, dead, dead_sampled", [("0", 1, 1, 1), ("1", 2, 0.5, 0.75), ("5", 3, 0, 0.6)])
def test_dynamic_sampling_replaces_dead_groups_and_logs_what_was_sampled(
    tmp_path, task, monkeypatch, dynamic, rounds, dead, dead_sampled
):
    """--dynamic K (DAPO): the groups whose rewards are all equal are replaced by new ones, up to K more rounds. The
    step still trains on B groups, its denominators theirs; the log keeps the sampled dead share apart from the
    trained one. The fork's reward below: round 1 all 0 (4 dead groups); round 2 a live group, a dead one, a live
    one, a dead one; round 3 every group live. Dead shares sampled: 4/4, (4 + 2) / 8, (4 + 2 + 0) / 10."""
    calls, G = [], 8

    def fork(run_task, problems, texts, **kw):
        calls.append(len(texts))
        live = [len(calls) == 3 or (len(calls) == 2 and i // G % 2 == 0) for i in range(len(texts))]  # its group's
        return torch.tensor([float(on and i % G == 0) for i, on in enumerate(live)])  # (n,): one 1 in a live group

    monkeypatch.setitem(tasks.REWARDS, "verifier", fork)
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "4", "--steps", "1", "--dynamic", dynamic, "--lr", "3e-3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rec = records(out, "train")[0]
    assert calls == [32, 32, 16][:rounds]  # rows sampled in each round: the replaced groups' only
    assert rec["rounds"] == rounds and rec["dead_frac"] == dead and rec["dead_frac_sampled"] == dead_sampled
    assert rec["num_tokens"] == round(rec["len"] * 4 * G)  # 4 groups of G trained, whatever was sampled
    assert rec["reward_mean"] == (4 - 4 * dead) / (4 * G)  # the trained batch: its live groups hold one 1 each
    assert (abs(rec["pg_loss"]) > 0) == (dead < 1)  # dead groups have advantage 0: no policy gradient


def test_dynamic_sampling_keeps_groups_whole_and_each_row_its_own_reward(tmp_path, monkeypatch):
    """The refilled batch as the loss sees it (the built-in task: a question per group): each group's G rows share one
    prompt, and each row's reward is what its own completion earned. A fork's reward pays by the completion's own text,
    but nothing to groups 1, 3, 5 of round 1 (dead, so replaced while groups 0, 2, 4 are kept as they are live): a row
    moved without its reward, or a group broken up, is seen."""
    calls, seen, G = [], {}, 4

    def fork(run_task, problems, texts, **kw):
        calls.append(len(texts))
        first = len(calls) == 1
        return torch.tensor([0.0 if first and i // G % 2 else float(len(t) % 2) for i, t in enumerate(texts)])

    plain_adv, plain_logprobs = advantage.group_advantages, grpo.completion_logprobs

    def spy_adv(rewards, G, **kw):  # the step's rewards, after the refill
        seen["rewards"] = rewards.tolist()
        return plain_adv(rewards, G, **kw)

    def spy_logprobs(logits, seq, P, temperature=1.0):  # the training forward's rows (the last call with grad)
        if torch.is_grad_enabled():
            seen["tokens"], seen["P"] = seq.detach().clone(), P
        return plain_logprobs(logits, seq, P, temperature)

    monkeypatch.setitem(tasks.REWARDS, "verifier", fork)
    monkeypatch.setattr(advantage, "group_advantages", spy_adv)
    monkeypatch.setattr(grpo, "completion_logprobs", spy_logprobs)
    out = str(tmp_path / "out")
    r = here(
        *TINY,
        "--G",
        str(G),
        "--batch_prompts",
        "6",
        "--sft_steps",
        "2",
        "--steps",
        "1",
        "--dynamic",
        "3",
        "--out_dir",
        out,
    )
    assert r.returncode == 0, r.stderr
    assert calls[0] == 6 * G and 3 * G <= calls[1] < 6 * G and records(out, "train")[0]["rounds"] == len(calls)
    tokens, P, enc = seen["tokens"], seen["P"], load_model(os.path.join(out, "ckpt.pt"))[1]  # the run's tokenizer
    assert tokens.shape[0] == 6 * G
    prompts = tokens[:, :P].view(6, G, P)  # (B, G, P)
    assert (prompts == prompts[:, :1]).all() and len({tuple(p[0].tolist()) for p in prompts}) == 6  # whole groups
    texts = []
    for ids in tokens[:, P:].tolist():  # each completion up to its first EOS, as sample.completions_text reads it
        eos = enc.eot_token
        texts.append(enc.decode(ids[: ids.index(eos)] if eos in ids else ids, errors="replace"))
    assert seen["rewards"] == [float(len(t) % 2) for t in texts]  # each row's own reward, none from round 1


def test_ctrl_c_finishes_the_step_saves_and_resumes(tmp_path):
    out = str(tmp_path / "out")
    proc = start(*TINY, "--steps", "1000", "--sft_steps", "3", "--eval_every", "1000", "--out_dir", out)
    for line in proc.stdout:
        if line.startswith("step 2 "):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "continue with --init_from resume" in err
    steps = [t["step"] for t in records(out, "train")]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
    saved = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["step"]
    assert saved == steps[-1]  # the checkpoint holds every logged step, no half step
    r = run(*TINY, "--steps", str(saved + 1), "--out_dir", out, "--init_from", "resume")
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == list(range(1, saved + 2))


def test_ctrl_c_in_a_step_that_evaluates_keeps_its_evaluation(tmp_path, monkeypatch):
    """Ctrl-C during step 2 of an --eval_every 2 run: the step finishes with its evaluation, then saves, so the
    resumed run's log is the uninterrupted run's."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    flags = [*TINY, "--sft_steps", "3", "--eval_every", "2", "--steps", "4"]
    assert here(*flags, "--out_dir", a).returncode == 0
    calls, verifier = [], tasks.REWARDS["verifier"]

    def interrupted(*args, **kwargs):  # the reward of step 2 is being computed when Ctrl-C comes
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return verifier(*args, **kwargs)

    monkeypatch.setitem(tasks.REWARDS, "verifier", interrupted)
    r = here(*flags, "--out_dir", b)
    assert r.returncode != 0 and "stopped at step 2" in r.stderr, r.stderr
    monkeypatch.undo()
    assert here(*TINY, "--steps", "4", "--out_dir", b, "--init_from", "resume").returncode == 0

    def strip(rows):
        return [{k: v for k, v in row.items() if k not in ("dt", "tok_s")} for row in rows]

    for kind in ("train", "eval"):
        assert strip(records(a, kind)) == strip(records(b, kind)), kind


def test_ctrl_c_during_the_warm_start_says_what_happened(tmp_path):
    proc = start(*TINY, "--sft_steps", "100000", "--out_dir", str(tmp_path / "out"))
    for line in proc.stdout:
        if line.startswith("warm start 1/"):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and err.strip() == "error: interrupted: what was not in a checkpoint yet is lost", err


def test_one_run_per_out_dir_and_its_lock_dies_with_it(tmp_path):
    out = str(tmp_path / "out")
    proc = start(*TINY, "--steps", "1000", "--sft_steps", "3", "--eval_every", "1", "--out_dir", out)
    for line in proc.stdout:
        if line.startswith("kind eval step 1 "):  # step 1 is saved
            break
    for flags in (["--steps", "2"], ["--init_from", "resume", "--steps", "2000"]):  # a second run, or a resume
        r = run(*TINY, "--sft_steps", "3", "--out_dir", out, *flags)
        assert one_line_error(r, "is in use by another run"), r.stderr
    proc.kill()  # kill -9: the lock goes with the process
    proc.communicate(timeout=60)
    r = run(*TINY, "--out_dir", out, "--init_from", "resume", "--steps", str(records(out, "train")[-1]["step"]))
    assert r.returncode == 0, r.stderr


def test_no_command_touches_a_file_it_did_not_write(tmp_path, monkeypatch, capsys):
    """Files, folders and links a user keeps in out_dir, beside an export and in a folder given to the export, some
    named like nanogrpo's temp files, are the same after a run, a resume, sample.py and exports (one refused)."""
    out = tmp_path / "out"
    mine = tmp_path / "mine"  # a user's folder, given to the export by mistake
    for folder in (out, mine, tmp_path / "export.99999999.tmp"):  # the last: named as a dead export's temp folder
        folder.mkdir()
    (mine / "model.safetensors").mkdir()  # named like an export's file
    (mine / "model.safetensors" / "data.bin").write_text("keep")
    (tmp_path / "outside.txt").write_text("outside")
    for name in ("notes.txt", "ckpt.pt.bak", "ckpt.pt.tmp", "ckpt.pt.1.tmp", "warmstart.pt.x.tmp"):
        (out / name).write_text(name)  # pid 1 is alive; the rest are not temp names
    (tmp_path / "export.99999999.tmp" / "notes.txt").write_text("not an export's file")
    (tmp_path / "export.1.tmp").write_text("a live writer's")
    for link in (out / "latest", out / "warmstart.pt.99999999.tmp", tmp_path / "export.99999999.old"):
        link.symlink_to(tmp_path / "outside.txt")  # a dead pid's name, but a link: never the project's

    def snapshot():  # {path: link target, True for a folder, or content}, the project's own files left out
        own = {"ckpt.pt", "warmstart.pt", "metrics.jsonl", "run.lock"}
        paths = [p for p in tmp_path.rglob("*") if p.parent != out or p.name not in own]
        paths = [p for p in paths if p.relative_to(tmp_path).parts[0] != "export"]
        return {p: os.readlink(p) if p.is_symlink() else p.is_dir() or p.read_bytes() for p in paths}

    before = snapshot()
    assert len(before) == 16, sorted(before)
    assert here(*TINY, "--sft_steps", "2", "--steps", "1", "--out_dir", str(out)).returncode == 0
    assert snapshot() == before
    assert here(*TINY, "--steps", "2", "--init_from", "resume", "--out_dir", str(out)).returncode == 0
    assert snapshot() == before
    for script, flags in (
        ("sample.py", ["--ckpt", str(out / "ckpt.pt"), "--G", "1", "--max_new_tokens", "2", "--device", "cpu", "q"]),
        ("plumbing/export.py", [str(out / "ckpt.pt"), str(tmp_path / "export")]),
        ("plumbing/export.py", [str(out / "ckpt.pt"), str(tmp_path / "export")]),  # an earlier export: replaced
        ("plumbing/export.py", [str(out / "ckpt.pt"), str(mine)]),  # refused
    ):
        monkeypatch.setattr(sys, "argv", [script, *flags])
        try:
            runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
        except SystemExit as e:
            assert flags[-1] == str(mine) and "'model.safetensors', which is not a file" in str(e.code), e.code
        assert snapshot() == before, script
    assert sorted(os.listdir(tmp_path / "export")) == sorted(GPT2_FILES)
    capsys.readouterr()


def test_a_run_file_nanogrpo_did_not_write_is_refused_and_left_as_it_is(tmp_path):
    """A fresh run would remove ckpt.pt and start metrics.jsonl afresh: another project's ckpt.pt (nanoGPT's out/ has
    one), an empty one, a user's text, a folder as warmstart.pt are refused in one line and left as they were; so is
    a link, even to a run file of nanogrpo's (a run would write past the other out_dir's lock), fresh or resumed."""
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"model": {}, "iter_num": 5000}, out / "ckpt.pt")  # another project's checkpoint

    def files():
        return {p.name: p.is_dir() or p.read_bytes() for p in out.iterdir() if p.name != "run.lock"}

    cases = [
        ("ckpt.pt", "not a nanogrpo checkpoint"),
        ("ckpt.pt", "not a nanogrpo checkpoint"),  # now an empty one
        ("metrics.jsonl", "not a log"),
        ("warmstart.pt", "not a file"),
    ]
    for n, (name, why) in enumerate(cases):
        if n == 1:
            (out / "ckpt.pt").write_bytes(b"")
        if n == 2:
            (out / "ckpt.pt").unlink()
            (out / name).write_text('{"step": 1}\n')
        if n == 3:
            (out / "metrics.jsonl").unlink()
            (out / name).mkdir()
        before = files()
        r = here(*TINY, "--sft_steps", "2", "--steps", "1", "--out_dir", str(out))
        assert one_line_error(r, f"{out / name} is {why}"), r.stderr
        assert files() == before
    elsewhere = tmp_path / "elsewhere"
    r = here(*TINY, "--sft_steps", "2", "--steps", "1", "--out_dir", str(elsewhere))
    assert r.returncode == 0, r.stderr
    theirs = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "ckpt.pt").symlink_to(elsewhere / "ckpt.pt")
    for flags in ([], ["--init_from", "resume"]):
        r = here(*TINY, "--sft_steps", "2", "--steps", "2", *flags, "--out_dir", str(linked))
        assert one_line_error(r, f"{linked / 'ckpt.pt'} is a link"), r.stderr
    assert (linked / "ckpt.pt").is_symlink() and {p.name: p.read_bytes() for p in elsewhere.iterdir()} == theirs


def test_special_tokens_in_the_data_are_text(tmp_path):
    data = tmp_path / "special.jsonl"
    with open(data, "w") as f:
        for i in range(12):
            f.write(
                json.dumps({"question": f"Is <|endoftext|> {i} a word?", "answer": f"<|endoftext|>\n#### {i}"}) + "\n"
            )
    r = here(*TINY, "--data", str(data), "--sft_steps", "2", "--steps", "1", "--out_dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr


def test_resume_keeps_the_run_settings_and_a_moved_data_file(tmp_path, task):
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "2", "--steps", "1", "--temperature", "0.7", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    moved = tmp_path / "moved.jsonl"
    moved.write_bytes(open(task[task.index("--data") + 1], "rb").read())
    r = here("--steps", "2", "--out_dir", out, "--init_from", "resume", "--data", str(moved))  # no other flag
    assert r.returncode == 0, r.stderr
    args = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["args"]
    assert args["temperature"] == 0.7 and args["G"] == 8 and args["steps"] == 2
    assert [t["step"] for t in records(out, "train")] == [1, 2]
    r = here("--G", "4", "--steps", "3", "--out_dir", out, "--init_from", "resume")
    assert one_line_error(r, "--G 4 differs"), r.stderr
    other = tmp_path / "other.jsonl"  # --data may move, but not change: another task is refused
    other.write_text(moved.read_text().replace("two plus one", "two plus two"))
    r = here("--steps", "3", "--out_dir", out, "--init_from", "resume", "--data", str(other))
    assert one_line_error(r, "the task changed"), r.stderr


def test_the_trainer_scores_at_the_sampling_temperature(tmp_path, task):
    """logp_gap: π_old's log-probs of the sampled tokens against the sampler's. At τ = 0.7 they agree to float
    rounding only if train.py scores with the sampler's τ (scoring at τ = 1 gives a gap of order 1)."""
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "4", "--steps", "2", "--temperature", "0.7", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    assert all(t["logp_gap"] < 1e-4 for t in records(out, "train")), [t["logp_gap"] for t in records(out, "train")]
    assert "WARNING" not in r.stdout
    assert records(out, "train")[0]["kl"] < 1e-7  # π_ref is π_θ at step 1: scored at 0.7 too (at τ = 1: 0.05)


def test_the_logged_entropy_is_a_token_mean_and_tis_weighs_by_pi_old_over_the_sampler(tmp_path, task, monkeypatch):
    """train.py's own arithmetic, with numbers it cannot guess. The sampler is made to report each sampled token
    0.5 nats less likely than it was (a gap of known size and sign): --tis 2 must weigh by π_old/π_sampler = e^0.5,
    not its inverse e^-0.5. Each token's entropy is made 1/|o_i|, its answer's length (every answer's tokens sum to
    1): the step's token mean is N/Σ|o_i| = 1/len, a mean of per-answer means would be mean(1/|o_i|), larger when
    the lengths differ (they do: the second group is cut a token short)."""
    plain_generate = sample.generate
    plain_score = grpo.score
    rolls = []  # the step's rollout

    def gapped(*a, **kw):
        roll = plain_generate(*a, **kw)
        roll.logprobs = roll.logprobs - 0.5 * roll.completion_mask  # (N, T) the sampler's "own numbers"
        return roll

    def shortened(net, tokens, mask, P, temperature, autocast, with_entropy=False):
        out = plain_score(net, tokens, mask, P, temperature, autocast, with_entropy)
        if not with_entropy:
            return out
        roll = rolls[-1]
        n = len(tokens)  # a micro-batch: rows start .. start + n - 1 of the rollout
        start = next(i for i in range(0, len(roll.tokens) - n + 1, n) if torch.equal(roll.tokens[i : i + n], tokens))
        return out[0], (1 / roll.lengths[start : start + n].float())[:, None].expand_as(out[1])  # (n, T)

    def cut(*a, **kw):  # rows 8-15 lose their last token, so that the answers' lengths differ
        roll = gapped(*a, **kw)
        last = roll.lengths - 1  # (N,)
        roll.completion_mask[8:16].scatter_(1, last[8:16, None], False)
        rolls.append(roll)
        return roll

    monkeypatch.setattr(sample, "generate", cut)
    monkeypatch.setattr(grpo, "score", shortened)
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "2", "--steps", "1", "--tis", "2", "--micro_batch", "4", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rec = records(out, "train")[0]
    assert abs(rec["weight_mean"] - math.exp(0.5)) < 1e-4, rec["weight_mean"]  # inverted: 0.61
    assert abs(rec["entropy"] - 1 / rec["len"]) < 1e-6, (rec["entropy"], rec["len"])


def test_every_stat_of_grpo_loss_reaches_the_log(tmp_path, task, monkeypatch):
    """A fork's new statistic: returned by grpo_loss, it lands in metrics.jsonl with no change to train.py."""
    plain = grpo.grpo_loss

    def with_entropy(*a, **kw):
        loss, stats = plain(*a, **kw)
        return loss, {**stats, "my_stat": torch.tensor(1.5)}

    monkeypatch.setattr(grpo, "grpo_loss", with_entropy)
    out = str(tmp_path / "out")
    assert here(*task, "--batch_prompts", "2", "--steps", "1", "--micro_batch", "4", "--out_dir", out).returncode == 0
    assert records(out, "train")[0]["my_stat"] == 1.5 * 4  # 16 rows in 4 micro-batches: shares of the step add


def test_a_name_added_to_a_library_dict_is_a_flag_choice(tmp_path, task, monkeypatch):
    halved = advantage.METHODS["std"]
    monkeypatch.setitem(advantage.METHODS, "halved", lambda r, G, eps, unbiased: halved(r, G, eps, unbiased) / 2)
    out = str(tmp_path / "out")
    assert here(*task, "--batch_prompts", "2", "--steps", "1", "--adv", "halved", "--out_dir", out).returncode == 0
    assert records(out, "train")[0]["step"] == 1


def test_accuracy_is_the_verifiers_verdict_whatever_the_reward(tmp_path, task, monkeypatch):
    """A fork that changes the reward (here: 0.5 for everything) changes reward_mean, never acc or greedy_acc."""
    monkeypatch.setitem(
        tasks.REWARDS, "verifier", lambda run_task, problems, texts, **kw: torch.full((len(texts),), 0.5)
    )
    out = str(tmp_path / "out")
    assert here(*task, "--batch_prompts", "4", "--steps", "1", "--eval_every", "1", "--out_dir", out).returncode == 0
    rec = records(out, "train")[0]
    assert rec["reward_mean"] == 0.5 and 0 < rec["acc"] < 0.5  # the teacher is right about 3 times in 10
    ev = records(out, "eval")[-1]
    assert 0 < ev["pass@8"] <= 1 and 0 < ev["pass@1"] < 1  # some of the 8 samples are right, some wrong
    assert sum(ev["sampled_right"]) / (8 * len(ev["sampled_right"])) == ev["pass@1"]  # per problem, as counted
    assert sum(ev["greedy_right"]) / len(ev["greedy_right"]) == ev["greedy_acc"]


def test_a_run_from_scratch_reads_the_task_in_words_and_its_checkpoint_keeps_them(tmp_path):
    out = str(tmp_path / "out")
    r = run(*TINY, "--sft_steps", "2", "--steps", "0", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    model, enc, prompt = load_model(os.path.join(out, "ckpt.pt"))
    assert enc.name == "words" and model.config.vocab_size == enc.n_vocab == 392  # 256 bytes, 39 words' tokens, EOS
    question = tasks.Arithmetic().test[0].question  # "Eli has 3 nuts, gets 8 more, gets 4 more. How many nuts now?"
    pieces = [enc.decode_single_token_bytes(i) for i in enc.encode(prompt.format(question=question))]
    assert b" nuts" in pieces and b" gets" in pieces and b"3" in pieces and len(pieces) == 27


def test_sample_py_talks_to_a_checkpoint(tmp_path, task):
    out = str(tmp_path / "out")
    assert run(*task, "--batch_prompts", "2", "--steps", "1", "--out_dir", out).returncode == 0
    r = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "sample.py"),
            "--ckpt",
            os.path.join(out, "ckpt.pt"),
            "--G",
            "3",
            "--max_new_tokens",
            "8",
            "What is two plus one?",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("--- sample") == 3 and "What is two plus one?" in r.stdout and "answer '" in r.stdout


def test_torchrun_two_gloo_ranks_finish_a_run_with_one_log(tmp_path):
    """Rank 1 waits for rank 0's last evaluation and save before it leaves: every clean run keeps its checkpoint."""
    out = str(tmp_path / "out")
    flags = [*TINY, "--batch_prompts", "4", "--sft_steps", "3", "--eval_every", "2", "--out_dir", out]
    for _ in range(3):  # rank 0's last evaluation takes longer than rank 1's way out
        r = run(*flags, "--steps", "2", "--eval_size", "32", torchrun=2)
        assert r.returncode == 0 and os.path.isfile(os.path.join(out, "ckpt.pt")), r.stderr[-2000:]
    r = run(*flags, "--steps", "2", "--ratio", "seq", "--mu", "2", "--dynamic", "3", torchrun=2)  # GSPO, DAPO too
    assert r.returncode == 0, r.stderr[-2000:]
    assert [t["step"] for t in records(out, "train")] == [1, 2] and len(records(out, "eval")) == 2
    for t in records(out, "train"):  # the log covers both ranks' rows: 4 prompts x 2 answers, refilled or not
        assert t["num_tokens"] == round(t["len"] * 8) and t["logp_gap"] < 1e-4, t
        assert t["rounds"] > 1 and t["dead_frac"] <= t["dead_frac_sampled"], t  # G = 2, a weak policy: groups die
    r = run(*TINY, "--batch_prompts", "4", "--steps", "3", "--out_dir", out, "--init_from", "resume", torchrun=2)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [t["step"] for t in records(out, "train")] == [1, 2, 3]


def test_torchrun_a_users_error_is_one_line_from_rank_0(tmp_path):
    """Every rank meets an unsplittable --batch_prompts; rank 0 says so, rank 1 exits with the same code quietly.
    What torchrun adds after it (its ChildFailedError report) is torchrun's own."""
    r = run(*TINY, "--batch_prompts", "3", "--out_dir", str(tmp_path / "out"), torchrun=2)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode != 0 and errors == ["error: --batch_prompts 3 must be a multiple of the 2 ranks"], r.stderr


def test_ctrl_c_lines_come_from_rank_0_only(tmp_path, monkeypatch, capsys):
    """Under torchrun every rank gets the Ctrl-C: the writer (rank 0) alone says it and how to resume; every rank
    stops with exit code 1."""
    for writer in (True, False):
        run_dir = checkpoint.RunDir(str(tmp_path / "out"), resume=False, writer=writer)
        saved = signal.getsignal(signal.SIGINT)
        try:
            run_dir.catch_ctrl_c()
            os.kill(os.getpid(), signal.SIGINT)
        finally:
            signal.signal(signal.SIGINT, saved)
        with pytest.raises(SystemExit) as e:
            run_dir.finish(3, world=1)
        out = capsys.readouterr()
        assert e.value.code == 1 and run_dir.stopped
        lines = (out.out + out.err).splitlines()
        assert len(lines) == (2 if writer else 0) and all(("Ctrl-C" in x) != ("stopped at" in x) for x in lines), lines
        del run_dir  # its lock goes with it
        gc.collect()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    waits = []

    def interrupted(seconds):
        waits.append(seconds)
        raise KeyboardInterrupt  # torchrun passes the Ctrl-C on while rank 1 waits

    monkeypatch.setattr(cli.time, "sleep", interrupted)
    with pytest.raises(SystemExit) as e:
        die("said by rank 0")
    assert e.value.code == 1 and waits == [cli.RANK_WAIT_S]


def test_a_rank_waits_for_rank_0_to_speak_then_says_an_error_of_its_own(monkeypatch):
    """A rank > 0 under torchrun exits only after RANK_WAIT_S (torchrun stops it sooner when rank 0 fails): exiting
    first, it would get rank 0 stopped before rank 0 said the error. Still running then, it says the error itself."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    waits = []
    monkeypatch.setattr(cli.time, "sleep", waits.append)
    with pytest.raises(SystemExit) as e:
        die("only rank 1 met it")
    assert e.value.code == "error: rank 1: only rank 1 met it" and waits == [cli.RANK_WAIT_S]
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")  # RANK set by hand, no torchrun to wait for: says it at once
    with pytest.raises(SystemExit) as e:
        die("only rank 1 met it")
    assert e.value.code == "error: rank 1: only rank 1 met it" and waits == [cli.RANK_WAIT_S]


def test_gpt2_weights_train_end_to_end_and_bad_ones_end_in_one_line(tmp_path, task):
    from test_checkpoint import V, hf_tensors, reference, write_config, write_safetensors, write_vocab

    folder = tmp_path / "gpt2"
    folder.mkdir()
    cfg = GPTConfig(block_size=96, vocab_size=V, n_layer=1, n_head=2, n_embd=128)
    write_vocab(folder)
    write_config(folder, n_ctx=96, n_positions=96, n_layer=1)
    write_safetensors(folder / "model.safetensors", hf_tensors(reference(cfg=cfg)))
    out = str(tmp_path / "out")
    data = task[task.index("--data") + 1]
    r = here(
        "--init_from",
        str(folder),
        "--data",
        data,
        "--sft_steps",
        "2",
        "--steps",
        "1",
        "--G",
        "2",
        "--batch_prompts",
        "1",
        "--max_new_tokens",
        "8",
        "--eval_size",
        "1",
        "--device",
        "cpu",
        "--out_dir",
        out,
    )
    assert r.returncode == 0, r.stderr
    assert torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["tokenizer"] == "gpt2"
    r = here("--init_from", "resume", "--steps", "2", "--out_dir", out)  # no vocab.json in out_dir: it travels
    assert r.returncode == 0, r.stderr  # inside the checkpoint
    with open(folder / "model.safetensors", "r+b") as f:
        f.truncate(os.path.getsize(folder / "model.safetensors") // 2)  # a download cut short
    r = here("--init_from", str(folder), "--data", data, "--out_dir", out)
    assert one_line_error(r, "model.safetensors"), r.stderr


# ----------------------------------------------------------------------------- π_old, the denominators, the step line


def spy_on_grpo_loss(monkeypatch):
    """Replace grpo.grpo_loss by a wrapper that records each call's log-probs, π_old, mask and keyword arguments."""
    calls = []
    plain = grpo.grpo_loss

    def spy(logp, old_logp, ref_logp, advantages, mask, **kw):
        calls.append({"logp": logp.detach().clone(), "old": old_logp.clone(), "mask": mask.clone(), **kw})
        return plain(logp, old_logp, ref_logp, advantages, mask, **kw)

    monkeypatch.setattr(grpo, "grpo_loss", spy)
    return calls


def test_pi_old_is_the_first_updates_forward_for_all_mu_updates(tmp_path, task, monkeypatch):
    """μ = 2: the first update's forward is π_old (ρ ≡ 1 there) and stays π_old for the second update, whose
    forward comes after an AdamW step: its ratio differs from 1 wherever the weights moved the log-probs. A π_old
    refreshed at every update would make the second ratio 1 again."""
    calls = spy_on_grpo_loss(monkeypatch)
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "2", "--steps", "1", "--mu", "2", "--lr", "3e-3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    first, second = calls  # one micro-batch per update
    m = first["mask"]
    assert torch.equal(first["logp"][m], first["old"][m])  # ρ ≡ 1 in the first update
    assert torch.equal(second["old"], first["old"])  # the same π_old in the second
    assert (second["logp"] - second["old"])[m].abs().max() > 1e-4  # the policy moved: ρ ≠ 1
    assert records(out, "train")[0]["ratio_mean"] != 1.0  # the log shows the last update's ratio


def test_dead_groups_count_in_the_loss_denominators(tmp_path, task, monkeypatch):
    """num_seqs is the step's B·G rows, dead groups included (grpo.py's notes: their answers still dilute the live
    groups' gradient); num_tokens counts every row's tokens. A run whose first group of two is made dead."""
    calls = spy_on_grpo_loss(monkeypatch)
    verifier = tasks.REWARDS["verifier"]

    def half_dead(run_task, problems, texts, **kw):
        r = verifier(run_task, problems, texts, **kw)  # (N,)
        r[: len(r) // 2] = 1.0  # the first group: all equal
        r[len(r) // 2] = 1.0 - r[len(r) // 2 + 1]  # the second: live
        return r

    monkeypatch.setitem(tasks.REWARDS, "verifier", half_dead)
    out = str(tmp_path / "out")
    r = here(*task, "--batch_prompts", "2", "--steps", "1", "--micro_batch", "4", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rec = records(out, "train")[0]
    assert rec["dead_frac"] == 0.5
    assert {c["num_seqs"] for c in calls} == {2 * 8}  # every micro-batch divides by the whole step's rows
    assert {c["num_tokens"].item() for c in calls} == {sum(c["mask"].sum().item() for c in calls)}


def step_line(stdout):
    return next(line for line in stdout.splitlines() if line.startswith("step 1 "))


def test_the_step_line_shows_the_columns_that_can_move_and_the_log_keeps_every_key(tmp_path, task):
    """At the defaults (μ = 1, the verifier alone): no clip fractions (ρ ≡ 1) and no reward_mean (it equals acc);
    with μ = 2, a format bonus and β = 0: the clip fractions and reward_mean, and no kl. metrics.jsonl has them all,
    and an `entropy` in every train record."""
    flags = [*task, "--batch_prompts", "2", "--steps", "1"]
    r = here(*flags, "--out_dir", str(tmp_path / "a"))
    line = step_line(r.stdout)
    assert " acc " in line and " kl " in line and " entropy " in line
    assert "clip_frac" not in line and "reward_mean" not in line
    rec = records(str(tmp_path / "a"), "train")[0]
    assert {"clip_frac_low", "clip_frac_high", "reward_mean", "kl", "entropy"} <= set(rec)
    assert rec["reward_mean"] == rec["acc"] and rec["clip_frac_low"] == rec["clip_frac_high"] == 0
    assert 0 < rec["entropy"] < math.log(257)  # nats per token, below the uniform distribution's
    r = here(*flags, "--mu", "2", "--format_bonus", "0.1", "--beta", "0", "--out_dir", str(tmp_path / "b"))
    line = step_line(r.stdout)
    assert "clip_frac_low" in line and "reward_mean" in line and " kl " not in line


def test_the_new_losses_and_shaping_run_end_to_end(tmp_path, task, monkeypatch):
    """--loss cispo, --tis C and --overlong L reach grpo_loss and the reward: CISPO at μ = 1 makes GRPO's update
    (the same weights to rounding), TIS's weights are logged, and the overlong penalty lowers reward_mean but not
    acc (acc counts the verifier's verdict)."""
    flags = [*task, "--batch_prompts", "2", "--steps", "1", "--eval_every", "1"]
    for name, extra in [("clip", []), ("cispo", ["--loss", "cispo"]), ("tis", ["--tis", "2"])]:
        assert here(*flags, *extra, "--out_dir", str(tmp_path / name)).returncode == 0
    w = {n: torch.load(tmp_path / n / "ckpt.pt", weights_only=True)["model"] for n in ("clip", "cispo", "tis")}
    assert all(torch.allclose(w["clip"][k], w["cispo"][k], atol=1e-6) for k in w["clip"])
    pg = {n: records(str(tmp_path / n), "train")[0]["pg_loss"] for n in ("clip", "cispo")}
    assert abs(pg["clip"]) < 1e-6 < abs(pg["cispo"])  # but CISPO's loss is A·log π, not A (grpo.py's notes)
    tis = records(str(tmp_path / "tis"), "train")[0]
    assert abs(tis["weight_mean"] - 1) < 1e-3  # the sampler and the trainer agree to rounding in float32
    r = here(*flags, "--overlong", "4", "--out_dir", str(tmp_path / "long"))  # answers longer than 8 - 4 tokens pay
    assert r.returncode == 0, r.stderr
    long, plain = records(str(tmp_path / "long"), "train")[0], records(str(tmp_path / "clip"), "train")[0]
    assert long["acc"] == plain["acc"] and long["reward_mean"] < plain["reward_mean"]
    assert "reward_mean" in step_line(r.stdout)


class Parrot(tasks.Task):  # a fork's task in a few lines: say the number back, judged as a number (Task's defaults)
    def __init__(self, args):
        self.problems = self.test = [self.sample(random.Random(i)) for i in range(4)]
        self.key = "parrot"

    def sample(self, rng):
        n = rng.randint(10, 99)
        return tasks.Problem(f"Say {n}.", f"#### {n}", str(n))


class Agreeable(Parrot):  # every answer is "yes", and right: what every accuracy figure then reads
    def answer(self, pb, completion):
        return "yes"

    def verdict(self, pb, completion):
        return True


def test_a_task_added_in_a_few_lines_trains_and_its_verdict_is_every_accuracy_figure(tmp_path, monkeypatch):
    """A task is a class and a registry line: Parrot trains for two steps from --task parrot. With Agreeable's verdict
    and answer, train acc, greedy, pass@k and maj@k all read 1 while the reward (the number verifier) does not."""
    monkeypatch.setitem(tasks.TASKS, "parrot", Parrot)
    monkeypatch.setitem(tasks.TASKS, "agreeable", Agreeable)
    flags = [*TINY, "--sft_steps", "3", "--steps", "2", "--eval_every", "2"]
    out = str(tmp_path / "parrot")
    r = here(*flags, "--task", "parrot", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == [1, 2] and "task=parrot" in r.stdout
    assert [e["step"] for e in records(out, "eval")] == [0, 2]
    out = str(tmp_path / "agreeable")
    assert here(*flags, "--task", "agreeable", "--out_dir", out).returncode == 0
    rec, ev = records(out, "train")[-1], records(out, "eval")[-1]
    assert rec["acc"] == 1.0 and rec["reward_mean"] < 1.0
    assert ev["greedy_acc"] == ev["pass@1"] == ev["pass@2"] == ev["maj@1"] == ev["maj@2"] == 1.0


def test_countdown_runs_and_its_figures_are_its_verdicts(tmp_path, monkeypatch):
    """--task countdown end to end for a step; every figure is Countdown's verdict (the number verifier never runs)."""
    monkeypatch.setattr(reward, "extract_answer", lambda *a, **k: pytest.fail("the number verifier judged countdown"))
    out = str(tmp_path / "out")
    r = here(
        *TINY, "--task", "countdown", "--sft_steps", "2", "--steps", "1", "--format_bonus", "0.1", "--out_dir", out
    )
    assert r.returncode == 0, r.stderr
    assert {"greedy_acc", "pass@2", "maj@2"} <= set(records(out, "eval")[-1])


def test_init_from_a_checkpoint_takes_its_task_lengths_lr_and_seed_unless_typed(tmp_path):
    """A new run from a run's checkpoint meets the same task and held-out problems: the flags it takes are printed,
    a typed one wins, the config line shows the file's shape. The resume refusal names the command that changes a
    setting, and a new run may not start from its own out_dir's checkpoint, which it would replace."""
    first = str(tmp_path / "first")
    made = ["--teacher_slip", "0.5", "--max_new_tokens", "20", "--lr", "1e-3", "--seed", "5", "--eval_size", "3"]
    assert here(*TINY, *made, "--sft_steps", "2", "--steps", "0", "--out_dir", first).returncode == 0
    ckpt = os.path.join(first, "ckpt.pt")
    r = here("--init_from", ckpt, "--seed", "7", "--steps", "0", "--device", "cpu", "--out_dir", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    for taken in ("--teacher_slip 0.5", "--max_new_tokens 20", "--lr 0.001", "--eval_size 3"):
        assert f"from {ckpt}: {taken}" in r.stdout, taken
    assert "--seed" not in r.stdout.split("config:")[0]  # typed: kept
    config = r.stdout.split("config:")[1].split("\n")[0]
    assert " seed=7 " in config and " teacher_slip=0.5 " in config and " n_embd=32 " in config  # not the default 96
    assert " lr=0.001 " in config and " max_new_tokens=20 " in config and " n_layer=1 " in config
    r = here("--init_from", "resume", "--beta", "0", "--device", "cpu", "--out_dir", first)
    assert one_line_error(r, f"--init_from {ckpt} --out_dir {first}-beta --beta 0"), r.stderr
    r = here("--init_from", ckpt, "--steps", "0", "--device", "cpu", "--out_dir", first)
    assert one_line_error(r, "--out_dir's own checkpoint") and os.path.isfile(ckpt), r.stderr
