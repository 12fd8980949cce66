#!/usr/bin/env bash
# Speed of kakeya side by side with the reference engine, llama.cpp as the npm
# package node-llama-cpp bundles it (a git bundle of its source), on the same
# random-weight bench models (written by tools/make_bench_model.cc).
#
#   scripts/compare-reference.sh [--rounds N] [--threads T] [--types "f16 q8_0 q4_k_m"] [--moe]
#                                [--synthetic] [--mtp] [--long] [--depths 1024,8192,32768]
#
# --types takes any of
#   f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, f32
#       the ~1.25B dense llama of issue #8 in that type (bench-1b-TYPE.gguf);
#   moe-TYPE (TYPE one of the above)
#       the mixture-of-experts bench model of issue #20, qwen3moe: n_embd 1024, 12
#       layers, 16/4 heads, vocab 32000, 64 experts top-8 of FFN 512 (1.31B weights,
#       0.22B read per token; bench-moe-TYPE.gguf);
#   g4moe-TYPE
#       Gemma-4-26B-A4B's shape at 6 layers: n_embd 2816, dense MLP 2112 plus 128
#       experts top-8 of FFN 704, vocab 262144, tied (5.64B weights, 1.36B read per
#       token, 6 GB in Q8_0; bench-g4moe-TYPE.gguf);
#   ds4-TYPE
#       DeepSeek-V4-Flash's layer at reduced size (issue #41, make-bench-model
#       --arch deepseek4): n_embd 1024, 12 layers (compression ratios 0 0 then
#       4 128 alternating), 16 heads of 512 with one key/value head, 64
#       experts top-6 of FFN 512, 3 hash-routed layers, vocab 129280 (1.62B
#       weights, ~0.43 GB read per token in Q8_0; bench-ds4-TYPE.gguf);
#   q35moe-TYPE
#       Qwen3.5-35B-A3B's widths at 8 layers (issue #43, make-bench-model --arch
#       qwen35moe): n_embd 2048, 6 Gated DeltaNet layers and 2 gated attention
#       layers, 64 experts top-8 of FFN 512 and a shared expert, Qwen2's
#       vocabulary (tests/fixtures/tokenizer/ggml-vocab-qwen2.gguf, as Qwen3.5's
#       files carry: so the MTP head's default draft vocabulary applies), an
#       MTP block (2.76B weights, 0.92 GB read per token in Q8_0;
#       bench-q35moe-TYPE-qwen2vocab.gguf).
# The default is the three that issue #8 is judged on; --moe adds the three that
# issue #20 is judged on, moe-q8_0 moe-q4_k_m g4moe-q8_0 (--types "" --moe: only those).
#
# --synthetic adds issue #23's synthetic acceptance (--types "" --synthetic: only
# that): drafts of a 2-layer draft model of the same vocabulary (bench-draft-q8_0,
# n_embd 256, n_ff 768, 4/2 heads) accepted at random so that a verify step
# commits TAU tokens on average, bonus included: Q8_0 and Q4_K_M at block 4
# (3 drafts) with TAU 3, F16 at block 8 with TAU 5. kakeya runs `kakeya bench
# spec --spec draft --synthetic-accept TAU` (plain decoding and the synthetic run
# paired in one process); the reference runs llama-server (built on first use)
# twice, without the draft model and with `--spec-type draft-simple
# --spec-synth-len TAU`, drafting exactly block-1 tokens (--spec-draft-n-min =
# n-max, --spec-draft-p-min 0); both generate the same number of tokens from
# the same prompt, greedy. Each engine's speedup is against its own plain
# decoding in the same round.
#
# --mtp adds issue #43's MTP case the same way (--types "" --mtp: only that):
# q35moe-q8_0's own MTP block at block 2 (one draft) with TAU 1.8, kakeya's
# `bench spec --spec mtp` against the reference's `--spec-type draft-mtp`.
#
# --long adds issue #40's long-context rows (--types "" --long: only those) on
# the dense Q8_0 bench model, at each of --depths positions already in the
# cache (llama-bench's -d): per round, llama-bench -d DEPTHS -p 0 -n 16 -r 1 -fa 1
# with its f16, q8_0 and q4_0 caches (K and V alike), then right after
# `kakeya bench depth` at the same depths with f16, q8_0, q4_0 and
# kakeya4/kakeya3. The reference fills its cache by a prefill of DEPTH tokens
# (about 30 minutes per cache type at 32k on 2 cores: --depths 1024,8192 is
# quicker), kakeya with random keys and values (the same
# work for attention: its time does not depend on the numbers). The table
# gives decode tok/s per depth and type, and the codec's decode over the
# reference's best type at that depth.
#
# Everything of the reference (npm tarball, source, build, bench models, raw
# results) lives in $KAKEYA_REF_DIR (default ~/.cache/kakeya-reference),
# outside the repository. Needs npm, git, cmake, ninja, python3, ~10 GB of disk
# (~20 GB with --moe) and, the first time, network access to the npm registry
# and ~15 minutes to build llama-bench on 2 cores (and ~1 minute per dense or
# qwen3moe model, ~3 for the gemma4 one, to write the models).
#
# Each round runs, per model, llama-bench's tg64 and right after it `kakeya
# run` (64 tokens), then llama-bench's pp (-p 4,8,16,128) and right after it
# `kakeya bench verify` (1, 4, 8, 16 rows from an empty cache; then 128 rows
# with --prefill): the measurements compared are taken next to each other, so
# the slow and fast phases of a shared machine's memory (here 34 vs 60 GB/s,
# flipping within minutes) hit both engines alike. A llama-bench failure stops
# the script; a kakeya failure (e.g. an architecture it cannot load) is reported
# and its cells of the table read "-". The table gives medians over rounds, and
# each ratio is the median of the rounds' ratios:
#   decode tok/s   kakeya run -n 64 vs llama-bench tg64
#   cost(L)/cost(1) one forward over L rows / one decode step:
#                  kakeya: bench verify ms(L) / ms(1), logits for all L rows
#                  (what a verify step needs)
#                  llama.cpp: (L / pp_L tok/s) / (1 / tg64 tok/s); its pp runs
#                  compute the last row's logits only, so its L-row cost leaves
#                  out L-1 rows of the output head (per row, a quarter of the
#                  1.25B's matmul work, 15% of the qwen3moe's active weights,
#                  over half of the gemma4's)
#   prefill tok/s  128 rows in one forward, last row's logits only (as both
#                  engines prefill): kakeya bench verify --prefill vs pp128
# Raw results (JSON, and each command's stderr in *.err) go to
# $KAKEYA_REF_DIR/results/<UTC time>/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
scratch=${KAKEYA_REF_DIR:-$HOME/.cache/kakeya-reference}
version=${NODE_LLAMA_CPP_VERSION:-3.22.1}
rounds=3
threads=2
types="f16 q8_0 q4_k_m"
moe_types="moe-q8_0 moe-q4_k_m g4moe-q8_0"
moe=0
synthetic=0
synthetic_cases="q8_0:4:3:draft q4_k_m:4:3:draft f16:8:5:draft"  # type:block:tau:drafter
mtp=0
mtp_cases="q35moe-q8_0:2:1.8:mtp"
synthetic_tokens=128
long=0
depths=1024,8192,32768
long_types="f16 q8_0 q4_0"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --moe) moe=1; shift ;;
    --synthetic) synthetic=1; shift ;;
    --mtp) mtp=1; shift ;;
    --long) long=1; shift ;;
    --depths) depths=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "compare-reference.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$moe" = 1 ]; then types="$types $moe_types"; fi
