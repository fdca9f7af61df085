#!/usr/bin/env bash
# run_all.sh - the GPU test suite in one command, for a machine with a GPU:
#
#   tests/gpu/run_all.sh            (from anywhere; finds the repo from its path)
#
# (a) builds librecap from this repo (meson setup build-gpu -Dtests=disabled,
#     ninja -C build-gpu; meson and ninja may be pip packages only), unless
#     RECAP_LIB names a librecap.so to use instead;
# (b) builds every test program with nvcc into a temporary directory;
# (c) runs each program twice, plain and under
#     LD_PRELOAD=librecap.so RECAP_LOG=<file> RECAP_VERBOSE=1, and checks:
#     both runs exit 0 (each program also checks its own results against a
#     reference), stdout is identical byte for byte (cmp), and check_run.py
#     finds in the log at least one capture event per capture the program
#     made and executable-graph reuse (how = update/delta/reuse) for >= 90% of
#     the instantiations after the first at their site, and on stderr the verbose
#     "recap: capture begin/end site" lines; memory_growth also must not grow
#     under recap by more than 8 MiB beyond the plain run's growth;
#     On a driver with the recapture API (13.3+; the log's start event says),
#     check_run.py also requires recapture for >= 90% of the captures after a
#     site's first and the delta path at sites where few parameters change;
#     before everything else, recapture_conformance (no recap) checks the
#     driver's recapture API against the stand-in's readings: PASS when each
#     matches a stand-in setting (its SETTINGS line is printed), FAIL naming
#     the points no setting models, SKIP on a driver without the API (13.0);
#     capture_semantics (the capture prohibitions and queries a program
#     observes) runs plain and under recap and must print the same; its
#     plain output is compared with capture_semantics.expected (reported);
#     Last, `recap doctor` on this machine and on two of the programs (PASS
#     when it says recap can act; its report goes into the summary), and
#     the wheel carried in dist/ (wheel_check.sh: pip installs it into fresh
#     virtual environments, recap doctor and docs/examples/train.py run
#     under the installed recap; SKIP without a wheel);
# (d) prints one PASS/FAIL/SKIP line per program and a summary line
#     "summary: N passed, N failed, N skipped"; exit 0 only if none failed.
#     When $OUT is set, $OUT/gpu-tests-summary.txt and $OUT/gpu-tests-logs.tar.gz
#     (every program's stdout, stderr, recap log and check output) are written.
#
# A program that cannot run here (a Python package missing) exits 77 and is
# reported SKIP. Environment knobs: NVCC, PYTHON, GPU_ARCH_FLAGS (default
# sm_90 + compute_90 PTX), RUN_TIMEOUT (seconds per run, default 90),
# TIME_BUDGET (seconds for everything, default 500), RECAP_LIB, RUN_ONLY (a
# space-separated list of case names: run only those, e.g.
# RUN_ONLY="nccl_allreduce nccl_memory").
# The upstream lane (upstream_lane.py: other projects' own graph test
# files, plain and under recap) runs only when RUN_ONLY names "upstream";
# RUN_ONLY=upstream runs it alone, after building librecap and nothing else.
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/tests/gpu
PYTHON=${PYTHON:-python3}
if [ -z "${NVCC:-}" ]; then
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
fi
read -ra ARCH_FLAGS <<<"${GPU_ARCH_FLAGS:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90}"
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
TIME_BUDGET=${TIME_BUDGET:-500}
START_SECONDS=$SECONDS

WORK=$(mktemp -d "${TMPDIR:-/tmp}/recap-gpu-tests.XXXXXX")
BIN=$WORK/bin
LOGS=$WORK/logs
mkdir -p "$BIN" "$LOGS"
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

collect_out() {
    [ -n "${OUT:-}" ] || return 0
    mkdir -p "$OUT"
    cp "$SUMMARY" "$OUT/gpu-tests-summary.txt"
    tar czf "$OUT/gpu-tests-logs.tar.gz" -C "$WORK" logs
}

# ---------------------------------------------------------------- environment
say "recap GPU tests: repo $REPO, work dir $WORK"
if command -v nvidia-smi >/dev/null 2>&1; then
    say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"
fi
say "nvcc: $("$NVCC" --version 2>&1 | tail -n 1)"
say "python: $("$PYTHON" --version 2>&1)"

# ---------------------------------------------------------- (a) build librecap
build_librecap() {
    local log=$LOGS/build-librecap.txt
    local -a meson ninja
    if command -v meson >/dev/null 2>&1; then
        meson=(meson)
    else
        meson=("$PYTHON" -m mesonbuild.mesonmain)
    fi
    if command -v ninja >/dev/null 2>&1; then
        ninja=(ninja)
    else
        # meson needs a ninja executable: the pip package's, or a wrapper.
        local ninja_bin
        ninja_bin=$("$PYTHON" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null)
        if [ -z "$ninja_bin" ] || [ ! -x "$ninja_bin" ]; then
            ninja_bin=$WORK/ninja-wrapper/ninja
            mkdir -p "$(dirname "$ninja_bin")"
            printf '#!/bin/sh\nexec %s -m ninja "$@"\n' "$PYTHON" >"$ninja_bin"
            chmod +x "$ninja_bin"
        fi
        export NINJA=$ninja_bin
        PATH=$(dirname "$ninja_bin"):$PATH
        export PATH
        ninja=("$ninja_bin")
    fi
    (
        cd "$REPO" || exit 1
        if [ -f build-gpu/build.ninja ]; then
            "${meson[@]}" setup --reconfigure build-gpu -Dtests=disabled
        else
            "${meson[@]}" setup build-gpu -Dtests=disabled
        fi && "${ninja[@]}" -C build-gpu
    ) >"$log" 2>&1
}

