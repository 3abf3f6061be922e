#!/usr/bin/env bash
# Fails when the gl suite has fewer cases than the first of its last part (tests/CMakeLists.txt, gl_part_first_cases),
# so that no part runs none. Usage: gl_parts_check.sh GLNET_TESTS LAST_PART_FIRST_CASE
set -euo pipefail
count=$("$1" --test-suite=gl --count | sed -n 's/.*passing the current filters: //p')
[ -n "$count" ] || { echo "gl_parts_check: $1 --count printed no count"; exit 1; }
[ "$count" -ge "$2" ] ||
  { echo "the gl suite has $count cases, fewer than its last part's first ($2): set gl_part_first_cases again"; exit 1; }
echo "the gl suite's $count cases: each of its parts runs some"
