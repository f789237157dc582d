"""
checkpoint.py: everything about files: nanogrpo checkpoints, a run's out_dir, GPT-2's Hugging Face files.

No GRPO here: train.py and sample.py call it to turn files into models and back. One call turns any weights a
user has into a ready model, its tokenizer and its prompt template:
    model, enc, prompt = load_model(path, device)
`path` is a checkpoint written by save_checkpoint, or GPT-2 in Hugging Face's layout: a model.safetensors or
pytorch_model.bin file, or a folder holding one with its config.json and vocab.json (the four GPT-2 sizes are
published that way). Every problem with a file raises LoadError, whose message is one line naming the file and
saying what to change; a failed write raises OSError, also one line.

A nanogrpo checkpoint is a torch.save'd dict: {"model": state_dict, "config": GPTConfig as a dict, "tokenizer":
its name, "tokenizer_ranks": GPT-2's BPE or None, "prompt": the template, **the trainer's keys, "digest"}. The
digest is a sha256 of everything else in the file, so a flipped bit anywhere (weights, reference, optimizer
state, step, arguments) is refused. It is written atomically and read with weights_only=True: no code is
ever unpickled. Every size read from a file is checked against the tensors present before anything is built.

GPT-2 in Hugging Face's layout differs from model.py in three ways, undone while loading: names may lack
"transformer.", the four Conv1D weights per layer are stored transposed, (in, out), and the files carry the
causal-mask buffers attn.bias / attn.masked_bias, which are not weights. Departures: a GPT-2 file without
config.json gets n_head = n_embd // 64 (true of all four GPT-2 sizes; shapes cannot tell n_head); sharded files
(*.index.json) and big-endian hosts are not supported; the out_dir lock needs a POSIX system (elsewhere a run
does not lock its out_dir).
"""

import argparse
import dataclasses
import hashlib
import json
import math
import mmap
import os
import re
import shutil
import sys

try:
    import fcntl  # POSIX file locks: the out_dir lock
except ImportError:  # Windows
    fcntl = None

import tiktoken
import torch

from model import GPT, PROMPT, GPTConfig, bpe_encoding, byte_tokenizer

GET_GPT2 = (
    "run `python -c \"import tiktoken; tiktoken.get_encoding('gpt2')\"` once with network and copy its "
    "cache folder here, naming it in TIKTOKEN_CACHE_DIR, or put GPT-2's vocab.json beside the weights"
)


class LoadError(ValueError):
    """A file (or name) the user gave cannot be used. str(e) is one line that names the file and says what to do."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).splitlines()))


def get_tokenizer(name="bytes", folder=None):
    """A tiktoken.Encoding by name; an unknown name or missing files raise LoadError.

    "bytes": the 256 byte tokens plus <|endoftext|> (id 256), offline.
    "gpt2":  GPT-2's BPE, 50257 ids, <|endoftext|> = 50256. Built offline from `folder`/vocab.json when
             the folder has one (Hugging Face's GPT-2 folders ship it; its ids are the ranks tiktoken uses),
             else tiktoken's own copy, which tiktoken downloads once and caches.
    Departure: a folder's vocab.json is used before tiktoken's cache, so a folder with the model never
    needs the network; both give the same Encoding.
    """
    if name == "bytes":
        return byte_tokenizer()
    if name == "gpt2":
        vocab = os.path.join(folder, "vocab.json") if folder is not None else None
        if vocab is not None and os.path.isfile(vocab):
            return gpt2_from_vocab_json(vocab)
        try:
            return tiktoken.get_encoding("gpt2")
        except (OSError, ValueError, ImportError) as e:  # offline: a network error, which is an OSError
            where = f"{folder} has no vocab.json and " if folder is not None else ""
            raise LoadError(
                f"{where}tiktoken's 'gpt2' files are not available here ({type(e).__name__}); {GET_GPT2}"
            ) from e
    raise LoadError(f"unknown tokenizer {name!r}; choose 'bytes' or 'gpt2'")


def gpt2_byte_chars():
    """GPT-2's table byte -> the character its vocab.json spells that byte with, in GPT-2's id order.

    The 188 printable Latin-1 characters other than space stand for themselves; the other 68 bytes
    (control bytes, space, NBSP, soft hyphen), in byte order, become chr(256), chr(257), ...
    In GPT-2's vocab.json the single-byte tokens have ids 0..255 in exactly this order (" " is 220, "\n" 198).
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + n) for n, b in enumerate(rest)}}


