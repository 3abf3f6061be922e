#!/bin/sh
# setup_checks.sh REPO: every program the README's two commands and the tests call, with the Debian package
# that provides it, which must be one scripts/setup installs or one of a base Debian 12 system (priority
# required or important). This stands in for running the two commands on a truly fresh Debian 12.
set -u
repo=$1
here=$(dirname "$0")
. "$here/common.sh"
installed_by_setup=$(sed -n '/^packages=(/,/^)/p' "$repo/scripts/setup" | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$')
# npm is installed by setup where no npm is present (see scripts/setup).
installed_by_setup="$installed_by_setup npm"
# What the scripts call: build, demo, fetch-mnist, fuzz, plot-bench, the check scripts, the reference tests.
programs="cmake c++ make pkg-config glad python3 npm tar md5sum gzip curl mpirun glslangValidator clang-16 clang++-16
  llvm-symbolizer-16 timeout awk cmp od find grep sed head tail wc mktemp sh bash"
# The dependency trees of everything setup installs, in one apt-cache call (each call takes over a second).
# shellcheck disable=SC2086  # a list of package names
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
  $installed_by_setup >"$work/dependencies" 2>/dev/null
for program in $programs; do
  # The tests call Debian's python3 by its path; the rest through PATH.
  if [ "$program" = python3 ]; then path=/usr/bin/python3; else path=$(command -v "$program") || { fail "$program: not found"; continue; }; fi
  real=$(readlink -f "$path")
  package=
  # dpkg knows a file by the path its package ships, /bin/tar rather than /usr/bin/tar on a merged /usr.
  for candidate in "$real" "$path" "${real#/usr}" "${path#/usr}"; do
    [ -n "$package" ] || package=$(dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1)
  done
  if [ -z "$package" ]; then
    # Not from a Debian package on this machine (NodeSource's npm, say): setup installs Debian's where it is missing.
    echo "$program: $path (not from a Debian package here)"
    echo " $installed_by_setup " | tr '\n' ' ' | grep -q " $program " || fail "$program: neither packaged nor installed by scripts/setup"
    continue
  fi
  priority=$(dpkg-query -W -f='${Priority}' "$package" 2>/dev/null)
  if echo "$installed_by_setup" | tr ' ' '\n' | grep -qx "$package"; then
    source="scripts/setup"
  elif [ "$priority" = required ] || [ "$priority" = important ]; then
    source="base system ($priority)"
  else
    # A dependency of a package setup installs (python3 of python3-numpy, g++-12 of g++, ...): named after the package
    # that depends on it directly.
    dependent=$(awk -v package="$package" '/^[^ ]/ { parent = $1 } /^  (Pre)?Depends: / && $2 == package { print parent; exit }' \
      "$work/dependencies")
    [ -n "$dependent" ] || { fail "$program: package $package is neither installed by scripts/setup nor a base package"; continue; }
    source="dependency of $dependent"
  fi
  printf '%-20s %-26s %s\n' "$program" "$package" "$source"
done
# scripts/demo before scripts/build: one line saying what to run first, not bash's "No such file or directory".
mkdir -p "$work/fresh/scripts" && cp "$repo/scripts/demo" "$work/fresh/scripts/"
expect 1 "^scripts/demo: no build found \(build/apps/glnet_train\): run scripts/build first$" -- "$work/fresh/scripts/demo"
finish setup