if [ -n "${RECAP_LIB:-}" ]; then
    LIB=$(cd "$(dirname "$RECAP_LIB")" && pwd)/$(basename "$RECAP_LIB")
    say "librecap: using RECAP_LIB=$LIB (not built)"
else
    LIB=$REPO/build-gpu/shim/librecap.so
    if ! build_librecap || [ ! -f "$LIB" ]; then
        say "FAIL  librecap build (meson/ninja); last lines of $LOGS/build-librecap.txt:"
        tail -n 25 "$LOGS/build-librecap.txt" | sed 's/^/      /' | tee -a "$SUMMARY"
        say "summary: 0 passed, 1 failed, 0 skipped"
        collect_out
        exit 1
    fi
    say "librecap: built $LIB ($((SECONDS - START_SECONDS)) s)"
fi
if [ ! -f "$LIB" ]; then
    say "FAIL  librecap: $LIB does not exist"
    say "summary: 0 passed, 1 failed, 0 skipped"
    collect_out
    exit 1
fi
case $LIB in
    *[\ :]*)
        # The dynamic loader splits LD_PRELOAD at spaces and colons: preload
        # through a link in this run's own folder (made by mktemp).
        mkdir -p "$WORK/preload" && ln -s "$LIB" "$WORK/preload/librecap.so"
        case $WORK in
            *[\ :]*) say "FAIL  librecap: TMPDIR holds a space or colon; cannot preload $LIB"
                     say "summary: 0 passed, 1 failed, 0 skipped"; collect_out; exit 1 ;;
        esac
        say "librecap: preloaded through $WORK/preload/librecap.so (its path has a space or colon)"
        LIB=$WORK/preload/librecap.so ;;
esac

# ------------------------------------------------- (b) build the test programs
CUFLAGS=(-O2 -std=c++17 "${ARCH_FLAGS[@]}" -Xcompiler "-ffp-contract=off,-Wall")
declare -A BUILD_STATUS
BUILD_PIDS=()
BUILD_NAMES=()

build_bg() { # name command... : runs the command in the background, output to a log
    local name=$1
    shift
    ("$@") >"$LOGS/build-$name.txt" 2>&1 &
    BUILD_PIDS+=($!)
    BUILD_NAMES+=("$name")
}

build_driver_api() {
    # driver_api.c embeds the fatbin with .incbin, found in the working directory.
    cd "$BIN" &&
        "$NVCC" -fatbin "${ARCH_FLAGS[@]}" -o driver_api_kernels.fatbin "$HERE/driver_api_kernels.cu" &&
        "$NVCC" -O2 -cudart none -Xcompiler -ffp-contract=off,-Wall,-std=gnu11 -I"$HERE" \
            "$HERE/driver_api.c" -o driver_api -lcuda
}

# RUN_ONLY=upstream runs the upstream lane alone: it builds no program.
if [ "${RUN_ONLY:-}" != upstream ]; then
build_bg recapture_conformance "$NVCC" -O2 -cudart none -Xcompiler -Wall,-std=gnu11 -I"$REPO" \
    "$HERE/recapture_conformance.c" -o "$BIN/recapture_conformance" -lcuda -ldl
build_bg runtime_static "$NVCC" "${CUFLAGS[@]}" "$HERE/runtime_static.cu" -o "$BIN/runtime_static"
build_bg runtime_shared "$NVCC" "${CUFLAGS[@]}" -cudart shared "$HERE/runtime_static.cu" -o "$BIN/runtime_shared"
build_bg driver_api build_driver_api
build_bg overlap "$NVCC" "${CUFLAGS[@]}" "$HERE/overlap.cu" -o "$BIN/overlap"
build_bg memory_growth "$NVCC" "${CUFLAGS[@]}" "$HERE/memory_growth.cu" -o "$BIN/memory_growth"
build_bg two_devices "$NVCC" "${CUFLAGS[@]}" "$HERE/two_devices.cu" -o "$BIN/two_devices"
build_bg threads_one_site "$NVCC" "${CUFLAGS[@]}" "$HERE/threads_one_site.cu" -o "$BIN/threads_one_site"
build_bg mem_nodes "$NVCC" "${CUFLAGS[@]}" "$HERE/mem_nodes.cu" -o "$BIN/mem_nodes"
build_bg conditional "$NVCC" "${CUFLAGS[@]}" -I"$HERE" "$HERE/conditional.cu" -o "$BIN/conditional"
build_bg capture_semantics "$NVCC" "${CUFLAGS[@]}" -I"$HERE" "$HERE/capture_semantics.cu" -o "$BIN/capture_semantics"
for i in "${!BUILD_PIDS[@]}"; do
    if wait "${BUILD_PIDS[$i]}"; then
        BUILD_STATUS[${BUILD_NAMES[$i]}]=ok
    else
        BUILD_STATUS[${BUILD_NAMES[$i]}]=failed
    fi
