"""train.py end to end, as a user runs it: resume, the warm-start cache, learning, user errors, reliability,
the temperature contract, plug-in points, and data-parallel ranks under torchrun."""
import json
import os
import random
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
from model import GPT, GPTConfig, get_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--n_layer", "1", "--n_embd", "32", "--block_size", "128", "--max_new_tokens", "24",
        "--device", "cpu", "--eval_size", "4", "--batch_prompts", "2", "--G", "2"]


def run(*flags, timeout=240, torchrun=0):
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}"] \
        if torchrun else [sys.executable]
    return subprocess.run([*launcher, os.path.join(ROOT, "train.py"), *flags],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def run_here(monkeypatch, *flags):
    """train.py in this process (so that a test can patch a library function first); returns the exit code."""
    monkeypatch.setattr(sys, "argv", ["train.py", *flags])
    hook, handler = sys.excepthook, signal.getsignal(signal.SIGINT)
    try:
        runpy.run_path(os.path.join(ROOT, "train.py"), run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code
    finally:
        sys.excepthook = hook
        signal.signal(signal.SIGINT, handler)


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
    assert [t["step"] for t in records(out, "train")] == [1, 2]
    for key in ("reward_mean", "acc", "dead_frac", "kl", "clip_frac_low", "clip_frac_high", "len", "len_right",
                "len_wrong", "truncated", "logp_gap", "tok_s", "dt", "loss", "pg_loss", "kl_loss", "num_tokens"):
        assert key in records(out, "train")[0], key
    assert {"greedy_acc", "greedy_acc_se", "pass@1", "pass@2", "maj@1", "maj@2"} <= set(records(out, "eval")[-1])
    assert os.path.isfile(os.path.join(out, "ckpt.pt")) and os.path.isfile(os.path.join(out, "warmstart.pt"))
    r = run(*TINY, "--steps", "3", "--eval_every", "2", "--out_dir", out, "--init_from", "resume", "--no-compile")
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == [1, 2, 3]  # continued, did not restart
    assert "warm start" not in r.stdout
    r = run(*TINY, "--init_from", "resume", "--steps", "0", "--out_dir", out)  # would rewrite the step budget
    assert one_line_error(r, "--steps >= 3"), r.stderr
    # a fresh run in the same out_dir, stopped before its first checkpoint (here: a bad flag value after set-up
    # would not do; --steps 0 with a failing eval is hard to provoke, so the run simply ends before training):
    # the old run's checkpoint must be gone, never resumable into the new run's log
    r = run(*TINY, "--steps", "5", "--sft_steps", "3", "--eval_every", "5", "--out_dir", out, "--max_new_tokens",
            "200")  # fails in set-up (too long for the block), after the out_dir is claimed
    assert one_line_error(r, "block_size"), r.stderr
    r = run(*TINY, "--init_from", "resume", "--steps", "6", "--out_dir", out)
    assert one_line_error(r, "ckpt.pt"), r.stderr


def test_warm_start_is_cached_and_eval_size_does_not_redo_it(tmp_path):
    out = str(tmp_path / "out")
    flags = [*TINY, "--steps", "0", "--sft_steps", "3", "--out_dir", out]
    assert run(*flags).returncode == 0
    r = run(*flags[:-4], "--eval_size", "6", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    assert "warm start 3/3" not in r.stdout  # loaded, not retrained


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    flags = [*TINY, "--sft_steps", "3", "--eval_every", "2", "--mu", "2"]
    assert run(*flags, "--steps", "4", "--out_dir", a).returncode == 0
    assert run(*flags, "--steps", "2", "--out_dir", b).returncode == 0
    with open(os.path.join(b, "metrics.jsonl"), "a") as f:
        f.write('{"kind": "train", "st')  # a crash cut a line short after the checkpoint
    r = run(*TINY, "--steps", "4", "--out_dir", b, "--init_from", "resume")
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
    enc = get_tokenizer()
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
    torch.save(model.state_dict(), init)
    return ["--data", str(data), "--init_from", str(init), "--max_new_tokens", "8", "--device", "cpu", "--G", "8",
            "--seed", "0"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return trivial_task(tmp_path_factory.mktemp("task"))


def test_grpo_raises_reward_on_a_trivial_task(tmp_path, task):
    """GRPO with the verifier must learn to give the right digit (reward ≈ 0.3 -> near 1)."""
    out = str(tmp_path / "out")
    r = run(*task, "--batch_prompts", "8", "--steps", "30", "--eval_every", "30", "--lr", "3e-3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rewards = [t["reward_mean"] for t in records(out, "train")]
    assert rewards[0] < 0.5, rewards             # it starts near the teacher's 0.25 + 0.75 / 10
    assert sum(rewards[-5:]) / 5 > 0.8, rewards  # and learns to give the right digit
