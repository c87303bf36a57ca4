"""KV-event and affinity probe of a deployed PyMotor job (run inside a prefill/union container:
`docker exec -i <container> python3 - '<json args>' < this file`; the PyMotor image has pyzmq and msgpack).

Records only what a real deployment exposes, the judging is done by the collection (operations/affinity.py):
- every KV-event publisher (ZMQ SUB, the 3-frame [topic, seq, msgpack] messages vLLM sends): counts and shapes;
- per shared prefix (a fresh nonce, then a long common text): the prompt's tokens from the prefill engine's
  POST /tokenize (vLLM's route; else the model's tokenizer in the image), the KV conductor's POST /query before the
  first request and after each request sent to the coordinator, and after each request the prefill engines'
  prefix-cache counters (the vllm:prefix_cache_* lines of their /metrics);
- a few unrelated requests.
Prints one JSON object: endpoints, shapes, seconds, tokens {source, detail}, metrics_before, prefixes [{name,
prompt_tokens, steps}], unrelated, error. Answers are {status, json | lines, error}; status -1: no answer.
https with the CA / client cert / key of the args' tls entries (paths inside this container, as the tls_config
sections name them). The coordinator's requests carry the API key the verify task puts in front of this file on
stdin (``API_KEY = "..."``: never in an argument nor the environment, which ps and -vvv show) with the target's
api_key header name and prefix.
Read-only for the cluster apart from the probe requests. Python 3.6+, stdlib + zmq + msgpack.
"""

import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

FILLER = ("Ascend 800I hosts run PyMotor with prefill and decode instances; the KV conductor indexes the "
          "blocks every prefill engine stores so that the coordinator can route a prompt to the engine that "
          "already holds its prefix. ")
METRIC_PREFIXES = ("vllm:prefix_cache_", "vllm:gpu_prefix_cache_")
CONTEXTS = {}


def context(tls):
    """An SSL context for one tls entry {ca_file, cert_file, key_file} (None: plain http)."""
    if not tls:
        return None
    key = json.dumps(tls, sort_keys=True)
    if key not in CONTEXTS:
        ctx = ssl.create_default_context(cafile=tls.get("ca_file") or None)
        ctx.check_hostname = bool(tls.get("check_hostname", True))
        if tls.get("cert_file") and tls.get("key_file"):
            password = ""  # an encrypted key's password: passwd_file's stripped text, as upstream reads it
            if tls.get("passwd_file") and os.path.exists(tls["passwd_file"]):
                with open(tls["passwd_file"]) as handle:
                    password = handle.read().strip()
            ctx.load_cert_chain(tls["cert_file"], tls["key_file"], password=lambda: password)
        CONTEXTS[key] = ctx
    return CONTEXTS[key]


def http(method, target, body=None, timeout=30, raw=False):
    """target: {url, tls}. Returns {status, json} (or {status, text} with raw), status -1 and error on no answer."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    api_key = globals().get("API_KEY") if target.get("api_key") else None
    if api_key:
        headers[target["api_key"]["header_name"]] = target["api_key"]["key_prefix"] + api_key
    req = urllib.request.Request(target["url"], data=data, method=method, headers=headers)
    try:
        ctx = context(target.get("tls"))
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            text = resp.read().decode("utf-8", "replace")
            if raw:
                return {"status": resp.status, "text": text}
            return {"status": resp.status, "json": json.loads(text) if text else None}
    except urllib.error.HTTPError as err:
        return {"status": err.code, "error": err.read().decode("utf-8", "replace")[:300]}
    except Exception as err:  # noqa: BLE001 (refused, timeout, TLS: report, not crash)
        return {"status": -1, "error": str(err)[:300]}


def shape_of(batch):
    if isinstance(batch, dict):
        return "map"
    if not isinstance(batch, (list, tuple)) or len(batch) < 2 or not isinstance(batch[1], (list, tuple)):
        return "unknown"
    if not batch[1]:
        return "empty"
    first = batch[1][0]
    if isinstance(first, dict):
        return "map"
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], (str, bytes)):
        tag = first[0].decode() if isinstance(first[0], bytes) else first[0]
        return "legacy" if tag == "BlockStored" and len(first) < 7 else "array"
    return "unknown"


def count_stored(batch):
    events = batch.get("events", []) if isinstance(batch, dict) else (batch[1] if len(batch) > 1 else [])
    stored = 0
    for event in events or []:
        if isinstance(event, dict):
            tag = event.get("type") or event.get("tag")
        elif isinstance(event, (list, tuple)) and event:
            tag = event[0]
        else:
            tag = None
        if isinstance(tag, bytes):
            tag = tag.decode()
        if tag == "BlockStored":
            stored += 1
    return stored


class Listener(threading.Thread):
    def __init__(self, zmq, msgpack, endpoints):
        super().__init__(daemon=True)
        self.zmq, self.msgpack = zmq, msgpack
        self.ctx = zmq.Context()
        self.stats = {}
        self.sockets = {}
        self.stop = threading.Event()
        for endpoint in endpoints:
            sock = self.ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            self.sockets[sock] = endpoint
            self.stats[endpoint] = {"messages": 0, "batches": 0, "block_stored": 0, "decode_errors": 0, "shapes": []}

    def run(self):
        poller = self.zmq.Poller()
        for sock in self.sockets:
            poller.register(sock, self.zmq.POLLIN)
        while not self.stop.is_set():
            for sock, _event in poller.poll(100):
                frames = sock.recv_multipart()
                stat = self.stats[self.sockets[sock]]
                stat["messages"] += 1
                try:
                    if len(frames) != 3 or len(frames[1]) != 8:
                        raise ValueError("not a [topic, seq, payload] message")
                    batch = self.msgpack.unpackb(frames[2], raw=False, strict_map_key=False)
                    stat["batches"] += 1
                    shape = shape_of(batch)
                    if shape not in stat["shapes"]:
                        stat["shapes"].append(shape)
                    stat["block_stored"] += count_stored(batch)
                except Exception:  # noqa: BLE001
                    stat["decode_errors"] += 1
        for sock in self.sockets:
            sock.close(0)
        self.ctx.term()


class Tokens:
    """Token ids of a chat as the engines see them: the prefill engine's /tokenize, else the model's tokenizer."""

    def __init__(self, args):
        self.args = args
        self.source, self.detail, self.local = None, "", None

    def encode(self, messages):
        target = self.args.get("tokenize")
        if target and self.source in (None, "tokenize"):
            answer = http("POST", target, {"model": self.args["model"], "messages": messages,
                                           "add_generation_prompt": True}, timeout=10)
            tokens = (answer.get("json") or {}).get("tokens") if answer["status"] == 200 else None
            if isinstance(tokens, list):
                self.source = "tokenize"
                return [int(t) for t in tokens]
            self.detail = "%s answered %s %s" % (target["url"], answer["status"], answer.get("error", ""))
        return self._local(messages)

    def _local(self, messages):
        if self.local is None:
            try:
                from transformers import AutoTokenizer  # the real PyMotor / vLLM image

                self.local = AutoTokenizer.from_pretrained(self.args.get("model_path") or "", trust_remote_code=True)
            except Exception as err:  # noqa: BLE001
                self.detail = (self.detail + "; " if self.detail else "") + "no tokenizer in the image: %s" % err
                self.local = False
        if not self.local:
            return None
        ids = self.local.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        self.source = "transformers"
        return [int(i) for i in (ids["input_ids"] if isinstance(ids, dict) else ids)]


def scrape(engines, working):
    """{engine: {status, lines, error}}: the vllm:prefix_cache_* lines of each engine's first /metrics that has them."""
    out = {}
    for name, candidates in engines.items():
        order = [working[name]] if name in working else candidates
        answer = {"status": -1, "error": "no metrics URL"}
        for target in order:
            answer = http("GET", target, timeout=5, raw=True)
            if answer["status"] == 200:
                lines = [ln for ln in answer.pop("text").splitlines() if ln.startswith(METRIC_PREFIXES)]
                answer["lines"] = lines
                if lines:
                    working[name] = target
                    break
            else:
                answer.pop("text", None)
        out[name] = answer
    return out


