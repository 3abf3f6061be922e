"""bench/serve_throughput.py APPS FOLDER PROMPT_FILE CLIENTS [TOKENS]: decode throughput of glnet_serve's continuous
batching. Starts APPS/glnet_serve --model FOLDER --max-batch CLIENTS, sends CLIENTS streamed greedy completions of TOKENS
tokens (default 128) of the prompt at once, and times each streamed chunk as it arrives. Prints one JSON line: the
steady decode throughput (tokens streamed by all clients while every one of them was decoding, over that window),
end-to-end throughput (all tokens over the wall time, prompts included), and the server's decode steps (tokens per
step is the batch the GPU ran)."""
import http.client, json, os, re, subprocess, sys, threading, time

apps, folder, prompt_file, clients = sys.argv[1:5]
clients = int(clients)
tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 128
prompt = open(prompt_file).read()

server = subprocess.Popen([f"{apps}/glnet_serve", "--model", folder, "--port", "0", "--max-batch", str(clients), "--max-context", "1024",
                           "--queue-limit", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    port = None
    for line in server.stdout:
        found = re.search(r"listening on http://[^:]+:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    if port is None:
        raise SystemExit("glnet_serve did not start: " + server.stderr.read()[-500:])

    def post(body):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise SystemExit(f"glnet_serve answered {response.status}: {response.read().decode()[:300]}")
        return response

    def metric(name):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        return int(re.search(rf"^{name} (\d+)$", text, re.M).group(1))

    # Warm-up: the programs of the batch sizes that clients joining one by one pass through are built before timing.
    def warm():
        post({"prompt": prompt, "max_tokens": 8, "temperature": 0}).read()
    for count in sorted({1, clients // 4, clients // 2, clients} - {0}):
        warmers = [threading.Thread(target=warm) for _ in range(count)]
        for thread in warmers:
            thread.start()
        for thread in warmers:
            thread.join()
    chunks = [[] for _ in range(clients)]

    failures = []

    def client(index):
        try:
            response = post({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True})
        except SystemExit as failure:
            failures.append(str(failure))
            return
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    chunks[index].append(time.perf_counter())

    steps_before = metric("glnet_decode_steps_total")
    generated_before = metric("glnet_generated_tokens_total")
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if failures:
        raise SystemExit(failures[0])
    steps = metric("glnet_decode_steps_total") - steps_before
    generated = metric("glnet_generated_tokens_total") - generated_before
    # Steady state: from the last client's first chunk to the first client's last chunk.
    begin = max(c[0] for c in chunks)
    end = min(c[-1] for c in chunks)
    inside = sum(sum(1 for t in c if begin < t <= end) for c in chunks)
    print(json.dumps({"clients": clients, "tokens_per_client": tokens, "generated": generated, "decode_steps": steps,
                      "tokens_per_step": round(generated / max(steps, 1), 2),
                      "steady_tokens_per_second": round(inside / (end - begin), 1) if end > begin else None,
                      "end_to_end_tokens_per_second": round(generated / wall, 1), "wall_seconds": round(wall, 3)}))
finally:
    server.terminate()
    server.wait(timeout=60)