done
say "programs built ($((SECONDS - START_SECONDS)) s)"
fi

# -------------------------------------------------------- (c) run and compare
PASSED=0
FAILED=0
SKIPPED=0

report() { # verdict name detail
    local verdict=$1 name=$2 detail=$3
    say "$(printf '%-5s %-16s %s' "$verdict" "$name" "$detail")"
    case $verdict in
        PASS) PASSED=$((PASSED + 1)) ;;
        SKIP) SKIPPED=$((SKIPPED + 1)) ;;
        *) FAILED=$((FAILED + 1)) ;;
    esac
}

build_failed() { # name build_key: reports FAIL (with the build's log tail) if that build failed
    [ "${BUILD_STATUS[$2]}" = ok ] && return 1
    report FAIL "$1" "build failed, see logs/build-$2.txt:"
    tail -n 15 "$LOGS/build-$2.txt" | sed 's/^/      /' | tee -a "$SUMMARY"
    return 0
}

selected() { # name: whether RUN_ONLY (when set) names this case
    [ -z "${RUN_ONLY:-}" ] && return 0
    case " $RUN_ONLY " in *" $1 "*) return 0 ;; esac
    return 1
}

run_timeout() { # prints the per-run limit left within the budget, or nothing
    local left=$((TIME_BUDGET - (SECONDS - START_SECONDS)))
    [ "$left" -ge 15 ] || return 1
    [ "$left" -lt "$RUN_TIMEOUT" ] && echo "$left" || echo "$RUN_TIMEOUT"
}

exit_detail() { # rc -> words
    case $1 in
        124) echo "timed out" ;;
        77) echo "skipped (exit 77)" ;;
        *) echo "exit $1" ;;
    esac
}

same_bytes() { # file file: cmp, or Python where diffutils is missing
    if command -v cmp >/dev/null 2>&1; then
        cmp -s "$1" "$2"
    else
        "$PYTHON" -c 'import filecmp, sys; sys.exit(not filecmp.cmp(sys.argv[1], sys.argv[2], shallow=False))' "$1" "$2"
    fi
}

# The upstream lane (tests/gpu/upstream_lane.py): PyTorch's, CuPy's and
# cuda.core's own graph test files run whole, plain and under recap, their
# per-test outcomes compared, each site of 20+ captures checked for its
# share of repeat captures whole and with its test alone. Minutes long and
# needing the checkouts of tests/gpu/upstream_fetch.md (.upstream/), so it
# runs only when RUN_ONLY names it; RUN_ONLY=upstream runs it alone.
# UPSTREAM_ARGS: more arguments for it (e.g. "--projects pytorch").
run_upstream() {
    local dir=$LOGS/upstream left rc last
    [ -n "${RUN_ONLY:-}" ] && selected upstream || return 0
    # The lane may overrun its budget by a run's SIGINT grace (20 s).
    left=$((TIME_BUDGET - (SECONDS - START_SECONDS) - 30))
    if [ "$left" -lt 60 ]; then
        report FAIL upstream "not run: time budget of ${TIME_BUDGET}s spent"
        return
    fi
    mkdir -p "$dir"
    # Its files stay in $dir/work, collected with every other log, not in $OUT.
    # shellcheck disable=SC2086
    env -u OUT -u LD_PRELOAD "$PYTHON" "$HERE/upstream_lane.py" --recap-lib "$LIB" \
        --python "$PYTHON" --time-budget "$left" --work "$dir/work" ${UPSTREAM_ARGS:-} \
        >"$dir/out.txt" 2>&1
    rc=$?
    sed 's/^/      /' "$dir/out.txt" | tee -a "$SUMMARY"
    last=$(grep '^summary:' "$dir/out.txt" | tail -n 1)
    case $rc in
        0)
            if grep -q '^summary: 0 passed, 0 failed' "$dir/out.txt"; then
                report SKIP upstream "nothing ran: ${last:-no summary} (see tests/gpu/upstream_fetch.md)"
            else
                report PASS upstream "$last"
            fi ;;
        2) report FAIL upstream "a checkout is not laid out as expected: $(tail -n 1 "$dir/out.txt")" ;;
        *) report FAIL upstream "$(exit_detail "$rc"): ${last:-no summary}" ;;
    esac
}

if [ "${RUN_ONLY:-}" = upstream ]; then
    run_upstream
    say "elapsed $((SECONDS - START_SECONDS)) s; logs in $LOGS"
    say "summary: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    collect_out
    [ "$FAILED" -eq 0 ]
    exit
fi

