#!/usr/bin/env bash
# Create /work/main/.venv-ttnn (Python 3.12) holding the REAL ttnn==0.81.1 package,
# used only by the conformance tooling (conformance/dump_ttnn.py).
#
# Idempotent: a stamp file records a finished install; a second run is a no-op.
# Never installs torch / CUDA: ttnn 0.81.1 does not depend on them, and a
# constraint file makes pip fail loudly should anything try to pull them in.
#
# Env overrides:
#   TTNN_PY      python3.10 or 3.12 interpreter (default: pyenv 3.12.1, else python3.12 on PATH)
#   TTNN_VENV    venv directory (default: <repo>/.venv-ttnn)
#   TTNN_FORCE=1 rebuild even if the stamp is present
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TTNN_VENV:-$REPO/.venv-ttnn}"
TTNN_VERSION="0.81.1"
# Bump RECIPE when the install steps change so existing venvs get rebuilt.
RECIPE="ttnn==${TTNN_VERSION};numpy<2;no-torch;r1"
STAMP="$VENV/.ttsim-ttnn-stamp"

if [[ "${TTNN_FORCE:-0}" != "1" && -f "$STAMP" && -x "$VENV/bin/python" ]] \
   && [[ "$(cat "$STAMP")" == "$RECIPE" ]]; then
  echo "[setup_ttnn_venv] up to date: $VENV ($RECIPE)"
  exit 0
fi

PY="${TTNN_PY:-}"
if [[ -z "$PY" ]]; then
  for cand in /root/.pyenv/versions/3.12.1/bin/python "$(command -v python3.12 || true)" \
              /root/.pyenv/versions/3.10.13/bin/python "$(command -v python3.10 || true)"; do
    if [[ -n "$cand" && -x "$cand" ]]; then PY="$cand"; break; fi
  done
fi
if [[ -z "$PY" ]]; then
  echo "[setup_ttnn_venv] ERROR: need python3.12 (or 3.10); ttnn $TTNN_VERSION ships only cp310/cp312 wheels" >&2
  exit 1
fi
PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$PYVER" in 3.10|3.12) ;; *)
  echo "[setup_ttnn_venv] ERROR: $PY is Python $PYVER; ttnn $TTNN_VERSION needs 3.10 or 3.12" >&2; exit 1;;
esac

t0=$(date +%s)
echo "[setup_ttnn_venv] creating venv $VENV with $PY (Python $PYVER)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"

CONSTRAINTS="$VENV/no-torch-constraints.txt"
cat > "$CONSTRAINTS" <<'CEOF'
# ttnn 0.81.1 needs neither; an unsatisfiable pin makes pip error out instead of
# silently downloading multi-GB CUDA wheels.
torch<0
torchvision<0
triton<0
numpy<2
CEOF

echo "[setup_ttnn_venv] pip install ttnn==$TTNN_VERSION (numpy<2, no torch) ..."
# (grep drops this machine's harmless "Location ... is ignored" notes about local index mirrors)
rc=0
PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --progress-bar off -q \
  -c "$CONSTRAINTS" "ttnn==$TTNN_VERSION" "numpy<2" 2>&1 \
  | { grep -v -E "^WARNING: Location '.*' is ignored" || true; } || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "[setup_ttnn_venv] ERROR: pip install failed (exit $rc)" >&2
  exit "$rc"
fi

# Belt and braces: refuse a venv that somehow contains torch / CUDA wheels.
if "$VENV/bin/python" -m pip list 2>/dev/null | grep -i -E '^(torch|nvidia-|triton)' ; then
  echo "[setup_ttnn_venv] ERROR: torch/CUDA packages ended up in $VENV; aborting" >&2
  exit 1
fi

echo "[setup_ttnn_venv] smoke test: import ttnn"
TT_LOGGER_LEVEL=error "$VENV/bin/python" -c "import importlib.metadata as m, ttnn, numpy; print('[setup_ttnn_venv] ttnn', m.version('ttnn'), 'numpy', numpy.__version__)" 2>&1 | grep -v -E 'DEBUG|^Config\{' || true
"$VENV/bin/python" -c "import ttnn" >/dev/null 2>&1 || { echo "[setup_ttnn_venv] ERROR: import ttnn failed" >&2; exit 1; }

echo "$RECIPE" > "$STAMP"
echo "[setup_ttnn_venv] done in $(( $(date +%s) - t0 )) s -> $VENV"
