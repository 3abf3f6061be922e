#!/bin/sh
# ops_readme.sh APPS_DIR README: README's table of ONNX operators (between <!-- ops:begin --> and <!-- ops:end -->) is
# what `glnet_info --ops --markdown` prints from the importer's own table (engine/importer/OnnxOps.cpp).
set -u
apps=$1
readme=$2
here=$(dirname "$0")
. "$here/common.sh"

"$apps/glnet_info" --ops --markdown >"$work/table.md" || fail "glnet_info --ops --markdown"
sed -n '/^<!-- ops:begin -->$/,/^<!-- ops:end -->$/p' "$readme" | sed '1d;$d' >"$work/readme.md"
[ -s "$work/readme.md" ] || fail "$readme has no <!-- ops:begin --> ... <!-- ops:end --> block"
if ! diff -u "$work/readme.md" "$work/table.md"; then
  fail "$readme's ONNX op table differs from the importer's (above: - README, + glnet_info); regenerate the block between" \
    "the markers with: build/apps/glnet_info --ops --markdown"
fi
expect 0 "^Relu +6-18 +runs; folded on constants +yes +pointwise relu$" -- "$apps/glnet_info" --ops
expect 2 "^glnet_info: error: --markdown goes with --ops" -- "$apps/glnet_info" --markdown
finish ops_readme
