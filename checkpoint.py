"""
checkpoint.py: everything about files. (docstring to write)
"""

import dataclasses
import hashlib
import json
import math
import mmap
import os
import re
import sys

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
    except (OSError, ValueError) as e:  # ValueError: not UTF-8 or not JSON
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


# ----------------------------------------------------------------------------- checkpoints and GPT-2 files
# A nanogrpo checkpoint is a torch.save'd dict: {"model": state_dict, "config": GPTConfig as a dict,
# "tokenizer": its name, "prompt": the prompt template, "digest": sha256 of the weights, **train.py's own keys}.
# It is written atomically and read with weights_only=True (no code is unpickled). GPT-2 in Hugging Face's
# layout differs from this model in three ways, undone while loading: names may lack "transformer.", the four
# Conv1D weights per layer are stored transposed, (in, out), and the files carry the causal-mask buffers
# attn.bias / attn.masked_bias, which are not weights. Departures: a GPT-2 file without config.json gets
# n_head = n_embd // 64 (true of all four GPT-2 sizes; shapes cannot tell n_head); sharded files
# (*.index.json) and big-endian hosts are not supported.

CKPT_KEYS = ("model", "config", "tokenizer", "prompt")
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


def weights_digest(state):
    """sha256 over each tensor's name, dtype, shape and bytes, in name order: a flipped bit changes it."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # (bytes,) the raw data
    return h.hexdigest()


def atomic_save(obj, path):
    """torch.save(obj, path), all or nothing: write path + ".tmp" in the same folder, flush it to the disk,
    then rename it over `path` (atomic). On any failure (a full or read-only disk, Ctrl-C) the temp file is
    removed and the error re-raised, so the previous file at `path` is never damaged."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


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
    state = model.state_dict()
    ranks = None  # {token bytes: id} of GPT-2's BPE, from the Encoding itself
    if name == "gpt2" and isinstance(tokenizer, tiktoken.Encoding):
        ranks = {tokenizer.decode_single_token_bytes(i): i for i in range(tokenizer.eot_token)}
    atomic_save(
        {
            "model": state,
            "config": dataclasses.asdict(model.config),
            "tokenizer": name,
            "prompt": prompt,
            "tokenizer_ranks": ranks,
            "digest": weights_digest(state),
            **extra,
        },
        path,
    )


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
    if "digest" in ckpt and ckpt["digest"] != weights_digest(state):
        raise LoadError(
            f"{path}: its weights do not match the digest saved with them (a flipped bit or a damaged "
            f"disk); use another copy or an earlier checkpoint"
        )
    return cfg


def load_checkpoint(path, mmap=False):
    """The dict save_checkpoint wrote, checked (keys, config, digest); any problem -> LoadError.

    mmap=True maps the file instead of reading it (for big models: the optimizer's state is read only when
    used); then keep the file in place while its tensors are alive (on Windows it cannot be replaced meanwhile).
    """
    ckpt = _torch_load(os.fspath(path), mmap)
    _check_checkpoint(ckpt, path)
    return ckpt


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
    start, tensors = 8 + n, {}
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
    return tensors


def _gpt2_config(weights, folder, path):
    """GPTConfig of GPT-2 weights {Hugging Face name: tensor}: from config.json beside them (checked against the
    shapes) when present, else from the shapes alone with n_head = n_embd // 64."""
    wte, wpe = weights["wte.weight"], weights.get("wpe.weight")
    if wte.dim() != 2 or wpe is None or wpe.dim() != 2:
        raise LoadError(f"{path}: wte.weight or wpe.weight is missing or not a matrix; this is not GPT-2 weights")
    layers = {int(m.group(1)) for m in (re.match(r"h\.(\d+)\.", k) for k in weights) if m}
    got = dict(
        vocab_size=wte.shape[0], n_embd=wte.shape[1], n_positions=wpe.shape[0], n_layer=max(layers, default=-1) + 1
    )
    if got["n_layer"] == 0:
        raise LoadError(f"{path} has no layers (h.0.*); this is not GPT-2 weights")
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
        except (OSError, ValueError) as e:
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
        config, state = _gpt2_config(tensors, folder, file), None  # the state once the model is built
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
    if state is None:  # GPT-2: names and shapes checked against the model just built
        state = _gpt2_state(tensors, model, file)
    restore(model, state, file)
    return model.eval(), enc, prompt
