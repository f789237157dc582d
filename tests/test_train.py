"""train.py end to end, as a user runs it: a smoke run that resumes, a learning run, and user errors."""
import json
import os
import random
import signal
import subprocess
import sys

import torch
import torch.nn.functional as F

from model import GPT, GPTConfig, get_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--n_layer", "1", "--n_embd", "32", "--block_size", "128", "--max_new_tokens", "24",
        "--device", "cpu", "--eval_size", "4", "--batch_prompts", "2", "--G", "2"]


def run(*flags, timeout=240):
    return subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), *flags],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def records(out_dir, kind):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["kind"] == kind]


def test_smoke_run_writes_metrics_and_resumes(tmp_path):
    out = str(tmp_path / "out")
    r = run(*TINY, "--steps", "2", "--sft_steps", "3", "--eval_every", "2", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == [1, 2]
    for key in ("reward_mean", "acc", "dead_frac", "kl", "clip_frac_low", "clip_frac_high", "len", "truncated", "tok_s", "dt"):
        assert key in records(out, "train")[0]
    assert {"greedy_acc", "pass@1", "pass@2", "maj@1", "maj@2"} <= set(records(out, "eval")[-1])
    assert os.path.isfile(os.path.join(out, "ckpt.pt")) and os.path.isfile(os.path.join(out, "warmstart.pt"))
    r = run(*TINY, "--steps", "3", "--sft_steps", "3", "--eval_every", "2", "--out_dir", out, "--init_from", "resume")
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == [1, 2, 3]  # continued, did not restart
    assert "warm start" not in r.stdout


def test_warm_start_is_cached(tmp_path):
    out = str(tmp_path / "out")
    flags = [*TINY, "--steps", "0", "--sft_steps", "3", "--out_dir", out]
    assert run(*flags).returncode == 0
    r = run(*flags)
    assert r.returncode == 0, r.stderr
    assert "warm start 3/3" not in r.stdout  # loaded, not retrained


def trivial_task(tmp_path):
    """A one-question task and a 2-layer model warm-started on a teacher that is right 1 time
    in 4 and else answers a random digit: sampled answers are right about 0.25 + 0.75/10."""
    data = tmp_path / "trivial.jsonl"
    golds = {"What is two plus one?": 3}
    with open(data, "w") as f:
        for _ in range(20):
            for q, a in golds.items():
                f.write(json.dumps({"question": q, "answer": f"#### {a}"}) + "\n")
    enc = get_tokenizer()
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=128, vocab_size=257, n_layer=2, n_head=4, n_embd=32))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = random.Random(0)
    for _ in range(200):
        qs = [rng.choice(list(golds)) for _ in range(32)]
        digits = [golds[q] if rng.random() < 0.25 else rng.randint(0, 9) for q in qs]
        idx = torch.tensor([enc.encode(f"Q: {q}\nA: #### {d}") + [256] for q, d in zip(qs, digits)])  # (32, L)
        logits = model(idx[:, :-1])[:, -7:]  # the last 7 predictions: "#### d" and EOS
        loss = F.cross_entropy(logits.reshape(-1, 257), idx[:, -7:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    init = tmp_path / "init.pt"
    torch.save(model.state_dict(), init)
    return ["--data", str(data), "--init_from", str(init), "--n_layer", "2", "--n_embd", "32", "--block_size", "128",
            "--max_new_tokens", "8", "--device", "cpu", "--G", "8", "--seed", "0"]


def test_grpo_raises_reward_on_a_trivial_task(tmp_path):
    """GRPO with the verifier must learn to give the right digit (reward ≈ 0.3 -> near 1)."""
    out = str(tmp_path / "out")
    r = run(*trivial_task(tmp_path), "--batch_prompts", "8", "--steps", "30", "--eval_every", "30",
            "--lr", "3e-3", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    rewards = [t["reward_mean"] for t in records(out, "train")]
    assert rewards[0] < 0.5, rewards             # it starts near the teacher's 0.25 + 0.75 / 10
    assert sum(rewards[-5:]) / 5 > 0.8, rewards  # and learns to give the right digit


def test_user_errors_are_one_line_messages(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q"\n')
    no_marker = tmp_path / "nomark.jsonl"
    no_marker.write_text('{"question": "q", "answer": "42"}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"question": "caf\xe9", "answer": "#### 1"}\n'.encode("latin-1"))
    not_a_ckpt = tmp_path / "notes.pt"
    not_a_ckpt.write_text("not a checkpoint")
    cases = [(["--G", "1"], "--G"),
             (["--beta", "-0.1"], "--beta"),
             (["--data", str(tmp_path / "missing.jsonl")], "no such file"),
             (["--data", str(bad)], "line 2"),
             (["--data", str(no_marker)], "line 1"),
             (["--data", str(empty)], "0 problems"),
             (["--data", str(latin1)], "line 1"),
             (["--beta", "nan"], "--beta"),
             (["--G", "two"], "--G"),
             (["--init_from", str(not_a_ckpt)], "cannot load"),
             (["--block_size", "40"], "block_size"),
             (["--init_from", "resume", "--out_dir", str(tmp_path / "nothing")], "no checkpoint")]
    for flags, words in cases:
        r = run(*TINY, "--sft_steps", "0", "--steps", "0", "--out_dir", str(tmp_path / "o"), *flags)
        assert r.returncode != 0, flags
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], (flags, r.stderr)


def test_micro_batches_give_the_one_batch_step(tmp_path):
    """Gradient accumulation with step-level denominators: the same losses with or without --micro_batch."""
    logs, task = [], trivial_task(tmp_path)
    for mb in ("0", "3"):
        out = str(tmp_path / f"mb{mb}")
        r = run(*task, "--steps", "1", "--mu", "2", "--agg", "dapo", "--micro_batch", mb, "--lr", "3e-3",
                "--batch_prompts", "4", "--out_dir", out)
        assert r.returncode == 0, r.stderr
        logs.append(records(out, "train")[0])
    one, acc = logs
    assert abs(one["pg_loss"]) > 1e-4 and one["kl"] > 0  # μ = 2: the second update sees a moved policy
    for k in ("loss", "pg_loss", "kl_loss", "kl", "ratio_mean", "reward_mean"):
        assert abs(one[k] - acc[k]) <= 1e-5 + 1e-3 * abs(one[k]), (k, one[k], acc[k])


def test_ctrl_c_finishes_the_step_saves_and_resumes(tmp_path):
    out = str(tmp_path / "out")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "train.py"), *TINY, "--steps", "1000",
                             "--sft_steps", "3", "--eval_every", "1000", "--out_dir", out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    for line in proc.stdout:
        if line.startswith("step 2:"):
            proc.send_signal(signal.SIGINT)
            break
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "continue with --init_from resume" in err
    steps = [t["step"] for t in records(out, "train")]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
    saved = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["step"]
    assert saved == steps[-1]  # the checkpoint holds every logged step, no half step
    r = run(*TINY, "--steps", str(saved + 1), "--sft_steps", "3", "--out_dir", out, "--init_from", "resume")
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(out, "train")] == list(range(1, saved + 2))


def test_resume_keeps_the_run_settings(tmp_path):
    out = str(tmp_path / "out")
    r = run(*TINY, "--steps", "1", "--sft_steps", "3", "--temperature", "0.7", "--out_dir", out)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "metrics.jsonl"), "a") as f:
        f.write('{"kind": "train", "st')  # a line cut short by a crash
    r = run(*TINY, "--steps", "2", "--out_dir", out, "--init_from", "resume")  # no --temperature, --sft_steps
    assert r.returncode == 0, r.stderr
    assert "dropping a damaged line" in r.stdout
    args = torch.load(os.path.join(out, "ckpt.pt"), weights_only=True)["args"]
    assert args["temperature"] == 0.7 and args["sft_steps"] == 3 and args["steps"] == 2
    assert [t["step"] for t in records(out, "train")] == [1, 2]
    r = run(*TINY, "--G", "4", "--steps", "3", "--out_dir", out, "--init_from", "resume")  # the last --G wins
    assert r.returncode != 0 and r.stderr.startswith("error: --G 4 differs") and len(r.stderr.splitlines()) == 1
