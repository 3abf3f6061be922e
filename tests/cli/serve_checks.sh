#!/bin/bash
# serve_checks.sh APPS_DIR MNIST_DIR: glnet_serve on free loopback ports: every endpoint, every error answer,
# concurrent requests each checked against glnet_predict for the same image (none lost), dynamic batching
# (several requests in one GPU batch), the full queue's 503, and draining on SIGTERM. No timing is asserted.
set -u
apps=$1 data=$2
here=$(dirname "$0")
. "$here/common.sh"
. "$here/server.sh"

"$apps/glnet_train" --data "$data" --arch 784-32-10 --epochs 1 --train-limit 2000 --out "$work/m.safetensors" >"$work/train.txt" 2>&1 \
  || { cat "$work/train.txt"; fail "training the model to serve"; finish serve; }

# start NAME ARGS...: a server of the MNIST model on a free port; sets $url and $pid.
start() { start_server "$1" "$work/m.safetensors" "${@:2}" || finish serve; }
# status METHOD PATH BODY_FILE CONTENT_TYPE: prints the HTTP status; the body lands in $work/body.
status() { curl -s -o "$work/body" -w '%{http_code}' -X "$1" -H "Content-Type: $4" --data-binary "@$3" "$url$2"; }
# refused CODE PATTERN METHOD PATH BODY_FILE CONTENT_TYPE: the answer has this status and a one-line JSON error.
refused() {
  local code=$1 pattern=$2
  shift 2
  local got
  got=$(status "$@")
  [ "$got" = "$code" ] || { fail "$3 $4: status $got, expected $code ($(cat "$work/body"))"; return; }
  [ "$(wc -l <"$work/body")" -eq 1 ] && grep -Eq "^\{\"error\":\".*$pattern" "$work/body" \
    || fail "$3 $4: not a one-line JSON error matching '$pattern': $(cat "$work/body")"
}

# Inputs: MNIST test images as PNG files, as JSON pixels, and the reference answers of glnet_predict.
/usr/bin/python3 - "$data" "$work" <<'PY' || fail "making the inputs"
import gzip, json, os, struct, sys, zlib
data, work = sys.argv[1:]
path = os.path.join(data, "t10k-images-idx3-ubyte")
raw = open(path, "rb").read() if os.path.exists(path) else gzip.open(path + ".gz").read()
count, rows, cols = struct.unpack(">IIII", raw[:16])[1:]
images = [raw[16 + i * 784:16 + (i + 1) * 784] for i in range(200)]
for i, image in enumerate(images):
    json.dump({"pixels": list(image)}, open(f"{work}/p{i}.json", "w"))
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
for i in range(3):
    scanlines = b"".join(b"\0" + images[i][r * 28:(r + 1) * 28] for r in range(28))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(scanlines)) + chunk(b"IEND", b"")
    open(f"{work}/d{i}.png", "wb").write(png)
json.dump({"images": [list(image) for image in images[:40]]}, open(f"{work}/many.json", "w"))
json.dump({"images": [list(image) for image in images[:3]]}, open(f"{work}/three.json", "w"))
json.dump({"pixels": [0] * 783}, open(f"{work}/short.json", "w"))
json.dump({"pixels": [256] + [0] * 783}, open(f"{work}/big.json", "w"))
json.dump({"pixels": [0.5] + [0] * 783}, open(f"{work}/fraction.json", "w"))
json.dump({"pixels": ["1"] + [0] * 783}, open(f"{work}/text.json", "w"))
open(f"{work}/nan.json", "w").write('{"pixels": [NaN' + ", 0" * 783 + "]}")
open(f"{work}/broken.json", "w").write('{"pixels": [1, 2')
open(f"{work}/neither.json", "w").write('{"values": []}')
open(f"{work}/notimage.bin", "wb").write(b"this is not an image")
open(f"{work}/empty", "wb").write(b"")
open(f"{work}/large.bin", "wb").write(bytes(300000))
PY
"$apps/glnet_predict" --model "$work/m.safetensors" --data "$data" --mnist-index "$(seq -s, 0 199)" --json >"$work/expected.json" 2>/dev/null \
  || fail "glnet_predict on the MNIST images"
"$apps/glnet_predict" --model "$work/m.safetensors" "$work/d0.png" "$work/d1.png" "$work/d2.png" --json >"$work/expected-png.json" 2>/dev/null \
  || fail "glnet_predict on the PNG files"

