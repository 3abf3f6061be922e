#!/bin/sh
# mpi_checks.sh APPS_DIR MNIST_DIR: data-parallel training under mpirun on llvmpipe (2 ranks oversubscribed on
# the CI machine's cores): N ranks at a global batch follow one rank's trajectory at the same batch.
set -u
apps=$1 mnist=$2
here=$(dirname "$0")
. "$here/common.sh"
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/setup installs openmpi-bin)"; exit 1; }
# Root may run mpirun only when it says so (CI containers run as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Every mpirun is bounded in time: a rank left waiting for a failed one must not hang the test.
ranks() { n=$1; shift; timeout 300 mpirun -np "$n" "$@"; }
# GLNET_MPI_CHECKS=core (the sanitized run, hardening.mpi, where each mpirun takes a minute): the MLP's sums through
# buckets, shared memory and MPI, an uneven split over 3 ranks and the CNN; every other check runs in the plain builds.
broad() { [ "${GLNET_MPI_CHECKS:-all}" = all ]; }
train() { "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 "$@"; }

# The largest difference between two models' parameters, relative to the largest parameter, within TOLERANCE (of the
# tensor NAME alone when given).
same_model() {
  /usr/bin/python3 - "$@" <<'PY' || fail "$1 and $2 differ beyond $3"
import json, struct, sys
import numpy as np
def tensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32)
            for k, v in header.items() if k != "__metadata__"}
a, b, tolerance = tensors(sys.argv[1]), tensors(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), "different parameter names"
names = sys.argv[4:] or list(a)
worst = max(float(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-30)) for k in names)
print(f"{sys.argv[1].split('/')[-1]} against {sys.argv[2].split('/')[-1]}: largest relative difference {worst:.2e}")
sys.exit(0 if worst <= tolerance else 1)
PY
}

# MLP: 2 ranks at global batch 64 against 1 rank at batch 64, 20 steps of momentum.
train --out "$work/one.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 >"$work/one.txt" 2>&1 || fail "1 rank"
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 \
  --out "$work/two.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 >"$work/two.txt" 2>&1 || fail "2 ranks"
same_model "$work/one.safetensors" "$work/two.safetensors" 1e-4
grep -q "^rank 1 of 2 (host rank 1): device" "$work/two.txt" || fail "rank 1 does not say which device it uses"
grep -q "per step .* ms compute, .* ms communication in 2 buckets, .* ms of it exposed" "$work/two.txt" ||
  fail "no compute/communication split for the bucketed sums"
# One sum after the backward pass instead of buckets: the same trajectory.
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 --bucket-mb 0 \
  --out "$work/two-unbucketed.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 >"$work/two-unbucketed.txt" 2>&1 ||
  fail "2 ranks, --bucket-mb 0"
grep -q "per step .* ms compute, .* ms communication, all exposed (read .*, shared-memory sum .*, write" "$work/two-unbucketed.txt" ||
  fail "no split for one sum through shared memory (the default for ranks of one host)"
same_model "$work/one.safetensors" "$work/two-unbucketed.safetensors" 1e-4
# MPI_Allreduce instead: a + b either way, so the same parameters to the bit; and a step-by-step timeline in --json.
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 --bucket-mb 0 --all-reduce mpi \
  --out "$work/two-mpi.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 --json >"$work/two-mpi.json" 2>"$work/two-mpi.txt" ||
  fail "2 ranks, --all-reduce mpi"
grep -q "all exposed (read .*, all-reduce .*, write" "$work/two-mpi.txt" || fail "--all-reduce mpi does not say so"
same_model "$work/two-unbucketed.safetensors" "$work/two-mpi.safetensors" 0
/usr/bin/python3 - "$work/two-mpi.json" <<'PY' || fail "the --json timeline is not one entry per step with ordered times"
import json, sys
epoch = json.load(open(sys.argv[1]))["epochs"][-1]
timeline = epoch["timeline"]
assert epoch["all_reduce"] == "mpi" and len(timeline) == 10, (epoch["all_reduce"], len(timeline))  # 640 images / 64
for t in timeline:
    assert 0 <= t["backward_done_ms"] <= t["step_ms"] and 0 <= t["exposed_ms"] <= t["step_ms"], t
    assert t["read_ms"] + t["all_reduce_ms"] + t["write_ms"] <= t["exposed_ms"] + 1e-3 and t["gpu_ms"] >= 0, t
