"""
checkpoint.py: everything about files: nanogrpo checkpoints, a run's out_dir, GPT-2's Hugging Face files.

No GRPO here: train.py and sample.py call it to turn files into models (load_model) and back (save_checkpoint).
A bad file raises LoadError, a failed write OSError: one line that names the file and says what to change.
`python checkpoint.py export CKPT DIR` (export_hf) writes a checkpoint as Hugging Face's GPT-2, which transformers
loads with the same logits and token ids (its tokenizer: vocab.json, merges.txt, tokenizer.json); load_model reads it.
A run's out_dir (RunDir) also holds the run's end: its lock, its log, a Ctrl-C, the ranks' exit. The last section is
the command lines' plumbing (train.py's, sample.py's, the export's): flag types and checks, one-line errors.

A checkpoint is a torch.save'd dict {"model": state_dict, "config": GPTConfig as a dict, "tokenizer": its name,
"tokenizer_ranks": its BPE ranks (None for "bytes"), "prompt": the template, **the trainer's keys, "digest": a sha256
of all the rest, so a flipped bit anywhere is refused}, written atomically, read with weights_only=True (no code is
ever unpickled). Every size read from a file is checked against the tensors present before anything is built.

Hugging Face's GPT-2 differs from model.py in three ways, undone while loading: names may lack "transformer.",
the four Conv1D weights per layer are stored (in, out), and the causal-mask buffers attn.bias / attn.masked_bias
are stored too. Departures: without config.json, n_head = n_embd // 64 (true of all four GPT-2 sizes); a
folder's vocab.json comes before tiktoken's cache (the same Encoding, offline); sharded files (*.index.json) and
big-endian hosts are not supported; the out_dir lock needs POSIX (elsewhere a run does not lock its out_dir).
"""

import argparse
import dataclasses
import hashlib
import json
import math
import mmap
import os
import re
import reprlib
import shutil
import signal
import sys

if os.name == "posix":
    import fcntl  # file locks: the out_dir lock

import tiktoken
import torch

from model import GPT, PROMPT, GPTConfig, bpe_encoding, byte_tokenizer, is_byte_bpe


