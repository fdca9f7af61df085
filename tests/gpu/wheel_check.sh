#!/usr/bin/env bash
# wheel_check.sh - the wheel on a machine with a GPU, installed as a user
# installs it, offline:
#
#   tests/gpu/wheel_check.sh [WHEEL]     (default: the newest dist/recap-*.whl)
#
# The wheel is built elsewhere (scripts/wheel) and carried here.
#  1. A fresh virtual environment (PYTHON -m venv, nothing else in it):
#     pip install --no-index WHEEL; `recap --version`; `recap doctor` on
#     this machine's driver must end "recap can act here".
#  2. A virtual environment that also sees PyTorch, which pip cannot fetch
#     offline (--system-site-packages, and a .pth file naming the folder
#     PYTHON imports torch from, wherever that is):
#     pip install --no-index WHEEL; docs/examples/train.py (the README's
#     example) alone and under `recap run` from that environment: the same
#     checksum, and in recap's log at least 90 % of the captures after the
#     first recorded or recaptured and 90 % of the instantiations after the
#     first reused; `recap report` on that log is printed (the README's
#     PyTorch output comes from it).
# Prints one PASS/FAIL/SKIP line per step, then "wheel_check: N passed, N
# failed, N skipped"; exit 0 when none failed (1 otherwise). Step 2 is
# SKIP when PyTorch or a GPU is missing. With $OUT set, the whole output
# also goes to $OUT/wheel-check.txt. PYTHON: the interpreter (default python3).
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-python3}
WHEEL=${1:-}
if [ -z "$WHEEL" ]; then
    WHEEL=$(ls -t "$REPO"/dist/recap-*.whl 2>/dev/null | head -n 1)
fi
if [ -z "$WHEEL" ] || [ ! -f "$WHEEL" ]; then
    echo "wheel_check: no wheel (${1:-no $REPO/dist/recap-*.whl}); build one with scripts/wheel" \
         "and carry dist/ here" >&2
    exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/recap-wheel-check.XXXXXX")
LOG=$WORK/wheel-check.txt
PASSED=0 FAILED=0 SKIPPED=0

say() { printf '%s\n' "$*" | tee -a "$LOG"; }
report() { # verdict step detail
    say "$(printf '%-5s %-18s %s' "$1" "$2" "$3")"
    case $1 in PASS) PASSED=$((PASSED + 1)) ;; SKIP) SKIPPED=$((SKIPPED + 1)) ;;
               *) FAILED=$((FAILED + 1)) ;; esac
}
indent() { sed 's/^/      /' | tee -a "$LOG"; }
# A user's environment: nothing of recap's or of a build tree.
clean() { env -u LD_PRELOAD -u RECAP_MODE -u RECAP_SITES -u RECAP_CONFIG -u RECAP_LOG \
              -u RECAP_VERBOSE -u RECAP_SELF_RECORD -u PYTHONPATH "$@"; }

say "wheel_check: $WHEEL"
say "python: $("$PYTHON" --version 2>&1) ($(command -v "$PYTHON"))"
command -v nvidia-smi >/dev/null 2>&1 &&
    say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"

install() { # venv_dir [venv options]: makes the venv, installs the wheel; 0 on success
    local venv=$1
    shift
    if ! clean "$PYTHON" -m venv "$@" "$venv" >"$WORK/venv.txt" 2>&1; then
        indent <"$WORK/venv.txt"
        return 1
    fi
    if ! clean "$venv/bin/pip" install --no-index --disable-pip-version-check "$WHEEL" \
            >"$WORK/pip.txt" 2>&1; then
        indent <"$WORK/pip.txt"
        return 1
    fi
}

