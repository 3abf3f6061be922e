# Sourced by the bash check scripts that start glnet_serve, after common.sh (bash: the servers are an array): every
# server started is killed on exit, with the scratch directory removed as common.sh does.
servers=()
trap 'for p in "${servers[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

# start_server NAME MODEL ARGS...: glnet_serve ($apps) with MODEL on a free loopback port, its output in $work/NAME.out
# and .err; sets $url and $pid and adds the pid to the caller's `servers`. Returns 1, with a failure, if it does not start.
start_server() {
  local name=$1 model=$2
  shift 2
  "$apps/glnet_serve" --model "$model" --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pid=$!
  servers+=("$pid")
  url=
  for _ in $(seq 600); do
    url=$(sed -n 's/^glnet_serve: listening on \(http:[^ ]*\)$/\1/p' "$work/$name.out")
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/$name.err"
  fail "$name: glnet_serve $model did not start"
  return 1
}