# compare ANSWER_FILES...: each answer (glnet_serve's JSON list) against glnet_predict's, by image index.
compare() {
  /usr/bin/python3 - "$work" "$@" <<'PY'
import json, re, sys
work, files = sys.argv[1], sys.argv[2:]
expected = json.load(open(f"{work}/expected.json"))
expected_png = json.load(open(f"{work}/expected-png.json"))
bad = 0
for name in files:
    index = int(re.search(r"(\d+)\.answer$", name).group(1))
    answers = json.load(open(name))
    wanted = [expected_png[index]] if "png" in name else expected[index:index + len(answers)] if "many" in name else [expected[index]]
    if len(answers) != len(wanted):
        print(f"{name}: {len(answers)} answers for {len(wanted)} images"); bad += 1; continue
    for got, want in zip(answers, wanted):
        close = all(abs(a - b) <= 1e-5 for a, b in zip(got["probabilities"], want["probabilities"]))
        if got["class"] != want["class"] or len(got["probabilities"]) != len(want["probabilities"]) or not close:
            print(f"{name}: class {got['class']}, glnet_predict says {want['class']} (or probabilities differ)"); bad += 1
sys.exit(1 if bad else 0)
PY
}

# --- Endpoints and errors.
start main --max-batch 16 --max-delay-us 1000 --max-body-bytes 200000
[ "$(curl -s -o "$work/body" -w '%{http_code}' "$url/healthz")" = 200 ] && grep -q '"ok"' "$work/body" || fail "/healthz"
curl -s "$url/v1/model" >"$work/model.json" || fail "GET /v1/model"
/usr/bin/python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert m['architecture'] == '784-32-10' and m['inputs'] == 784 and m['classes'] == 10 and len(m['layers']) == 2, m
" "$work/model.json" || fail "/v1/model content"
for i in 0 1 2; do
  [ "$(status POST /v1/predict "$work/d$i.png" image/png)" = 200 ] || fail "PNG $i: $(cat "$work/body")"
  cp "$work/body" "$work/png$i.answer"
done
[ "$(status POST /v1/predict "$work/p7.json" application/json)" = 200 ] && cp "$work/body" "$work/json7.answer" || fail "JSON pixels"
[ "$(status POST /v1/predict "$work/many.json" application/json)" = 200 ] && cp "$work/body" "$work/many0.answer" \
  || fail "40 images in one request (more than --max-batch)"
compare "$work"/png?.answer "$work/json7.answer" "$work/many0.answer" || fail "answers differ from glnet_predict"
refused 400 "the model takes 784" POST /v1/predict "$work/short.json" application/json
refused 400 "not an integer from 0 to 255" POST /v1/predict "$work/big.json" application/json
refused 400 "not an integer from 0 to 255" POST /v1/predict "$work/fraction.json" application/json
refused 400 "not an integer from 0 to 255" POST /v1/predict "$work/text.json" application/json
refused 400 "not valid JSON" POST /v1/predict "$work/nan.json" application/json
refused 400 "not valid JSON" POST /v1/predict "$work/broken.json" application/json
refused 400 "an object with" POST /v1/predict "$work/neither.json" application/json
refused 400 "not a readable image" POST /v1/predict "$work/notimage.bin" image/png
refused 400 "no body" POST /v1/predict "$work/empty" application/json
got=$(curl -s -o "$work/body" -w '%{http_code}' -X POST "$url/v1/predict")  # no body and no Content-Length
[ "$got" = 400 ] && grep -q '^{"error":"the request has no body' "$work/body" || fail "POST without a body: $got $(cat "$work/body")"
refused 413 "larger than --max-body-bytes" POST /v1/predict "$work/large.bin" image/png
refused 404 "no such endpoint" GET /v2/nothing "$work/empty" text/plain
# A bad request did not disturb the server: the next good one is still right.
[ "$(status POST /v1/predict "$work/p8.json" application/json)" = 200 ] && cp "$work/body" "$work/after8.answer" && compare "$work/after8.answer" \
  || fail "a good request after the bad ones"

# --- 200 concurrent requests (32 at a time), every answer checked, none lost.
seq 0 199 | xargs -P 32 -I{} sh -c "curl -s -o '$work/c{}.answer' -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary @'$work/p{}.json' '$url/v1/predict'" >"$work/codes.txt"
[ "$(grep -c '^200$' "$work/codes.txt")" = 200 ] || fail "concurrent requests: $(sort "$work/codes.txt" | uniq -c | tr '\n' ' ')"
compare "$work"/c*.answer || fail "concurrent answers differ from glnet_predict"
curl -s "$url/metrics" >"$work/metrics.txt"
for metric in 'glnet_requests_total{path="/v1/predict",code="200"} 206' 'glnet_requests_total{path="/v1/predict",code="400"} 10' \
  'glnet_requests_total{path="/v1/predict",code="413"} 1' 'glnet_images_total 245' 'glnet_batch_size_sum 245' \
  'glnet_request_duration_seconds_count 215' 'glnet_queue_images 0' 'glnet_request_errors_total 12'; do
  grep -qF "$metric" "$work/metrics.txt" || fail "/metrics lacks '$metric': $(grep -F "${metric%% *}" "$work/metrics.txt")"