assert all(a["start_ms"] + a["step_ms"] <= b["start_ms"] + 1e-3 for a, b in zip(timeline, timeline[1:]))
PY
expect 2 "error: --all-reduce takes auto, mpi or shared-memory, not 'nccl'" -- "$apps/glnet_train" --data "$mnist" \
  --out "$work/x.safetensors" --all-reduce nccl
# The epoch's result line (a slow run may also print progress lines, "epoch 2/2  step ...", from rank 0).
[ "$(grep -c '^epoch 2/2:' "$work/two.txt")" = 1 ] || fail "progress printed by more than rank 0"

if broad; then
# Weak scaling: 2 ranks of --batch-per-rank 32 are the global batch 64 of one rank; --batch beside it is refused.
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 \
  --out "$work/per-rank.safetensors" --epochs 2 --batch-per-rank 32 --optimizer momentum --lr 0.05 >"$work/per-rank.txt" 2>&1 ||
  fail "2 ranks, --batch-per-rank 32"
grep -q "each step's 64 images shared 32 to 32 per rank" "$work/per-rank.txt" || fail "--batch-per-rank 32 on 2 ranks is not a global batch of 64"
same_model "$work/one.safetensors" "$work/per-rank.safetensors" 1e-4
expect 2 "error: --batch and --batch-per-rank exclude each other" -- "$apps/glnet_train" --data "$mnist" --out "$work/x.safetensors" \
  --batch 64 --batch-per-rank 32

# --accumulate 2: the gradients of 2 batches of 32 summed on the GPU before each update (under mpirun, before the
# step's one sum over ranks) are the batch of 64's, on 1 rank and on 2; a full batch has nothing to accumulate.
train --out "$work/acc1.safetensors" --epochs 2 --batch 32 --accumulate 2 --optimizer momentum --lr 0.05 >"$work/acc1.txt" 2>&1 ||
  fail "1 rank, --accumulate 2: $(tail -1 "$work/acc1.txt")"
grep -q "each step sums the gradients of 2 batches of 32 before its update: 64 images per step" "$work/acc1.txt" ||
  fail "--accumulate 2 does not say what a step is"
same_model "$work/one.safetensors" "$work/acc1.safetensors" 1e-4
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 \
  --out "$work/acc2.safetensors" --epochs 2 --batch 32 --accumulate 2 --optimizer momentum --lr 0.05 >"$work/acc2.txt" 2>&1 ||
  fail "2 ranks, --accumulate 2"
grep -q "per step .* ms compute, .* ms communication, all exposed" "$work/acc2.txt" || fail "no split for the accumulated step's one sum"
same_model "$work/one.safetensors" "$work/acc2.safetensors" 1e-4
expect 2 "error: --accumulate sums several batches per step; a full batch is one" -- "$apps/glnet_train" --data "$mnist" \
  --out "$work/x.safetensors" --full-batch --accumulate 2
expect 2 "error: --accumulate must be an integer from 1 to 65536, not .0." -- "$apps/glnet_train" --data "$mnist" \
  --out "$work/x.safetensors" --accumulate 0

# --grad-compression bf16: the gradients cross as bfloat16 with error feedback, so the trajectory is one rank's up to
# bfloat16 rounding (measured: parameters within 2e-2 of the float sums' after 20 steps, train loss within 1e-3).
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 --grad-compression bf16 \
  --out "$work/bf16.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 >"$work/bf16.txt" 2>&1 ||
  fail "2 ranks, --grad-compression bf16: $(tail -1 "$work/bf16.txt")"
grep -q "gradients summed as bfloat16 with error feedback" "$work/bf16.txt" || fail "--grad-compression bf16 is not said"
same_model "$work/one.safetensors" "$work/bf16.safetensors" 5e-2
# bfloat16 sums through MPI's user reduction round a + b as the shared-memory sum does: the same parameters to the bit.
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 --grad-compression bf16 \
  --all-reduce mpi --out "$work/bf16-mpi.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 >/dev/null 2>&1 ||
  fail "2 ranks, --grad-compression bf16 --all-reduce mpi"
same_model "$work/bf16.safetensors" "$work/bf16-mpi.safetensors" 0
loss() { sed -n 's/^epoch 2\/2: train loss \([0-9.]*\),.*/\1/p' "$1"; }
awk -v a="$(loss "$work/one.txt")" -v b="$(loss "$work/bf16.txt")" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 5e-3 && d > -5e-3) }' ||
  fail "bf16 sums: train loss $(loss "$work/bf16.txt") against $(loss "$work/one.txt")"
