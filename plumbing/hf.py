"""
plumbing/hf.py: Hugging Face's folders, read: config.json, safetensors (one file or shards), generation_config.json,
and the tokenizer files (plumbing/tokenizer.py reads those). checkpoint.load_model, the one entry point for a model
file, calls it for a folder or weights file in Hugging Face's layout; plumbing/export.py writes one. A bad file raises
LoadError: one line that names the file and says what to change. Two kinds of model, by config.json's model_type:
- gpt2: Hugging Face's GPT-2 differs from model.py in three ways, undone while loading: names may lack
  "transformer.", the four Conv1D weights per layer are stored (in, out), and the causal-mask buffers attn.bias /
  attn.masked_bias are stored too. Without config.json, n_head = n_embd // 64 (true of all four GPT-2 sizes). Its
  tokenizer is vocab.json.
- llama, qwen2, qwen3 (Llama-3.x, SmolLM2, Qwen2/2.5, dense Qwen3): model.py's Llama-family block, names mapped by
  LLAMA_NAMES; tokenizer.json; the stop ids of generation_config.json. Refused in one line, naming what was found:
  other model types, sliding windows, RoPE scalings but "llama3", biases on o_proj or the MLP, tokenizers other than
  a byte-level BPE split by a regex.
Departures: big-endian hosts are not supported; weights are held in float32 whatever their file's dtype.
"""

import json
import math
import mmap
import os
import re
import reprlib
import sys

import torch

from model import GPT, GPTConfig, device_memory
from plumbing.files import LoadError, check_file, read_json
from plumbing.tokenizer import PROMPT, TEMPLATES, chat_format, tokenizer_from_json

