"""bench/serve_throughput.py APPS FOLDER PROMPT_FILE CLIENTS [TOKENS]: decode throughput of glnet_serve's continuous
batching. Starts APPS/glnet_serve --model FOLDER --max-batch CLIENTS, sends CLIENTS streamed greedy completions of TOKENS
tokens (default 128) of the prompt at once, and samples the server's /metrics every 20 ms meanwhile. Prints one JSON
line: the steady decode throughput (generated tokens per second while all CLIENTS completions were running, from the
metrics' counters), the tokens per decode step there (the batch the GPU ran), and the end-to-end throughput (all
tokens over the wall time, prompts included). Random-weight models' text may come in few pieces, so pieces are not
counted: the server's counters are."""
import http.client, json, re, subprocess, sys, tempfile, threading, time

apps, folder, prompt_file, clients = sys.argv[1:5]
clients = int(clients)
tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 128
prompt = open(prompt_file).read()

log = tempfile.TemporaryFile("w+")
server = subprocess.Popen([f"{apps}/glnet_serve", "--model", folder, "--port", "0", "--max-batch", str(clients), "--max-context", "1024",
                           "--queue-limit", "1000"], stdout=subprocess.PIPE, stderr=log, text=True)


def server_log():
    log.seek(0)
    return log.read()[-400:]


try:
    port = None
    for line in server.stdout:
        found = re.search(r"listening on http://[^:]+:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    if port is None:
        raise SystemExit("glnet_serve did not start: " + server_log())

    def post(body):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read().decode()
        if response.status != 200 or '"error"' in data:
            raise RuntimeError(f"glnet_serve answered {response.status}: {data[:300]}")
        return data

    def metrics():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        return {name: int(re.search(rf"^{name} (\d+)$", text, re.M).group(1))
                for name in ("glnet_generated_tokens_total", "glnet_decode_steps_total", "glnet_running_completions")}

    failures = []

    def run(body):
        try:
            post(body)
        except Exception as failure:  # reported after the threads join
            failures.append(f"{type(failure).__name__}: {failure}")

    def together(count, body):
        threads = [threading.Thread(target=run, args=(body,)) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    # Warm-up: the programs of the batch sizes that clients joining one by one pass through are built before timing.
    for count in sorted({1, clients // 4, clients // 2, clients} - {0}):
        together(count, {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    samples = []
    done = threading.Event()

    def monitor():
        while not done.is_set():
            samples.append((time.perf_counter(), metrics()))
            time.sleep(0.02)

    watcher = threading.Thread(target=monitor)
    before = metrics()
    started = time.perf_counter()
    watcher.start()
    together(clients, {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True})
    wall = time.perf_counter() - started
    done.set()
    watcher.join()
    after = metrics()
    if failures:
        raise SystemExit(f"{len(failures)} of {clients} clients failed, first: {failures[0]}; server: {server_log()}")
    generated = after["glnet_generated_tokens_total"] - before["glnet_generated_tokens_total"]
    steps = after["glnet_decode_steps_total"] - before["glnet_decode_steps_total"]
    full = [(t, m) for t, m in samples if m["glnet_running_completions"] == clients]
    steady = None
    if len(full) >= 2 and full[-1][0] > full[0][0]:
        (t0, m0), (t1, m1) = full[0], full[-1]
        made = m1["glnet_generated_tokens_total"] - m0["glnet_generated_tokens_total"]
        stepped = m1["glnet_decode_steps_total"] - m0["glnet_decode_steps_total"]
        steady = {"tokens_per_second": round(made / (t1 - t0), 1), "tokens_per_step": round(made / max(stepped, 1), 2),
                  "ms_per_step": round(1e3 * (t1 - t0) / max(stepped, 1), 3), "seconds": round(t1 - t0, 3)}
    print(json.dumps({"clients": clients, "tokens_per_client": tokens, "generated": generated, "decode_steps": steps, "steady": steady,
                      "end_to_end_tokens_per_second": round(generated / wall, 1), "wall_seconds": round(wall, 3)}))
finally:
    server.terminate()
    server.wait(timeout=60)