expect 2 "error: --grad-compression takes none or bf16, not 'fp8'" -- "$apps/glnet_train" --data "$mnist" \
  --out "$work/x.safetensors" --grad-compression fp8

# Gradients of several MB cross in pieces (about 1 MB each, the GPU reading and writing some while the host sums
# others): 784-1500-10 has 4.8 MB of them (4 pieces; 2 as bfloat16). One sum through shared memory against one rank,
# and to the bit against MPI_Allreduce, in float and bfloat16.
wide() { echo --arch 784-1500-10 --data "$mnist" --train-limit 640 --test-limit 300 --seed 4 --epochs 1 --batch 64 --bucket-mb 0 --optimizer momentum --lr 0.05; }
"$apps/glnet_train" $(wide) --out "$work/wide1.safetensors" >/dev/null 2>&1 || fail "784-1500-10, 1 rank"
for how in shared-memory mpi; do
  ranks 2 "$apps/glnet_train" $(wide) --all-reduce $how --out "$work/wide-$how.safetensors" >/dev/null 2>&1 || fail "784-1500-10, 2 ranks, $how"
  ranks 2 "$apps/glnet_train" $(wide) --all-reduce $how --grad-compression bf16 --out "$work/wide-bf16-$how.safetensors" >/dev/null 2>&1 ||
    fail "784-1500-10, 2 ranks, $how, bf16"
done
same_model "$work/wide1.safetensors" "$work/wide-shared-memory.safetensors" 1e-4
same_model "$work/wide-shared-memory.safetensors" "$work/wide-mpi.safetensors" 0
same_model "$work/wide-bf16-shared-memory.safetensors" "$work/wide-bf16-mpi.safetensors" 0
same_model "$work/wide1.safetensors" "$work/wide-bf16-shared-memory.safetensors" 5e-2

fi

# Uneven split: global batch 61 over 3 ranks (21, 20, 20), against 1 rank at batch 61.
train --out "$work/odd1.safetensors" --epochs 1 --batch 61 >/dev/null 2>&1 || fail "1 rank, batch 61"
ranks 3 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --seed 4 --out "$work/odd3.safetensors" \
  --epochs 1 --batch 61 >"$work/odd3.txt" 2>&1 || fail "3 ranks, batch 61"
grep -q "shared 20 to 21 per rank" "$work/odd3.txt" || fail "the uneven split is not reported"
same_model "$work/odd1.safetensors" "$work/odd3.safetensors" 1e-4

# The CNN: 2 ranks against 1 at global batch 32, 4 steps.
cnn() { echo --arch cnn --train-limit 128 --test-limit 64 --batch 32 --epochs 1 --optimizer momentum --lr 0.02 --seed 5; }
"$apps/glnet_train" --data "$mnist" $(cnn) --out "$work/cnn1.safetensors" >/dev/null 2>&1 || fail "CNN, 1 rank"
ranks 2 "$apps/glnet_train" --data "$mnist" $(cnn) --out "$work/cnn2.safetensors" >/dev/null 2>&1 || fail "CNN, 2 ranks"
same_model "$work/cnn1.safetensors" "$work/cnn2.safetensors" 1e-4
if broad; then
# Buckets of 10 kB: each of the CNN's 8 parameters in its own but conv1's weight (3.2 kB) and bias, which share one.
ranks 2 "$apps/glnet_train" --data "$mnist" $(cnn) --bucket-mb 0.01 --out "$work/cnn2b.safetensors" >"$work/cnn2b.txt" 2>&1 ||
  fail "CNN, 2 ranks, small buckets"
grep -q "communication in 7 buckets" "$work/cnn2b.txt" || fail "the CNN's gradients are not summed in 7 buckets"
same_model "$work/cnn1.safetensors" "$work/cnn2b.safetensors" 1e-4

# Batch normalization: each rank moves its running statistics by its own share of each batch, and they are averaged
# over the ranks after each epoch, so that the ranks evaluate and save one model. With momentum 1 (the running mean is
# the last batch's) and a learning rate too small to move the weights, 2 ranks at global batch 8 average two halves'
# means into the whole batch's mean, which 1 rank at batch 8 holds (rank 0's half alone differs by about 8 %; the
# variances differ, each half's being its own).
printf '{"input": [1, 28, 28], "layers": [{"name": "c", "kind": "conv", "outputs": 4, "kernel": 3, "stride": 2},
  {"name": "bn", "kind": "batchnorm", "momentum": 1}, {"name": "r", "kind": "relu"}, {"name": "fc", "kind": "dense", "outputs": 10}]}' >"$work/bn.json"
