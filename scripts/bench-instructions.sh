#!/usr/bin/env bash
# Instructions per message under callgrind, for the sides and scenarios of
# benches/throughput/main.rs, and the same for the framework built with
# `--cfg rabbit_backoff_bare` (no metrics or span call sites) beside it: what
# observability costs when no recorder and no subscriber are installed.
#
# Each side and scenario runs twice, with SMALL and LARGE messages; the
# difference of the two totals divided by LARGE - SMALL is the cost of one
# message, with connecting, declaring and consuming cancelled out. Only the
# measured span of a run counts (see `measured_span_starts` in the bench).
#
# With SMALL=0, each run's whole span is divided by its messages instead
# (fixed costs included, the same on every side), and REPS repeats each
# measurement: the framework's acks coalesce by timing, so a side's count
# moves by about 1% from run to run, which the difference of two runs
# multiplies; for a cost of 1–2% compare several whole runs.
#
#   scripts/bench-instructions.sh                      # S1,S2: framework, bare, article
#   SCENARIOS=S1,S2,S3,S4 SIDES=framework,article scripts/bench-instructions.sh
#   SMALL=0 REPS=3 SIDES=framework,bare scripts/bench-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
command -v valgrind >/dev/null || {
    echo "valgrind is missing: apt-get install valgrind" >&2
    exit 1
}

SCENARIOS=${SCENARIOS:-S1,S2}
SIDES=${SIDES:-framework,bare,article}
PREFETCH=${PREFETCH:-50}
SMALL=${SMALL:-2000}
LARGE=${LARGE:-6000}
REPS=${REPS:-1}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

bench_binary() {
    # The path of the throughput bench built in target directory $1.
    CARGO_TARGET_DIR=$1 cargo bench --locked --bench throughput --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "throughput" and m.get("executable"):
        print(m["executable"])'
}

normal=$(bench_binary target)
bare=""
if [[ ,$SIDES, == *,bare,* ]]; then
    bare=$(RUSTFLAGS="--cfg rabbit_backoff_bare" bench_binary target/bare)
fi

# Total instructions of the measured span of one run.
instructions() {
    local binary=$1 side=$2 scenario=$3 n=$4 label=$5
    local file=$OUT/cg.$label.$scenario.$n
    BENCH_PROCESSES=0 BENCH_N=$n BENCH_N_S1=$n BENCH_REPS=1 BENCH_SIDES=$side BENCH_SCENARIOS=$scenario BENCH_PREFETCH=$PREFETCH BENCH_MEMORY=0 \
        valgrind --tool=callgrind --zero-before='*measured_span_starts' --dump-before='*measured_span_ends' \
        --callgrind-out-file="$file.%p" "$binary" --bench >/dev/null 2>&1
    # The first dump, made as the measured span ends, holds its instructions.
    grep -h '^summary:' "$file".*.1 | awk '{ print $2 }'
}

printf '%-4s %-10s %14s\n' scenario side 'instr/msg'
IFS=, read -ra scenarios <<<"$SCENARIOS"
IFS=, read -ra sides <<<"$SIDES"
for scenario in "${scenarios[@]}"; do
    for side in "${sides[@]}"; do
        binary=$normal run_side=$side
        if [[ $side == bare ]]; then
            binary=$bare run_side=framework
        fi
        for ((rep = 1; rep <= REPS; rep++)); do
            small=0
            if ((SMALL > 0)); then
                small=$(instructions "$binary" "$run_side" "$scenario" "$SMALL" "$side.$rep")
            fi
            large=$(instructions "$binary" "$run_side" "$scenario" "$LARGE" "$side.$rep")
            per=$(((large - small) / (LARGE - SMALL)))
            printf '%-4s %-10s %14s\n' "$scenario" "$side" "$per"
        done
    done
done