def main():
    args = json.loads(sys.argv[1])
    out = {"endpoints": {}, "shapes": [], "prefixes": [], "unrelated": [], "metrics_before": {},
           "tokens": {"source": None, "detail": ""}, "error": None, "seconds": args.get("seconds", 5)}
    try:
        import msgpack
        import zmq
    except ImportError as err:
        out["error"] = "pyzmq/msgpack missing in the container: %s" % err
        print(json.dumps(out))
        return
    start = time.monotonic()
    listener = Listener(zmq, msgpack, args.get("endpoints", []))
    listener.start()
    time.sleep(float(args.get("settle", 1.0)))  # ZMQ slow joiner: let SUB connections complete

    tokens = Tokens(args)
    chat_target = args["coordinator"]
    query = args.get("conductor")
    engines = args.get("engines") or {}
    working = {}
    wait = float(args.get("index_wait", 0.5))

    def chat(system, user):
        body = {"model": args["model"], "max_tokens": int(args.get("max_tokens", 4)),
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        answer = http("POST", chat_target, body, timeout=float(args.get("timeout", 60)))
        return {"status": answer["status"], "error": answer.get("error", "")}

    def conductor_query(ids):
        if not query:
            return {"status": -1, "error": "no KV conductor in the plan"}
        body = {"model": args["model"], "block_size": int(args["block_size"]), "token_ids": ids}
        return http("POST", query, body, timeout=5)

    out["metrics_before"] = scrape(engines, working)
    for p in range(int(args.get("prefixes", 2))):
        nonce = uuid.uuid4().hex
        text = "Verification probe %s, prefix %d. " % (nonce, p) + FILLER * max(
            1, int(args.get("prefix_chars", 1200)) // len(FILLER))
        messages = [{"role": "system", "content": text}, {"role": "user", "content": "Question 0: what is stored?"}]
        entry = {"name": "prefix-%d" % p, "prompt_tokens": None, "steps": []}
        out["prefixes"].append(entry)
        ids = tokens.encode(messages)
        if ids is None:
            entry["error"] = "prompt tokens unavailable: %s" % tokens.detail
            continue
        entry["prompt_tokens"] = len(ids)
        entry["steps"].append({"query": conductor_query(ids)})
        for i in range(int(args.get("shared", 4))):
            step = chat(text, "Question %d: what is stored?" % i)
            time.sleep(wait)  # events travel engine -> conductor, counters are updated
            step["query"] = conductor_query(ids)
            step["metrics"] = scrape(engines, working)
            entry["steps"].append(step)
    out["tokens"] = {"source": tokens.source, "detail": tokens.detail}
    for i in range(int(args.get("unrelated", 2))):
        out["unrelated"].append(chat("Unrelated probe %s number %d." % (uuid.uuid4().hex, i), "Say hello."))

    remaining = float(args.get("seconds", 5)) - (time.monotonic() - start)
    if remaining > 0:
        time.sleep(remaining)
    listener.stop.set()
    listener.join(5)
    out["endpoints"] = listener.stats
    out["shapes"] = sorted({s for stat in listener.stats.values() for s in stat["shapes"]})
    out["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
