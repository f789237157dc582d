"""
plumbing/: what a learner may skip. Nothing here is GRPO; train.py and sample.py call it to turn files into models
and back, and to end a user's error in one line. One concept a file:

    files.py       the safe file handling they share: LoadError, atomic writes, temp files a killed writer left
    tokenizer.py   tokenizers (from scratch, GPT-2's vocab.json, a tokenizer.json) and prompt templates
    hf.py          Hugging Face's folders, read: config.json, safetensors, generation_config.json
    checkpoint.py  nanogrpo's checkpoints and a run's out_dir (lock, log, Ctrl-C, resume); load_model, for every file
    cli.py         the command lines' flag types and checks, and one line for a user's error
    export.py      a model written as a Hugging Face folder: python -m plumbing.export CKPT DIR

Imports run down this list: files.py imports nothing of the project; each other file, files above it (and model.py).
"""
