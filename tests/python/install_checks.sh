#!/bin/sh
# install_checks.sh PYTHON SOURCE_DIR BUILD_DIR: `pip install -v --no-build-isolation .` into a fresh virtual
# environment that sees Debian's NumPy and setuptools (the README's Python set-up, offline), with setup.py
# building the module in BUILD_DIR; pip -v shows the build's steps and CMake's progress. Then the installed package,
# imported away from the source tree, lists the devices and runs a model. And the tree setup.py configures for
# itself holds the module alone, not the commands and the test suite.
set -eu
python=$1 source=$(cd "$2" && pwd) build=$(cd "$3" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
(cd "$source" && GLNET_BUILD_DIR="$build" "$work/venv/bin/pip" install -v --no-build-isolation --no-index . ) >"$work/pip.txt" 2>&1 \
  || { cat "$work/pip.txt"; echo "FAIL: pip install --no-build-isolation ."; exit 1; }
grep -q "setup.py: cmake --build .* --target _glnet" "$work/pip.txt" && grep -q "Built target _glnet" "$work/pip.txt" \
  || { cat "$work/pip.txt"; echo "FAIL: pip install -v does not show the build's progress"; exit 1; }
cd "$work"
"$work/venv/bin/python" - <<'PY' || { echo "FAIL: the installed package"; exit 1; }
import sys, glnet
assert glnet.__file__.startswith(sys.prefix), (glnet.__file__, sys.prefix)
devices = glnet.devices()
print(devices)
assert any(d["chosen"] for d in devices)
help(glnet.load)
PY
# setup.py's own tree (configured only: building it is the minutes a fresh install takes).
grep -q '"-DGLNET_APPS_AND_TESTS=OFF"' "$source/setup.py" || { echo "FAIL: setup.py configures the commands and the tests"; exit 1; }
cmake -S "$source" -B "$work/module-only" -DCMAKE_BUILD_TYPE=Release -DGLNET_APPS_AND_TESTS=OFF "-DPython3_EXECUTABLE=$python" >/dev/null
targets=$(cmake --build "$work/module-only" --target help)
echo "$targets" | grep -q "_glnet" && ! echo "$targets" | grep -Eq "glnet_(train|tests)" \
  || { echo "$targets"; echo "FAIL: GLNET_APPS_AND_TESTS=OFF still configures the commands or the tests"; exit 1; }
echo "pip install and import: ok"
