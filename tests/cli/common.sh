# Sourced by the command-line check scripts after setting `here` to their directory: a scratch directory
# removed on exit, failure counting, and the verdict.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() { "$here/expect" "$@" || failures=$((failures + 1)); }
finish() {
  [ "$failures" -eq 0 ] || { echo "$failures $1 checks failed"; exit 1; }
  echo "all $1 checks passed"
}