# run_case NAME MIN_CAPTURES BUILD_KEY -- COMMAND...
#   BUILD_KEY: the name in BUILD_STATUS, or "-" for a Python program.
run_case() {
    local name=$1 min_captures=$2 build_key=$3
    shift 4
    local dir=$LOGS/$name limit rc_plain rc_recap problems=()
    selected "$name" || return 0
    mkdir -p "$dir"
    [ "$build_key" != - ] && build_failed "$name" "$build_key" && return
    if ! limit=$(run_timeout); then
        report FAIL "$name" "not run: time budget of ${TIME_BUDGET}s spent"
        return
    fi
    printf '%s\n' "$*" >"$dir/command.txt"
    timeout -k 5 "$limit" env -u LD_PRELOAD -u RECAP_LOG -u RECAP_VERBOSE "$@" \
        >"$dir/plain.out" 2>"$dir/plain.err"
    rc_plain=$?
    if [ "$rc_plain" -eq 77 ]; then
        report SKIP "$name" "$(grep -m1 '^SKIP' "$dir/plain.out" || echo 'exit 77')"
        return
    fi
    if [ "$rc_plain" -ne 0 ]; then
        report FAIL "$name" "plain run (without recap): $(exit_detail "$rc_plain"); stderr:"
        tail -n 10 "$dir/plain.err" | sed 's/^/      /' | tee -a "$SUMMARY"
        return
    fi
    if ! limit=$(run_timeout); then
        report FAIL "$name" "not run under recap: time budget of ${TIME_BUDGET}s spent"
        return
    fi
    # The NCCL programs name their log by rank, as a multi-rank run would.
    local log_template=$dir/recap.jsonl log=$dir/recap.jsonl
    case $name in nccl_*) log_template=$dir/recap-%r.jsonl log=$dir/recap-0.jsonl ;; esac
    timeout -k 5 "$limit" env -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG \
        LD_PRELOAD="$LIB" RECAP_LOG="$log_template" RECAP_VERBOSE=1 "$@" \
        >"$dir/recap.out" 2>"$dir/recap.err"
    rc_recap=$?
    [ "$rc_recap" -eq 0 ] || problems+=("run under recap: $(exit_detail "$rc_recap")")
    if ! same_bytes "$dir/plain.out" "$dir/recap.out"; then
        diff "$dir/plain.out" "$dir/recap.out" >"$dir/stdout.diff" 2>&1
        problems+=("stdout differs from the plain run (logs/$name/stdout.diff)")
    fi
    local -a log_checks=()
    # Across devices an update would fail: none may have been tried.
    case $name in
    two_devices) log_checks=(--max-update-failures 0) ;;
    # One instantiation per graph: nothing to reuse, only to leave alone.
    torch_compile) log_checks=(--min-reuse 0) ;;
    # Graphs with conditional or memory nodes: recap reads node types (its
    # default) and reuses no executable graph of them (cuda.core's own
    # graph tests crashed in the driver after such updates).
    conditional|mem_nodes) [ "${RECAP_SELF_RECORD:-}" = off ] || log_checks=(--min-reuse 0) ;;
    # Four threads, two shapes, one site: recorded by recap (13.0), unless
    # the whole suite runs with self-recording off.
    threads_one_site) [ "${RECAP_SELF_RECORD:-}" = off ] || log_checks=(--min-by-recap 0.9) ;;
    # PyTorch keeps every graph in debug mode. Copies of kept graphs are
    # off by default (a crash in PyTorch's graph tests run whole, round
    # 23): the site is left to executable reuse and the log names the
    # setting; with RECAP_COPY_HELD=on it is recorded into copies (13.0).
    torch_debug_mode)
        [ "${RECAP_SELF_RECORD:-}" = off ] || log_checks=(--expect-warning RECAP_COPY_HELD=on) ;;
    torch_debug_mode_copies)
        [ "${RECAP_SELF_RECORD:-}" = off ] || log_checks=(--min-by-recap 0.9) ;;
    # PyTorch's graph features, one after the other: most sites capture a
    # few times each, and three captures fail on purpose (a synchronize
    # inside them).
    torch_graphed_callables) log_checks=(--min-reuse 0.8) ;;
    # A pinned buffer freed and pinned again every step: handed back from
    # the second step on (the first pin has nothing to take).
    torch_pinned) log_checks=(--min-host-reused 90) ;;
    nccl_*) log_checks=(--rank 0 --world-size 1) ;;
    esac
    if ! "$PYTHON" "$HERE/check_run.py" log --log "$log" --stderr "$dir/recap.err" \
        --min-captures "$min_captures" ${log_checks[@]+"${log_checks[@]}"} >"$dir/check.txt" 2>&1; then
        problems+=("log check failed")
    fi
    case $name in
    memory_growth | mem_nodes)
        if ! "$PYTHON" "$HERE/check_run.py" memory --plain-stderr "$dir/plain.err" \
            --recap-stderr "$dir/recap.err" >>"$dir/check.txt" 2>&1; then
            problems+=("memory grew under recap")
        fi
        ;;
    nccl_*)
        grep -q 'rank 0: process group destroyed' "$dir/recap.err" ||
            problems+=("dist.destroy_process_group() did not return")
        # recap's NCCL teardown hook (shim/intercept/nccl_hooks.c) must have been
        # reached: with NCCL linked into torch statically it would not be,
        # and two ranks would wait forever at the teardown.
        grep -q '"event":"comm_teardown".*"forwarded":true' "$log" ||
            problems+=("no comm_teardown event: recap's NCCL hooks were not called")
        grep '"event":"comm_teardown"' "$log" >>"$dir/check.txt"
        "$PYTHON" "$REPO/scripts/recap" report "$dir"/recap-*.jsonl >"$dir/report.txt" 2>&1
        sed 's/^/  /' "$dir/report.txt" >>"$dir/check.txt"
        ;;&
    nccl_memory)
        if ! "$PYTHON" "$HERE/check_run.py" memory --plain-stderr "$dir/plain.err" \
            --recap-stderr "$dir/recap.err" >>"$dir/check.txt" 2>&1; then
            problems+=("memory grew under recap")
        fi
        ;;
    two_devices)
        # Each device's executable graphs served only that device.
        if ! grep -q '^exec handles: device 0: .* 0 shared' "$dir/recap.err" ||
            ! grep -q '^exec handles: device 1: .* 0 shared' "$dir/recap.err"; then
            problems+=("an executable graph was handed to both devices")
        fi
        grep '^exec handles' "$dir/recap.err" >>"$dir/check.txt"
        ;;
    esac
    if [ "${#problems[@]}" -eq 0 ]; then
        report PASS "$name" "$(tail -n 1 "$dir/recap.out")"
    else
        local joined
        joined=$(printf '%s; ' "${problems[@]}")
        report FAIL "$name" "${joined%; }"
        if [ "$rc_recap" -ne 0 ]; then
            tail -n 10 "$dir/recap.err" | grep -v '^recap: capture\|^recap: instantiate' |
                sed 's/^/      /' | tee -a "$SUMMARY"
        fi
        [ -f "$dir/stdout.diff" ] && head -n 6 "$dir/stdout.diff" | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
    sed 's/^/      /' "$dir/check.txt" | tee -a "$SUMMARY"
}