def gpt2_from_vocab_json(path):
    """GPT-2's Encoding from Hugging Face's vocab.json ({token spelled in GPT-2's characters: id}), offline.

    BPE ranks are the ids (GPT-2 numbered its merges in the order it learned them, which is what tiktoken
    needs); "<|endoftext|>" is the special token. For GPT-2's own vocab.json this equals tiktoken's "gpt2".
    """
    try:
        with open(path, encoding="utf-8") as f:
            vocab = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not UTF-8 or not JSON; or nested too deeply
        raise LoadError(f"cannot read {path} ({type(e).__name__}); download GPT-2's vocab.json again") from e
    if not (isinstance(vocab, dict) and all(isinstance(i, int) for i in vocab.values())):
        raise LoadError(f"{path} is not a vocabulary ({{token: id}}); download GPT-2's vocab.json again")
    if "<|endoftext|>" not in vocab:
        raise LoadError(f"{path} has no <|endoftext|> token; download GPT-2's vocab.json again")
    eot = vocab.pop("<|endoftext|>")
    byte_of = {c: b for b, c in gpt2_byte_chars().items()}
    ranks = {}
    for token, i in vocab.items():
        if not token or any(c not in byte_of for c in token):
            raise LoadError(
                f"{path}: token {token!r} is not spelled in GPT-2's byte characters; this is not a GPT-2 vocab.json"
            )
        ranks[bytes(byte_of[c] for c in token)] = i
    if sorted(ranks.values()) != list(range(len(ranks))) or eot != len(ranks) or len(ranks) != len(vocab):
        raise LoadError(
            f"{path}: ids must be 0..{len(vocab) - 1} once each and <|endoftext|> the next one; "
            f"download GPT-2's vocab.json again"
        )
    if any(bytes([b]) not in ranks for b in range(256)):
        raise LoadError(f"{path} lacks some of the 256 single-byte tokens; this is not a GPT-2 vocab.json")
    return bpe_encoding("gpt2", ranks)  # eot == len(ranks), checked above


# ----------------------------------------------------------------------------- nanogrpo checkpoints

CKPT_KEYS = ("model", "config", "tokenizer", "prompt", "digest")
# what a resume reads besides the model, and its type ("ref" is a state dict, or None when beta == 0)
TRAIN_KEYS = {"step": int, "task": str, "args": dict, "optimizer": dict, "log_bytes": int, "ref": (dict, type(None))}
# nanoGPT's resume rule: a resumed run keeps the checkpoint's settings, except these (--data may move: train.py
# checks its content)
RESUMABLE = (
    "lr",
    "steps",
    "eval_every",
    "micro_batch",
    "device",
    "dtype",
    "compile",
    "decode",
    "data",
    "out_dir",
    "init_from",
)
TOKENIZERS = ("bytes", "gpt2")
SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # stored (in, out)
# the settings of a Hugging Face config.json that this model can honour (key: the values allowed)
GPT2_FIXED = {
    "model_type": ("gpt2",),
    "activation_function": ("gelu_new", "gelu_pytorch_tanh"),
    "layer_norm_epsilon": (1e-5,),
    "scale_attn_weights": (True,),
    "scale_attn_by_inverse_layer_idx": (False,),
    "tie_word_embeddings": (True,),
    "add_cross_attention": (False,),
}