# ---- 1. a fresh environment: the command and recap doctor
fresh=$WORK/fresh
if install "$fresh"; then
    version=$(clean "$fresh/bin/recap" --version 2>&1)
    clean "$fresh/bin/recap" doctor >"$WORK/doctor.txt" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && tail -n 1 "$WORK/doctor.txt" | grep -q '^recap can act here$' &&
       grep -q '\.recap\.mesonpy\.libs/librecap\.so' "$WORK/doctor.txt"; then
        report PASS fresh_venv_doctor "$version; recap doctor: recap can act here"
    else
        report FAIL fresh_venv_doctor "$version; recap doctor exit $rc"
    fi
    indent <"$WORK/doctor.txt"
else
    report FAIL fresh_venv_doctor "python -m venv or pip install --no-index failed (above)"
fi

# ---- 2. PyTorch under the installed recap
torchenv=$WORK/torch
if ! clean "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
    report SKIP pytorch_example "PyTorch with a GPU not importable by $PYTHON"
elif ! install "$torchenv" --system-site-packages; then
    report FAIL pytorch_example "python -m venv --system-site-packages or pip install failed"
elif ! torch_dir=$(clean "$PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') ||
     ! site=$(clean "$torchenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') ||
     ! printf '%s\n' "$torch_dir" >"$site/recap-check-torch.pth"; then
    # (PyTorch may live in another environment than $PYTHON's base: the
    # .pth file names its folder, after the venv's own site-packages.)
    report FAIL pytorch_example "could not make PyTorch visible in $torchenv"
else
    example=$REPO/docs/examples/train.py
    cd "$WORK" || exit 1
    clean "$torchenv/bin/python" "$example" >"$WORK/plain.txt" 2>&1
    rc_plain=$?
    clean "$torchenv/bin/recap" run --log "$WORK/train-%p.jsonl" -- \
        "$torchenv/bin/python" "$example" >"$WORK/recap.txt" 2>&1
    rc_recap=$?
    clean "$torchenv/bin/recap" report "$WORK"/train-*.jsonl >"$WORK/report.txt" 2>&1
    verdict=$("$PYTHON" - "$WORK" <<'PY'
import glob, json, sys
work = sys.argv[1]
def checksum(name):
    lines = [l for l in open(f"{work}/{name}") if l.startswith("checksum ")]
    return lines[-1].strip() if lines else None
plain, recap = checksum("plain.txt"), checksum("recap.txt")
if plain is None or plain != recap:
    print(f"FAIL checksums differ: alone {plain!r}, under recap {recap!r}")
    sys.exit()
totals = {}
for path in glob.glob(f"{work}/train-*.jsonl"):
    for line in open(path):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "end" and (ev.get("totals") or {}).get("captures"):
            totals = ev["totals"]
captures, inst = totals.get("captures", 0), totals.get("instantiations", 0)
repeat = totals.get("recaptured", 0)
reused = totals.get("reused", 0)
ok = captures >= 100 and repeat >= 0.9 * (captures - 1) and reused >= 0.9 * (inst - 1)
word = "PASS" if ok else "FAIL"
print(f"{word} {checksum('plain.txt')}; {captures} captures, {repeat} repeated by recap "
      f"({totals.get('by_recap', 0)} recorded by recap itself), {reused} of {inst} "
      f"instantiations reused")
PY
)
    if [ "$rc_plain" -ne 0 ] || [ "$rc_recap" -ne 0 ]; then
        report FAIL pytorch_example "exit $rc_plain alone, $rc_recap under recap"
        tail -n 5 "$WORK/plain.txt" "$WORK/recap.txt" | indent
    else
        report "${verdict%% *}" pytorch_example "${verdict#* }"
    fi
    say "      alone:       $(tail -n 1 "$WORK/plain.txt")"
    say "      under recap: $(tail -n 1 "$WORK/recap.txt")"
    say "      \$ recap run -- python train.py && recap report recap-*.jsonl"
    indent <"$WORK/report.txt"
fi

say "logs in $WORK"
say "wheel_check: $PASSED passed, $FAILED failed, $SKIPPED skipped"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp "$LOG" "$OUT/wheel-check.txt"
fi
[ "$FAILED" -eq 0 ]
