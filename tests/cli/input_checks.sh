#!/bin/sh
# input_checks.sh APPS_DIR MNIST_DIR FUZZ_CORPUS_DIR: hostile and careless inputs to the commands, one class of
# defect at a time: image files with fewer pixel bytes than their headers declare, safetensors files that
# break the format's rules, damaged checkpoints, files that are not regular files, non-canonical
# architecture strings, and the settings a checkpoint carries. Each refusal is one line and a non-zero exit;
# each acceptance is checked against the answer it must equal.
set -u
apps=$1 mnist=$2 corpus=$3
here=$(dirname "$0")
. "$here/common.sh"
train() { "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 "$@"; }
predict() { "$apps/glnet_predict" --model "$work/m.safetensors" "$@"; }

train --arch 784-16-10 --train-limit 640 --epochs 1 --optimizer momentum --out "$work/m.safetensors" >/dev/null 2>&1 \
  || { fail "training the model the checks use"; finish input; }

/usr/bin/python3 - "$mnist" "$work" "$corpus" <<'PY' || fail "making the inputs"
import gzip, json, os, struct, sys, zlib
import numpy as np
mnist, work, corpus = sys.argv[1:]
path = os.path.join(mnist, "t10k-images-idx3-ubyte")
raw = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
digit = np.frombuffer(raw[16:16 + 784], np.uint8).reshape(28, 28)  # a 7: light ink on black
ink = digit  # how dark the ink is where a drawing program would paint black strokes
def put(name, data):
    open(os.path.join(work, name), "wb").write(data)

def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
def png(pixels, colour_type, iend=True):
    height, width = pixels.shape[:2]
    rows = pixels.reshape(height, -1)
    scanlines = b"".join(b"\0" + rows[r].tobytes() for r in range(height))
    body = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))
    return body + chunk(b"IDAT", zlib.compress(scanlines)) + (chunk(b"IEND", b"") if iend else b"")

# Black ink on transparent paper (RGBA, the colour channels black everywhere) and the same ink on white paper.
rgba = np.zeros((28, 28, 4), np.uint8)
rgba[..., 3] = ink
put("ink-on-transparent.png", png(rgba, 6))
put("ink-on-white.png", png((255 - ink).astype(np.uint8), 0))
put("digit.png", png(digit, 0))
put("no-iend.png", png(digit, 0, iend=False))
put("blank.png", png(np.full((40, 30), 255, np.uint8), 0))

pgm = b"P5\n28 28\n255\n" + digit.tobytes()
put("digit.pgm", pgm)
put("short.pgm", pgm[:len(pgm) - 784 + 100])

def bmp(pixels, top_down):
    height, width = pixels.shape
    stride = (width + 3) // 4 * 4
    rows = [pixels[r].tobytes() + b"\0" * (stride - width) for r in range(height)]
    data = b"".join(rows if top_down else rows[::-1])
    palette = b"".join(bytes((i, i, i, 0)) for i in range(256))
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, -height if top_down else height, 1, 8, 0, len(data), 2835, 2835, 256, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + palette + data
put("bottom-up.bmp", bmp(digit, False))
put("top-down.bmp", bmp(digit, True))
put("palette-cut.bmp", bmp(digit, False)[:14 + 40 + 300])
put("rows-cut.bmp", bmp(digit, False)[:-100])

jpeg = open(os.path.join(corpus, "Image", "digit.jpg"), "rb").read()
put("digit.jpg", jpeg)
put("cut.jpg", jpeg[:len(jpeg) * 2 // 3])

# Safetensors: the model written by glnet_train, re-encoded with one rule of the format broken at a time.
model = open(os.path.join(work, "m.safetensors"), "rb").read()
length = struct.unpack("<Q", model[:8])[0]
header = json.loads(model[8:8 + length])
data = model[8 + length:]
def encode(header_text, data, length_delta=0):
    text = header_text.encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text) + length_delta) + text + data
put("one-short.safetensors", encode(json.dumps(header), data, -1))
put("trailing.safetensors", encode(json.dumps(header), data + b"garbage!"))
holed = json.loads(json.dumps(header))
for name, entry in holed.items():
    if name != "__metadata__":
        entry["data_offsets"] = [o + 16 for o in entry["data_offsets"]]