class LoadError(ValueError):
    """A file (or name) the user gave cannot be used; str(e) is one line (the module docstring)."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).splitlines()))


def get_tokenizer(name="bytes", folder=None):
    """A tiktoken.Encoding: "bytes" (model.byte_tokenizer) or "gpt2" (`folder`/vocab.json if any, else tiktoken's)."""
    if name == "bytes":
        return byte_tokenizer()
    if name != "gpt2":
        raise LoadError(f"unknown tokenizer {name!r}; choose 'bytes' or 'gpt2'")
    if folder is not None and os.path.isfile(os.path.join(folder, "vocab.json")):
        return gpt2_from_vocab_json(os.path.join(folder, "vocab.json"))
    try:
        return tiktoken.get_encoding("gpt2")
    except (OSError, ValueError, ImportError) as e:  # offline: a network error, which is an OSError
        where = f"{folder} has no vocab.json and " if folder is not None else ""
        raise LoadError(
            f"{where}no tiktoken 'gpt2' files here ({type(e).__name__}); put GPT-2's vocab.json beside the weights, "
            "or run tiktoken.get_encoding('gpt2') once online and copy its cache here, naming it in TIKTOKEN_CACHE_DIR"
        ) from e


def gpt2_byte_chars():
    """byte -> its character in GPT-2's vocab.json, in GPT-2's id order: the 188 printable Latin-1 ones but space as
    themselves, then the other 68 as chr(256), chr(257), ... (" " is chr(288), id 220)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + n) for n, b in enumerate(rest)}}


def _read_json(path, fix):
    """The JSON object in `path`, else LoadError (not UTF-8 JSON, nested too deeply, ...) saying `fix`."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise LoadError(f"cannot read {path} ({type(e).__name__}); {fix}") from e
    if not isinstance(obj, dict):
        raise LoadError(f"{path} is not a JSON object; {fix}")
    return obj


def gpt2_from_vocab_json(path):
    """GPT-2's Encoding from Hugging Face's vocab.json {token in gpt2_byte_chars: id}, offline: ids are BPE ranks."""
    vocab = _read_json(path, "download GPT-2's vocab.json again")
    eot = vocab.pop("<|endoftext|>", None)
    if eot is None or not all(isinstance(i, int) for i in vocab.values()):
        raise LoadError(f"{path} is not a vocabulary {{token: id}} with <|endoftext|>; download GPT-2's vocab.json")
    byte_of = {c: b for b, c in gpt2_byte_chars().items()}
    ranks = {}
    for token, i in vocab.items():
        if not token or any(c not in byte_of for c in token):
            raise LoadError(f"{path}: token {token!r} is not in GPT-2's byte characters; use GPT-2's vocab.json")
        ranks[bytes(byte_of[c] for c in token)] = i
    if not is_byte_bpe(ranks) or eot != len(ranks) or len(ranks) != len(vocab):
        raise LoadError(f"{path}: ids must be 0..{len(vocab)} once each, <|endoftext|> last, 256 single-byte tokens in")
    return bpe_encoding("gpt2", ranks)  # <|endoftext|> = len(ranks), checked above


CKPT_KEYS = ("model", "config", "tokenizer", "prompt", "digest")
# what a resume reads besides the model, and its type ("ref" is a state dict, or None when beta == 0)
TRAIN_KEYS = {"step": int, "task": str, "args": dict, "optimizer": dict, "log_bytes": int, "ref": (dict, type(None))}
# nanoGPT's resume rule: a resumed run keeps the checkpoint's settings but these (train.py checks --data's content)
RESUMABLE = tuple("lr steps eval_every micro_batch device dtype compile decode data out_dir init_from".split())
# a new run from a run's checkpoint (--init_from CKPT) takes these from its run unless typed: its task and lengths
INHERITED = tuple("task data difficulty teacher_slip verbose eval_size max_new_tokens lr seed".split())
TOKENIZERS = ("bytes", "words", "gpt2")  # "words" (model.byte_tokenizer's) rebuilds from its saved ranks alone
RUN_FILES = ("ckpt.pt", "warmstart.pt", "metrics.jsonl")  # a run's out_dir: checkpoint, cached warm start, log
SAFETENSORS_DTYPES = dict(F64=torch.float64, F32=torch.float32, F16=torch.float16, BF16=torch.bfloat16, BOOL=torch.bool)
SAFETENSORS_DTYPES |= dict(I64=torch.int64, I32=torch.int32, I16=torch.int16, I8=torch.int8, U8=torch.uint8)
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # a GPT-2 folder's weights, beside config.json and vocab.json
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # stored (in, out)
# the settings of a Hugging Face config.json that this model can honour: the values allowed
GPT2_FIXED = {"model_type": ("gpt2",), "activation_function": ("gelu_new", "gelu_pytorch_tanh")}
GPT2_FIXED |= {"layer_norm_epsilon": (1e-5,), "scale_attn_weights": (True,), "tie_word_embeddings": (True,)}
GPT2_FIXED |= {"scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}
# what export_hf writes: the model, its settings, the tokenizer for GPT2Tokenizer (vocab, merges) and the fast one
HF_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")
ST_NAMES = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}  # torch dtype -> its name in a header
EOT = "<|endoftext|>"  # the EOS token, one id after the BPE's tokens


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


def atomic_save(obj, path):
    """torch.save(obj, path), all or nothing: a temp file (named with the PID), flushed to disk, renamed over `path`."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch's writer reports a full disk as a RuntimeError
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0][:120]
        mb = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 1e6
        raise OSError(f"cannot write {path} ({why}; {mb:.0f} MB free): free some space; the old file is intact") from e
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def _ranks(enc):
    """A BPE Encoding's ranks {token bytes: id}, <|endoftext|> left out."""
    return {enc.decode_single_token_bytes(i): i for i in range(enc.eot_token)}


def save_checkpoint(path, model, tokenizer, prompt=PROMPT, **extra):
    """Save `model`, its tokenizer (an Encoding or its name), prompt template and `extra` (the trainer's keys)."""
    model = getattr(model, "_orig_mod", model)  # a torch.compile wrapper keeps the module here
    name = getattr(tokenizer, "name", tokenizer)
    if name not in TOKENIZERS or tokenizer == "words":  # by its name alone, "words" has no ranks to save
        raise ValueError(f"tokenizer {name!r} cannot be rebuilt from a checkpoint; use one of {TOKENIZERS}")
    if not (isinstance(prompt, str) and "{question}" in prompt):
        raise ValueError("the prompt template must be a str holding '{question}'")
    clash = set(extra) & {*CKPT_KEYS, "digest", "tokenizer_ranks"}
    if clash:
        raise ValueError(f"extra keys {sorted(clash)} would overwrite the checkpoint's own")
    bpe = name != "bytes" and isinstance(tokenizer, tiktoken.Encoding)  # its ranks {token bytes: id} go inside
    ranks = _ranks(tokenizer) if bpe else None
    config = dataclasses.asdict(model.config)
    ckpt = dict(model=model.state_dict(), config=config, tokenizer=name, prompt=prompt, tokenizer_ranks=ranks, **extra)
    atomic_save({**ckpt, "digest": digest(ckpt)}, path)


def _check_file(path):
    """The file exists and is not empty, else LoadError."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file or folder; give a checkpoint, or GPT-2's weights file or folder")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise LoadError(f"{path} is empty (0 bytes): it was cut short or never written; save or download it again")


def _torch_load(path, mmap=False):
    """torch.load without unpickling code, else LoadError; mmap maps a zip-format file (the tensors share its pages)."""
    _check_file(path)
    try:
        with open(path, "rb") as f:
            zipped = f.read(4) == b"PK\x03\x04"  # torch's format since 1.6; older files cannot be mapped
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
    if cfg is None or not all(type(s) is int and s > 0 for s in sizes) or cfg.n_embd % cfg.n_head:
        raise LoadError(f"{path}: its config {reprlib.repr(config)} is not a GPTConfig; the file is damaged")
    if ckpt["tokenizer"] not in TOKENIZERS or not (isinstance(prompt, str) and "{question}" in prompt):
        raise LoadError(f"{path}: its tokenizer {reprlib.repr(ckpt['tokenizer'])} or prompt is unknown; it is damaged")
    ranks = ckpt.get("tokenizer_ranks")  # a BPE's; None for "bytes" and may be for GPT-2 (from its files), not "words"
    if (ranks is not None or ckpt["tokenizer"] == "words") and not is_byte_bpe(ranks):
        raise LoadError(f"{path}: its tokenizer's ranks are not a byte-level BPE's; the file is damaged")
    try:
        intact = ckpt["digest"] == digest(ckpt)
    except (RecursionError, TypeError, ValueError, RuntimeError):  # nested too deeply, or not plain data
        intact = False
    if not intact:  # a flipped bit, a damaged disk, or a file from before the digest covered everything
        raise LoadError(f"{path}: its content does not match its digest; use another copy or an earlier checkpoint")
    if cfg.n_layer > len(state):  # each layer has tensors of its own: an absurd n_layer is refused unbuilt
        raise LoadError(f"{path}: its config has {cfg.n_layer} layers but the file only {len(state)} tensors: damaged")
    with torch.device("meta"):  # shapes only: nothing is allocated, whatever the config says
        want = {k: tuple(t.shape) for k, t in GPT(cfg).state_dict().items()}
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


def shape(model):
    """train.py's shape flags as a model has them (a model from a file has its own, not the flags')."""
    return {k: getattr(model.config, k) for k in ("n_layer", "n_head", "n_embd", "block_size")}


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


def restore_training(ckpt, path, optimizer, ref, task_key):
    """Load a resumed run's optimizer state and reference model (None when beta == 0); the step to continue from.
    task_key is the run's task now (task.Task.key): another than the checkpoint's is refused."""
    if ckpt["task"] != task_key:
        raise LoadError(
            f"the task changed since {path} was written (another --data content or task flag); start afresh"
        )
    try:
        optimizer.load_state_dict(ckpt["optimizer"])
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as e:
        raise LoadError(f"{path}: its optimizer state does not fit this model ({type(e).__name__}); start a fresh run")
    if (ref is None) != (ckpt["ref"] is None):
        raise LoadError(f"{path}: it was saved {'with' if ckpt['ref'] is not None else 'without'} a reference model")
    if ref is not None:
        restore(ref, ckpt["ref"], path)
    return ckpt["step"]


class RunDir:
    """The out_dir of one run: ckpt.pt, warmstart.pt (the cached warm start), metrics.jsonl, and run.lock, an OS lock
    its writer (rank 0) holds until its process ends. A fresh run removes an old ckpt.pt, never to resume it."""

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
        if not resume and os.path.exists(self.ckpt):
            os.remove(self.ckpt)

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
            print("Ctrl-C: finishing this step, then saving (Ctrl-C again to quit at once)", flush=True)
            self.stopped = True
            signal.signal(signal.SIGINT, signal.default_int_handler)

        signal.signal(signal.SIGINT, request)

    def finish(self, step, world):
        """End the run: exit code 1 after a Ctrl-C (saying how to resume), else 0. Under torchrun every rank first waits
        at a barrier for rank 0's last evaluation and save, then leaves at once: in the interpreter's ordinary shutdown
        torch's gloo threads can abort (SIGABRT), and torchrun would call the run failed."""
        code = 1 if self.stopped else 0
        if self.stopped:
            print(f"stopped at step {step}; saved {self.ckpt}, continue with --init_from resume", file=sys.stderr)
        sys.stderr.flush()
        if world > 1:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
            sys.stdout.flush()
            os._exit(code)
        sys.exit(code)


