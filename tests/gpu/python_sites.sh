#!/usr/bin/env bash
# python_sites.sh - capture sites named by Python lines and NVTX ranges, on a GPU.
#
#   tests/gpu/python_sites.sh          (from the repository root)
#
# For torch, cupy and cuda_core, runs tests/gpu/python_sites.py BINDING:
#   1. plain and under recap (LD_PRELOAD): exit codes and stdout identical;
#   2. check_run.py sites: five sites labelled by their lines (the helper's
#      two callers are two sites), torch one more named by its NVTX range;
#   3. under RECAP_SITES=<FILE:LINE of SITE-B> (torch also RECAP_SITES=decode):
#      exactly that site enabled, every other observed;
#   4. under RECAP_CONFIG=<what `recap config` wrote from run 3>: the same
#      sites enabled and observed.
# Prints one PASS/FAIL/SKIP line per binding and check, and the sites'
# labels and GIL state; exit 0 when nothing failed. librecap: RECAP_LIB, else
# build-gpu/shim/librecap.so, (re)built with meson first.
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 1
PYTHON=${PYTHON:-python3}
SCRIPT=tests/gpu/python_sites.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/recap-python-sites.XXXXXX")
FAILED=0

if [ -n "${RECAP_LIB:-}" ]; then
    LIB=$RECAP_LIB
else
    LIB=$REPO/build-gpu/shim/librecap.so
    if true; then   # always: a build-gpu left from an older checkout must be brought up to date
        # As run_all.sh: meson and ninja may be pip packages only.
        meson=(meson); command -v meson >/dev/null || meson=("$PYTHON" -m mesonbuild.mesonmain)
        if ! command -v ninja >/dev/null; then
            ninja_bin=$("$PYTHON" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null)
            if [ -z "$ninja_bin" ] || [ ! -x "$ninja_bin" ]; then
                ninja_bin=$WORK/ninja-wrapper/ninja
                mkdir -p "$(dirname "$ninja_bin")"
                printf '#!/bin/sh\nexec %s -m ninja "$@"\n' "$PYTHON" >"$ninja_bin"
                chmod +x "$ninja_bin"
            fi
            export NINJA=$ninja_bin PATH=$(dirname "$ninja_bin"):$PATH
        fi
        setup=(setup build-gpu -Dtests=disabled)
        [ -f build-gpu/build.ninja ] && setup=(setup --reconfigure build-gpu -Dtests=disabled)
        { "${meson[@]}" "${setup[@]}" && "${meson[@]}" compile -C build-gpu; } \
            >"$WORK/build.txt" 2>&1 || { echo "FAIL  build: see $WORK/build.txt"; tail -n 20 "$WORK/build.txt"; exit 1; }
    fi
fi
echo "librecap: $LIB; python: $("$PYTHON" --version 2>&1); logs in $WORK"

line_of() { grep -n "# $1\$" "$SCRIPT" | cut -d: -f1 | while read -r n; do
    [ "$n" -gt "$(grep -n "^def run_$2(" "$SCRIPT" | cut -d: -f1)" ] && echo "$n" && break; done; }

run_recap() { # out-prefix env...
    local out=$1; shift
    env -u RECAP_SITES -u RECAP_CONFIG -u RECAP_MODE LD_PRELOAD="$LIB" RECAP_LOG="$out.jsonl" "$@" \
        "$PYTHON" "$SCRIPT" "$BINDING" >"$out.out" 2>"$out.err"
}

for BINDING in torch cupy cuda_core; do
    D=$WORK/$BINDING
    mkdir -p "$D"
    env -u LD_PRELOAD "$PYTHON" "$SCRIPT" "$BINDING" >"$D/plain.out" 2>"$D/plain.err"
    rc_plain=$?
    if [ "$rc_plain" -eq 77 ]; then
        echo "SKIP  $BINDING: $(head -n 1 "$D/plain.out")"
        continue
    fi
    run_recap "$D/recap"
    rc=$?
    if [ "$rc" -ne "$rc_plain" ] || ! cmp -s "$D/plain.out" "$D/recap.out" || [ "$rc" -ne 0 ]; then
        echo "FAIL  $BINDING: exit $rc_plain plain, $rc under recap, or stdout differs"
        diff "$D/plain.out" "$D/recap.out" | head -n 5; tail -n 5 "$D/recap.err"
        FAILED=$((FAILED + 1))
        continue
    fi
    entry="$SCRIPT:$(line_of SITE-B "$BINDING")"
    run_recap "$D/selected" RECAP_SITES="$entry"
    "$PYTHON" scripts/recap config "$D/selected.jsonl" -o "$D/recap.conf" >/dev/null
    run_recap "$D/config" RECAP_CONFIG="$D/recap.conf"
    if "$PYTHON" tests/gpu/check_run.py sites --log "$D/recap.jsonl" --script "$SCRIPT" \
        --binding "$BINDING" --selected-log "$D/selected.jsonl" --selected-entry "$entry" \
        --config-log "$D/config.jsonl" >"$D/check.txt" 2>&1 &&
        cmp -s "$D/plain.out" "$D/selected.out" && cmp -s "$D/plain.out" "$D/config.out"; then
        echo "PASS  $BINDING: $(tail -n 1 "$D/recap.out")"
    else
        echo "FAIL  $BINDING"
        FAILED=$((FAILED + 1))
    fi
    sed 's/^/      /' "$D/check.txt"
    if [ "$BINDING" = torch ]; then
        run_recap "$D/nvtx" RECAP_SITES=decode
        if "$PYTHON" tests/gpu/check_run.py sites --log "$D/recap.jsonl" --script "$SCRIPT" \
            --binding torch --selected-log "$D/nvtx.jsonl" --selected-entry decode \
            >"$D/check-nvtx.txt" 2>&1 && cmp -s "$D/plain.out" "$D/nvtx.out"; then
            echo "PASS  torch RECAP_SITES=decode (NVTX range)"
        else
            echo "FAIL  torch RECAP_SITES=decode (NVTX range)"
            FAILED=$((FAILED + 1))
        fi
        grep 'RECAP_SITES\|FAILED' "$D/check-nvtx.txt" | sed 's/^/      /'
    fi
done
echo "python_sites: $FAILED failed"
[ "$FAILED" -eq 0 ]