put("hole.safetensors", encode(json.dumps(holed), bytes(16) + data))
name = next(n for n in header if n != "__metadata__")
text = json.dumps(header)
duplicate = text[:-1] + ", " + json.dumps(name) + ": " + json.dumps(header[name]) + "}"
put("duplicate.safetensors", encode(duplicate, data))
put("deep.safetensors", encode('{"__metadata__": ' + "[" * 5000 + "]" * 5000 + "}", b""))

# The same weights as an nn.Sequential state_dict (0.weight, 2.weight), without glnet's metadata.
tensors, blobs, offset = {}, [], 0
for old, new in (("fc1.weight", "0.weight"), ("fc1.bias", "0.bias"), ("fc2.weight", "2.weight"), ("fc2.bias", "2.bias")):
    begin, end = header[old]["data_offsets"]
    tensors[new] = {"dtype": "F32", "shape": header[old]["shape"], "data_offsets": [offset, offset + end - begin]}
    blobs.append(data[begin:end]); offset += end - begin
put("sequential.safetensors", encode(json.dumps(tensors), b"".join(blobs)))
json.dump({k: header["__metadata__"][k] for k in ("input_mean", "input_std")}, open(os.path.join(work, "input.json"), "w"))

# Checkpoints: an optimizer tensor of the right size but the wrong shape, an unexpected tensor, a bad count.
checkpoint = open(os.path.join(work, "m.checkpoint.safetensors"), "rb").read()
length = struct.unpack("<Q", checkpoint[:8])[0]
header = json.loads(checkpoint[8:8 + length])
data = checkpoint[8 + length:]
reshaped = json.loads(json.dumps(header))
reshaped["optimizer.velocity.fc1.weight"]["shape"] = [784, 16]
put("reshaped.checkpoint.safetensors", encode(json.dumps(reshaped), data))
extra = json.loads(json.dumps(header))
extra["optimizer.velocity.fc9.weight"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
put("extra.checkpoint.safetensors", encode(json.dumps(extra), data + bytes(4)))
counted = json.loads(json.dumps(header))
counted["__metadata__"]["epochs_done"] = "1x"
put("count.checkpoint.safetensors", encode(json.dumps(counted), data))

# IDX images whose element type is not unsigned byte.
os.makedirs(os.path.join(work, "float-idx"))
labels = os.path.join(mnist, "t10k-labels-idx1-ubyte")
open(os.path.join(work, "float-idx", "t10k-images-idx3-ubyte"), "wb").write(raw[:2] + b"\x0d" + raw[3:])
open(os.path.join(work, "float-idx", "t10k-labels-idx1-ubyte"), "wb").write(open(labels, "rb").read() if os.path.exists(labels) else gzip.open(labels + ".gz").read())
PY

# --- Images: a decoder given fewer pixel bytes than the header declares refuses the file.
expect 1 "short.pgm: not a readable image \(truncated" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/short.pgm"
expect 1 "palette-cut.bmp: not a readable image \(truncated inside the BMP palette" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/palette-cut.bmp"
expect 1 "rows-cut.bmp: not a readable image \(truncated" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/rows-cut.bmp"
expect 1 "cut.jpg: not a readable image \(truncated" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/cut.jpg"
expect 1 "no-iend.png: not a readable image \(truncated" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/no-iend.png"
expect 0 "digit.jpg: [0-9]" -- "$apps/glnet_predict" --model "$work/m.safetensors" "$work/digit.jpg"
# Every encoding of the same 7 gets the same answer: PGM, PNG, top-down and bottom-up BMP.
for file in digit.pgm digit.png bottom-up.bmp top-down.bmp; do
  predict --json "$work/$file" 2>/dev/null | /usr/bin/python3 -c "import json,sys; a=json.load(sys.stdin)[0]; print(a['class'], ' '.join('%.6f' % p for p in a['probabilities']))" \
    >"$work/$file.answer" || fail "$file was not classified"
done
for file in digit.png bottom-up.bmp top-down.bmp; do
  cmp -s "$work/digit.pgm.answer" "$work/$file.answer" || fail "$file answers $(cat "$work/$file.answer"), the PGM $(cat "$work/digit.pgm.answer")"
done
# Ink on transparent paper is composited, not read as black on black: the same answer as ink on white paper.
predict --json "$work/ink-on-transparent.png" >"$work/transparent.json" 2>/dev/null || fail "RGBA image"
predict --json "$work/ink-on-white.png" >"$work/white.json" 2>/dev/null || fail "the same ink on white"
/usr/bin/python3 -c "
import json, sys
a, b = (json.load(open(f))[0] for f in sys.argv[1:])
assert a['class'] == b['class'] == 7 and max(abs(x - y) for x, y in zip(a['probabilities'], b['probabilities'])) < 1e-6, (a, b)
assert 'warning' not in a
" "$work/transparent.json" "$work/white.json" || fail "ink on transparent paper is not classified as on white paper"
# A blank image is answered, with a warning on stderr and in the JSON.
predict --json "$work/blank.png" >"$work/blank.json" 2>"$work/blank.err" || fail "blank image"
grep -q "warning: .*blank.png: the image is blank or nearly uniform" "$work/blank.err" || fail "no warning for a blank image on stderr"
grep -q '"warning": "the image is blank' "$work/blank.json" || fail "no warning for a blank image in the JSON"

# --- Safetensors: the format's rules exactly.
expect 1 "one-short.safetensors: 1 byte after the last tensor belongs to no tensor" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/one-short.safetensors" --mnist-index 0 --data "$mnist"
expect 1 "trailing.safetensors: 8 bytes after the last tensor belong to no tensor" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/trailing.safetensors" --mnist-index 0 --data "$mnist"
expect 1 "hole.safetensors: bytes 0 to 16 of the data section belong to no tensor" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/hole.safetensors" --mnist-index 0 --data "$mnist"
expect 1 "duplicate.safetensors: the safetensors header is not accepted: \"fc[12].(weight|bias)\" appears twice" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/duplicate.safetensors" --mnist-index 0 --data "$mnist"
expect 1 "deep.safetensors: the safetensors header is not accepted: nested deeper than 32 levels" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/deep.safetensors" --mnist-index 0 --data "$mnist"
expect 1 "/dev/zero: not a regular file" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model /dev/zero --mnist-index 0 --data "$mnist"
expect 1 "error: $work: is a directory; give a file" -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work" --mnist-index 0 --data "$mnist"
# A PyTorch nn.Sequential state_dict: its names taken in order, a warning for the metadata it lacks, and
# the flags that give it; with them, the answers are the original model's.
predict --mnist-index 0,1,2 --data "$mnist" --json >"$work/original.json" 2>/dev/null || fail "original model"
expect 0 "warning: .*sequential.safetensors records no input_mean/input_std \(so inputs are x/255\) nor activation" \
  -- "$apps/glnet_predict" --model "$work/m.safetensors" --model "$work/sequential.safetensors" --mnist-index 0 --data "$mnist"
mean=$(/usr/bin/python3 -c "import json; print(json.load(open('$work/input.json'))['input_mean'])")
std=$(/usr/bin/python3 -c "import json; print(json.load(open('$work/input.json'))['input_std'])")
"$apps/glnet_predict" --model "$work/sequential.safetensors" --input-mean "$mean" --input-std "$std" --activation relu \
  --mnist-index 0,1,2 --data "$mnist" --json >"$work/sequential.json" 2>"$work/sequential.err" || fail "Sequential model with flags"
grep -q warning "$work/sequential.err" && fail "a warning although the flags give the metadata: $(cat "$work/sequential.err")"
cmp -s "$work/original.json" "$work/sequential.json" || fail "the Sequential model with its metadata as flags answers differently"

# --- Checkpoints: every field validated against the network before use; the settings it carries.
checkpoint="$work/m.checkpoint.safetensors"
expect 1 "reshaped.checkpoint.safetensors: tensor optimizer.velocity.fc1.weight is not shaped like fc1.weight" \
  -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --resume "$work/reshaped.checkpoint.safetensors" --epochs 2 --out "$work/r.safetensors"
expect 1 "extra.checkpoint.safetensors: unexpected tensor optimizer.velocity.fc9.weight" \
  -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --resume "$work/extra.checkpoint.safetensors" --epochs 2 --out "$work/r.safetensors"
expect 1 "count.checkpoint.safetensors: the checkpoint's epochs_done is not a count" \
  -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --resume "$work/count.checkpoint.safetensors" --epochs 2 --out "$work/r.safetensors"
expect 1 "m.safetensors: not a glnet checkpoint" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --resume "$work/m.safetensors" --epochs 2 --out "$work/r.safetensors"
expect 1 "the run is complete \(1 of 1 epochs done\); to train on, give --epochs more than 1" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --resume "$checkpoint" --out "$work/r.safetensors"
# --resume alone continues the same run: architecture, optimizer, batch, lr and data limits from the checkpoint.
train --resume "$checkpoint" --epochs 2 --out "$work/r.safetensors" >"$work/resume.out" 2>"$work/resume.err" || fail "resume: $(cat "$work/resume.err")"
grep -q "training 784-16-10 (relu) on 640 mnist images, batch 64, 10 steps per epoch, momentum lr 0.1" "$work/resume.out" \
  || fail "resume did not take the checkpoint's settings: $(head -3 "$work/resume.out")"
grep -q "note: --epochs 2 differs from the checkpoint's 1; using 2" "$work/resume.out" || fail "no note for --epochs: $(cat "$work/resume.out")"
train --resume "$checkpoint" --epochs 2 --lr 0.05 --out "$work/r.safetensors" >"$work/resume.out" 2>"$work/resume.err" || fail "resume with --lr"
grep -q "note: --lr 0.05 differs from the checkpoint's 0.1; using 0.05" "$work/resume.out" && grep -q "momentum lr 0.05" "$work/resume.out" \
  || fail "a differing --lr was not used with a note"

# --- Training flags and architecture strings: strict, and refused before any work.
for arch in 784-10- 784-+10 0784-10 784--10 -784-10 " 784-10"; do
  expect 2 "error: architecture '.*' (has|needs) " -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --arch "$arch" --out "$work/a.safetensors"
done
expect 2 "error: --lr must be a finite number, not 'inf'" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --lr inf --out "$work/a.safetensors"
expect 2 "error: --lr must be a finite number, not '1e999'" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --lr 1e999 --out "$work/a.safetensors"
expect 2 "error: --lr must be a positive number within float range" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --lr 1e300 --out "$work/a.safetensors"
expect 1 "error: $work: is a directory; give the name of a file to write" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --arch 784-16-10 --out "$work"
train --arch 784-16-10 --train-limit 100 --batch 64 --epochs 1 --out "$work/p.safetensors" >"$work/partial.out" 2>&1 || fail "100 images in batches of 64"
grep -q "1 step per epoch" "$work/partial.out" && grep -q "leaves 36 out" "$work/partial.out" || fail "the dropped remainder is not said: $(cat "$work/partial.out")"
# Without a terminal, progress lines still appear: 1500 steps last longer than 0.0075 s even on the H100 (500 of them
# did not, and no line came). The sanitized run (GLNET_CHECKS=core) takes 300, each many times slower.
steps=1500
[ "${GLNET_CHECKS:-all}" = all ] || steps=300
"$apps/glnet_train" --data "$mnist" --test-limit 100 --arch 784-16-10 --train-limit $((steps * 4)) --batch 4 --epochs 1 --progress-every 0.01 \
  --out "$work/p.safetensors" >/dev/null 2>"$work/progress.err" || fail "training with --progress-every"
grep -Eq "^epoch 1/1  step [0-9]+/$steps  loss [0-9.]+" "$work/progress.err" || fail "no progress line without a terminal: $(head -3 "$work/progress.err")"
expect 1 "float-idx/t10k-images-idx3-ubyte: IDX element type 0x0d is not unsigned byte \(0x08\)" -- "$apps/glnet_eval" --model "$work/m.safetensors" --data "$work/float-idx"
expect 1 "error: $work: has no train-images-idx3-ubyte \(nor train-images-idx3-ubyte.gz\); a data directory holds" -- "$apps/glnet_train" --data "$mnist" --test-limit 100 --progress-every 1000 --data "$work" --out "$work/a.safetensors"

# --- Zero inputs is a usage error.
expect 2 "error: --mnist-index is empty" -- "$apps/glnet_predict" --model "$work/m.safetensors" --mnist-index "" --data "$mnist"
expect 2 "error: --mnist-index takes indices from 0 to 9999 separated by commas, not ''" -- "$apps/glnet_predict" --model "$work/m.safetensors" --mnist-index "1," --data "$mnist"

leftovers=$(find "$work" -name '*.tmp*' | wc -l)
[ "$leftovers" -eq 0 ] || fail "temporary files left behind"
finish input