def digest(ckpt):
    """sha256 of every key of a checkpoint but "digest": tensors by dtype, shape and bytes, dicts in key order,
    other values by type and repr. A flipped bit anywhere in the file changes it."""
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
    """torch.save(obj, path), all or nothing: write a temp file named with this process's id in the same folder,
    flush it to the disk, then rename it over `path` (atomic). On any failure (a full or read-only disk, Ctrl-C)
    the temp file is removed, so the previous file at `path` is intact; a failed write raises a one-line OSError."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch's writer reports a full disk as a RuntimeError
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0][:120]
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
        raise OSError(
            f"cannot write {path} ({why}; {free / 1e6:.0f} MB free on its disk): free some space or "
            f"pick another folder; the previous file there is intact"
        ) from e
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def save_checkpoint(path, model, tokenizer, prompt=PROMPT, **extra):
    """Write a self-describing checkpoint: load_model(path) rebuilds the model, tokenizer and prompt from it.

    tokenizer: the Encoding (or its name); `extra`: the trainer's own keys (optimizer, step, args, ...).
    GPT-2's BPE ranks travel inside the checkpoint (about 0.6 MB), so that loading it needs no vocab.json.
    """
    model = getattr(model, "_orig_mod", model)  # a torch.compile wrapper keeps the module here
    name = getattr(tokenizer, "name", tokenizer)
    if name not in TOKENIZERS:
        raise ValueError(f"tokenizer {name!r} cannot be rebuilt from a checkpoint; use one of {TOKENIZERS}")
    if not (isinstance(prompt, str) and "{question}" in prompt):
        raise ValueError("the prompt template must be a str holding '{question}'")
    clash = set(extra) & {*CKPT_KEYS, "digest", "tokenizer_ranks"}
    if clash:
        raise ValueError(f"extra keys {sorted(clash)} would overwrite the checkpoint's own")
    ranks = None  # {token bytes: id} of GPT-2's BPE, from the Encoding itself
    if name == "gpt2" and isinstance(tokenizer, tiktoken.Encoding):
        ranks = {tokenizer.decode_single_token_bytes(i): i for i in range(tokenizer.eot_token)}
    config = dataclasses.asdict(model.config)
    ckpt = dict(model=model.state_dict(), config=config, tokenizer=name, prompt=prompt, tokenizer_ranks=ranks, **extra)
    atomic_save({**ckpt, "digest": digest(ckpt)}, path)


def _check_file(path):
    """The file exists and is not empty, else LoadError."""
    if not os.path.exists(path):
        raise LoadError(
            f"{path}: no such file or folder; give a checkpoint written by save_checkpoint, "
            f"a GPT-2 model.safetensors or pytorch_model.bin, or a folder holding one"
        )
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise LoadError(f"{path} is empty (0 bytes): it was cut short or never written; save or download it again")


def _torch_load(path, mmap=False):
    """torch.load without unpickling code; any failure -> LoadError. mmap: map a zip-format file instead of
    reading it (only the tensors used are ever read; the returned tensors then share the file's pages)."""
    _check_file(path)
    try:
        with open(path, "rb") as f:
            zipped = f.read(4) == b"PK\x03\x04"  # torch's format since 1.6; older files cannot be mapped
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and zipped)
    except MemoryError:
        raise
    except Exception as e:  # garbage raises anything from UnpicklingError to IndexError or KeyError
        raise LoadError(
            f"cannot read {path} ({type(e).__name__}: {str(e)[:80]}); it is damaged, cut short or "
            f"not a checkpoint: save or download it again"
        ) from e


