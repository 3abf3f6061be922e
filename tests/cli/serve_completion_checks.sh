#!/bin/bash
# serve_completion_checks.sh APPS_DIR TINY_DECODERS_DIR: glnet_serve --model DIR on the tiny decoder folders
# (tests/reference/tiny_decoders.py), OpenAI's /v1/completions: greedy answers equal glnet_generate --json's for the
# same prompt and token count, streamed chunks join to the same text, stop texts, seeds, clients at once (decoded
# together, and queued past --max-batch),
# a streaming client that leaves cancels its completion, every bad request a 4xx in OpenAI's error shape, /v1/models,
# /metrics, draining on SIGTERM, and start-up errors. No timing is asserted.
set -u
apps=$1 models=$2
here=$(dirname "$0")
. "$here/common.sh"
. "$here/server.sh"
python=/usr/bin/python3

# reference MODEL PROMPT TOKENS [glnet_generate options]: glnet_generate --json's answer, in $work/MODEL-N.json.
reference() {
  "$apps/glnet_generate" --model "$models/$1" --prompt "$2" --max-new-tokens "$3" "${@:4}" --json >"$work/$1-$3.json" 2>"$work/generate.err" \
    || fail "glnet_generate on $1: $(tail -1 "$work/generate.err")"
}

# check NAME: runs the Python checks on stdin against the server at $url, of the folder $model; a failure is one FAIL.
check() {
  "$python" - "$url" "$work" "$model" >"$work/check.out" 2>&1 || fail "$model, $1: $(cat "$work/check.out")"
}

# The helpers every Python check below starts with: requests to the server and the answers of glnet_generate.
cat >"$work/client.py" <<'PY'
import http.client, json, sys, threading, urllib.parse
url, work, model = sys.argv[1:4]
address = urllib.parse.urlparse(url)

