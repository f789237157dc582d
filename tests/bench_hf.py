"""Benchmark, run by hand where transformers is installed (and TRL, for --trl; neither is a dependency of nanogrpo):
the Llama path's sampler against transformers' generate, and train.py's GRPO step against TRL's GRPOTrainer, in CPU
seconds (time.process_time: user + system, all threads), the two sides alternating in one process, pair after pair;
printed: each side's median and the median of the per-pair ratios (theirs / nanogrpo's: above 1, nanogrpo is faster).

    python tests/bench_hf.py --rows 256 --new_tokens 128 --pairs 5             # the samplers
    python tests/bench_hf.py --trl --rows 64 --new_tokens 64 --pairs 3         # a GRPO step each
    python tests/bench_hf.py --folder smollm2 --rows 256 --new_tokens 128 --pairs 3   # the samplers on a real folder

The folder is made here by transformers (no download): a Qwen2-shaped model with random weights, hidden 448, 4
layers, 7 query heads sharing 1 key/value head (GQA), q/k/v biases, tied embeddings, --vocab rows, and the test
tokenizer of tests/data/tokenizers. nanogrpo reads it with checkpoint.load_model, transformers with
from_pretrained (sdpa attention), both in float32. Each side draws every completion to --new_tokens (transformers:
min_new_tokens; nanogrpo: random weights almost never stop, and a row that ends early is still decoded until every row
has ended), from the same left-padded prompts: --rows / G prompts, G (8) samples each, at temperature 1 with no top-k
or top-p. --folder: a real folder instead (SmolLM2's, say), the samplers only; its rows may end, the batch rarely.

The GRPO steps: train.py itself (runpy, one --steps 2 run a pair, --sft_steps 0, beta 0.04, its defaults otherwise;
timed from its rollout's generate call to the end of its AdamW step, its evaluations excluded) and GRPOTrainer (one
train() a pair, max_steps 2, beta 0.04, loss_type "grpo", bf16 off, its defaults otherwise; timed from on_step_begin to
on_step_end), each pair's second step (the first pays one-time costs), on the same folder and the arithmetic task's
questions as plain text, --rows rows a step, one forward/backward of all of them, rewards from the same length rule.
Threads: --threads (torch.set_num_threads; default 1, so CPU time is about one core's wall time).
"""

import argparse
import contextlib
import io
import json
import os
import random
import runpy
import shutil
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import transformers  # noqa: E402

import grpo  # noqa: E402, F401  train.py's imports, before any timing
import sample  # noqa: E402
import tasks  # noqa: E402
from model import left_pad  # noqa: E402
from plumbing.checkpoint import load_model  # noqa: E402
from plumbing.tokenizer import stop_ids  # noqa: E402

SHAPE = dict(hidden_size=448, intermediate_size=2432, num_hidden_layers=4, num_attention_heads=7)
SHAPE |= dict(num_key_value_heads=1, max_position_embeddings=4096, rope_theta=1e6, tie_word_embeddings=True)
TOKENIZER = os.path.join(ROOT, "tests", "data", "tokenizers", "qwen.json")
EOS = [542, 540]  # the test tokenizer's <|im_end|>, <|endoftext|>
G = 8
WARMUP_TOKENS = 4  # the untimed first call of each sampler: its one-time costs need no full length


def write_folder(folder, vocab):
    """A Qwen2 folder with random float32 weights, saved by transformers, with the test tokenizer."""
    config = transformers.Qwen2Config(vocab_size=vocab, **SHAPE)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config)
    model.save_pretrained(folder)
    shutil.copy(TOKENIZER, os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(dict(eos_token_id=EOS), f)


def cpu_seconds(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def report(name, theirs, ours):
    ratios = [t / o for t, o in zip(theirs, ours)]
    print(
        f"{name}: theirs {statistics.median(theirs):.2f} CPU-s, nanogrpo {statistics.median(ours):.2f} CPU-s; "
        f"median of {len(ratios)} per-pair ratios {statistics.median(ratios):.2f} "
        f"({', '.join(f'{r:.2f}' for r in ratios)})",
        flush=True,
    )


def samplers(folder, args):
    ours, enc, _ = load_model(folder)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa")
    theirs.eval()
    g = torch.Generator().manual_seed(0)
    B = args.rows // G
    prompts = [torch.randint(0, 540, (int(n),), generator=g).tolist() for n in torch.randint(20, 60, (B,), generator=g)]
    stops = stop_ids(ours.config, enc)
    idx, mask = left_pad(prompts, stops[0])  # (B, P) each
    options = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, num_return_sequences=G, pad_token_id=stops[0])

    def hf(new_tokens=args.new_tokens):
        with torch.no_grad():
            steps = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens)
            theirs.generate(input_ids=idx, attention_mask=mask.long(), **options, **steps)

    def nano(new_tokens=args.new_tokens):
        roll = sample.generate(ours, prompts, G, new_tokens, 1.0, eos_id=stops)
        assert roll.completion.shape[1] == new_tokens

    hf(WARMUP_TOKENS)  # one-time costs, not timed: a short call at full width
    nano(WARMUP_TOKENS)
    times = ([], [])
    for i in range(args.pairs):
        sides = (hf, nano) if i % 2 == 0 else (nano, hf)
        spent = [cpu_seconds(side) for side in sides]
        times[0].append(spent[0] if i % 2 == 0 else spent[1])
        times[1].append(spent[1] if i % 2 == 0 else spent[0])
    report(f"sampler, {args.rows} rows x {args.new_tokens} new tokens, transformers {transformers.__version__}", *times)


