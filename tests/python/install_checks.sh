#!/bin/sh
# install_checks.sh PYTHON SOURCE_DIR BUILD_DIR: `pip install --no-build-isolation .` into a fresh virtual
# environment that sees Debian's NumPy and setuptools (the README's Python set-up, offline), with setup.py
# building the module in BUILD_DIR; then the installed package, imported away from the source tree, lists
# the devices and runs a model.
set -eu
python=$1 source=$2 build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
(cd "$source" && GLNET_BUILD_DIR="$build" "$work/venv/bin/pip" install --no-build-isolation --no-index --quiet . ) >"$work/pip.txt" 2>&1 \
  || { cat "$work/pip.txt"; echo "FAIL: pip install --no-build-isolation ."; exit 1; }
cd "$work"
"$work/venv/bin/python" - <<'PY' || { echo "FAIL: the installed package"; exit 1; }
import sys, glnet
assert glnet.__file__.startswith(sys.prefix), (glnet.__file__, sys.prefix)
devices = glnet.devices()
print(devices)
assert any(d["chosen"] for d in devices)
help(glnet.load)
PY
echo "pip install and import: ok"
