#!/usr/bin/env bash
# The GPU check, in one command: the test suite (with its CUDA parametrisations), the sampler benchmark,
# and the default training command, then one summary. Installs nothing: it needs a python3 that already
# has a CUDA build of torch, tiktoken, numpy and pytest, and no network.
#
#     bash tests/gpu_check.sh OUT_DIR          # or: OUT=OUT_DIR bash tests/gpu_check.sh
#
# OUT_DIR gets log.txt (everything printed), summary.txt (the summary, printed last), tests.xml,
# bench.txt, train.txt and run/ (the training run's out_dir: metrics.jsonl, checkpoints).
# Each part has a time budget in seconds, all under 8 minutes together; a part that fails or runs out of
# time is reported as such (a training run stopped by its budget saves and keeps its metrics), and the
# next part still runs. Settings, from the environment:
#     PYTHON        the interpreter (python3)
#     TEST_BUDGET   140   python -m pytest -q $PYTEST_ARGS (PYTEST_ARGS: none, the whole suite)
#     BENCH_BUDGET   40   tests/bench_sample.py --device cuda --B 64 --G 8 --new_tokens 128
#     TRAIN_BUDGET  160   python train.py --G 8 --beta 0.04 --out_dir OUT_DIR/run $TRAIN_FLAGS
#     LLAMA_BUDGET  120   tests/bench_llama.py: one GRPO step of a Qwen2.5-0.5B-shaped model, random weights, in
#                         OUT_DIR/llama (B 64, G 8, 512 new tokens, bf16, --micro_batch $LLAMA_MICRO, default 16)
#     TRAIN_FLAGS         extra flags for that run (none)
#     EXTRA_FLAGS         if set, a second run with these flags too, in OUT_DIR/run2, e.g. "--decode graph"
#     EXTRA_BUDGET   60   its time budget (add it to the 8 minutes)
set -u
OUT=${1:-${OUT:-}}
if [ -z "$OUT" ]; then
    echo "usage: bash tests/gpu_check.sh OUT_DIR   (or OUT=OUT_DIR bash tests/gpu_check.sh)" >&2
    exit 2
fi
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2  # absolute, before moving to the repository root
cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: > "$LOG"
FAILED=()

say() { echo "$*" | tee -a "$LOG"; }

part() {  # part NAME BUDGET COMMAND...: run it within BUDGET seconds, output to the log and OUT/NAME.txt
    local name=$1 budget=$2 t0 t1 rc
    shift 2
    say ""
    say "=== $name (budget ${budget}s): $*"
    t0=$(date +%s.%N)
    # SIGINT first: train.py finishes its step and saves, pytest prints its tally; killed 20 s later if need be
    timeout --signal=INT --kill-after=20 "$budget" "$@" 2>&1 | tee -a "$LOG" > "$OUT/$name.txt"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s.%N)
    WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        STATUS="stopped by its ${budget}s budget after ${WALL}s"
    elif [ "$rc" -ne 0 ]; then
        STATUS="FAILED (exit $rc) after ${WALL}s"
    else
        STATUS="ok in ${WALL}s"
    fi
    [ "$rc" -ne 0 ] && FAILED+=("$name")
    say "=== $name: $STATUS"
    eval "STATUS_${name}=\"\$STATUS\""
}

say "gpu check started $(date -u '+%Y-%m-%d %H:%M:%S') UTC, python: $PY, out: $OUT"
DEVICE=$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')" 2>>"$LOG") || DEVICE=none
if [ "$DEVICE" != cuda ]; then
    say "WARNING: torch finds no CUDA device here ($DEVICE); every part runs on the CPU and proves nothing about GPUs"
fi
[ "$DEVICE" = none ] && DEVICE=cpu

# shellcheck disable=SC2086  # PYTEST_ARGS is a list of arguments
part tests "${TEST_BUDGET:-140}" "$PY" -m pytest -q -p no:cacheprovider -rs --junitxml="$OUT/tests.xml" ${PYTEST_ARGS:-}
part bench "${BENCH_BUDGET:-40}" "$PY" tests/bench_sample.py --device "$DEVICE" --B 64 --G 8 --new_tokens 128 \
    --repeat 3
rm -rf "$OUT/run"
# shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
part train "${TRAIN_BUDGET:-160}" "$PY" train.py --G 8 --beta 0.04 --out_dir "$OUT/run" ${TRAIN_FLAGS:-}
part llama "${LLAMA_BUDGET:-120}" "$PY" tests/bench_llama.py --out "$OUT/llama" --device "$DEVICE" \
    --micro_batch "${LLAMA_MICRO:-16}"