def _check_checkpoint(ckpt, path):
    """The GPTConfig of a sound nanogrpo checkpoint (keys, config, tokenizer, prompt, digest), else LoadError."""
    if not isinstance(ckpt, dict):
        raise LoadError(
            f"{path} holds a {type(ckpt).__name__}, not a nanogrpo checkpoint; "
            f"pick a file written by save_checkpoint (train.py's ckpt.pt)"
        )
    missing = [k for k in CKPT_KEYS if k not in ckpt]
    if missing:
        raise LoadError(
            f"{path} is not a nanogrpo checkpoint (it lacks {', '.join(missing)}); "
            f"pick a file written by save_checkpoint (train.py's ckpt.pt)"
        )
    state, config = ckpt["model"], ckpt["config"]
    if not (isinstance(state, dict) and state and all(isinstance(t, torch.Tensor) for t in state.values())):
        raise LoadError(f"{path}: its 'model' is not a state dict of tensors; the file is damaged")
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    cfg = GPTConfig(**config) if isinstance(config, dict) and set(config) <= fields else None
    sizes = [getattr(cfg, k, None) for k in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd")]
    if cfg is None or not all(type(s) is int and s > 0 for s in sizes) or cfg.n_embd % cfg.n_head:
        raise LoadError(
            f"{path}: its 'config' {config!r:.100} is not a GPTConfig; the file is damaged or from another program"
        )
    if ckpt["tokenizer"] not in TOKENIZERS or not (isinstance(ckpt["prompt"], str) and "{question}" in ckpt["prompt"]):
        raise LoadError(
            f"{path}: its tokenizer {ckpt['tokenizer']!r:.40} or prompt template {ckpt['prompt']!r:.60} "
            f"is unknown; the file is damaged or from another program"
        )
    try:
        intact = ckpt["digest"] == digest(ckpt)
    except (RecursionError, TypeError, ValueError, RuntimeError):  # nested too deeply, or not plain data
        intact = False
    if not intact:
        raise LoadError(
            f"{path}: its content does not match the digest saved with it (a flipped bit, a damaged disk, or an "
            f"earlier nanogrpo's file); use another copy or an earlier checkpoint"
        )
    if cfg.n_layer > len(state):  # each layer has tensors of its own: an absurd n_layer is refused unbuilt
        raise LoadError(f"{path}: its config has {cfg.n_layer} layers but the file only {len(state)} tensors")
    with torch.device("meta"):  # shapes only: nothing is allocated, whatever the config says
        want = {k: tuple(t.shape) for k, t in GPT(cfg).state_dict().items()}
    got = {k: tuple(t.shape) for k, t in state.items()}
    for k in sorted(want.keys() | got.keys()):
        if want.get(k) != got.get(k):
            raise LoadError(
                f"{path}: its config does not fit its tensors ({k}: {got.get(k)} in the file, "
                f"{want.get(k)} for {cfg}); the file is damaged or from another program"
            )
    return cfg


def load_checkpoint(path, mmap=False, resume=False):
    """The dict save_checkpoint wrote, checked (keys, config, digest, shapes); any problem -> LoadError.

    resume=True also requires train.py's state (TRAIN_KEYS, each of its type). mmap=True maps the file instead of
    reading it; then keep the file in place while its tensors are alive (on Windows it cannot be replaced meanwhile).
    """
    ckpt = _torch_load(os.fspath(path), mmap)
    _check_checkpoint(ckpt, path)
    bad = [k for k, kind in TRAIN_KEYS.items() if not isinstance(ckpt.get(k, ...), kind)]
    if resume and bad:
        raise LoadError(
            f"{path} holds a model but no training state to resume ({bad[0]} is missing or of the wrong "
            f"type); start a fresh run from it with --init_from {path}"
        )
    return ckpt


def cached(path, key):
    """The checkpoint at `path` if it is sound and was saved with key=`key` (a cache entry), else None."""
    try:
        ckpt = load_checkpoint(path)
    except LoadError:
        return None
    return ckpt if ckpt.get("key") == key else None


def resume(parser, path):
    """(args, checkpoint) of a resumed run: the checkpoint at `path` (LoadError if it cannot be resumed) and its
    settings, with the flags typed now overriding them: nanoGPT's rule. A typed flag may change only the settings
    in RESUMABLE; one that would change another setting raises LoadError, naming it."""
    ckpt = load_checkpoint(path, resume=True)
    args = parser.parse_args(namespace=argparse.Namespace(**ckpt["args"]))  # typed flags override saved ones
    for k, v in ckpt["args"].items():
        if k not in RESUMABLE and getattr(args, k) != v:
            raise LoadError(
                f"--{k} {getattr(args, k)} differs from {path}'s {v}; a resumed run keeps it (drop the flag)"
            )
    return args, ckpt


def restore(module, state, path):
    """module.load_state_dict(state), or LoadError when the shapes do not fit or a weight is not finite."""
    try:
        module.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError, AttributeError) as e:  # another size, or not a state dict
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        why = lines[1] if len(lines) > 1 else lines[0] if lines else type(e).__name__  # the first problem named
        raise LoadError(
            f"{path} does not fit this model ({why[:160]}); match --n_layer/--n_embd/--n_head/--block_size"
        ) from e
    # a sum is finite iff every element is (NaN and inf propagate; weights never reach float32's 3e38): no
    # weight-sized temporaries, one number per tensor, one device sync
    sums = [t.detach().sum(dtype=torch.float32) for t in module.state_dict().values() if t.is_floating_point()]
    if sums and not torch.isfinite(torch.stack(sums)).all():  # (n_tensors,) sums
        raise LoadError(f"{path} holds non-finite weights (NaN or inf); it is damaged: use another copy")