# run_loop_times NAME BUILD_KEY -- COMMAND...: after run_case NAME, two more
#   runs under recap without RECAP_VERBOSE (its stderr lines would be timed
#   too): recap's default (self-recording) and RECAP_SELF_RECORD=off
#   (executable reuse alone). The program's "loop: N ms" (stderr) of each is
#   reported as NAME_time, with the plain run's: PASS when self-recording
#   took less than executable reuse alone. One run each: a first reading,
#   not a benchmark (scripts/ has those).
loop_ms() { sed -n 's/^loop: \([0-9.]*\) ms.*/\1/p' "$1" | tail -n 1; }

run_loop_times() {
    local name=$1 build_key=$2
    shift 3
    local dir=$LOGS/$name limit rc way problems=() ms_plain ms_self ms_off
    selected "$name" || return 0
    [ "${BUILD_STATUS[$build_key]}" = ok ] && [ -f "$dir/plain.out" ] || return 0
    if [ "${RECAP_SELF_RECORD:-}" = off ]; then
        report SKIP "${name}_time" "RECAP_SELF_RECORD=off for the whole suite: nothing to compare"
        return
    fi
    # Three alternating pairs, medians compared: separate processes drift.
    local rep times_self=() times_off=() ms
    for rep in 1 2 3; do
        for way in self_off self; do
            limit=$(run_timeout) || { report FAIL "${name}_time" "not run: time budget spent"; return; }
            timeout -k 5 "$limit" env -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG -u RECAP_VERBOSE \
                LD_PRELOAD="$LIB" RECAP_LOG="$dir/time_$way.jsonl" \
                RECAP_SELF_RECORD="$([ "$way" = self_off ] && echo off)" "$@" \
                >"$dir/time_$way.out" 2>"$dir/time_$way.err"
            rc=$?
            [ "$rc" -eq 0 ] || problems+=("timed run ($way): $(exit_detail "$rc")")
            same_bytes "$dir/plain.out" "$dir/time_$way.out" ||
                problems+=("stdout of the timed run ($way) differs from the plain run")
            ms=$(loop_ms "$dir/time_$way.err")
            if [ "$way" = self ]; then times_self+=("$ms"); else times_off+=("$ms"); fi
        done
    done
    ms_plain=$(loop_ms "$dir/plain.err")
    median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
    ms_self=$(median3 "${times_self[@]}")
    ms_off=$(median3 "${times_off[@]}")
    local detail="loop ms, median of 3 alternating runs: self-recording (recap's default) ${ms_self:-?} (${times_self[*]}), RECAP_SELF_RECORD=off ${ms_off:-?} (${times_off[*]}), plain ${ms_plain:-?}"
    if [ -z "$ms_self" ] || [ -z "$ms_off" ]; then
        problems+=("no 'loop:' line on stderr")
    elif ! awk -v a="$ms_self" -v b="$ms_off" 'BEGIN { exit !(a < b) }'; then
        problems+=("self-recording not faster than executable reuse alone")
    fi
    if [ "${#problems[@]}" -eq 0 ]; then
        report PASS "${name}_time" "$detail"
    else
        local joined
        joined=$(printf '%s; ' "${problems[@]}")
        report FAIL "${name}_time" "${joined%; }; $detail"
    fi
}