bn() { echo --net "$work/bn.json" --batch 8 --epochs 1 --optimizer momentum --lr 1e-30; }
train $(bn) --out "$work/bn1.safetensors" >/dev/null 2>&1 || fail "1 rank, batch normalization"
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --seed 4 $(bn) --out "$work/bn2.safetensors" >/dev/null 2>&1 ||
  fail "2 ranks, batch normalization"
same_model "$work/bn1.safetensors" "$work/bn2.safetensors" 1e-5 bn.running_mean

# Resume with another number of ranks: 1 epoch on 2 ranks, then the second on 1 rank, against 2 epochs on 1.
ranks 2 "$apps/glnet_train" --data "$mnist" --train-limit 640 --test-limit 300 --log-every 5 --seed 4 \
  --out "$work/r.safetensors" --epochs 1 --batch 64 --optimizer momentum --lr 0.05 >/dev/null 2>&1 || fail "2 ranks, 1 epoch"
train --out "$work/r.safetensors" --epochs 2 --batch 64 --optimizer momentum --lr 0.05 \
  --resume "$work/r.checkpoint.safetensors" >/dev/null 2>&1 || fail "resume on 1 rank"
same_model "$work/one.safetensors" "$work/r.safetensors" 1e-4

# Sharded evaluation: the same accuracy and predictions as one process.
"$apps/glnet_eval" --model "$work/one.safetensors" --data "$mnist" --limit 999 --predictions "$work/p1.txt" >"$work/e1.txt" || fail "eval, 1 rank"
ranks 2 "$apps/glnet_eval" --model "$work/one.safetensors" --data "$mnist" --limit 999 --predictions "$work/p2.txt" >"$work/e2.txt" 2>&1 || fail "eval, 2 ranks"
cmp -s "$work/p1.txt" "$work/p2.txt" || fail "sharded predictions differ"
[ "$(grep '^accuracy' "$work/e1.txt")" = "$(grep '^accuracy' "$work/e2.txt")" ] || fail "sharded accuracy differs"

# Failures end every rank with one line from the failing rank and a non-zero exit, never a hang.
failing() {  # EXPECTED-REGEX COMMAND...: non-zero exit, exactly one glnet error line, matching
  pattern=$1; shift
  "$@" >"$work/f.out" 2>"$work/f.err"
  status=$?
  [ $status -ne 0 ] && [ $status -ne 124 ] || fail "exit $status for: $*"
  [ "$(grep -c 'glnet_[a-z]*: error' "$work/f.err")" = 1 ] || { fail "not exactly one error line for: $*"; cat "$work/f.err"; }
  grep -Eq "$pattern" "$work/f.err" || { fail "no '$pattern' for: $*"; cat "$work/f.err"; }
}
# Rank 1 alone has no usable device.
failing "glnet_train: error: rank 1 of 2: device 7 is out of range" \
  timeout 120 mpirun -np 1 "$apps/glnet_train" --data "$mnist" --train-limit 640 --out "$work/x.safetensors" : \
  -np 1 env GLNET_DEVICE=7 "$apps/glnet_train" --data "$mnist" --train-limit 640 --out "$work/x.safetensors"
# Every rank meets a bad file.
failing "glnet_train: error: rank 0 of 2: .*no-such-dir" ranks 2 "$apps/glnet_train" --data "$work/no-such-dir" --out "$work/x.safetensors"
# A diverging run: the loss summed over the ranks is NaN on every rank at once; the checkpoint stays intact.
before=$(md5sum <"$work/r.checkpoint.safetensors")
failing "glnet_train: error: the loss became (NaN|infinite) in epoch 3" ranks 2 "$apps/glnet_train" --data "$mnist" \
  --train-limit 640 --test-limit 300 --seed 4 --out "$work/r.safetensors" --epochs 3 --batch 64 --optimizer momentum \
  --lr 1e30 --resume "$work/r.checkpoint.safetensors"
[ "$(md5sum <"$work/r.checkpoint.safetensors")" = "$before" ] || fail "the diverging run changed the checkpoint"
# Fewer images in a batch than ranks.
failing "cannot be shared by 3 ranks" ranks 3 "$apps/glnet_train" --data "$mnist" --train-limit 640 --batch 2 --out "$work/x.safetensors"
fi

finish mpi