# ----------------------------------------------------------------------------- a run's out_dir


class RunDir:
    """The out_dir of one training run: ckpt.pt, warmstart.pt (the cached warm start) and metrics.jsonl.

    The writer (rank 0) holds an OS lock on out_dir/run.lock for the run, so a second run on the same out_dir
    ends in one line instead of interleaving logs and overwriting checkpoints; the OS drops the lock when the
    process ends, however it ends. A fresh run (resume=False) removes an old ckpt.pt: it can never be resumed
    into another run's state."""

    def __init__(self, path, resume, writer=True):
        self.path, self.writer = path, writer
        self.ckpt, self.warm, self.metrics = (
            os.path.join(path, n) for n in ("ckpt.pt", "warmstart.pt", "metrics.jsonl")
        )
        if not writer:
            return
        try:
            os.makedirs(path, exist_ok=True)
            self._lock = open(os.path.join(path, "run.lock"), "a")  # open for the run: the lock lives with it
        except OSError as e:
            raise OSError(f"cannot write in --out_dir {path} ({e.strerror}); pick another folder") from e
        try:
            if fcntl is not None:
                fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise OSError(f"--out_dir {path} is in use by another run; wait for it to end or pick another") from e
        if not resume and os.path.exists(self.ckpt):
            os.remove(self.ckpt)

    def check_space(self, num_params, ref):
        """OSError (one line) unless the disk has room for what the run writes, in float32: a checkpoint (weights,
        the reference if `ref`, AdamW's two moments), its temp copy while it is written, and the warm start."""
        need, free = 4 * num_params * (2 * (4 if ref else 3) + 1), shutil.disk_usage(self.path).free
        if free < need:
            raise OSError(
                f"--out_dir {self.path} has {free / 1e6:.0f} MB free, but this run writes about "
                f"{need / 1e6:.0f} MB; free some space or pick another"
            )

    def open_log(self, nbytes):
        """Keep metrics.jsonl's first nbytes, what the checkpoint covers (a fresh run: 0): what a crash wrote after
        the last checkpoint goes, so that the resumed run's log equals the uninterrupted run's."""
        size = os.path.getsize(self.metrics) if os.path.isfile(self.metrics) else 0
        if size < nbytes:
            raise LoadError(
                f"{self.metrics} is shorter than when {self.ckpt} was written; restore it or start a fresh run"
            )
        with open(self.metrics, "a") as f:
            f.truncate(nbytes)

    def log(self, record, show=()):
        """Append one record to metrics.jsonl as strict JSON (a non-finite float becomes null) and print its `show`
        keys on one line; only the writer (rank 0) does either."""
        if self.writer:
            record = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}
            with open(self.metrics, "a") as f:
                f.write(json.dumps(record) + "\n")
            print(
                " ".join(f"{k} {record[k]:.4g}" if isinstance(record[k], float) else f"{k} {record[k]}" for k in show)
            )

    def log_bytes(self):
        return os.path.getsize(self.metrics)