# The driver's recapture API against the stand-in's readings: one run, no recap.
run_conformance() {
    local name=recapture_conformance dir=$LOGS/recapture_conformance limit rc
    mkdir -p "$dir"
    build_failed "$name" "$name" && return
    limit=$(run_timeout) || { report FAIL "$name" "not run: time budget spent"; return; }
    timeout -k 5 "$limit" env -u LD_PRELOAD "$BIN/$name" >"$dir/out.txt" 2>"$dir/err.txt"
    rc=$?
    case $rc in
        77) report SKIP "$name" "$(grep -m1 '^SKIP' "$dir/out.txt" || echo 'exit 77')" ;;
        0) report PASS "$name" "$(grep -m1 '^summary' "$dir/out.txt")" ;;
        *)
            report FAIL "$name" "$(exit_detail "$rc"): $(grep -m1 '^summary' "$dir/out.txt")"
            { grep 'NOT MODELLED' "$dir/out.txt"; tail -n 5 "$dir/err.txt"; } | sed 's/^/      /' | tee -a "$SUMMARY"
            ;;
    esac
    grep '^SETTINGS' "$dir/out.txt" | sed 's/^/      /' | tee -a "$SUMMARY"
}

run_conformance

# What a program observes of a capture (prohibited calls per mode and thread,
# invalidation, capture queries): the same without and with recap (default
# mode), byte for byte. No log checks: it makes no instantiations to reuse.
# Its plain output is also compared with capture_semantics.expected (driver
# 580.159, CUDA 13.0; the facts tests/standin/READINGS.md "Capture
# prohibitions" models): a difference is reported, not failed, since another
# driver may differ; then the stand-in's readings need a look.
run_semantics() {
    local name=capture_semantics dir=$LOGS/capture_semantics limit rc_plain rc_recap problems=()
    selected "$name" || return 0
    mkdir -p "$dir"
    build_failed "$name" "$name" && return
    limit=$(run_timeout) || { report FAIL "$name" "not run: time budget spent"; return; }
    timeout -k 5 "$limit" env -u LD_PRELOAD -u RECAP_LOG -u RECAP_VERBOSE "$BIN/$name" \
        >"$dir/plain.out" 2>"$dir/plain.err"
    rc_plain=$?
    if [ "$rc_plain" -eq 77 ]; then
        report SKIP "$name" "$(grep -m1 '^SKIP' "$dir/plain.out" || echo 'exit 77')"
        return
    fi
    [ "$rc_plain" -eq 0 ] || problems+=("plain run (without recap): $(exit_detail "$rc_plain")")
    limit=$(run_timeout) || { report FAIL "$name" "not run under recap: time budget spent"; return; }
    timeout -k 5 "$limit" env -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG \
        LD_PRELOAD="$LIB" RECAP_LOG="$dir/recap.jsonl" "$BIN/$name" >"$dir/recap.out" 2>"$dir/recap.err"
    rc_recap=$?
    [ "$rc_recap" -eq 0 ] || problems+=("run under recap: $(exit_detail "$rc_recap")")
    if ! same_bytes "$dir/plain.out" "$dir/recap.out"; then
        diff "$dir/plain.out" "$dir/recap.out" >"$dir/stdout.diff" 2>&1
        problems+=("stdout differs from the plain run (logs/$name/stdout.diff)")
    fi
    local reference="matches capture_semantics.expected"
    if ! same_bytes "$dir/plain.out" "$HERE/capture_semantics.expected"; then
        diff "$HERE/capture_semantics.expected" "$dir/plain.out" >"$dir/expected.diff" 2>&1
        reference="differs from capture_semantics.expected ($(grep -c '^[<>]' "$dir/expected.diff") lines, logs/$name/expected.diff; $(head -n 1 "$dir/plain.err"))"
    fi
    if [ "${#problems[@]}" -eq 0 ]; then
        report PASS "$name" "$(grep -c . "$dir/plain.out") observations identical under recap; $reference"
    else
        local joined
        joined=$(printf '%s; ' "${problems[@]}")
        report FAIL "$name" "${joined%; }; $reference"
        tail -n 5 "$dir/plain.err" "$dir/recap.err" | sed 's/^/      /' | tee -a "$SUMMARY"
        [ -f "$dir/stdout.diff" ] && head -n 6 "$dir/stdout.diff" | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
}

run_semantics

gpu_count() {
    "$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null ||
        nvidia-smi -L 2>/dev/null | grep -c '^GPU'
}

