#!/usr/bin/env bash
# The prepared proof on a GPU machine (issue 28, part 2), within 9.5 minutes: `pytest -m cuda`, the DQN,
# V-trace and env throughput benches, a MinAtar V-trace learning run, and two probes of what bounds them
# (the CPU's raw Atari rate, a DQN update's time on the device and its kernel profile). Figures go to $OUT/figures.json,
# every log to $OUT/logs.tar.gz (at most 8 files come back from the device; these are 2).
#
#     bash bench/device/check.sh [--part NAME]... [--cpu-dry-run [--quick]]
#
# --part runs only the named parts (cuda-tests, dqn, vtrace, env, learning, probe, update, fused), so a failed one can be rerun in
# the time left. --cpu-dry-run runs every part on this machine's CPU with tiny budgets, to find a broken
# script before GPU time is spent; --quick shrinks it further for the suite's test
# (tests/integration/test_device_dry_run.py). The dry run uses the Python
# found first (the venv's) and needs no wheels. On the GPU machine the wheels of bench/device/fetch_wheels.sh
# are installed first from .whl/ (carry it), and rlsup is imported from this tree.
# Without $OUT the results go to a new temporary directory, which is printed.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

profile=gpu
quick=0
parts=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu-dry-run) profile=cpu-dry-run ;;
        --quick) quick=1 ;;
        --part) parts+=("$2"); shift ;;
        *) echo "check.sh: unknown argument $1 (use --part NAME or --cpu-dry-run)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#parts[@]} -gt 0 ] || parts=(cuda-tests dqn vtrace env learning probe update fused)
if [ "$quick" = 1 ]; then
    [ "$profile" = cpu-dry-run ] || { echo "check.sh: --quick goes with --cpu-dry-run" >&2; exit 2; }
    profile=cpu-quick
fi

# Seconds per part on the GPU machine: 535 in all; with the wheels and the merge, under 9.5 of the device's
# 10 minutes a call. Each is the part's time on an H200 machine (2026-11-28) with a margin: cuda-tests 61 s, dqn 154,
# vtrace 50, env at N = 16 and 32 about 50, probe 26, update 31. The learning run stops itself by [job]
# max_wall_s inside its share. The dry run's budgets only catch a hang: its parts take seconds.
declare -A budget=([cuda-tests]=90 [dqn]=175 [vtrace]=55 [env]=55 [learning]=80 [probe]=35 [update]=45 [fused]=120)
if [ "$profile" != gpu ]; then
    budget=([cuda-tests]=120 [dqn]=120 [vtrace]=120 [env]=120 [learning]=120 [probe]=120 [update]=120 [fused]=120)
fi

if [ "$profile" = gpu ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || { echo "check.sh: the wheels in .whl/ did not install" >&2; exit 1; }
    export PYTHONPATH="/tmp/site:$root"
else
    [ "$profile" != gpu ] || echo "check.sh: no wheels in .whl/ (bench/device/fetch_wheels.sh, then carry .whl): using what python3 has" >&2
    export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1

out="${OUT:-$(mktemp -d -t rlsup-device-check-XXXXXX)}"
work="$(mktemp -d -t rlsup-device-work-XXXXXX)"
mkdir -p "$work/logs" "$work/home"
export RLSUP_HOME="$work/home"  # the benches' runs touch no user's jobs

for part in "${parts[@]}"; do
    [ -n "${budget[$part]:-}" ] || { echo "check.sh: no part named $part" >&2; exit 2; }
    echo "== $part (at most ${budget[$part]} s)"
    began=$(date +%s)
    timeout --kill-after=15 "${budget[$part]}" python3 bench/device/check.py part "$part" --profile "$profile" \
        --work "$work" --budget "${budget[$part]}" 2>&1 | tee "$work/logs/$part.log"
    code=${PIPESTATUS[0]}
    printf '%s\t%s\t%s\n' "$part" "$code" "$(($(date +%s) - began))" >>"$work/status.tsv"
done

python3 bench/device/check.py merge --profile "$profile" --work "$work" --out "$out/figures.json"
result=$?
tar -czf "$out/logs.tar.gz" -C "$work" logs status.tsv $(cd "$work" && ls ./*.json ./*.xml ./*.toml 2>/dev/null)
echo "results in $out (figures.json, logs.tar.gz)"
rm -rf "$work"
exit $result
