#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv from the
# committed locks. Idempotent: when nothing that defines the environment has
# changed since the last successful run, it returns in well under a second.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
UV_VERSION="0.13.9"   # keep equal to the uv pin in requirements.lock
STAMP="$VENV/.project-env-stamp"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# The TFX 1.16 family publishes CPython 3.11 wheels only (no 3.12/3.13), so
# the interpreter must be 3.11 exactly, whatever `python3` is on this machine.
find_python311() {
  local candidates=()
  [[ -n "${PYTHON:-}" ]] && candidates+=("$PYTHON")
  candidates+=(python3.11)
  if [[ -d "${PYENV_ROOT:-$HOME/.pyenv}/versions" ]]; then
    for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11*/bin/python3.11; do
      [[ -x "$d" ]] && candidates+=("$d")
    done
  fi
  candidates+=(/usr/local/bin/python3.11 /usr/bin/python3.11 python3 python)
  for c in "${candidates[@]}"; do
    local exe
    exe="$(command -v "$c" 2>/dev/null)" || continue
    if "$exe" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
      echo "$exe"; return 0
    fi
  done
  return 1
}

fingerprint() {
  cat "$ROOT/requirements.lock" "$ROOT/requirements-nodeps.lock" \
      "$ROOT/pyproject.toml" "$ROOT/scripts/setup.sh" | sha256sum | cut -d' ' -f1
}

want="$(fingerprint)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  log "environment up to date: $VENV"
  exit 0
fi

PY="$(find_python311)" || die "no CPython 3.11 found. TFX 1.16 ships wheels for \
Python 3.9-3.11 only. Install 3.11 (e.g. 'pyenv install 3.11' or your distribution's \
python3.11 package) or point PYTHON=/path/to/python3.11 at one, then rerun."
log "using $PY ($("$PY" --version 2>&1))"

if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  log "existing $VENV is not Python 3.11; recreating it"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
rm -f "$STAMP"

if ! "$VENV/bin/uv" --version 2>/dev/null | grep -q " $UV_VERSION"; then
  log "installing uv $UV_VERSION into the venv"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
UV=("$VENV/bin/uv" pip)
export UV_PYTHON="$VENV/bin/python"

log "syncing $(grep -c '^[a-z0-9]' "$ROOT/requirements.lock") pinned packages from requirements.lock (first run: a few minutes, ~3 GB)"
# --compile-bytecode: environments that set PYTHONDONTWRITEBYTECODE (CI, some
# containers) would otherwise recompile ~3 GB of sources on every import:
# importing TFX took ~30 s instead of ~8 s here.
"${UV[@]}" sync --quiet --require-hashes --compile-bytecode "$ROOT/requirements.lock"
log "installing tfx and ml-pipelines-sdk 1.16.0 without their dependency metadata"
"${UV[@]}" install --quiet --no-deps --require-hashes --compile-bytecode -r "$ROOT/requirements-nodeps.lock"
log "installing the project (editable)"
# compat mode: a plain .pth with the project root, so packages added later
# (and non-package folders) are importable without reinstalling.
"${UV[@]}" install --quiet --no-deps -C editable_mode=compat -e "$ROOT"

# A quick check that the stack loads on this machine: the compiled extensions of
# ML Metadata and tfx-bsl (a wheel built for another platform fails here), and the
# other packages present. Importing TensorFlow itself would add ~10-17 s to every
# fresh set-up (CI's included); the first run or test imports it anyway.
if ! check="$("$VENV/bin/python" - 2>&1 <<'PY'
import importlib
import importlib.util

for mod in ("ml_metadata.metadata_store.metadata_store", "tfx_bsl.arrow.array_util"):
    importlib.import_module(mod)
wanted = ("tfx", "tensorflow", "tensorflow_transform", "tensorflow_data_validation",
          "tensorflow_model_analysis", "apache_beam", "kfp", "airflow")
missing = [m for m in wanted if importlib.util.find_spec(m) is None]
if missing:
    raise SystemExit("not installed: " + ", ".join(missing))
PY
)"; then
  die "the environment in $VENV does not load: ${check##*$'\n'} (remove $VENV and rerun)"
fi
echo "$want" > "$STAMP"
log "environment ready: $VENV"