if [ -n "${EXTRA_FLAGS:-}" ]; then
    rm -rf "$OUT/run2"
    # shellcheck disable=SC2086
    part extra "${EXTRA_BUDGET:-60}" "$PY" train.py --G 8 --beta 0.04 --out_dir "$OUT/run2" $EXTRA_FLAGS
fi

# ------------------------------------------------------------------ the summary
OUT="$OUT" STATUS_TESTS="$STATUS_tests" STATUS_BENCH="$STATUS_bench" STATUS_TRAIN="$STATUS_train" \
STATUS_LLAMA="$STATUS_llama" \
STATUS_EXTRA="${STATUS_extra:-}" EXTRA_FLAGS="${EXTRA_FLAGS:-}" TRAIN_FLAGS="${TRAIN_FLAGS:-}" \
"$PY" - > "$OUT/summary.txt" 2>&1 <<'EOF'
import json, os, re
import xml.etree.ElementTree as ET

out = os.environ["OUT"]


def text(name):
    try:
        with open(os.path.join(out, name), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


print("=" * 30, "GPU check summary", "=" * 30)
try:
    import torch
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device (CPU only)"
    print(f"device: {dev}; torch {torch.__version__}, CUDA {torch.version.cuda}")
except Exception as e:  # a broken torch is itself the finding
    print(f"device: torch does not import ({type(e).__name__}: {e})")

tally = [ln for ln in text("tests.txt").splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
print(f"tests: {os.environ['STATUS_TESTS']}; {tally[-1].strip('= ') if tally else 'no pytest tally'}")
try:
    counts = {}
    for case in ET.parse(os.path.join(out, "tests.xml")).iter("testcase"):
        if re.search(r"\[(.*-)?cuda(-.*)?\]", case.get("name", "")):
            kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
            counts[kind] = counts.get(kind, 0) + 1
    print("  cuda-parametrised tests: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none"))
except (OSError, ET.ParseError):
    print("  cuda-parametrised tests: no tests.xml")

print(f"sampler bench (B=64, G=8, 128 new tokens): {os.environ['STATUS_BENCH']}")
for ln in text("bench.txt").splitlines():
    if "tokens/s" in ln or ln.startswith("device"):
        print("  " + ln)


def run_report(label, status, flags, run_dir):
    print(f"{label}: python train.py --G 8 --beta 0.04 --out_dir OUT/{run_dir} {flags}".rstrip() + f": {status}")
    rows = []
    try:
        with open(os.path.join(out, run_dir, "metrics.jsonl")) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        print("  no metrics.jsonl")
        return
    train = [r for r in rows if r.get("kind") == "train"]
    if train:
        last = train[-1]
        dt, reward = sum(r.get("dt", 0) for r in train) / len(train), last.get("reward_mean", float("nan"))
        print(f"  {len(train)} GRPO steps, mean step {dt:.2f} s, last reward {reward:.3f}"
              + "".join(f", {k} {v:.3g}" for k, v in last.items() if "gap" in k and isinstance(v, (int, float))))
    evals = [r for r in rows if r.get("kind") == "eval"]
    if not evals:
        print("  no eval records")
        return
    ks = sorted({int(k.split("@")[1]) for r in evals for k in r if k.startswith("pass@")})
    cols = ["greedy_acc"] + [f"{m}@{k}" for k in (ks[:1] + ks[-1:] if len(ks) > 1 else ks) for m in ("pass", "maj")]
    print("  " + " | ".join(["step"] + cols))
    for r in evals:
        print("  " + " | ".join([str(r.get("step"))] + [f"{r[c]:.3f}" if c in r else "-" for c in cols]))


run_report("training", os.environ["STATUS_TRAIN"], os.environ["TRAIN_FLAGS"], "run")
print(f"Qwen2.5-0.5B-shaped GRPO step (tests/bench_llama.py): {os.environ['STATUS_LLAMA']}")
for ln in text("llama.txt").splitlines():
    if ln.startswith("{") or ln.startswith("wrote"):
        print("  " + ln)
if os.environ["EXTRA_FLAGS"]:
    run_report("second run", os.environ["STATUS_EXTRA"], os.environ["EXTRA_FLAGS"], "run2")
for name, status in [("tests", "STATUS_TESTS"), ("bench", "STATUS_BENCH"), ("train", "STATUS_TRAIN"),
                     ("llama", "STATUS_LLAMA"), ("extra", "STATUS_EXTRA")]:
    if os.environ[status] and not os.environ[status].startswith("ok"):
        print(f"{name} ended: " + " / ".join(ln[:150] for ln in text(name + ".txt").splitlines()[-3:]))
EOF
cat "$OUT/summary.txt" | tee -a "$LOG"
if [ ${#FAILED[@]} -gt 0 ]; then
    say "parts that failed or ran out of time: ${FAILED[*]}"
    exit 1
fi
say "all parts ok"
