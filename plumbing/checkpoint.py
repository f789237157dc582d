"""
plumbing/checkpoint.py: nanogrpo's own files and a run's folder: checkpoints, resume, --init_from, the out_dir (its
lock, its log, a Ctrl-C, the ranks' exit); and load_model, the one entry point for a model file, ours or Hugging Face's
(plumbing/hf.py reads those). train.py and sample.py call it to turn files into models and back. A bad file raises
LoadError, a failed write OSError: one line that names the file and says what to change.

A checkpoint is a torch.save'd dict {"model": state_dict, "config": GPTConfig as a dict, "tokenizer": its name,
"tokenizer_ranks": its BPE ranks (None for "bytes"), "tokenizer_pattern" and "tokenizer_specials" (for a
tokenizer.json's, "bpe" and "bpe+nfc"), "prompt": the template, **the trainer's keys, "digest": a sha256 of all the
rest, so a flipped bit anywhere is refused}, written atomically (files.atomic_save), read with weights_only=True (no
code is ever unpickled). Every size read from a file is checked against the tensors present before anything is built.
Departures: the out_dir lock needs POSIX (elsewhere a run does not lock its out_dir).
"""

import argparse
import dataclasses
import hashlib
import json
import math
import os
import reprlib
import shutil
import signal
import sys
import warnings

if os.name == "posix":
    import fcntl  # file locks: the out_dir lock

import tiktoken
import torch

from model import GPT, GPTConfig
from plumbing import hf
from plumbing.files import LoadError, atomic_save, check_file, is_regular_file, remove_stale_temps
from plumbing.tokenizer import PROMPT, bpe_encoding, bpe_ranks, check_pattern, get_tokenizer, is_byte_bpe, stop_ids

CKPT_KEYS = ("model", "config", "tokenizer", "prompt", "digest")
# what a resume reads besides the model, and its type ("ref" is a state dict, or None when beta == 0)
TRAIN_KEYS = {"step": int, "task": str, "args": dict, "optimizer": dict, "log_bytes": int, "ref": (dict, type(None))}
# nanoGPT's resume rule: a resumed run keeps the checkpoint's settings but these (train.py checks --data's content)
RESUMABLE = tuple("lr steps eval_every micro_batch device dtype compile decode data out_dir init_from".split())
# a new run from a run's checkpoint (--init_from CKPT) takes these from its run unless typed: its task and lengths
INHERITED = tuple("task data difficulty teacher_slip verbose eval_size max_new_tokens lr seed".split())
TOKENIZERS = ("bytes", "words", "gpt2", "bpe", "bpe+nfc")  # "words" rebuilds from its saved ranks alone; "bpe" (a
# tokenizer.json's, tokenizer.tokenizer_from_json) from its ranks, pattern and specials
RUN_FILES = ("ckpt.pt", "warmstart.pt", "metrics.jsonl")  # a run's out_dir: checkpoint, cached warm start, log