done
kill -TERM "$pid"
wait "$pid" && grep -q "stopped" "$work/main.err" || fail "SIGTERM: exit status or message"

# send_four PREFIX: images 0-3 as four concurrent requests in the background, answers in PREFIX0..3.answer; sets $clients.
send_four() {
  clients=()
  for i in 0 1 2 3; do
    curl -s -o "$work/$1$i.answer" -H 'Content-Type: application/json' --data-binary @"$work/p$i.json" "$url/v1/predict" &
    clients+=($!)
  done
}

# --- Dynamic batching: 4 requests wait for company (a 30 s window) until 4 images fill a batch: one GPU batch.
start batching --max-batch 4 --max-delay-us 30000000
send_four b
wait "${clients[@]}"
compare "$work"/b?.answer || fail "batched answers differ from glnet_predict"
curl -s "$url/metrics" | grep -qxF 'glnet_batch_size_count 1' || fail "4 requests did not share one batch: $(curl -s "$url/metrics" | grep batch_size)"
# The full queue: 4 single images wait in a 30 s window; a request that would pass --queue-limit gets 503.
kill -TERM "$pid"; wait "$pid"
start queue --max-batch 8 --max-delay-us 30000000 --queue-limit 5
send_four q
for _ in $(seq 600); do curl -s "$url/metrics" | grep -qxF 'glnet_queue_images 4' && break; sleep 0.1; done
curl -s -D "$work/headers" -o "$work/body" -H 'Content-Type: application/json' --data-binary @"$work/three.json" "$url/v1/predict" >/dev/null
grep -q "^HTTP/1.1 503" "$work/headers" && grep -qi "^Retry-After: 1" "$work/headers" && grep -q '"error":"the queue holds 4 images' "$work/body" \
  || fail "full queue: $(head -1 "$work/headers") $(cat "$work/body")"
# SIGTERM drains: the 4 waiting requests are answered at once, then the server exits 0.
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM with requests in flight: exit status"
wait "${clients[@]}"
compare "$work"/q?.answer || fail "requests in flight at SIGTERM were not answered right"

# --- Batching off: every request is its own batch.
start alone --no-batching
send_four a
wait "${clients[@]}"
compare "$work"/a?.answer || fail "unbatched answers differ"
curl -s "$url/metrics" | grep -qxF 'glnet_batch_size_count 4' || fail "--no-batching ran $(curl -s "$url/metrics" | grep batch_size_count)"
kill -TERM "$pid"; wait "$pid"

# --- Hostile and careless requests: always a 4xx with a one-line JSON error quoting no request bytes, and the
# server keeps answering. Multipart uploads, the invert field, blank-image warnings and 405.
/usr/bin/python3 - "$work" <<'PY' || fail "making the hostile requests"
import json, sys
work = sys.argv[1]
open(f"{work}/deep.json", "w").write('{"pixels":' + "[" * 100000)
open(f"{work}/deep-object.json", "w").write('{"a":' * 50000 + "1" + "}" * 50000)
open(f"{work}/utf8.json", "wb").write(b'{"pixels": ["\xff\xfe"]}')
open(f"{work}/utf8-key.json", "wb").write(b'{"\xc3\x28": 1}')
open(f"{work}/duplicate.json", "w").write('{"pixels": [0], "pixels": [1]}')
open(f"{work}/unknown.json", "w").write('{"pixels": [0], "colour": true}')
open(f"{work}/bad-invert.json", "w").write('{"pixels": [0], "invert": "yes"}')
pixels = json.load(open(f"{work}/p7.json"))["pixels"]
json.dump({"pixels": [255 - p for p in pixels], "invert": True}, open(f"{work}/inverted7.json", "w"))
json.dump({"pixels": [0] * 784}, open(f"{work}/blank.json", "w"))
PY
start hostile --max-body-bytes 400000
# hostile CODE PATTERN ...: as refused, and the answer holds printable ASCII only (no request bytes echoed).
hostile() {
  refused "$@"
  LC_ALL=C grep -q '[^ -~]' "$work/body" && fail "$5: the error answer holds bytes outside printable ASCII"
}
hostile 400 "nested deeper than 32 levels" POST /v1/predict "$work/deep.json" application/json
hostile 400 "nested deeper than 32 levels" POST /v1/predict "$work/deep-object.json" application/json
hostile 400 "not valid JSON \\(syntax error at byte [0-9]+\\)" POST /v1/predict "$work/utf8.json" application/json
hostile 400 "not valid JSON" POST /v1/predict "$work/utf8-key.json" application/json
hostile 400 "..pixels.. appears twice" POST /v1/predict "$work/duplicate.json" application/json
hostile 400 "unknown field" POST /v1/predict "$work/unknown.json" application/json
hostile 400 "invert.. must be true or false" POST /v1/predict "$work/bad-invert.json" application/json
hostile 400 "body is an image sent as application/json; send it with Content-Type image/png" POST /v1/predict "$work/d0.png" application/json
hostile 400 "body: not a readable image" POST /v1/predict "$work/p7.json" image/png
# GET (and the other methods) on the prediction endpoint: 405 naming POST.
curl -s -D "$work/headers" -o "$work/body" "$url/v1/predict" >/dev/null
grep -q "^HTTP/1.1 405" "$work/headers" && grep -qi "^Allow: POST" "$work/headers" && grep -q '"error":"GET /v1/predict is not allowed' "$work/body" \
  || fail "GET /v1/predict: $(head -1 "$work/headers") $(cat "$work/body")"