# run_torchrun_case NAME MIN_CAPTURES -- ARGS...: the NCCL program under
#   `torchrun --standalone --nproc-per-node 2`, plain and under recap with one
#   log per rank (RECAP_LOG=.../recap-%r.jsonl); each rank's log is checked,
#   then `recap report` over both must name ranks 0 and 1 of world size 2.
#   SKIP (not a failure) with fewer than two GPUs.
run_torchrun_case() {
    local name=$1 min_captures=$2
    shift 3
    local dir=$LOGS/$name limit rc_plain rc_recap problems=() gpus
    selected "$name" || return 0
    mkdir -p "$dir"
    gpus=$(gpu_count)
    if [ "${gpus:-0}" -lt 2 ]; then
        report SKIP "$name" "needs 2 GPUs, found ${gpus:-0}: torchrun --nproc-per-node 2 not run"
        return
    fi
    local -a cmd=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node 2
        "$HERE/nccl_allreduce.py" "$@")
    printf '%s\n' "${cmd[*]}" >"$dir/command.txt"
    if ! limit=$(run_timeout); then
        report FAIL "$name" "not run: time budget of ${TIME_BUDGET}s spent"
        return
    fi
    timeout -k 5 "$limit" env -u LD_PRELOAD -u RECAP_LOG -u RECAP_VERBOSE "${cmd[@]}" \
        >"$dir/plain.out" 2>"$dir/plain.err"
    rc_plain=$?
    if [ "$rc_plain" -eq 77 ] || grep -q '^SKIP' "$dir/plain.out"; then
        report SKIP "$name" "$(grep -m1 '^SKIP' "$dir/plain.out" || echo 'exit 77')"
        return
    fi
    if [ "$rc_plain" -ne 0 ]; then
        report FAIL "$name" "plain run (without recap): $(exit_detail "$rc_plain"); stderr:"
        tail -n 10 "$dir/plain.err" | sed 's/^/      /' | tee -a "$SUMMARY"
        return
    fi
    if ! limit=$(run_timeout); then
        report FAIL "$name" "not run under recap: time budget of ${TIME_BUDGET}s spent"
        return
    fi
    timeout -k 5 "$limit" env -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG \
        LD_PRELOAD="$LIB" RECAP_LOG="$dir/recap-%r.jsonl" RECAP_VERBOSE=1 "${cmd[@]}" \
        >"$dir/recap.out" 2>"$dir/recap.err"
    rc_recap=$?
    [ "$rc_recap" -eq 0 ] || problems+=("run under recap: $(exit_detail "$rc_recap")")
    grep -q 'rank 0: process group destroyed' "$dir/recap.err" &&
        grep -q 'rank 1: process group destroyed' "$dir/recap.err" ||
        problems+=("a rank did not get past dist.destroy_process_group()")
    if ! same_bytes "$dir/plain.out" "$dir/recap.out"; then
        diff "$dir/plain.out" "$dir/recap.out" >"$dir/stdout.diff" 2>&1
        problems+=("stdout differs from the plain run (logs/$name/stdout.diff)")
    fi
    : >"$dir/check.txt"
    for rank in 0 1; do
        if ! "$PYTHON" "$HERE/check_run.py" log --log "$dir/recap-$rank.jsonl" \
            --stderr "$dir/recap.err" --min-captures "$min_captures" \
            --rank "$rank" --world-size 2 >>"$dir/check.txt" 2>&1; then
            problems+=("log check of rank $rank failed")
        fi
    done
    for rank in 0 1; do
        grep -q '"event":"comm_teardown".*"forwarded":true' "$dir/recap-$rank.jsonl" ||
            problems+=("rank $rank: no comm_teardown event: recap's NCCL hooks were not called")
    done
    if [ "$name" = nccl_torchrun_memory ] &&
        ! "$PYTHON" "$HERE/check_run.py" memory --plain-stderr "$dir/plain.err" \
            --recap-stderr "$dir/recap.err" >>"$dir/check.txt" 2>&1; then
        problems+=("memory grew under recap")
    fi
    "$PYTHON" "$REPO/scripts/recap" report "$dir"/recap-[0-9]*.jsonl >"$dir/report.txt" 2>&1
    grep -q '^ranks 0, 1 of world size 2 (from RANK)' "$dir/report.txt" ||
        problems+=("recap report over the rank logs does not name ranks 0, 1 of 2")
    if [ "${#problems[@]}" -eq 0 ]; then
        report PASS "$name" "$(tail -n 1 "$dir/recap.out")"
    else
        local joined
        joined=$(printf '%s; ' "${problems[@]}")
        report FAIL "$name" "${joined%; }"
        [ "$rc_recap" -ne 0 ] && tail -n 10 "$dir/recap.err" |
            grep -v '^recap: capture\|^recap: instantiate' | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
    sed 's/^/      /' "$dir/check.txt" "$dir/report.txt" | tee -a "$SUMMARY"
}

run_case runtime_static 200 runtime_static -- "$BIN/runtime_static"
run_case runtime_shared 200 runtime_shared -- "$BIN/runtime_shared"
run_case driver_api 200 driver_api -- "$BIN/driver_api"
run_case overlap 200 overlap -- "$BIN/overlap"
run_case memory_growth 10100 memory_growth -- "$BIN/memory_growth"
run_case conditional 202 conditional -- "$BIN/conditional"
run_case mem_nodes 200 mem_nodes -- "$BIN/mem_nodes"
run_case torch_loop 100 - -- "$PYTHON" "$HERE/torch_loop.py"
run_case torch_shapes 120 - -- "$PYTHON" "$HERE/torch_shapes.py"
run_case torch_train 81 - -- "$PYTHON" "$HERE/torch_train.py"
run_case torch_graphed_callables 79 - -- "$PYTHON" "$HERE/torch_graphed_callables.py"
run_case torch_debug_mode 100 - -- "$PYTHON" "$HERE/torch_debug_mode.py"
run_case torch_debug_mode_copies 100 - -- env RECAP_COPY_HELD=on "$PYTHON" "$HERE/torch_debug_mode.py"
run_case torch_pinned 100 - -- "$PYTHON" "$HERE/torch_pinned.py"
run_case cupy_capture 200 - -- "$PYTHON" "$HERE/cupy_capture.py"
run_case cuda_core_graph 200 - -- "$PYTHON" "$HERE/cuda_core_graph.py"
# Inductor's compiled kernels, cached for the run under recap.
run_case torch_compile 3 - -- env TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" \
    "$PYTHON" "$HERE/torch_compile.py"