# ----------------------------------------------------------------------------- GPT-2 in Hugging Face's layout


def read_safetensors(path):
    """{name: tensor} of a .safetensors file, as views into ONE copy-on-write memory map of the file.

    Format: 8 bytes little-endian header length N; N bytes of JSON {name: {"dtype": "F32", "shape": [...],
    "data_offsets": [begin, end]}, "__metadata__": {...}}; then the raw little-endian data, offsets counted
    from its first byte. Every entry is checked against the file; any problem -> LoadError. Nothing is copied:
    pages are read from the disk when a tensor is used (a tensor not aligned to its item size is copied).
    """
    if sys.byteorder != "little":
        raise LoadError(f"{path}: safetensors files are little-endian; this big-endian host cannot read them here")
    _check_file(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n > min(size - 8, 100_000_000):
                raise LoadError(
                    f"{path}: its header length ({n} bytes) does not fit in the file ({size} bytes); "
                    f"it is cut short or not a safetensors file: download it again"
                )
            header = json.loads(f.read(n).decode("utf-8"))
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # private: writes never reach the file
    except (OSError, ValueError, RecursionError) as e:  # ValueError: the header is not UTF-8 JSON
        if isinstance(e, LoadError):
            raise
        raise LoadError(f"cannot read {path} as safetensors ({type(e).__name__}); download it again") from e
    if not isinstance(header, dict):
        raise LoadError(f"{path}: its header is not a JSON object; this is not a safetensors file")
    data = torch.frombuffer(buf, dtype=torch.uint8)  # (size,) the whole file, mapped
    start, tensors, spans = 8 + n, {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        info = info if isinstance(info, dict) else {}
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not (
            isinstance(shape, list)
            and all(type(d) is int and d >= 0 for d in shape)
            and isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise LoadError(f"{path}: the header entry of {name!r} is malformed; download the file again")
        dtype = SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise LoadError(
                f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}, which is not read here "
                f"({'/'.join(SAFETENSORS_DTYPES)}); convert the file to F32, F16 or BF16"
            )
        begin, end = start + offsets[0], start + offsets[1]
        if end > size:
            raise LoadError(
                f"{path}: tensor {name!r} ends at byte {end} but the file has {size}; "
                f"the file is cut short: download it again"
            )
        need = math.prod(shape) * dtype.itemsize
        if end - begin != need:
            raise LoadError(
                f"{path}: tensor {name!r} has {end - begin} bytes, not the {need} its shape {shape} "
                f"and dtype {info['dtype']} need; the file is damaged"
            )
        raw = data[begin:end]  # (nbytes,) uint8 view
        tensors[name] = (raw.clone() if begin % dtype.itemsize else raw).view(dtype).reshape(shape)
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise LoadError(f"{path}: tensors {a!r} and {b!r} share bytes; the file is damaged: download it again")
    return tensors


def _gpt2_config(weights, folder, path):
    """GPTConfig of GPT-2 weights {Hugging Face name: tensor}: from config.json beside them (checked against the
    shapes) when present, else from the shapes alone with n_head = n_embd // 64."""
    wte, wpe = weights["wte.weight"], weights.get("wpe.weight")
    if wte.dim() != 2 or wpe is None or wpe.dim() != 2:
        raise LoadError(f"{path}: wte.weight or wpe.weight is missing or not a matrix; this is not GPT-2 weights")
    layers = {int(m.group(1)) for m in (re.match(r"h\.(\d{1,9})\.", k) for k in weights) if m}
    if not layers or layers != set(range(len(layers))):  # so n_layer is at most the number of tensors present
        raise LoadError(f"{path}: its layers are not h.0 .. h.N without gaps; this is not GPT-2 weights")
    got = dict(vocab_size=wte.shape[0], n_embd=wte.shape[1], n_positions=wpe.shape[0], n_layer=len(layers))
    fc = weights.get("h.0.mlp.c_fc.weight")
    if fc is not None and tuple(fc.shape) == (4 * got["n_embd"], got["n_embd"]):  # (out, in): not Conv1D's (in, out)
        raise LoadError(
            f"{path} holds this model's own bare state dict (nn.Linear layout, no config), not GPT-2 in "
            f"Hugging Face's layout; load it with restore() into a model of its size, or save it with "
            f"save_checkpoint"
        )
    hf, cfg_path = {}, os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        try:
            with open(cfg_path, encoding="utf-8") as f:
                hf = json.load(f)
        except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deeply
            raise LoadError(
                f"cannot read {cfg_path} ({type(e).__name__}); download it again or remove it "
                f"(the shapes of {path} then give the config)"
            ) from e
        if not isinstance(hf, dict):
            raise LoadError(f"{cfg_path} is not a JSON object; download it again or remove it")
    for key, allowed in {**GPT2_FIXED, "n_inner": (None, 4 * got["n_embd"])}.items():
        if key in hf and hf[key] not in allowed:
            raise LoadError(
                f"{cfg_path} sets {key} = {hf[key]!r}; this GPT-2 implements only {allowed}, "
                f"so it cannot run this model"
            )
    for key, value in got.items():
        if key in hf and hf[key] != value:
            raise LoadError(
                f"{cfg_path} says {key} = {hf[key]!r} but the weights in {path} have {value}; "
                f"the two files do not belong together"
            )
    n_embd, n_head = got["n_embd"], hf.get("n_head")
    if n_head is None:  # GPT-2's heads are 64 wide in all four sizes: 768/12, 1024/16, 1280/20, 1600/25
        if n_embd % 64:
            raise LoadError(
                f"{path}: n_head cannot be read from the weights and no config.json lies beside "
                f"them; put the model's config.json in {folder}"
            )
        n_head = n_embd // 64
    if type(n_head) is not int or n_head <= 0 or n_embd % n_head:
        raise LoadError(f"{cfg_path}: n_head = {n_head!r} does not divide n_embd = {n_embd}; download it again")
    return GPTConfig(
        block_size=got["n_positions"],
        vocab_size=got["vocab_size"],
        n_layer=got["n_layer"],
        n_head=n_head,
        n_embd=n_embd,
        bias=True,
    )


def _gpt2_state(tensors, model, path):
    """Hugging Face GPT-2 tensors -> a state dict for `model` (views, no copies): names, Conv1D transposed,
    lm_head checked to be wte. Shapes are checked here, so that errors use the file's own names."""
    expected = {}  # {Hugging Face name: the shape the file must have}
    for ours, t in model.state_dict().items():
        name = ours.removeprefix("transformer.")
        expected[name] = tuple(t.shape[::-1]) if name.endswith(CONV1D) else tuple(t.shape)
    state = {}
    for name, t in tensors.items():
        if name == "lm_head.weight":
            if t.shape != tensors["wte.weight"].shape or not torch.equal(t, tensors["wte.weight"]):
                raise LoadError(
                    f"{path}: lm_head.weight differs from wte.weight (an untied head); this model "
                    f"ties them as GPT-2 does, so it cannot hold these weights"
                )
            continue
        if name not in expected:
            raise LoadError(f"{path}: unexpected tensor {name!r}; this is not GPT-2 (or not in Hugging Face's layout)")
        if tuple(t.shape) != expected[name]:
            raise LoadError(
                f"{path}: {name} has shape {tuple(t.shape)} but {model.config} needs {expected[name]} "
                f"(Hugging Face's layout); the file or its config.json is not this GPT-2"
            )
        if not t.is_floating_point():
            raise LoadError(f"{path}: {name} holds {t.dtype} numbers, not floating-point weights; the file is damaged")
        state["transformer." + name] = t.t() if name.endswith(CONV1D) else t  # Conv1D (in, out) -> Linear (out, in)
    missing = [n for n in expected if n != "lm_head.weight" and "transformer." + n not in state]
    if missing:
        raise LoadError(
            f"{path} lacks {missing[0]} ({len(missing)} tensors missing); the file is incomplete: download it again"
        )
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as GPT-2
    return state


def _gpt2_names(tensors, path):
    """Drop the optional "transformer." prefix and the causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias)."""
    out = {}
    for name, t in tensors.items():
        short = name.removeprefix("transformer.")
        if re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", short):  # a mask, not the c_attn bias
            continue
        if short in out:
            raise LoadError(f"{path} holds {short!r} twice (with and without 'transformer.'); the file is damaged")
        out[short] = t
    if "wte.weight" not in out:
        raise LoadError(
            f"{path} holds no wte.weight; it is neither a nanogrpo checkpoint nor GPT-2 in Hugging Face's layout"
        )
    return out


def _weights_file(path):
    """(the weights file, the folder that may hold config.json and vocab.json) for a file or a folder."""
    _check_file(path)
    if not os.path.isdir(path):
        return path, os.path.dirname(os.path.abspath(path))
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name), path
    if any(os.path.isfile(os.path.join(path, n + ".index.json")) for n in ("model.safetensors", "pytorch_model.bin")):
        raise LoadError(
            f"{path} holds sharded weights (*.index.json), which are not read here; the GPT-2 sizes "
            f"ship as one model.safetensors: download that"
        )
    raise LoadError(
        f"{path} is a folder without model.safetensors or pytorch_model.bin; download one of them "
        f"(with config.json and vocab.json) into it"
    )


def load_model(path, device="cpu"):
    """(model, tokenizer, prompt template) from any weights a user has; any problem -> LoadError (one line).

    path: a checkpoint written by save_checkpoint, or GPT-2 in Hugging Face's layout (model.safetensors or
    pytorch_model.bin, or a folder holding one, its config.json and vocab.json; the tokenizer is "gpt2" and
    the prompt template PROMPT). The model comes back in float32, in eval mode, on `device`. safetensors and
    zip-format torch files are mapped, not read: besides the page cache, the host holds the model's weights
    only when device is "cpu" (plus one tensor at a time when converting float16/bfloat16 to float32).
    """
    path = os.fspath(path)
    file, folder = _weights_file(path)
    with open(file, "rb") as f:
        head = f.read(9)
    if file.endswith(".safetensors") or head[8:9] == b"{":  # safetensors: a length, then the JSON header
        obj = read_safetensors(file)
    else:
        obj = _torch_load(file, mmap=True)
    if isinstance(obj, dict) and ("model" in obj or "config" in obj):  # a nanogrpo checkpoint
        config, state, prompt = _check_checkpoint(obj, file), obj["model"], obj["prompt"]
        ranks = obj.get("tokenizer_ranks")
        if obj["tokenizer"] == "gpt2" and isinstance(ranks, dict) and ranks:  # the BPE saved with the checkpoint
            enc = bpe_encoding("gpt2", ranks)
        else:
            enc = get_tokenizer(obj["tokenizer"], folder)
    elif isinstance(obj, dict) and obj and all(isinstance(t, torch.Tensor) for t in obj.values()):  # GPT-2
        tensors = _gpt2_names(obj, file)
        config = _gpt2_config(tensors, folder, file)
        with torch.device("meta"):  # names and shapes checked before the model is built: nothing allocated yet
            state = _gpt2_state(tensors, GPT(config), file)
        enc, prompt = get_tokenizer("gpt2", folder), PROMPT
    else:
        raise LoadError(
            f"{file} holds a {type(obj).__name__} that is neither a nanogrpo checkpoint nor GPT-2 "
            f"weights; pick a file written by save_checkpoint or a GPT-2 model.safetensors"
        )
    if config.vocab_size != enc.n_vocab:
        raise LoadError(
            f"{file}: the model has {config.vocab_size} token ids but tokenizer {enc.name!r} has "
            f"{enc.n_vocab}; use the vocab.json that came with these weights"
        )
    with torch.device(device):
        model = GPT(config)  # built where it will run: on a GPU, the host never holds a copy of the weights
    restore(model, state, file)
    return model.eval(), enc, prompt