# ----------------------------------------------------------------------------- the command lines' plumbing
# What train.py, sample.py and the export share that is not GRPO: flag types, the checks a flag's type cannot make,
# and one line for a user's error instead of a traceback (only these exit; the library functions above raise).


def die(msg):
    """End a command line with one line, `error: msg`: a user's error, never a traceback."""
    sys.exit(f"error: {msg}")


def excepthook(*user_errors):
    """A sys.excepthook that ends a user's error in one line: a bad file (LoadError, the `user_errors` classes, an
    OSError such as a full disk), Ctrl-C, too little memory for the sizes; anything else is a bug and prints its
    traceback."""

    def hook(kind, e, tb):
        if issubclass(kind, (LoadError, *user_errors, OSError, KeyboardInterrupt)):
            die(str(e) or "interrupted: what was not in a checkpoint yet is lost")
        if issubclass(kind, RuntimeError) and any(s in str(e) for s in ("out of memory", "to allocate")):
            first = str(e).splitlines()[0]
            die(f"out of memory ({first}): lower --batch_prompts, --G, --sft_batch or --max_new_tokens")
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


def read_safetensors(path):
    """{name: tensor}, views into a copy-on-write map of a .safetensors file: 8 bytes little-endian length N, N bytes of
    JSON {name: {"dtype", "shape", "data_offsets": [begin, end] from the data's start}}, the data; all checked."""
    if sys.byteorder != "little":
        raise LoadError(f"{path}: safetensors files are little-endian; this big-endian host cannot read them here")
    _check_file(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            fits = size >= 8 and n <= min(size - 8, 100_000_000)  # the header length
            header = json.loads(f.read(n).decode("utf-8")) if fits else None
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # private: writes never reach the file
    except (OSError, ValueError, RecursionError) as e:  # ValueError: the header is not UTF-8 JSON
        raise LoadError(f"cannot read {path} as safetensors ({type(e).__name__}); download it again") from e
    if not fits:
        raise LoadError(f"{path}: its header length ({n} bytes) exceeds the file ({size}); download it again")
    if not isinstance(header, dict):
        raise LoadError(f"{path}: its header is not a JSON object; this is not a safetensors file")
    data = torch.frombuffer(buf, dtype=torch.uint8)  # (size,) the whole file, mapped
    start = 8 + n  # where the data begins
    tensors = {}
    spans = []  # (begin, end, name) of each tensor's bytes
    header.pop("__metadata__", None)
    for name, info in header.items():
        info = info if isinstance(info, dict) else {}
        shape = info.get("shape")
        offsets = info.get("data_offsets")
        kind = info.get("dtype")
        shape_ok = isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
        offsets_ok = isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
        if not (shape_ok and offsets_ok and 0 <= offsets[0] <= offsets[1]):
            raise LoadError(f"{path}: the header entry of {name!r} is malformed; download the file again")
        dtype = SAFETENSORS_DTYPES.get(kind)
        if dtype is None:
            raise LoadError(f"{path}: {name!r} has dtype {kind!r}, not {'/'.join(SAFETENSORS_DTYPES)}; convert it")
        begin = start + offsets[0]
        end = start + offsets[1]
        if end > size:
            raise LoadError(f"{path} is cut short: {name!r} ends at byte {end} of {size}; download it again")
        need = math.prod(shape) * dtype.itemsize
        if end - begin != need:
            raise LoadError(f"{path}: {name!r} has {end - begin} bytes, not the {need} {kind} {shape} needs; damaged")
        raw = data[begin:end]  # (nbytes,) uint8 view; a tensor not aligned to its item size is copied
        tensors[name] = (raw.clone() if begin % dtype.itemsize else raw).view(dtype).reshape(shape)
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise LoadError(f"{path}: tensors {a!r} and {b!r} share bytes; the file is damaged: download it again")
    return tensors


def _gpt2(tensors, folder, path):
    """(GPTConfig, state dict of views, prompt template) of GPT-2 tensors in Hugging Face's layout, checked in the
    file's own names; the template is config.json's nanogrpo_prompt (export_hf's) if any, else model.PROMPT."""
    weights = {}  # {name without "transformer.": tensor}
    for name, t in tensors.items():
        short = name.removeprefix("transformer.")
        if re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", short):  # a causal-mask buffer, not the c_attn bias
            continue
        if short in weights:
            raise LoadError(f"{path} holds {short!r} twice (with and without 'transformer.'); the file is damaged")
        weights[short] = t
    wte = weights.get("wte.weight")  # the config: shapes, and config.json if any
    wpe = weights.get("wpe.weight")
    if wte is None or wpe is None or wte.dim() != 2 or wpe.dim() != 2:
        raise LoadError(f"{path}: wte.weight or wpe.weight is missing or not a matrix; this is not GPT-2's weights")
    layers = {int(m.group(1)) for m in (re.match(r"h\.(\d{1,9})\.", k) for k in weights) if m}
    if not layers or layers != set(range(len(layers))):  # so n_layer is at most the number of tensors present
        raise LoadError(f"{path}: its layers are not h.0 .. h.N without gaps; this is not GPT-2 weights")
    got = dict(vocab_size=wte.shape[0], n_embd=wte.shape[1], n_positions=wpe.shape[0], n_layer=len(layers))
    fc = weights.get("h.0.mlp.c_fc.weight")
    if fc is not None and tuple(fc.shape) == (4 * got["n_embd"], got["n_embd"]):  # (out, in): not Conv1D's (in, out)
        raise LoadError(f"{path} is this model's state dict (nn.Linear layout), not GPT-2's; restore() it instead")
    cfg_path = os.path.join(folder, "config.json")
    hf = _read_json(cfg_path, "download it again or remove it") if os.path.isfile(cfg_path) else {}
    for key, allowed in {**GPT2_FIXED, "n_inner": (None, 4 * got["n_embd"])}.items():
        if key in hf and hf[key] not in allowed:
            raise LoadError(f"{cfg_path} sets {key} = {hf[key]!r}; this GPT-2 implements only {allowed}")
    for key, value in got.items():
        if key in hf and hf[key] != value:
            raise LoadError(f"{cfg_path} says {key} = {hf[key]!r}, {path} has {value}: they do not belong together")
    n_embd = got["n_embd"]
    n_head = hf.get("n_head")
    if n_head is None and n_embd % 64 == 0:  # GPT-2's heads are 64 wide in all four sizes: 768/12, ..., 1600/25
        n_head = n_embd // 64
    if type(n_head) is not int or n_head <= 0 or n_embd % n_head:
        raise LoadError(f"{cfg_path}: n_head = {n_head!r} does not fit n_embd = {n_embd}; put the model's own there")
    prompt = hf.get("nanogrpo_prompt", PROMPT)
    if not (isinstance(prompt, str) and "{question}" in prompt):
        raise LoadError(f"{cfg_path}: nanogrpo_prompt {reprlib.repr(prompt)} lacks {{question}}; fix it or remove it")
    config = GPTConfig(block_size=got.pop("n_positions"), **got, n_head=n_head, bias=True)  # got: the other sizes
    with torch.device("meta"):  # the state dict, checked against a model of shapes only: nothing allocated yet
        ours = {k.removeprefix("transformer."): tuple(t.shape) for k, t in GPT(config).state_dict().items()}
    expected = {k: s[::-1] if k.endswith(CONV1D) else s for k, s in ours.items()}  # {Hugging Face name: shape}
    state = {}
    for name, t in weights.items():
        if name == "lm_head.weight":
            if t.shape != weights["wte.weight"].shape or not torch.equal(t, weights["wte.weight"]):
                raise LoadError(f"{path}: lm_head.weight differs from wte.weight (untied); this model ties them")
            continue
        if name not in expected:
            raise LoadError(f"{path}: unexpected tensor {name!r}; this is not GPT-2 (or not in Hugging Face's layout)")
        if tuple(t.shape) != expected[name]:
            raise LoadError(f"{path}: {name} has shape {tuple(t.shape)}, not {expected[name]}; it is not this GPT-2")
        if not t.is_floating_point():
            raise LoadError(f"{path}: {name} holds {t.dtype} numbers, not floating-point weights; the file is damaged")
        state["transformer." + name] = t.t() if name.endswith(CONV1D) else t  # Conv1D (in, out) -> Linear (out, in)
    missing = [n for n in expected if n != "lm_head.weight" and "transformer." + n not in state]
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as GPT-2
    return config, state, prompt


def _weights_file(path):
    """(weights file, folder for config.json and vocab.json) of a checkpoint, GPT-2's weights or a folder of them."""
    _check_file(path)
    if not os.path.isdir(path):
        return path, os.path.dirname(os.path.abspath(path))
    for name in WEIGHTS:
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name), path
    if any(os.path.isfile(os.path.join(path, name + ".index.json")) for name in WEIGHTS):
        raise LoadError(f"{path} holds sharded weights (*.index.json), not read here; download one model.safetensors")
    raise LoadError(f"{path} is a folder without {' or '.join(WEIGHTS)}; download one (with config.json, vocab.json)")