# NCCL in a graph re-captured every iteration, one rank (world size 1).
NCCL_ONE_RANK=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1)
run_case nccl_allreduce 200 - -- "${NCCL_ONE_RANK[@]}" "$PYTHON" "$HERE/nccl_allreduce.py" \
    --iterations 200
run_case nccl_memory 10100 - -- "${NCCL_ONE_RANK[@]}" "$PYTHON" "$HERE/nccl_allreduce.py" \
    --memory-check
# Two GPUs: SKIP on a machine with one.
run_case two_devices 400 two_devices -- "$BIN/two_devices"
run_case threads_one_site 1200 threads_one_site -- "$BIN/threads_one_site"
run_loop_times threads_one_site threads_one_site -- "$BIN/threads_one_site"
run_torchrun_case nccl_torchrun 200 -- --iterations 200
run_torchrun_case nccl_torchrun_memory 10100 -- --memory-check

# Capture sites named by Python lines and NVTX ranges (python_sites.sh runs
# torch, cupy and cuda_core several times each and checks the labels).
if limit=$(run_timeout); then
    RECAP_LIB=$LIB PYTHON=$PYTHON timeout -k 5 "$((limit > 240 ? 240 : limit))" \
        bash "$HERE/python_sites.sh" >"$LOGS/python_sites.txt" 2>&1
    rc_sites=$?
    if [ "$rc_sites" -ne 0 ]; then
        report FAIL python_sites "$(exit_detail "$rc_sites"), see logs/python_sites.txt"
    elif grep -q '^PASS' "$LOGS/python_sites.txt"; then
        report PASS python_sites "$(grep -c '^PASS' "$LOGS/python_sites.txt") checks passed"
    else
        report SKIP python_sites "no binding importable"
    fi
    sed 's/^/      /' "$LOGS/python_sites.txt" | tee -a "$SUMMARY"
fi

# recap doctor on this machine, then on a static-runtime and a driver-API
# program (one run each under recap with the loader's binding trace): PASS
# when it says recap can act; its screen goes into the summary.
run_doctor() { # name [build_key program args...]
    local name=$1 dir=$LOGS/$1 limit rc
    shift
    mkdir -p "$dir"
    if [ $# -gt 0 ]; then
        if [ "${BUILD_STATUS[$1]}" != ok ]; then
            report FAIL "$name" "build of $1 failed"
            return
        fi
        shift
    fi
    limit=$(run_timeout) || { report FAIL "$name" "not run: time budget spent"; return; }
    timeout -k 5 "$limit" env -u LD_PRELOAD -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG \
        -u RECAP_LOG -u RECAP_VERBOSE "$PYTHON" "$REPO/scripts/recap" doctor --library "$LIB" \
        ${1:+-- "$@"} >"$dir/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        report PASS "$name" "$(tail -n 1 "$dir/out.txt")"
    else
        report FAIL "$name" "$(exit_detail "$rc"): $(tail -n 1 "$dir/out.txt")"
    fi
    sed 's/^/      /' "$dir/out.txt" | tee -a "$SUMMARY"
}

run_upstream

run_doctor doctor
run_doctor doctor_static runtime_static "$BIN/runtime_static"
run_doctor doctor_driver_api driver_api "$BIN/driver_api"

# The wheel (scripts/wheel, built on another machine and carried here in
# dist/): pip installs it into fresh virtual environments, then recap doctor
# and the README's PyTorch example run under the installed recap
# (wheel_check.sh). SKIP when no wheel was carried.
run_wheel() {
    local dir=$LOGS/wheel wheel left rc
    selected wheel || return 0
    wheel=$(ls -t "$REPO"/dist/recap-*.whl 2>/dev/null | head -n 1)
    if [ -z "$wheel" ]; then
        report SKIP wheel "no dist/recap-*.whl here (scripts/wheel builds one; carry dist/)"
        return
    fi
    left=$((TIME_BUDGET - (SECONDS - START_SECONDS)))
    [ "$left" -ge 60 ] || { report FAIL wheel "not run: time budget spent"; return; }
    [ "$left" -le 300 ] || left=300
    mkdir -p "$dir"
    timeout -k 5 "$left" env PYTHON="$PYTHON" OUT= "$HERE/wheel_check.sh" "$wheel" \
        >"$dir/out.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        report PASS wheel "$(tail -n 1 "$dir/out.txt")"
    else
        report FAIL wheel "$(exit_detail "$rc"): $(tail -n 1 "$dir/out.txt")"
    fi
    sed 's/^/      /' "$dir/out.txt" | tee -a "$SUMMARY"
}
run_wheel

# ------------------------------------------------------------------ (d) summary
say "elapsed $((SECONDS - START_SECONDS)) s; logs in $LOGS"
say "summary: $PASSED passed, $FAILED failed, $SKIPPED skipped"
collect_out
[ "$FAILED" -eq 0 ]