types=$(echo "$types" | xargs)  # one space between types
spec_cases=""
[ "$synthetic" = 0 ] || spec_cases="$synthetic_cases"
[ "$mtp" = 0 ] || spec_cases="$spec_cases $mtp_cases"
if [ -z "$types" ] && [ -z "$spec_cases" ] && [ "$long" = 0 ]; then
  echo "compare-reference.sh: no --types to run" >&2
  exit 2
fi
case "$scratch/" in
  "$repo"/*) echo "KAKEYA_REF_DIR ($scratch) must be outside the repository" >&2; exit 2 ;;
esac

# The bench model of a --types value: its file, and make-bench-model's flags.
type_of() {  # the weight type of a --types value, e.g. moe-q4_k_m -> Q4_K_M
  local base
  case "$1" in
    moe-*|g4moe-*|q35moe-*) base=${1#*moe-} ;;
    ds4-*) base=${1#ds4-} ;;
    *) base=$1 ;;
  esac
  case "$base" in
    f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|f32) echo "$base" | tr '[:lower:]' '[:upper:]' ;;
    *) return 1 ;;
  esac
}
model_file() {
  case "$1" in
    q35moe-*) echo "$scratch/models/bench-$1-qwen2vocab.gguf" ;;
    moe-*|g4moe-*|ds4-*) echo "$scratch/models/bench-$1.gguf" ;;
    *) echo "$scratch/models/bench-1b-$1.gguf" ;;
  esac
}
model_flags() {
  case "$1" in
    moe-*) echo "--arch qwen3moe --embd 1024 --layers 12 --heads 16 --kv-heads 4 --vocab 32000" \
                "--experts 64 --experts-used 8 --ff-exp 512 --type $(type_of "$1")" ;;
    g4moe-*) echo "--arch gemma4 --type $(type_of "$1")" ;;
    ds4-*) echo "--arch deepseek4 --type $(type_of "$1")" ;;
    q35moe-*) echo "--arch qwen35moe --type $(type_of "$1")" \
                   "--vocab-from $repo/tests/fixtures/tokenizer/ggml-vocab-qwen2.gguf" ;;
    *) echo "--type $(type_of "$1") --shape 1b" ;;
  esac
}
synthetic_types=""
for c in $spec_cases; do synthetic_types="$synthetic_types ${c%%:*}"; done
for t in $types; do
  type_of "$t" >/dev/null || { echo "compare-reference.sh: unknown type $t (see --help)" >&2; exit 2; }
done
mkdir -p "$scratch/models" "$scratch/results"

# 1. The reference: source from the npm package's git bundle, built once.
llama_bench=$scratch/llama.cpp/build/bin/llama-bench
if [ ! -x "$llama_bench" ]; then
  cd "$scratch"
  [ -f "node-llama-cpp-$version.tgz" ] || npm pack --silent "node-llama-cpp@$version" >/dev/null
  tar xzf "node-llama-cpp-$version.tgz" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  rm -rf llama.cpp
  git clone -q package/llama/gitRelease.bundle llama.cpp
  echo "reference: llama.cpp $(tr -d '\n ' < package/llama/llama.cpp.info.json) from node-llama-cpp $version"
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build llama.cpp/build --target llama-bench
fi
llama_server=$scratch/llama.cpp/build/bin/llama-server
if [ -n "$spec_cases" ] && [ ! -x "$llama_server" ]; then
  echo "reference: building llama-server (for --synthetic, --mtp; ~10 minutes on 2 cores after llama-bench)"
  cmake -S "$scratch/llama.cpp" -B "$scratch/llama.cpp/build" -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >/dev/null
  cmake --build "$scratch/llama.cpp/build" --target llama-server
fi

# 2. kakeya (its own build folder) and the bench models (written to .part, then
# renamed, so an interrupted run leaves no truncated model behind).
cmake -S "$repo" -B "$repo/build-compare" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKAKEYA_TESTS=OFF \
  -DKAKEYA_BENCH=OFF >/dev/null
if ! cmake --build "$repo/build-compare" --target kakeya make-bench-model > "$scratch/results/build.log" 2>&1; then
  tail -20 "$scratch/results/build.log" >&2
  echo "compare-reference.sh: building kakeya failed (log: $scratch/results/build.log)" >&2
  exit 1
fi
kakeya=$repo/build-compare/bin/kakeya
draft_model=$scratch/models/bench-draft-q8_0.gguf
if [ "$synthetic" = 1 ] && [ ! -f "$draft_model" ]; then
  "$repo/build-compare/bin/make-bench-model" "$draft_model.part" --type Q8_0 --layers 2 --embd 256 --ff 768 \
    --heads 4 --kv-heads 2
  mv "$draft_model.part" "$draft_model"
fi
long_model_type=""
[ "$long" = 0 ] || long_model_type=q8_0
for t in $types $synthetic_types $long_model_type; do
  m=$(model_file "$t")
  if [ ! -f "$m" ]; then
    # shellcheck disable=SC2046  # the flags are words
    "$repo/build-compare/bin/make-bench-model" "$m.part" $(model_flags "$t")
    mv "$m.part" "$m"
  fi
done

# 3. Alternating runs. ref NAME ARGS: llama-bench; kak NAME ARGS: kakeya; each
# writes $out/NAME.json and $out/NAME.err.
out=$scratch/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
ref() {
  local name=$1; shift
  if ! "$llama_bench" "$@" -t "$threads" -o json > "$out/$name.json" 2> "$out/$name.err"; then
    tail -5 "$out/$name.err" >&2
    echo "compare-reference.sh: llama-bench failed on $m (log: $out/$name.err)" >&2
    exit 1
  fi
}
kak() {
  local name=$1; shift
  if ! "$kakeya" "$@" -t "$threads" --json > "$out/$name.json" 2> "$out/$name.err"; then
    echo "  kakeya $1 failed: $(tail -2 "$out/$name.err" | tr '\n' ' ')(log: $out/$name.err)" >&2
    rm -f "$out/$name.json"
  fi
}
for r in $(seq 1 "$rounds"); do
  for t in $types; do
    m=$(model_file "$t")
    echo "round $r/$rounds: $t" >&2
    ref "ref-tg-$t-$r" -m "$m" -p 0 -n 64 -r 3
    kak "run-$t-$r" run -m "$m" -p "Hello" -n 64 --ignore-eos --temp 0 --spec none
    ref "ref-pp-$t-$r" -m "$m" -p 4,8,16,128 -n 0 -r 3
    kak "verify-$t-$r" bench verify -m "$m" --rows 1,4,8,16 --context 0 --reps 5
    kak "prefill-$t-$r" bench verify -m "$m" --rows 128 --prefill --context 0 --reps 3
  done
done

# Long context (--long): per round, the reference's cache types, then kakeya's.
if [ "$long" = 1 ]; then
  m=$(model_file q8_0)
  for r in $(seq 1 "$rounds"); do
    for c in $long_types; do
      echo "round $r/$rounds: long context, reference $c cache, depths $depths" >&2
      ref "ref-long-$c-$r" -m "$m" -d "$depths" -p 0 -n 16 -r 1 -fa 1 -ctk "$c" -ctv "$c"
    done
    echo "round $r/$rounds: long context, kakeya" >&2
    kak "depth-$r" bench depth -m "$m" --depth "$depths" --cache-types f16,q8_0,q4_0,kakeya4/kakeya3 --rounds 1
  done
fi

# 4. Synthetic acceptance (--synthetic, --mtp): per case, both reference
# servers start once; each round then runs the reference's plain and synthetic
# completions and, right after, kakeya's paired plain and synthetic runs.
if [ -n "$spec_cases" ]; then
  prompt=$out/synthetic-prompt.txt
  printf 'def parse_args(argv):\n    """Parse the command line of the tool."""\n' > "$prompt"
  port=${KAKEYA_REF_PORT:-18473}
  server_pids=()
  stop_servers() {
    for pid in "${server_pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    server_pids=()
  }
  trap stop_servers EXIT
  start_server() {  # start_server NAME PORT ARGS...: llama-server in the background, until /health answers
    local name=$1 p=$2; shift 2
    "$llama_server" --host 127.0.0.1 --port "$p" -t "$threads" -c 1024 -np 1 --no-webui "$@" \
      > "$out/$name.log" 2>&1 &
    server_pids+=($!)
    for _ in $(seq 1 1200); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$p/health', timeout=2)" \
        2>/dev/null && return 0
      if ! kill -0 "${server_pids[-1]}" 2>/dev/null; then
        tail -5 "$out/$name.log" >&2
        echo "compare-reference.sh: llama-server did not start (log: $out/$name.log)" >&2
        exit 1
      fi
      sleep 0.5
    done
    echo "compare-reference.sh: llama-server not ready after 10 minutes (log: $out/$name.log)" >&2
    exit 1
  }
  complete() {  # complete NAME PORT: one greedy completion of the prompt, the response to $out/NAME.json
    local url="http://127.0.0.1:$2/completion"
    if ! python3 - "$prompt" "$synthetic_tokens" "$url" > "$out/$1.json" 2> "$out/$1.err" <<'EOF'
import json, sys, urllib.request
prompt, tokens, url = open(sys.argv[1]).read(), int(sys.argv[2]), sys.argv[3]
body = {"prompt": prompt, "n_predict": tokens, "temperature": 0, "ignore_eos": True, "cache_prompt": False,
        "seed": 1}
request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
print(urllib.request.urlopen(request, timeout=3600).read().decode())
EOF
    then
      tail -3 "$out/$1.err" >&2
      echo "compare-reference.sh: llama-server request failed (log: $out/$1.err)" >&2
      exit 1
    fi
  }
  for c in $spec_cases; do
    IFS=: read -r t block tau drafter <<< "$c"
    m=$(model_file "$t")
    if [ "$drafter" = mtp ]; then
      ref_drafter=(--spec-type draft-mtp) kak_drafter=(--spec mtp)
    else
      ref_drafter=(-md "$draft_model" --spec-type draft-simple) kak_drafter=(--draft "$draft_model" --spec draft)
    fi
    start_server "ref-plain-$t" "$port" -m "$m"
    start_server "ref-synth-$t-$drafter" "$((port + 1))" -m "$m" "${ref_drafter[@]}" \
      --spec-draft-n-max "$((block - 1))" --spec-draft-n-min "$((block - 1))" --spec-draft-p-min 0 \
      --spec-synth-len "$tau"
    complete "warmup-ref-plain-$t" "$port"
    complete "warmup-ref-synth-$t-$drafter" "$((port + 1))"
    for r in $(seq 1 "$rounds"); do
      echo "round $r/$rounds: synthetic $t, $drafter, block $block, tau $tau" >&2
      complete "ref-plain-$t-$drafter-$r" "$port"
      complete "ref-synth-$t-$drafter-$r" "$((port + 1))"
      kak "synth-$t-$drafter-$r" bench spec -m "$m" "${kak_drafter[@]}" --blocks "$block" \
        --synthetic-accept "$tau" -n "$synthetic_tokens" --reps 1 --temp 0 --workload "file:$prompt" \
        --allow-degenerate
    done
    stop_servers
  done
fi

# 5. The tables: the engines side by side on the --types models, then the
# synthetic acceptance cases (--synthetic, --mtp).
[ "$long" = 1 ] || long_types=""
python3 - "$out" "$rounds" "$types" "$spec_cases" "$long_types" <<'EOF'
import json, os, statistics, sys
out, rounds, types, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
long_types = sys.argv[5].split()

def load(name):
    path = f"{out}/{name}.json"
    return json.load(open(path)) if os.path.exists(path) else None

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"

def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")

if types:
    cpu = next((c for t in types if (c := load(f"verify-{t}-1"))), None)
    if cpu:
        where = f"{cpu['cpu']} ({cpu['features']}), roofline {cpu['roofline_gbps']:.1f} GB/s (first round)"
    else:
        where = f"{load(f'ref-tg-{types[0]}-1')[0]['cpu_info']} (kakeya ran on no model)"
    print(f"\ncpu: {where}; medians of {rounds} alternating rounds (ratios: medians of the rounds' "
          f"ratios); raw results in {out}\n")
    rows = []
    for t in types:
        ref_tg, ref_pp, k_dec, k_ms = [], {}, [], {}
        for r in range(1, rounds + 1):
            ref_tg.append(load(f"ref-tg-{t}-{r}")[0]["avg_ts"])
            for e in load(f"ref-pp-{t}-{r}"):
                ref_pp.setdefault(e["n_prompt"], []).append(e["avg_ts"])
            run = load(f"run-{t}-{r}")
            k_dec.append(run["timings"]["decode_tok_s"] if run else None)
            ms = {}
            for name in ("verify", "prefill"):
                for row in (load(f"{name}-{t}-{r}") or {"rows": []})["rows"]:
                    ms[row["n"]] = row["ms"]
            for n in (1, 4, 8, 16, 128):
                k_ms.setdefault(n, []).append(ms.get(n))
        per_round = range(rounds)
        ratio = lambda a, b: None if a is None or b is None else a / b
        dec_ratio = med(ratio(k_dec[i], ref_tg[i]) for i in per_round)
        ref_cost = {n: med((n / ref_pp[n][i]) * ref_tg[i] for i in per_round) for n in (4, 8, 16)}
        k_cost = {n: med(ratio(k_ms[n][i], k_ms[1][i]) for i in per_round) for n in (4, 8, 16)}
        k_pp = [None if ms is None else 128e3 / ms for ms in k_ms[128]]
        pp_ratio = med(ratio(k_pp[i], ref_pp[128][i]) for i in per_round)
        rows.append((t, f"{fmt(med(k_dec), 1)} / {fmt(med(ref_tg), 1)}", fmt(dec_ratio),
                     *[f"{fmt(k_cost[n])} / {fmt(ref_cost[n])}" for n in (4, 8, 16)],
                     f"{fmt(med(k_pp), 1)} / {fmt(med(ref_pp[128]), 1)}", fmt(pp_ratio)))
    table(("type", "decode tok/s k / ref", "ratio", "cost(4)/(1) k / ref", "cost(8)/(1) k / ref",
           "cost(16)/(1) k / ref", "prefill128 tok/s k / ref", "ratio"), rows)

if long_types:
    print(f"\nlong context, bench model Q8_0, decode tok/s (kakeya / reference with -fa 1); medians of "
          f"{rounds} alternating rounds; raw results in {out}\n")
    ref_ts, k_ts = {}, {}  # (depth, type) -> tok/s per round
    for r in range(1, rounds + 1):
        for c in long_types:
            for e in load(f"ref-long-{c}-{r}") or []:
                ref_ts.setdefault((e["n_depth"], c), []).append(e["avg_ts"])
        for e in (load(f"depth-{r}") or {"results": []})["results"]:
            k_ts.setdefault((e["depth"], e["cache_types"]), []).append(e["decode_tok_s"])
    rows = []
    for depth in sorted({d for d, _ in ref_ts} | {d for d, _ in k_ts}):
        ref_best = max((med(ref_ts.get((depth, c), [])) or 0) for c in long_types)
        cells = [f"{fmt(med(k_ts.get((depth, f'{c}/{c}'), [])), 1)} / {fmt(med(ref_ts.get((depth, c), [])), 1)}"
                 for c in long_types]
        codec = med(k_ts.get((depth, "kakeya4/kakeya3"), []))
        rows.append((str(depth), *cells, fmt(codec, 1), fmt(codec / ref_best if codec and ref_best else None)))
    table(("depth", *[f"{c} k / ref" for c in long_types], "kakeya4/kakeya3", "codec / ref's best"), rows)

if cases:
    first = next((k for c in cases if (k := load(f"synth-{'-'.join(c.split(':')[::3])}-1"))), None)
    where = (f"{first['machine']} (kakeya target {first['cpu_target']}), {first['threads']} threads"
             if first else "?")
    print(f"\nsynthetic acceptance on {where}, greedy, both engines against their own plain decoding; "
          f"medians of {rounds} alternating rounds; raw results in {out}\n")
    rows = []
    for case in cases:
        t, block, tau, drafter = case.split(":")
        drafts = int(block) - 1
        k_plain, k_synth, k_speed, k_len, r_plain, r_synth, r_speed, r_len = ([] for _ in range(8))
        for r in range(1, rounds + 1):
            k = load(f"synth-{t}-{drafter}-{r}")
            if k:
                plain = next(x for x in k["results"] if x["method"] == "none")
                synth = next(x for x in k["results"] if x["method"] == drafter)
                k_plain.append(plain["decode_tok_s"]); k_synth.append(synth["decode_tok_s"])
                k_speed.append(synth["speedup"]); k_len.append(synth["mean_accept_len"])
            plain = load(f"ref-plain-{t}-{drafter}-{r}")["timings"]
            synth = load(f"ref-synth-{t}-{drafter}-{r}")["timings"]
            r_plain.append(plain["predicted_per_second"]); r_synth.append(synth["predicted_per_second"])
            r_speed.append(synth["predicted_per_second"] / plain["predicted_per_second"])
            steps = synth.get("draft_n", 0) / drafts
            r_len.append(1 + synth["draft_n_accepted"] / steps if steps else None)
        rows.append((t, drafter, block, tau, f"{fmt(med(k_plain), 1)} / {fmt(med(r_plain), 1)}",
                     f"{fmt(med(k_synth), 1)} / {fmt(med(r_synth), 1)}",
                     f"{fmt(med(k_speed))}x / {fmt(med(r_speed))}x",
                     f"{fmt(med(k_len))} / {fmt(med(r_len))}"))
    table(("type", "drafter", "block", "tau", "plain tok/s k / ref", "synthetic tok/s k / ref", "speedup k / ref",
           "accepted len k / ref"), rows)
EOF