def load_model(path, device="cpu"):
    """(model in float32 and eval mode on `device`, tokenizer, prompt template) from a checkpoint or GPT-2's files."""
    file, folder = _weights_file(os.fspath(path))
    with open(file, "rb") as f:
        safetensors = file.endswith(".safetensors") or f.read(9)[8:9] == b"{"  # a length, then the JSON header
    obj = read_safetensors(file) if safetensors else _torch_load(file, mmap=True)
    if isinstance(obj, dict) and ("model" in obj or "config" in obj):  # a nanogrpo checkpoint
        config = _check_checkpoint(obj, file)
        state = obj["model"]
        prompt = obj["prompt"]
        ranks = obj.get("tokenizer_ranks")  # the BPE of "words" or GPT-2, checked by _check_checkpoint
        enc = bpe_encoding(obj["tokenizer"], ranks) if ranks else get_tokenizer(obj["tokenizer"], folder)
    elif isinstance(obj, dict) and obj and all(isinstance(t, torch.Tensor) for t in obj.values()):  # GPT-2
        config, state, prompt = _gpt2(obj, folder, file)
        enc = get_tokenizer("gpt2", folder)
    else:
        raise LoadError(f"{file} holds a {type(obj).__name__}, neither a checkpoint nor GPT-2's weights; pick one")
    if config.vocab_size != enc.n_vocab:
        n = config.vocab_size
        raise LoadError(f"{file} has {n} token ids but tokenizer {enc.name!r} has {enc.n_vocab}: use its vocab.json")
    with torch.device(device):
        model = GPT(config)  # built where it will run: on a GPU, the host never holds a copy of the weights
    restore(model, state, file)
    return model.eval(), enc, prompt