def digest(ckpt):
    """sha256 of a checkpoint but its "digest": tensors by dtype, shape, bytes; dicts in key order; the rest by repr."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}|".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy())  # (bytes,) the raw data
        elif isinstance(x, dict):
            h.update(f"D{len(x)}|".encode())
            for k in sorted(x, key=repr):
                feed(k)
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(f"L{len(x)}|".encode())
            for v in x:
                feed(v)
        else:
            h.update(f"{type(x).__name__}:{x!r}|".encode())

    feed({k: v for k, v in ckpt.items() if k != "digest"})
    return h.hexdigest()


def save_checkpoint(path, model, tokenizer, prompt=PROMPT, **extra):
    """Save `model`, its tokenizer (an Encoding or its name), prompt template and `extra` (the trainer's keys)."""
    model = getattr(model, "_orig_mod", model)  # a torch.compile wrapper keeps the module here
    name = getattr(tokenizer, "name", tokenizer)
    if name not in TOKENIZERS or tokenizer == "words":  # by its name alone, "words" has no ranks to save
        raise ValueError(f"tokenizer {name!r} cannot be rebuilt from a checkpoint; use one of {TOKENIZERS}")
    if not (isinstance(prompt, str) and "{question}" in prompt):
        raise ValueError("the prompt template must be a str holding '{question}'")
    clash = set(extra) & {*CKPT_KEYS, "digest", "tokenizer_ranks", "tokenizer_pattern", "tokenizer_specials"}
    if clash:
        raise ValueError(f"extra keys {sorted(clash)} would overwrite the checkpoint's own")
    bpe = name != "bytes" and isinstance(tokenizer, tiktoken.Encoding)  # its ranks {token bytes: id} go inside
    ranks = bpe_ranks(tokenizer) if bpe else None
    config = dataclasses.asdict(model.config)
    ckpt = dict(model=model.state_dict(), config=config, tokenizer=name, prompt=prompt, tokenizer_ranks=ranks, **extra)
    if name.startswith("bpe"):  # a tokenizer.json's: its own pattern and specials (tiktoken keeps them unexported)
        ckpt |= dict(tokenizer_pattern=tokenizer._pat_str, tokenizer_specials=dict(tokenizer._special_tokens))
    atomic_save({**ckpt, "digest": digest(ckpt)}, path)


def _torch_load(path, mmap=False):
    """torch.load without unpickling code, else LoadError; mmap maps a zip-format file (the tensors share its pages)."""
    check_file(path)
    try:
        with open(path, "rb") as f:
            zipped = f.read(4) == b"PK\x03\x04"  # torch's format since 1.6; older files cannot be mapped
        with warnings.catch_warnings():  # a plain pickle's protocol makes torch warn, then fail or be refused below
            warnings.filterwarnings("ignore", "Detected pickle protocol", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and zipped)
    except MemoryError:
        raise
    except Exception as e:  # garbage raises anything from UnpicklingError to IndexError or KeyError
        raise LoadError(f"cannot read {path} ({type(e).__name__}: {str(e)[:80]}); save or download it again") from e


def _check_checkpoint(ckpt, path):
    """The GPTConfig of a sound nanogrpo checkpoint (keys, values, digest, shapes), else LoadError."""
    missing = [k for k in CKPT_KEYS if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise LoadError(f"{path} holds a {type(ckpt).__name__} that lacks {', '.join(missing)}: give a checkpoint")
    state = ckpt["model"]
    config = ckpt["config"]
    prompt = ckpt["prompt"]
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    cfg = GPTConfig(**config) if isinstance(config, dict) and set(config) <= fields else None
    sizes = [getattr(cfg, k, None) for k in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd")]
    if not (isinstance(state, dict) and state and all(isinstance(t, torch.Tensor) for t in state.values())):
        raise LoadError(f"{path}: its model is not a state dict of tensors; the file is damaged")
    sized = cfg is not None and all(type(s) is int and s > 0 for s in sizes)  # first: n_head divides below
    heads = sized and cfg.arch in ("gpt2", "llama") and type(cfg.n_kv_head) is int and type(cfg.head_dim) is int
    heads = heads and cfg.n_kv_head >= 0 and cfg.head_dim >= 0 and cfg.n_head % cfg.kv_heads == 0
    heads = heads and (cfg.arch == "llama" or cfg.n_embd % cfg.n_head == 0)
    if not heads:
        raise LoadError(f"{path}: its config {reprlib.repr(config)} is not a GPTConfig; the file is damaged")
    hf.check_numbers(cfg, path)  # ε, θ, a RoPE scaling: in range, or the model would compute NaN
    if ckpt["tokenizer"] not in TOKENIZERS or not (isinstance(prompt, str) and "{question}" in prompt):
        raise LoadError(f"{path}: its tokenizer {reprlib.repr(ckpt['tokenizer'])} or prompt is unknown; it is damaged")
    specials = ckpt.get("tokenizer_specials")
    typed = isinstance(specials, dict) and all(type(k) is str and type(i) is int for k, i in specials.items())
    json_bpe = ckpt["tokenizer"].startswith("bpe")  # a tokenizer.json's: its own pattern and specials
    if json_bpe and not (isinstance(ckpt.get("tokenizer_pattern"), str) and typed):
        raise LoadError(f"{path}: its tokenizer's pattern or special tokens are missing; the file is damaged")
    ranks = ckpt.get("tokenizer_ranks")  # a BPE's: None for "bytes", may be for GPT-2 (its files), never for the rest
    needs_ranks = ranks is not None or ckpt["tokenizer"] in ("words", "bpe", "bpe+nfc")
    if needs_ranks and not is_byte_bpe(ranks, specials if json_bpe else None):
        raise LoadError(f"{path}: its tokenizer's ranks are not a byte-level BPE's; the file is damaged")
    try:
        intact = ckpt["digest"] == digest(ckpt)
    except (RecursionError, TypeError, ValueError, RuntimeError):  # nested too deeply, or not plain data
        intact = False
    if not intact:  # a flipped bit, a damaged disk, or a file from before the digest covered everything
        raise LoadError(f"{path}: its content does not match its digest; use another copy or an earlier checkpoint")
    if cfg.n_layer > len(state):  # each layer has tensors of its own: an absurd n_layer is refused unbuilt
        raise LoadError(f"{path}: its config has {cfg.n_layer} layers but the file only {len(state)} tensors: damaged")
    want = {k: tuple(t.shape) for k, t in hf.meta_model(cfg, path).state_dict().items()}  # shapes only: no memory
    got = {k: tuple(t.shape) for k, t in state.items()}
    for k in sorted(want.keys() | got.keys()):
        if want.get(k) != got.get(k):
            raise LoadError(f"{path}: its config does not fit its tensors ({k} {got.get(k)} != {want.get(k)}): damaged")
    return cfg


def load_checkpoint(path, mmap=False, resume=False):
    """save_checkpoint's dict, checked; resume=True also needs TRAIN_KEYS; mmap=True maps it (keep the file there)."""
    ckpt = _torch_load(os.fspath(path), mmap)
    _check_checkpoint(ckpt, path)
    bad = [k for k, kind in TRAIN_KEYS.items() if not isinstance(ckpt.get(k, ...), kind)]
    if resume and bad:
        raise LoadError(f"{path}: no training state to resume ({bad[0]} is missing or mistyped); use it as --init_from")
    # the digest finds damage, not intent: what a resume reads is checked too (shapes: restore_training)
    if resume and (ckpt["step"] < 0 or ckpt["log_bytes"] < 0):
        raise LoadError(f"{path}: its step {ckpt['step']} or log size {ckpt['log_bytes']} is negative: start afresh")
    return ckpt


def cached(path, key):
    """The checkpoint at `path` if saved with key=`key` (a cache entry), else None; a damaged one raises LoadError."""
    ckpt = load_checkpoint(path) if os.path.exists(path) else None
    return ckpt if ckpt is not None and ckpt.get("key") == key else None


def resume(parser, path):
    """(args, checkpoint) of a resume: the saved settings; a flag typed now may override those in RESUMABLE only."""
    ckpt = load_checkpoint(path, resume=True)
    args = parser.parse_args(namespace=argparse.Namespace(**ckpt["args"]))  # typed flags override saved ones
    for k, v in ckpt["args"].items():
        if k not in RESUMABLE and getattr(args, k) != v:
            new = f"--init_from {path} --out_dir {os.path.dirname(path) or '.'}-{k} --{k} {getattr(args, k)}"
            raise LoadError(
                f"--{k} {getattr(args, k)} differs from {path}'s {v}; a resumed run keeps it: drop it, or start a new "
                f"run from its weights: {new}"
            )
    if getattr(args, "steps", 0) < ckpt["step"]:
        raise LoadError(f"{path} is at step {ckpt['step']}: --steps must be at least that")
    return args, ckpt


def inherit(parser, args, keys=INHERITED):
    """args of a new run from a nanogrpo checkpoint (--init_from path, neither scratch nor resume): the saved value of
    each flag in `keys` that was not typed now, each one taken printed, so that the same weights meet the same task,
    held-out problems and lengths. A file without saved flags (GPT-2's, a warm start) gives none; a bad file is
    load_model's to report. The run's own out_dir/ckpt.pt is refused: a new run removes it before it is read."""
    path = args.init_from
    if path in ("scratch", "resume"):
        return args
    if os.path.abspath(path) == os.path.abspath(os.path.join(args.out_dir, RUN_FILES[0])):
        raise LoadError(f"--init_from {path} is --out_dir's own checkpoint, which a new run replaces: use another")
    try:
        saved = load_checkpoint(path, mmap=True).get("args")
    except LoadError:
        return args
    if not isinstance(saved, dict):
        return args
    untyped = object()
    typed = parser.parse_args(namespace=argparse.Namespace(**dict.fromkeys(keys, untyped)))  # argparse keeps these
    for k in keys:
        if k in saved and getattr(typed, k) is untyped and getattr(args, k) != saved[k]:
            print(f"from {path}: --{k} {saved[k]} (type --{k} to change it)")
            setattr(args, k, saved[k])
    return args


def restore(module, state, path):
    """module.load_state_dict(state), or LoadError when the shapes do not fit or a weight is not finite."""
    try:
        module.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError, AttributeError) as e:  # another size, or not a state dict
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        why = type(e).__name__
        if lines:  # torch's message opens with a header line, then one line per problem: keep the first problem
            why = lines[min(1, len(lines) - 1)][:160]
        raise LoadError(f"{path} does not fit this model ({why}); match --n_layer/n_embd/n_head/block_size") from e
    # a sum is finite iff every element is (weights never reach 3e38): one number per tensor, one device sync
    sums = [t.detach().sum(dtype=torch.float32) for t in module.state_dict().values() if t.is_floating_point()]
    if sums and not torch.isfinite(torch.stack(sums)).all():  # (n_tensors,) sums
        raise LoadError(f"{path} holds non-finite weights (NaN or inf); it is damaged: use another copy")


def _optimizer_misfit(state, params):
    """Why an optimizer's state dict {"state": {id: {name: tensor}}, "param_groups": [{"params": [id]}]} does not fit
    `params` (torch's load_state_dict counts them but leaves shapes to the first step), or None: each parameter's
    tensors but "step" have its shape, are finite, and AdamW's second moment is not negative."""
    groups = state.get("param_groups")
    saved = state.get("state")
    if not (isinstance(groups, list) and all(isinstance(g, dict) for g in groups) and isinstance(saved, dict)):
        return "not an optimizer's state dict"
    ids = [i for g in groups for i in (g.get("params") if isinstance(g.get("params"), list) else [None])]
    if not all(type(i) is int for i in ids):
        return "its parameter ids are not numbers"
    if len(ids) != len(params) or not set(saved) <= set(ids):
        return f"{len(ids)} parameters, this model has {len(params)}"
    for i, q in zip(ids, params):
        moments = saved.get(i, {})
        if not isinstance(moments, dict):
            return f"parameter {i} has no state dict"
        for name, t in moments.items():
            if name == "step":
                continue
            if not isinstance(t, torch.Tensor) or t.shape != q.shape:
                return f"parameter {i}'s {name} is not a tensor of shape {tuple(q.shape)}"
            if not torch.isfinite(t).all() or (name == "exp_avg_sq" and (t < 0).any()):
                return f"parameter {i}'s {name} is not finite, or a second moment is negative"
    return None


def restore_training(ckpt, path, optimizer, ref, task_key):
    """Load a resumed run's optimizer state and reference model (None when beta == 0); the step to continue from.
    task_key is the run's task now (task.Task.key): another than the checkpoint's is refused."""
    if ckpt["task"] != task_key:
        raise LoadError(
            f"the task changed since {path} was written (another --data content or task flag); start afresh"
        )
    why = _optimizer_misfit(ckpt["optimizer"], [q for group in optimizer.param_groups for q in group["params"]])
    if why:
        raise LoadError(f"{path}: its optimizer state does not fit this model ({why}); start a fresh run")
    try:
        optimizer.load_state_dict(ckpt["optimizer"])
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as e:
        raise LoadError(f"{path}: its optimizer state does not fit this model ({type(e).__name__}); start a fresh run")
    if (ref is None) != (ckpt["ref"] is None):
        raise LoadError(f"{path}: it was saved {'with' if ckpt['ref'] is not None else 'without'} a reference model")
    if ref is not None:
        restore(ref, ckpt["ref"], path)
    return ckpt["step"]


def _check_run_file(path):
    """LoadError unless `path` (one of RUN_FILES) is absent or a regular file nanogrpo wrote: a checkpoint with our
    keys (read without its digest; a zip-format one is only mapped), or a log whose first record is ours (or empty: a
    run stopped before its first). A link is refused too: a run would write what it points to, past out_dir's lock."""
    if not os.path.lexists(path):
        return
    why = None
    if os.path.islink(path):
        why = "a link"
    elif not os.path.isfile(path):
        why = "not a file"
    elif path.endswith(".jsonl"):
        with open(path, "rb") as f:
            head = f.read(20)
        if head and not head.startswith((b'{"kind": "train"', b'{"kind": "eval"', b'{"kind": "skipped"')):
            why = "not a log of nanogrpo's records"
    else:
        try:
            ckpt = _torch_load(path, mmap=True)
        except LoadError:  # an empty file too: nanogrpo writes none
            ckpt = None
        if not (isinstance(ckpt, dict) and all(k in ckpt for k in CKPT_KEYS)):
            why = "not a nanogrpo checkpoint"
    if why:
        raise LoadError(
            f"{path} is {why}: nanogrpo writes its run files under these names; move it or pick another --out_dir"
        )


class RunDir:
    """The out_dir of one run: ckpt.pt, warmstart.pt (the cached warm start), metrics.jsonl, and run.lock, an OS lock
    its writer (rank 0) holds until its process ends. A fresh run removes an old ckpt.pt, never to resume it, and
    starts the log afresh; so a run file that nanogrpo did not write (another project's ckpt.pt, a folder, a link) is
    refused in one line, never removed."""

    def __init__(self, path, resume, writer=True):
        self.path = path
        self.writer = writer
        self.stopped = False  # a Ctrl-C came (catch_ctrl_c)
        self.ckpt, self.warm, self.metrics = (os.path.join(path, f) for f in RUN_FILES)
        if not writer:
            return
        try:
            os.makedirs(path, exist_ok=True)
            self._lock = open(os.path.join(path, "run.lock"), "a")  # open for the run: the lock lives with it
        except OSError as e:
            raise OSError(f"cannot write in --out_dir {path} ({e.strerror}); pick another folder") from e
        try:
            if os.name == "posix":
                fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise OSError(f"--out_dir {path} is in use by another run; wait for it to end or pick another") from e
        written = (self.ckpt, self.metrics) + (() if resume else (self.warm,))  # a resume writes no warm start
        for name in written:
            _check_run_file(name)
        if not resume and os.path.exists(self.ckpt):
            os.remove(self.ckpt)
        for name in (self.ckpt, self.warm):  # what a killed writer left (its warm start may never be saved again)
            remove_stale_temps(name, is_regular_file)

    def check_space(self, num_params, ref):
        """OSError unless the disk holds a checkpoint (weights, `ref`, AdamW's moments), its temp copy, a warm start."""
        need = 4 * num_params * (2 * (4 if ref else 3) + 1) / 1e6  # MB
        free = shutil.disk_usage(self.path).free / 1e6  # MB
        if self.writer and free < need:
            raise OSError(f"--out_dir {self.path} has {free:.0f} MB free, the run needs {need:.0f} MB: free some space")

    def open_log(self, nbytes):
        """Keep metrics.jsonl's first nbytes (the checkpoint's), so a resumed run's log equals an unbroken run's."""
        if not self.writer:
            return
        size = os.path.getsize(self.metrics) if os.path.isfile(self.metrics) else 0
        if size < nbytes:
            raise LoadError(f"{self.metrics} is shorter than when {self.ckpt} was written; restore it or start afresh")
        with open(self.metrics, "a") as f:
            f.truncate(nbytes)

    def log(self, record, show=()):
        """The writer appends `record` to metrics.jsonl as strict JSON (nan -> null) and prints its `show` keys."""
        if self.writer:
            record = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}
            with open(self.metrics, "a") as f:
                f.write(json.dumps(record) + "\n")
            print(*(f"{k} {record[k]:.4g}" if isinstance(record[k], float) else f"{k} {record[k]}" for k in show))

    def log_bytes(self):
        return os.path.getsize(self.metrics)

    def catch_ctrl_c(self):
        """From now on a Ctrl-C sets `stopped`: train.py finishes the step in flight on every rank (with its evaluation
        when one is due), saves and exits; a second Ctrl-C quits at once (KeyboardInterrupt: one line, excepthook)."""

        def request(signum, frame):
            if self.writer:  # under torchrun every rank gets it: rank 0 speaks
                print("Ctrl-C: finishing this step, then saving (Ctrl-C again to quit at once)", flush=True)
            self.stopped = True
            signal.signal(signal.SIGINT, signal.default_int_handler)

        signal.signal(signal.SIGINT, request)

    def finish(self, step, world):
        """End the run: exit code 1 after a Ctrl-C (saying how to resume), else 0. Under torchrun every rank first waits
        at a barrier for rank 0's last evaluation and save, then leaves at once: in the interpreter's ordinary shutdown
        torch's gloo threads can abort (SIGABRT), and torchrun would call the run failed."""
        code = 1 if self.stopped else 0
        if self.stopped and self.writer:
            print(f"stopped at step {step}; saved {self.ckpt}, continue with --init_from resume", file=sys.stderr)
        sys.stderr.flush()
        if world > 1:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
            sys.stdout.flush()
            os._exit(code)
        sys.exit(code)


def _tokenizer(ckpt, folder, path):
    """A checked checkpoint's tokenizer: from its saved ranks (and a tokenizer.json's pattern and specials)."""
    name = ckpt["tokenizer"]
    ranks = ckpt.get("tokenizer_ranks")  # the BPE of "words", GPT-2 or a tokenizer.json, checked by _check_checkpoint
    if name.startswith("bpe"):
        pattern = ckpt["tokenizer_pattern"]
        check_pattern(pattern, path)  # tried on a few texts: a regex tiktoken cannot run is refused here
        try:
            return tiktoken.Encoding(
                name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=ckpt["tokenizer_specials"]
            )
        except ValueError as e:  # specials that clash with the ranks, or a pattern tiktoken rejects
            raise LoadError(f"{path}: its tokenizer cannot be rebuilt ({str(e)[:80]}); the file is damaged") from e
    return bpe_encoding(name, ranks) if ranks else get_tokenizer(name, folder)


def load_model(path, device="cpu"):
    """(model in float32 and eval mode on `device`, tokenizer, prompt template) from a nanogrpo checkpoint or a
    Hugging Face folder or weights file (GPT-2, or the Llama family: plumbing/hf.py). The ids that end a completion
    are tokenizer.stop_ids(model.config, tokenizer)."""
    files, folder, weight_map = hf.weights_file(os.fspath(path))
    file = files[0]
    if weight_map is not None:  # sharded
        obj = hf.read_shards(files, weight_map)
    else:
        with open(file, "rb") as f:
            safetensors = file.endswith(".safetensors") or f.read(9)[8:9] == b"{"  # a length, then the JSON header
        obj = hf.read_safetensors(file) if safetensors else _torch_load(file, mmap=True)
    tensors = isinstance(obj, dict) and obj and all(isinstance(t, torch.Tensor) for t in obj.values())
    if isinstance(obj, dict) and ("model" in obj or "config" in obj):  # a nanogrpo checkpoint
        config = _check_checkpoint(obj, file)
        state = obj["model"]
        prompt = obj["prompt"]
        enc = _tokenizer(obj, folder, file)
    elif tensors and hf.model_type(folder) == "gpt2":
        config, state, prompt = hf.gpt2_weights(obj, folder, file)
        enc = get_tokenizer("gpt2", folder)
    elif tensors:  # the Llama family
        config, state, enc, prompt = hf.llama_folder(obj, folder, file)
    else:
        raise LoadError(f"{file} holds a {type(obj).__name__}, neither a checkpoint nor Hugging Face weights; pick one")
    if enc.n_vocab > config.vocab_size or (config.arch == "gpt2" and enc.n_vocab != config.vocab_size):
        n = config.vocab_size  # the Llama family may pad its embedding past the tokenizer (Qwen: 151,936 rows)
        extra = [enc.decode_single_token_bytes(i).decode("utf-8", "replace") for i in range(n, min(n + 4, enc.n_vocab))]
        named = f" ({', '.join(map(repr, extra[:3]))}{', ...' if len(extra) > 3 else ''} from id {n})" if extra else ""
        raise LoadError(
            f"{file} has {n} token ids but tokenizer {enc.name!r} has {enc.n_vocab}{named}: use its own files"
        )
    try:
        stop_ids(config, enc)  # a model whose tokenizer has no <|endoftext|> must name its stop ids
    except ValueError as e:
        raise LoadError(f"{file}: {e}; put the model's generation_config.json (eos_token_id) beside it") from e
    hf.check_memory(config, device, file)  # before the weights are allocated
    with torch.device(device):
        model = GPT(config)  # built where it will run: on a GPU, the host never holds a copy of the weights
    restore(model, state, file)
    return model.eval(), enc, prompt