SAFETENSORS_DTYPES = dict(F64=torch.float64, F32=torch.float32, F16=torch.float16, BF16=torch.bfloat16, BOOL=torch.bool)
SAFETENSORS_DTYPES |= dict(I64=torch.int64, I32=torch.int32, I16=torch.int16, I8=torch.int8, U8=torch.uint8)
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # a Hugging Face folder's weights, beside config.json
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")  # stored (in, out)
# the settings of a Hugging Face config.json that this model can honour: the values allowed
GPT2_FIXED = {"model_type": ("gpt2",), "activation_function": ("gelu_new", "gelu_pytorch_tanh")}
GPT2_FIXED |= {"layer_norm_epsilon": (1e-5,), "scale_attn_weights": (True,), "tie_word_embeddings": (True,)}
GPT2_FIXED |= {"scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}


def read_safetensors(path):
    """{name: tensor}, views into a copy-on-write map of a .safetensors file: 8 bytes little-endian length N, N bytes of
    JSON {name: {"dtype", "shape", "data_offsets": [begin, end] from the data's start}}, the data; all checked."""
    if sys.byteorder != "little":
        raise LoadError(f"{path}: safetensors files are little-endian; this big-endian host cannot read them here")
    check_file(path)
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


def gpt2_weights(tensors, folder, path):
    """(GPTConfig, state dict of views, prompt template) of GPT-2 tensors in Hugging Face's layout, checked in the
    file's own names; the template is config.json's nanogrpo_prompt (export's) if any, else tokenizer.PROMPT."""
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
    hf = read_json(cfg_path, "download it again or remove it") if os.path.isfile(cfg_path) else {}
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
    # the state dict, checked against a model of shapes only: nothing allocated yet
    ours = {k.removeprefix("transformer."): tuple(t.shape) for k, t in meta_model(config, path).state_dict().items()}
    expected = {k: s[::-1] if k.endswith(CONV1D) else s for k, s in ours.items()}  # {Hugging Face name: shape}
    state = {}
    for name, t in weights.items():
        if name == "lm_head.weight":
            if t.shape != weights["wte.weight"].shape or not torch.equal(t, weights["wte.weight"]):
                raise LoadError(f"{path}: lm_head.weight differs from wte.weight (untied); this model ties them")
            continue
        check_weight(path, name, t, expected.get(name), "this is not this GPT-2 (or not in Hugging Face's layout)")
        state["transformer." + name] = t.t() if name.endswith(CONV1D) else t  # Conv1D (in, out) -> Linear (out, in)
    missing = [n for n in expected if n != "lm_head.weight" and "transformer." + n not in state]
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied, as GPT-2
    return config, state, prompt


def check_weight(path, name, t, shape, fix):
    """LoadError unless tensor `name` of `path` is made of floating-point numbers and has the `shape` the model
    expects (None: the model has no such tensor); `fix` says what the file is then."""
    if shape is None:
        raise LoadError(f"{path}: unexpected tensor {name!r}; {fix}")
    if tuple(t.shape) != shape:
        raise LoadError(f"{path}: {name} has shape {tuple(t.shape)}, the model's is {shape}; {fix}")
    if not t.is_floating_point():
        raise LoadError(f"{path}: {name} holds {t.dtype} numbers, not floating-point weights; the file is damaged")


def meta_model(config, path):
    """GPT(config) on the meta device: its shapes and parameter count, nothing allocated; LoadError when a size that
    `path` gave makes a tensor of more than 2^63 bytes, which torch refuses even there ("Storage size ...
    overflowed")."""
    try:
        with torch.device("meta"):
            return GPT(config)
    except (RuntimeError, OverflowError, ValueError, TypeError) as e:  # TypeError: a size that is not an int
        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        raise LoadError(f"{path}: its sizes cannot be built ({why}); the file is damaged or not for this model") from e


def check_memory(config, device, path):
    """LoadError unless `device` can hold the float32 weights of GPT(config) (model.device_memory; where that is
    unknown, no check): sizes from a file are checked before anything is allocated."""
    need = 4 * meta_model(config, path).num_params()
    have = device_memory(device)
    if have is not None and need > have:
        raise LoadError(
            f"{path}: its weights need {need / 2**30:.1f} GiB, {device} has {have / 2**30:.1f} GiB: use a device with "
            "more memory, or a smaller model"
        )


def weights_file(path):
    """(weights files, folder for config.json and the tokenizer, weight map) of a checkpoint, a weights file or a
    folder of them: one file (weight map None), or the shards that model.safetensors.index.json maps tensors to."""
    check_file(path)
    if not os.path.isdir(path):
        return [path], os.path.dirname(os.path.abspath(path)), None
    for name in WEIGHTS:
        if os.path.isfile(os.path.join(path, name)):
            return [os.path.join(path, name)], path, None
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        weight_map = read_json(index, "download it again").get("weight_map")
        if not (isinstance(weight_map, dict) and weight_map and all(isinstance(f, str) for f in weight_map.values())):
            raise LoadError(f"{index} has no weight_map {{tensor: file}}; download it again")
        shards = sorted(set(weight_map.values()))
        if any(os.path.basename(f) != f or not f.endswith(".safetensors") for f in shards):
            raise LoadError(f"{index} names a shard outside its folder or not .safetensors; download it again")
        return [os.path.join(path, f) for f in shards], path, weight_map
    if os.path.isfile(os.path.join(path, "pytorch_model.bin.index.json")):
        raise LoadError(f"{path} holds sharded pytorch_model-*.bin files, not read here; use its .safetensors files")
    raise LoadError(
        f"{path} is a folder without {' or '.join(WEIGHTS)}; download one (with config.json and its tokenizer files)"
    )


def read_shards(files, weight_map):
    """{name: tensor} of every shard, each tensor in the shard `weight_map` {name: file} gives it, none left out."""
    tensors = {}
    for file in files:
        for name, t in read_safetensors(file).items():
            if weight_map.get(name) != os.path.basename(file):
                raise LoadError(f"{file} holds {name!r}, which the index places elsewhere; download the model again")
            tensors[name] = t
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise LoadError(
            f"the shards lack {missing[0]!r} ({len(missing)} tensors), which the index names; download them"
        )
    return tensors


# ---------------- the Llama family (Llama-3.x, Qwen2/2.5, Qwen3, SmolLM2): config.json, weights, tokenizer.json

LLAMA_TYPES = ("llama", "qwen2", "qwen3")
# Hugging Face's names -> model.py's: the block's parts are renamed, the names inside attn and mlp kept
LLAMA_NAMES = [
    (r"model\.embed_tokens\.weight", "transformer.wte.weight"),
    (r"model\.norm\.weight", "transformer.ln_f.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"transformer.h.\1.ln_1.weight"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"transformer.h.\1.ln_2.weight"),
    (r"model\.layers\.(\d+)\.self_attn\.([qkvo]_proj\.(?:weight|bias)|[qk]_norm\.weight)", r"transformer.h.\1.attn.\2"),
    (r"model\.layers\.(\d+)\.mlp\.((?:gate|up|down)_proj\.weight)", r"transformer.h.\1.mlp.\2"),
]


def _finite_positive(value, name, path):
    """`value` when it is a finite number above 0 (an int or float, not a bool), else LoadError naming `name` in `path`.
    A NaN fails both comparisons; an int past the largest float is refused, never converted (OverflowError)."""
    if type(value) not in (int, float) or not 0 < value <= sys.float_info.max:
        raise LoadError(f"{path}: {name} = {reprlib.repr(value)} is not a finite positive number; fix it")
    return value


LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def check_numbers(config, path, eps="norm_eps"):
    """LoadError unless the numbers of a Llama-family GPTConfig that `path` gave are in range, since a NaN, 0 or
    negative one makes the model compute NaN: RMSNorm's ε (`eps`: its name in `path`) and RoPE's θ finite and
    positive, the head width even (RoPE turns pairs of features), and a llama3 scaling's factors finite and positive,
    low_freq_factor != high_freq_factor (the blend divides by their difference), original_max_position_embeddings a
    positive integer. GPT-2's config has none of these numbers."""
    if config.arch != "llama":
        return
    _finite_positive(config.norm_eps, eps, path)
    _finite_positive(config.rope_theta, "rope_theta", path)
    if config.head_size % 2:
        raise LoadError(f"{path}: its head width {config.head_size} is odd; RoPE turns pairs of features: fix it")
    s = config.rope_scaling
    if s is None:
        return
    if not isinstance(s, dict) or set(s) != set(LLAMA3_KEYS):
        raise LoadError(f"{path}: its llama3 RoPE scaling {reprlib.repr(s)} is not {LLAMA3_KEYS}; fix it")
    for key in LLAMA3_KEYS[:3]:
        _finite_positive(s[key], f"RoPE scaling's {key}", path)
    if s["low_freq_factor"] == s["high_freq_factor"]:
        raise LoadError(
            f"{path}: RoPE scaling's low_freq_factor and high_freq_factor are both {s['low_freq_factor']}; the blend "
            "between them divides by their difference: fix it"
        )
    original = s["original_max_position_embeddings"]
    if type(original) is not int or not 0 < original <= sys.float_info.max:
        raise LoadError(
            f"{path}: RoPE scaling's original_max_position_embeddings = {reprlib.repr(original)} is not a positive "
            "integer; fix it"
        )


def _positive(hf, key, cfg_path, default=None):
    value = hf.get(key, default)
    if type(value) is not int or value <= 0:
        raise LoadError(f"{cfg_path}: {key} = {reprlib.repr(value)} is not a positive integer; fix config.json")
    return value


def llama_config(hf, cfg_path):
    """GPTConfig of a Llama-family config.json (model_type llama, qwen2 or qwen3), or LoadError naming what it found
    that model.py does not implement: sliding windows, another RoPE scaling than "llama3", an o_proj or MLP bias,
    another activation than SiLU. RoPE is read as the Hub's files spell it (rope_theta, rope_scaling) and as newer
    transformers writes it (rope_parameters)."""
    kind = hf["model_type"]
    for key, allowed in [("hidden_act", ("silu",)), ("use_sliding_window", (False,)), ("mlp_bias", (False,))]:
        if hf.get(key, allowed[0]) not in allowed:  # absent: transformers' default, the first allowed
            raise LoadError(f"{cfg_path} sets {key} = {reprlib.repr(hf[key])}; nanogrpo implements only {allowed}")
    if kind != "qwen2" and hf.get("attention_bias", False) is not False:  # Qwen2's q/k/v biases are built in
        raise LoadError(f"{cfg_path} sets attention_bias (an o_proj bias too); nanogrpo implements q/k/v biases only")
    if any(t != "full_attention" for t in hf.get("layer_types") or []):
        raise LoadError(
            f"{cfg_path}: its layer_types hold sliding-window attention; nanogrpo implements full attention"
        )
    rope = hf.get("rope_parameters") or {}  # newer transformers: theta and scaling in one dict
    scaling = hf.get("rope_scaling")
    if not isinstance(rope, dict) or not isinstance(scaling or {}, dict):
        raise LoadError(f"{cfg_path}: its rope_parameters or rope_scaling is not a JSON object; fix config.json")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    scaling = scaling or (rope if rope.get("rope_type", "default") != "default" else None)
    kind_of_scaling = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind_of_scaling not in ("default", "llama3"):
        raise LoadError(f"{cfg_path}: RoPE scaling {kind_of_scaling!r}; nanogrpo implements none and 'llama3' only")
    if kind_of_scaling == "llama3":
        if not all(k in scaling for k in LLAMA3_KEYS):
            raise LoadError(f"{cfg_path}: its llama3 RoPE scaling lacks one of {LLAMA3_KEYS}; fix config.json")
        scaling = {k: scaling[k] for k in LLAMA3_KEYS}  # check_numbers checks them
    else:
        scaling = None
    n_embd = _positive(hf, "hidden_size", cfg_path)
    n_head = _positive(hf, "num_attention_heads", cfg_path)
    n_kv_head = _positive(hf, "num_key_value_heads", cfg_path, n_head)
    head_dim = _positive(hf, "head_dim", cfg_path, 128 if kind == "qwen3" else n_embd // n_head)  # as transformers
    eps = _finite_positive(hf.get("rms_norm_eps", 1e-6), "rms_norm_eps", cfg_path)
    tied = hf.get("tie_word_embeddings", False)  # the family's default in transformers
    if n_head % n_kv_head or type(tied) is not bool:
        raise LoadError(f"{cfg_path}: num_key_value_heads or tie_word_embeddings is malformed")
    config = GPTConfig(
        block_size=_positive(hf, "max_position_embeddings", cfg_path),
        vocab_size=_positive(hf, "vocab_size", cfg_path),
        n_layer=_positive(hf, "num_hidden_layers", cfg_path),
        n_head=n_head,
        n_embd=n_embd,
        bias=False,
        arch="llama",
        n_kv_head=n_kv_head,
        head_dim=head_dim,
        mlp_size=_positive(hf, "intermediate_size", cfg_path),
        norm_eps=eps,
        rope_theta=float(_finite_positive(theta, "rope_theta", cfg_path)),
        rope_scaling=scaling,
        qkv_bias=kind == "qwen2",
        qk_norm=kind == "qwen3",
        tie_embeddings=tied,
    )
    check_numbers(config, cfg_path, eps="rms_norm_eps")
    return config


def llama_tensors(model):
    """{Hugging Face's name: tensor} of a Llama-family model, LLAMA_NAMES backwards; a tied lm_head is not stored."""
    out = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_embeddings:
            continue
        theirs = name.replace("transformer.wte.", "model.embed_tokens.").replace("transformer.ln_f.", "model.norm.")
        theirs = theirs.replace("transformer.h.", "model.layers.").replace(".attn.", ".self_attn.")
        out[theirs.replace(".ln_1.", ".input_layernorm.").replace(".ln_2.", ".post_attention_layernorm.")] = t
    return out


def llama_weights(tensors, config, path):
    """The state dict of Llama-family tensors in Hugging Face's names, checked against `config`'s shapes: first its
    layer count against the layers the tensors hold, before a model of shapes is built (layer by layer)."""
    layers = {int(m[1]) for m in (re.match(r"model\.layers\.(\d+)\.", name) for name in tensors) if m}
    if len(layers) != config.n_layer or max(layers, default=-1) != config.n_layer - 1:  # so layers are 0..n_layer-1
        held = f"layers {min(layers)}..{max(layers)} ({len(layers)})" if layers else "no layers"
        raise LoadError(
            f"{path} holds {held}, but config.json says num_hidden_layers = {config.n_layer}: they do not belong "
            "together; download both again"
        )
    expected = {k: tuple(t.shape) for k, t in meta_model(config, path).state_dict().items()}  # nothing allocated
    state = {}
    for name, t in tensors.items():
        ours = next((re.sub(hf_name, mine, name) for hf_name, mine in LLAMA_NAMES if re.fullmatch(hf_name, name)), None)
        if ours == "lm_head.weight" and config.tie_embeddings:
            if "model.embed_tokens.weight" not in tensors or not torch.equal(t, tensors["model.embed_tokens.weight"]):
                raise LoadError(f"{path}: lm_head.weight differs from embed_tokens but config.json ties them; fix it")
            continue
        check_weight(path, name, t, expected.get(ours), "config.json does not describe these weights")
        state[ours] = t
    if config.tie_embeddings and "transformer.wte.weight" in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    missing = sorted(set(expected) - set(state))
    if missing:
        raise LoadError(f"{path} lacks {missing[0]} ({len(missing)} tensors missing); download it again")
    return state


def eos_ids(folder, vocab_size):
    """The ids that end a completion, from generation_config.json's eos_token_id (an id or a list), else
    config.json's; [] where neither says."""
    for name in ("generation_config.json", "config.json"):
        path = os.path.join(folder, name)
        eos = read_json(path, "download it again").get("eos_token_id") if os.path.isfile(path) else None
        ids = [eos] if type(eos) is int else eos
        if ids is None:
            continue
        if not (isinstance(ids, list) and ids and all(type(i) is int and 0 <= i < vocab_size for i in ids)):
            raise LoadError(f"{path}: eos_token_id {reprlib.repr(eos)} is not token ids below {vocab_size}")
        return ids
    return []


def chat_template(folder):
    """The folder's Jinja chat template: chat_template.jinja, else tokenizer_config.json's chat_template (a text, or
    the one named "default" in a list of them); None where it has none."""
    path = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(10**6)  # the longest real ones are a few kB
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    jinja = read_json(cfg_path, "download it again").get("chat_template") if os.path.isfile(cfg_path) else None
    if isinstance(jinja, list):
        jinja = next((t.get("template") for t in jinja if isinstance(t, dict) and t.get("name") == "default"), None)
    return jinja if isinstance(jinja, str) else None


def llama_folder(tensors, folder, path):
    """(GPTConfig, state dict, tokenizer, prompt template) of a Llama-family folder: config.json, the weights and
    tokenizer.json, its stop ids (eos_ids) in the config. The template is config.json's nanogrpo_prompt (an export's),
    else the TEMPLATES entry of its chat format (tokenizer.chat_format), PROMPT where the folder has no chat template,
    None where nanogrpo does not know it."""
    cfg_path = os.path.join(folder, "config.json")
    settings = read_json(cfg_path, "download it again")
    config = llama_config(settings, cfg_path)
    tok_path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(tok_path):
        raise LoadError(f"{folder} has no tokenizer.json; download it beside config.json")
    enc = tokenizer_from_json(tok_path)
    stops = eos_ids(folder, config.vocab_size)
    config.stop_ids = tuple(stops)
    jinja = chat_template(folder)
    prompt = PROMPT if jinja is None else TEMPLATES.get(chat_format(jinja))
    saved = settings.get("nanogrpo_prompt")  # an export's: the run's own template
    if saved is not None and not (isinstance(saved, str) and "{question}" in saved):
        raise LoadError(f"{cfg_path}: nanogrpo_prompt {reprlib.repr(saved)} lacks {{question}}; fix it or remove it")
    prompt = saved or prompt
    return config, llama_weights(tensors, config, path), enc, prompt


def model_type(folder):
    """config.json's model_type in `folder`: "gpt2" (also without a config.json) or one of LLAMA_TYPES; else
    LoadError."""
    cfg_path = os.path.join(folder, "config.json")
    if not os.path.isfile(cfg_path):
        return "gpt2"
    kind = read_json(cfg_path, "download it again or remove it").get("model_type", "gpt2")
    if kind not in ("gpt2", *LLAMA_TYPES):
        raise LoadError(f"{cfg_path}: model_type {kind!r}; nanogrpo reads gpt2, {', '.join(LLAMA_TYPES)}")
    return kind