def write_safetensors(path, tensors):
    """Write {name: tensor} in read_safetensors' format, flushed to disk: the header's length is padded with spaces to
    a multiple of 8, so each tensor's data starts aligned; its metadata says format "pt", which transformers needs."""
    if sys.byteorder != "little":
        raise OSError(f"cannot write {path}: safetensors files are little-endian, this host is big-endian")
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for t in tensors.values():
            f.write(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # (nbytes,) the raw data
        f.flush()
        os.fsync(f.fileno())


def hf_tokenizer(enc):
    """(vocab {token: id}, merges ["left right"]) of a byte-level BPE Encoding, spelled in gpt2_byte_chars. tiktoken
    merges the adjacent pair whose join has the lowest rank; Hugging Face's BPE the pair listed first in merges. So each
    token of 2+ bytes lists every split into two tokens, in the token's rank order (the usual tiktoken conversion)."""
    ranks = _ranks(enc)
    chars = gpt2_byte_chars()
    spelled = {token: "".join(chars[b] for b in token) for token in ranks}
    vocab = {spelled[token]: i for token, i in ranks.items()}
    vocab[EOT] = enc.eot_token
    merges = []
    for token in sorted(ranks, key=ranks.get):
        splits = [(token[:k], token[k:]) for k in range(1, len(token))]
        splits = sorted((ranks[a], ranks[b], a, b) for a, b in splits if a in ranks and b in ranks)
        merges += [f"{spelled[a]} {spelled[b]}" for _, _, a, b in splits]
    return vocab, merges


def export_hf(ckpt_path, folder):
    """Write `folder` as Hugging Face's GPT-2 (HF_FILES) from a checkpoint or GPT-2's files: transformers'
    GPT2LMHeadModel and GPT2Tokenizer(Fast) load it with this model's logits and token ids; so does load_model.
    `folder` may be new, empty or an earlier export (replaced); anything else in it is refused."""
    folder = os.path.normpath(os.fspath(folder))  # "out/hf/" -> "out/hf": the temp folder goes beside it
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise LoadError(f"{folder} is a file; give a folder to export to")
    others = sorted(set(os.listdir(folder)) - set(HF_FILES)) if os.path.isdir(folder) else []
    if others:  # an earlier export is replaced whole; any other file is the user's
        raise LoadError(f"{folder} holds {others[0]!r}, not written by an export; give a new or empty folder")
    model, enc, prompt = load_model(ckpt_path)
    cfg = model.config
    if not cfg.bias:
        raise LoadError(f"{ckpt_path}: its model has no biases and GPT-2 has; it cannot be exported as GPT-2")
    tensors = {}  # GPT2LMHeadModel's own names; lm_head.weight is wte.weight (tied): not stored, as transformers does
    for name, t in model.state_dict().items():
        if name != "lm_head.weight":
            tensors[name] = t.t().contiguous() if name.endswith(CONV1D) else t  # Linear (out, in) -> Conv1D (in, out)
    eot = enc.eot_token
    config = {key: allowed[0] for key, allowed in GPT2_FIXED.items()}  # gpt2, gelu_new, 1e-5, tied: as _gpt2 reads
    config |= dict(architectures=["GPT2LMHeadModel"], vocab_size=cfg.vocab_size, n_positions=cfg.block_size)
    config |= dict(n_ctx=cfg.block_size, n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=None)
    config |= dict(bos_token_id=eot, eos_token_id=eot, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout
    config["nanogrpo_prompt"] = prompt  # for load_model; transformers keeps an unknown key as an attribute
    vocab, merges = hf_tokenizer(enc)
    byte_level = dict(type="ByteLevel", add_prefix_space=False, trim_offsets=True, use_regex=True)  # GPT2_PAT
    special = dict(id=eot, content=EOT, single_word=False, lstrip=False, rstrip=False, normalized=True, special=True)
    bpe = dict(type="BPE", dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="")
    bpe |= dict(fuse_unk=False, byte_fallback=False, vocab=vocab, merges=merges)
    fast = dict(version="1.0", truncation=None, padding=None, added_tokens=[special], normalizer=None)
    fast |= dict(pre_tokenizer=byte_level, post_processor=None, decoder=byte_level, model=bpe)
    tok_config = dict(tokenizer_class="GPT2Tokenizer", model_max_length=cfg.block_size, add_prefix_space=False)
    tok_config |= dict(bos_token=EOT, eos_token=EOT, unk_token=EOT)
    texts = {"config.json": json.dumps(config, indent=2), "tokenizer_config.json": json.dumps(tok_config, indent=2)}
    texts["vocab.json"] = json.dumps(vocab, ensure_ascii=False)
    texts["merges.txt"] = "#version: 0.2\n" + "".join(m + "\n" for m in merges)  # the header line both readers skip
    texts["tokenizer.json"] = json.dumps(fast, ensure_ascii=False)
    _write_folder(folder, texts, tensors)


def _write_folder(folder, texts, tensors):
    """Write the files {name: text} and model.safetensors as `folder`, all or nothing: into a temp folder beside it
    (named with the PID), each file flushed to disk, then renamed to `folder`; an earlier export there is moved aside
    first (and back if the rename fails), then removed."""
    tmp = f"{folder}.{os.getpid()}.tmp"
    old = f"{folder}.{os.getpid()}.old"
    try:
        os.makedirs(tmp)
        write_safetensors(os.path.join(tmp, "model.safetensors"), tensors)
        for name, text in texts.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        if os.path.isdir(folder):
            os.rename(folder, old)
        os.rename(tmp, folder)
    except OSError as e:
        if os.path.isdir(old) and not os.path.exists(folder):
            os.rename(old, folder)  # the earlier export stays
        raise OSError(f"cannot write {folder} ({e.strerror or e}): pick a writable folder, or free some space") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)  # the earlier export, now replaced


if __name__ == "__main__":  # python checkpoint.py export CKPT DIR
    cli = argparse.ArgumentParser(description="Write a checkpoint as Hugging Face's GPT-2 folder (export_hf).")
    commands = cli.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write DIR: config.json, model.safetensors, the tokenizer's files")
    export.add_argument("ckpt", help="a nanogrpo checkpoint (out/ckpt.pt), or GPT-2's files")
    export.add_argument("dir", help="the folder to write: new, empty, or an earlier export (replaced)")
    args = cli.parse_args()
    try:
        export_hf(args.ckpt, args.dir)
    except (LoadError, OSError) as e:  # a user's error: one line
        die(e)
    print(f"wrote {args.dir}: {', '.join(HF_FILES)}")