def length_reward(completions, **kwargs):  # TRL's reward signature; the same rule as nanogrpo's below
    return [float(len(c) % 3) for c in completions]


def trl_step(folder, args, out):
    """CPU seconds of a GRPOTrainer step (generation, scoring, loss, backward, AdamW): the second of a run's two."""
    import datasets
    import trl

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.process_time()

        def on_step_end(self, *a, **k):
            self.spent = time.process_time() - self.t0  # the last step's

    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=TOKENIZER, eos_token="<|im_end|>", pad_token="<|im_end|>")
    task = tasks.TASKS["arithmetic"](
        argparse.Namespace(difficulty=2, teacher_slip=0.6, verbose=0.0, eval_size=1, seed=0)
    )
    questions = [task.sample(random.Random(i)).question for i in range(4 * args.rows // G)]  # as train.py's, plain text
    data = datasets.Dataset.from_dict({"prompt": questions})
    config = trl.GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=args.rows,
        num_generations=G,
        max_completion_length=args.new_tokens,
        generation_kwargs=dict(min_new_tokens=args.new_tokens),
        beta=0.04,
        loss_type="grpo",
        learning_rate=1e-5,
        max_steps=2,
        use_cpu=True,
        bf16=False,  # TRL's default is bf16 autocast, which a CPU without bf16 units runs many times slower
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    timer = Timer()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa")
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=length_reward,
        args=config,
        train_dataset=data,
        processing_class=tok,
        callbacks=[timer],
    )
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    return timer.spent


def nano_step(folder, args, out):
    """CPU seconds of a train.py GRPO step, from its rollout's generate call to the end of its AdamW step: the second
    of a run's two."""
    marks = {}
    plain_generate = sample.generate
    plain_evaluate = sample.evaluate
    plain_step = torch.optim.AdamW.step

    def generate(*a, **k):
        if "evaluating" not in marks and "t0" not in marks:
            marks["t0"] = time.process_time()
        return plain_generate(*a, **k)

    def evaluate(*a, **k):
        marks["evaluating"] = True
        try:
            return plain_evaluate(*a, **k)
        finally:
            del marks["evaluating"]

    def step(self, *a, **k):
        result = plain_step(self, *a, **k)
        marks["spent"] = time.process_time() - marks.pop("t0")  # the last step's
        return result

    def reward(task, problems, completions, **kwargs):  # length_reward's rule
        return torch.tensor(length_reward(completions))

    sample.generate = generate
    sample.evaluate = evaluate
    torch.optim.AdamW.step = step
    tasks.REWARDS["length"] = reward
    flags = ["--init_from", folder, "--prompt", "{question}", "--steps", "2", "--sft_steps", "0", "--eval_size", "1"]
    flags += ["--batch_prompts", str(args.rows // G), "--G", str(G), "--max_new_tokens", str(args.new_tokens)]
    flags += ["--micro_batch", str(args.rows), "--reward", "length", "--device", "cpu", "--out_dir", out]
    sys.argv = ["train.py", *flags]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(os.path.join(ROOT, "train.py"), run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        sample.generate = plain_generate
        sample.evaluate = plain_evaluate
        torch.optim.AdamW.step = plain_step
        del tasks.REWARDS["length"]
    return marks["spent"]


def steps(folder, args, work):
    times = ([], [])
    for i in range(args.pairs):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            out = os.path.join(work, f"run{i}-{side}")
            times[side].append((trl_step, nano_step)[side](folder, args, out))
    import trl

    report(f"GRPO step, {args.rows} rows x {args.new_tokens} new tokens, TRL {trl.__version__}", *times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=256, help="completions a step, G = 8 per prompt")
    p.add_argument("--new_tokens", type=int, default=128)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--vocab", type=int, default=32768, help="the embedding's rows (the tokenizer has 543 ids)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--trl", action="store_true", help="GRPO steps against TRL's GRPOTrainer, not the samplers")
    p.add_argument("--folder", help="the samplers on this Llama-family folder (SmolLM2's, say), not a random Qwen2 one")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.folder:
        print(f"{args.folder}, {args.threads} thread(s)", flush=True)
        samplers(args.folder, args)
        return
    with tempfile.TemporaryDirectory() as work:
        folder = os.path.join(work, "qwen2-gqa")
        write_folder(folder, args.vocab)
        print(f"{folder}: {json.dumps(SHAPE)}, vocab {args.vocab}, {args.threads} thread(s)", flush=True)
        if args.trl:
            steps(folder, args, work)
        else:
            samplers(folder, args)


if __name__ == "__main__":
    main()