def request(method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request on a connection of its own."""
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=120)
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    connection.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()

def complete(body):
    status, _, data = request("POST", "/v1/completions", body)
    assert status == 200, (status, data)
    return json.loads(data)

def events(body):
    """The parsed data of every server-sent event of a streamed completion, [DONE] as the string."""
    status, headers, data = request("POST", "/v1/completions", dict(body, stream=True))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream"), (status, headers)
    text = data.decode()
    assert text.endswith("\n\n"), text
    chunks = text[:-2].split("\n\n")
    assert all(chunk.startswith("data: ") for chunk in chunks), text
    return [chunk[6:] if chunk == "data: [DONE]" else json.loads(chunk[6:]) for chunk in chunks]

def refused(status, body, param, pattern, path="/v1/completions", method="POST"):
    """An error answer in OpenAI's shape: {"error": {"message", "type", "param", "code"}} on one line."""
    got, _, data = request(method, path, body)
    assert got == status, (body, got, data)
    assert data.count(b"\n") == 1 and all(32 <= c < 127 for c in data[:-1]), data
    error = json.loads(data)["error"]
    assert pattern in error["message"] and error["param"] == param and error["code"] is None, (body, error)
    assert error["type"] == ("server_error" if status == 503 else "invalid_request_error"), error

def generated(tokens):
    """glnet_generate --json's answer for this model and token count."""
    return json.load(open(f"{work}/{model}-{tokens}.json"))

def finish_reason(answer):
    return "length" if answer["stop_reason"] in ("length", "context full") else "stop"
PY

prompt="The quick brown fox"
for model in gpt2 llama; do
  reference "$model" "$prompt" 12
  reference "$model" "$prompt" 30
  start_server "$model" "$models/$model" || finish serve_completions
  # Greedy answers equal glnet_generate's, whole and streamed; the answer and chunks have OpenAI's fields.
  check "greedy answers" <<PY
exec(open("$work/client.py").read())
for tokens in (12, 30):
    want = generated(tokens)
    answer = complete({"prompt": "$prompt", "max_tokens": tokens, "temperature": 0, "model": "anything", "user": "ignored"})
    assert set(answer) == {"id", "object", "created", "model", "choices", "usage"} and answer["object"] == "text_completion", answer
    assert answer["model"] == model and answer["id"].startswith("cmpl-"), answer
    choice = answer["choices"][0]
    assert len(answer["choices"]) == 1 and choice["index"] == 0 and choice["logprobs"] is None, answer
    assert choice["text"] == want["text"], (choice["text"], want["text"])
    assert choice["finish_reason"] == finish_reason(want), (choice, want["stop_reason"])
    assert answer["usage"] == {"prompt_tokens": want["prompt_tokens"], "completion_tokens": want["generated_tokens"],
                               "total_tokens": want["prompt_tokens"] + want["generated_tokens"]}, answer["usage"]
    # An array of one prompt is the prompt.
    assert complete({"prompt": ["$prompt"], "max_tokens": tokens, "temperature": 0})["choices"][0]["text"] == want["text"]
    streamed = events({"prompt": "$prompt", "max_tokens": tokens, "temperature": 0, "stream_options": {"include_usage": True}})
    assert streamed[-1] == "[DONE]", streamed[-1]
    usage, last, pieces = streamed[-2], streamed[-3], streamed[:-3]
    assert all(p["choices"][0]["finish_reason"] is None and p["choices"][0]["text"] for p in pieces), pieces
    assert "".join(p["choices"][0]["text"] for p in pieces) == want["text"], pieces
    assert last["choices"][0]["text"] == "" and last["choices"][0]["finish_reason"] == finish_reason(want), last
    assert usage["choices"] == [] and usage["usage"] == answer["usage"], usage
    assert len({p["id"] for p in streamed[:-1]}) == 1 and streamed[0]["id"] != answer["id"], streamed
# Without stream_options no usage chunk: the finishing chunk, then [DONE].
streamed = events({"prompt": "$prompt", "max_tokens": 12, "temperature": 0})
assert streamed[-1] == "[DONE]" and streamed[-2]["choices"][0]["finish_reason"] and "usage" not in streamed[-2], streamed[-2:]
PY
  kill -TERM "$pid"; wait "$pid" || fail "$model: the server did not stop cleanly"
done

# The rest on the gpt2 folder.
start_server main "$models/gpt2" --max-body-bytes 4096 || finish serve_completions
model=gpt2
# Stop texts: the text ends before the first one (a string or any of a list), finish_reason "stop".
check "stop texts" <<PY
exec(open("$work/client.py").read())
full = generated(30)["text"]
assert len(full) >= 8, full
stop = full[4:6]
want = full[:full.index(stop)]
for stops in (stop, [stop], ["never in the text", stop]):
    choice = complete({"prompt": "$prompt", "max_tokens": 30, "temperature": 0, "stop": stops})["choices"][0]
    assert choice["text"] == want and choice["finish_reason"] == "stop", (stops, choice, want)
    streamed = events({"prompt": "$prompt", "max_tokens": 30, "temperature": 0, "stop": stops})
    assert "".join(e["choices"][0]["text"] for e in streamed[:-1]) == want and streamed[-2]["choices"][0]["finish_reason"] == "stop", streamed
PY
# Sampling: a seed repeats its text; without one each request draws afresh; temperature 0 ignores the seed.
check "seeds" <<PY
exec(open("$work/client.py").read())
body = {"prompt": "$prompt", "max_tokens": 24, "temperature": 1.5, "top_p": 0.95}
first = complete(dict(body, seed=7))["choices"][0]["text"]
assert first == complete(dict(body, seed=7))["choices"][0]["text"]
assert len({complete(dict(body, seed=seed))["choices"][0]["text"] for seed in (7, 8, 9)}) > 1
assert len({complete(body)["choices"][0]["text"] for _ in range(4)}) > 1, "unseeded requests repeat the same text"
assert complete({"prompt": "$prompt", "max_tokens": 12, "temperature": 0, "seed": 5})["choices"][0]["text"] == generated(12)["text"]
PY
# Clients at once, one of them streaming, one sampling: each gets the answer glnet_generate gives it alone (decoded
# together, the server's step reads each weight once for all of them).
reference gpt2 "Once upon a time" 24
"$apps/glnet_generate" --model "$models/gpt2" --prompt "A sampled story" --max-new-tokens 20 --temperature 1.5 --top-p 0.95 --seed 7 --json \
  >"$work/sampled.json" 2>"$work/generate.err" || fail "glnet_generate sampling: $(tail -1 "$work/generate.err")"
check "clients at once" <<PY
exec(open("$work/client.py").read())
answers = {}
def one(name, body):
    answers[name] = complete(body)["choices"][0]["text"] if not body.get("stream") else "".join(e["choices"][0]["text"] for e in events(body)[:-1])
threads = [threading.Thread(target=one, args=("fox", {"prompt": "$prompt", "max_tokens": 30, "temperature": 0})),
           threading.Thread(target=one, args=("time", {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0, "stream": True})),
           threading.Thread(target=one, args=("sampled", {"prompt": "A sampled story", "max_tokens": 20, "temperature": 1.5, "top_p": 0.95, "seed": 7}))]
for thread in threads: thread.start()
for thread in threads: thread.join()
sampled = json.load(open(f"{work}/sampled.json"))["text"]
assert answers == {"fox": generated(30)["text"], "time": generated(24)["text"], "sampled": sampled}, answers
PY
# Bad requests: 400 naming the field, 404, 405 with Allow, 413; the server answers right after them.
check "bad requests" <<PY
exec(open("$work/client.py").read())
for body, param, pattern in [
        ({"max_tokens": 4}, "prompt", "prompt is required"),
        ({"prompt": 3}, "prompt", "prompt is 3, not a string"),
        ({"prompt": ["a", "b"]}, "prompt", "an array of 2 values"),
        ({"prompt": [[1, 2]]}, "prompt", "an array of 1 values"),
        ({"prompt": ""}, "prompt", "the prompt holds no token"),
        ({"prompt": "word " * 200}, "prompt", "leave no room for a completion in the context of 64 positions"),
        ({"prompt": "a", "max_tokens": 0}, "max_tokens", "max_tokens is 0"),
        ({"prompt": "a", "max_tokens": 2.5}, "max_tokens", "max_tokens is 2.5"),
        ({"prompt": "a", "max_tokens": "8"}, "max_tokens", "max_tokens is a JSON string"),
        ({"prompt": "a", "temperature": -1}, "temperature", "temperature is -1"),
        ({"prompt": "a", "temperature": 1e-40}, "temperature", "too small"),
        ({"prompt": "a", "top_p": 0}, "top_p", "top_p is 0"),
        ({"prompt": "a", "top_p": 1.5}, "top_p", "top_p is 1.5"),
        ({"prompt": "a", "top_k": -2}, "top_k", "top_k is -2"),
        ({"prompt": "a", "stop": ["1", "2", "3", "4", "5"]}, "stop", "up to 4 strings"),
        ({"prompt": "a", "stop": 5}, "stop", "stop is 5"),
        ({"prompt": "a", "stop": [""]}, "stop", "must not be empty"),
        ({"prompt": "a", "stop": ["x", 1]}, "stop[1]", "stop[1] is 1, not a string"),
        ({"prompt": "a", "seed": 1.5}, "seed", "not an integer"),
        ({"prompt": "a", "stream": "yes"}, "stream", "not true or false"),
        ({"prompt": "a", "stream_options": {"include_usage": 1}}, "stream_options.include_usage", "not true or false"),
        ({"prompt": "a", "model": 5}, "model", "model is 5, not a string"),
        ({"prompt": "a", "n": 2}, "n", "n is not supported"),
        ({"prompt": "a", "echo": True}, "echo", "echo is not supported"),
        ({"prompt": "a", "logprobs": 2}, "logprobs", "logprobs is not supported"),
        ({"prompt": "a", "presence_penalty": 0.5}, "presence_penalty", "not supported")]:
    refused(400, body, param, pattern)
refused(400, [1, 2], None, "not a JSON object")
refused(400, b'{"prompt": "a", "prompt": "b"}', None, "appears twice")
refused(400, b'{"prompt": "\xff"}', None, "not valid JSON")
refused(400, b'{"prompt": ' + b"[" * 1000, None, "nested deeper than 32 levels")
refused(400, b"", None, "the request has no body")
refused(413, {"prompt": "x" * 5000}, None, "larger than --max-body-bytes")
refused(404, None, None, "no such endpoint: GET /v1/nothing", "/v1/nothing", "GET")
for method, path, allowed in [("GET", "/v1/completions", "POST"), ("PUT", "/v1/completions", "POST"), ("DELETE", "/v1/completions", "POST"),
                              ("POST", "/v1/models", "GET")]:
    status, headers, data = request(method, path, b"{}")
    assert status == 405 and headers["Allow"] == allowed and f"{method} {path} is not allowed".encode() in data, (method, path, status, data)
# Defaults: 16 tokens (as OpenAI), and n, echo, logprobs at their defaults are fine.
answer = complete({"prompt": "$prompt", "temperature": 0, "n": 1, "echo": False, "logprobs": None, "stop": None})
assert answer["usage"]["completion_tokens"] <= 16 and answer["choices"][0]["text"] == generated(30)["text"][:len(answer["choices"][0]["text"])], answer
status, _, data = request("GET", "/v1/models")
models = json.loads(data)
assert status == 200 and models["object"] == "list" and [m["id"] for m in models["data"]] == ["gpt2"] and models["data"][0]["object"] == "model", models
status, _, data = request("GET", "/healthz")
assert status == 200 and json.loads(data) == {"status": "ok"}, data
PY
# A streaming client that leaves after its first piece cancels its completion: it ends as cancelled, before its 60
# tokens. How many it makes first depends on how soon the server sees the socket close (on the H100, with 16 tests
# beside it, 50 or more), so no smaller count is asserted.
check "a client that leaves" <<PY
exec(open("$work/client.py").read())
import re, socket, time
def metric(name):
    return int(re.search(rf"^{re.escape(name)} (\d+)$", request("GET", "/metrics")[2].decode(), re.M).group(1))
before = metric("glnet_generated_tokens_total")
client = socket.create_connection((address.hostname, address.port))
body = json.dumps({"prompt": "$prompt", "max_tokens": 60, "temperature": 0, "stream": True}).encode()
client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
received = b""
while b"data: " not in received:
    chunk = client.recv(4096)
    assert chunk, received
    received += chunk
client.close()
for _ in range(600):
    if metric('glnet_completions_total{outcome="cancelled"}') == 1: break
    time.sleep(0.1)
assert metric('glnet_completions_total{outcome="cancelled"}') == 1 and metric("glnet_running_completions") == 0
assert metric("glnet_generated_tokens_total") - before < 60, metric("glnet_generated_tokens_total") - before
assert complete({"prompt": "$prompt", "max_tokens": 12, "temperature": 0})["choices"][0]["text"] == generated(12)["text"]
PY
curl -s "$url/metrics" >"$work/metrics.txt"
for metric in 'glnet_requests_total{path="/v1/completions",code="400"} 31' 'glnet_requests_total{path="/v1/completions",code="413"} 1' \
  'glnet_requests_total{path="/v1/completions",code="405"} 3' 'glnet_requests_total{path="/v1/models",code="405"} 1' \
  'glnet_completions_total{outcome="refused"} 0' 'glnet_completions_total{outcome="failed"} 0' 'glnet_queue_requests 0'; do
  grep -qxF "$metric" "$work/metrics.txt" || fail "/metrics lacks '$metric': $(grep -F "${metric%% *}" "$work/metrics.txt")"
done
grep -qE '^glnet_generated_tokens_total [1-9][0-9]*$' "$work/metrics.txt" && grep -qE '^glnet_completions_total\{outcome="completed"\} [1-9]' "$work/metrics.txt" \
  || fail "/metrics counts no tokens or completions: $(grep -E 'generated|completed' "$work/metrics.txt")"
# SIGTERM while a completion runs: it is answered in full, then the server exits 0.
curl -s -o "$work/last.json" "$url/v1/completions" -d "{\"prompt\": \"$prompt\", \"max_tokens\": 30, \"temperature\": 0}" &
client=$!
for _ in $(seq 600); do curl -s "$url/metrics" | grep -qxF 'glnet_running_completions 1' && break; sleep 0.05; done
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM with a completion running: exit status"
wait "$client"
"$python" -c "
import json, sys
assert json.load(open(sys.argv[1]))['choices'][0]['text'] == json.load(open(sys.argv[2]))['text']
" "$work/last.json" "$work/gpt2-30.json" || fail "the completion running at SIGTERM was not answered in full: $(cat "$work/last.json")"

# --- Start-up errors: one line, non-zero exit; options of the other mode refused.
expect 0 "POST /v1/completions  OpenAI's text completions" -- "$apps/glnet_serve" --help
expect 2 "^glnet_serve: error: --max-batch must be an integer from 1 to 16" -- "$apps/glnet_serve" --model "$models/gpt2" --max-batch 17
expect 2 "^glnet_serve: error: --no-batching applies to classifier models" -- "$apps/glnet_serve" --model "$models/gpt2" --no-batching
expect 2 "^glnet_serve: error: --max-context applies to language model folders; .*m.safetensors is a file" -- "$apps/glnet_serve" --model "$work/m.safetensors" --max-context 8
expect 2 "^glnet_serve: error: --queue-limit must be an integer" -- "$apps/glnet_serve" --model "$models/gpt2" --queue-limit 0
expect 1 "^glnet_serve: error: .*config.json" -- "$apps/glnet_serve" --model "$work" --port 0
finish serve_completions
