"""
plumbing/cli.py: what train.py, sample.py and the export share that is not GRPO: flag types, the checks a flag's type
cannot make, and one line for a user's error instead of a traceback (only command lines exit; the library raises).
"""

import argparse
import math
import os
import sys
import time

import torch

from plumbing.files import LoadError

RANK_WAIT_S = 60  # how long a rank > 0 under torchrun waits for rank 0 to say an error both met


def die(msg):
    """End a command line with one line, `error: msg`: a user's error, never a traceback. Under torchrun each rank
    usually meets the same error and rank 0 says it. A rank > 0 does not exit first: torchrun stops every other rank
    the moment one fails, and would stop rank 0 before it spoke. It waits up to RANK_WAIT_S for torchrun to stop it,
    then (an error rank 0 did not meet) says it itself, `error: rank R: msg`."""
    rank = os.environ.get("RANK", "0")
    if rank != "0":
        if "TORCHELASTIC_RUN_ID" in os.environ:  # set by torchrun
            try:
                time.sleep(RANK_WAIT_S)
            except KeyboardInterrupt:  # a Ctrl-C reached every rank: rank 0 says it
                sys.exit(1)
        sys.exit(f"error: rank {rank}: {msg}")
    sys.exit(f"error: {msg}")


def parser(description):
    """train.py's ArgumentParser: flags named whole (allow_abbrev=False: --temp is not --temperature), the defaults in
    --help, and a bad flag ends in die's one line."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False
    )
    p.error = die
    return p


def excepthook(*user_errors):
    """A sys.excepthook that ends a user's error in one line: a bad file (LoadError, the `user_errors` classes, an
    OSError such as a full disk), Ctrl-C, too little memory for the sizes; anything else is a bug and prints its
    traceback."""

    def hook(kind, e, tb):
        if issubclass(kind, (LoadError, *user_errors, OSError, KeyboardInterrupt)):
            die(str(e) or "interrupted: what was not in a checkpoint yet is lost")
        if issubclass(kind, RuntimeError) and any(s in str(e) for s in ("out of memory", "to allocate")):
            first = str(e).splitlines()[0]
            die(f"out of memory ({first}): lower --micro_batch, --batch_prompts, --G, --sft_batch or --max_new_tokens")
        sys.__excepthook__(kind, e, tb)

    return hook


def bounded(kind, lo, hi, above=False):
    """An argparse type: a finite `kind` (int or float) in [lo, hi], or in (lo, hi] if `above`; else argparse's
    one-line error naming the range."""

    def parse(text):
        x = kind(text)
        low_ok = x > lo if above else x >= lo
        if math.isfinite(x) and low_ok and x <= hi:
            return x
        raise argparse.ArgumentTypeError(f"{text} is not in {'(' if above else '['}{lo}, {hi}]")

    parse.__name__ = kind.__name__  # argparse names it in "invalid int value"
    return parse


def check_flags(args, device, world):
    """train.py's flags against what their own types cannot see: the device, and flags that must agree (die)."""
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    for broken, fix in [
        (not available[device], f"--device {device} is not available here; pick another"),
        (args.decode == "graph" and device != "cuda", "--decode graph captures a CUDA graph: use static or plain here"),
        (args.n_embd % args.n_head, f"--n_embd {args.n_embd} must be a multiple of --n_head {args.n_head}"),
        (args.batch_prompts % world, f"--batch_prompts {args.batch_prompts} must be a multiple of the {world} ranks"),
        (args.overlong >= args.max_new_tokens, f"--overlong {args.overlong} must be below --max_new_tokens"),
        ((args.task == "gsm8k") != (args.data is not None), f"--task {args.task}: --data FILE.jsonl is --task gsm8k's"),
    ]:
        if broken:
            die(fix)


def shape(model):
    """train.py's shape flags as a model has them (a model from a file has its own, not the flags')."""
    return {k: getattr(model.config, k) for k in ("n_layer", "n_head", "n_embd", "block_size")}