# JSON pixels are MNIST's polarity; "invert": true takes dark-on-light pixels.
[ "$(status POST /v1/predict "$work/inverted7.json" application/json)" = 200 ] && cp "$work/body" "$work/invert7.answer" && compare "$work/invert7.answer" \
  || fail "\"invert\": true: $(cat "$work/body")"
[ "$(status POST /v1/predict "$work/blank.json" application/json)" = 200 ] && grep -q '"warning":"the image is blank or nearly uniform' "$work/body" \
  || fail "a blank image gets no warning: $(cat "$work/body")"
# A raw image body is named "body"; multipart/form-data parts (curl -F) by their file names, one answer each.
[ "$(status POST /v1/predict "$work/d0.png" image/png)" = 200 ] && grep -q '"image":"body"' "$work/body" || fail "raw body name: $(cat "$work/body")"
code=$(curl -s -o "$work/body" -w '%{http_code}' -F "first=@$work/d0.png" -F "second=@$work/d1.png;type=image/png" -F "third=@$work/d2.png" "$url/v1/predict")
[ "$code" = 200 ] || fail "multipart upload: $code $(cat "$work/body")"
/usr/bin/python3 - "$work" <<'PY' || fail "multipart answers"
import json, sys
work = sys.argv[1]
answers = json.load(open(f"{work}/body"))
expected = json.load(open(f"{work}/expected-png.json"))
assert [a["image"] for a in answers] == ["d0.png", "d1.png", "d2.png"], answers
for got, want in zip(answers, expected):
    assert got["class"] == want["class"] and max(abs(a - b) for a, b in zip(got["probabilities"], want["probabilities"])) <= 1e-5
PY
code=$(curl -s -o "$work/body" -w '%{http_code}' -F "json=@$work/p7.json;type=application/json" "$url/v1/predict")
[ "$code" = 200 ] && cp "$work/body" "$work/part7.answer" && compare "$work/part7.answer" || fail "a JSON part: $code $(cat "$work/body")"
code=$(curl -s -o "$work/body" -w '%{http_code}' -F "note=hello" "$url/v1/predict")
[ "$code" = 400 ] && grep -q '"error":"note: not a readable image' "$work/body" || fail "a text part: $code $(cat "$work/body")"
[ "$(status POST /v1/predict "$work/p8.json" application/json)" = 200 ] && cp "$work/body" "$work/hostile8.answer" && compare "$work/hostile8.answer" \
  || fail "a good request after the hostile ones"
kill -TERM "$pid"; wait "$pid" || fail "the server did not stop cleanly after the hostile requests"

# --- Start-up errors: one line, non-zero exit.
expect 2 "^glnet_serve: error: --model is required" -- "$apps/glnet_serve"
expect 1 "^glnet_serve: error: .*nothing.safetensors" -- "$apps/glnet_serve" --model "$work/nothing.safetensors"
expect 2 "^glnet_serve: error: --max-batch must be an integer" -- "$apps/glnet_serve" --model "$work/m.safetensors" --max-batch 0
expect 1 "^glnet_serve: error: cannot listen on 256.1.1.1" -- "$apps/glnet_serve" --model "$work/m.safetensors" --host 256.1.1.1
finish serve
